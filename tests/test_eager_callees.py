"""Callees of eager frames: a frame that runs eagerly as a whole has its callees compiled.

Each case runs eagerly and under graphlift, and compares results, printed output and
exceptions with eager's and with torch.compile's (backend "eager" through a counter), whose
figures are recorded (tests/reference); the graph counts are compared with torch.compile's, and
``graphlift.stats(callee)`` shows the callee compiled.
"""

import contextlib
import dis
import functools
import inspect
import io
import logging
import traceback

import pytest
import torch
from reference import measure, recorded

import graphlift
from graphlift import bytecode, eager_callees
from graphlift.testing import CompileCounter

# Where a version has no call-site rewrite (eager_callees.LAYOUTS: every supported version has
# one), an eager frame runs its original code (NotRoutable, logged), its callees uncompiled.
pytestmark = pytest.mark.skipif(eager_callees.not_routed() is not None,
                                reason=str(eager_callees.not_routed()))


def run(fn, *args, system="eager", calls=2):
    """Results, printed output and graph count of ``calls`` calls of ``fn`` under ``system``
    ("eager" or "graphlift")."""
    counter = None
    if system == "graphlift":
        counter = CompileCounter()
        fn = graphlift.compile(fn, backend=counter)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        results = [fn(*args) for _ in range(calls)]
    return results, out.getvalue(), None if counter is None else counter.frame_count


def same(a, b):
    if isinstance(a, torch.Tensor):
        return isinstance(b, torch.Tensor) and torch.equal(a, b)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(map(same, a, b))
    return a == b


# The cases ``check`` runs, by name: a function making (the function, its arguments), and
# whether it runs under torch.no_grad().
CASES: dict = {}


def _torch_compile_case(name: str) -> dict:
    """torch.compile's run of case ``name`` (two calls, backend "eager" through a counter):
    whether its results were eager's, what it printed, and its graphs."""
    import torch._dynamo.testing

    build, no_grad = CASES[name]
    torch.manual_seed(0)
    with torch.no_grad() if no_grad else contextlib.nullcontext():
        fn, args = build()
        eager, _, _ = run(fn, *args)
        counter = torch._dynamo.testing.CompileCounter()
        theirs, printed, _ = run(torch.compile(fn, backend=counter), *args)
    return {"same_as_eager": same(eager, theirs), "printed": printed,
            "graphs": counter.frame_count}


def case(name, no_grad=False):
    """Register the decorated function (() -> (fn, args)) as case ``name``, and torch.compile's
    run of it as the measure ``eager_callees/<name>``."""
    def register(build):
        CASES[name] = (build, no_grad)
        measure(f"eager_callees/{name}", functools.partial(_torch_compile_case, name))
        return build

    return register


def check(name, graphs=None):
    """Eager, torch.compile (recorded) and graphlift agree on case ``name``; graphlift's graph
    count is torch's (or ``graphs``). Returns graphlift's count."""
    theirs = recorded(f"eager_callees/{name}")
    build, no_grad = CASES[name]
    with torch.no_grad() if no_grad else contextlib.nullcontext():
        fn, args = build()
        eager, printed, _ = run(fn, *args)
        graphlift.reset()
        ours, our_print, our_graphs = run(fn, *args, system="graphlift")
    assert theirs["same_as_eager"] and same(eager, ours)
    assert printed == theirs["printed"] == our_print
    assert our_graphs == (theirs["graphs"] if graphs is None else graphs)
    return our_graphs


def g(x):
    return x.sin() + 1


X = torch.ones(3)


def in_try(callee, label):
    """A frame that runs eagerly as a whole (its print breaks inside a try block) and returns
    ``callee(x)``."""
    def f(x):
        try:
            print(label)
            return callee(x)
        except KeyError:
            return None

    return f


# -- the frames that run eagerly -----------------------------------------------------------------
def breaks_in_a_try_block(x):
    try:
        print("in try")
        y = g(x)
    except KeyError:
        y = None
    return y


case("break_in_a_try_block")(lambda: (breaks_in_a_try_block, (X,)))


