"""The tier covers what both libraries have: every operator of DALI's CPU registry that penstock
also registers has cases, and every argument of its DALI schema is given by some case, unless an
exemption below says why not. Operators DALI has and penstock lacks are listed, so that the list
fails when it goes stale."""
import types as python_types

import pytest

pytest.importorskip("nvidia.dali")

import nvidia.dali.fn as dali_fn  # noqa: E402
from nvidia.dali import backend  # noqa: E402

import penstock.compat.dali.fn as penstock_fn  # noqa: E402
from conformance.cases import CASES  # noqa: E402
from conformance.known_differences import KNOWN_DIFFERENCES  # noqa: E402
from conformance.test_api import PROGRAMS  # noqa: E402
from penstock import registry  # noqa: E402

# arguments every operator takes, that say nothing about what it computes
GLOBAL_ARGUMENTS = {"bytes_per_sample_hint", "preserve", "seed", "device", "name"}

# shared operators without cases yet: operator -> why
UNCOVERED_OPERATORS = {
    "dump_image": "writes its files into the working directory: tests/operators/image/test_file_io.py compares them with DALI's, "
                  "byte for byte, in a folder of its own",
}

# (operator, argument) -> why no case gives it
ARGUMENT_EXEMPTIONS = {}

# (operator, argument) -> why no case gives this per-sample argument (DALI's IsTensorArgument) one
# value a sample
PER_SAMPLE_EXEMPTIONS = {
    ("experimental.readers.video", "pad_mode"): "a reader takes no argument inputs (it makes the batch): DALI's schema "
                                                "marks pad_mode per-sample, its reader reads one value",
    ("bbox_rotate", "size"): "no per-sample case yet: the family's cases give it as a constant",
    ("brightness_contrast", "brightness_shift"): "no per-sample case yet: the family's cases give it as a constant",
    ("brightness_contrast", "contrast_center"): "no per-sample case yet: the family's cases give it as a constant",
    ("coord_flip", "center_z"): "no per-sample case yet: the family's cases give it as a constant",
    ("coord_flip", "flip_z"): "no per-sample case yet: the family's cases give it as a constant",
    ("crop", "crop_d"): "no per-sample case yet: the family's cases give it as a constant",
    ("crop", "crop_h"): "no per-sample case yet: the family's cases give it as a constant",
    ("crop_mirror_normalize", "crop_d"): "no per-sample case yet: the family's cases give it as a constant",
    ("crop_mirror_normalize", "crop_h"): "no per-sample case yet: the family's cases give it as a constant",
    ("decoders.image_crop", "crop_d"): "a volume's crop: decoded images are 2-D, DALI reads it only for volumes",
    ("decoders.image_crop", "crop_pos_z"): "a volume's crop: decoded images are 2-D, DALI reads it only for volumes",
    ("erase", "fill_value"): "no per-sample case yet: the family's cases give it as a constant",
    ("flip", "depthwise"): "no per-sample case yet: the family's cases give it as a constant",
    ("laplacian", "smoothing_size"): "no per-sample case yet: the family's cases give it as a constant",
    ("pad", "axes"): "no per-sample case yet: the family's cases give it as a constant",
    ("permute_batch", "indices"): "no per-sample case yet: the family's cases give it as a constant",
    ("random.beta", "shape"): "no per-sample case yet: the family's cases give it as a constant",
    ("random.choice", "shape"): "no per-sample case yet: the family's cases give it as a constant",
    ("random.coin_flip", "shape"): "no per-sample case yet: the family's cases give it as a constant",
    ("random.normal", "shape"): "no per-sample case yet: the family's cases give it as a constant",
    ("random_bbox_crop", "crop_shape"): "no per-sample case yet: the family's cases give it as a constant",
    ("random_bbox_crop", "input_shape"): "no per-sample case yet: the family's cases give it as a constant",
    ("random_resized_crop", "interp_type"): "no per-sample case yet: the family's cases give it as a constant",
    ("random_resized_crop", "mag_filter"): "no per-sample case yet: the family's cases give it as a constant",
    ("random_resized_crop", "min_filter"): "no per-sample case yet: the family's cases give it as a constant",
    ("reinterpret", "rel_shape"): "no per-sample case yet: the family's cases give it as a constant",
    ("reinterpret", "shape"): "no per-sample case yet: the family's cases give it as a constant",
    ("reinterpret", "src_dims"): "no per-sample case yet: the family's cases give it as a constant",
    ("reshape", "rel_shape"): "no per-sample case yet: the family's cases give it as a constant",
    ("reshape", "src_dims"): "no per-sample case yet: the family's cases give it as a constant",
    ("resize", "interp_type"): "no per-sample case yet: the family's cases give it as a constant",
    ("resize", "mag_filter"): "no per-sample case yet: the family's cases give it as a constant",
    ("resize", "min_filter"): "no per-sample case yet: the family's cases give it as a constant",
    ("resize", "roi_end"): "no per-sample case yet: the family's cases give it as a constant",
    ("resize_crop_mirror", "crop_d"): "no per-sample case yet: the family's cases give it as a constant",
    ("resize_crop_mirror", "crop_h"): "no per-sample case yet: the family's cases give it as a constant",
    ("resize_crop_mirror", "crop_pos_z"): "no per-sample case yet: the family's cases give it as a constant",
    ("resize_crop_mirror", "crop_w"): "no per-sample case yet: the family's cases give it as a constant",
    ("resize_crop_mirror", "interp_type"): "no per-sample case yet: the family's cases give it as a constant",
    ("resize_crop_mirror", "mag_filter"): "no per-sample case yet: the family's cases give it as a constant",
    ("resize_crop_mirror", "min_filter"): "no per-sample case yet: the family's cases give it as a constant",
    ("resize_crop_mirror", "resize_longer"): "no per-sample case yet: the family's cases give it as a constant",
    ("resize_crop_mirror", "resize_shorter"): "no per-sample case yet: the family's cases give it as a constant",
    ("resize_crop_mirror", "resize_x"): "no per-sample case yet: the family's cases give it as a constant",
    ("resize_crop_mirror", "resize_y"): "no per-sample case yet: the family's cases give it as a constant",
    ("resize_crop_mirror", "resize_z"): "no per-sample case yet: the family's cases give it as a constant",
    ("resize_crop_mirror", "roi_end"): "no per-sample case yet: the family's cases give it as a constant",
    ("resize_crop_mirror", "roi_start"): "no per-sample case yet: the family's cases give it as a constant",
    ("resize_crop_mirror", "size"): "no per-sample case yet: the family's cases give it as a constant",
    ("roi_random_crop", "roi_end"): "no per-sample case yet: the family's cases give it as a constant",
    ("tensor_resize", "interp_type"): "no per-sample case yet: the family's cases give it as a constant",
    ("tensor_resize", "mag_filter"): "no per-sample case yet: the family's cases give it as a constant",
    ("tensor_resize", "min_filter"): "no per-sample case yet: the family's cases give it as a constant",
    ("roi_random_crop", "roi_shape"): "no per-sample case yet: the family's cases give it as a constant",
    ("slice", "end"): "no per-sample case yet: the family's cases give it as a constant",
    ("slice", "rel_end"): "no per-sample case yet: the family's cases give it as a constant",
    ("slice", "rel_start"): "no per-sample case yet: the family's cases give it as a constant",
    ("squeeze", "axes"): "no per-sample case yet: the family's cases give it as a constant",
    ("transforms.crop", "from_end"): "no per-sample case yet: the family's cases give it as a constant",
    ("transforms.crop", "to_end"): "no per-sample case yet: the family's cases give it as a constant",
    ("transforms.shear", "center"): "no per-sample case yet: the family's cases give it as a constant",
}

