"""Operators read their validated arguments as typed attributes generated from the schema."""
import pytest

from penstock import registry
from penstock.contract import BuildContext
from penstock.schema import Arguments

import penstock.fn  # noqa: F401  (registers every operator)


def test_each_schema_generates_its_arguments_type():
    schema = registry.get_schema("crop_mirror_normalize")
    static, _ = schema.validate({"crop": (4, 4), "mean": [1.0]})
    assert type(static) is schema.arguments and isinstance(static, dict)
    assert static.crop == (4, 4) and static.mean == (1.0,) and static.device == "cpu"
    assert schema.arguments.__name__ == "CropMirrorNormalizeArguments"
    assert schema.arguments.__annotations__["crop"] == "tuple[float, ...]"
    assert schema.arguments.crop.__doc__ == schema.all_args["crop"].doc


def test_names_of_dict_methods_read_with_a_trailing_underscore():
    static, _ = registry.get_schema("lookup_table").validate({"keys": [1, 2], "values": [5.0, 6.0]})
    assert static.keys_ == (1, 2) and static.values_ == (5.0, 6.0)
    assert list(static.keys())[:2] == ["keys", "values"]  # still a dict


def test_replace_keeps_the_type_and_unknown_names_are_attribute_errors():
    static, _ = registry.get_schema("flip").validate({})
    changed = static.replace(horizontal=0, input_layout="HWC")
    assert type(changed) is type(static) and changed.horizontal == 0 and static.horizontal == 1
    assert changed.input_layout == "HWC"  # a value an operator adds at build
    with pytest.raises(AttributeError, match="no argument 'horizontall'"):
        static.horizontall


def test_an_implementation_gets_its_schemas_type_from_a_plain_dict():
    schema = registry.get_schema("flip")
    static, _ = schema.validate({})
    implementation = registry.implementation("flip", "cpu")(dict(static), BuildContext(batch_size=1, num_threads=1, device_id=None, seed=0))
    assert type(implementation.args) is schema.arguments and implementation.args.vertical == 0
    assert isinstance(Arguments({"a": 1}), dict) and Arguments({"a": 1}).a == 1
