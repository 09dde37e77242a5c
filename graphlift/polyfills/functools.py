"""functools, in Python: ``reduce``, ``partial`` (as a stand-in class) and
``cached_property.__get__``."""

from __future__ import annotations

import functools

from graphlift.polyfills.support import call_original


def reduce(function, iterable, /, *initial):
    """functools.reduce: fold ``function`` over the items, from ``initial`` if given."""
    if len(initial) > 1:
        raise TypeError(f"reduce expected at most 3 arguments, got {2 + len(initial)}")
    iterator = iter(iterable)
    if initial:
        value = initial[0]
    else:
        try:
            value = next(iterator)
        except StopIteration:
            raise TypeError("reduce() of empty iterable with no initial value") from None
    for element in iterator:
        value = function(value, element)
    return value


class partial:
    """functools.partial as CPython's functools.py writes it: nested partials are flattened."""

    _graphlift_real_class = functools.partial

    def __init__(self, func, /, *args, **keywords):
        if not callable(func):
            raise TypeError("the first argument must be callable")
        if isinstance(func, functools.partial) and type(func) is not functools.partial:
            # CPython flattens a subclass's object too, unless it has a __dict__, which the
            # trace does not see: the real partial decides (a graph break).
            call_original(functools.partial, func, *args, **keywords)
        if type(func) is functools.partial:
            args = func.args + args
            keywords = {**func.keywords, **keywords}
            func = func.func
        self.func = func
        self.args = args
        self.keywords = keywords

    def __call__(self, /, *args, **keywords):
        keywords = {**self.keywords, **keywords}
        return self.func(*self.args, *args, **keywords)

    def _graphlift_to_real(self):
        return functools.partial(self.func, *self.args, **self.keywords)

    @staticmethod
    def _graphlift_state(real):
        """The stand-in's attributes for a real partial; ``True``: read them from the object."""
        return {"func": real.func, "args": real.args, "keywords": real.keywords}, True


_NOT_FOUND = object()


def cached_property_get(self, instance, owner=None):
    """functools.cached_property.__get__ without its lock (a trace runs on one thread): the
    value cached in the instance dict, else computed once and stored there."""
    if instance is None:
        return self
    if self.attrname is None:
        raise TypeError("Cannot use cached_property instance without calling __set_name__ on it.")
    cache = instance.__dict__
    value = cache.get(self.attrname, _NOT_FOUND)
    if value is _NOT_FOUND:
        value = self.func(instance)
        cache[self.attrname] = value
    return value