# operators of DALI's CPU registry (by fn path) that penstock.compat.dali.fn lacks -> why
MISSING_OPERATORS = {
    "experimental.inputs.video": "video: penstock has no video decoder",
    "decoders.numpy": "not implemented",
    "experimental.readers.fits": "not implemented",
}


def dali_operators() -> dict[str, str]:
    """fn path -> DALI schema name, for every fn function of an operator with a CPU implementation."""
    registered = set(backend.RegisteredCPUOps())
    found = {}

    def walk(module, prefix, seen):
        for name in dir(module):
            value = getattr(module, name)
            if name.startswith("_") or name == "hidden":  # DALI's internal names of its operators
                continue
            if isinstance(value, python_types.ModuleType):
                if value.__name__.startswith(dali_fn.__name__) and value not in seen:
                    seen.add(value)
                    walk(value, f"{prefix}{name}.", seen)
            elif getattr(value, "_schema_name", None) in registered:
                found[prefix + name] = value._schema_name
    walk(dali_fn, "", {dali_fn})
    return found


def shared_operators() -> dict[str, str]:
    ours = registry.schemas()
    return {path: schema for path, schema in dali_operators().items() if path in ours}


def _penstock_has(path: str) -> bool:
    target = penstock_fn
    for part in path.split("."):
        target = getattr(target, part, None)
        if target is None:
            return False
    return True


