"""Iterators: over items known while tracing, lazy stand-ins, and generators, stepped one item
at a time.

``IteratorVariable`` holds the items (GET_ITER over a range, list, tensor...).
``itertools.count`` and ``itertools.repeat`` are real stand-in objects
(:mod:`graphlift.polyfills.itertools`) made while tracing and advanced only when the trace asks
for the next item (``for``, ``next()``, ``zip`` and the other polyfills that pull items).

A call of a generator function is a :class:`GeneratorVariable`: the callee's frame, an inlining
translator that has not started. Each ``next`` resumes it up to its next ``yield``, so the
body's side effects interleave with the consumer's exactly as in eager Python, and a generator
that never ends is fine as long as its consumer stops.

:func:`iterator_of` (GET_ITER, ``for``, ``iter()``, ``enumerate``, ``zip``) gives, by what the
value is, the iterator that CPython's would behave like when the loop body changes the container:

====================  ==========================================================================
list                  :class:`ListIteratorVariable`: reads the list's items at each step, so
                      items appended in the body are reached and popped ones are not
dict, its views, a    :class:`CheckedIteratorVariable`: raises eager's ``RuntimeError`` when the
set, a deque          container changes size during the loop (values are read at each step)
an iterator           itself (a generator, ``zip``, ``enumerate``: each steps when asked)
a range               :class:`RangeIteratorVariable`: the rest of the range, stepped (never
                      listed, so its size does not matter)
anything else         :class:`IteratorVariable` over its items, taken at once (tuples,
                      strings, tensors: nothing can change them)
====================  ==========================================================================
"""

from __future__ import annotations

import collections
import enum
import types
from collections.abc import Iterator
from typing import Any, Protocol

from graphlift import bytecode
from graphlift.exc import Unsupported
from graphlift.rebuild import Codegen
from graphlift.variables.base import TracedException, Translator, VariableTracker, raise_real
from graphlift.variables.constant import ConstantVariable, wrap_constant
from graphlift.variables.containers import (
    DictVariable,
    DictViewVariable,
    ListVariable,
    SetVariable,
    TupleVariable,
    key_tracker,
)
from graphlift.variables.exceptions import ExceptionVariable, stop_iteration_error, tracker_of


class IteratorVariable(VariableTracker):
    """An iterator over items known while tracing (GET_ITER over a range, list, tensor...)."""

    def __init__(self, items: list[VariableTracker]) -> None:
        super().__init__()
        self.items = items
        self.index = 0
        # What a generator returned as it ended, for ``r = yield from gen()``.
        self.returned: VariableTracker | None = None

    def next_item(self) -> VariableTracker | None:
        """The next item, or None when the iterator is exhausted."""
        if self.index >= len(self.items):
            return None
        self.index += 1
        return self.items[self.index - 1]

    def send_item(self, value: VariableTracker) -> VariableTracker | None:
        """``yield from`` resuming with ``value``: only None can be sent to a plain iterator."""
        if not (value.is_constant() and value.as_constant() is None):
            raise Unsupported(f"send() of a value through yield from to {self!r}")
        return self.next_item()

    def iterate(self, tx) -> Iterator[VariableTracker]:
        """The items pulled one at a time, each when the consumer asks for it."""
        item = self.next_item()
        while item is not None:
            yield item
            item = self.next_item()

    def unpack(self, tx) -> list[VariableTracker]:
        rest = self.items[self.index:]
        self.index = len(self.items)
        return rest

    def stop_args(self) -> list[VariableTracker]:
        """The arguments of the StopIteration that the last exhausting ``next`` raises."""
        return []

    def reconstruct(self, codegen: Codegen) -> str:
        """Alive at a graph break or returned: an iterator over the items not yet taken (they
        are a snapshot: of a tuple, a range, a tensor's rows). Subclasses that step a live
        container rebuild themselves or refuse."""
        if type(self) is not IteratorVariable:
            return super().reconstruct(codegen)
        return codegen.remember(self, lambda cg: "iter(({}))".format(
            "".join(f"{item.reconstruct(cg)}, " for item in self.items[self.index:])))


