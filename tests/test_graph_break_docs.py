"""The graph-break registry: stable ids, a docs section per id, and messages that print both.

Each section of docs/graph_breaks.md ends with an example; it runs here, eagerly and compiled,
and must give the section's break and eager Python's result (or its error).
"""

from __future__ import annotations

import logging
import pathlib
import re

import pytest
import torch

import graphlift
from graphlift import events
from graphlift.break_types import REGISTRY, BreakType, break_id, doc_link, reference
from graphlift.doctor import build_report, format_html, format_json, format_text
from graphlift.graph_break import listeners

DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs" / "graph_breaks.md"

# Written out, not computed: an id that changes or moves fails here. Add new types at the end.
STABLE_IDS = {
    "unsupported": "GL0001",
    "unsupported_opcode": "GL0002",
    "unsupported_call": "GL0003",
    "skipped_function": "GL0004",
    "data_dependent": "GL0005",
    "data_dependent_branch": "GL0006",
    "side_effect": "GL0007",
    "unsupported_operator": "GL0008",
    "torch_error": "GL0009",
    "user_exception": "GL0010",
    "forced": "GL0011",
    "data_dependent_guard": "GL0012",
    "higher_order_body": "GL0013",
}


def sections() -> dict[str, str]:
    """``{"GL0001": section text, ...}`` from the page's ``## GLxxxx`` headings."""
    parts = re.split(r"^## (GL\d{4})\n", DOCS.read_text(), flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def test_every_break_type_has_a_registry_row():
    assert set(REGISTRY) == set(BreakType)


def test_ids_are_stable_and_unique():
    assert {t.value: info.id for t, info in REGISTRY.items()} == STABLE_IDS
    assert len(set(STABLE_IDS.values())) == len(STABLE_IDS)
    assert all(re.fullmatch(r"GL\d{4}", break_id) for break_id in STABLE_IDS.values())


def test_every_id_has_a_docs_section_with_the_four_parts():
    found = sections()
    assert sorted(found) == sorted(STABLE_IDS.values())
    for break_type, break_id_ in STABLE_IDS.items():
        text = found[break_id_]
        assert text.startswith(f"\n**`{break_type}`: "), break_id_
        for part in ("What it means:", "Common causes:", "Fixes:", "Example:", "```python"):
            assert part in text, (break_id_, part)
        assert f"| [{break_id_}](#{break_id_.lower()}) | `{break_type}` |" in DOCS.read_text()


def test_links_name_the_section_anchor():
    assert doc_link("skipped_function") == "docs/graph_breaks.md#gl0004"
    assert reference(BreakType.FORCED) == "GL0011, docs/graph_breaks.md#gl0011"
    assert break_id("no_such_type") == "GL0001"  # unknown types are the catch-all


def run_example(code: str) -> tuple[object, object, list]:
    """Run a docs example: ``f(*args)`` eagerly, then compiled; results (or errors) and breaks."""
    def outcome(fn):
        try:
            return fn(*namespace["args"])
        except Exception as error:
            return (type(error), str(error))

    namespace: dict = {"__name__": "graph_break_docs_example"}
    exec(compile(code, str(DOCS), "exec"), namespace)  # noqa: S102
    eager = outcome(namespace["f"])
    seen: list = []
    listeners.append(seen.append)
    try:
        compiled = outcome(graphlift.compile(namespace["f"], backend="eager"))
    finally:
        listeners.remove(seen.append)
    return eager, compiled, seen


def same(eager, compiled) -> bool:
    if isinstance(eager, torch.Tensor):
        return isinstance(compiled, torch.Tensor) and torch.equal(eager, compiled)
    return eager == compiled


@pytest.mark.parametrize("break_type", list(STABLE_IDS))
def test_the_docs_example_gives_its_break_and_eager_results(break_type, capsys):
    text = sections()[STABLE_IDS[break_type]]
    code = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    eager, compiled, seen = run_example(code)
    assert same(eager, compiled), (eager, compiled)
    assert break_type in [record.break_type.value for record in seen]
    assert all(record.id == STABLE_IDS[record.break_type.value] for record in seen)
    capsys.readouterr()


# -- every message about a break prints its id and page ------------------------------------------
def prints_then_adds(x):
    print("tracing")
    return x + 1


def test_the_fullgraph_error_names_the_id_and_page(capsys):
    with pytest.raises(graphlift.Unsupported) as info:
        graphlift.compile(prints_then_adds, fullgraph=True)(torch.ones(2))
    assert str(info.value).splitlines()[-1] == "  see: GL0004, docs/graph_breaks.md#gl0004"


def test_the_graph_break_log_names_the_id_and_page(caplog, capsys):
    caplog.set_level(logging.INFO, logger="graphlift")
    graphlift.set_logs(graph_breaks=True)
    try:
        graphlift.compile(prints_then_adds)(torch.ones(2))
    finally:
        graphlift.set_logs(graph_breaks=False)
    (text,) = [r.getMessage() for r in caplog.records if r.name == "graphlift.graph_breaks"]
    assert "  See: GL0004, docs/graph_breaks.md#gl0004" in text.splitlines()


def test_explain_names_the_id_and_page(capsys):
    output = graphlift.explain(prints_then_adds)(torch.ones(2))
    assert output.break_reasons[0].id == "GL0004"
    assert "    See: GL0004, docs/graph_breaks.md#gl0004" in str(output).splitlines()


def test_the_doctor_names_the_id_and_page(monkeypatch, tmp_path, capsys):
    recorder = events.Recorder(str(tmp_path / "run.json"))
    monkeypatch.setattr(events, "_recorder", recorder)
    graphlift.compile(prints_then_adds)(torch.ones(2))
    report = build_report(recorder.as_dict(), script="s.py", args=[], exit_code=0, seconds=1.0)
    (group,) = report["graph_breaks"]
    assert (group["id"], group["docs"]) == ("GL0004", "docs/graph_breaks.md#gl0004")
    text = format_text(report)
    assert "1x GL0004 skipped_function at " in text
    assert "see: docs/graph_breaks.md#gl0004" in text
    assert '"id": "GL0004"' in format_json(report)
    assert "GL0004 skipped_function</code>" in format_html(report)
