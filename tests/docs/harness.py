"""Run the shell commands the documentation shows, as a new user would paste them.

Pages (``DOC_PAGES``) are Markdown files. Every fenced block whose language is ``sh`` (or
``bash``, ``shell``, ``console``) is a list of commands, run in page order in one working
directory per page, so a later block may use what an earlier one started or wrote:

* A command is one shell line, a line continued with ``\\``, or a compound command over several
  lines (``for ... done``): lines are joined until ``bash -n`` accepts them.
* It must exit 0, unless its trailing comment starts with ``exit N`` (``placer plan ... # exit
  1: big does not fit``): then it must exit ``N``. A Python traceback in its output fails it too.
* A command ending in ``&`` runs in the background until the page is done; the harness waits
  until it is ready — ``placer fleet up`` until it prints ``serving``, ``placer controller``
  until its ``/readyz`` answers 200 — and stops it (SIGINT, then SIGKILL) at the end of the
  page. Any other background command is an error: the harness would not know when it is ready.
* A block preceded by the line ``<!-- illustrative: REASON -->`` is not run (it needs real
  clusters, runs for minutes, or rewrites committed files); keep such blocks few.

The working directory holds a symlink to every top-level entry of the repository (so
``examples/``, ``clusters/``, ``.venv/bin/placer`` and ``make demo`` work as written), ``HOME``
is empty and ``KUBECONFIG`` unset, and the virtualenv's ``bin`` leads ``PATH``. Two things are
rewritten so that runs on one machine do not collide (tests, CI and people share it): ``/tmp/``
becomes a directory of the page's own, and each port ``8080``-``8089`` a free port of its own
(the same port wherever the page writes it: a page may run two controllers, on 8080 and 8081).
A controller in the background is ready when ``/readyz`` answers on the port of its
``--metrics-port`` (8080 without one).
"""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

#: The pages whose commands are run: the READMEs users meet first and every page of docs/.
DOC_PAGES: tuple[str, ...] = (
    "README.md",
    "deploy/README.md",
    "clusters/README.md",
    "simulations/README.md",
    *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md")),
)

SHELL_LANGUAGES = frozenset({"sh", "bash", "shell", "console"})
ILLUSTRATIVE = re.compile(r"^<!--\s*illustrative:\s*(?P<reason>\S.*?)\s*-->$")
FENCE = re.compile(r"^(?P<indent>\s*)```(?P<lang>[\w-]*)\s*$")
EXPECTED_EXIT = re.compile(r"(?:^|\s)#\s*exit\s+(?P<code>\d+)\b")
TRACEBACK = "Traceback (most recent call last)"
EXPORT = re.compile(r"^export (?P<name>[A-Za-z_]\w*)=\S+(\s+#.*)?$")
#: Commands that serve until interrupted (the harness waits until they are ready).
LONG_RUNNING = re.compile(r"\bplacer (fleet up|controller)\b")
#: The ports pages may write, each rewritten to a free port of the run's own.
DOC_PORT = re.compile(r"\b(808\d)\b")
#: The port a controller serves /readyz on (its default: 8080).
METRICS_PORT = re.compile(r"--metrics-port[ =](?P<port>\d+)")

#: Seconds one command may take (the slowest documented simulation takes about a minute alone
#: on a 2-core machine; CI machines are shared).
COMMAND_TIMEOUT = 600.0
#: Seconds a background command may take to become ready.
READY_TIMEOUT = 90.0


class DocCommandError(AssertionError):
    """A documented command did not do what the page says."""


@dataclass(frozen=True)
class Command:
    """One shell command of a page, as written there."""

    page: str
    line: int
    text: str
    expected_exit: int = 0
    background: bool = False

    def where(self) -> str:
        return f"{self.page}:{self.line}"


@dataclass(frozen=True)
class Block:
    """A fenced shell block: its commands, or the reason it is not run."""

    page: str
    line: int
    commands: tuple[Command, ...]
    illustrative: str | None = None


def parse_page(text: str, page: str) -> list[Block]:
    """Every shell block of a Markdown page, in page order."""
    blocks: list[Block] = []
    lines = text.splitlines()
    index = 0
    while index < len(lines):
        fence = FENCE.match(lines[index])
        if fence is None:
            index += 1
            continue
        start = index
        end = start + 1
        while end < len(lines) and lines[end].strip() != "```":
            end += 1
        if end == len(lines):
            raise DocCommandError(f"{page}:{start + 1}: a code block is never closed")
        if fence["lang"] in SHELL_LANGUAGES:
            body = [line.removeprefix(fence["indent"]) for line in lines[start + 1 : end]]
            marker = ILLUSTRATIVE.match(_previous_text_line(lines, start))
            blocks.append(
                Block(
                    page=page,
                    line=start + 1,
                    commands=tuple(split_commands(body, page, start + 2)),
                    illustrative=marker["reason"] if marker else None,
                )
            )
        index = end + 1
    return blocks


