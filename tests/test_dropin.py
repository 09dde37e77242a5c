"""graphlift as a drop-in for torch.compile: torch's markers, stances, options and one switch.

Each case runs side by side under ``torch.compile`` and ``graphlift.compile`` (same backend kind:
a counter that runs the graph) and compares what the program sees: the return values, the number
of graphs compiled, and how many times the Python body of each function of this file ran. A body
"runs" when its own code object executes (a profile hook counts them), so a function traced into
a graph does not run, a disabled one runs once per call, and a frame that falls back runs whole.
Where graphlift differs from torch.compile on purpose, the test says so and checks both numbers.
torch.compile's side of each case is recorded (tests/reference), not run beside graphlift.
"""

import collections
import contextlib
import functools
import itertools
import json
import operator
import os
import pathlib
import re
import subprocess
import sys
import types
import zlib
from dataclasses import dataclass

import pytest
import torch
import torch._dynamo  # torch's markers (disable, mark_dynamic, ...), which graphlift honours
from corpus.harness import assert_same
from reference import measure, recorded

import graphlift
from graphlift import dropin, stance, trace_rules
from graphlift.eager_callees import not_routed, original_code
from graphlift.testing import CompileCounter
from graphlift.trace_rules import Kind


# -- the harness -----------------------------------------------------------------------------------
def _codes_of_this_file() -> set[types.CodeType]:
    """Every code object written in this file (functions nested in tests included)."""
    found: set[types.CodeType] = set()

    def walk(code: types.CodeType) -> None:
        found.add(code)
        for const in code.co_consts:
            if isinstance(const, types.CodeType):
                walk(const)

    for value in list(globals().values()):
        if isinstance(value, types.FunctionType) and value.__code__.co_filename == __file__:
            walk(value.__code__)
    return found


@contextlib.contextmanager
def body_runs(*also: types.FunctionType):
    """Count, by function name, the runs of this file's own code objects (and of ``also``).

    torch.compile runs transformed copies of the code and graphlift runs generated functions, so
    only a body that really executes (eagerly, or on fake tensors while compiling) is counted.
    """
    codes = _codes_of_this_file() | {fn.__code__ for fn in also}
    counts: collections.Counter = collections.Counter()

    def profile(frame, event, arg):
        # A frame that runs eagerly with its callees compiled runs a routed copy of its code
        # (graphlift.eager_callees): the same body.
        code = original_code(frame.f_code)
        if event == "call" and code in codes:
            counts[code.co_name] += 1

    previous = sys.getprofile()
    sys.setprofile(profile)
    try:
        yield counts
    finally:
        sys.setprofile(previous)


@dataclass
class Outcome:
    results: list  # as_json's form where torch.compile's, from the recording
    graphs: int
    bodies: dict
    ops: int


def as_json(value):
    """``value`` as a recording holds it: a tensor as a line of its values and dtype, a tuple as
    a list."""
    if isinstance(value, torch.Tensor):
        return f"tensor({value.tolist()}, dtype={value.dtype})"
    if isinstance(value, (list, tuple)):
        return [as_json(item) for item in value]
    return value


def run_compiled(compiled, counter, calls) -> Outcome:
    """Call ``compiled`` with each args; what ``counter``, its backend, saw."""
    results = []
    with body_runs() as bodies:
        for args in calls:  # no comprehension here: its own code would be counted
            results.append(compiled(*args))
    return Outcome(results, counter.frame_count, dict(bodies), counter.op_count)


def three_calls(*shapes):
    return [(torch.ones(shape),) for shape in (shapes or (4, 4, 4))]


# The cases run under both, by key: (make, calls: () -> the args of each call, settings).
CASES: dict = {}


def _torch_compile_run(key: str, within) -> dict:
    """torch.compile's run of case ``key`` inside ``within()``: its Outcome, results as_json."""
    import torch._dynamo.testing

    make, calls, settings = CASES[key]
    with within():
        fn = make()
        counter = torch._dynamo.testing.CompileCounter()
        outcome = run_compiled(torch.compile(fn, backend=counter, **settings), counter, calls())
    return {"results": as_json(outcome.results), "graphs": outcome.graphs,
            "bodies": outcome.bodies, "ops": outcome.ops}


def case(name: str, make, calls=three_calls, within=contextlib.nullcontext,
         **settings) -> str:
    """Register case ``dropin/<name>``: ``make()`` compiled with ``settings`` and called with
    each of ``calls()``; torch.compile's run of it, inside ``within()``, is its measure."""
    key = f"dropin/{name}"
    CASES[key] = (make, calls, settings)
    return measure(key, functools.partial(_torch_compile_run, key, within))


def theirs_of(key: str) -> Outcome:
    """torch.compile's Outcome of case ``key``, recorded (tests/reference)."""
    return Outcome(**recorded(key))


def ours_of(key: str) -> Outcome:
    """graphlift's Outcome of case ``key``."""
    make, calls, settings = CASES[key]
    graphlift.reset()
    fn = make()
    counter = CompileCounter()
    return run_compiled(graphlift.compile(fn, backend=counter, **settings), counter, calls())


def side_by_side(key: str) -> tuple[Outcome, Outcome]:
    """Run case ``key`` under graphlift; assert the results, graph counts and body runs are
    torch.compile's (recorded); return both."""
    theirs, ours = theirs_of(key), ours_of(key)
    assert as_json(ours.results) == theirs.results
    assert (ours.graphs, ours.bodies) == (theirs.graphs, theirs.bodies)
    return theirs, ours


@pytest.fixture(autouse=True)
def default_torch_stance():
    yield
    torch.compiler.set_stance("default")


# -- torch.compiler.disable ------------------------------------------------------------------------
DISABLES = {
    "torch.compiler.disable": torch.compiler.disable,
    "torch._dynamo.disable": torch._dynamo.disable,
    "reason=": torch.compiler.disable(reason="talks to the parameter server"),
    # recursive=False: what the function calls is compiled (graphlift.eager_callees); the
    # callee here is a torch-marked leaf (see test_disable_not_recursive_compiles_what_it_calls).
    "recursive=False": torch.compiler.disable(recursive=False),
}


