"""Verify mode (``config.verify``): hits also run eagerly and are compared; a wrong entry is
caught, reported with a reproducer that fails on its own, and runs eagerly from then on."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap

import pytest
import torch
from reference import measure, recorded

import graphlift
from graphlift import events, verify
from graphlift.doctor import render, report
from graphlift.testing import CompileCounter
from graphlift.verify import Outcome, difference, outcome_difference

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture
def warnings_seen(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The messages verify mode warns with (graphlift's logger may not propagate to caplog)."""
    seen: list[str] = []
    monkeypatch.setattr(verify.logs, "warn", seen.append)
    return seen


@pytest.fixture(autouse=True)
def repro_dir(tmp_path, monkeypatch: pytest.MonkeyPatch) -> str:
    folder = str(tmp_path / "repros")
    monkeypatch.setattr(verify, "REPRO_DIR", folder)
    return folder


def torch_compile_graphs(fn, make, calls: int = 3) -> int:
    """torch.compile's graph count over ``calls`` calls (run only by the recorder)."""
    from torch._dynamo.testing import CompileCounter as TorchCounter

    counter = TorchCounter()
    compiled = torch.compile(fn, backend=counter)
    for _ in range(calls):
        compiled(*make())
    return counter.frame_count


# == a deliberately wrong entry is caught, reported with a reproducer, and dropped ===============
USER_MODULE = '''
def scale(x, n):
    return {"out": (x * n, [n, "n"])}
'''


@pytest.fixture
def user_module(tmp_path, monkeypatch: pytest.MonkeyPatch):
    """A module of the user's, in a folder of its own (the reproducer imports it from there)."""
    folder = tmp_path / "user"
    folder.mkdir()
    (folder / "verify_user_code.py").write_text(USER_MODULE)
    monkeypatch.syspath_prepend(str(folder))
    sys.modules.pop("verify_user_code", None)
    yield importlib.import_module("verify_user_code")
    sys.modules.pop("verify_user_code", None)


@graphlift.config.patch(verify=1)
def test_a_wrong_entry_is_caught_reported_and_runs_eagerly(user_module, warnings_seen):
    recorder = events.Recorder("unused.json")
    events._recorder, saved = recorder, events._recorder
    try:
        compiled = graphlift.compile(user_module.scale)
        x = torch.arange(3.0)
        assert torch.equal(compiled(x, 3)["out"][0], x * 3)
        (entry,) = graphlift.cache_entries(user_module.scale)
        verify.drop_guard(entry, "L['n'] == 3")  # the test hook: the entry now serves n == 4
        assert entry.check(user_module.scale, {}, x, 4)
        result = compiled(x, 4)
    finally:
        events._recorder = saved
    # The verified call returns eager's result, not the entry's x * 3.
    assert torch.equal(result["out"][0], x * 4) and result["out"][1] == [4, "n"]
    stats = graphlift.stats(user_module.scale)
    assert (stats.verified, stats.verify_failures) == (1, 1)
    (message,) = warnings_seen
    assert "cache entry 0/0 of 'scale'" in message and "result['out'][0]: values differ" in \
        message and "L['n'] == 3" in message and "mul = l_x * 3" in message
    (failure,) = recorder.as_dict()["verify_failures"]
    assert failure["compile_id"] == "0/0" and failure["function"] == "scale"
    path = failure["reproducer"]
    assert path in message and os.path.exists(path)
    # The reproducer fails on its own, in a fresh process that never ran the program.
    done = subprocess.run([sys.executable, path], capture_output=True, text=True, timeout=120,
                          cwd=os.path.dirname(path), env={**os.environ, "PYTHONPATH": ROOT})
    assert done.returncode == 1, done.stderr
    assert "differs from eager" in done.stdout and "values differ" in done.stdout
    # Dropped: the calls the entry served run eagerly now, and are right.
    (eager_entry,) = graphlift.cache_entries(user_module.scale)
    assert eager_entry.graph is None and eager_entry.verify_plan is None
    for n in (4, 3, 4):
        assert torch.equal(compiled(x, n)["out"][0], x * n)
    assert graphlift.stats(user_module.scale).verify_failures == 1  # reported once
    assert len(warnings_seen) == 1


def test_the_doctor_reports_verify_failures_first():
    failure = {"compile_id": "0/0", "function": "scale", "location": "user.py:2",
               "time": 0.1, "difference": "result: 3 where eager gives 4", "guards": [],
               "graph_code": None, "reproducer": "/tmp/repro_scale_0_0.py"}
    recording = {"compiles": [{"compile_id": "0/0", "function": "scale",
                               "location": "user.py:2", "time": 0.0, "options": "",
                               "dynamic": None, "reasons": [], "guards": [],
                               "graph_code": None, "op_count": 0, "seconds": {},
                               "breaks": [{"type": "forced", "id": "GL0001", "docs": "",
                                           "location": "user.py:3", "source_line": "",
                                           "explanation": "x", "hints": [],
                                           "outcome": ""}]}],
                 "verify_failures": [failure]}
    built = report.build_report(recording, script="user.py", args=[], exit_code=0,
                                seconds=1.0)
    assert built["verdict"]["problem"] == "wrong_results" == report.PROBLEMS[0]
    text = render.format_text(built)
    assert text.index("WRONG RESULTS") < text.index("graph break")
    assert "/tmp/repro_scale_0_0.py" in text and "Wrong results" in render.format_html(built)


