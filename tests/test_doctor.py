"""``graphlift doctor``: scripts with known problems, each found and triaged, read from the report.

Each doctor run starts a fresh Python that imports torch (about 2 s), so one script holds every
problem, one function each, and is run once for the module; the CLI gets one run of its own.
"""

import ast
import inspect
import json
import os
import shutil
import subprocess
import sys
import textwrap

import pytest
import torch

import graphlift
from graphlift import doctor, events
from graphlift.doctor import Cause, Failure, triage

PROBLEMS = textwrap.dedent('''
    import torch

    import graphlift


    @graphlift.compile
    def with_print(x):  # a print in the middle: a graph break
        y = x * 2
        print("halfway")
        return y + 1


    @graphlift.compile
    def scale(x, n):  # an int argument that varies: automatic dynamic takes over
        return x * n


    @graphlift.compile
    def unroll(x, n):  # an int argument that varies and drives a loop: a recompile storm
        for _ in range(n):
            x = x + 1
        return x


    @graphlift.compile
    def batch(x):  # a batch of 1 among dynamic sizes
        return x.sin()


    @graphlift.compile
    def grad_flip(x):  # grad mode flips between calls
        return x.cos()


    @graphlift.compile
    def apply(x):  # reads a global module that is made anew before every call
        return act(x)


    @graphlift.compile
    def clean(x):  # no problem: one compile, then cache hits
        return x.exp()


    x = torch.ones(4)
    for _ in range(3):
        with_print(x)
    for n in range(12):
        scale(x, n)
        unroll(x, n)
    for size in (8, 16, 32, 1, 64):
        batch(torch.ones(size, 3))
    for i in range(4):
        with torch.set_grad_enabled(i % 2 == 0):
            grad_flip(x)
    for _ in range(5):  # a global module made anew for every call: pinned by identity (a module
        act = torch.nn.Tanh()  # argument is guarded by its structure, a redefined function with
        apply(x)  # the same code is the same function: neither recompiles, as in torch.compile)
    for _ in range(10):
        clean(x)
''')


PRINT_LINE = next(n for n, line in enumerate(PROBLEMS.splitlines(), 1) if "halfway" in line)


@pytest.fixture(scope="module")
def problems(tmp_path_factory):
    """(script path, report) for one doctor run over PROBLEMS."""
    folder = tmp_path_factory.mktemp("doctor")
    script = folder / "problems.py"
    script.write_text(PROBLEMS)
    with open(folder / "out.txt", "w") as out, open(folder / "err.txt", "w") as err:
        report = doctor.run(str(script), stdout=out, stderr=err)
    assert report["exit_code"] == 0, (folder / "err.txt").read_text()
    assert (folder / "out.txt").read_text() == "halfway\n" * 3
    return script, report


def recompiled(report, function):
    return next(item for item in report["recompiles"] if item["function"] == function)


# -- the three steps, from the JSON report -----------------------------------------------------
def test_print_in_the_middle_is_a_graph_break(problems):
    script, report = problems
    [group] = report["graph_breaks"]
    assert group["location"] == f"{script}:{PRINT_LINE}"
    assert group["type"] == "skipped_function"
    assert group["source_line"] == 'print("halfway")'
    assert group["functions"] == ["with_print"]
    assert group["count"] == 1 and "print" in group["reason"] and group["hints"]
    assert [text for _, text in group["context"]][1:3] == ['    y = x * 2', '    print("halfway")']
    assert report["verdict"]["problem"] == "graph_breaks"
    assert "fix these first" in report["verdict"]["summary"]


def test_int_argument_that_varies_is_a_scalar(problems):
    item = recompiled(problems[1], "scale")
    assert not item["limit_hit"]
    assert item["top_guard"]["subject"] == "L['n']" and item["top_guard"]["values"][0] == "0"
    assert item["cause"] == "scalar" and "tensor" in item["fix"]
    # The second compile makes n a symbol: later values reuse that entry.
    entries = [c["compile_id"] for c in problems[1]["compiles"] if c["function"] == "scale"]
    assert item["top_guard"]["dynamic_from"] == entries[-1]
    assert any("automatic dynamic took over" in note for note in item["notes"])


def test_int_argument_driving_a_loop_is_a_scalar_storm(problems):
    item = recompiled(problems[1], "unroll")
    assert item["compiles"] == graphlift.config.recompile_limit
    assert item["limit_hit"] and item["limits"][0]["which"] == "recompile_limit"
    assert item["top_guard"]["subject"] == "L['n']"
    assert item["top_guard"]["example"] == "L['n'] == 7 (now 8)"
    assert item["top_guard"]["values"] == [str(n) for n in range(9)]
    assert item["cause"] == "scalar" and "tensor" in item["fix"]
    assert item["top_guard"]["dynamic_from"] is None
    assert any("needs L['n'] as a Python int" in note for note in item["notes"])


