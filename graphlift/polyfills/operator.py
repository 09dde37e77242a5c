"""operator's callable classes, in Python: ``itemgetter``, ``attrgetter``, ``methodcaller``."""

from __future__ import annotations

import functools
import operator


class itemgetter:
    """operator.itemgetter: ``obj[item]``, or a tuple of several items."""

    _graphlift_real_class = operator.itemgetter

    def __init__(self, item, /, *items):
        self._items = (item, *items)

    def __call__(self, obj, /):
        if len(self._items) == 1:
            return obj[self._items[0]]
        return tuple(obj[item] for item in self._items)

    def _graphlift_to_real(self):
        return operator.itemgetter(*self._items)

    @staticmethod
    def _graphlift_state(real):
        return {"_items": real.__reduce__()[1]}, False


class attrgetter:
    """operator.attrgetter: ``obj.name`` (dotted names follow each step), or a tuple of several."""

    _graphlift_real_class = operator.attrgetter

    def __init__(self, attr, /, *attrs):
        paths = []
        for name in (attr, *attrs):
            if not isinstance(name, str):
                raise TypeError("attribute name must be a string")
            paths.append(tuple(name.split(".")))
        self._paths = tuple(paths)

    def __call__(self, obj, /):
        if len(self._paths) == 1:
            return _resolve(obj, self._paths[0])
        return tuple(_resolve(obj, path) for path in self._paths)

    def _graphlift_to_real(self):
        return operator.attrgetter(*(".".join(path) for path in self._paths))

    @staticmethod
    def _graphlift_state(real):
        names = real.__reduce__()[1]
        return {"_paths": tuple(tuple(name.split(".")) for name in names)}, False


def _resolve(obj, path):
    for name in path:
        obj = getattr(obj, name)
    return obj


class methodcaller:
    """operator.methodcaller: ``obj.name(*args, **kwargs)``."""

    _graphlift_real_class = operator.methodcaller

    def __init__(self, name, /, *args, **kwargs):
        if not isinstance(name, str):
            raise TypeError("method name must be a string")
        self._name = name
        self._args = args
        self._kwargs = kwargs

    def __call__(self, obj, /):
        return getattr(obj, self._name)(*self._args, **self._kwargs)

    def _graphlift_to_real(self):
        return operator.methodcaller(self._name, *self._args, **self._kwargs)

    @staticmethod
    def _graphlift_state(real):
        maker, args = real.__reduce__()
        if isinstance(maker, functools.partial):  # keyword arguments: partial(cls, name, **kw)
            return {"_name": maker.args[0], "_args": args, "_kwargs": dict(maker.keywords)}, False
        return {"_name": args[0], "_args": args[1:], "_kwargs": {}}, False
