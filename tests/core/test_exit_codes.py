"""Every command's exit codes (placer.errors.EXIT_CODES): 0 all done, 1 not all done, 2 usage,
3 nothing reachable or not found, 4 no definition — and the table in ``--help`` and in
docs/operations.md.

Live commands run against the virtual demo fleet over HTTPS, once with every cluster serving
and once with every cluster stopped (the kubeconfig still names them)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from placer.cli import build_parser, main
from placer.errors import EXIT_CODES
from placer.snapshot import load_snapshot
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup

ROOT = Path(__file__).resolve().parents[2]
DEMO = str(ROOT / "clusters" / "demo.yaml")
SEED = str(ROOT / "examples" / "jobset-demo.yaml")
UNREACHABLE = "no cluster of the fleet could be reached (east, west, central)"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    """``placer ARGS``: its exit code (argparse's usage errors exit from within), out, err."""
    try:
        code = main(list(args))
    except SystemExit as exit:
        code = int(exit.code or 0)
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture(scope="module")
def huge(tmp_path_factory: pytest.TempPathFactory) -> str:
    """The seed JobSet with 16 GPUs per pod: more than any node of the demo fleet has."""
    path = tmp_path_factory.mktemp("huge") / "huge.yaml"
    text = Path(SEED).read_text().replace("name: demo", "name: huge")
    path.write_text(text.replace("nvidia.com/gpu: 4", "nvidia.com/gpu: 16"))
    return str(path)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A kubeconfig of the demo fleet, every cluster serving."""
    with VirtualFleet(load_snapshot(DEMO), setup=realism_setup()) as virtual:
        yield str(virtual.write_kubeconfig(tmp_path_factory.mktemp("live") / "kubeconfig"))


@pytest.fixture(scope="module")
def down(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A kubeconfig of the demo fleet whose every cluster has stopped."""
    with VirtualFleet(load_snapshot(DEMO)) as virtual:
        path = virtual.write_kubeconfig(tmp_path_factory.mktemp("down") / "kubeconfig")
        for name in ("east", "west", "central"):
            virtual.server(name).stop()
        return str(path)


# -- the table --------------------------------------------------------------------------------


def test_the_table_has_every_code_once() -> None:
    assert [code for code, _ in EXIT_CODES] == [0, 1, 2, 3, 4]


@pytest.mark.parametrize("command", [[], ["plan"], ["get"], ["fleet", "show"], ["simulate"]])
def test_every_help_ends_with_the_table(command: list[str]) -> None:
    parser = build_parser()
    for name in command:
        sub = next(a for a in parser._actions if a.dest in ("command", "fleet_command"))
        parser = sub.choices[name]  # type: ignore[index]
    text = parser.format_help()
    assert "\nexit codes:\n" in text
    for code, meaning in EXIT_CODES:
        assert f"\n  {code}   {meaning.split()[0]}" in text


def test_the_docs_show_the_same_table() -> None:
    page = (ROOT / "docs" / "operations.md").read_text()
    for code, meaning in EXIT_CODES:
        assert f"| {code} | {meaning} |" in page


# -- plan ---------------------------------------------------------------------------------------


def test_plan(capsys: pytest.CaptureFixture[str], huge: str, down: str) -> None:
    assert run(capsys, "plan", "-f", SEED, "--snapshot", DEMO)[0] == 0
    code, out, _ = run(capsys, "plan", "-f", SEED, "-f", huge, "--snapshot", DEMO)
    assert code == 1 and "JobSet/default/huge: not placed" in out
    code, out, _ = run(capsys, "plan", "-f", huge, "--snapshot", DEMO, "-o", "json")
    assert code == 1 and json.loads(out)["placements"] == []
    code, out, err = run(capsys, "plan", "-f", SEED, "--kubeconfig", down)
    assert code == 3 and out == ""
    assert f"error: {UNREACHABLE}: nothing can be placed" in err
    assert "warning: cluster east:" in err
    assert run(capsys, "plan", "-f", SEED, "--snapshot", DEMO, "--no-such-flag")[0] == 2


# -- submit -------------------------------------------------------------------------------------


def test_submit(capsys: pytest.CaptureFixture[str], huge: str, live: str, down: str) -> None:
    code, out, _ = run(capsys, "submit", "-f", huge, "--kubeconfig", live)
    assert code == 1 and "JobSet/default/huge: not placed" in out
    code, out, err = run(capsys, "submit", "-f", SEED, "--kubeconfig", down)
    assert code == 3 and "0 of 1 workload(s) placed" in out
    assert "warning: cluster west:" in err
    code, _, err = run(capsys, "submit", "-f", SEED, "--kubeconfig", live, "--wait", "soon")
    assert code == 2 and "--wait: 'soon' is not a duration" in err


# -- get and describe -------------------------------------------------------------------------


def test_get(capsys: pytest.CaptureFixture[str], live: str, down: str) -> None:
    code, out, err = run(capsys, "get", "-A", "--kubeconfig", down)
    assert code == 3 and out == ""
    assert "No workloads found" not in err
    assert f"error: {UNREACHABLE}: no workload could be listed" in err
    code, out, err = run(capsys, "get", "jobsets", "-A", "--kubeconfig", down, "-o", "json")
    assert code == 3 and out == ""
    code, _, err = run(capsys, "get", "-n", "nobody-here", "--kubeconfig", live)
    assert code == 0 and "No workloads found in namespace nobody-here." in err
    assert run(capsys, "get", "frobnicators", "--kubeconfig", live)[0] == 4
    assert run(capsys, "get", "-A", "-n", "x", "--kubeconfig", live)[0] == 2


def test_describe(capsys: pytest.CaptureFixture[str], live: str, down: str, tmp_path: Path) -> None:
    code, _, err = run(capsys, "describe", "jobset/demo", "--kubeconfig", down)
    assert code == 3 and f"error: {UNREACHABLE}: jobset/demo could not be looked up" in err
    code, _, err = run(capsys, "describe", "jobset/nope", "--kubeconfig", live)
    assert code == 3 and "jobset/nope not found in namespace default" in err
    unknown = tmp_path / "widget.yaml"
    unknown.write_text("apiVersion: example.com/v1\nkind: Widget\nmetadata: {name: w}\n")
    assert run(capsys, "describe", "-f", str(unknown))[0] == 4
    assert run(capsys, "describe", "-f", SEED)[0] == 0


# -- fleet show, snapshot ---------------------------------------------------------------------


def test_fleet_show(capsys: pytest.CaptureFixture[str], live: str, down: str) -> None:
    assert run(capsys, "fleet", "show", DEMO)[0] == 0
    assert run(capsys, "fleet", "show", "--kubeconfig", live)[0] == 0
    code, out, err = run(capsys, "fleet", "show", "--kubeconfig", down)
    assert code == 3 and out == ""
    assert f"error: {UNREACHABLE}: no capacity could be gathered" in err


def test_snapshot(capsys: pytest.CaptureFixture[str], live: str, down: str, tmp_path: Path) -> None:
    assert run(capsys, "snapshot", "--kubeconfig", live, "-o", str(tmp_path / "ok.yaml"))[0] == 0
    target = tmp_path / "none.yaml"
    code, _, err = run(capsys, "snapshot", "--kubeconfig", down, "-o", str(target))
    assert code == 3 and f"error: {UNREACHABLE}: nothing written" in err
    assert not target.exists()


# -- offline commands -------------------------------------------------------------------------


def test_definitions_and_validate(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    assert run(capsys, "definitions")[0] == 0
    code, _, err = run(capsys, "definitions", "nope")
    assert code == 4 and "no definition named 'nope'" in err
    notdef = tmp_path / "pod.yaml"
    notdef.write_text("apiVersion: v1\nkind: Pod\nmetadata: {name: p}\n")
    assert run(capsys, "validate", str(notdef))[0] == 1


def test_simulate_reports_unplaced_workloads_without_failing(
    capsys: pytest.CaptureFixture[str], huge: str
) -> None:
    """What a simulation finds out (a workload that fits nowhere) is its result, not a
    failure: 0; only a decision the verifier rejects would be 1."""
    code, out, _ = run(capsys, "simulate", "--snapshot", DEMO, "--workloads", huge)
    assert code == 0 and "Not placed: 1" in out
    assert run(capsys, "simulate", "--snapshot", DEMO)[0] == 2


NOT_YAML = "kind: [Queue, {\n"  # the text is not YAML: an unclosed flow sequence


@pytest.mark.parametrize(
    ("kind", "arguments"),
    [
        ("manifest", ["plan", "-f", "{bad}", "--snapshot", DEMO]),
        ("definition", ["validate", "{bad}"]),
        ("policy", ["plan", "-f", SEED, "--snapshot", DEMO, "--policy", "{bad}"]),
        ("snapshot", ["plan", "-f", SEED, "--snapshot", "{bad}"]),
        ("queues", ["plan", "-f", SEED, "--snapshot", DEMO, "--queues", "{bad}"]),
        ("fleet", ["fleet", "show", "--fleet", "{bad}"]),
        ("kubeconfig", ["get", "-A", "--kubeconfig", "{bad}"]),
    ],
)
def test_input_that_is_not_yaml_is_a_usage_error(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, kind: str, arguments: list[str]
) -> None:
    """Exit 2 for every kind of file, as the table says (``input that is not YAML``)."""
    bad = tmp_path / f"{kind}.yaml"
    bad.write_text(NOT_YAML)
    code, _, err = run(capsys, *(a.replace("{bad}", str(bad)) for a in arguments))
    assert code == 2, err
    assert f"error: {bad}: not valid YAML: line 2" in err, err
