"""Helpers that polyfills call and that the trace rules treat specially."""

from __future__ import annotations


def call_original(original, /, *args, **kwargs):
    """Run the C (or stdlib) original: the polyfill does not accept these arguments.

    Called for real, it just calls ``original``. While tracing, the trace rules make the call a
    graph break that names ``original``, so the original runs eagerly.
    """
    return original(*args, **kwargs)