def make_disabled_fetch(disable):
    @disable
    def fetch(x):
        return x + 1

    def f(x):
        return fetch(x * 2) * 3

    return f


for _name, _disable in DISABLES.items():
    case(f"disabled_function/{_name}", functools.partial(make_disabled_fetch, _disable))


@pytest.mark.parametrize("name", DISABLES)
def test_a_disabled_function_is_a_graph_break_and_runs_eagerly(name):
    theirs, ours = side_by_side(f"dropin/disabled_function/{name}")
    assert ours.graphs == 2 and ours.bodies == {"fetch": 3}
    x = torch.ones(2)
    (record,) = graphlift.explain(make_disabled_fetch(DISABLES[name]))(x).break_reasons
    assert "disabled by the user (torch.compiler.disable)" in record.explanation
    if name == "reason=":
        assert "talks to the parameter server" in record.explanation


def make_disabled_not_recursive():
    def leaf(x):
        return x.sin() + 1

    @torch.compiler.disable(recursive=False)
    def middle(x):
        return leaf(x) * 2

    def f(x):
        return middle(x * 2) * 3

    return f


case("disable_not_recursive", make_disabled_not_recursive)


@pytest.mark.xfail(not_routed() is not None, strict=True,
                   reason=f"{not_routed()} (eager_callees): callees run eagerly")
def test_disable_not_recursive_compiles_what_it_calls():
    side_by_side("dropin/disable_not_recursive")


def make_disabled_method():
    class Store:
        @torch.compiler.disable
        def fetch(self, x):
            return x + 1

    store = Store()

    def f(x):
        return store.fetch(x * 2) * 3

    return f


case("disabled_method", make_disabled_method)


def test_a_disabled_method():
    theirs, ours = side_by_side("dropin/disabled_method")
    assert ours.graphs == 2 and ours.bodies == {"fetch": 3}


def make_disabled_class():
    class Scale:
        def __init__(self, k):
            self.k = k

        def __call__(self, x):
            return x * self.k

    torch.compiler.disable(Scale)

    def f(x):
        return Scale(3)(x * 2) * 3

    return f


case("disabled_class", make_disabled_class)


def test_a_disabled_class_disables_construction_and_calls():
    theirs, ours = side_by_side("dropin/disabled_class")
    assert ours.bodies == {"__init__": 3, "__call__": 3}


def make_disabled_module_class():
    class Shift(torch.nn.Module):
        def forward(self, x):
            return x + 1

    torch.compiler.disable(Shift)
    shift = Shift()

    def f(x):
        return shift(x * 2) * 3

    return f


case("disabled_module_class", make_disabled_module_class)


def test_a_disabled_module_class_runs_its_forward_eagerly():
    theirs, ours = side_by_side("dropin/disabled_module_class")
    assert ours.graphs == 2 and ours.bodies == {"forward": 3}


def make_disabled_module_instance():
    class Shift(torch.nn.Module):
        def forward(self, x):
            return x + 1

    shift = torch.compiler.disable(Shift())

    def f(x):
        return shift(x * 2) * 3

    return f


case("disabled_module_instance", make_disabled_module_instance)


def test_a_disabled_module_instance():
    theirs, ours = side_by_side("dropin/disabled_module_instance")
    assert ours.bodies == {"forward": 3}


def make_torch_disabled_function():
    @torch.compiler.disable
    def f(x):
        return x.cos() + 1

    return f


case("compiling_a_torch_disabled_function", make_torch_disabled_function)


def test_compiling_a_torch_disabled_function_compiles_it_as_torch_does():
    """torch.compile unwraps torch.compiler.disable when given the function itself."""
    theirs, ours = side_by_side("dropin/compiling_a_torch_disabled_function")
    assert ours.graphs == 1 and ours.bodies == {}


def make_calling_a_torch_compiled_helper():
    helper = torch.compile(lambda x: x.sin() * 2, backend="eager")

    def f(x):
        return helper(x + 1) - 1

    return f


case("torch_compiled_helper", make_calling_a_torch_compiled_helper)

# graphlift's side in a process of its own: making the helper is torch.compile's first call,
# which changes torch for the whole process (see tests/reference), as it does for the user.
GRAPHLIFT_SIDE = """
import json, sys
sys.path.insert(0, sys.argv[2])
import graphlift
import test_dropin
graphlift.config.raise_internal_errors = True
ours = test_dropin.ours_of(sys.argv[1])
print(json.dumps({"results": test_dropin.as_json(ours.results), "graphs": ours.graphs,
                  "bodies": ours.bodies, "ops": ours.ops}))
"""


def ours_in_a_process_of_its_own(key: str) -> Outcome:
    """graphlift's Outcome of case ``key``, run in a fresh process (results as_json)."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    tests = pathlib.Path(__file__).resolve().parent
    done = subprocess.run([sys.executable, "-c", GRAPHLIFT_SIDE, key, str(tests)],
                          capture_output=True, text=True, timeout=300, env=env, cwd=tests.parent)
    assert done.returncode == 0, done.stderr[-3000:]
    return Outcome(**json.loads(done.stdout.splitlines()[-1]))


def test_a_torch_compiled_helper_is_inlined_into_the_caller():
    theirs = theirs_of("dropin/torch_compiled_helper")
    ours = ours_in_a_process_of_its_own("dropin/torch_compiled_helper")
    assert ours.results == theirs.results
    assert (ours.graphs, ours.bodies) == (theirs.graphs, theirs.bodies)
    assert ours.graphs == 1 and ours.ops == theirs.ops == 4


# -- allow_in_graph, graph_break, is_compiling -----------------------------------------------------
ALLOWS = {"torch.compiler": torch.compiler.allow_in_graph,
          "torch._dynamo": torch._dynamo.allow_in_graph}


def make_allowed(allow):
    def opaque(x):
        return x.sin() * 2

    allow(opaque)

    def f(x):
        return opaque(x + 1) * 3

    return f


for _name, _allow in ALLOWS.items():
    case(f"allow_in_graph/{_name}", functools.partial(make_allowed, _allow))


@pytest.mark.parametrize("name", ALLOWS)
def test_allow_in_graph_is_one_opaque_node(name):
    theirs, ours = theirs_of(f"dropin/allow_in_graph/{name}"), ours_of(
        f"dropin/allow_in_graph/{name}")
    assert as_json(ours.results) == theirs.results
    assert (ours.graphs, ours.ops) == (theirs.graphs, theirs.ops) == (1, 3)  # add, opaque, mul
    # torch.compile runs the body once more while compiling, on fake tensors, for the output
    # metadata; graphlift reads its bytecode instead (see graphlift.allow_in_graph).
    assert ours.bodies == {"opaque": 3} and theirs.bodies == {"opaque": 4}


@contextlib.contextmanager
def disallowed(*fns):
    """torch._dynamo.disallow_in_graph(fn) for the block; torch's registries put back after."""
    torch_rules = torch._dynamo.trace_rules
    try:
        for fn in fns:
            torch._dynamo.disallow_in_graph(fn)
        yield
    finally:
        for fn in fns:
            torch_rules._disallowed_callable_ids.remove(id(fn))


