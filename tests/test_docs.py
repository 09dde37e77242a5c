"""What the README, the Makefile and docs/ cite and link to is in the repository.

Checked here: every file a document names exists; every relative Markdown link resolves to a file
and, with an anchor, to a heading of that file (GitHub's heading ids); the documents name no
tracker items ("issue 19", "(#12)"); the README stays short and its map of docs/ lists every page
there is; the guide's settings table is the config registry. Each check has a case that shows it
fails on a bad document.
"""

from __future__ import annotations

import pathlib
import re

import pytest

import graphlift

ROOT = pathlib.Path(__file__).resolve().parent.parent
DOCS = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("docs/*.md"))
MARKDOWN = ["README.md", *DOCS]
CITING = ["README.md", "Makefile", *DOCS]
README_MAX_LINES = 250

# A path-like word: folders and a file name with one of these endings, or the CI script.
CITED = re.compile(r"(?<![\w./-])((?:[\w-]+/)*[\w.-]+\.(?:md|py|txt|toml|json|sh|html|log)"
                   r"|\.ci/run)\b")
# Names that stand for the user's own files in examples, or for files a command writes.
PLACEHOLDERS = {"model.py", "file.py", "script.py", "s.py", "train.py", "file.json", "run.json",
                "out.html", "tl_out/index.html"}
# [text](target): the target up to the closing parenthesis, no spaces.
LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^(```|~~~)")
HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
# Tracker references: "issue 19", "issues 3 and 4", "issue #19", "(#19)".
TRACKER = re.compile(r"\bissues? #?\d+|\(#\d+\)", re.IGNORECASE)


def cited(text: str) -> set[str]:
    return {name for name in CITED.findall(text) if not name.startswith("/")
            and name not in PLACEHOLDERS and pathlib.PurePath(name).name not in PLACEHOLDERS}


def exists(name: str) -> bool:
    """A path from the repository root or the package; a bare file name anywhere in them."""
    if any((ROOT / base / name).exists() for base in ("", "graphlift", "tests")):
        return True
    return "/" not in name and any(ROOT.glob(f"[!.]*/**/{name}"))


def prose_lines(text: str) -> list[str]:
    """The lines outside fenced code blocks, where Markdown headings and links live."""
    lines, fenced = [], False
    for line in text.splitlines():
        if FENCE.match(line.strip()):
            fenced = not fenced
        elif not fenced:
            lines.append(line)
    return lines


def slug(heading: str) -> str:
    """GitHub's id for a heading: link text kept, lower case, punctuation dropped, '-' for ' '."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading id of a document; a repeated heading gets -1, -2..., as on GitHub."""
    ids: set[str] = set()
    counts: dict[str, int] = {}
    for line in prose_lines(text):
        match = HEADING.match(line)
        if match:
            base = slug(match.group(2))
            count = counts.get(base, 0)
            counts[base] = count + 1
            ids.add(base if count == 0 else f"{base}-{count}")
    return ids


def links(text: str) -> list[str]:
    """The targets of the Markdown links outside code blocks and code spans."""
    found = []
    for line in prose_lines(text):
        found += LINK.findall(re.sub(r"`[^`]*`", "", line))
    return found


def broken_links(document: pathlib.Path) -> list[str]:
    """Relative links of ``document`` that name no file, or no heading of the file they name."""
    broken = []
    for target in links(document.read_text()):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path, _, anchor = target.partition("#")
        linked = (document.parent / path).resolve() if path else document
        if not linked.is_file():
            broken.append(target)
        elif anchor and (linked.suffix != ".md" or anchor not in anchors(linked.read_text())):
            broken.append(target)
    return broken


def tracker_references(text: str) -> list[str]:
    return TRACKER.findall(text)


def readme_map() -> set[str]:
    """The docs/ pages the README's Documentation section links to."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("\n## Documentation\n", 1)[1].split("\n## ", 1)[0]
    return {target.partition("#")[0] for target in links(section)
            if target.startswith("docs/")}


@pytest.mark.parametrize("document", CITING)
def test_every_file_a_document_cites_exists(document):
    missing = sorted(name for name in cited((ROOT / document).read_text()) if not exists(name))
    assert missing == []


def test_the_check_finds_a_missing_file():
    assert cited("see FACTS.md and graphlift/cache.py, not /path/to/model.py") == {
        "FACTS.md", "graphlift/cache.py"}
    assert not exists("FACTS.md") and exists("graphlift/cache.py") and exists("nn_module.py")


@pytest.mark.parametrize("document", MARKDOWN)
def test_every_link_of_a_document_resolves(document):
    assert broken_links(ROOT / document) == []


def test_the_check_finds_a_broken_link_or_anchor(tmp_path):
    (tmp_path / "other.md").write_text("# Other page\n\n## Settings (`graphlift.config`)\n\n"
                                       "## Settings (`graphlift.config`)\n")
    page = tmp_path / "page.md"
    page.write_text(
        "# Page\n\n## A heading, with punctuation!\n\n"
        "[ok](other.md) [ok](other.md#settings-graphliftconfig) [ok](#a-heading-with-punctuation)\n"
        "[ok](other.md#settings-graphliftconfig-1) [ok](https://example.com/x#y)\n"
        "[bad](missing.md) [bad](other.md#no-such-heading) [bad](#nowhere)\n"
        "`[not a link](missing.md)`\n\n```\n# not a heading\n[not a link](missing.md)\n```\n")
    assert broken_links(page) == ["missing.md", "other.md#no-such-heading", "#nowhere"]
    assert slug("Drop-in for `torch.compile`") == "drop-in-for-torchcompile"
    assert slug("When one rank's inputs differ") == "when-one-ranks-inputs-differ"


@pytest.mark.parametrize("document", MARKDOWN)
def test_no_document_names_tracker_items(document):
    assert tracker_references((ROOT / document).read_text()) == []


def test_the_check_finds_tracker_items():
    text = ("Done (issue 19); see issues 3 and Issue #4, fixed in (#12). "
            "Not these: test_item12_x, issue_13, GL0004, #gl0004, 19 issues.")
    assert tracker_references(text) == ["issue 19", "issues 3", "Issue #4", "(#12)"]


def test_the_readme_is_short():
    lines = (ROOT / "README.md").read_text().splitlines()
    assert len(lines) <= README_MAX_LINES, f"README.md has {len(lines)} lines"


def test_the_readme_maps_every_docs_page():
    listed = readme_map()
    assert listed, "README.md's Documentation section links to no docs/ page"
    assert sorted(page for page in listed if not (ROOT / page).is_file()) == []
    assert sorted(set(DOCS) - listed) == []


def test_the_guide_lists_every_setting():
    guide = (ROOT / "docs" / "guide.md").read_text()
    section = guide.split("\n## Settings\n", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| ([^|]+) \|", section, re.MULTILINE)
    defaults = dict(graphlift.config.defaults())
    assert sorted(name for name, _ in rows) == sorted(defaults)
    assert [(name, default.strip()) for name, default in rows
            if default.strip() != repr(defaults[name])] == []