def test_a_break_in_a_try_block_compiles_the_callee():
    assert check("break_in_a_try_block") == 1
    assert graphlift.stats(g).graphs == 1
    assert graphlift.stats(breaks_in_a_try_block).eager_frames == 1


@case("break_in_a_loop_body")
def break_in_a_loop_body():
    def f(x):
        for i in range(2):
            print("step", i)
            x = g(x)
        return x

    return f, (X,)


def test_a_break_in_a_loop_body():
    assert check("break_in_a_loop_body") == 1
    assert graphlift.stats(g).graphs == 1 and graphlift.stats(g).hits == 3


def test_a_break_inside_autocast():
    def f(x):
        with torch.autocast("cpu", dtype=torch.bfloat16):
            print("autocast")
            return g(x @ x.T)

    x = torch.ones(3, 3)
    eager = f(x)
    compiled = graphlift.compile(f)
    assert same(compiled(x), eager) and same(compiled(x), eager)
    # graphlift runs the frame eagerly (torch.compile splits it, so no count to compare) and
    # compiles g under the frame's autocast: its graph's dtype is bfloat16, as in eager.
    assert graphlift.stats(f).eager_frames == 1 and graphlift.stats(g).graphs == 1
    assert compiled(x).dtype == eager.dtype == torch.bfloat16


class Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x).relu()


case("module_called_from_an_eager_frame", no_grad=True)(
    lambda: (in_try(Block(), "module"), (X,)))


def test_a_module_called_from_an_eager_frame_has_its_forward_compiled():
    assert check("module_called_from_an_eager_frame") == 1
    assert graphlift.stats(Block.forward).graphs == 1


@case("module_with_a_forward_hook", no_grad=True)
def module_with_a_forward_hook():
    block = Block()
    block.register_forward_hook(lambda module, args, out: print("hook") or out * 2)
    return in_try(block, "module"), (X,)


def test_a_module_with_a_forward_hook_runs_the_hook():
    # torch.compile: the forward's graph, and the hook's after its print.
    assert check("module_with_a_forward_hook") == 2
    assert graphlift.stats(Block.forward).graphs == 1


class CheckpointedBlock(Block):
    """A module class with its own ``__call__`` that calls ``Module.__call__`` (transformers'
    GradientCheckpointingLayer)."""

    def __call__(self, *args, **kwargs):
        if kwargs.pop("twice", False):
            args = (args[0] * 2,)
        return super().__call__(*args, **kwargs)


@case("module_with_its_own_call", no_grad=True)
def module_with_its_own_call():
    block = CheckpointedBlock()

    def f(x):
        try:
            print("own call")
            return block(x) + block(x, twice=True)
        except KeyError:
            return None

    return f, (X,)


def test_a_module_with_its_own_call_has_its_call_compiled():
    # torch.compile: __call__'s frame with forward inlined, once per keyword set.
    assert check("module_with_its_own_call") == 2
    stats = graphlift.stats(CheckpointedBlock.__call__)
    assert (stats.graphs, stats.hits) == (2, 2) and graphlift.stats(Block.forward).compiles == 0


# torch.compile skips torch's own modules too
case("torch_module", no_grad=True)(lambda: (in_try(torch.nn.Linear(3, 3), "linear"), (X,)))


def test_a_torch_module_runs_as_it_is():
    assert check("torch_module") == 0


class Stepper:
    def __init__(self):
        self.scale = 3.0

    def step(self, x, *, shift=0.0):
        return x.cos() * self.scale + shift


class Scaler:
    def __call__(self, x):
        return x.tanh() * 2


@case("callable_object")
def callable_object():
    scaler = Scaler()

    def f(x):
        try:
            print("callable")
            return scaler(x) + scaler(x + 1)
        except KeyError:
            return None

    return f, (X,)


def test_a_callable_object_has_its_call_compiled():
    assert check("callable_object") == 1
    assert graphlift.stats(Scaler.__call__).graphs == 1


