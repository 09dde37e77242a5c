"""What the README, the Makefile and docs/ cite is in the repository."""

from __future__ import annotations

import pathlib
import re

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
CITING = ["README.md", "Makefile", *(str(p.relative_to(ROOT)) for p in ROOT.glob("docs/*.md"))]
# A path-like word: folders and a file name with one of these endings, or the CI script.
CITED = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w.-]+\.(?:md|py|txt|toml|json|sh|html|log)"
                   r"|\.ci/run)\b")
# Names that stand for the user's own files in examples, or for files a command writes.
PLACEHOLDERS = {"model.py", "file.py", "script.py", "s.py", "train.py", "file.json", "run.json",
                "out.html", "tl_out/index.html"}


def cited(text: str) -> set[str]:
    return {name for name in CITED.findall(text) if not name.startswith("/")
            and name not in PLACEHOLDERS and pathlib.PurePath(name).name not in PLACEHOLDERS}


def exists(name: str) -> bool:
    """A path from the repository root or the package; a bare file name anywhere in them."""
    if any((ROOT / base / name).exists() for base in ("", "graphlift", "tests")):
        return True
    return "/" not in name and any(ROOT.glob(f"[!.]*/**/{name}"))


@pytest.mark.parametrize("document", CITING)
def test_every_file_a_document_cites_exists(document):
    missing = sorted(name for name in cited((ROOT / document).read_text()) if not exists(name))
    assert missing == []


def test_the_check_finds_a_missing_file():
    assert cited("see FACTS.md and graphlift/cache.py, not /path/to/model.py") == {
        "FACTS.md", "graphlift/cache.py"}
    assert not exists("FACTS.md") and exists("graphlift/cache.py") and exists("nn_module.py")