def _previous_text_line(lines: list[str], index: int) -> str:
    for line in reversed(lines[:index]):
        if line.strip():
            return line.strip()
    return ""


def split_commands(body: list[str], page: str, first_line: int) -> Iterator[Command]:
    """The commands of a block's lines: continued and compound commands joined."""
    pending: list[str] = []
    start = first_line
    for offset, line in enumerate(body):
        if not pending:
            if not line.strip() or line.lstrip().startswith("#"):
                continue
            start = first_line + offset
        pending.append(line)
        text = "\n".join(pending)
        if line.rstrip().endswith("\\") or not _complete(text):
            continue
        yield _command(text, page, start)
        pending = []
    if pending:
        raise DocCommandError(f"{page}:{start}: an incomplete shell command: {pending[0]!r}")


def _complete(text: str) -> bool:
    result = subprocess.run(["bash", "-n"], input=text, capture_output=True, text=True, check=False)
    return result.returncode == 0


def _command(text: str, page: str, line: int) -> Command:
    expected = EXPECTED_EXIT.search(text.splitlines()[-1])
    lexer = shlex.shlex(text, posix=True, punctuation_chars=True)
    lexer.whitespace_split = True
    try:
        tokens = list(lexer)
    except ValueError as error:
        raise DocCommandError(f"{page}:{line}: cannot read {text!r}: {error}") from error
    return Command(
        page=page,
        line=line,
        text=text,
        expected_exit=int(expected["code"]) if expected else 0,
        background=bool(tokens) and tokens[-1] == "&",
    )


# -- running ---------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@dataclass
class Background:
    command: Command
    process: subprocess.Popen[bytes]
    log: Path

    def output(self) -> str:
        return self.log.read_text(errors="replace")


_Ready = Callable[[Background], bool]


