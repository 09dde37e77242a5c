"""Small text helpers the generator's versions share."""

from __future__ import annotations

import ast
import re


def replace_word(text: str, word: str, value: str) -> str:
    return re.sub(rf"\b{word}\b", value, text)


def wrap(expr: str) -> str:
    """``expr`` in parentheses where an operator would bind into it."""
    try:
        node = ast.parse(expr, mode="eval").body
    except SyntaxError:
        return f"({expr})"
    if isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Compare, ast.BoolOp, ast.IfExp,
                         ast.Lambda)):
        return f"({expr})"
    return expr


def indent(lines: list[str]) -> list[str]:
    return ["    " + line for line in lines]
