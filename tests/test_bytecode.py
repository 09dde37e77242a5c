"""The instruction layer's version rules, checked against what the running CPython compiles."""

import dis
import sys

import pytest

from graphlift import bytecode

only_310 = pytest.mark.skipif(sys.version_info[:2] != (3, 10), reason="3.10's own bytecode")
from_311 = pytest.mark.skipif(sys.version_info < (3, 11), reason="3.11's call and resume forms")


def test_versions_outside_the_table_are_refused():
    for version in bytecode.SUPPORTED_VERSIONS:
        bytecode.check_python_version(version)
    for version in ((3, 9), (3, 14)):
        with pytest.raises(ImportError, match=f"this is Python {version[0]}.{version[1]}"):
            bytecode.check_python_version(version)


def _global_call():
    return len(())


@from_311
def test_call_slots_follow_the_running_cpython():
    """dis shows where this CPython's LOAD_GLOBAL puts the NULL: "NULL + len" or "len + NULL"."""
    load = next(i for i in dis.get_instructions(_global_call) if i.opname == "LOAD_GLOBAL")
    null_first = load.argrepr.startswith("NULL + ")
    assert null_first != bytecode.NULL_ABOVE_CALLABLE
    assert bytecode.call_slots("fn", None) == (("fn", None) if not null_first else (None, "fn"))


def test_call_target_reads_either_order():
    def is_null(item):
        return item is None
    assert bytecode.call_target(None, "fn", is_null) == ("fn", None)  # 3.11, 3.12
    assert bytecode.call_target("fn", None, is_null) == ("fn", None)  # 3.13
    assert bytecode.call_target("function", "self", is_null) == ("function", "self")


def _loop(xs):
    for x in xs:
        xs = x
    return 7


def _keywords(f, x):
    return f(x, k=1)


def _generator(it):
    try:
        yield 1
    except ValueError:
        yield from it


def test_for_iter_exits_where_the_loop_is_done():
    instructions = bytecode.decode(_loop.__code__)
    by_offset = {inst.offset: inst for inst in instructions}
    exit_to = by_offset[next(i for i in instructions if i.opname == "FOR_ITER").argval]
    assert exit_to.is_jump_target
    assert exit_to.opname in ("LOAD_CONST", "RETURN_CONST")  # `return 7`, nothing of the loop


@from_311
def test_keyword_calls_decode_as_kw_names_then_call():
    names = [inst.opname for inst in bytecode.decode(_keywords.__code__)]
    assert "CALL_KW" not in names
    i = names.index("KW_NAMES")
    assert [n for n in names[i + 1:] if n != "PRECALL"][0] == "CALL"  # 3.11 has PRECALL between
    assert bytecode.kw_names(_keywords.__code__, bytecode.decode(_keywords.__code__)[i]) == ("k",)


@from_311
def test_resume_arguments_are_the_location_only():
    resumes = {inst.arg for inst in bytecode.decode(_generator.__code__)
               if inst.opname == "RESUME"}
    assert resumes == {0, 1, 2}  # start, after a yield, after a yield from


# -- 3.10 --------------------------------------------------------------------------------------
def _operators(a, b):
    c = a + b
    c -= a
    c, a = a, c  # ROT_TWO
    while c:
        c = c // 2
    return c ** a


def _decoded(fn):
    return [(inst.opname, inst.arg) for inst in bytecode.decode(fn.__code__)]


@only_310
def test_310_operators_and_jumps_decode_to_the_311_forms():
    names = _decoded(_operators)
    assert ("BINARY_OP", 0) in names and ("BINARY_OP", 23) in names  # NB_ADD, NB_INPLACE_SUBTRACT
    assert ("BINARY_OP", 2) in names and ("BINARY_OP", 8) in names  # //, **
    assert ("SWAP", 2) in names
    opnames = {name for name, _ in names}
    assert "POP_JUMP_FORWARD_IF_FALSE" in opnames and "POP_JUMP_BACKWARD_IF_TRUE" in opnames
    assert not opnames & {"BINARY_ADD", "INPLACE_SUBTRACT", "ROT_TWO", "POP_JUMP_IF_FALSE"}
    loop = [inst for inst in bytecode.decode(_loop.__code__)]
    back = next(inst for inst in loop if inst.opname == "JUMP_BACKWARD")  # JUMP_ABSOLUTE
    assert back.argval < back.offset
    assert not bytecode.pushes_null(next(i for i in loop if i.opname == "LOAD_CONST"))


def _handlers(x):
    try:
        x = x + 1  # raise here: the except clause, stack depth 0
    except ValueError as error:
        x = error  # raise here: the as-cleanup handler; leaving it restores no exception
    return x


def _with(manager):
    with manager as entered:
        return entered  # raise here: __exit__'s handler, with __exit__ kept below (depth 1)


@only_310
def test_310_block_stack_gives_the_exception_table():
    code = _handlers.__code__
    by_line = {inst.lineno: inst for inst in bytecode.decode(code) if inst.opname == "BINARY_OP"}
    add = by_line[_handlers.__code__.co_firstlineno + 2]
    entry = bytecode.exception_handler(code, add.offset)
    target = next(inst for inst in bytecode.decode(code) if inst.offset == entry.target)
    assert (entry.depth, entry.restore, target.opname) == (0, None, "COPY")  # DUP_TOP
    store = next(inst for inst in bytecode.decode(code)
                 if inst.opname == "STORE_FAST" and inst.argval == "x" and
                 inst.lineno == code.co_firstlineno + 4)
    cleanup = bytecode.exception_handler(code, store.offset)
    assert cleanup.depth == 3  # the previous exception's triple stays below the handler
    assert cleanup.restore is None  # its own block is innermost: the handler restores
    reraise = next(inst for inst in bytecode.decode(code)
                   if inst.offset == cleanup.target + 6)  # after `error = None; del error`
    assert reraise.opname == "RERAISE_310"
    with_code = _with.__code__
    ret = next(inst for inst in bytecode.decode(with_code) if inst.opname == "STORE_FAST")
    entry = bytecode.exception_handler(with_code, ret.offset)
    assert entry.depth == 1
    target = next(inst for inst in bytecode.decode(with_code) if inst.offset == entry.target)
    assert target.opname == "WITH_EXCEPT_START_310"


@only_310
def test_310_raise_in_an_except_block_restores_the_previous_exception():
    def nested(x):
        try:
            try:
                raise KeyError(x)
            except KeyError:
                raise ValueError(x) from None  # leaves the except block: its exception is restored
        except ValueError:
            return x
    code = nested.__code__
    raising = [inst for inst in bytecode.decode(code) if inst.opname == "RAISE_VARARGS"][1]
    entry = bytecode.exception_handler(code, raising.offset)
    assert entry.restore == entry.depth + 1  # the previous exception of the block it leaves
    assert bytecode.HANDLER_ENTRY[1] == "previous" and len(bytecode.HANDLER_ENTRY) == 6