def make_add_sub_add():
    def f(x):
        x = torch.add(x, 1)
        x = torch.sub(x, 1)  # disallowed: a break, it runs eagerly
        return torch.add(x, 1)

    return f


case("disallowed_torch_op", make_add_sub_add, within=functools.partial(disallowed, torch.sub))


@pytest.mark.filterwarnings("ignore:Dynamo does not know")  # torch's, on its side
def test_torch_disallow_in_graph_of_a_torch_op_is_a_graph_break():
    with disallowed(torch.sub):
        assert trace_rules.lookup(torch.sub).rule is trace_rules.TORCH_DISALLOWED
        theirs, ours = side_by_side("dropin/disallowed_torch_op")
        assert ours.graphs == 2 and ours.ops == theirs.ops == 2  # one add in each graph
        (record,) = graphlift.explain(make_add_sub_add())(torch.ones(2)).break_reasons
        assert "torch._dynamo.disallow_in_graph" in record.explanation
    assert trace_rules.lookup(torch.sub).rule is trace_rules.TORCH_OP  # undone with torch's


def make_add_mul_add():
    def f(x):
        x = torch.add(x, 1)
        x = torch.mul(x, 2)
        return torch.add(x, 1)

    return f


case("disallow_beats_allow", make_add_mul_add, within=functools.partial(disallowed, torch.mul))


@pytest.mark.filterwarnings("ignore:Dynamo does not know")  # torch's, on its side
def test_torch_disallow_in_graph_beats_graphlift_and_torch_allow_in_graph():
    graphlift.allow_in_graph(torch.mul)
    try:
        with disallowed(torch.mul):
            theirs, ours = side_by_side("dropin/disallow_beats_allow")
            assert ours.graphs == 2 and ours.ops == theirs.ops == 2
    finally:
        trace_rules.disallow_in_graph(torch.mul)  # graphlift's: undoes its allow_in_graph


MADE_OPAQUE: list = []  # what make_allowed_then_disallowed made, for forgetting_made_opaque


def make_allowed_then_disallowed():
    def opaque(x):
        return x.sin() * 2

    torch._dynamo.allow_in_graph(opaque)
    torch._dynamo.disallow_in_graph(opaque)  # no longer one node, and not inlined: a break
    MADE_OPAQUE.append(opaque)

    def f(x):
        return opaque(x + 1) * 3

    return f


@contextlib.contextmanager
def forgetting_made_opaque():
    """Take the functions make_allowed_then_disallowed made out of torch's registry after."""
    try:
        yield
    finally:
        while MADE_OPAQUE:
            torch._dynamo.trace_rules._disallowed_callable_ids.remove(id(MADE_OPAQUE.pop()))


case("allowed_then_disallowed", make_allowed_then_disallowed, within=forgetting_made_opaque)


def test_a_function_allowed_then_disallowed_by_torch_runs_as_a_compiled_frame():
    with forgetting_made_opaque():
        theirs, ours = side_by_side("dropin/allowed_then_disallowed")
        assert ours.graphs == theirs.graphs == 3 and ours.bodies == {}  # opaque: its own frame


def make_torch_graph_break():
    def f(x):
        x = x + 1
        torch._dynamo.graph_break()
        return x * 2

    return f


case("torch_graph_break", make_torch_graph_break)


def test_torch_graph_break():
    theirs, ours = side_by_side("dropin/torch_graph_break")
    assert ours.graphs == 2
    (record,) = graphlift.explain(make_torch_graph_break())(torch.ones(2)).break_reasons
    assert record.break_type.value == "forced"
    assert "torch._dynamo.decorators.graph_break() was called" in record.explanation


def test_graphlift_graph_break_is_a_forced_break():
    def f(x):
        x = x + 1
        graphlift.graph_break()
        return x * 2

    (record,) = graphlift.explain(f)(torch.ones(2)).break_reasons
    assert record.break_type.value == "forced"


IS_COMPILING = {
    "torch.compiler.is_compiling": torch.compiler.is_compiling,
    "torch._dynamo.is_compiling": torch._dynamo.is_compiling,
    "torch._utils.is_compiling": torch._utils.is_compiling,
    "torch.compiler.is_dynamo_compiling": torch.compiler.is_dynamo_compiling,
}


def make_asking_is_compiling(is_compiling):
    def f(x):
        if is_compiling():
            return x + 1
        return x - 1

    return f


for _name, _is_compiling in IS_COMPILING.items():
    case(f"is_compiling/{_name}", functools.partial(make_asking_is_compiling, _is_compiling))


@pytest.mark.filterwarnings("ignore:`torch._utils.is_compiling` is deprecated")
@pytest.mark.parametrize("name", IS_COMPILING)
def test_is_compiling_is_true_in_compiled_code(name):
    theirs, ours = side_by_side(f"dropin/is_compiling/{name}")
    assert_same(ours.results[0], torch.full((4,), 2.0))  # the compiled branch
    eagerly = make_asking_is_compiling(IS_COMPILING[name])(torch.ones(1))
    assert ours.graphs == 1 and eagerly.item() == 0.0  # eagerly: False


