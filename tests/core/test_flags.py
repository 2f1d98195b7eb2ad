"""``--help`` is consistent across commands: one flag name per concept (the same name, metavar
and kind of value wherever it appears), durations as ``SECONDS``; and every flag of ``placer
controller`` is documented, with its default, in docs/controller.md's Flags table."""

from __future__ import annotations

import argparse
import re
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest

from placer.cli import build_parser
from placer.cli._types import seconds, seconds_or_zero

ROOT = Path(__file__).resolve().parents[2]

#: (name, older name) of one concept: the older name is only ever an alias of the name.
SYNONYMS = (
    ("--in-flight-ttl", "--ledger-ttl"),
    ("--no-create-namespace", "--no-create-namespaces"),
)
#: (command, flag) whose metavar differs from the same flag elsewhere on purpose.
METAVAR_EXCEPTIONS = {
    # several solvers side by side (cpsat,first-fit), where the others take one of a list
    ("simulate", "--solver"),
    # the snapshot file to write, where the others take an output format (kubectl's -o);
    # kept: scripts and the benchmarks write snapshots with it
    ("snapshot", "-o"),
    ("snapshot", "--output"),
}


def commands(
    parser: argparse.ArgumentParser, path: str = ""
) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from commands(child, f"{path} {name}".strip())


def options() -> Iterator[tuple[str, argparse.Action]]:
    for path, parser in commands(build_parser()):
        for action in parser._actions:
            if action.option_strings and action.dest != "help":
                yield path, action


def test_a_flag_means_the_same_wherever_it_appears() -> None:
    seen: dict[str, dict[str, set[str]]] = defaultdict(lambda: defaultdict(set))
    for path, action in options():
        for option in action.option_strings:
            if (path, option) in METAVAR_EXCEPTIONS:
                continue
            metavar = str(action.metavar) if action.nargs != 0 else "(switch)"
            if action.choices and action.metavar is None:
                metavar = "(choices)"
            seen[option][metavar].add(path)
    differing = {option: dict(by) for option, by in seen.items() if len(by) > 1}
    assert not differing, differing


def test_durations_are_seconds_everywhere() -> None:
    wrong = [
        (path, action.option_strings[0], action.metavar)
        for path, action in options()
        if action.type in (seconds, seconds_or_zero) and action.metavar != "SECONDS"
    ]
    assert not wrong


def test_synonyms_are_aliases_of_one_flag() -> None:
    for path, action in options():
        names = set(action.option_strings)
        for name, older in SYNONYMS:
            if older in names:
                assert name in names, (path, action.option_strings)


def test_no_flag_differs_from_another_only_by_a_plural() -> None:
    """``--no-create-namespace`` in one command and ``--no-create-namespaces`` in another was
    such a pair; the plural as an alias of the singular is fine."""
    every = {option for _, action in options() for option in action.option_strings}
    for path, action in options():
        for option in action.option_strings:
            if option.endswith("s") and option[:-1] in every:
                assert option[:-1] in action.option_strings, (path, option)


def _doc_table() -> list[tuple[set[str], str]]:
    """docs/controller.md's Flags table: (every flag of a row, its default cell)."""
    text = (ROOT / "docs" / "controller.md").read_text(encoding="utf-8")
    section = text.split("\n## Flags\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) < 3 or not cells[0].startswith("`"):
            continue
        flags = {code.split()[0] for code in re.findall(r"`([^`]+)`", cells[0])}
        rows.append((flags, cells[1]))
    return rows


def _default_text(action: argparse.Action) -> str | None:
    """How the table writes the parser's default (None: a sentence, not checked)."""
    default = action.default
    if default is False and action.nargs == 0:
        return "off"
    if isinstance(default, float) and default.is_integer():
        return str(int(default))
    if isinstance(default, int | float | str) and not isinstance(default, bool):
        return str(default)
    return None


def test_every_controller_flag_is_documented_with_its_default() -> None:
    table = _doc_table()
    assert len(table) > 20
    controller = dict(commands(build_parser()))["controller"]
    parsed = [a for a in controller._actions if a.option_strings and a.dest != "help"]
    documented = {flag for flags, _ in table for flag in flags}
    flags = {option for action in parsed for option in action.option_strings}
    assert flags - documented == set(), "flags missing from docs/controller.md"
    assert documented - flags == set(), "docs/controller.md documents flags that do not exist"
    for action in parsed:
        (row,) = [cell for names, cell in table if set(action.option_strings) == names]
        expected = _default_text(action)
        if expected is not None:
            assert row.strip("`").split()[0].strip("`,") == expected, action.option_strings


@pytest.mark.parametrize("old, new", [("--ledger-ttl", "--in-flight-ttl")])
def test_the_older_controller_names_still_parse(old: str, new: str) -> None:
    parser = build_parser()
    base = ["controller", "--hub-context", "hub"]
    assert parser.parse_args([*base, old, "5"]) == parser.parse_args([*base, new, "5"])
    assert parser.parse_args([*base, "--no-create-namespaces"]).no_create_namespaces
    assert parser.parse_args([*base, "--no-create-namespace"]).no_create_namespaces