class SteppedIteratorVariable(IteratorVariable):
    """An iterator whose items are made by ``next_item`` at each step, not held in ``items``."""

    def unpack(self, tx) -> list[VariableTracker]:
        return list(self.iterate(tx))


class ListIteratorVariable(SteppedIteratorVariable):
    """``iter(list)``: an index into the list tracker's items as they are at each step.

    Once exhausted it stays exhausted, even if the list grows later (as CPython's does).
    """

    def __init__(self, seq: ListVariable) -> None:
        super().__init__([])
        self.seq = seq
        self.exhausted = False

    def next_item(self) -> VariableTracker | None:
        items = self.seq.items
        if self.exhausted or self.index >= len(items):
            self.exhausted = True
            return None
        self.index += 1
        return items[self.index - 1]

    def reconstruct(self, codegen: Codegen) -> str:
        """The list (the same object as the frame's) and an iterator over it that has given
        ``index`` items; an exhausted one stays exhausted."""
        return codegen.remember(self, lambda cg: (
            f"{cg.constant(resumed_list_iterator)}({self.seq.reconstruct(cg)}, {self.index}, "
            f"{self.exhausted})"))


def resumed_list_iterator(items: list, index: int, exhausted: bool) -> Any:
    """``iter(items)`` advanced by ``index`` steps (what a trace left alive at a break)."""
    iterator = iter(() if exhausted else items)
    for _ in range(index):
        next(iterator, None)
    return iterator


class RangeIteratorVariable(SteppedIteratorVariable):
    """``iter(range)`` and ``reversed(range)``: the range not yet given, one step at a time, so
    a huge range costs nothing until stepped (``for i in range(10**12): ... break``)."""

    def __init__(self, rest: range) -> None:
        super().__init__([])
        self.rest = rest

    def next_item(self) -> VariableTracker | None:
        if not self.rest:
            return None
        item, self.rest = self.rest[0], self.rest[1:]
        return ConstantVariable(item)

    def reconstruct(self, codegen: Codegen) -> str:
        return codegen.remember(self, lambda cg: f"iter({cg.constant(self.rest)})")


class ReversedListIteratorVariable(SteppedIteratorVariable):
    """``reversed(list)``: an index from the end into the list's items as they are at each step
    (it stops for good at an index past a list that shrank, as CPython's does)."""

    def __init__(self, seq: ListVariable) -> None:
        super().__init__([])
        self.seq = seq
        self.index = len(seq.items) - 1

    def next_item(self) -> VariableTracker | None:
        items = self.seq.items
        if not 0 <= self.index < len(items):
            self.index = -1
            return None
        self.index -= 1
        return items[self.index + 1]


