"""Each backend compiles a hand-made FX graph that then behaves like eager."""

import shutil

import pytest
import torch
import torch.fx

from graphlift.backends import (
    call_graph_callable,
    list_backends,
    lookup_backend,
    register_backend,
)

BUILTIN = ["aot_eager", "eager", "inductor"]


def sin_add(x, y):
    return (torch.sin(x) + y,)


def mutate_then_double(x):
    x.add_(1)
    return (x * 2,)


def compile_graph(backend: str, fn, example_inputs: list):
    """Trace ``fn`` by hand, compile it with ``backend`` and return a *args callable."""
    gm = torch.fx.symbolic_trace(fn)
    return call_graph_callable(lookup_backend(backend)(gm, example_inputs))


def backend_params():
    """All built-in backends; inductor needs a C++ compiler on CPU."""
    no_cc = shutil.which("g++") is None and shutil.which("c++") is None
    inductor = pytest.param(
        "inductor", marks=pytest.mark.skipif(no_cc, reason="inductor on CPU needs a C++ compiler")
    )
    return ["eager", "aot_eager", inductor]


@pytest.mark.parametrize("backend", backend_params())
def test_result_matches_eager(backend):
    x, y = torch.randn(8), torch.randn(8)
    compiled = compile_graph(backend, sin_add, [x, y])
    (expected,) = sin_add(x, y)
    (got,) = compiled(x, y)
    torch.testing.assert_close(got, expected)
    x2, y2 = torch.randn(8), torch.randn(8)
    torch.testing.assert_close(compiled(x2, y2)[0], sin_add(x2, y2)[0])


def test_aot_eager_gradients_match_eager():
    x = torch.randn(8, requires_grad=True)
    y = torch.randn(8, requires_grad=True)
    compiled = compile_graph("aot_eager", sin_add, [x, y])
    compiled(x, y)[0].sum().backward()
    got = (x.grad.clone(), y.grad.clone())
    x.grad = y.grad = None
    sin_add(x, y)[0].sum().backward()
    torch.testing.assert_close(got, (x.grad, y.grad))


def test_aot_eager_mutates_input_like_eager():
    example = torch.zeros(3)
    compiled = compile_graph("aot_eager", mutate_then_double, [example])
    assert torch.equal(example, torch.zeros(3)), "compiling must not run on real inputs"
    eager_input, compiled_input = torch.arange(3.0), torch.arange(3.0)
    (expected,) = mutate_then_double(eager_input)
    (got,) = compiled(compiled_input)
    torch.testing.assert_close(got, expected)
    torch.testing.assert_close(compiled_input, eager_input)


def test_aot_eager_result_takes_positional_arguments():
    # AOTAutograd's wrapper inherits a stale _boxed_call=True; the backend must clear it.
    x, y = torch.randn(4), torch.randn(4)
    compiled = lookup_backend("aot_eager")(torch.fx.symbolic_trace(sin_add), [x, y])
    assert call_graph_callable(compiled) is compiled
    torch.testing.assert_close(compiled(x, y)[0], sin_add(x, y)[0])


def test_unknown_backend_names_the_known_ones():
    with pytest.raises(ValueError) as info:
        lookup_backend("x")
    assert str(info.value) == "unknown backend 'x'; known backends: aot_eager, eager, inductor"


def test_callable_passes_through():
    def my_backend(gm, example_inputs):
        return gm.forward

    assert lookup_backend(my_backend) is my_backend


def test_register_backend():
    def my_backend(gm, example_inputs):
        return gm.forward

    register_backend("test_register_backend_unique", my_backend)
    assert lookup_backend("test_register_backend_unique") is my_backend
    assert "test_register_backend_unique" in list_backends()
    with pytest.raises(ValueError, match="already registered"):
        register_backend("eager", my_backend)


def test_list_backends_is_sorted_and_has_builtins():
    names = list_backends()
    assert names == sorted(names)
    assert set(BUILTIN) <= set(names)


def test_call_graph_callable_boxes_when_asked():
    seen = []

    def boxed(args: list):
        seen.append(type(args))
        return tuple(a * 2 for a in args)

    boxed._boxed_call = True
    assert call_graph_callable(boxed)(1, 2) == (2, 4)
    assert seen == [list]


def test_call_graph_callable_keeps_unboxed_callable():
    def plain(a, b):
        return (a + b,)

    assert call_graph_callable(plain) is plain
