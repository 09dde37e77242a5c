"""Corpus: one function per CPython opcode (3.11's, and those 3.12 and 3.13 added) that
graphlift must translate.

Each case names the opcode it covers, and the harness checks that the opcode really is in the
function's bytecode (nested code objects included), so a compiler change that stops emitting it
fails here instead of leaving the opcode silently untested. Async opcodes, ``PRINT_EXPR`` and
``IMPORT_STAR`` cannot appear in a compiled function and have no case; ``CACHE`` entries are not
instructions (``dis.get_instructions`` skips them).

PYTEST_DONT_REWRITE: pytest must not rewrite the ``assert`` statements of the corpus functions;
they are user code under test, compiled exactly as CPython compiles them.
"""

import sys

import pytest
import torch
from corpus.harness import R, case, case_ids, run_case

_OPCODE_GLOBAL = 0


class Plain:
    pass


def helper(x, k=1):
    return x * k


# -- no-ops and the call protocol --------------------------------------------------------------
def op_NOP(x):
    pass
    return x + 1


def op_RESUME(x):
    return x + 1


def op_PRECALL(x):
    return torch.sin(x)


def op_PUSH_NULL(x):
    f = helper
    return f(x)


def op_KW_NAMES(x):
    return helper(x, k=3)


def op_CALL(x):
    return x.relu().sum()


def op_CALL_FUNCTION_EX(x):
    args = (x,)
    kwargs = {"k": 2}
    return helper(*args, **kwargs)


def op_RETURN_VALUE(x):
    return x * 2


def op_EXTENDED_ARG(x, n):
    if n > 0:
        x = (x + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1
             + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1
             + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1
             + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1
             + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1
             + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1
             + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1)
    return x  # 3.10's jumps count instructions: 140 terms jump over more than 255


# -- stack manipulation ------------------------------------------------------------------------
def op_POP_TOP(x):
    x.sum()
    return x + 1


def op_COPY(x, n):
    return x * (0 < n < 5)


def op_SWAP(x):
    d = {"k": x}
    d["k"] += 1
    y, z = x, x + 1  # 3.10's ROT_TWO
    return d, z - y


# -- loads and stores --------------------------------------------------------------------------
def op_LOAD_CONST(x):
    return x + 2.5


def op_LOAD_FAST(x):
    return x * 2


def op_STORE_FAST(x):
    y = x + 1
    return y


def op_DELETE_FAST(x):
    y = x + 1
    z = y * 2
    del y
    return z


def op_LOAD_GLOBAL(x):
    return torch.cos(x)


def op_STORE_GLOBAL(x):
    global _OPCODE_GLOBAL
    _OPCODE_GLOBAL = 7
    return x * _OPCODE_GLOBAL


def op_DELETE_GLOBAL(x):
    global _OPCODE_TEMPORARY
    _OPCODE_TEMPORARY = 2
    y = x * _OPCODE_TEMPORARY
    del _OPCODE_TEMPORARY
    return y


def op_LOAD_ATTR(x):
    return x.T


def op_STORE_ATTR(x):
    p = Plain()
    p.value = x * 2
    return p.value


def op_DELETE_ATTR(x):
    p = Plain()
    p.a = 1
    p.b = x
    del p.a
    return p.b + 1, hasattr(p, "a")


def op_LOAD_METHOD(x):
    return x.mul(3)


# -- cells and closures ------------------------------------------------------------------------
def op_MAKE_FUNCTION(x):
    def inner(y):
        return y * 2
    return inner(x)


def op_MAKE_CELL(x):
    def inner():
        return x + 1
    return inner()


def op_LOAD_CLOSURE(x):
    k = 2

    def inner(y):
        return y * k
    return inner(x)


def op_COPY_FREE_VARS(x):
    k = 3

    def inner():
        return x * k
    return inner()


def op_LOAD_DEREF(x):
    k = 4

    def inner():
        return k
    return x * inner() + k


def op_STORE_DEREF(x):
    k = 1

    def bump():
        nonlocal k
        k = k + 1
    bump()
    return x * k


def op_DELETE_DEREF(x):
    k = 5

    def read():
        return k  # noqa: F821 (pyflakes misreads the del below)
    value = read()
    del k
    return x * value