@dataclass
class PageRun:
    """One page's commands, run in order in a working directory of their own."""

    page: str
    workdir: Path
    port: int = field(default_factory=free_port)
    #: the free port each documented port (8081-8089) stands for; 8080 is ``port``.
    ports: dict[str, int] = field(default_factory=dict)
    ran: list[Command] = field(default_factory=list)
    background: list[Background] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.tmp = self.workdir / "tmp"
        self.home = self.workdir / "home"
        self.tmp.mkdir(parents=True, exist_ok=True)
        self.home.mkdir(exist_ok=True)
        venv = ROOT / ".venv"
        for entry in ROOT.iterdir():
            if entry.name not in {".git", "tmp", "home"}:
                (self.workdir / entry.name).symlink_to(entry)
        if not venv.exists():
            (self.workdir / ".venv").symlink_to(Path(sys.prefix))
        bin_dir = Path(sys.executable).parent
        self.env = {
            key: value
            for key, value in os.environ.items()
            if key not in {"KUBECONFIG", "PYTHONPATH"} and not key.startswith("PYTEST")
        }
        self.env.update(
            HOME=str(self.home),
            PATH=f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}",
            TMPDIR=str(self.tmp),
            PYTHONUNBUFFERED="1",
        )

    def rewrite(self, text: str) -> str:
        """The command as run: ``/tmp/`` and ports 8080-8089 made private to this run."""
        text = re.sub(r"(?<![\w./-])/tmp/", f"{self.tmp}/", text)
        return DOC_PORT.sub(lambda match: str(self.port_for(match[1])), text)

    def port_for(self, documented: str) -> int:
        """The free port this run uses where the page says ``documented``."""
        if documented == "8080":
            return self.port
        if documented not in self.ports:
            self.ports[documented] = free_port()
        return self.ports[documented]

    def run(self, command: Command) -> None:
        self.ran.append(command)
        if command.background:
            self._start(command)
            return
        exported = EXPORT.match(command.text)
        if exported:
            self._export(command, exported["name"])
            return
        if LONG_RUNNING.search(command.text):
            self._run_until_ready(command)
            return
        script = "set -eo pipefail\n" + self.rewrite(command.text)
        try:
            result = subprocess.run(
                ["bash", "-c", script],
                cwd=self.workdir,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=COMMAND_TIMEOUT,
                check=False,
            )
        except subprocess.TimeoutExpired as error:
            raise self.failure(command, f"did not finish within {COMMAND_TIMEOUT:.0f} s", "") from (
                error
            )
        output = result.stdout.decode(errors="replace")
        if result.returncode != command.expected_exit:
            raise self.failure(
                command,
                f"exited {result.returncode}, the page says {command.expected_exit}",
                output,
            )
        if TRACEBACK in output:
            raise self.failure(command, "printed a Python traceback", output)

    def _export(self, command: Command, name: str) -> None:
        """``export NAME=VALUE``: the value, as the shell expands it, for every later command."""
        script = f'{self.rewrite(command.text)}\nprintf %s "${name}"'
        result = subprocess.run(
            ["bash", "-c", script],
            cwd=self.workdir,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise self.failure(command, f"exited {result.returncode}", result.stderr)
        self.env[name] = result.stdout

    def _run_until_ready(self, command: Command) -> None:
        """A command that serves until Ctrl-C, shown in the foreground: start it, wait until it
        is ready, press Ctrl-C (SIGINT) and check its exit code."""
        started = self._start(command)
        self.background.remove(started)
        code = _stop(started.process)
        if code != command.expected_exit:
            raise self.failure(
                command,
                f"exited {code} after Ctrl-C, the page says {command.expected_exit}",
                started.output(),
            )
        if TRACEBACK in started.output():
            raise self.failure(command, "printed a Python traceback", started.output())

    def _start(self, command: Command) -> Background:
        text = re.sub(r"\s*&\s*(#.*)?$", "", self.rewrite(command.text))
        log = self.workdir / f"background-{len(self.background)}.log"
        with log.open("wb") as sink:
            process = subprocess.Popen(
                ["bash", "-c", f"exec {text}" if "\n" not in text else text],
                cwd=self.workdir,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=sink,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        started = Background(command, process, log)
        self.background.append(started)
        ready = _readiness(text, self.controller_port(command.text))
        deadline = time.monotonic() + READY_TIMEOUT
        while not ready(started):
            if process.poll() is not None:
                raise self.failure(
                    command, f"exited {process.returncode} instead of running", started.output()
                )
            if time.monotonic() > deadline:
                raise self.failure(
                    command, f"not ready within {READY_TIMEOUT:.0f} s", started.output()
                )
            time.sleep(0.2)
        return started

    def controller_port(self, text: str) -> int:
        """The (rewritten) port a controller command serves /readyz on."""
        flag = METRICS_PORT.search(text)
        if flag is None:
            return self.port
        return (
            self.port_for(flag["port"]) if DOC_PORT.fullmatch(flag["port"]) else int(flag["port"])
        )

    def stop(self) -> None:
        """Stop every background command this page started (its process group)."""
        for started in reversed(self.background):
            _stop(started.process)
        self.background.clear()

    def failure(self, command: Command, what: str, output: str) -> DocCommandError:
        logs = "".join(
            f"\n--- background {b.command.where()}: {b.command.text}\n{b.output()[-2000:]}"
            for b in self.background
        )
        return DocCommandError(
            f"{command.where()}: {what}\n$ {command.text}\n{output[-4000:]}{logs}"
        )


def _readiness(text: str, port: int) -> _Ready:
    if "placer fleet up" in text:
        return lambda started: "serving" in started.output()
    if "placer controller" in text:
        return lambda started: _answers(f"http://127.0.0.1:{port}/readyz")
    raise DocCommandError(
        f"cannot tell when the background command is ready (only placer fleet up and placer "
        f"controller are known): {text!r}"
    )


def _answers(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return bool(response.status == 200)
    except (urllib.error.URLError, OSError):
        return False


def _stop(process: subprocess.Popen[bytes]) -> int | None:
    """Ctrl-C for the process group we started, then SIGKILL; the exit code (None: killed)."""
    if process.poll() is not None:
        return process.returncode
    for sig, wait in ((signal.SIGINT, 20.0), (signal.SIGKILL, 5.0)):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, sig)
        try:
            code = process.wait(timeout=wait)
        except subprocess.TimeoutExpired:
            continue
        return code if sig == signal.SIGINT else None
    return None


def needs(blocks: list[Block], program: str) -> bool:
    """Whether a run block of the page calls ``program``."""
    pattern = re.compile(rf"(?:^|[\s;|&(]){re.escape(program)}\b")
    return any(
        pattern.search(command.text)
        for block in blocks
        if block.illustrative is None
        for command in block.commands
    )


def run_page(page: str, workdir: Path, text: str | None = None) -> PageRun:
    """Run every command of ``page`` (or of ``text``, for tests of the harness)."""
    blocks = parse_page(text if text is not None else (ROOT / page).read_text(), page)
    run = PageRun(page, workdir)
    try:
        for block in blocks:
            if block.illustrative is None:
                for command in block.commands:
                    run.run(command)
    finally:
        run.stop()
    return run


def missing_programs(page: str) -> list[str]:
    blocks = parse_page((ROOT / page).read_text(), page)
    return [p for p in ("kubectl", "curl") if needs(blocks, p) and shutil.which(p) is None]
