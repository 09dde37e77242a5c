"""The instruction layer's version rules, checked against what the running CPython compiles."""

import dis

import pytest

from graphlift import bytecode


def test_versions_outside_the_table_are_refused():
    for version in bytecode.SUPPORTED_VERSIONS:
        bytecode.check_python_version(version)
    for version in ((3, 9), (3, 14)):
        with pytest.raises(ImportError, match=f"this is Python {version[0]}.{version[1]}"):
            bytecode.check_python_version(version)


def _global_call():
    return len(())


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


def test_keyword_calls_decode_as_kw_names_then_call():
    names = [inst.opname for inst in bytecode.decode(_keywords.__code__)]
    assert "CALL_KW" not in names
    i = names.index("KW_NAMES")
    assert [n for n in names[i + 1:] if n != "PRECALL"][0] == "CALL"  # 3.11 has PRECALL between
    assert bytecode.kw_names(_keywords.__code__, bytecode.decode(_keywords.__code__)[i]) == ("k",)


def test_resume_arguments_are_the_location_only():
    resumes = {inst.arg for inst in bytecode.decode(_generator.__code__)
               if inst.opname == "RESUME"}
    assert resumes == {0, 1, 2}  # start, after a yield, after a yield from