@case("method_keyword_and_star_calls")
def method_keyword_and_star_calls():
    stepper = Stepper()

    def f(x):
        try:
            print("calls")
            a = stepper.step(x, shift=1.0)
            b = g(*(x,))
            c = stepper.step(*[x], **{"shift": 1.0})
            return a + b + c
        except KeyError:
            return None

    return f, (X,)


def test_a_method_and_keyword_and_star_calls():
    assert check("method_keyword_and_star_calls") == 2  # step (once: both calls hit) and g
    assert graphlift.stats(Stepper.step).graphs == 1 and graphlift.stats(Stepper.step).hits == 3


def boom(x):
    raise ValueError(f"bad {x.shape}")


def test_an_exception_of_a_callee_propagates_unchanged():
    def f(x):
        try:
            print("before")
            boom(x)
        except ValueError as error:
            return str(error), traceback.format_exc().splitlines()[-3:]
        return None

    eager = f(X)
    compiled = graphlift.compile(f)
    assert compiled(X) == eager
    with pytest.raises(ValueError, match="bad") as info:
        graphlift.compile(lambda x: [print("x"), boom(x)] and 1 or 2)(X)
    assert [frame.name for frame in traceback.extract_tb(info.tb)][-1] == "boom"


@case("identity_and_signature")
def identity_and_signature():
    stepper = Stepper()

    def f(fn, x):
        try:
            print("identity")
            return (fn is g, str(inspect.signature(fn)), stepper.step.__func__ is Stepper.step,
                    type(stepper.step).__name__, fn(x))
        except KeyError:
            return None

    return f, (g, X)


def test_identity_and_signature_of_functions_passed_around():
    check("identity_and_signature")
    assert graphlift.stats(g).graphs == 1


def nested_inner(x):
    try:
        print("inner")
        return g(x) * 2
    except KeyError:
        return None


case("compiled_callee_that_falls_back")(lambda: (in_try(nested_inner, "outer"), (X,)))


def test_a_compiled_callee_that_falls_back_routes_its_callees_too():
    assert check("compiled_callee_that_falls_back") == 1
    assert graphlift.stats(nested_inner).eager_frames == 1 and graphlift.stats(g).graphs == 1


def gen(x):
    for _ in range(2):
        yield g(x)


@case("generator_consumed")
def generator_consumed():
    def f(x):
        try:
            print("generator")
            return list(gen(x))  # list (a C type) runs the generator's frame
        except KeyError:
            return None

    return f, (X,)


def test_a_generator_consumed_in_an_eager_frame():
    assert check("generator_consumed") == 1
    assert graphlift.stats(g).graphs == 1


def _torch_compile_generator_function() -> dict:
    """torch.compile's graphs for ``gen`` compiled itself, and whether it agreed with eager."""
    import torch._dynamo.testing

    counter = torch._dynamo.testing.CompileCounter()
    theirs = list(torch.compile(gen, backend=counter)(X))
    return {"same_as_eager": same(theirs, list(gen(X))), "graphs": counter.frame_count}


measure("eager_callees/compiled_generator_function", _torch_compile_generator_function)


def test_a_compiled_generator_function_compiles_its_callees():
    # torch.compile's hook is off again when the generator's body runs (after the call that
    # made it returns): it compiles nothing (recorded). graphlift's routed copy compiles the
    # callee.
    theirs = recorded("eager_callees/compiled_generator_function")
    ours = list(graphlift.compile(gen)(X))
    assert same(ours, list(gen(X))) and theirs["same_as_eager"] and theirs["graphs"] == 0
    assert graphlift.stats(g).graphs == 1 and graphlift.stats(gen).eager_frames == 1


def not_recursive(disable):
    """A function calling one disabled with ``disable(..., recursive=False)`` that calls a leaf;
    (the function, the disabled one, the leaf)."""
    def leaf(x):
        return x.sin() * 2

    middle = disable(lambda x: leaf(x) + 1, recursive=False)

    def f(x):
        return middle(x * 2) * 3

    return f, middle, leaf