def op_LOAD_CLASSDEREF(x):
    k = 6

    class Local:
        value = k
    return x * Local.value


def op_LOAD_BUILD_CLASS(x):
    class Local:
        scale = 2

        def apply(self, y):
            return y * self.scale
    return Local().apply(x)


def op_SETUP_ANNOTATIONS(x):
    class Local:
        scale: int = 3
    return x * Local.scale


# -- operators ---------------------------------------------------------------------------------
def op_BINARY_OP(x, y):
    return x + y, x - y, x * y, x / y, x @ y.t(), x ** 2


def op_UNARY_NEGATIVE(x):
    return -x


def op_UNARY_POSITIVE(x):
    return +(x * 2)


def op_UNARY_INVERT(x):
    return ~x


def op_UNARY_NOT(x, flag):
    return x * (not flag)


def op_COMPARE_OP(x, y):
    return x < y, x >= y, x == y


def op_IS_OP(x, y):
    missing = y is None
    return x * 2, missing


def op_CONTAINS_OP(x, key):
    return x * (key in ("a", "b")), key not in {"c": 1}


# -- subscripts --------------------------------------------------------------------------------
def op_BINARY_SUBSCR(x):
    return x[0], [x, x][1]


def op_STORE_SUBSCR(x):
    y = x.clone()
    y[0] = 5.0
    return y


def op_DELETE_SUBSCR(x):
    d = {"a": x, "b": x * 2}
    del d["a"]
    return d


def op_BUILD_SLICE(x):
    return x[1:3], x[::2]


# -- building containers -----------------------------------------------------------------------
def op_BUILD_TUPLE(x, y):
    pair = (x + 1, y)
    return pair


def op_BUILD_LIST(x):
    return [x, x + 1]


def op_LIST_APPEND(x):
    return [x * i for i in range(3)]


def op_LIST_EXTEND(x):
    return [x, *[x + 1, x + 2]]


def op_LIST_TO_TUPLE(x):
    return (*[x, x * 2], x * 3)


def op_BUILD_MAP(x, k):
    return {k: x + 1}


def op_BUILD_CONST_KEY_MAP(x):
    return {"a": x, "b": x * 2}


def op_MAP_ADD(x):
    return {i: x * i for i in range(3)}


def op_DICT_UPDATE(x):
    base = {"a": 1}
    return {**base, "b": x + 1}


def op_DICT_MERGE(x):
    kwargs = {"k": 4}
    return helper(x, **kwargs)


def op_BUILD_SET(x, k):
    s = {k, 2}
    return x * len(s), s


def op_SET_ADD(x):
    s = {i % 2 for i in range(5)}
    return x * len(s), s


def op_SET_UPDATE(x):
    s = {*[1, 2, 2], 3}
    return x * len(s), s


def op_UNPACK_SEQUENCE(x):
    pair = (x, x + 1)
    a, b = pair
    return a * b


def op_UNPACK_EX(x):
    a, *rest = [x, 1, 2]
    return a + len(rest), rest


def op_FORMAT_VALUE(x, n):
    return x * n, f"{n:02d}"


def op_BUILD_STRING(x, n):
    return x * n, f"n={n}!"


# -- jumps -------------------------------------------------------------------------------------
def op_JUMP_FORWARD(x, flag):
    if flag:
        y = x + 1
    else:
        y = x - 1
    y = y * 2  # 3.12 copies a bare return into both branches; this line it does not
    return y


def op_JUMP_BACKWARD(x):
    for i in range(3):
        x = x + i
    return x


def op_JUMP_BACKWARD_NO_INTERRUPT(x):
    def delegate():
        yield from [1, 2]
    return x * sum(delegate())


def op_POP_JUMP_FORWARD_IF_TRUE(x, flag):
    if not flag:
        x = x + 1
    return x


def op_POP_JUMP_FORWARD_IF_FALSE(x, flag):
    if flag:
        x = x + 1
    return x


def op_POP_JUMP_FORWARD_IF_NONE(x, y):
    if y is not None:
        x = x + y
    return x


def op_POP_JUMP_FORWARD_IF_NOT_NONE(x, y):
    if y is None:
        x = x * 2
    return x


