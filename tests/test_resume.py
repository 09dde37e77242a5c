"""Resume code objects on the running CPython, built and run directly (no translator).

Each test takes a function, picks the instruction a graph break would resume at, passes what the
frame held there (its locals, its stack, its cells) to the resume function and checks that it
finishes like the original: the same result, exception, side effects and line numbers.
"""

import dis
import sys
import types

import pytest

from graphlift import bytecode, resume
from graphlift.resume import ResumeKey, make_resume_code


def _offset(fn, opname, argval=None, nth=0):
    """The offset of ``fn``'s ``nth`` instruction ``opname`` (with that argval, if given)."""
    found = [i.offset for i in dis.get_instructions(fn)
             if i.opname == opname and (argval is None or i.argval == argval)]
    return found[nth]


def _call_index(instructions, nth):
    """The index of the call of the ``nth`` ``_times_ten`` among ``instructions``."""
    loads = [k for k, i in enumerate(instructions) if i.argval == "_times_ten"]
    return next(k for k in range(loads[nth], len(instructions))
                if instructions[k].opname in ("CALL", "CALL_FUNCTION"))


def _after_call(fn, nth):
    """The offset after the call of the ``nth`` ``_times_ten`` in ``fn``: where it resumes."""
    instructions = list(dis.get_instructions(fn))
    return instructions[_call_index(instructions, nth) + 1].offset


def _resume(fn, key):
    return types.FunctionType(make_resume_code(fn.__code__, key), fn.__globals__,
                              None, None, fn.__closure__)


def _times_ten(v):
    return v * 10


def _call_then_loops(x, y):
    a = x + 1
    b = _times_ten(a)
    c = b + y
    for i in range(3):
        c = c + i
    while c < 100:
        c = c * 2
    return c


def test_resume_after_a_call_goes_on_with_its_result():
    key = ResumeKey(_offset(_call_then_loops, "STORE_FAST", "b"), (False,),
                    frozenset({"b", "c", "i"}))
    fn = _resume(_call_then_loops, key)
    assert fn(1, 2, 2, None, None, None, _times_ten(2)) == _call_then_loops(1, 2) == 100
    assert fn.__code__.co_name == f"__resume_at_{key.offset}__call_then_loops"


def test_unbound_locals_are_unbound_again():
    def reads_unbound(x):
        y = _times_ten(x)
        if x:
            return y + z  # noqa: F821 -- z is assigned below: unbound here
        z = 1
        return z
    key = ResumeKey(_offset(reads_unbound, "STORE_FAST", "y"), (False,), frozenset({"y", "z"}))
    with pytest.raises(UnboundLocalError, match="'z'"):
        _resume(reads_unbound, key)(1, None, None, 10)


class _Namespace:
    def __init__(self):
        self.fn = _times_ten  # an instance attribute: LOAD_METHOD leaves a NULL below it

    def method(self, v):
        return v + 1


def _attribute_call(ns, x):
    return ns.fn(_times_ten(x)) + ns.method(_times_ten(x))


def test_a_null_below_a_callable_is_pushed_again():
    """``ns.fn(...)``: the stack holds NULL and the attribute (3.13: the other way round)."""
    nulls = bytecode.call_slots(False, True) + (False,)
    key = ResumeKey(_after_call(_attribute_call, 0), nulls)
    ns = _Namespace()
    assert _resume(_attribute_call, key)(ns, 2, ns.fn, 20) == _attribute_call(ns, 2) == 221


def test_a_bound_method_and_its_null_are_pushed_again():
    """The translator's LOAD_METHOD pushes the bound method and a NULL (never CPython's
    function and self), which the resume function's call finds as the original's did."""
    ns = _Namespace()
    # Below: the first call's result, then the bound method and its NULL.
    key = ResumeKey(_after_call(_attribute_call, 1),
                    (False, *bytecode.call_slots(False, True), False))
    assert _resume(_attribute_call, key)(ns, 2, 200, ns.method, 20) == 221