def dali_arguments(schema_name: str) -> set[str]:
    schema = backend.GetSchema(schema_name)
    return {name for name in schema.GetArgumentNames()
            if name not in GLOBAL_ARGUMENTS and not schema.IsDeprecatedArg(name)}


def test_every_shared_operator_has_cases():
    covered = {case.op for case in CASES}
    shared = shared_operators()
    without = sorted(set(shared) - covered - set(UNCOVERED_OPERATORS))
    assert not without, f"shared operators with no case: {without}"
    stale = sorted(op for op in UNCOVERED_OPERATORS if op in covered or op not in shared)
    assert not stale, f"UNCOVERED_OPERATORS lists operators that have cases or are not shared: {stale}"


def test_every_argument_is_exercised():
    exercised = {}
    for case in CASES:
        exercised.setdefault(case.op, set()).update(case.exercised())
    missing, stale = [], []
    for path, schema in sorted(shared_operators().items()):
        if path not in exercised:
            continue
        arguments = dali_arguments(schema)
        missing += [f"{path}:{name}" for name in sorted(arguments - exercised[path])
                    if (path, name) not in ARGUMENT_EXEMPTIONS]
        stale += [f"{path}:{name}" for (op, name) in ARGUMENT_EXEMPTIONS
                  if op == path and (name in exercised[path] or name not in arguments)]
    assert not missing, f"arguments of DALI's schemas no case gives: {missing}"
    assert not stale, f"ARGUMENT_EXEMPTIONS lists arguments that cases give or DALI lacks: {stale}"
    unknown = sorted(op for op, _ in ARGUMENT_EXEMPTIONS if op not in shared_operators())
    assert not unknown, f"ARGUMENT_EXEMPTIONS names operators that are not shared: {unknown}"


def test_every_per_sample_argument_has_a_per_sample_case():
    per_sample = {}
    for case in CASES:
        per_sample.setdefault(case.op, set()).update(case.exercised_per_sample())
    missing, stale = [], []
    for path, schema_name in sorted(shared_operators().items()):
        if path not in per_sample:
            continue
        schema = backend.GetSchema(schema_name)
        arguments = {name for name in dali_arguments(schema_name) if schema.IsTensorArgument(name)}
        missing += [f"{path}:{name}" for name in sorted(arguments - per_sample[path])
                    if (path, name) not in PER_SAMPLE_EXEMPTIONS]
        stale += [f"{path}:{name}" for (op, name) in PER_SAMPLE_EXEMPTIONS
                  if op == path and (name in per_sample[path] or name not in arguments)]
    assert not missing, f"per-sample arguments of DALI's schemas no case gives per sample: {missing}"
    assert not stale, f"PER_SAMPLE_EXEMPTIONS lists arguments that cases give per sample or DALI takes " \
                      f"only as constants: {stale}"


def test_missing_operators_are_listed():
    lacking = {path for path in dali_operators() if not _penstock_has(path)}
    unlisted = sorted(lacking - set(MISSING_OPERATORS))
    assert not unlisted, f"operators DALI has and penstock lacks, not in MISSING_OPERATORS: {unlisted}"
    stale = sorted(set(MISSING_OPERATORS) - lacking)
    assert not stale, f"MISSING_OPERATORS lists operators penstock now has (or DALI lacks): {stale}"


def test_known_differences_name_cases():
    ids = {case.id for case in CASES} | {f"api[{name}]" for name in PROGRAMS}
    stale = sorted(set(KNOWN_DIFFERENCES) - ids)
    assert not stale, f"KNOWN_DIFFERENCES names no case: {stale}"