class CheckedIteratorVariable(SteppedIteratorVariable):
    """``iter()`` of a dict, a dict view, a set or a deque: eager raises ``RuntimeError`` at the
    next step when the container changed size during the loop (for a deque: changed at all).

    A dict or set that had a key put in during the loop and is back at its old size (``del d[0];
    d[0] = 0``, ``s.remove(1); s.add(1)``) is not followed: what CPython's iterator does next
    (``dictionary keys changed during iteration``, or which keys it still gives) depends on
    whether the real hash table was resized, which the trace cannot know, so it gives up rather
    than guess. Partial: the items of an object's ``__dict__`` count no insertions, so there
    only a change in the keys' order is seen.
    """

    def __init__(self, container: VariableTracker, kind: str = "keys",
                 tx: Translator | None = None) -> None:
        super().__init__([])
        self.container, self.kind = container, kind
        self.tx = tx  # a registry dict's class or function keys need it for their trackers
        self.start = self._state()
        self.keys = self._keys()
        self.start_items = container.items
        self.start_inserts = getattr(container.items, "inserts", None)
        self.broken = False  # CPython's error is sticky: every later step raises again

    def _keys(self) -> list[Any]:
        if _is_deque(self.container):
            return list(self.container.items)
        if isinstance(self.container, SetVariable):
            return list(set(self.container.items))  # the order a real set iterates in
        return list(self.container.items)

    def _state(self) -> tuple:
        items = self.container.items
        if _is_deque(self.container):
            return tuple(id(i) for i in items)
        return (len(items),)

    def _key_put_in(self) -> bool:
        """Whether a key may have gone into the dict or set since the loop began."""
        items = self.container.items
        if self.start_inserts is not None:
            return items.inserts != self.start_inserts
        if isinstance(self.container, SetVariable):
            return items is not self.start_items  # every set method makes a new items dict
        return self._keys() != self.keys

    def next_item(self) -> VariableTracker | None:
        if self.broken or self._state() != self.start:
            self.broken = True
            raise raise_real(RuntimeError(_changed_message(self.container)))
        if not _is_deque(self.container) and self._key_put_in():
            raise Unsupported("a key went into the dict or set during its iteration and its "
                              "size is back: CPython's next step depends on its hash table")
        if self.index >= len(self.keys):
            return None
        key = self.keys[self.index]
        self.index += 1
        if _is_deque(self.container):
            return key
        if self.kind == "keys":
            return self._key(key)
        value = self.container.items[key]
        return value if self.kind == "values" else TupleVariable([self._key(key), value])

    def _key(self, key: Any) -> VariableTracker:
        return key_tracker(self.tx, key) if self.tx is not None else wrap_constant(key)


class EnumerateIteratorVariable(SteppedIteratorVariable):
    """``enumerate(iterable, start)``: steps its iterator only when asked (lists stay live)."""

    def __init__(self, inner: IteratorVariable, start: int) -> None:
        super().__init__([])
        self.inner, self.count = inner, start

    def next_item(self) -> VariableTracker | None:
        item = self.inner.next_item()
        if item is None:
            return None
        self.count += 1
        return TupleVariable([wrap_constant(self.count - 1), item])


class ZipIteratorVariable(SteppedIteratorVariable):
    """``zip(*iterables)``: one item from each iterator in turn, to the shortest, when asked."""

    def __init__(self, inners: list[IteratorVariable]) -> None:
        super().__init__([])
        self.inners = inners

    def next_item(self) -> VariableTracker | None:
        if not self.inners:
            return None
        row = []
        for inner in self.inners:
            item = inner.next_item()
            if item is None:
                return None  # the items taken from earlier iterators are lost, as in CPython
            row.append(item)
        return TupleVariable(row)


def _is_deque(value: VariableTracker) -> bool:
    # By type: the deque tracker (variables/collections.py) is built on the builtins, which
    # build on these iterators.
    return isinstance(value, ListVariable) and value.python_type() is collections.deque


def _changed_message(container: VariableTracker) -> str:
    if _is_deque(container):
        return "deque mutated during iteration"
    if isinstance(container, SetVariable):
        return "Set changed size during iteration"
    return "dictionary changed size during iteration"


def iterator_of(tx, value: VariableTracker) -> IteratorVariable:
    """``iter(value)``: the iterator that behaves like CPython's (see the module docstring)."""
    if isinstance(value, IteratorVariable):
        return value  # iter(iterator) is the iterator itself
    if _is_deque(value):
        return CheckedIteratorVariable(value)
    if isinstance(value, ListVariable):
        return ListIteratorVariable(value)
    if isinstance(value, ConstantVariable) and type(value.value) is range:
        return RangeIteratorVariable(value.value)
    if isinstance(value, DictViewVariable):
        return CheckedIteratorVariable(value.dict, value.kind, tx)
    if isinstance(value, (DictVariable, SetVariable)):
        return CheckedIteratorVariable(value, tx=tx)
    return IteratorVariable(value.unpack(tx))