def make_is_compiling_in_a_disabled_function():
    @torch.compiler.disable
    def flag(x):
        return x * torch.compiler.is_compiling()

    def f(x):
        return flag(x) + torch.compiler.is_compiling()

    return f


case("is_compiling_in_a_disabled_function", make_is_compiling_in_a_disabled_function)


def test_is_compiling_is_false_in_a_disabled_function():
    theirs, ours = side_by_side("dropin/is_compiling_in_a_disabled_function")
    assert_same(ours.results[0], torch.ones(4))  # 1 * False + True


def make_asking_is_exporting():
    def f(x):
        return x + 1 if torch.compiler.is_exporting() else x - 1

    return f


case("is_exporting", make_asking_is_exporting)


def test_is_exporting_is_false_in_compiled_code():
    side_by_side("dropin/is_exporting")


# -- substitute_in_graph ---------------------------------------------------------------------------
def index_of(a, b, /):
    for i, item in enumerate(a):
        if item is b or item == b:
            return i
    raise ValueError("sequence.index(x): x not in sequence")


def adler32(data, value=1, /):
    low, high = value & 0xFFFF, value >> 16
    for byte in data:
        low = (low + byte) % 65521
        high = (high + low) % 65521
    return (high << 16) | low


def test_graphlift_substitute_in_graph_traces_the_stand_in():
    def f(x, data):
        return x * (zlib.adler32(data) % 7)

    with pytest.raises(graphlift.Unsupported, match="zlib.adler32"):
        graphlift.compile(f, fullgraph=True)(torch.ones(2), b"graph")
    eager_adler32 = graphlift.substitute_in_graph(zlib.adler32)(adler32)
    try:
        graphlift.reset()
        counter = CompileCounter()
        compiled = graphlift.compile(f, backend=counter, fullgraph=True)
        assert_same(compiled(torch.ones(2), b"graph"), f(torch.ones(2), b"graph"))
        assert counter.frame_count == 1
        assert eager_adler32(b"graph") == zlib.adler32(b"graph")  # eagerly, the original runs
        assert trace_rules.lookup(eager_adler32).kind is Kind.POLYFILL
    finally:
        graphlift.polyfills.POLYFILLS.pop(zlib.adler32)
        graphlift.polyfills.POLYFILLS.pop(eager_adler32)


def test_graphlift_substitute_in_graph_checks_the_signature_and_duplicates():
    with pytest.raises(TypeError, match="does not take the parameters"):
        graphlift.substitute_in_graph(operator.indexOf)(lambda a: 0)
    with pytest.raises(ValueError, match="already has a stand-in"):
        graphlift.substitute_in_graph(sum, skip_signature_check=True)(lambda *a: 0)
    with pytest.raises(TypeError, match="expects a callable"):
        graphlift.substitute_in_graph(3)


@functools.cache
def torch_substitutes_index_of() -> None:
    # torch's registry allows one stand-in per function for the process: indexOf is ours.
    torch.compiler.substitute_in_graph(operator.indexOf, can_constant_fold_through=True)(index_of)


def make_calling_index_of():
    torch_substitutes_index_of()

    def f(x, items):
        return x * operator.indexOf(items, 3) + operator.indexOf((5, 6), 6)

    return f


case("torch_substitute_in_graph", make_calling_index_of,
     calls=lambda: [(torch.ones(2), [1, 2, 3])] * 2, fullgraph=True)


def test_torch_substitute_in_graph_counts_for_graphlift():
    theirs = theirs_of("dropin/torch_substitute_in_graph")
    ours = ours_of("dropin/torch_substitute_in_graph")
    assert as_json(ours.results) == theirs.results
    assert ours.graphs == theirs.graphs == 1
    assert trace_rules.constant_foldable(operator.indexOf)  # the constant tuple: folded


# -- mark_dynamic and friends ----------------------------------------------------------------------
def sized(*shape_and_marks):
    """A tensor of that shape, marked by each (marker, dim) pair."""
    *shape, marks = shape_and_marks
    t = torch.ones(shape)
    for mark, dim in marks:
        mark(t, dim)
    return t


def graphs_over(compiler, marks, sizes, **settings) -> list:
    """Graphs ``compiler`` compiles over the sizes, and for each graph whether its size is a
    symbol: [graphs, [symbolic...]]."""
    graphlift.reset()

    def f(x):
        return x * 2

    symbolic: list[bool] = []

    def backend(gm, example_inputs):
        (tensor,) = [n.meta["example_value"] for n in gm.graph.nodes if n.op == "placeholder"
                     and isinstance(n.meta.get("example_value"), torch.Tensor)]
        symbolic.append(isinstance(tensor.shape[0], torch.SymInt))
        return gm.forward

    compiled = compiler(f, backend=backend, **settings)
    for size in sizes:
        compiled(sized(size, 3, marks))
    return [len(symbolic), symbolic]


MARKS = {
    "mark_dynamic": ([(torch._dynamo.mark_dynamic, 0)], {}),
    "maybe_mark_dynamic": ([(torch._dynamo.maybe_mark_dynamic, 0)], {}),
    "mark_unbacked": ([(torch._dynamo.decorators.mark_unbacked, 0)], {}),
    "mark_static under dynamic=True": ([(torch._dynamo.mark_static, 0)], {"dynamic": True}),
    "mark_dynamic beats mark_static": ([(torch._dynamo.mark_static, 0),
                                        (torch._dynamo.mark_dynamic, 0)], {}),
    "graphlift.mark_dynamic": ([(graphlift.mark_dynamic, 0)], {}),
}


MARKED_SIZES = (4, 5, 6)


def _torch_compile_graphs_over(name: str) -> list:
    """torch.compile's graphs_over the sizes, marked as MARKS[name] says."""
    marks, settings = MARKS[name]
    return graphs_over(torch.compile, marks, MARKED_SIZES, **settings)


for _name in MARKS:
    measure(f"dropin/dimension_marks/{_name}",
            functools.partial(_torch_compile_graphs_over, _name))