def op_POP_JUMP_BACKWARD_IF_TRUE(x, n):
    i = 0
    while i < n:
        x = x + 1
        i += 1
    return x


def op_POP_JUMP_BACKWARD_IF_FALSE(x):
    done = False
    while not done:
        x = x * 2
        done = True
    return x


def op_POP_JUMP_BACKWARD_IF_NONE(x):
    node = None
    while node is None:
        x = x + 1
        node = 1
    return x


def op_POP_JUMP_BACKWARD_IF_NOT_NONE(x):
    node = {"next": None}
    while node is not None:
        x = x + 1
        node = node["next"]
    return x


def op_JUMP_IF_TRUE_OR_POP(x, a, b):
    return x * (a or b)


def op_JUMP_IF_FALSE_OR_POP(x, a, b):
    return x * (a and b)


# -- iteration ---------------------------------------------------------------------------------
def op_GET_ITER(x):
    return [t * 2 for t in [x, x + 1]]


def op_FOR_ITER(x):
    for t in (1, 2):
        x = x * t
    return x


# -- exceptions and with -----------------------------------------------------------------------
def op_RAISE_VARARGS(x):
    try:
        raise ValueError("v")
    except ValueError:
        return x + 1


def op_PUSH_EXC_INFO(x):
    try:
        raise KeyError("k")
    except KeyError:
        x = x * 2
    return x


def op_CHECK_EXC_MATCH(x):
    try:
        raise IndexError("i")
    except KeyError:
        x = x + 100
    except IndexError:
        x = x + 1
    return x


def op_POP_EXCEPT(x):
    try:
        raise ValueError("v")
    except ValueError as e:
        msg = str(e)
    return x + 1, msg


def op_RERAISE(x):
    try:
        try:
            raise ValueError("inner")
        finally:
            x = x + 1
    except ValueError:
        x = x * 2
    return x


def op_LOAD_ASSERTION_ERROR(x):
    assert x.dim() == 1, "expected a vector"
    return x + 1


def op_BEFORE_WITH(x):
    with torch.no_grad():
        return x * 2


def op_WITH_EXCEPT_START(x):
    try:
        with torch.no_grad():
            raise KeyError("k")
    except KeyError:
        x = x + 1
    return x


# except* is 3.11 syntax: its source is compiled only where it parses (3.10 has no
# CHECK_EG_MATCH, so the harness skips the case there before it reads the function).
_CHECK_EG_MATCH_SOURCE = """
def op_CHECK_EG_MATCH(x):
    try:
        raise ExceptionGroup("g", [ValueError("v")])
    except* ValueError:
        x = x + 1
    return x
"""


def _from_source(source, name):
    namespace = {}
    exec(compile(source, __file__, "exec"), namespace)
    return namespace[name]


op_CHECK_EG_MATCH = _from_source(_CHECK_EG_MATCH_SOURCE, "op_CHECK_EG_MATCH") \
    if sys.version_info >= (3, 11) else None


# -- generators --------------------------------------------------------------------------------
def op_RETURN_GENERATOR(x):
    def gen():
        yield x * 2
    return list(gen())


def op_YIELD_VALUE(x):
    def gen():
        yield x * 2
        yield x * 3
    return tuple(gen())


def op_GET_YIELD_FROM_ITER(x):
    def gen():
        yield from range(3)
    return x * sum(gen())


def op_SEND(x):
    def inner():
        yield 1
        yield 4

    def outer():
        yield from inner()
    return x * sum(outer())


# -- match -------------------------------------------------------------------------------------
def op_MATCH_SEQUENCE(x):
    match x.shape:
        case (a, b):
            return x * a * b
    return x


def op_GET_LEN(x):
    match [1, 2, 3]:
        case [a, *rest]:
            return x * a + len(rest)
    return x


def op_MATCH_MAPPING(x, config):
    match config:
        case {"scale": s}:
            return x * s
    return x


def op_MATCH_KEYS(x, config):
    match config:
        case {"a": a, "b": b}:
            return x * a + b
    return x


def op_MATCH_CLASS(x, value):
    match value:
        case int():
            return x + value
    return x