class LazyIteratorVariable(IteratorVariable):
    """An iterator whose items are made on demand by a real stand-in object."""

    def __init__(self, stand_in: Any) -> None:
        super().__init__([])
        self.stand_in = stand_in

    def describe(self) -> str:
        return type(self.stand_in).__name__

    def python_type(self) -> type:
        return type(self.stand_in)._graphlift_real_class

    def is_constant(self) -> bool:
        return False  # never folded: that would consume it (or never end)

    def next_item(self) -> VariableTracker | None:
        try:
            value = next(self.stand_in)
        except StopIteration:
            return None
        return value if isinstance(value, VariableTracker) else wrap_constant(value)

    def unpack(self, tx) -> list[VariableTracker]:
        if not self.stand_in._graphlift_finite():
            raise Unsupported(
                f"itertools.{self.describe()}() never ends, so it cannot be unpacked",
                hints=("bound it: zip() with a finite iterable, itertools.islice(), or a loop "
                       "with break",))
        items = []
        item = self.next_item()
        while item is not None:
            items.append(item)
            item = self.next_item()
        return items

    def iterate(self, tx) -> Iterator[VariableTracker]:
        return iter(self.unpack(tx))  # an endless one is refused: list.extend(count()) never ends


class GeneratorState(enum.Enum):
    """Where a traced generator is, as ``inspect.getgeneratorstate`` names it."""

    CREATED = "GEN_CREATED"  # called, its body not started: it can be made again at a break
    SUSPENDED = "GEN_SUSPENDED"  # stopped at a yield
    RUNNING = "GEN_RUNNING"  # its frame is running (a generator that advances itself fails)
    CLOSED = "GEN_CLOSED"  # returned or raised
    FAILED = "failed"  # tracing its frame failed: it cannot be used again


# Builtin functions (not classes) whose polyfill generator stands for an iterator of this class.
REAL_ITERATOR_CLASSES: dict = {
    iter: type(iter(int, 0)),  # iter(function, sentinel) is a callable_iterator
}


class GeneratorFrame(Translator, Protocol):
    """The frame of an inlined generator function (``translator.InliningTranslator``), as its
    :class:`GeneratorVariable` steps it."""

    return_value: VariableTracker | None
    """What the frame returned, once it has ended."""

    def resume_generator(self, sent: VariableTracker | None) -> VariableTracker | None:
        """Run on to the next yield (the value yielded) or the end (None); ``sent`` is the value
        of the yield expression the frame is suspended at (None when it has not started)."""

    def throw_into_generator(self, exception: ExceptionVariable) -> VariableTracker | None:
        """Raise ``exception`` where the frame is suspended, then run on as ``resume_generator``
        does."""

    def suspended_in_handler(self) -> bool:
        """Whether closing the generator where it is suspended would run code of its frame."""


