"""Argument and graph errors are raised where the user calls, with the operator's and the argument's
names; fn / ops / pipeline_def signatures come from the schema and Pipeline.__init__."""
from __future__ import annotations

import inspect
import re

import numpy as np
import pytest
from conftest import CUDA, run_operator

import penstock
from penstock import fn, ops, pipeline_def, registry, types
from penstock.pipeline import PIPELINE_ARGS, Pipeline


@pytest.fixture
def images():
    """An image DataNode inside a pipeline being defined."""
    pipe = Pipeline(batch_size=2, num_threads=1, device_id=None, seed=1)
    with pipe:
        yield fn.external_source(source=lambda: [np.zeros((4, 4, 3), np.uint8)] * 2, layout="HWC")


def raises(error_type, *fragments):
    """pytest.raises whose message must contain every fragment (quoted literally)."""
    return pytest.raises(error_type, match="(?s)" + "".join(f"(?=.*{re.escape(f)})" for f in fragments))


# ---- argument values -----------------------------------------------------------------------------------
def test_unknown_argument_suggests_the_closest_name(images):
    with raises(TypeError, "resize", "unknown argument 'resize_shoter'", "did you mean 'resize_shorter'"):
        fn.resize(images, resize_shoter=256)


def test_unknown_argument_lists_what_the_operator_takes(images):
    with raises(TypeError, "flip", "'zzz'", "horizontal", "vertical"):
        fn.flip(images, zzz=1)


@pytest.mark.parametrize("call,operator,argument,expected", [
    (lambda x: fn.resize(x, resize_x="big"), "resize", "resize_x", "expected a number"),
    (lambda x: fn.resize(x, resize_x=10, antialias="yes"), "resize", "antialias", "expected a bool"),
    (lambda x: fn.transpose(x, perm=(2, 0.5, 1)), "transpose", "perm", "expected an int"),
    (lambda x: fn.cast(x, dtype="not_a_type"), "cast", "dtype", "expected a data type"),
    (lambda x: fn.resize(x, resize_x=10, interp_type=17), "resize", "interp_type", "INTERP_LINEAR"),
    (lambda x: fn.crop(x, crop=(4, 4), out_of_bounds_policy=1), "crop", "out_of_bounds_policy", "expected a string"),
])
def test_wrong_type_is_a_type_error(images, call, operator, argument, expected):
    with raises(TypeError, f"{operator}: argument '{argument}'", expected):
        call(images)


@pytest.mark.parametrize("call,operator,argument,expected", [
    (lambda x: fn.random.coin_flip(probability=1.5), "random.coin_flip", "probability", "[0.0, 1.0]"),
    (lambda x: fn.resize(x, resize_shorter=-3), "resize", "resize_shorter", "[0.0, inf]"),
    (lambda x: fn.crop(x, crop=(4, 4), crop_pos_x=2.0), "crop", "crop_pos_x", "[0.0, 1.0]"),
    (lambda x: fn.random.uniform(range=(0.0, 1.0, 2.0)), "random.uniform", "range", "expected 2 values, got 3"),
    (lambda x: fn.decoders.image_random_crop(x, num_attempts=0), "decoders.image_random_crop", "num_attempts",
     "[1, inf]"),
])
def test_out_of_range_value_is_a_value_error(images, call, operator, argument, expected):
    with raises(ValueError, f"{operator}: argument '{argument}'", expected):
        call(images)


@pytest.mark.parametrize("call,operator,argument,suggestion", [
    (lambda x: fn.resize(x, resize_x=10, mode="strech"), "resize", "mode", "did you mean 'stretch'"),
    (lambda x: fn.resize(x, resize_x=10, interp_type="cubik"), "resize", "interp_type", "did you mean 'CUBIC'"),
    (lambda x: fn.decoders.image(x, output_type="rbg"), "decoders.image", "output_type", "did you mean 'RGB'"),
    (lambda x: fn.crop(x, crop=(4, 4), out_of_bounds_policy="padd"), "crop", "out_of_bounds_policy", "did you mean 'pad'"),
    (lambda x: fn.crop_mirror_normalize(x, dtype=types.INT32), "crop_mirror_normalize", "dtype", "FLOAT16"),
])
def test_bad_enum_value_lists_the_allowed_values(images, call, operator, argument, suggestion):
    with raises(ValueError, f"{operator}: argument '{argument}'", "expected one of", suggestion):
        call(images)