# -- imports -----------------------------------------------------------------------------------
def op_IMPORT_NAME(x):
    import math
    return x * math.pi


def op_IMPORT_FROM(x):
    from math import sqrt
    return x * sqrt(4)


# torch.compile 2.13 refuses these under fullgraph; the frame must still run eagerly and agree.
NO_HANDLER = "torch.compile has no handler for this opcode either (Missing bytecode handler)"
CLASS_BODY = "a class statement in the frame: torch.compile refuses __build_class__ too"

CASES = [
    case(op_NOP, R(3), opcodes=["NOP"]),
    case(op_RESUME, R(3), opcodes=["RESUME"]),
    case(op_PRECALL, R(3), opcodes=["PRECALL"]),
    case(op_PUSH_NULL, R(3), opcodes=["PUSH_NULL"]),
    case(op_KW_NAMES, R(3), opcodes=["KW_NAMES"]),
    case(op_CALL, R(3), opcodes=["CALL"]),
    case(op_CALL_FUNCTION_EX, R(3), opcodes=["CALL_FUNCTION_EX"]),
    case(op_RETURN_VALUE, R(3), opcodes=["RETURN_VALUE"]),
    case(op_EXTENDED_ARG, R(3), 1, opcodes=["EXTENDED_ARG"]),
    case(op_POP_TOP, R(3), opcodes=["POP_TOP"]),
    case(op_COPY, R(3), 2, opcodes=["COPY"]),
    case(op_SWAP, R(3), opcodes=["SWAP"]),
    case(op_LOAD_CONST, R(3), opcodes=["LOAD_CONST"]),
    case(op_LOAD_FAST, R(3), opcodes=["LOAD_FAST"]),
    case(op_STORE_FAST, R(3), opcodes=["STORE_FAST"]),
    case(op_DELETE_FAST, R(3), opcodes=["DELETE_FAST"]),
    case(op_LOAD_GLOBAL, R(3), opcodes=["LOAD_GLOBAL"]),
    case(op_STORE_GLOBAL, R(3), opcodes=["STORE_GLOBAL"]),
    case(op_DELETE_GLOBAL, R(3), opcodes=["DELETE_GLOBAL"], fallback=NO_HANDLER),
    case(op_LOAD_ATTR, R(2, 3), opcodes=["LOAD_ATTR"]),
    case(op_STORE_ATTR, R(3), opcodes=["STORE_ATTR"]),
    case(op_DELETE_ATTR, R(3), opcodes=["DELETE_ATTR"]),
    case(op_LOAD_METHOD, R(3), opcodes=["LOAD_METHOD"]),
    case(op_MAKE_FUNCTION, R(3), opcodes=["MAKE_FUNCTION"]),
    case(op_MAKE_CELL, R(3), opcodes=["MAKE_CELL"]),
    case(op_LOAD_CLOSURE, R(3), opcodes=["LOAD_CLOSURE"]),
    case(op_COPY_FREE_VARS, R(3), opcodes=["COPY_FREE_VARS"]),
    case(op_LOAD_DEREF, R(3), opcodes=["LOAD_DEREF"]),
    case(op_STORE_DEREF, R(3), opcodes=["STORE_DEREF"]),
    case(op_DELETE_DEREF, R(3), opcodes=["DELETE_DEREF"], fallback=NO_HANDLER),
    case(op_LOAD_CLASSDEREF, R(3), opcodes=["LOAD_CLASSDEREF"], fallback=CLASS_BODY),
    case(op_LOAD_BUILD_CLASS, R(3), opcodes=["LOAD_BUILD_CLASS", "LOAD_NAME", "STORE_NAME"],
         fallback=CLASS_BODY),
    case(op_SETUP_ANNOTATIONS, R(3), opcodes=["SETUP_ANNOTATIONS"], fallback=CLASS_BODY),
    case(op_BINARY_OP, R(3, 3), R(3, 3), opcodes=["BINARY_OP"]),
    case(op_UNARY_NEGATIVE, R(3), opcodes=["UNARY_NEGATIVE"]),
    case(op_UNARY_POSITIVE, R(3), opcodes=["UNARY_POSITIVE"]),
    case(op_UNARY_INVERT, R(3, dtype=torch.bool), opcodes=["UNARY_INVERT"]),
    case(op_UNARY_NOT, R(3), False, opcodes=["UNARY_NOT"]),
    case(op_COMPARE_OP, R(3), R(3), opcodes=["COMPARE_OP"]),
    case(op_IS_OP, R(3), None, opcodes=["IS_OP"]),
    case(op_CONTAINS_OP, R(3), "a", opcodes=["CONTAINS_OP"]),
    case(op_BINARY_SUBSCR, R(3), opcodes=["BINARY_SUBSCR"]),
    case(op_STORE_SUBSCR, R(3), opcodes=["STORE_SUBSCR"]),
    case(op_DELETE_SUBSCR, R(3), opcodes=["DELETE_SUBSCR"]),
    case(op_BUILD_SLICE, R(5), opcodes=["BUILD_SLICE"]),
    case(op_BUILD_TUPLE, R(3), R(3), opcodes=["BUILD_TUPLE"]),
    case(op_BUILD_LIST, R(3), opcodes=["BUILD_LIST"]),
    case(op_LIST_APPEND, R(3), opcodes=["LIST_APPEND"]),
    case(op_LIST_EXTEND, R(3), opcodes=["LIST_EXTEND"]),
    case(op_LIST_TO_TUPLE, R(3), opcodes=["LIST_TO_TUPLE"]),
    case(op_BUILD_MAP, R(3), "key", opcodes=["BUILD_MAP"]),
    case(op_BUILD_CONST_KEY_MAP, R(3), opcodes=["BUILD_CONST_KEY_MAP"]),
    case(op_MAP_ADD, R(3), opcodes=["MAP_ADD"]),
    case(op_DICT_UPDATE, R(3), opcodes=["DICT_UPDATE"]),
    case(op_DICT_MERGE, R(3), opcodes=["DICT_MERGE"]),
    case(op_BUILD_SET, R(3), 1, opcodes=["BUILD_SET"]),
    case(op_SET_ADD, R(3), opcodes=["SET_ADD"]),
    case(op_SET_UPDATE, R(3), opcodes=["SET_UPDATE"]),
    case(op_UNPACK_SEQUENCE, R(3), opcodes=["UNPACK_SEQUENCE"]),
    case(op_UNPACK_EX, R(3), opcodes=["UNPACK_EX"]),
    case(op_FORMAT_VALUE, R(3), 4, opcodes=["FORMAT_VALUE"]),
    case(op_BUILD_STRING, R(3), 4, opcodes=["BUILD_STRING"]),
    case(op_JUMP_FORWARD, R(3), True, opcodes=["JUMP_FORWARD"]),
    case(op_JUMP_BACKWARD, R(3), opcodes=["JUMP_BACKWARD"]),
    case(op_JUMP_BACKWARD_NO_INTERRUPT, R(3), opcodes=["JUMP_BACKWARD_NO_INTERRUPT"]),
    case(op_POP_JUMP_FORWARD_IF_TRUE, R(3), False, opcodes=["POP_JUMP_FORWARD_IF_TRUE"]),
    case(op_POP_JUMP_FORWARD_IF_FALSE, R(3), True, opcodes=["POP_JUMP_FORWARD_IF_FALSE"]),
    case(op_POP_JUMP_FORWARD_IF_NONE, R(3), R(3), opcodes=["POP_JUMP_FORWARD_IF_NONE"]),
    case(op_POP_JUMP_FORWARD_IF_NOT_NONE, R(3), None, opcodes=["POP_JUMP_FORWARD_IF_NOT_NONE"]),
    case(op_POP_JUMP_BACKWARD_IF_TRUE, R(3), 3, opcodes=["POP_JUMP_BACKWARD_IF_TRUE"]),
    case(op_POP_JUMP_BACKWARD_IF_FALSE, R(3), opcodes=["POP_JUMP_BACKWARD_IF_FALSE"]),
    case(op_POP_JUMP_BACKWARD_IF_NONE, R(3), opcodes=["POP_JUMP_BACKWARD_IF_NONE"]),
    case(op_POP_JUMP_BACKWARD_IF_NOT_NONE, R(3), opcodes=["POP_JUMP_BACKWARD_IF_NOT_NONE"]),
    case(op_JUMP_IF_TRUE_OR_POP, R(3), 0, 2, opcodes=["JUMP_IF_TRUE_OR_POP"]),
    case(op_JUMP_IF_FALSE_OR_POP, R(3), 3, 2, opcodes=["JUMP_IF_FALSE_OR_POP"]),
    case(op_GET_ITER, R(3), opcodes=["GET_ITER"]),
    case(op_FOR_ITER, R(3), opcodes=["FOR_ITER"]),
    case(op_RAISE_VARARGS, R(3), opcodes=["RAISE_VARARGS"]),
    case(op_PUSH_EXC_INFO, R(3), opcodes=["PUSH_EXC_INFO"]),
    case(op_CHECK_EXC_MATCH, R(3), opcodes=["CHECK_EXC_MATCH"]),
    case(op_POP_EXCEPT, R(3), opcodes=["POP_EXCEPT"]),
    case(op_RERAISE, R(3), opcodes=["RERAISE"]),
    case(op_LOAD_ASSERTION_ERROR, R(3), opcodes=["LOAD_ASSERTION_ERROR"]),
    case(op_BEFORE_WITH, R(3, requires_grad=True), opcodes=["BEFORE_WITH"]),
    case(op_WITH_EXCEPT_START, R(3), opcodes=["WITH_EXCEPT_START"]),
    case(op_CHECK_EG_MATCH, R(3), opcodes=["CHECK_EG_MATCH", "PREP_RERAISE_STAR"],
         fallback=NO_HANDLER, name="op_CHECK_EG_MATCH"),
    case(op_RETURN_GENERATOR, R(3), opcodes=["RETURN_GENERATOR"]),
    case(op_YIELD_VALUE, R(3), opcodes=["YIELD_VALUE"]),
    case(op_GET_YIELD_FROM_ITER, R(3), opcodes=["GET_YIELD_FROM_ITER"]),
    case(op_SEND, R(3), opcodes=["SEND"]),
    case(op_MATCH_SEQUENCE, R(2, 3), opcodes=["MATCH_SEQUENCE"]),
    case(op_GET_LEN, R(3), opcodes=["GET_LEN"]),
    case(op_MATCH_MAPPING, R(3), {"scale": 2.0}, opcodes=["MATCH_MAPPING"]),
    case(op_MATCH_KEYS, R(3), {"a": 2, "b": 1}, opcodes=["MATCH_KEYS"]),
    case(op_MATCH_CLASS, R(3), 4, opcodes=["MATCH_CLASS"]),
    case(op_IMPORT_NAME, R(3), opcodes=["IMPORT_NAME"]),
    case(op_IMPORT_FROM, R(3), opcodes=["IMPORT_FROM"]),
]