def test_batch_of_one_among_dynamic_sizes_is_a_size_recompile(problems):
    # Sizes 8, 16, 32, 1, 64: the second compile makes the batch dimension dynamic (2 <= size),
    # 32 and 64 reuse it, and the batch of 1 gets an entry of its own (0/1 specialization).
    item = recompiled(problems[1], "batch")
    assert item["compiles"] == 3 and not item["limit_hit"]
    assert item["top_guard"]["subject"] == "L['x'].size()[0]"
    assert item["top_guard"]["values"] == ["8", "16", "1"]
    assert item["cause"] == "size"
    assert "automatic dynamic" in item["problem"] and "mark_static" in item["fix"]
    entries = [c["compile_id"] for c in problems[1]["compiles"] if c["function"] == "batch"]
    assert item["top_guard"]["dynamic_from"] == entries[1]
    assert any("0/1 specialization" in note for note in item["notes"])


def test_grad_mode_flipping_is_global_state(problems):
    item = recompiled(problems[1], "grad_flip")
    assert item["compiles"] == 2  # then each grad mode finds its entry
    assert item["top_guard"]["example"] == "torch.is_grad_enabled() == True (now False)"
    assert item["cause"] == "global_state" and "pin it" in item["fix"]


def test_new_object_on_every_call_is_identity(problems):
    item = recompiled(problems[1], "apply")
    assert item["compiles"] == 5
    assert item["top_guard"]["subject"] == "G['act']"
    assert item["cause"] == "identity" and "define it once" in item["fix"]


def test_recompiles_most_first_and_clean_functions_absent(problems):
    report = problems[1]
    names = [item["function"] for item in report["recompiles"]]
    assert names[0] == "unroll"
    assert set(names) == {"scale", "unroll", "batch", "grad_flip", "apply"}
    compiles = [item["compiles"] for item in report["recompiles"]]
    assert compiles == sorted(compiles, reverse=True)


def test_time_per_function(problems):
    summary = problems[1]["time"]
    rows = {row["function"]: row for row in summary["functions"]}
    clean = rows["clean"]
    assert (clean["calls"], clean["hits"], clean["compiles"]) == (10, 9, 1)
    assert clean["hit_rate"] == pytest.approx(0.9)
    assert clean["seconds"]["translate"] > 0 and clean["seconds"]["guards"] >= 0
    assert rows["unroll"]["misses"] == 12 and rows["unroll"]["compiles"] == 8
    assert summary["explained_by"] == ["graph_breaks", "recompiles"]
    assert not summary["backend_suspect"]


def test_cache_entries_keep_guards_and_graphs(problems):
    compiles = problems[1]["compiles"]
    first = next(c for c in compiles if c["function"] == "clean")
    assert first["reasons"] == [] and first["op_count"] == 1 and "exp" in first["graph_code"]
    assert "type(L['x']) is torch.Tensor" in first["guards"]
    first, second = [c for c in compiles if c["function"] == "unroll"][:2]
    (reason,) = second["reasons"]
    assert reason.startswith(f"{first['compile_id']}: L['n'] == 0 (now 1)  # for _ in range(n):")


def test_text_report(problems):
    script, report = problems
    text = doctor.format_text(report)
    breaks, recompiles, time = (text.index(f"{n}. ") for n in (1, 2, 3))
    assert breaks < recompiles < time
    assert "Fix these first" in text and 'print("halfway")' in text
    assert "triage [scalar]" in text and "triage [size]" in text
    assert "triage [global_state]" in text and "triage [identity]" in text
    assert max(len(line) for line in text.splitlines()) <= 100


# -- the layers: the report is data, the renderers only render ---------------------------------
def test_report_is_json_data(problems):
    for report in (problems[1], doctor.build_report(None, script="s.py", args=[], exit_code=0,
                                                    seconds=0.1)):
        assert json.loads(doctor.format_json(report)) == report  # no tuples, enums or objects


def top_level_imports(module) -> set[str]:
    """The modules ``module`` imports (``from graphlift import events``: ``graphlift.events``);
    fails if any import is inside a function."""
    tree = ast.parse(inspect.getsource(module))
    kinds = (ast.Import, ast.ImportFrom)
    top = [node for node in tree.body if isinstance(node, kinds)]
    assert top == [node for node in ast.walk(tree) if isinstance(node, kinds)]
    names = set()
    for node in top:
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif node.module == "graphlift":
            names |= {f"graphlift.{alias.name}" for alias in node.names}
        else:
            names.add(node.module)
    return names


def test_imports_run_one_way():
    report_imports = top_level_imports(doctor.report)
    assert {name for name in report_imports if name.startswith("graphlift")} == {"graphlift.events"}
    assert not {"html", "textwrap"} & report_imports  # the report renders nothing
    assert not [name for name in vars(doctor.report) if name.startswith(("format_", "write_"))]
    render_imports = top_level_imports(doctor.render)
    assert {name for name in render_imports if name.startswith("graphlift")} == {
        "graphlift.doctor.report"}


