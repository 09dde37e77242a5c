"""The structured trace (``GRAPHLIFT_TRACE``): torch's TORCH_TRACE format, rendered by tlparse.

The file is parsed here the way tlparse parses it (its glog line pattern, payload lines after a
tab, the payload's MD5, interned file names), and every record is checked against what graphlift
itself reports: cache entries, guards, break records, recompile reasons. Where ``tlparse`` is
installed (the test extras install it from PyPI), it renders the file with ``--strict``, and where
Chromium is too, the rendered index page is loaded in it.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest
import torch

import graphlift
from graphlift import structured_trace

# tlparse's pattern for the prefix of a record line.
GLOG = re.compile(r"(?P<level>[VIWEC])(?P<month>\d{2})(?P<day>\d{2}) "
                  r"(?P<hour>\d{2}):(?P<minute>\d{2}):(?P<second>\d{2})\.(?P<micro>\d{6}) "
                  r"(?P<thread>\d+)(?P<pathname>[^:]+):(?P<line>\d+)\] (?P<payload>.)")


def parse(path: pathlib.Path) -> list[dict]:
    """Records as ``{"meta": envelope, "payload": text or None}``, checking MD5s and interning."""
    records, strings = [], {}
    lines = path.read_text().split("\n")
    assert lines[-1] == ""
    index = 0
    while index < len(lines) - 1:
        match = GLOG.match(lines[index])
        assert match, lines[index]
        envelope = json.loads(lines[index][match.start("payload"):])
        index += 1
        payload = []
        while index < len(lines) - 1 and lines[index].startswith("\t"):
            payload.append(lines[index][1:])
            index += 1
        text = "\n".join(payload) if "has_payload" in envelope else None
        if text is not None:
            assert hashlib.md5(text.encode()).hexdigest() == envelope["has_payload"]
        if "str" in envelope:
            name, number = envelope["str"]
            strings[number] = name
        for frame in envelope.get("dynamo_start", {}).get("stack", []):
            frame["filename"] = strings[frame["filename"]]  # interned before it is used
        records.append({"meta": envelope, "payload": text})
    return records


def of(records: list[dict], compile_id: str, name: str, artifact: str | None = None) -> list:
    frame, index = map(int, compile_id.split("/"))
    return [r for r in records if name in r["meta"] and r["meta"].get("frame_id") == frame
            and r["meta"].get("frame_compile_id") == index
            and (artifact is None or r["meta"][name].get("name") == artifact)]


@pytest.fixture
def trace_dir(tmp_path):
    structured_trace.enable(str(tmp_path))
    yield tmp_path
    structured_trace.disable()


def trace_file(directory: pathlib.Path) -> pathlib.Path:
    (path,) = directory.glob("dedicated_log_torch_trace_*.log")
    return path


def breaks_then_adds(x, n):
    y = torch.sin(x) * n
    print("halfway")
    return y + 1


GRAPH_LINE = breaks_then_adds.__code__.co_firstlineno + 1
CALL_LINE = None  # set by the test that calls it


def run_program() -> dict:
    """A break, a recompile (n becomes dynamic), a fullgraph failure; what graphlift reported."""
    global CALL_LINE
    compiled = graphlift.compile(breaks_then_adds)
    CALL_LINE = sys._getframe().f_lineno + 1
    compiled(torch.ones(3), 2)
    compiled(torch.ones(3), 3)
    with pytest.raises(graphlift.Unsupported):
        # fullgraph captures .item() (as torch.compile 2.13); a float tolist() still fails
        graphlift.compile(lambda x: x.tolist(), fullgraph=True)(torch.ones(2))
    return {entry.compile_id: entry for entry in graphlift.cache_entries(breaks_then_adds)}


def test_every_record_is_in_the_format_tlparse_reads(trace_dir, capsys):
    run_program()
    records = parse(trace_file(trace_dir))
    first = records[0]["meta"]
    assert first["artifact"] == {"name": "graphlift_version", "encoding": "json"}
    assert json.loads(records[0]["payload"])["torch"] == torch.__version__
    known = {"str", "artifact", "dynamo_start", "dynamo_output_graph", "dynamo_guards",
             "chromium_event", "compilation_metrics"}
    assert {next(iter(r["meta"])) for r in records} == known
    for record in records:
        if "frame_id" in record["meta"]:
            assert record["meta"]["attempt"] == 0


def test_each_compile_logs_its_stack_graph_guards_and_metrics(trace_dir, capsys):
    entries = run_program()
    records = parse(trace_file(trace_dir))
    for compile_id, entry in entries.items():
        (start,) = of(records, compile_id, "dynamo_start")
        stack = start["meta"]["dynamo_start"]["stack"]
        assert stack[-1] == {"line": breaks_then_adds.__code__.co_firstlineno,
                             "name": "breaks_then_adds", "filename": __file__}
        caller = [frame for frame in stack if frame["filename"] == __file__][-2]
        assert caller["name"] == "run_program" and caller["line"] in (CALL_LINE, CALL_LINE + 1)
        assert not any("graphlift" in os.path.dirname(frame["filename"]) for frame in stack)

        (graph,) = of(records, compile_id, "dynamo_output_graph")
        assert graph["payload"] == entry.graph.print_readable(
            print_output=False, include_stride=True, include_device=True)
        assert f"# File: {__file__}:{GRAPH_LINE} in breaks_then_adds, code: " \
               f"y = torch.sin(x) * n" in graph["payload"]
        assert graph["meta"]["dynamo_output_graph"]["sizes"]["sin"] == [3]

        (guards,) = of(records, compile_id, "dynamo_guards")
        assert [g["code"] for g in json.loads(guards["payload"])] == entry.guards
        (source,) = of(records, compile_id, "artifact", "graphlift_guard_source")
        assert source["payload"] == entry.guard_source

        (metrics,) = of(records, compile_id, "compilation_metrics")
        metrics = metrics["meta"]["compilation_metrics"]
        assert metrics["co_name"] == "breaks_then_adds" and metrics["co_filename"] == __file__
        assert metrics["guard_count"] == len(entry.guards)
        assert metrics["graph_op_count"] == graphlift.testing.count_ops(entry.graph)
        assert metrics["fail_type"] is None
        assert set(metrics["phase_seconds"]) == {"setup", "translate", "backend", "guards",
                                                 "codegen"}
        assert metrics["entire_frame_compile_time_s"] >= sum(metrics["phase_seconds"].values())
        # the frame was traced twice: to the print, then up to it
        assert metrics["dynamo_time_before_restart_s"] > 0
        # a begin and an end for the compile and its 7 phases (setup and translate twice)
        assert len(of(records, compile_id, "chromium_event")) == 2 * 8


def test_breaks_carry_their_id_and_count_as_restarts(trace_dir, capsys):
    run_program()
    records = parse(trace_file(trace_dir))
    (reason,) = of(records, "0/0", "artifact", "dynamo_graph_break_reason")
    assert reason["payload"].startswith(f"Graph break in user code at {__file__}:{GRAPH_LINE + 1}")
    assert "  See: GL0004, docs/graph_breaks.md#gl0004" in reason["payload"].splitlines()
    (metrics,) = of(records, "0/0", "compilation_metrics")
    (restart,) = metrics["meta"]["compilation_metrics"]["restart_reasons"]
    assert restart.startswith("GL0004 skipped_function at ") and "print()" in restart
    assert metrics["meta"]["compilation_metrics"]["graph_breaks"] == ["GL0004"]


def test_a_recompile_logs_the_reasons_the_recompiles_log_gives(trace_dir, capsys):
    run_program()
    records = parse(trace_file(trace_dir))
    (reasons,) = of(records, "0/1", "artifact", "recompile_reasons")
    (reason,) = json.loads(reasons["payload"])
    assert reason.startswith("0/0: L['n'] == 2 (now 3)  # y = torch.sin(x) * n  at ")
    assert of(records, "0/0", "artifact", "recompile_reasons") == []


def test_a_failed_compile_logs_the_failure(trace_dir, capsys):
    run_program()
    records = parse(trace_file(trace_dir))
    metrics = [r["meta"]["compilation_metrics"] for r in records
               if "compilation_metrics" in r["meta"]]
    (metrics,) = [m for m in metrics if m["fail_type"] is not None]
    assert metrics["fail_type"] == "Unsupported" and metrics["co_name"] == "<lambda>"
    assert metrics["fail_reason"].startswith("data_dependent: Tensor.tolist()")
    assert metrics["fail_reason"].endswith("see: GL0005, docs/graph_breaks.md#gl0005")
    assert metrics["fail_user_frame_filename"] == __file__


def test_a_recompile_limit_is_logged_under_the_latest_compile(trace_dir):
    compiled = graphlift.compile(lambda x, n: x * n, dynamic=False)
    with graphlift.config.patch(recompile_limit=2):
        for n in range(3):
            compiled(torch.ones(2), n)
    records = parse(trace_file(trace_dir))
    (limit,) = [r for r in records if r["meta"].get("artifact", {}).get("name") ==
                "graphlift_recompile_limit"]
    assert (limit["meta"]["frame_id"], limit["meta"]["frame_compile_id"]) == (0, 1)
    line = test_a_recompile_limit_is_logged_under_the_latest_compile.__code__.co_firstlineno + 1
    origin = f"  # compiled = graphlift.compile(lambda x, n: x * n, dynamic=False)  at " \
        f"{__file__}:{line}"
    assert limit["payload"].splitlines()[1:] == [f"- 0/1: L['n'] == 1 (now 2){origin}",
                                                 f"- 0/0: L['n'] == 0 (now 2){origin}"]


def test_a_trace_that_cannot_be_written_turns_itself_off(trace_dir, monkeypatch, caplog):
    def full_disk(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(structured_trace.TraceWriter, "record", full_disk)
    compiled = graphlift.compile(lambda x: x + 1)
    torch.testing.assert_close(compiled(torch.ones(2)), torch.ones(2) + 1)
    assert structured_trace.writer() is None
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith("GRAPHLIFT_TRACE: writing the structured trace failed (OSError")


def test_nothing_is_written_when_tracing_is_off(tmp_path):
    assert structured_trace.writer() is None
    graphlift.compile(lambda x: x + 1)(torch.ones(2))
    assert list(tmp_path.iterdir()) == []


def test_graphlift_trace_turns_it_on(tmp_path):
    script = "import torch, graphlift\ngraphlift.compile(lambda x: x + 1)(torch.ones(2))\n"
    env = {**os.environ, "GRAPHLIFT_TRACE": str(tmp_path), "OMP_NUM_THREADS": "1"}
    subprocess.run([sys.executable, "-c", script], env=env, check=True, timeout=300)
    assert of(parse(trace_file(tmp_path)), "0/0", "dynamo_output_graph")


def test_a_forked_process_writes_a_file_of_its_own(tmp_path, monkeypatch):
    writer = structured_trace.TraceWriter(str(tmp_path))
    writer.intern("model.py")
    child = os.getpid() + 1
    monkeypatch.setattr(os, "getpid", lambda: child)  # what a forked child sees: another pid
    writer.intern("model.py")
    first, second = sorted(tmp_path.glob("dedicated_log_torch_trace_*.log"), key=os.path.getmtime)
    for path in (first, second):  # each starts with the version and interns its own names
        records = parse(path)
        assert [next(iter(r["meta"])) for r in records] == ["artifact", "str"]


# -- tlparse renders it --------------------------------------------------------------------------
def tool(name: str) -> str | None:
    return shutil.which(name) or shutil.which(name, path=os.path.dirname(sys.executable))


def test_tlparse_renders_every_record(trace_dir, tmp_path, capsys):
    tlparse = tool("tlparse")
    if tlparse is None:
        pytest.skip("tlparse is not installed (pip install tlparse; the test extras have it)")
    entries = run_program()
    out = tmp_path / "tl_out"
    result = subprocess.run([tlparse, str(trace_file(trace_dir)), "-o", str(out), "--strict",
                             "--strict-compile-id", "--no-browser"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert "unknown" not in result.stderr.split("Stats")[-1], result.stderr
    index = (out / "index.html").read_text()
    for compile_id in entries:
        assert f"[{compile_id}]" in index
        directory = out / f"-_{compile_id.replace('/', '_')}_0"
        names = {re.sub(r"_\d+\.\w+$", "", p.name) for p in directory.iterdir()}
        assert {"dynamo_output_graph", "dynamo_guards", "compilation_metrics",
                "graphlift_guard_source"} <= names
    failures = (out / "failures_and_restarts.html").read_text()
    assert "GL0004 skipped_function" in failures and "GL0005" in failures
    assert "status-error" in index and "status-break" in index  # the fullgraph failure, a break
    chromium = tool("chromium") or tool("chromium-browser")
    if chromium is not None:
        dom = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu",
                              "--dump-dom", (out / "index.html").as_uri()],
                             capture_output=True, text=True, timeout=120).stdout
        assert "Stack trie" in dom and f"{__file__}:{CALL_LINE}" in dom