# -- opcodes that 3.12 added (their cases are skipped where the compiler does not emit them) ---
class SuperBase:
    factor = 3

    def scale(self, x):
        return x * 2


class SuperDerived(SuperBase):
    def scale(self, x):
        return super().scale(x) + 1  # zero-argument super: LOAD_SUPER_ATTR too


def op_RETURN_CONST(x):
    x.add_(1)
    return None


def op_BINARY_SLICE(x):
    return x[1:3] * 2


def op_STORE_SLICE(x):
    items = [x, x * 2, x * 3]
    items[0:2] = [x + 1]
    return items


def op_LOAD_FAST_AND_CLEAR(x):
    i = x * 2  # the comprehension's own i leaves the outer one alone
    ys = [i + 1 for i in (x, x * 3)]
    return i, ys


def op_LOAD_FAST_AND_CLEAR_unbound(x):
    ys = [i * 2 for i in (x, x + 1)]
    return ys


def op_LOAD_FAST_CHECK(x, flag):
    if flag:
        y = x * 2
    return y + 1


def op_LOAD_SUPER_ATTR(x):
    obj = SuperDerived()
    return obj.scale(x) + super(SuperDerived, obj).scale(x) * super(SuperDerived, obj).factor


def op_END_FOR(x):
    for k in (1, 2):
        x = x * k
    return x