def _torch_compile_not_recursive() -> dict:
    """torch.compile's graphs over ``not_recursive(torch.compiler.disable)``."""
    import torch._dynamo.testing

    f, _, _ = not_recursive(torch.compiler.disable)
    counter = torch._dynamo.testing.CompileCounter()
    run(torch.compile(f, backend=counter), X)
    return {"graphs": counter.frame_count}


measure("eager_callees/disable_not_recursive", _torch_compile_not_recursive)


def test_disable_not_recursive():
    f, middle_ours, leaf = not_recursive(graphlift.disable)
    their_graphs = recorded("eager_callees/disable_not_recursive")["graphs"]
    ours, _, our_graphs = run(f, X, system="graphlift")
    assert our_graphs == their_graphs == 3 and same(ours[0], f(X))
    assert graphlift.stats(leaf).graphs == 1
    graphlift.reset()
    middle_ours(X)  # called from plain Python: nothing is compiled, as under torch.compile
    assert graphlift.stats(leaf).compiles == 0
    assert same(graphlift.compile(middle_ours)(X), middle_ours(X))
    assert graphlift.stats(leaf).graphs == 1


case("setting_off")(lambda: (in_try(g, "off"), (X,)))


def test_the_setting_off_runs_the_callees_eagerly():
    with graphlift.config.patch(compile_eager_callees=False):
        assert check("setting_off", graphs=0) == 0
    assert graphlift.stats(g).compiles == 0


# -- the rewrite itself --------------------------------------------------------------------------
def many_calls(o, a, kw):
    r = [g(a[0])]
    r.append(o.step(a[0], shift=2.0))
    r.append(len(*a))
    r.append(o.step(*a, **kw))
    r.append([g(x) for x in a])
    with contextlib.nullcontext():
        r.append(g(a[0]) if a else g(a))
    try:
        r.append(max(g(a[0]).sum(), g(a[0]).sum()))
        raise KeyError(g(a[0]))
    except KeyError as e:
        r.append(e.args[0])
    r.append(sum(g(x) for x in a))
    return r


def test_the_routed_copy_keeps_results_lines_and_routes_every_user_call():
    routed = []

    def route(f):
        routed.append(getattr(f, "__name__", type(f).__name__))
        return f

    code = many_calls.__code__
    copy = eager_callees.routed_code(code, route)
    fn = type(many_calls)(copy, many_calls.__globals__)
    args = (Stepper(), [torch.ones(2)], {"shift": 1.0})
    assert same(fn(*args), many_calls(*args))
    # g seven times (the comprehension's and the generator's calls too), step twice, len, max,
    # sum, list.append and KeyError: every call with a NULL self slot.
    assert routed.count("g") == 7 and routed.count("step") == 2
    assert {"len", "max", "sum", "append", "KeyError"} <= set(routed)
    # The compiler's own calls stay as they are: the with block's __exit__, the comprehensions'.
    assert not {"__exit__", "<listcomp>", "<genexpr>"} & set(routed)
    lines = {i.lineno for i in bytecode.decode(code) if i.located}
    assert lines == {line for _, _, line in copy.co_lines() if line is not None}


@pytest.mark.skipif(bytecode.VERSION == (3, 10), reason="3.10 has no column positions")
def test_the_line_table_encoder_round_trips():
    code = many_calls.__code__
    table = eager_callees.encode_positions(list(code.co_positions()), code.co_firstlineno)
    assert list(code.replace(co_linetable=table).co_positions()) == list(code.co_positions())


def h(*args, **kwargs):
    return len(args) + len(kwargs)


def call_shapes(a, c):
    """Calls of every shape: many arguments (3.10: ROT_N), keywords, a call that a jump lands on,
    a callable chosen by a condition, star calls, a method whose attribute is an instance's."""
    r = [h(1, 2, 3, 4, 5, 6, 7, 8), h(1, 2, 3, k=4), h(a if c else None, *a, **{"k": 1})]
    r.append((h if c else len)(a))
    r.append(h(*[h(x) for x in a], k=sum(h(x) for x in a)))
    r.append(c.__class__.__name__.upper())
    return r