class GeneratorVariable(IteratorVariable):
    """A generator object made while tracing: the suspended frame of an inlined generator.

    ``frame`` is the callee's inlining translator (its own stack, locals and position); the call
    (``fn``, ``args``, ``kwargs``) is kept so that a generator that has not started can be made
    for real at a graph break. A polyfill generator that stands for a C iterator (``zip``,
    ``itertools.chain``) reports the original's class and is made with the original.
    """

    def __init__(self, frame: GeneratorFrame, fn: VariableTracker,
                 args: list[VariableTracker], kwargs: dict[str, VariableTracker]) -> None:
        super().__init__([])
        self.frame = frame
        self.fn, self.args, self.kwargs = fn, list(args), dict(kwargs)
        self.state = GeneratorState.CREATED
        self.stands_for: Any = None  # the C callable a polyfill generator replaces
        self.real_class: type = types.GeneratorType

    def describe(self) -> str:
        return f"{bytecode.qualname(self.frame.code)} {self.state.value}"

    def python_type(self) -> type:
        return self.real_class

    def truthy(self, tx) -> bool:
        return True

    def stand_for(self, original: Any) -> None:
        """This generator is a polyfill's: to the program it is ``original``'s iterator."""
        self.stands_for = original
        owner = getattr(original, "__self__", None)  # itertools.chain.from_iterable
        self.real_class = original if isinstance(original, type) else \
            owner if isinstance(owner, type) else REAL_ITERATOR_CLASSES.get(original,
                                                                            types.GeneratorType)

    # -- stepping ------------------------------------------------------------------------------
    def next_item(self) -> VariableTracker | None:
        return self.send_item(ConstantVariable(None))

    def send_item(self, value: VariableTracker) -> VariableTracker | None:
        """``gen.send(value)``: the next yielded item, or None when the generator returns
        (``returned`` is then what it returned)."""
        self.returned = None
        if self.state is GeneratorState.CLOSED:
            return None
        sent_none = value.is_constant() and value.as_constant() is None
        if self.stands_for is not None and not sent_none:
            raise Unsupported(f"send() to {self.describe()}, which has no send method")
        if self.state is GeneratorState.CREATED and not sent_none:
            raise raise_real(TypeError("can't send non-None value to a just-started generator"))
        started = self.state is GeneratorState.SUSPENDED
        return self._run(lambda: self.frame.resume_generator(value if started else None))

    def throw_item(self, exception: ExceptionVariable) -> VariableTracker | None:
        """``gen.throw(exception)``: raised at the yield the generator is suspended at."""
        self.returned = None
        if self.state in (GeneratorState.CREATED, GeneratorState.CLOSED):
            self._check_usable()
            self.state = GeneratorState.CLOSED  # a generator that never ran just raises
            raise self._leaving(TracedException(exception))
        return self._run(lambda: self.frame.throw_into_generator(exception))

    def close(self) -> VariableTracker:
        """``gen.close()``: GeneratorExit at the yield; the frame must not yield again. What
        ``close()`` returns: None, or on 3.13 what the generator returned on GeneratorExit."""
        if self.state in (GeneratorState.CREATED, GeneratorState.CLOSED):
            self._check_usable()
            self.state = GeneratorState.CLOSED
            return ConstantVariable(None)
        try:
            item = self.throw_item(ExceptionVariable(GeneratorExit, []))
        except TracedException as error:
            if issubclass(error.cls, (GeneratorExit, StopIteration)):
                return ConstantVariable(None)
            raise
        if item is not None:
            raise raise_real(RuntimeError("generator ignored GeneratorExit"))
        returned = self.returned if CLOSE_RETURNS_VALUE[bytecode.VERSION] else None
        return returned if returned is not None else ConstantVariable(None)

    def _check_usable(self) -> None:
        if self.state is GeneratorState.RUNNING:
            raise raise_real(ValueError("generator already executing"))
        if self.state is GeneratorState.FAILED:
            raise Unsupported(f"{self.describe()}: tracing its frame failed earlier")

    def _run(self, resume) -> VariableTracker | None:
        self._check_usable()
        self.state = GeneratorState.RUNNING
        try:
            item = resume()
        except TracedException as error:
            self.state = GeneratorState.CLOSED  # an exception leaving the frame ends it
            raise self._leaving(error) from None
        except BaseException:
            self.state = GeneratorState.FAILED
            raise
        if item is None:
            self.state = GeneratorState.CLOSED
            self.returned = self.frame.return_value
        else:
            self.state = GeneratorState.SUSPENDED
        return item

    @staticmethod
    def _leaving(error: TracedException) -> TracedException:
        """The exception the caller sees: a StopIteration becomes a RuntimeError (PEP 479)."""
        if issubclass(error.cls, StopIteration):
            return TracedException(stop_iteration_error(tracker_of(error)))
        return error

    def unpack(self, tx) -> list[VariableTracker]:
        return list(self.iterate(tx))

    def stop_args(self) -> list[VariableTracker]:
        returned = self.returned
        if returned is None or (returned.is_constant() and returned.as_constant() is None):
            return []
        return [returned]

    def left_open(self) -> bool:
        """Suspended inside a try or with block: closing it (eager Python does when the last
        reference goes) would run the block's handler."""
        return self.state is GeneratorState.SUSPENDED and self.frame.suspended_in_handler()

    # -- attributes and methods ----------------------------------------------------------------
    def var_getattr(self, tx, name):
        if name in ITERATOR_METHODS or (name in GENERATOR_METHODS and self.stands_for is None):
            return GeneratorMethodVariable(self, name)
        raise Unsupported(f"attribute {name!r} of {self!r}")

    def reconstruct(self, codegen: Codegen) -> str:
        """A generator that has not started is made again for real (calling a generator
        function runs none of its body); one that has ended, as a real one closed at once."""
        closed = self.state is GeneratorState.CLOSED and self.stands_for is None
        if self.state is not GeneratorState.CREATED and not closed:
            raise Unsupported(f"the generator {self.describe()} cannot leave the compiled frame "
                              "while it is suspended inside the trace")
        return codegen.remember(self, lambda cg: self._make(cg, closed))

    def _make(self, codegen: Codegen, closed: bool) -> str:
        fn = codegen.constant(self.stands_for) if self.stands_for is not None else \
            self.fn.reconstruct(codegen)
        parts = [a.reconstruct(codegen) for a in self.args]
        parts += [f"{k}={v.reconstruct(codegen)}" for k, v in self.kwargs.items()]
        call = f"{fn}({', '.join(parts)})"
        return f"{codegen.constant(closed_generator)}({call})" if closed else call