# -- the HTML page in headless Chromium ----------------------------------------------------------
def chromium() -> str:
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path is None:
        pytest.skip("Chromium is not installed (`apt-get install -y chromium`, as .ci/run does): "
                    "the doctor's HTML page is not rendered in this run")
    return path


def test_html_report_renders_in_chromium(problems, tmp_path):
    browser = chromium()
    script, report = problems
    page = tmp_path / "report.html"
    doctor.write_html(report, str(page))
    result = subprocess.run(
        [browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
         "--no-first-run", "--disable-background-networking", "--disable-component-update",
         "--disable-sync", f"--user-data-dir={tmp_path / 'profile'}", "--enable-logging=stderr",
         "--v=0", "--dump-dom", page.as_uri()],
        capture_output=True, text=True, timeout=120)
    dom = result.stdout
    assert result.returncode == 0, result.stderr[-3000:]
    console = [line for line in result.stderr.splitlines() if ":CONSOLE" in line]
    assert console == [], console  # no script error, no blocked resource
    assert 'data-ok="1"' in dom  # the page's script ran to its end
    assert f"{script.name}:{PRINT_LINE}" in dom
    assert "print(&quot;halfway&quot;)" in dom or 'print("halfway")' in dom
    for function in ("scale", "unroll", "batch", "grad_flip", "apply"):
        assert f"<h3>{function} <code>" in dom
    assert dom.count('<circle') == len(report["compiles"])  # the timeline: one dot per compile
    assert dom.count('class="limit"') == 1
    assert dom.count("<details class=\"entry\"") == len(report["compiles"])


def test_html_page_is_self_contained(problems):
    page = doctor.format_html(problems[1])
    assert "http://" not in page.replace("http://www.w3.org/2000/svg", "")
    assert "https://" not in page and "src=" not in page
    assert "</script" not in page.split('id="doctor-data">')[1].split("</script>")[0]