@pytest.mark.parametrize("name", MARKS)
def test_torch_dimension_marks_count_as_graphlift_marks(name):
    marks, settings = MARKS[name]
    theirs = recorded(f"dropin/dimension_marks/{name}")  # tests/reference
    ours = graphs_over(graphlift.compile, marks, MARKED_SIZES, **settings)
    if marks[0][0] is graphlift.mark_dynamic:  # torch.compile cannot see graphlift's mark
        assert ours == [1, [True]] and theirs == [2, [False, True]]
    else:
        assert ours == theirs


def only_four(x):
    if x.shape[0] == 4:  # a branch on the size specializes it
        return x + 1
    return x - 1


def raises_matching(call, pattern: str) -> bool:
    """Whether ``call()`` raises an Exception whose message matches ``pattern`` (re.search, as
    pytest.raises(match=) does)."""
    try:
        call()
    except Exception as error:
        return re.search(pattern, str(error)) is not None
    return False


def _torch_compile_specializing_a_mark() -> dict:
    """Whether torch.compile refuses a mark_dynamic dimension that tracing specializes, and its
    result where the mark was maybe_mark_dynamic."""
    x = sized(4, 3, [(torch._dynamo.mark_dynamic, 0)])
    refused = raises_matching(lambda: torch.compile(only_four, backend="eager")(x),
                              "marked .* as dynamic")
    y = sized(4, 3, [(torch._dynamo.maybe_mark_dynamic, 0)])  # specializing is allowed
    maybe_marked = torch.compile(only_four, backend="eager")(y)
    return {"refused": refused, "maybe_marked": as_json(maybe_marked)}


measure("dropin/marked_dimension_specialized", _torch_compile_specializing_a_mark)


def test_a_torch_marked_dimension_that_tracing_specializes_raises():
    theirs = recorded("dropin/marked_dimension_specialized")  # tests/reference
    assert theirs["refused"]
    x = sized(4, 3, [(torch._dynamo.mark_dynamic, 0)])
    with pytest.raises(graphlift.ConstraintViolationError, match="maybe_mark_dynamic"):
        graphlift.compile(only_four)(x)
    y = sized(4, 3, [(torch._dynamo.maybe_mark_dynamic, 0)])  # specializing is allowed
    assert as_json(graphlift.compile(only_four)(y)) == theirs["maybe_marked"]


def make_marking_static():
    def f(x):
        torch._dynamo.mark_static(x, 0)
        return x * 2

    return f


case("mark_static_inside", make_marking_static, calls=lambda: three_calls(4, 5, 6),
     dynamic=True)


def test_mark_static_inside_the_compiled_function_specializes():
    theirs, ours = side_by_side("dropin/mark_static_inside")
    assert ours.graphs == 3  # one per size


def marks_dynamic_inside(x):
    torch._dynamo.mark_dynamic(x, 0)
    return x + 1


def _torch_compile_marking_dynamic_inside() -> dict:
    """Whether torch.compile refuses mark_dynamic inside the compiled function."""
    return {"refused": raises_matching(
        lambda: torch.compile(marks_dynamic_inside, backend="eager")(torch.ones(4)),
        "forbidden callable")}


measure("dropin/mark_dynamic_inside", _torch_compile_marking_dynamic_inside)


def test_mark_dynamic_inside_the_compiled_function():
    """torch.compile refuses it (recorded); graphlift runs it eagerly at a graph break, then
    goes on."""
    f = marks_dynamic_inside
    assert recorded("dropin/mark_dynamic_inside") == {"refused": True}
    counter = CompileCounter()
    assert_same(graphlift.compile(f, backend=counter)(torch.ones(4)), torch.full((4,), 2.0))
    (record,) = graphlift.explain(f)(torch.ones(4)).break_reasons
    assert "torch_forbidden" in record.explanation
    with pytest.raises(graphlift.Unsupported, match="forbids it in a compiled region"):
        graphlift.compile(f, fullgraph=True)(torch.ones(4))


# -- stances ---------------------------------------------------------------------------------------
_lines = itertools.count(100_000)


def fresh(fn: types.FunctionType) -> types.FunctionType:
    """``fn`` with a code object of its own. torch's eager_then_compile remembers first calls
    by file and line, across torch._dynamo.reset(); graphlift, by code object until reset()."""
    code = fn.__code__.replace(co_firstlineno=next(_lines))
    return types.FunctionType(code, fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)


def frames_under_stance(compiler, counter, name: str, calls, setter) -> list:
    """[graph counts after each call (or the error), body runs] of ``compiler`` (its backend
    ``counter``) under stance ``name``."""
    graphlift.reset()

    def f(x):
        return x * 2

    f = fresh(f)
    compiled = compiler(f, backend=counter)
    seen = []
    with body_runs(f) as bodies, setter(name):
        for args in calls:
            try:
                compiled(*args)
                seen.append(counter.frame_count)
            except RuntimeError as error:  # torch's error; graphlift.RecompileError is one too
                seen.append("recompile refused" if "fail_on_recompile" in str(error)
                            else f"{type(error).__name__}: {error}")
    return [seen, dict(bodies)]


STANCE_CASES = {
    "default": [1, 2, 2, 2],
    "force_eager": [0, 0, 0, 0],
    "eager_on_recompile": [0, 0, 0, 0],
    "fail_on_recompile": ["recompile refused"] * 4,
    "eager_then_compile": [0, 1, 1, 1],  # the second call compiles the size dynamic at once
    "aot_eager_then_compile": [0, 1, 1, 1],  # the first compile, with aot_eager, is not counted
}


STANCE_CALLS = (4, 5, 6, 5)


def _torch_compile_under_stance(name: str) -> list:
    """torch.compile's frames_under_stance ``name``, set with torch.compiler.set_stance."""
    import torch._dynamo.testing

    return frames_under_stance(torch.compile, torch._dynamo.testing.CompileCounter(), name,
                               three_calls(*STANCE_CALLS), torch.compiler.set_stance)


for _name in STANCE_CASES:
    measure(f"dropin/stance_from_the_first_call/{_name}",
            functools.partial(_torch_compile_under_stance, _name))