def op_CLEANUP_THROW(x):
    def inner():
        try:
            yield 1
        except ValueError:
            return 5

    def outer():
        result = yield from inner()
        yield result
    gen = outer()
    next(gen)
    return x * gen.throw(ValueError)


def op_STOPITERATION_ERROR(x):
    def gen():
        yield 1
        raise StopIteration
    try:
        list(gen())
    except RuntimeError as error:
        return x + 1, str(error)
    return x


CASES += [
    case(op_RETURN_CONST, R(3), opcodes=["RETURN_CONST"]),
    case(op_BINARY_SLICE, R(5), opcodes=["BINARY_SLICE"]),
    case(op_STORE_SLICE, R(3), opcodes=["STORE_SLICE"]),
    case(op_LOAD_FAST_AND_CLEAR, R(3), opcodes=["LOAD_FAST_AND_CLEAR"]),
    case(op_LOAD_FAST_AND_CLEAR_unbound, R(3), opcodes=["LOAD_FAST_AND_CLEAR"]),
    case(op_LOAD_FAST_CHECK, R(3), True, opcodes=["LOAD_FAST_CHECK"]),
    case(op_LOAD_SUPER_ATTR, R(3), opcodes=["LOAD_SUPER_ATTR", "LOAD_SUPER_METHOD"]),
    case(op_END_FOR, R(3), opcodes=["END_FOR"]),
    case(op_CLEANUP_THROW, R(3), opcodes=["END_SEND", "CLEANUP_THROW"]),
    case(op_STOPITERATION_ERROR, R(3), opcodes=["CALL_INTRINSIC_1", "STOPITERATION_ERROR"]),
]


