"""The corpus harness catches what it claims to: wrong types, values, side effects, opcodes."""

import collections

import pytest
import torch
from corpus.harness import (
    Case,
    Outcome,
    R,
    assert_same,
    assert_same_outcome,
    case,
    check_opcodes,
    fresh,
    make_args,
    opnames,
)

Pair = collections.namedtuple("Pair", "a b")


class Box:
    def __init__(self, v):
        self.v = v


def with_nested_function(x):
    def inner():
        yield x
    return list(inner())


@pytest.mark.parametrize(("eager", "compiled"), [
    ([1, 2], (1, 2)),
    (1, True),
    (1.0, 1),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
    (torch.ones(2), torch.ones(2, dtype=torch.float64)),
    (torch.ones(2), torch.zeros(2)),
    (torch.ones(2, requires_grad=True), torch.ones(2)),
    (Pair(1, 2), (1, 2)),
    (Box(1), Box(2)),
    ([torch.ones(1), {"k": [1]}], [torch.ones(1), {"k": [2]}]),
])
def test_assert_same_rejects_differences(eager, compiled):
    with pytest.raises(AssertionError):
        assert_same(eager, compiled)


def test_assert_same_accepts_equal_structures():
    value = [torch.ones(2), {"k": (1, "s", None)}, Pair(torch.zeros(1), 2.5), Box(3), float("nan")]
    assert_same(value, [torch.ones(2), {"k": (1, "s", None)}, Pair(torch.zeros(1), 2.5), Box(3),
                        float("nan")])


def test_outcomes_compare_exceptions_and_arguments():
    raised = Outcome(error=ValueError("a"))
    with pytest.raises(AssertionError):
        assert_same_outcome(raised, Outcome(error=ValueError("b")))
    with pytest.raises(AssertionError):
        assert_same_outcome(raised, Outcome(result=1))
    with pytest.raises(AssertionError):
        assert_same_outcome(Outcome(result=1, args=(([1],), {})),
                            Outcome(result=1, args=(([1, 2],), {})))


def test_fresh_arguments_are_new_and_seeded():
    c = case(with_nested_function, R(3), [R(2)], Pair(R(1), 2), k=R(2, dtype=torch.int64))
    first, again, other = make_args(c, 0), make_args(c, 0), make_args(c, 1)
    assert first[0][0] is not again[0][0]
    torch.testing.assert_close(first[0][0], again[0][0])
    assert not torch.equal(first[0][0], other[0][0])
    assert type(first[0][2]) is Pair and isinstance(first[0][2].a, torch.Tensor)
    assert first[1]["k"].dtype == torch.int64
    template = [Box(1)]
    assert fresh(template)[0] is not template[0]


def test_opcodes_are_checked_in_nested_code():
    assert "YIELD_VALUE" in opnames(with_nested_function.__code__)
    check_opcodes(Case("ok", with_nested_function, lambda: ((), {}), opcodes=("YIELD_VALUE",)))
    with pytest.raises(AssertionError, match="SETUP_ANNOTATIONS"):
        check_opcodes(Case("bad", with_nested_function, lambda: ((), {}),
                           opcodes=("SETUP_ANNOTATIONS",)))
