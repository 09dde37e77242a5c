"""What a user reads when something fails (issue 17): tracebacks without graphlift's frames.

Each case raises eagerly and compiled; the compiled traceback must hold the user's frames and no
frame of graphlift's package or generated plumbing, and where eager's traceback is the reference
its frames must be the same. torch.compile's traceback for the same failure is recorded
(tests/reference): it keeps at least one frame of its own (``eval_frame.py``), which ours must not.
"""

import os
import traceback

import pytest
import torch
from reference import measure, recorded

import graphlift
from graphlift.exc import BackendCompilerFailed, InternalError, Unsupported

PACKAGE_DIR = os.path.dirname(graphlift.__file__)
HERE = os.path.abspath(__file__)


def frames(error: BaseException) -> list[tuple[str, str]]:
    """(file, function) of each frame below the test's own (``raise_of`` and its lambda)."""
    summary = traceback.extract_tb(error.__traceback__)
    return [(os.path.abspath(f.filename), f.name) for f in summary][2:]


def graphlift_frames(error: BaseException) -> list[str]:
    text = "".join(traceback.format_exception(error))
    return [line for line in text.splitlines()
            if PACKAGE_DIR in line or "<graphlift" in line]


def raise_of(call) -> BaseException:
    with pytest.raises(BaseException) as info:
        call()
    return info.value


def index_past_end(x):
    return x[10]


def calls_a_helper(x, n):
    y = x * n
    return index_past_end(y)


def test_a_users_error_shows_exactly_eagers_frames():
    eager = raise_of(lambda: calls_a_helper(torch.ones(3), 2))
    compiled = raise_of(lambda: graphlift.compile(calls_a_helper)(torch.ones(3), 2))
    assert type(compiled) is type(eager) and str(compiled) == str(eager)
    assert frames(compiled) == frames(eager) == [(HERE, "calls_a_helper"),
                                                 (HERE, "index_past_end")]
    assert graphlift_frames(compiled) == []


def _torch_compile_traceback() -> dict:
    """How many frames torch.compile's traceback of the failure holds, and whether it shows
    torch/_dynamo's."""
    theirs = raise_of(lambda: torch.compile(calls_a_helper, backend="eager")(torch.ones(3), 2))
    text = "".join(traceback.format_exception(theirs))
    return {"frames": len(frames(theirs)), "shows_torch_dynamo": "torch/_dynamo" in text}


measure("tracebacks/torch_compile_keeps_frames_of_its_own", _torch_compile_traceback)


def test_torch_compile_keeps_a_frame_of_its_own_where_graphlift_keeps_none():
    theirs = recorded("tracebacks/torch_compile_keeps_frames_of_its_own")  # tests/reference
    assert theirs["shows_torch_dynamo"]  # the reference hides less than we do
    ours = raise_of(lambda: graphlift.compile(calls_a_helper)(torch.ones(3), 2))
    assert len(frames(ours)) < theirs["frames"]


class Reshapes(torch.nn.Module):
    def forward(self, x):
        return x.view(7)


def test_a_compiled_modules_error_shows_eagers_frames():
    eager = raise_of(lambda: Reshapes()(torch.ones(3)))
    compiled = raise_of(lambda: graphlift.compile(Reshapes())(torch.ones(3)))
    assert frames(compiled) == frames(eager)
    assert graphlift_frames(compiled) == []


def breaks_then_fails(x):
    y = x + 1
    print("before")
    return y.view(7)


def test_an_error_after_a_graph_break_shows_the_users_lines_only(capsys):
    compiled = raise_of(lambda: graphlift.compile(breaks_then_fails)(torch.ones(3)))
    assert isinstance(compiled, RuntimeError)
    assert graphlift_frames(compiled) == []
    assert {path for path, _ in frames(compiled)} == {HERE}
    assert traceback.extract_tb(compiled.__traceback__)[-1].line == "return y.view(7)"


def prints_inside(x):
    y = x + 1
    print("no")
    return y


def test_a_fullgraph_error_names_the_users_line_without_graphlifts_frames(capsys):
    error = raise_of(lambda: graphlift.compile(prints_inside, fullgraph=True)(torch.ones(3)))
    assert isinstance(error, Unsupported)
    assert graphlift_frames(error) == []
    assert f"{HERE}:" in str(error) and 'print("no")' in str(error)


def exploding_backend(gm, example_inputs):
    raise RuntimeError("backend exploded")


def test_a_backend_failure_shows_the_backends_frame_not_graphlifts():
    error = raise_of(lambda: graphlift.compile(lambda x: x + 1, backend=exploding_backend)(
        torch.ones(3)))
    assert isinstance(error, BackendCompilerFailed)
    assert graphlift_frames(error) == []
    cause = error.__cause__
    assert isinstance(cause, RuntimeError) and str(cause) == "backend exploded"
    assert traceback.extract_tb(cause.__traceback__)[-1].name == "exploding_backend"


def test_verbose_keeps_graphlifts_frames():
    with graphlift.config.patch(verbose=True):
        error = raise_of(lambda: graphlift.compile(calls_a_helper)(torch.ones(3), 2))
    assert graphlift_frames(error) != []


def test_an_internal_error_keeps_graphlifts_frames(monkeypatch):
    """graphlift's own bug: its traceback is the report, so nothing is hidden."""
    from graphlift.translator import InstructionTranslator, TranslationError

    def broken(self, inst):
        raise KeyError("planted")

    monkeypatch.setattr(InstructionTranslator, "BINARY_OP", broken)
    with graphlift.config.patch(raise_internal_errors=True):
        error = raise_of(lambda: graphlift.compile(calls_a_helper)(torch.ones(3), 2))
    assert isinstance(error, (InternalError, TranslationError))
    assert "planted" in str(error)
    assert any("translator.py" in line for line in graphlift_frames(error))


def recurse(x, n):
    return recurse(x + 1, n + 1)


def test_a_compiled_recursion_folds_to_the_users_line():
    error = raise_of(lambda: graphlift.compile(recurse)(torch.ones(1), 0))
    assert isinstance(error, RecursionError)
    text = "".join(traceback.format_exception(error))
    assert graphlift_frames(error) == []
    # (3.12 underlines more expressions: lines of ^ and ~ alone are not counted.)
    lines = [line for line in text.splitlines() if line.strip(" ^~")]
    assert "[Previous line repeated" in text and len(lines) < 20