class Holder:
    def __init__(self):
        self.step = h  # an instance attribute: the method load finds no method


def test_calls_of_every_shape_are_routed():
    routed = []
    copy = eager_callees.routed_code(call_shapes.__code__, lambda f: routed.append(f) or f)
    fn = type(call_shapes)(copy, call_shapes.__globals__)
    for c in (True, False):
        routed.clear()
        assert fn([1, 2], c) == call_shapes([1, 2], c)
        # h: 4 calls of its own (5 when c), one per element of a in the comprehension and one
        # in the generator.
        assert routed.count(h) == 4 + c + 2 * 2 and routed.count(sum) == 1
    holder = Holder()
    method = lambda o: o.step(1, 2)  # noqa: E731
    copy = eager_callees.routed_code(method.__code__, lambda f: routed.append(f) or f)
    routed.clear()
    assert type(method)(copy, globals())(holder) == 2 and routed == [h]


class Base:
    def scale(self, x):
        return x.sin() * 2


class Child(Base):
    def scale(self, x):
        try:
            print("child")
            return super().scale(x) + 1
        except KeyError:
            return None


# How each version loads ``super().scale`` for a call (the rewrite turns it into an attribute load,
# and a NULL from 3.11 on).
SUPER_METHOD_LOAD = {(3, 10): "LOAD_METHOD", (3, 11): "LOAD_METHOD", (3, 12): "LOAD_SUPER_ATTR",
                     (3, 13): "LOAD_SUPER_ATTR"}


case("super_method_call")(lambda: (Child().scale, (X,)))


def test_a_super_method_call_is_routed():
    assert SUPER_METHOD_LOAD[bytecode.VERSION] in {i.opname for i in dis.get_instructions(
        Child.scale)}
    assert check("super_method_call") == 1
    assert graphlift.stats(Base.scale).graphs == 1 and graphlift.stats(Child.scale).eager_frames


# A loop whose forward or backward jump fits one byte in the original and needs EXTENDED_ARG in
# the copy (3.10's calls take fewer code units).
CALLS_IN_LOOP = {(3, 10): 30}.get(bytecode.VERSION, 14)
namespace = {"g": g}
exec("def long_loop(x):\n    for _ in range(2):\n" + "        x = g(x)\n" * CALLS_IN_LOOP
     + "    return x\n", namespace)
long_loop = namespace["long_loop"]


def has_extended_arg(code):
    return dis.opmap["EXTENDED_ARG"] in code.co_code[::2]


def test_jumps_grow_an_extended_arg_where_the_copy_is_longer():
    routed = []
    copy = eager_callees.routed_code(long_loop.__code__, lambda f: routed.append(f) or f)
    assert not has_extended_arg(long_loop.__code__) and has_extended_arg(copy)
    fn = type(long_loop)(copy, long_loop.__globals__)
    assert same(fn(X), long_loop(X)) and routed.count(g) == 2 * CALLS_IN_LOOP


def test_a_version_without_a_rewrite_runs_the_original_code(monkeypatch, caplog):
    assert eager_callees.not_routed((3, 10)) is None and eager_callees.not_routed((3, 14))
    monkeypatch.setitem(eager_callees.LAYOUTS, bytecode.VERSION, "calls not rewritten here")
    caplog.set_level(logging.INFO, logger="graphlift")
    f = in_try(g, "unrouted")
    compiled = graphlift.compile(f)
    graphlift.set_logs(graph_breaks=True)
    try:
        results = [compiled(X), compiled(X)]
    finally:
        graphlift.set_logs(graph_breaks=False)
    assert same(results, [f(X), f(X)])
    assert graphlift.stats(f).eager_frames == 1 and graphlift.stats(g).compiles == 0
    assert any("runs its original code, its callees uncompiled: calls not rewritten here"
               in record.getMessage() for record in caplog.records)


def test_the_layout_puts_the_null_where_the_instruction_layer_does():
    assert eager_callees.LAYOUTS[bytecode.VERSION].null_above == bytecode.NULL_ABOVE_CALLABLE