def closed_generator(generator: types.GeneratorType) -> types.GeneratorType:
    """``generator``, closed before it started: exhausted, and none of its body has run."""
    generator.close()
    return generator


# The iterator protocol; generator methods beyond it (a polyfill generator has only the protocol).
ITERATOR_METHODS = frozenset({"__next__", "__iter__"})
GENERATOR_METHODS = frozenset({"send", "throw", "close"})

# Whether ``generator.close()`` returns the value the generator returned on GeneratorExit
# (new in 3.13; before, close() always returns None).
CLOSE_RETURNS_VALUE = {(3, 10): False, (3, 11): False, (3, 12): False, (3, 13): True}


class GeneratorMethodVariable(VariableTracker):
    """``gen.send``, ``gen.throw``, ``gen.close``, ``gen.__next__`` and ``gen.__iter__``."""

    def __init__(self, generator: GeneratorVariable, name: str) -> None:
        super().__init__()
        self.generator, self.name = generator, name

    def describe(self) -> str:
        return f"generator.{self.name}"

    def python_type(self) -> type:
        return types.BuiltinMethodType

    def call(self, tx, args, kwargs):
        generator = self.generator
        if kwargs:
            raise raise_real(TypeError(f"generator.{self.name}() takes no keyword arguments"))
        if self.name == "__iter__":
            return generator
        if self.name == "close":
            return generator.close()
        if self.name == "throw":
            item = generator.throw_item(thrown_exception(args))
        else:
            item = generator.send_item(args[0] if self.name == "send" else ConstantVariable(None))
        if item is None:
            raise TracedException(ExceptionVariable(StopIteration, generator.stop_args()))
        return item


def thrown_exception(args: list[VariableTracker]) -> ExceptionVariable:
    """The exception ``gen.throw(typ[, value[, tb]])`` or ``gen.throw(exception)`` raises."""
    if not args:
        raise raise_real(TypeError("throw expected at least 1 argument, got 0"))
    first, value = args[0], args[1] if len(args) > 1 else None
    if isinstance(first, ExceptionVariable):
        return first
    cls = first.as_constant() if first.is_constant() else None
    if not (isinstance(cls, type) and issubclass(cls, BaseException)):
        raise raise_real(TypeError("exceptions must be classes or instances deriving from "
                                   f"BaseException, not {first.python_type().__name__}"))
    if isinstance(value, ExceptionVariable):
        return value
    if value is None or (value.is_constant() and value.as_constant() is None):
        return ExceptionVariable(cls, [])
    return ExceptionVariable(cls, [value])