# -- opcodes that 3.13 added (skipped on 3.11 and 3.12) ----------------------------------------
def op_LOAD_FAST_LOAD_FAST(x, y):
    return x * y


def op_STORE_FAST_STORE_FAST(x, y):
    a, b = x, y
    a, b = b, a
    return a - b


def op_STORE_FAST_LOAD_FAST(x):
    return [v * 2 for v in (x, x + 1)]


def op_CALL_KW(x):
    return helper(x, k=3) + helper(k=2, x=x)


def op_TO_BOOL(x, flag, items):
    if flag:
        x = x + 1
    if not items:
        x = x * 2
    return x, bool(flag) and not items


def op_CONVERT_VALUE(x, n):
    return x + 1, f"{n!r} {n!s} {'é'!a}"


def op_FORMAT_SIMPLE(x, n):
    return x + 1, f"{n} and {n + 1}"


def op_FORMAT_WITH_SPEC(x, n):
    width = 6
    return x + 1, f"{n:>4}|{n:0{width}.2f}|{n!r:<5}"


def op_SET_FUNCTION_ATTRIBUTE(x):
    offset = x * 2

    def scale(v, k=2, *, j=3) -> torch.Tensor:
        return v * k * j + offset
    return scale(x), scale(x, 1, j=1)


CASES += [
    case(op_LOAD_FAST_LOAD_FAST, R(3), R(3), opcodes=["LOAD_FAST_LOAD_FAST"]),
    case(op_STORE_FAST_STORE_FAST, R(3), R(3), opcodes=["STORE_FAST_STORE_FAST"]),
    case(op_STORE_FAST_LOAD_FAST, R(3), opcodes=["STORE_FAST_LOAD_FAST"]),
    case(op_CALL_KW, R(3), opcodes=["CALL_KW", "KW_NAMES"]),
    case(op_TO_BOOL, R(3), 1, [], opcodes=["TO_BOOL"]),
    case(op_CONVERT_VALUE, R(3), 2.5, opcodes=["CONVERT_VALUE"]),
    case(op_FORMAT_SIMPLE, R(3), 7, opcodes=["FORMAT_SIMPLE"]),
    case(op_FORMAT_WITH_SPEC, R(3), 3.25, opcodes=["FORMAT_WITH_SPEC"]),
    case(op_SET_FUNCTION_ATTRIBUTE, R(3), opcodes=["SET_FUNCTION_ATTRIBUTE"]),
]


# -- opcodes only 3.10 has (skipped on 3.11 on) -------------------------------------------------
class Box:
    def __init__(self):
        self.items = [1.0, 2.0]