@pytest.mark.parametrize("name, expected", STANCE_CASES.items(), ids=STANCE_CASES.keys())
@pytest.mark.parametrize("setter", [graphlift.set_stance, torch.compiler.set_stance],
                         ids=["graphlift.set_stance", "torch.compiler.set_stance"])
def test_stances_from_the_first_call(name, expected, setter):
    theirs = recorded(f"dropin/stance_from_the_first_call/{name}")  # tests/reference
    ours = frames_under_stance(graphlift.compile, CompileCounter(), name,
                               three_calls(*STANCE_CALLS), setter)
    assert ours == theirs
    assert ours[0] == expected


def stances_on_a_compiled_function(compiler, counter) -> dict:
    """Graph counts of ``compiler`` (its backend ``counter``) after a call under each stance,
    once compiled, and whether fail_on_recompile refused the miss."""
    compiled = compiler(lambda x: x * 2, backend=counter)
    compiled(torch.ones(4))
    seen = []
    with torch.compiler.set_stance("eager_on_recompile"):
        compiled(torch.ones(4))  # the entry fits: it runs
        compiled(torch.ones(2, 2))  # a miss: eager
        seen.append(counter.frame_count)
    with torch.compiler.set_stance("fail_on_recompile"):
        compiled(torch.ones(4))
        try:
            compiled(torch.ones(3, 3))
            refused = False
        except RuntimeError as error:
            refused = "fail_on_recompile" in str(error)
    with torch.compiler.set_stance("force_eager"):
        compiled(torch.ones(7))
        seen.append(counter.frame_count)
    compiled(torch.ones(5))  # default again: automatic dynamic
    seen.append(counter.frame_count)
    return {"graphs": seen, "refused": refused}


def _torch_compile_stances_once_compiled() -> dict:
    import torch._dynamo.testing

    return stances_on_a_compiled_function(torch.compile, torch._dynamo.testing.CompileCounter())


measure("dropin/stances_on_a_compiled_function", _torch_compile_stances_once_compiled)


def test_stances_on_a_function_already_compiled():
    theirs = recorded("dropin/stances_on_a_compiled_function")  # tests/reference
    ours = stances_on_a_compiled_function(graphlift.compile, CompileCounter())
    assert ours == theirs == {"graphs": [1, 1, 2], "refused": True}


def test_force_eager_skips_even_a_cache_hit():
    counter = CompileCounter()
    compiled = graphlift.compile(lambda x: x + 1, backend=counter)
    x = torch.ones(3)
    compiled(x)
    with graphlift.set_stance("force_eager"):
        compiled(x)
        assert graphlift.stats(compiled).hits == 0
    compiled(x)
    assert graphlift.stats(compiled).hits == 1 and stance.fast_path_open()


def test_set_stance_is_a_call_a_context_manager_and_a_decorator():
    compiled = graphlift.compile(lambda x: x + 1, backend=CompileCounter())

    @graphlift.set_stance("force_eager")
    def eager_inside(x):
        return compiled(x)

    assert stance.current().is_default  # decorating changed nothing outside
    eager_inside(torch.ones(2))
    assert graphlift.stats(compiled).compiles == 0
    graphlift.set_stance("eager_on_recompile")
    try:
        assert stance.current().name == "eager_on_recompile"
        compiled(torch.ones(2))
        assert graphlift.stats(compiled).compiles == 0
    finally:
        graphlift.set_stance("default")
    assert stance.current().is_default and stance.fast_path_open()


def test_graphlift_stance_beats_torch_stance_while_not_default():
    with torch.compiler.set_stance("force_eager"), graphlift.set_stance("fail_on_recompile"):
        assert stance.current().name == "fail_on_recompile"
    with torch.compiler.set_stance("force_eager"):
        assert stance.current().name == "force_eager"
    torch.compiler.set_stance("default")  # a new default object: taken as default
    assert stance.current().is_default and stance.fast_path_open()


def test_force_backend_compiles_misses_with_that_backend():
    wrapper_counter, forced = CompileCounter(), CompileCounter()
    compiled = graphlift.compile(lambda x: x - 1, backend=wrapper_counter)
    with graphlift.set_stance(force_backend=forced):
        compiled(torch.ones(2))
        compiled(torch.ones(2))
    assert (wrapper_counter.frame_count, forced.frame_count) == (0, 1)
    assert graphlift.stats(compiled).hits == 1


def make_times_n():
    def f(x, n):
        return x * n

    return f


case("eager_then_compile_changed_int", make_times_n,
     calls=lambda: [(torch.ones(4), n) for n in (2, 3, 4)],
     within=functools.partial(torch.compiler.set_stance, "eager_then_compile"))


def test_eager_then_compile_makes_a_changed_int_dynamic_at_the_first_compile():
    theirs = theirs_of("dropin/eager_then_compile_changed_int")
    with graphlift.set_stance("eager_then_compile"):
        ours = ours_of("dropin/eager_then_compile_changed_int")
    assert as_json(ours.results) == theirs.results
    assert ours.graphs == theirs.graphs == 1 and ours.bodies == theirs.bodies == {"f": 1}


@pytest.mark.parametrize("call, error", [
    (lambda: graphlift.set_stance("bogus"), "unknown stance 'bogus'"),
    (lambda: graphlift.set_stance("force_eager", force_backend="eager"), "default stance only"),
    (lambda: graphlift.set_stance(force_backend="nope"), "unknown backend 'nope'"),
    (lambda: graphlift.set_stance(skip_guard_eval_unsafe="yes"), "True or False"),
])
def test_set_stance_refuses_bad_settings_at_the_call(call, error):
    with pytest.raises((ValueError, TypeError), match=error):
        call()
    assert stance.current().is_default


# -- compile(): mode, options, disable, and what is refused at the call ----------------------------
def settings_seen(compiler, reset=lambda: None) -> list:
    """The settings a custom backend receives from ``compiler`` for each mode and options;
    ``reset()`` before each compile."""
    seen = []

    def backend(gm, example_inputs, **settings):
        seen.append(settings)
        return gm.forward

    for settings in ({}, {"mode": "reduce-overhead"}, {"options": {"trace": True}}):
        reset()
        compiler(lambda x: x + 1, backend=backend, **settings)(torch.ones(2))
    return seen