def test_enum_values_are_accepted_in_every_spelling(images):
    for spelling in (types.INTERP_CUBIC, "INTERP_CUBIC", "cubic", "CUBIC"):
        fn.resize(images, resize_x=10, interp_type=spelling)


def test_missing_required_argument(images):
    with raises(TypeError, "cast", "missing required argument 'dtype'"):
        fn.cast(images)


def test_argument_and_its_alias_given_together(images):
    with raises(TypeError, "crop_mirror_normalize", "argument 'dtype' given twice", "output_dtype"):
        fn.crop_mirror_normalize(images, dtype=types.FLOAT, output_dtype=types.FLOAT16)


def test_data_node_for_an_argument_that_is_not_per_sample(images):
    with raises(TypeError, "resize", "argument 'max_size'", "cannot be a per-sample input"):
        fn.resize(images, resize_x=10, max_size=fn.random.uniform(range=(10.0, 20.0)))


def test_per_sample_argument_with_a_bad_value_fails_naming_the_argument():
    def flip_by_uniform(node):
        return fn.flip(node, horizontal=fn.random.uniform(range=(2.0, 3.0)))

    with raises(penstock.PipelineError, "flip", "per-sample argument 'horizontal'"):
        run_operator(flip_by_uniform, [np.zeros((4, 4, 3), np.uint8)])


# ---- inputs, devices and the graph ----------------------------------------------------------------------------
def test_wrong_number_of_inputs(images):
    with raises(TypeError, "resize", "expected 1 input(s), got 2"):
        fn.resize(images, images, resize_x=10)
    with raises(TypeError, "resize", "expected 1 input(s), got 0"):
        fn.resize(resize_x=10)
    with raises(TypeError, "decoders.image_slice", "expected 1 to 3 input(s), got 4"):
        fn.decoders.image_slice(images, images, images, images)
    with raises(TypeError, "random.uniform", "expected 0 to 1 input(s), got 2"):
        fn.random.uniform(images, images)


def test_input_that_is_not_a_data_node(images):
    with raises(TypeError, "resize", "input 0 must be a DataNode", "str"):  # numbers and arrays become constants
        fn.resize("images", resize_x=10)


def test_decoders_have_no_gpu_device(images):
    with raises(ValueError, "decoders.image", "device 'gpu'", "available devices: cpu"):
        fn.decoders.image(images, device="gpu")


@pytest.mark.skipif(CUDA, reason="checks the error given on a machine without a GPU")
@pytest.mark.parametrize("call,operator,device", [
    (lambda x: fn.decoders.image(x, device="mixed"), "decoders.image", "mixed"),
    (lambda x: fn.resize(x, resize_x=10, device="gpu"), "resize", "gpu"),
    (lambda x: fn.crop_mirror_normalize(x, device="gpu"), "crop_mirror_normalize", "gpu"),
])
def test_device_without_an_implementation(images, call, operator, device):
    with raises(ValueError, operator, f"device '{device}'", "not available here", "available devices: cpu"):
        call(images)


@pytest.mark.skipif(CUDA, reason="checks the error given on a machine without a GPU")
def test_moving_data_to_the_gpu_without_one(images):
    with raises(ValueError, "device 'mixed'", "GPU"):
        images.gpu()


def test_unknown_device(images):
    with raises(ValueError, "resize", "argument 'device'", "'cpu'"):
        fn.resize(images, resize_x=10, device="tpu")


def test_data_node_has_no_truth_value(images):
    with raises(TypeError, "no truth value", "per-sample argument"):
        if images:
            pass


def test_data_node_cannot_be_unpacked(images):
    with raises(TypeError, "DataNode", "not iterable"):
        first, second = fn.resize(images, resize_x=10)


# ---- the ops object API ----------------------------------------------------------------------------------
def test_ops_validates_where_the_object_is_made():
    with raises(TypeError, "resize", "did you mean 'resize_shorter'"):
        ops.Resize(resize_shoter=256)
    with raises(ValueError, "resize", "argument 'mode'"):
        ops.Resize(mode="strech")


