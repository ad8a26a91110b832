"""per_frame and sequence_rearrange: against numpy (the frames picked by indexing, the data untouched)
and against DALI itself (layouts, types, shapes and values; what each refuses)."""
import numpy as np
import pytest

from penstock.compat import dali as penstock_dali

SEQUENCES = [np.arange(24, dtype=np.float32).reshape(4, 3, 2), np.arange(12, dtype=np.float32).reshape(2, 3, 2)]


def run(library, operator, data, layout=None, per_sample=None, ndim=None, **arguments):
    """(layout, [arrays]) of ``operator`` applied to the batch ``data`` (declared ``ndim``-dimensional
    where given); ``per_sample``: name -> batch of a per-sample argument."""
    fn = library.fn

    @library.pipeline_def(batch_size=len(data), num_threads=1, device_id=None)
    def pipe():
        node = fn.external_source(source=[data], layout=layout, cycle=True, ndim=ndim)
        extra = {name: fn.external_source(source=[batch], cycle=True) for name, batch in (per_sample or {}).items()}
        return getattr(fn, operator)(node, **arguments, **extra)
    built = pipe()
    built.build()
    (out,) = built.run()
    return out.layout(), [np.array(out[index]) for index in range(len(data))]


@pytest.mark.parametrize("layout, replace, expected", [("FHW", False, "FHW"), ("HWC", True, "FWC"), ("XY", True, "FY")])
def test_per_frame_sets_the_layout_and_keeps_the_data(layout, replace, expected):
    data = [np.arange(np.prod(s)).reshape(s).astype(np.int16) for s in [(2, 3, 2)[:len(layout)], (4, 1, 5)[:len(layout)]]]
    got_layout, arrays = run(penstock_dali, "per_frame", data, layout, replace=replace)
    assert got_layout == expected
    for array, sample in zip(arrays, data):
        assert array.dtype == sample.dtype and np.array_equal(array, sample)


def test_per_frame_without_a_layout_names_the_frames_axis():
    data = [np.zeros((3, 2, 4), np.uint8)] * 2
    assert run(penstock_dali, "per_frame", data, ndim=3)[0] == "F**"


def test_per_frame_refuses_a_layout_without_frames_and_scalars():
    with pytest.raises(ValueError, match="per_frame: the input's layout 'HW' does not start with 'F'"):
        run(penstock_dali, "per_frame", [np.zeros((2, 2))], "HW")
    with pytest.raises(Exception, match="scalar"):
        run(penstock_dali, "per_frame", [np.float32(1.0)])


@pytest.mark.parametrize("order", [[1, 0, 0], [1], [0, 1, 1, 0, 1]])
def test_sequence_rearrange_picks_frames_as_numpy_indexing(order):
    layout, arrays = run(penstock_dali, "sequence_rearrange", SEQUENCES, "FHW", new_order=order)
    assert layout == "FHW"
    for array, sample in zip(arrays, SEQUENCES):
        assert array.dtype == np.float32 and np.array_equal(array, sample[order])


def test_sequence_rearrange_per_sample_orders():
    orders = [np.array([3, 0], np.int32), np.array([1, 1, 1], np.int32)]
    layout, arrays = run(penstock_dali, "sequence_rearrange", SEQUENCES, None, per_sample={"new_order": orders})
    assert layout == ""
    for array, sample, order in zip(arrays, SEQUENCES, orders):
        assert np.array_equal(array, sample[order])


@pytest.mark.parametrize("layout, data, order, message", [
    ("HWC", SEQUENCES, [0], "layout starting with 'F'"),
    ("FHW", SEQUENCES, [], "'new_order' is empty"),
    ("FHW", SEQUENCES, [-1], "'new_order'"),
    ("FHW", SEQUENCES, [2], r"new_order\[0\] is 2, outside \[0, 2\)"),
    ("F", [np.arange(3, dtype=np.uint8)] * 2, [1], "at least 1 dimension"),
])
def test_sequence_rearrange_refuses_what_dali_refuses(layout, data, order, message):
    with pytest.raises(Exception, match=message):
        run(penstock_dali, "sequence_rearrange", data, layout, new_order=order)


# ---- against DALI ------------------------------------------------------------------------------
def dali():
    return pytest.importorskip("nvidia.dali")


@pytest.mark.parametrize("operator, layout, data, arguments", [
    ("per_frame", "FHW", SEQUENCES, {}),
    ("per_frame", "HWC", SEQUENCES, {"replace": True}),
    ("per_frame", None, [np.arange(5, dtype=np.int64), np.arange(2, dtype=np.int64)], {"ndim": 1}),
    ("per_frame", None, SEQUENCES, {"ndim": 3}),
    ("sequence_rearrange", "FHW", SEQUENCES, {"new_order": [1, 0, 1]}),
    ("sequence_rearrange", None, [s.astype(np.uint16) for s in SEQUENCES], {"new_order": [0]}),
])
def test_same_as_dali(operator, layout, data, arguments):
    expected_layout, expected = run(dali(), operator, data, layout, **arguments)
    got_layout, got = run(penstock_dali, operator, data, layout, **arguments)
    assert got_layout == expected_layout
    for array, want in zip(got, expected):
        assert array.dtype == want.dtype and np.array_equal(array, want)


def test_per_sample_orders_as_dali():
    orders = [np.array([3, 0], np.int32), np.array([1, 1, 1], np.int32)]
    expected = run(dali(), "sequence_rearrange", SEQUENCES, "FHW", per_sample={"new_order": orders})
    got = run(penstock_dali, "sequence_rearrange", SEQUENCES, "FHW", per_sample={"new_order": orders})
    assert got[0] == expected[0]
    assert all(np.array_equal(a, b) for a, b in zip(got[1], expected[1]))


@pytest.mark.parametrize("layout, order", [("HWC", [0]), ("FHW", [2]), ("FHW", [])])
def test_refuses_what_dali_refuses(layout, order):
    with pytest.raises(Exception):
        run(dali(), "sequence_rearrange", SEQUENCES, layout, new_order=order)
    with pytest.raises(Exception):
        run(penstock_dali, "sequence_rearrange", SEQUENCES, layout, new_order=order)