def _torch_compile_settings_seen() -> list:
    return settings_seen(torch.compile, reset=torch._dynamo.reset)


measure("dropin/mode_and_options_reach_a_custom_backend", _torch_compile_settings_seen)


def test_mode_and_options_reach_a_custom_backend_as_torch_compile_passes_them():
    theirs = recorded("dropin/mode_and_options_reach_a_custom_backend")  # tests/reference
    assert settings_seen(graphlift.compile) == theirs == [{}, {"mode": "reduce-overhead"},
                                                          {"options": {"trace": True}}]


def plus_one(x):
    return x + 1


def _torch_compile_disabled() -> dict:
    """Whether torch.compile(disable=True) returns the function itself."""
    return {"returns_the_function": torch.compile(plus_one, disable=True) is plus_one}


measure("dropin/disable_true", _torch_compile_disabled)


def test_disable_true_compiles_nothing():
    f = plus_one
    assert graphlift.compile(f, disable=True) is f
    assert recorded("dropin/disable_true") == {"returns_the_function": True}  # tests/reference
    assert graphlift.compile(disable=True)(f) is f
    assert graphlift.stats(f).compiles == 0


@pytest.mark.parametrize("settings, error", [
    ({"fullgraph": "yes"}, "fullgraph must be True or False"),
    ({"dynamic": "maybe"}, "dynamic must be None"),
    ({"recompile_limit": "many"}, "recompile_limit must be a positive int"),
    ({"recompile_limit": 0}, "recompile_limit must be a positive int"),
    ({"disable": "no"}, "disable must be True or False"),
    ({"mode": "max-autotune", "options": {"max_autotune": True}}, "not both"),
    ({"backend": "nope"}, "unknown backend 'nope'"),
    ({"options": "fast"}, "options must be a dict"),
    ({"backend": "inductor", "mode": "fastest"}, "unknown mode 'fastest'"),
    ({"backend": "inductor", "options": {"no_such_option": 1}}, "unknown inductor option"),
    ({"backend": "inductor", "options": {"max_autotune": "yes"}}, "must be bool"),
])
def test_bad_settings_are_refused_at_the_call(settings, error):
    with pytest.raises((TypeError, ValueError), match=error):
        graphlift.compile(lambda x: x, **settings)


def test_config_refuses_a_value_of_the_wrong_kind():
    with pytest.raises(TypeError, match="recompile_limit must be an int"):
        graphlift.config.recompile_limit = "many"
    with pytest.raises(TypeError, match="must be True or False"):
        graphlift.config.patch(raise_internal_errors="yes")
    with pytest.raises(TypeError, match="a tuple of module names"):
        graphlift.config.inline_modules = "colorsys"
    assert graphlift.config.recompile_limit == 8


def graphs_under_a_recompile_limit_of_one(compiler) -> int:
    counter = CompileCounter()
    compiled = compiler(lambda x, n: x * n, backend=counter, recompile_limit=1, dynamic=False)
    for n in (2, 3, 4):
        compiled(torch.ones(2), n)
    return counter.frame_count


def _torch_compile_recompile_limit_of_one() -> dict:
    return {"graphs": graphs_under_a_recompile_limit_of_one(torch.compile)}


measure("dropin/recompile_limit_of_one", _torch_compile_recompile_limit_of_one)


def test_recompile_limit_of_one_compile():
    outcomes = [recorded("dropin/recompile_limit_of_one")["graphs"],  # tests/reference
                graphs_under_a_recompile_limit_of_one(graphlift.compile)]
    assert outcomes == [1, 1]


def test_inductor_mode_becomes_inductor_settings():
    backend = graphlift.backends.configure("inductor", "max-autotune-no-cudagraphs", None)
    assert backend.settings == {"config_patches": {"max_autotune": True,
                                                   "coordinate_descent_tuning": True}}
    assert backend is graphlift.backends.configure("inductor", "max-autotune-no-cudagraphs",
                                                   None)  # shared: entries are shared too
    assert backend.__name__ == "inductor(config_patches={'max_autotune': True, " \
                               "'coordinate_descent_tuning': True})"


# -- error_on_graph_break --------------------------------------------------------------------------
def breaks_once(x):
    x = x + 1
    torch._dynamo.graph_break()
    return x * 2


def _torch_compile_error_on_graph_break() -> dict:
    """Whether torch.compile raises Unsupported at a break inside torch's error_on_graph_break."""
    with torch._dynamo.error_on_graph_break(True):
        try:
            torch.compile(breaks_once, backend="eager")(torch.ones(2))
        except torch._dynamo.exc.Unsupported:
            return {"raises_unsupported": True}
    return {"raises_unsupported": False}


measure("dropin/error_on_graph_break", _torch_compile_error_on_graph_break)


@pytest.mark.parametrize("system", ["graphlift", "torch"])
def test_error_on_graph_break_raises_where_it_is_on(system):
    context = graphlift.error_on_graph_break() if system == "graphlift" else \
        torch._dynamo.error_on_graph_break(True)
    with context:
        if system == "torch":  # graphlift's block is graphlift's alone
            assert recorded("dropin/error_on_graph_break") == {"raises_unsupported": True}
        with pytest.raises(graphlift.Unsupported, match="graph_break.. was called") as info:
            graphlift.compile(breaks_once)(torch.ones(2))
        assert "error_on_graph_break is on" in str(info.value)
        with graphlift.error_on_graph_break(False), torch._dynamo.error_on_graph_break(False):
            assert_same(graphlift.compile(breaks_once)(torch.ones(2)), torch.full((2,), 4.0))
    graphlift.reset()
    assert_same(graphlift.compile(breaks_once)(torch.ones(2)), torch.full((2,), 4.0))


def test_error_on_graph_break_as_a_decorator():
    @graphlift.error_on_graph_break()
    def strict(x):
        return graphlift.compile(breaks_once)(x)

    with pytest.raises(graphlift.Unsupported):
        strict(torch.ones(2))
    with pytest.raises(TypeError, match="True or False"):
        graphlift.error_on_graph_break("yes")