class _Recorder:
    """A context manager that records its enter and exit calls."""

    def __init__(self, events, name):
        self.events, self.name = events, name

    def __enter__(self):
        self.events.append(f"enter {self.name}")

    def __exit__(self, *exc_info):
        self.events.append(f"exit {self.name} {exc_info[0] and exc_info[0].__name__}")
        return False


def _in_with_blocks(events, x):
    with _Recorder(events, "outer"):
        y = 1
        with _Recorder(events, "inner"):
            y = _times_ten(x)
            z = y + 1  # raises when y is a string
        events.append("between")
        z = z * 2
    return z


def _with_resume(x):
    """The resume function at ``y = _times_ten(x)`` in the inner block, and the events the
    original logged up to the break."""
    events = []
    outer, inner = _Recorder(events, "outer"), _Recorder(events, "inner")
    outer.__enter__()
    inner.__enter__()
    key = ResumeKey(_offset(_in_with_blocks, "STORE_FAST", "y", nth=1), (False, False, False),
                    frozenset({"y", "z"}))
    fn = _resume(_in_with_blocks, key)
    return fn, events, (events, x, None, None, outer.__exit__, inner.__exit__)


@pytest.mark.parametrize("x, result", [(2, 42), ("s", TypeError)])
def test_resume_inside_with_blocks_leaves_them_through_their_exits(x, result):
    fn, events, args = _with_resume(x)
    eager_events = []
    if result is TypeError:
        with pytest.raises(TypeError):
            _in_with_blocks(eager_events, x)
        with pytest.raises(TypeError):
            fn(*args, _times_ten(x))
    else:
        assert _in_with_blocks(eager_events, x) == fn(*args, _times_ten(x)) == result
    assert events == eager_events


def test_with_blocks_are_resumable_try_blocks_are_not():
    def try_and_with(x):
        with _Recorder([], "a"):
            y = _times_ten(x)
        try:
            y = _times_ten(y)
        except ValueError:
            y = _times_ten(y)
        return y
    calls = [i.offset for i in dis.get_instructions(try_and_with)
             if i.opname in ("CALL", "CALL_FUNCTION") and i.arg == 1]
    code = try_and_with.__code__
    assert resume.why_not_resumable(code, calls[0]) is None
    assert resume.why_not_resumable(code, calls[1]) == "the break is inside a try block"
    if bytecode.VERSION == (3, 10):  # the handler's EXCEPT_HANDLER block is in the frame
        assert resume.why_not_resumable(code, calls[2]) == \
            "the break is inside an exception handler"


def _two_calls_in_with(events, x):
    with _Recorder(events, "a"):
        y = _times_ten(x)
        y = _times_ten(y)
    return y


def test_a_resume_function_inside_a_with_block_can_resume_again():
    """3.10's resume function sets the with block up again with SETUP_FINALLY: still a with
    block, not a try block, for the break at its own call."""
    events = []
    manager = _Recorder(events, "a")
    manager.__enter__()
    fn = _resume(_two_calls_in_with, ResumeKey(_after_call(_two_calls_in_with, 0),
                                               (False, False), frozenset({"y"})))
    instructions = list(dis.get_instructions(fn))
    second = instructions[_call_index(instructions, 1)].offset
    assert resume.why_not_resumable(fn.__code__, second) is None
    assert fn(events, 2, None, manager.__exit__, 20) == 200
    assert events == ["enter a", "exit a None"]