# == verify off costs nothing on the hit path =====================================================
def add_one(x):
    return x + 1


def test_verify_off_adds_no_call_to_a_hit():
    compiled = graphlift.compile(add_one)
    x = torch.ones(3)
    compiled(x)
    called: list[str] = []

    def profile(frame, event, arg):
        if event == "call":
            called.append(frame.f_code.co_filename)

    sys.setprofile(profile)
    try:
        compiled(x)
    finally:
        sys.setprofile(None)
    assert graphlift.stats(add_one).hits == 1 and graphlift.stats(add_one).verified == 0
    assert not {verify.__file__, sys.modules["graphlift.config"].__file__} & set(called), called
    wrapper_source = compiled._graphlift_source
    assert wrapper_source.count("__gl_cfg['verify']") == 1


# == entries that are never verified ==============================================================
LOG: list[int] = []


def appends(x):
    LOG.append(1)
    return x + 1


def prints(x):
    y = x + 1
    print("step")
    return y * 2


BUFFER = torch.zeros(3)


def bumps_a_global_tensor(x):
    BUFFER.add_(1)
    return x + BUFFER


@graphlift.config.patch(verify=1)
def test_entries_with_side_effects_are_never_verified(capsys):
    LOG.clear()
    for fn, x in ((appends, torch.ones(3)), (prints, torch.ones(3)),
                  (bumps_a_global_tensor, torch.ones(3))):
        compiled = graphlift.compile(fn)
        for _ in range(3):
            compiled(x)
        assert graphlift.stats(fn).verified == 0, fn
    assert LOG == [1, 1, 1]  # eager's count: no call ran twice
    assert capsys.readouterr().out == "step\n" * 3
    assert torch.equal(BUFFER, torch.full((3,), 3.0))
    reasons = [verify.skip_reason(graphlift.cache_entries(fn)[0])
               for fn in (appends, prints, bumps_a_global_tensor)]
    assert "side effects" in reasons[0] and "graph break" in reasons[1]
    assert "G['BUFFER']" in reasons[2] and "not an argument" in reasons[2]


def draws(x):
    return x + torch.rand(3), torch.nn.functional.dropout(x, 0.5)


@graphlift.config.patch(verify=1)
def test_graphs_that_draw_random_numbers_are_not_verified():
    torch.manual_seed(0)
    compiled = graphlift.compile(draws)
    ours = [compiled(torch.ones(3)) for _ in range(3)]
    torch.manual_seed(0)
    theirs = [draws(torch.ones(3)) for _ in range(3)]
    assert graphlift.stats(draws).verified == 0
    assert "random" in verify.skip_reason(graphlift.cache_entries(draws)[0])
    for a, b in zip(ours, theirs):  # the generator moved as eager moves it: no second draw
        assert difference(a, b) is None


# == verified entries: results, mutated arguments, every Nth hit ==================================
def nested(x, n):
    return (x.sin(), [x * n, {"k": n, "s": "text", "t": (x.sum(), None)}], 2.5)


def make_nested():
    return torch.arange(4.0), 3


measure("verify/nested", lambda: torch_compile_graphs(nested, make_nested))


@graphlift.config.patch(verify=1)
def test_nested_results_are_verified_and_agree():
    counter = CompileCounter()
    compiled = graphlift.compile(nested, backend=counter)
    for _ in range(3):
        assert difference(compiled(*make_nested()), nested(*make_nested())) is None
    stats = graphlift.stats(nested)
    assert (stats.verified, stats.verify_failures) == (2, 0)
    assert counter.frame_count == recorded("verify/nested")


def increments(x):
    x.add_(1)
    return x * 2


@graphlift.config.patch(verify=1)
def test_an_argument_the_graph_mutates_is_cloned_for_the_compiled_run():
    compiled = graphlift.compile(increments)
    x, y = torch.zeros(3), torch.zeros(3)
    for _ in range(3):
        assert torch.equal(compiled(x), increments(y))
    assert torch.equal(x, y) and torch.equal(x, torch.full((3,), 3.0))  # once per call
    stats = graphlift.stats(increments)
    assert (stats.verified, stats.verify_failures) == (2, 0)


def test_every_nth_hit_is_verified():
    compiled = graphlift.compile(add_one)
    with graphlift.config.patch(verify=3):
        for _ in range(7):  # a miss, then 6 hits
            compiled(torch.ones(2))
    assert graphlift.stats(add_one).verified == 2


# == exceptions ===================================================================================
def checked(x, n):
    if n > 3:
        raise ValueError(f"n is {n}")
    return x * n