# -- what compile() takes --------------------------------------------------------------------------
class Scaler:
    k = 3

    def scale(self, x):
        return x * self.k

    @staticmethod
    def double(x):
        return x * 2

    @classmethod
    def triple(cls, x):
        return x * cls.k


class Affine:
    def __call__(self, x):
        return x * 2 + 1


CALLABLES = {
    "torch.sin": lambda: torch.sin,
    "torch.Tensor.relu": lambda: torch.Tensor.relu,
    "functools.partial": lambda: functools.partial(torch.add, other=2),
    "partial of a Python function": lambda: functools.partial(lambda x, k: x * k, k=3),
    "bound method": lambda: Scaler().scale,
    "static method": lambda: Scaler.double,
    "class method": lambda: Scaler.triple,
    "callable object": lambda: Affine(),
}


for _name, _make in CALLABLES.items():
    case(f"compile_takes/{_name}", _make)


@pytest.mark.parametrize("name", CALLABLES)
def test_compile_takes_what_torch_compile_takes(name):
    theirs, ours = side_by_side(f"dropin/compile_takes/{name}")
    assert ours.graphs == 1


def test_compiled_c_functions_have_caches_of_their_own():
    sin, cos = graphlift.compile(torch.sin), graphlift.compile(torch.cos)
    x = torch.randn(3)
    assert_same((sin(x), cos(x)), (x.sin(), x.cos()))
    assert graphlift.stats(sin).compiles == graphlift.stats(cos).compiles == 1


def test_compile_of_a_module_call_method():
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
    x = torch.randn(2, 3)
    for method in (model.__call__, model._call_impl):
        counter = CompileCounter()
        compiled = graphlift.compile(method, backend=counter)
        assert_same(compiled(x), model(x))
        assert counter.frame_count == 1 and graphlift.stats(compiled).compiles == 1
        graphlift.reset()


# -- install ---------------------------------------------------------------------------------------
@pytest.fixture
def installed():
    graphlift.install()
    yield
    graphlift.uninstall()


def test_install_routes_torch_compile_through_graphlift(installed):
    counter = CompileCounter()
    compiled = torch.compile(lambda x: x.sin() + 1, backend=counter)
    x = torch.randn(3)
    assert_same(compiled(x), x.sin() + 1)
    assert graphlift.stats(compiled).compiles == 1 and counter.frame_count == 1
    via_compiler = torch.compiler.compile(lambda x: x * 3, backend=counter)  # calls torch.compile
    via_compiler(x)
    assert graphlift.stats(via_compiler).compiles == 1
    torch.compiler.reset()  # clears graphlift's caches too
    assert graphlift.stats(compiled).compiles == 0


def test_install_routes_module_compile_through_graphlift(installed):
    model = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.ReLU())
    x = torch.randn(2, 3)
    expected = model(x)
    counter = CompileCounter()
    assert model.compile(backend=counter) is None  # in place, as torch's
    assert_same(model(x), expected)
    assert counter.frame_count == 1 and graphlift.stats(model).compiles == 1
    model.register_forward_hook(lambda module, args, out: out * 2)  # the hooked path
    assert_same(model(x), expected * 2)
    assert counter.frame_count == 2


def test_install_passes_backends_modes_and_options_through(installed):
    seen = []

    def backend(gm, example_inputs, **settings):
        seen.append(settings)
        return gm.forward

    torch.compile(lambda x: x + 1, backend=backend, mode="max-autotune")(torch.ones(2))
    assert seen == [{"mode": "max-autotune"}]
    assert dropin._backend(None) == "inductor"  # torch.compile's default
    with pytest.raises(ValueError, match="isolate_recompiles"):
        torch.compile(lambda x: x, isolate_recompiles=True)


def test_uninstall_puts_torch_back():
    originals = (torch.compile, torch.nn.Module.compile, torch.compiler.reset)
    graphlift.install()
    graphlift.install()  # twice is once
    assert torch.compile is dropin.compile and dropin.installed()
    graphlift.uninstall()
    assert (torch.compile, torch.nn.Module.compile, torch.compiler.reset) == originals
    assert not dropin.installed()


def test_graphlift_install_environment_variable(monkeypatch):
    monkeypatch.setenv("GRAPHLIFT_INSTALL", "1")
    try:
        dropin.configure_from_env()
        assert torch.compile is dropin.compile
    finally:
        graphlift.uninstall()
    monkeypatch.setenv("GRAPHLIFT_INSTALL", "yes")
    with pytest.raises(ValueError, match="GRAPHLIFT_INSTALL must be 1"):
        dropin.configure_from_env()


def test_graphlift_run_runs_a_script_with_torch_compile_routed(tmp_path):
    script = tmp_path / "uses_torch_compile.py"
    script.write_text(
        "import os, sys, torch\n"
        "compiled = torch.compile(lambda x: x * 2, backend='eager')\n"
        "print(torch.compile.__module__, os.environ['GRAPHLIFT_INSTALL'], sys.argv[1:],\n"
        "      compiled(torch.ones(2)).tolist())\n"
        "import graphlift\n"
        "print(graphlift.stats(compiled).graphs)\n"
        "sys.exit(3)\n")
    done = subprocess.run([sys.executable, "-m", "graphlift", "run", str(script), "--flag"],
                          capture_output=True, text=True, timeout=300,
                          cwd=pathlib.Path(__file__).parents[1])
    assert done.stdout.splitlines() == ["graphlift.dropin 1 ['--flag'] [2.0, 2.0]", "1"]
    assert done.returncode == 3


def test_the_transformers_example_prints_what_the_guide_shows():
    root = pathlib.Path(__file__).resolve().parents[1]
    env = {name: value for name, value in os.environ.items() if not name.startswith("GRAPHLIFT")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(root))
    done = subprocess.run([sys.executable, "examples/install_transformers.py"], cwd=root, env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]  # it asserts the logits equal eager's
    guide = (root / "docs" / "guide.md").read_text()
    shown = guide[guide.index("## Drop-in for torch.compile"):].split("\n## ", 1)[0]
    assert done.stdout.splitlines() and all(line in shown for line in done.stdout.splitlines())