def test_ops_rejects_an_argument_given_when_made_and_when_called(images):
    resize = ops.Resize(resize_x=10)
    with raises(TypeError, "resize", "argument 'resize_x'", "give it once"):
        resize(images, resize_x=20)


def test_ops_object_calls_like_fn():
    images = [np.full((6, 8, 3), 7, np.uint8), np.full((10, 4, 3), 9, np.uint8)]
    flip = ops.Flip(vertical=1)
    flipped = run_operator(lambda node: flip(node, horizontal=0), images)
    for image, output in zip(images, flipped):
        np.testing.assert_array_equal(output, image[::-1])


# ---- signatures -------------------------------------------------------------------------------------------------
def public_schemas():
    return [schema for schema in registry.schemas().values() if not schema.name.startswith("_")]


def lookup(root, dotted: str):
    for part in dotted.split("."):
        root = getattr(root, part)
    return root


@pytest.mark.parametrize("schema", public_schemas(), ids=lambda schema: schema.name)
def test_fn_and_ops_signatures_come_from_the_schema(schema):
    argument_names = [arg.name for arg in schema.unique_args()]
    function = lookup(fn, schema.name)
    parameters = inspect.signature(function).parameters
    keyword_only = [name for name, p in parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY]
    positional = [name for name, p in parameters.items() if p.kind is inspect.Parameter.POSITIONAL_ONLY]
    assert keyword_only == argument_names
    assert positional == list(schema.input_names[:schema.num_inputs[1]])
    for arg in schema.unique_args():
        if not arg.required:
            assert parameters[arg.name].default == arg.default
    cls = lookup(ops, schema.class_name)
    init_parameters = list(inspect.signature(cls.__init__).parameters)
    assert init_parameters == ["self", *argument_names]
    for name in argument_names:  # the docs name every argument
        assert name in function.__doc__ and name in cls.__doc__


def test_required_arguments_have_no_default_in_the_signature():
    assert inspect.signature(fn.cast).parameters["dtype"].default is inspect.Parameter.empty


def test_pipeline_def_signature_includes_the_pipeline_arguments():
    assert PIPELINE_ARGS == tuple(name for name in inspect.signature(Pipeline.__init__).parameters if name != "self")

    @pipeline_def(batch_size=4, seed=3)
    def my_pipeline(data_dir, crop_size=224):
        return fn.random.uniform()

    parameters = inspect.signature(my_pipeline).parameters
    assert list(parameters)[:2] == ["data_dir", "crop_size"]
    assert set(PIPELINE_ARGS) <= set(parameters)
    assert all(parameters[name].kind is inspect.Parameter.KEYWORD_ONLY for name in PIPELINE_ARGS)
    # the decorator's values become the defaults; the others are Pipeline.__init__'s
    init_defaults = {name: p.default for name, p in inspect.signature(Pipeline.__init__).parameters.items()}
    assert parameters["batch_size"].default == 4 and parameters["seed"].default == 3
    assert parameters["num_threads"].default == init_defaults["num_threads"]
    assert my_pipeline.__name__ == "my_pipeline"


def test_pipeline_def_rejects_an_unknown_pipeline_argument():
    misspelt = pipeline_def(batch_sise=4)(lambda: 1)  # as in DALI, checked when a pipeline is made
    with raises(TypeError, "pipeline_def", "'batch_sise'", "did you mean 'batch_size'"):
        misspelt()


def test_operator_reference_is_generated_from_the_schemas():
    import pathlib

    from penstock.api import reference_markdown
    committed = pathlib.Path(__file__).parents[2] / "docs" / "operators.md"
    assert committed.read_text() == reference_markdown(), "run: penstock docs > docs/operators.md"


def test_every_argument_accepted_and_ignored_is_listed_in_the_dali_guide():
    import pathlib

    from penstock.api import ignored_arguments_markdown
    guide = (pathlib.Path(__file__).parents[2] / "docs" / "dali.md").read_text()
    listed = guide.split("<!-- ignored arguments: start -->\n")[1].split("<!-- ignored arguments: end -->")[0]
    assert listed == ignored_arguments_markdown(), "run: penstock docs --ignored, into docs/dali.md"