def op_CALL_FUNCTION(x):
    return helper(x) + torch.cos(x)


def op_CALL_FUNCTION_KW(x):
    return helper(x, k=3) + helper(k=2, x=x)


def op_CALL_METHOD(x):
    return x.add(1).mul(2)


def op_INPLACE_ADD(x):
    y = x * 1
    y += x
    y *= 2
    return y


def op_BINARY_SUBTRACT(x, y):
    return (x - y) / (y @ x.T + 1) ** 2 % 3, 7 // 2, 6 ^ 3, 1 << 4


def op_JUMP_ABSOLUTE(x):
    for k in range(3):
        x = x + k
    return x


def op_DUP_TOP_TWO(x):
    box = Box()
    box.items[0] += 3.0
    return x * box.items[0]


def op_ROT_N(x):
    match {"a": 1, "b": 2, "c": 3, "d": 4}:
        case {"a": a, "b": b, "c": c, "d": d}:
            return x * (a + 2 * b + 3 * c + 4 * d)
    return x


def op_COPY_DICT_WITHOUT_KEYS(x):
    match {"a": 1, "b": 2, "c": 3}:
        case {"a": a, **rest}:
            return x * a, sorted(rest.items())
    return x


def op_JUMP_IF_NOT_EXC_MATCH(x):
    try:
        try:
            raise KeyError("k")
        except ValueError:
            x = x + 100
    except (TypeError, KeyError) as error:
        x = x * 2
        note = str(error)
    return x, note


def op_SETUP_FINALLY(x):
    try:
        x = x + 1
        raise ValueError("v")
    except ValueError:
        x = x * 2
    finally:
        x = x - 1
    return x


def op_SETUP_WITH(x):
    try:
        with torch.no_grad():
            raise KeyError("k")
    except KeyError:
        x = x + 1
    return x


def op_YIELD_FROM(x):
    def inner():
        yield 1
        yield 4
        return 10

    def outer():
        total = yield from inner()
        yield total
    return x * sum(outer())


CASES += [
    case(op_CALL_FUNCTION, R(3), opcodes=["CALL_FUNCTION"]),
    case(op_CALL_FUNCTION_KW, R(3), opcodes=["CALL_FUNCTION_KW"]),
    case(op_CALL_METHOD, R(3), opcodes=["CALL_METHOD"]),
    case(op_INPLACE_ADD, R(3), opcodes=["INPLACE_ADD", "INPLACE_MULTIPLY"]),
    case(op_BINARY_SUBTRACT, R(3, 3), R(3, 3),
         opcodes=["BINARY_SUBTRACT", "BINARY_TRUE_DIVIDE", "BINARY_MATRIX_MULTIPLY",
                  "BINARY_POWER", "BINARY_MODULO"]),
    case(op_JUMP_ABSOLUTE, R(3), opcodes=["JUMP_ABSOLUTE"]),
    case(op_DUP_TOP_TWO, R(3), opcodes=["DUP_TOP_TWO", "ROT_THREE"]),
    case(op_ROT_N, R(3), opcodes=["ROT_N", "ROT_FOUR", "DUP_TOP"]),
    case(op_COPY_DICT_WITHOUT_KEYS, R(3), opcodes=["COPY_DICT_WITHOUT_KEYS"]),
    case(op_JUMP_IF_NOT_EXC_MATCH, R(3), opcodes=["JUMP_IF_NOT_EXC_MATCH", "POP_EXCEPT"]),
    case(op_SETUP_FINALLY, R(3), opcodes=["SETUP_FINALLY", "POP_BLOCK"]),
    case(op_SETUP_WITH, R(3), opcodes=["SETUP_WITH", "WITH_EXCEPT_START"]),
    # 3.10 starts every generator body with GEN_START: op_YIELD_VALUE's generator has one.
    case(op_YIELD_VALUE, R(3), opcodes=["GEN_START"], name="op_GEN_START"),
    case(op_YIELD_FROM, R(3), opcodes=["YIELD_FROM"]),
]


@pytest.mark.parametrize("case", CASES, ids=case_ids(CASES))
def test_opcode(case):
    run_case(case)
