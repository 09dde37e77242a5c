"""Printing a benchmark's rows: a Markdown table for docs/, or aligned columns."""

from __future__ import annotations


def print_rows(head: tuple | list, lines: list, markdown: bool) -> None:
    """Print ``head`` and ``lines`` (rows of cells) as a Markdown table or as padded columns."""
    if markdown:
        print("| " + " | ".join(head) + " |")
        print("|" + "---|" * len(head))
        for cells in lines:
            print("| " + " | ".join(cells) + " |")
    else:
        widths = [max(len(str(c[i])) for c in [head, *lines]) for i in range(len(head))]
        for cells in [head, *lines]:
            print("  ".join(str(c).ljust(w) for c, w in zip(cells, widths)))
