"""Log artifacts: GRAPHLIFT_LOGS parsing, set_logs, and what each artifact writes."""

import linecache
import logging

import pytest
import torch

import graphlift
from graphlift import logs


def sin_times(x, n):
    return torch.sin(x) * n


def prints(x):
    print("side effect")
    return x + 1


@pytest.fixture
def capture(caplog):
    caplog.set_level(logging.INFO, logger="graphlift")
    return caplog


def logged(caplog, artifact):
    return "\n".join(r.getMessage() for r in caplog.records if r.name == f"graphlift.{artifact}")


# -- GRAPHLIFT_LOGS ----------------------------------------------------------------------------
@pytest.mark.parametrize(("value", "expected"), [
    ("recompiles", {"recompiles": True}),
    ("recompiles,+guards,-bytecode", {"recompiles": True, "guards": True, "bytecode": False}),
    (" guards , graph_code ,", {"guards": True, "graph_code": True}),
    ("all", dict.fromkeys(logs.ARTIFACTS, True)),
    ("all,-bytecode", {**dict.fromkeys(logs.ARTIFACTS, True), "bytecode": False}),
    ("-all", dict.fromkeys(logs.ARTIFACTS, False)),
    ("", {}),
])
def test_parse_env(value, expected):
    assert logs.parse_env(value) == expected


def test_configure_from_env(monkeypatch):
    monkeypatch.setenv("GRAPHLIFT_LOGS", "recompiles,guards")
    logs.configure_from_env()
    assert logs.enabled("recompiles") and logs.enabled("guards")
    assert not logs.enabled("bytecode")


def test_configure_from_env_rejects_unknown_names(monkeypatch):
    monkeypatch.setenv("GRAPHLIFT_LOGS", "recompile")
    with pytest.raises(ValueError) as info:
        logs.configure_from_env()
    assert str(info.value) == (
        "GRAPHLIFT_LOGS='recompile': unknown log artifact 'recompile'; known: recompiles, "
        "graph_breaks, guards, graph_code, bytecode, progress, or all (-name turns one off)")


def test_set_logs_unknown_name():
    with pytest.raises(ValueError) as info:
        graphlift.set_logs(graph=True)
    assert str(info.value) == ("unknown log artifact 'graph'; known: "
                               "recompiles, graph_breaks, guards, graph_code, bytecode, progress")


def test_set_logs_on_and_off():
    graphlift.set_logs(graph_code=True)
    assert logs.enabled("graph_code")
    graphlift.set_logs(graph_code=False)
    assert not logs.enabled("graph_code")


# -- the artifacts -----------------------------------------------------------------------------
def test_everything_is_off_by_default(capture):
    compiled = graphlift.compile(sin_times)
    for n in (2, 3):
        compiled(torch.randn(3), n)
    assert capture.records == []


def test_graph_code_shows_the_captured_graph(capture):
    graphlift.set_logs(graph_code=True)
    compiled = graphlift.compile(sin_times)
    compiled(torch.randn(3), 2)
    text = logged(capture, "graph_code")
    assert "TRACED GRAPH GraphModule_0_0" in text
    assert graphlift.cache_entries(compiled)[0].graph.code.strip() in text
    assert "torch.sin(" in text and "* 2" in text


def test_guards_shows_each_guard_and_the_generated_function(capture):
    graphlift.set_logs(guards=True)
    compiled = graphlift.compile(sin_times)
    compiled(torch.randn(3), 2)
    text = logged(capture, "guards")
    entry = graphlift.cache_entries(compiled)[0]
    assert text.startswith("GUARDS 0/0 sin_times:")
    line = sin_times.__code__.co_firstlineno + 1
    origin = f"  # {linecache.getline(__file__, line).strip()}  at {__file__}:{line}"
    for guard in entry.guards:
        shown = f"  - {guard}{origin}\n"  # each guard names the line that read the value
        assert shown in text or guard.startswith("torch.") and f"  - {guard}\n" in text
    assert "L['x'].size()[0] == 3" in text and "L['n'] == 2" in text
    assert entry.guard_source in text


def test_graph_breaks_names_the_location_and_reason(capture, capsys):
    graphlift.set_logs(graph_breaks=True)
    graphlift.compile(prints)(torch.randn(3))
    text = logged(capture, "graph_breaks")
    line = prints.__code__.co_firstlineno + 1
    assert text.startswith(f"Graph break in user code at {__file__}:{line}")
    assert "Graph Break Reason: skipped_function: print()" in text
    assert 'print("side effect")' in text
    assert capsys.readouterr().out == "side effect\n"


def test_bytecode_shows_the_original_instructions(capture):
    graphlift.set_logs(bytecode=True)
    graphlift.compile(sin_times)(torch.randn(3), 2)
    text = logged(capture, "bytecode")
    assert text.startswith("ORIGINAL BYTECODE sin_times ")
    assert "LOAD_FAST" in text and "RETURN_VALUE" in text


def test_one_artifact_does_not_turn_on_another(capture):
    graphlift.set_logs(guards=True)
    compiled = graphlift.compile(sin_times)
    for n in (2, 3):
        compiled(torch.randn(3), n)
    assert {r.name for r in capture.records} == {"graphlift.guards"}