@graphlift.config.patch(verify=1)
def test_an_exception_raised_by_eager_is_a_difference_and_reaches_the_caller(warnings_seen):
    compiled = graphlift.compile(checked)
    x = torch.ones(2)
    compiled(x, 2)
    verify.drop_guard(graphlift.cache_entries(checked)[0], "L['n'] == 2")
    with pytest.raises(ValueError, match="n is 5"):
        compiled(x, 5)  # the entry would return x * 2: eager's error wins
    assert graphlift.stats(checked).verify_failures == 1
    assert "eager raised ValueError: n is 5" in warnings_seen[0]
    with pytest.raises(ValueError, match="n is 6"):
        compiled(x, 6)  # runs eagerly now


def test_outcomes_with_exceptions():
    assert outcome_difference(Outcome(error=KeyError("a")), Outcome(error=KeyError("b"))) is None
    assert "eager raised TypeError" in outcome_difference(Outcome(error=KeyError("a")),
                                                          Outcome(error=TypeError("b")))
    assert "the compiled entry raised KeyError" in outcome_difference(
        Outcome(error=KeyError("a")), Outcome(1))


# == the comparison: tolerances by dtype, containers, Python values ===============================
def test_float_tolerances_follow_the_dtype():
    one = torch.ones(4)
    assert difference(one + 1e-7, one) is None  # within float32's 1.3e-6
    assert "values differ" in difference(one + 1e-4, one)
    half = torch.ones(4, dtype=torch.float16)
    assert difference(half + 5e-4, half) is None  # float16 allows 1e-3
    assert "values differ" in difference(one.double() + 1e-6, one.double())
    assert "dtype" in difference(one.double(), one)
    ints = torch.arange(3)
    assert "values differ" in difference(ints + 1, ints)  # integers exactly
    nan = torch.tensor([float("nan")])
    assert difference(nan, nan.clone()) is None
    assert difference(0.1 + 0.2, 0.3) is None and difference(1.0, 1.001) is not None
    assert difference(float("nan"), float("nan")) is None
    assert "requires_grad" in difference(one.requires_grad_(), torch.ones(4))


def test_containers_compare_by_type_length_keys_and_items():
    x = torch.ones(2)
    assert "list" in difference([x], (x,))
    assert "2 items" in difference((x, x), (x,))
    assert "keys" in difference({"a": 1, "b": 2}, {"b": 2, "a": 1})
    assert difference({"a": [1, (x, "s")]}, {"a": [1, (x.clone(), "s")]}) is None
    assert "result['a'][1][1]" in difference({"a": [1, (x, "s")]}, {"a": [1, (x, "t")]})
    assert difference(None, None) is None and "True" in difference(True, False)

    class Point:
        def __init__(self, v):
            self.v = v

    assert difference(Point(1), Point(1)) is None
    assert "attributes" in difference(Point(1), Point(2))
    # Each run makes its own generator (a contextmanager's): identity says nothing.
    assert difference((i for i in ()), (i for i in ())) is None


# == the environment variable =====================================================================
def test_graphlift_verify_sets_the_knob_at_import():
    code = "import graphlift; print(graphlift.config.verify)"
    reset = "graphlift.config.reset_to_defaults(); print(graphlift.config.verify)"
    env = {**os.environ, "PYTHONPATH": ROOT, "GRAPHLIFT_VERIFY": "5"}
    done = subprocess.run([sys.executable, "-c", f"{code}; {reset}"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.stdout.split() == ["5", "5"], done.stderr  # a reset keeps the environment's
    env["GRAPHLIFT_VERIFY"] = "often"
    done = subprocess.run([sys.executable, "-W", "always", "-c", code], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.stdout.strip() == "0" and "GRAPHLIFT_VERIFY='often'" in done.stderr


def test_the_reproducer_writes_out_a_function_it_cannot_import(tmp_path):
    script = tmp_path / "main_script.py"
    script.write_text(textwrap.dedent('''
        import torch, graphlift
        from graphlift import verify
        verify.REPRO_DIR = %r
        verify.logs.warn = lambda message: print("REPRO", message.split("reproducer: ")[1]
                                                 .split()[0])
        def double(x, k):
            return x * k
        compiled = graphlift.compile(double)
        graphlift.config.verify = 1
        compiled(torch.ones(2), 2)
        verify.drop_guard(graphlift.cache_entries(double)[0], "L['k'] == 2")
        compiled(torch.ones(2), 7)
    ''') % str(tmp_path / "out"))
    env = {**os.environ, "PYTHONPATH": ROOT}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          env=env, timeout=120)
    path = next(line.split()[1] for line in done.stdout.splitlines() if line.startswith("REPRO"))
    assert "def double(x, k):" in open(path).read()
    rerun = subprocess.run([sys.executable, path], capture_output=True, text=True, env=env,
                           timeout=120)
    assert rerun.returncode == 1 and "values differ" in rerun.stdout