# -- the command line ----------------------------------------------------------------------------
def test_cli_json_html_and_exit_code(tmp_path):
    script = tmp_path / "exits.py"
    script.write_text(textwrap.dedent('''
        import sys

        import torch

        import graphlift

        f = graphlift.compile(lambda x: x + 1)
        for _ in range(4):
            f(torch.ones(3))
        print("script output")
        sys.exit(int(sys.argv[1]))
    '''))
    command = shutil.which("graphlift", path=os.path.dirname(sys.executable))
    assert command is not None, "the console script is missing: pip install -e ."
    page = tmp_path / "out.html"
    result = subprocess.run([command, "doctor", "--json", "--html", str(page), str(script), "3"],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 3, result.stderr
    report = json.loads(result.stdout)  # the script's own output went to stderr
    assert "script output" in result.stderr
    assert report["args"] == ["3"] and report["exit_code"] == 3
    assert report["verdict"]["problem"] == "backend"
    assert report["graph_breaks"] == [] and report["recompiles"] == []
    assert report["time"]["backend_suspect"]
    assert "the problem is in the backend" in doctor.format_text(report)
    assert "data-ok" in page.read_text()


def test_cli_missing_script(capsys):
    from graphlift.__main__ import main

    with pytest.raises(SystemExit) as exit_info:
        main(["doctor", "no/such/script.py"])
    assert exit_info.value.code == 2
    assert "no such script" in capsys.readouterr().err


@pytest.mark.parametrize("argv", [["doctor"], []])
def test_cli_without_a_script_prints_usage(argv, capsys):
    from graphlift.__main__ import main

    assert main(argv) == 2
    err = capsys.readouterr().err
    if argv:
        assert err.startswith(
            "usage: graphlift doctor [-h] [--json] [--html FILE] SCRIPT [ARGS...]")
        assert "Run SCRIPT in a fresh process" in err and "--html FILE" in err
    else:
        assert err.startswith("usage: graphlift [-h] COMMAND") and "doctor" in err


# -- pieces, without a subprocess ----------------------------------------------------------------
@pytest.mark.parametrize("guard, cause", [
    ("L['n'] == 3", Cause.SCALAR),
    ("L['flag'] is True", Cause.SCALAR),
    ("L['x'].size()[0] == 8", Cause.SIZE),
    ("L['x'].stride()[0] == 3", Cause.TENSOR_PROPERTY),
    ("L['x'].dtype == torch.float32", Cause.TENSOR_PROPERTY),
    ("L['x'].dim() == 2", Cause.TENSOR_PROPERTY),
    ("torch.is_grad_enabled() == True", Cause.GLOBAL_STATE),
    ("torch.is_autocast_enabled() == False", Cause.GLOBAL_STATE),
    ("L['fn'] is <function act>", Cause.IDENTITY),
    ("G['helper'] is <function helper>", Cause.IDENTITY),
    ("nn_module_structure(L['self']) == 3", Cause.MODULE_STRUCTURE),
    ("type(L['x']) is torch.Tensor", Cause.TYPE),
    ("len(L['xs']) == 3", Cause.CONTAINER),
    ("list(L['d']) == ['a', 'b']", Cause.CONTAINER),
    ("L['a'] is not L['b']", Cause.ALIASING),
    ("compiled with backend='eager', fullgraph=False", Cause.OPTIONS),
    ("something new", Cause.OTHER),
])
def test_triage_rules(guard, cause):
    assert triage(guard) is cause


def test_failure_parse():
    failure = Failure.parse("0/2: torch.is_grad_enabled() == True (now False)")
    assert (failure.compile_id, failure.guard, failure.now) == (
        "0/2", "torch.is_grad_enabled() == True", "False")
    assert (failure.subject, failure.value) == ("torch.is_grad_enabled()", "True")
    identity = Failure.parse("1/0: L['fn'] is <function double>")
    assert (identity.subject, identity.value, identity.now) == (
        "L['fn']", "<function double>", None)
    assert Failure.parse("3/1: L['x'].size()[0] == 2 (now (1, 2))").now == "(1, 2)"


def test_nothing_recorded():
    report = doctor.build_report(None, script="s.py", args=[], exit_code=1, seconds=0.1)
    assert report["verdict"]["problem"] == "nothing_compiled"
    assert "did not import graphlift" in report["verdict"]["summary"]
    assert "compiled nothing" in doctor.format_text(report)
    assert doctor.exit_status(report) == 1
    assert doctor.exit_status({**report, "exit_code": -9}) == 137


def test_recorder_in_process(monkeypatch, tmp_path):
    recorder = events.Recorder(str(tmp_path / "run.json"))
    monkeypatch.setattr(events, "_recorder", recorder)

    @graphlift.compile
    def f(x, n):
        return x * n

    x = torch.ones(2)
    f(x, 1)
    f(x, 1)
    f(x, 2)
    graphlift.reset()  # counters from before a reset still belong to the run
    f(x, 3)
    recorder.dump()
    recording = json.loads((tmp_path / "run.json").read_text())
    reasons = [[r.partition("  # ")[0] for r in c["reasons"]] for c in recording["compiles"]]
    assert reasons == [[], [f"{recording['compiles'][0]['compile_id']}: L['n'] == 1 (now 2)"], []]
    [function] = recording["functions"]
    assert function["function"] == "test_recorder_in_process.<locals>.f"
    assert (function["stats"]["calls"], function["stats"]["hits"],
            function["stats"]["compiles"]) == (4, 1, 3)
    assert all(c["seconds"]["translate"] > 0 for c in recording["compiles"])


def test_failure_parse_dynamic_size_guards():
    bound = Failure.parse("0/1: 2 <= L['x'].size()[0] (now 1; sizes 0 and 1 are always "
                          "specialized, so this size gets an entry of its own)")
    assert bound.subject == "L['x'].size()[0]" and bound.values() == ["1"]
    assert triage(bound.guard) is Cause.SIZE
    ranged = Failure.parse("0/1: 2 <= L['x'].size()[0] <= 64 (now L['x'].size()[0] = 100)")
    assert ranged.subject == "L['x'].size()[0]" and ranged.values() == ["100"]


# -- advice that fits the kind of value ----------------------------------------------------------
def scaled(x, s):
    return x * s


def flagged(x, flag):
    return x + 1 if flag else x - 1


def activated(x, name):
    return torch.relu(x) if name == "relu" else torch.sigmoid(x)


@pytest.mark.parametrize(("fn", "values", "kind"), [
    (scaled, [0.5, 1.5, 2.5], "float"), (flagged, [True, False], "bool"),
    (activated, ["relu", "gelu"], "str"), (scaled, [2, 3, 4], "int")])
def test_scalar_advice_fits_the_kind_of_value(monkeypatch, tmp_path, fn, values, kind):
    recorder = events.Recorder(str(tmp_path / "run.json"))
    monkeypatch.setattr(events, "_recorder", recorder)
    compiled = graphlift.compile(fn)
    for value in values:
        x = torch.randn(3)
        assert torch.equal(compiled(x, value), fn(x, value))
    report = doctor.build_report(recorder.as_dict(), script="s.py", args=[], exit_code=0,
                                 seconds=1.0)
    (item,) = report["recompiles"]
    assert (item["cause"], item["scalar_kind"]) == ("scalar", kind)
    assert "tensor" in item["fix"]
    if kind not in ("int", "float"):  # only an int or a float can become dynamic
        assert "dynamic" not in item["fix"] + " ".join(item["notes"])