def _padded_source(padding):
    """A function whose loop starts about ``padding`` code units in: its backward jump's
    absolute target (3.10) crosses 255 code units somewhere in a range of paddings."""
    lines = ["def padded(t, x):"]
    lines += [f"    t = t + {i}" for i in range(padding // 4)]
    lines += ["    y = _times_ten(x)", "    for i in range(3):", "        if y > 25:",
              "            y = y - 1", "    return t + y"]
    return "\n".join(lines)


@pytest.mark.parametrize("padding", range(236, 264, 2))
def test_jumps_that_outgrow_a_byte_get_an_extended_arg(padding):
    namespace = {"_times_ten": _times_ten}
    exec(compile(_padded_source(padding), "<padded>", "exec"), namespace)
    padded = namespace["padded"]
    key = ResumeKey(_offset(padded, "STORE_FAST", "y"), (False,), frozenset({"y", "i"}))
    t = sum(range(padding // 4))  # t at the break
    assert _resume(padded, key)(t, 3, None, None, 30) == padded(0, 3)


def test_cells_of_arguments_and_of_locals_come_back():
    def with_cells(x, y):
        w = y * 2
        z = _times_ten(x)
        get = lambda: x + w  # noqa: E731
        w = w + z
        return get()
    offset = _offset(with_cells, "STORE_FAST", "z")
    assert resume.local_cells(with_cells.__code__) == ("w",)
    fn = _resume(with_cells, ResumeKey(offset, (False,), frozenset({"z", "get"})))
    assert fn(1, 2, None, None, 10, 4) == with_cells(1, 2) == 15


def _deleted_cell_argument(x, t):
    del x
    y = _times_ten(t)

    def inner():
        return x  # noqa: F821 -- deleted above: a NameError when called
    return inner, y


def test_an_unbound_argument_cell_is_unbound_again():
    """The cell stays (the inner function is made with it) and is empty, as in the original."""
    key = ResumeKey(_offset(_deleted_cell_argument, "STORE_FAST", "y"), (False,),
                    frozenset({"x", "y", "inner"}))
    inner, y = _resume(_deleted_cell_argument, key)(None, 2, None, None, 20)
    eager_inner, eager_y = _deleted_cell_argument(1, 2)
    assert y == eager_y == 20
    for fn in (inner, eager_inner):
        with pytest.raises(NameError, match="'x'"):
            fn()


def test_free_variables_are_read_from_the_closure():
    scale = 3

    def free(x):
        y = _times_ten(x)
        return y * scale
    fn = _resume(free, ResumeKey(_offset(free, "STORE_FAST", "y"), (False,), frozenset({"y"})))
    assert fn(1, None, 10) == free(1) == 30


def _raises_later(x):
    y = _times_ten(x)
    z = y + 1
    return z + "s"


def test_a_traceback_shows_the_original_lines():
    fn = _resume(_raises_later, ResumeKey(_offset(_raises_later, "STORE_FAST", "y"), (False,),
                                          frozenset({"y", "z"})))
    with pytest.raises(TypeError) as info:
        fn(1, None, None, 10)
    assert info.traceback[-1].lineno + 1 == _raises_later.__code__.co_firstlineno + 3
    prefix_end = min(start for start, _, line in fn.__code__.co_lines() if line is not None)
    assert prefix_end > 0  # the prefix has no line of its own
    assert sorted({line for _, _, line in fn.__code__.co_lines() if line is not None}) == \
        sorted({line for _, _, line in _raises_later.__code__.co_lines() if line is not None})


def test_at_line_places_every_instruction_at_one_line():
    code = bytecode.at_line(_call_then_loops.__code__, "user.py", "user_fn", 1234)
    assert {line for _, _, line in code.co_lines()} == {1234}
    assert (code.co_filename, code.co_name) == ("user.py", "user_fn")


@pytest.mark.skipif(bytecode.VERSION != (3, 10), reason="3.10's line table format")
@pytest.mark.parametrize("lines", [
    [5, 5, None, 6, 300, 300, 2, None, None, 7],  # deltas beyond a byte, both ways
    [9] * 300 + [None] * 200 + [10],  # runs beyond 254 bytes
    [None, 1, 1],
])
def test_line_table_310_reads_back(lines):
    code = compile("\n".join(["x = 0"] * 600), "<lines>", "exec")
    code = code.replace(co_code=bytes((dis.opmap["NOP"], 0)) * len(lines), co_firstlineno=3,
                        co_linetable=bytecode.line_table_310(lines, 3))
    read = [None] * len(lines)
    for start, end, line in code.co_lines():
        for offset in range(start, end, 2):
            read[offset // 2] = line
    assert read == lines


def test_the_version_tables_cover_every_supported_version():
    assert set(resume._ASSEMBLERS) == set(resume._BLOCK_CHECKS) == \
        set(bytecode.SUPPORTED_VERSIONS)
    assert sys.version_info[:2] in resume._ASSEMBLERS
