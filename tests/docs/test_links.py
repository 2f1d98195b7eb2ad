"""Every relative link of the documentation leads somewhere: the file exists and, for
``page.md#anchor``, the page has a heading with that anchor (GitHub's rule)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.docs.harness import DOC_PAGES, ROOT

LINK = re.compile(r"\[[^\]]*\]\((?P<target>[^)\s]+)\)")
HEADING = re.compile(r"^#{1,6}\s+(?P<title>.+?)\s*#*\s*$")


def anchor(title: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", title.lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    found: set[str] = set()
    fenced = False
    for line in page.read_text().splitlines():
        if line.lstrip().startswith("```"):
            fenced = not fenced
        match = None if fenced else HEADING.match(line)
        if match:
            found.add(anchor(match["title"]))
    return found


def test_anchor_follows_github() -> None:
    assert anchor("`placer describe -o json`") == "placer-describe--o-json"
    assert anchor("Submitting workloads: `placer submit`, `placer get`") == (
        "submitting-workloads-placer-submit-placer-get"
    )


@pytest.mark.parametrize("page", DOC_PAGES)
def test_relative_links_resolve(page: str) -> None:
    source = ROOT / page
    broken = []
    for match in LINK.finditer(source.read_text()):
        target = match["target"]
        if re.match(r"[a-z]+:", target):
            continue  # http(s), mailto: not checked here
        path_part, _, fragment = target.partition("#")
        linked = (source.parent / path_part).resolve() if path_part else source
        if not linked.exists():
            broken.append(f"{target}: no such file")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{target}: no heading with that anchor")
    assert not broken, f"{page}: {broken}"


CODE_PATH = re.compile(r"`(?P<path>[\w.-]+(?:/[\w.-]+)*/(?:[\w.-]+\.(?:py|yaml|md|json|png))?)`")
TOP = ("placer", "simulations", "tests", "deploy", "clusters", "catalog", "examples", "docs")


@pytest.mark.parametrize("page", DOC_PAGES)
def test_the_code_paths_named_exist(page: str) -> None:
    """A file or folder the page names in backquotes (``placer/solver/charging.py``,
    ``dispatch/ledger/``) exists: a rename in the code cannot leave the page behind."""
    missing = []
    for match in CODE_PATH.finditer((ROOT / page).read_text()):
        path = match["path"]
        first = path.split("/", 1)[0]
        if first in {".", ".."} or (first not in TOP and not (ROOT / "placer" / first).is_dir()):
            continue  # outside the repository, an API group (run.ai/v1alpha1), a label...
        bases = (ROOT, ROOT / "placer", (ROOT / page).parent)
        if not any((base / path).exists() for base in bases):
            missing.append(path)
    assert not missing, f"{page} names paths that do not exist: {missing}"
