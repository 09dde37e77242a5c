"""Stand-ins for the re module, which is skipped with the rest of the standard library.

On constant arguments (a literal pattern and a string known while tracing) the originals run
for real while tracing: patterns and their matches are immutable values (``unittest``'s
``assertRaisesRegex`` compiles its pattern and searches the exception's message). On anything
else each stand-in declines, and the call is a graph break that names the original.
"""

from __future__ import annotations

import re as _re
from typing import Any

from graphlift.polyfills.support import call_original


def compile(pattern: Any, flags: Any = 0) -> Any:  # noqa: A001 -- re.compile's own name
    """``re.compile``."""
    return call_original(_re.compile, pattern, flags)


def search(pattern: Any, string: Any, flags: Any = 0) -> Any:
    """``re.search``."""
    return call_original(_re.search, pattern, string, flags)


def match(pattern: Any, string: Any, flags: Any = 0) -> Any:
    """``re.match``."""
    return call_original(_re.match, pattern, string, flags)


def fullmatch(pattern: Any, string: Any, flags: Any = 0) -> Any:
    """``re.fullmatch``."""
    return call_original(_re.fullmatch, pattern, string, flags)


def escape(pattern: Any) -> Any:
    """``re.escape``."""
    return call_original(_re.escape, pattern)
