"""executor.branches on small lists: a conditional's branch is the samples its predicates chose,
kept with their positions in the whole batch (None: every sample), and merging puts both branches'
samples back in the batch's order."""
import numpy as np

from penstock.columns import ArrayColumn
from penstock.contract import MISSING
from penstock.executor import branches


def test_positions_of_a_column_are_those_not_on_the_other_branch():
    assert branches.positions_of(["a", "b", "c"]) is None  # every sample
    assert branches.positions_of(["a", MISSING, "c", MISSING]) == (0, 2)
    assert branches.positions_of([MISSING, MISSING]) == ()


def test_positions_of_a_column_held_as_an_array():
    column = ArrayColumn.full(np.arange(4, dtype=np.int32))
    assert branches.positions_of(column) is None
    column[1] = MISSING
    assert branches.positions_of(column) == (0, 2, 3)


def test_present_takes_the_samples_at_the_positions():
    column = ["a", "b", "c", "d"]
    assert branches.present(column, None) is column
    assert branches.present(column, (1, 3)) == ["b", "d"]


def test_take_gives_the_draws_of_the_samples_at_the_positions():
    draws = np.arange(10).reshape(5, 2)
    assert branches.take(None, (0, 1)) is None
    assert branches.take(draws, None) is draws
    np.testing.assert_array_equal(branches.take(draws, (4, 1)), [[8, 9], [2, 3]])
    assert branches.take(["p", "q", "r"], (2, 0)) == ["r", "p"]  # draws without slicing: one by one


def test_whole_stores_every_position_as_none():
    assert branches.whole((0, 1, 2), 3) is None
    assert branches.whole((0, 2), 3) == (0, 2)
    assert branches.whole(None, 3) is None


def test_split_routes_each_sample_by_its_predicate():
    assert branches.split(["a", "b", "c", "d"], [True, False, False, True], None, 4) == \
        (["a", "d"], (0, 3), ["b", "c"], (1, 2))
    # all on one side: that side holds the whole batch (None), the other nothing
    assert branches.split(["a", "b"], [True, True], None, 2) == (["a", "b"], None, [], ())


def test_split_of_a_branch_keeps_the_positions_in_the_whole_batch():
    # the samples at positions 1, 2 and 4 of a batch of 5, split again
    assert branches.split(["b", "c", "e"], [False, True, True], (1, 2, 4), 5) == (["c", "e"], (2, 4), ["b"], (1,))


def test_merge_undoes_split():
    samples, predicates = list("abcdef"), [True, False, True, True, False, False]
    true_samples, true_positions, false_samples, _ = branches.split(samples, predicates, None, 6)
    assert branches.merge(true_samples, true_positions, false_samples, None, 6) == samples
    # within a branch (positions 0, 2, 5 of 6): the merged samples come in that branch's order
    inner_true, inner_positions, inner_false, _ = branches.split(["a", "c", "f"], [False, True, False], (0, 2, 5), 6)
    assert branches.merge(inner_true, inner_positions, inner_false, (0, 2, 5), 6) == ["a", "c", "f"]
    assert branches.merge(["x", "y"], None, [], None, 2) == ["x", "y"]  # every sample took the true branch
