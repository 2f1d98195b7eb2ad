"""``placer completion bash|zsh``: the script loads in the real shell and completes subcommands
at any depth, options, option choices and paths, as the shell calls it (COMP_WORDS/CWORD)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from placer.cli import build_parser
from placer.cli.completion import command_specs

ROOT = Path(__file__).resolve().parents[2]
BASH = shutil.which("bash")
ZSH = shutil.which("zsh")


@pytest.fixture(scope="module")
def script(tmp_path_factory: pytest.TempPathFactory) -> Path:
    done = subprocess.run(
        [sys.executable, "-m", "placer", "completion", "bash"],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    path = tmp_path_factory.mktemp("completion") / "placer.bash"
    path.write_text(done.stdout)
    return path


def complete(script: Path, *words: str) -> list[str]:
    """What bash offers for ``words`` (the last one is being typed), as in an interactive
    shell: the script sourced, then its function called as ``complete -F`` calls it."""
    assert BASH is not None
    quoted = " ".join(f"'{w}'" for w in words)
    program = (
        f"source '{script}' || exit 9\n"
        "complete -p placer >/dev/null || exit 8\n"
        f"COMP_WORDS=({quoted}); COMP_CWORD=$((${{#COMP_WORDS[@]}} - 1)); _placer\n"
        'printf "%s\\n" "${COMPREPLY[@]}"\n'
    )
    done = subprocess.run(
        [BASH, "--norc", "--noprofile", "-c", program],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=30,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    return [line for line in done.stdout.splitlines() if line]


pytestmark = pytest.mark.skipif(BASH is None, reason="bash is not installed")


def test_every_command_completes_after_placer(script: Path) -> None:
    commands = sorted(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert complete(script, "placer", "") == commands
    assert "completion" in commands and "controller" in commands
    assert complete(script, "placer", "fl") == ["fleet"]
    assert complete(script, "placer", "s") == ["simulate", "snapshot", "submit"]


def test_nested_subcommands_and_their_options(script: Path) -> None:
    assert complete(script, "placer", "fleet", "") == ["show", "up", "check"]
    assert complete(script, "placer", "fleet", "up", "--h") == ["--help", "--hub"]
    assert complete(script, "placer", "controller", "--hub-") == [
        "--hub-context",
        "--hub-kubeconfig",
        "--hub-name",
    ]
    # options and their values before the subcommand do not confuse it
    assert complete(script, "placer", "get", "--context", "east", "-n", "x", "--ti") == [
        "--timeout"
    ]


def test_option_choices_and_paths(script: Path) -> None:
    assert complete(script, "placer", "plan", "--solver", "") == [
        "cpsat",
        "greedy",
        "first-fit",
        "best-fit",
        "worst-fit",
        "karmada",
    ]
    assert complete(script, "placer", "plan", "--solver=first") == ["first-fit"]
    assert complete(script, "placer", "get", "-o", "") == ["text", "json", "yaml"]
    assert complete(script, "placer", "completion", "") == ["bash", "zsh"]
    assert complete(script, "placer", "submit", "-f", "examples/jobset-d") == [
        "examples/jobset-demo.yaml"
    ]
    assert complete(script, "placer", "plan", "--catalog", "cat") == ["catalog"]
    # a value that is not a path: nothing made up
    assert complete(script, "placer", "get", "--context", "") == []


def test_the_script_knows_every_option_of_every_command() -> None:
    """Generated from the parser: nothing added to a command can be missing from it."""
    specs = {spec.path: spec for spec in command_specs(build_parser())}
    assert {"", "fleet", "fleet up", "controller", "completion"} <= set(specs)
    assert "--metrics-port" in specs["controller"].options
    assert specs["fleet up"].files == ["--kubeconfig-out", "--fleet-out"]


@pytest.mark.skipif(ZSH is None, reason="zsh is not installed")
def test_the_zsh_script_loads_in_zsh() -> None:
    assert ZSH is not None
    done = subprocess.run(
        [ZSH, "-f", "-c", f"source <({sys.executable} -m placer completion zsh) && complete -p"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "_placer placer" in done.stdout
