"""NumPy code in the graph: arrays from tensors, NumPy functions, methods, operators and dtypes
traced through ``torch._numpy``; real ndarrays and NumPy scalars out.

Every case runs eagerly and under graphlift; results must equal eager's in value, type and dtype,
and graphlift's graph and break counts torch.compile's (recorded: tests/reference, each case
registered in ``CASES``), except where a comment says why not.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest
import torch
from reference import measure, recorded
from test_data_dependent import graphlift_counts, outcome, torch_compile_counts

import graphlift
from graphlift.testing import CompileCounter


def assert_same_numpy(eager, compiled, path: str = "result") -> None:
    """Equal values and types, ndarrays by dtype, shape and values; NumPy scalars by type."""
    assert type(eager) is type(compiled), \
        f"{path}: {type(compiled).__name__}, eager gives {type(eager).__name__}"
    if isinstance(eager, (np.ndarray, np.generic)):
        assert eager.dtype == compiled.dtype and np.shape(eager) == np.shape(compiled), path
        np.testing.assert_allclose(compiled, eager, rtol=1e-5, atol=1e-6, err_msg=path)
    elif isinstance(eager, torch.Tensor):
        torch.testing.assert_close(compiled, eager)
    elif isinstance(eager, (tuple, list)):
        assert len(eager) == len(compiled), path
        for i, (e, c) in enumerate(zip(eager, compiled)):
            assert_same_numpy(e, c, f"{path}[{i}]")
    else:
        assert eager == compiled, f"{path}: {compiled!r}, eager gives {eager!r}"


# key -> (fn, () -> calls, dynamo and graphlift settings); each one's torch.compile figures are
# registered below the functions.
CASES: dict[str, tuple[Callable, Callable[[], list[tuple]], dict]] = {}


def numpy_case(key: str, fn: Callable, make_calls: Callable[[], list[tuple]],
               **settings) -> None:
    CASES[key] = (fn, make_calls, settings)
    measure(f"numpy/{key}", lambda: torch_compile_counts(fn, make_calls(), **settings,
                                                         compare=assert_same_numpy))


def check(key: str, tc: tuple[int, int] | None = None) -> tuple[int, int]:
    """Eager and graphlift agree on every call of the case ``key``; graphlift's (graphs,
    breaks) equal torch.compile's, or ``tc`` where torch.compile differs on purpose (a comment
    says why); torch.compile agrees with eager unless ``tc`` is given."""
    fn, make_calls, settings = CASES[key]
    calls = make_calls()
    eager = [outcome(fn, args) for args in calls]
    graphs, breaks, got = graphlift_counts(fn, make_calls(), **settings)
    for expected, mine in zip(eager, got):
        assert_same_numpy(expected, mine)
    theirs = recorded(f"numpy/{key}")
    assert (theirs["graphs"], theirs["breaks"]) == (tc or (graphs, breaks)), theirs
    return graphs, breaks


def m23() -> torch.Tensor:
    return torch.arange(6.).reshape(2, 3)


def m23_shuffled() -> torch.Tensor:
    return torch.tensor([[3., 1., 2.], [6., 4., 5.]])


# -- the functions --------------------------------------------------------------------------
def ufuncs(x):
    a = x.numpy()
    return np.sin(a) * 2 + np.exp(-a)


def reduction_to_scalar(x):
    a = x.numpy()
    return a.sum(), np.mean(a), a.max(axis=0)


def round_trip(x):
    a = np.asarray(x)
    return torch.from_numpy(np.cos(a)) + x


def linalg(x):
    a = x.numpy()
    return np.linalg.norm(a), np.linalg.norm(a, axis=1)


def fft(x):
    return np.fft.fft(x.numpy())  # complex128 in NumPy from float32 input


def promotion(x):
    return np.ones(3) + x.numpy()  # float64 + float32: NumPy promotes to float64


def scalars_and_dtypes(x):
    a = x.numpy()
    b = np.float32(2.0) * a
    return b, b.dtype == np.float32, np.iinfo(np.int32).max, a.astype(np.float64)


def indexing(x):
    a = x.numpy()
    return a[0], a[0, 1], a[:, 1:], a[..., 0]


def metadata(x):
    a = x.numpy() + 1
    return a.shape, a.ndim, a.size, a.dtype, a.T


def comparisons(x):
    a = x.numpy()
    return np.where(a > 2, a, -a), (a == 1).any()


def same_array_twice(x):
    a = x.numpy() * 2
    return a, a


def view_of_input(x):
    return x.numpy()


def random_draw(x):
    return np.random.rand(3) + x.numpy()


# -- cases that match torch.compile ------------------------------------------------------------
ONE_GRAPH = [ufuncs, reduction_to_scalar, round_trip, linalg, promotion, indexing, comparisons]
for _fn in ONE_GRAPH:
    numpy_case(_fn.__name__, _fn, lambda: [(m23(),), (m23() - 3,)])


@pytest.mark.parametrize("fn", ONE_GRAPH, ids=[fn.__name__ for fn in ONE_GRAPH])
def test_numpy_code_is_one_graph_with_eager_results(fn):
    assert check(fn.__name__) == (1, 0)


def test_an_array_that_leaves_the_frame_is_a_real_ndarray_and_numpy_scalars_stay_scalars():
    counter = CompileCounter()
    compiled = graphlift.compile(reduction_to_scalar, backend=counter)
    total, mean, column_max = compiled(m23())
    assert type(total) is np.float32 and type(mean) is np.float32  # torch.compile: 0-d arrays
    assert type(column_max) is np.ndarray and column_max.dtype == np.float32
    # Nodes of the graph, not breaks: the float32 sum by NumPy itself (numpy_ordered), the max
    # through torch._numpy.
    assert "numpy_ordered" in counter.graphs[0].code and "numpy_max" in counter.graphs[0].code


def wavy() -> torch.Tensor:
    """float32 values whose sums torch and NumPy round differently (checked below)."""
    return (torch.arange(120.).reshape(3, 40) * 0.37 + 3).sin() * 7


def sums_in_numpy_order(x):
    a = x.numpy()
    total = np.sum(a)
    return (total, np.cumsum(a, axis=1), a.mean(axis=1), a @ a.T, np.einsum("ij,ij->i", a, a),
            x * float(total))


numpy_case("sums_in_numpy_order", sums_in_numpy_order, lambda: [(wavy(),), (wavy() * 3,)])


def test_wavy_sums_differ_between_torch_and_numpy():
    # What makes the next test able to fail: torch._numpy's sums of this input are torch's.
    a = wavy()
    assert np.sum(a.numpy()) != np.float32(torch._numpy.sum(torch._numpy.ndarray(a)).item())
    assert not np.array_equal(np.cumsum(a.numpy(), axis=1),
                              torch._numpy.cumsum(torch._numpy.ndarray(a), axis=1).tensor.numpy())


@pytest.mark.parametrize("backend", ["eager", "aot_eager"])
def test_floating_sums_are_numpys_bit_for_bit(backend):
    # torch.compile computes these with torch's sums (the float32 total differs from eager's in
    # the last bit); graphlift runs NumPy's own function as one node, so the graph stays whole.
    assert check("sums_in_numpy_order", tc=(3, 1)) == (3, 1)  # float(total): one break
    graphlift.reset()
    compiled = graphlift.compile(sums_in_numpy_order, backend=backend)
    for x in (wavy(), wavy() * 3):
        expected, got = sums_in_numpy_order(x), compiled(x)
        for e, c in zip(expected[:-1], got[:-1]):
            assert type(e) is type(c) and e.dtype == c.dtype
            np.testing.assert_array_equal(c, e)
        assert torch.equal(got[-1], expected[-1])


def integer_sum(x):
    return np.sum(x.numpy().astype(np.int64)), np.sum(x.numpy(), dtype=np.float64)


def test_only_floating_sums_leave_torch_numpy():
    counter = CompileCounter()
    compiled = graphlift.compile(integer_sum, backend=counter)
    got, expected = compiled(wavy()), integer_sum(wavy())
    assert got == expected and type(got[1]) is np.float64
    targets = [str(node.target) for node in counter.graphs[0].graph.nodes]
    # The integer sum through torch._numpy; dtype=float64 asks for float additions: NumPy's.
    assert targets.count("graphlift.numpy_ordered.default") == 1 and "numpy_sum" in targets


def average_and_weights(x):
    a = x.numpy()
    return np.average(a, axis=0, weights=a[:, 0] * 0 + 1, returned=True)


def test_a_numpy_call_with_two_results_stays_in_torch_numpy():
    # np.average(..., returned=True) gives (average, sum of weights): the NumPy-order operator
    # returns one array, so this call keeps torch._numpy's node (no break under fullgraph).
    compiled = graphlift.compile(average_and_weights, fullgraph=True)
    assert_same_numpy(average_and_weights(wavy()), compiled(wavy()))


def test_the_same_array_returned_twice_is_one_object():
    first, second = graphlift.compile(same_array_twice)(m23())
    assert first is second


def sine_of_array(a):
    return np.sin(a) + 1, a


numpy_case("sine_of_array", sine_of_array,
           lambda: [(np.arange(6.).reshape(2, 3),), (np.ones((2, 3)),)])


def test_an_ndarray_argument_is_a_graph_input_and_comes_back_as_itself():
    assert check("sine_of_array") == (1, 0)
    compiled = graphlift.compile(sine_of_array)
    array = np.ones(4, dtype=np.float32)
    assert compiled(array)[1] is array
    guards = graphlift.cache_entries(compiled)[0].guards
    assert "type(L['a']) is numpy.ndarray" in guards
    assert "torch.from_numpy(L['a']).dtype == torch.float32" in guards
    compiles = graphlift.stats(compiled).compiles
    assert_same_numpy(sine_of_array(np.ones(4, dtype=np.int64)),
                      compiled(np.ones(4, dtype=np.int64)))  # another dtype: a recompile
    assert graphlift.stats(compiled).compiles == compiles + 1


def test_an_array_of_an_input_shares_its_memory_as_in_eager():
    x = m23()
    a = graphlift.compile(view_of_input)(x)
    x[0, 0] = 42.0
    assert a[0, 0] == 42.0


numpy_case("ufuncs_trace_numpy_off", ufuncs, lambda: [(m23(),)], trace_numpy=False)


def test_trace_numpy_off_makes_numpy_calls_breaks():
    # torch.compile does not compile the resume functions after x.numpy() (no tensor arguments);
    # graphlift does, and breaks again in them at np.sin and at the operator on an ndarray.
    assert check("ufuncs_trace_numpy_off", tc=(0, 1)) == (0, 3)


def strides(x):
    a = x.numpy()
    return a.strides, a.T.strides, a[:, ::2].strides, a.itemsize


for _fn in (strides, scalars_and_dtypes, metadata):
    numpy_case(_fn.__name__, _fn, lambda: [(m23(),), (m23() + 1,)])


def test_ndarray_strides_are_constants_in_bytes():
    assert check("strides") == (1, 0)


@pytest.mark.parametrize("name", ["scalars_and_dtypes", "metadata"])
def test_ndarray_dtype_is_a_constant(name):
    # torch.compile 2.13 cannot trace ndarray.dtype: a break it cannot resume from (1, 1).
    assert check(name, tc=(1, 1)) == (1, 0)


# -- where graphlift stays eager on purpose -----------------------------------------------------
numpy_case("random_draw", random_draw, lambda: [(m23(),)])


def test_np_random_keeps_numpys_own_stream():
    """torch.compile draws from torch's random stream instead ((1, 0)): the numbers differ from
    eager's. graphlift breaks at the draw, so a seeded program gets eager's numbers."""
    compiled = graphlift.compile(random_draw)
    np.random.seed(0)
    expected = random_draw(m23())
    np.random.seed(0)
    np.testing.assert_array_equal(compiled(m23()), expected)
    theirs = recorded("numpy/random_draw")
    assert (theirs["graphs"], theirs["breaks"]) == (1, 0)
    graphs, breaks, _ = graphlift_counts(random_draw, [(m23(),)])
    assert (graphs, breaks) == (1, 1)  # the resume function adds the drawn array: one graph


numpy_case("fft", fft, lambda: [(m23(),)])


def test_np_fft_of_single_precision_runs_eagerly_with_numpys_dtype():
    # torch.compile traces it in one graph (1, 0) and returns complex128, where NumPy 2 gives
    # complex64: graphlift breaks at the call and gives eager's array.
    check("fft", tc=(1, 0))


def fft_of_double(a):
    spectrum = np.fft.fft(a)
    return spectrum, np.fft.ifft(spectrum), np.fft.irfft(np.fft.rfft(a)), np.fft.fftshift(a)


def fft_frequencies(a):
    return np.fft.fftfreq(a.shape[0], 0.5) * a  # float64 in NumPy, float32 in torch._numpy


numpy_case("fft_of_double", fft_of_double,
           lambda: [(np.arange(8.),), (np.cos(np.arange(8.)),)])
numpy_case("fft_of_integers", fft_of_double, lambda: [(np.arange(8),)])
numpy_case("fft_frequencies", fft_frequencies, lambda: [(np.arange(4.),)])


def test_np_fft_of_double_precision_is_one_graph():
    """Double precision (and integers) give NumPy's dtypes through torch._numpy; ifft's result
    is a conjugate view in torch, which comes back as a plain ndarray."""
    assert check("fft_of_double") == (1, 0)
    assert check("fft_of_integers") == (1, 0)


def test_np_fft_frequencies_run_eagerly():
    # torch.compile: one graph, float32 frequencies where NumPy gives float64.
    check("fft_frequencies", tc=(1, 0))


def float_limits(x):
    a = x.numpy()
    return np.finfo(a.dtype).eps * a, np.iinfo(np.int16).max, np.finfo(np.float64).tiny


numpy_case("float_limits", float_limits, lambda: [(m23(),)])


def test_iinfo_and_finfo_of_an_array_dtype_fold_to_numpy_scalars():
    # torch.compile cannot trace ndarray.dtype (a break it cannot resume from: (0, 1)).
    assert check("float_limits", tc=(0, 1)) == (1, 0)


def numpy_scalars_in_tensor_ops(x):
    eps = np.finfo(np.float32).eps
    return x * np.float64(2.0) + eps, torch.tensor(np.float64(1.5)), torch.full((2,), eps), eps


numpy_case("numpy_scalars_in_tensor_ops", numpy_scalars_in_tensor_ops, lambda: [(m23(),)])


def test_numpy_scalar_constants_in_tensor_operations():
    # A node's NumPy scalar argument is written as np.float64(2.0) in the graph's code.
    check("numpy_scalars_in_tensor_ops")


# -- writes into arrays ------------------------------------------------------------------------
def add_in_place(x):
    a = x.numpy()
    a += 1  # writes into x's memory
    return a


def multiply_a_view(x):
    a = x.numpy()
    row = a[1]
    row *= 2  # a view: writes into a, and so into x
    return a.sum()


def assign_item(x):
    a = x.numpy()
    a[0] = 3
    a[:, 1] = -1.5
    return a


def assign_masked(x):
    a = x.numpy()
    a[a > 2] = 0
    return a * 2


def ufunc_out(x):
    a = x.numpy()
    np.add(a, 1, out=a)
    return a


def sort_fill_put(x):
    a = x.numpy()
    a[0].sort()  # a row: sorted in x's memory
    a[1].fill(-1.0)
    a.put([0, 5], [10.0, 20.0])
    return a.sum()


def shift_right(x):
    a = x.numpy()
    a[1:] = a[:-1]  # overlapping: NumPy reads the operand as it was before the write
    a += a[::-1]
    np.add(a[:-1], a[1:], out=a[1:])
    return a


def argument_array_in_place(a):
    a += 1
    a[0] = 7.0
    return np.sin(a), a


def scalar_in_place(x):
    s = x.numpy().sum()
    t = s
    s += 1  # a NumPy scalar is immutable: a new one, t keeps its value
    return s, t


def int_array_plus_float(x):
    a = x.numpy()
    a += 1.5  # NumPy refuses the float64 -> int64 cast
    return a


WRITES: dict[str, tuple[Callable, Callable[[], tuple]]] = {}


def writes_case(fn: Callable, make_args: Callable[[], tuple]) -> None:
    WRITES[fn.__name__] = (fn, make_args)
    measure(f"numpy/writes/{fn.__name__}",
            lambda: torch_compile_counts(fn, [make_args()], compare=assert_same_numpy))


def check_writes(name: str, tc: tuple[int, int] | None = None) -> tuple[int, int]:
    """``check`` for functions that write into their arguments: fresh arguments per run, and the
    arguments after the call compared too (the write must reach the caller, as in eager)."""
    fn, make_args = WRITES[name]
    eager_args = make_args()
    expected = outcome(fn, eager_args)
    args = make_args()
    graphs, breaks, (got,) = graphlift_counts(fn, [args])
    assert_same_numpy(expected, got)
    assert_same_numpy(eager_args, args, "arguments after the call")
    theirs = recorded(f"numpy/writes/{name}")
    assert (theirs["graphs"], theirs["breaks"]) == (tc or (graphs, breaks)), theirs
    return graphs, breaks


WRITES_INTO_A_TENSOR = [add_in_place, multiply_a_view, assign_item, assign_masked, ufunc_out,
                        scalar_in_place, sort_fill_put, shift_right]
for _fn in WRITES_INTO_A_TENSOR:
    writes_case(_fn, lambda: (m23_shuffled(),))
writes_case(argument_array_in_place, lambda: (np.arange(4.),))
writes_case(int_array_plus_float, lambda: (torch.arange(6),))


@pytest.mark.parametrize("fn", WRITES_INTO_A_TENSOR, ids=[f.__name__ for f in WRITES_INTO_A_TENSOR])
def test_writes_into_an_array_of_a_tensor_are_one_graph_and_reach_the_tensor(fn):
    assert check_writes(fn.__name__) == (1, 0)


def test_writes_into_an_argument_array_reach_the_callers_array():
    assert check_writes("argument_array_in_place") == (1, 0)
    array = np.arange(4.)
    _, returned = graphlift.compile(argument_array_in_place)(array)
    assert returned is array and array[0] == 7.0


def test_a_write_numpy_refuses_runs_eagerly_and_raises_numpys_error():
    # torch.compile raises its own TorchRuntimeError while compiling (no graph, no break).
    graphs, breaks = check_writes("int_array_plus_float", tc=(0, 0))
    assert breaks == 1
    with pytest.raises(np._core._exceptions._UFuncOutputCastingError):
        graphlift.compile(int_array_plus_float)(torch.arange(6))


def tensor_times_array(x):
    return x * np.ones(3, dtype=np.int64) + 1


def array_plus_tensor(x):
    return np.ones(3) + x


for _fn in (tensor_times_array, array_plus_tensor):
    numpy_case(_fn.__name__, _fn, lambda: [(torch.ones(2, 3),)])


@pytest.mark.parametrize("name", ["tensor_times_array", "array_plus_tensor"])
def test_an_array_and_a_tensor_in_one_operator_run_eagerly(name):
    """Eager computes ``x * a`` with NumPy's ufunc and wraps the result in a Tensor (int64 array
    * float32 tensor is float64 there), and ``a + x`` raises TypeError; torch.compile traces
    both as torch operations (one graph, a float32 tensor, and a result where eager raises)."""
    check(name, tc=(1, 0))
