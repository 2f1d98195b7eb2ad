"""The ``placer`` command line.

Every subcommand lives in its own module of this package, named after the command
(``placer/cli/describe.py`` for ``placer describe``), and exposes::

    def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None

which adds its parser and sets ``func`` (``Callable[[argparse.Namespace], int]``) as a default.
``main`` discovers the modules, parses the command line and turns placer's errors into the
exit codes of :data:`placer.errors.EXIT_CODES` (0 all done, 1 not all done, 2 usage, 3 nothing
reachable or not found, 4 no definition), which every ``--help`` ends with. Errors are printed
as ``error: <message>`` on stderr, never as a traceback; what placer's modules log at warning
level or above is printed the same way (``warning: <message>``, see :class:`WarningLines`).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import pkgutil
import sys
import textwrap
from collections.abc import Callable, Sequence
from typing import NoReturn

from placer import __version__
from placer.errors import EXIT_CODES, EXIT_ERROR, EXIT_USAGE, PlacerError

__all__ = ["WarningLines", "build_parser", "command_names", "exit_codes_text", "main"]

Handler = Callable[[argparse.Namespace], int]


class _Parser(argparse.ArgumentParser):
    """argparse with placer's usage exit code and message style."""

    def error(self, message: str) -> NoReturn:
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"error: {message}\n")

    def format_help(self) -> str:
        """argparse's help, then the exit codes (kept as a table, not reflowed)."""
        return super().format_help() + "\n" + exit_codes_text()


class WarningLines(logging.Handler):
    """placer's log records as the CLI's own lines: ``warning: <message>`` (``error:`` from
    level ERROR), written to the ``sys.stderr`` of the moment (tests capture it)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)

    def emit(self, record: logging.LogRecord) -> None:
        try:
            prefix = "error" if record.levelno >= logging.ERROR else "warning"
            print(f"{prefix}: {record.getMessage()}", file=sys.stderr, flush=True)
        except Exception:  # a log line must never end the command
            self.handleError(record)


def _log_warnings() -> None:
    """Route the ``placer`` loggers' warnings through :class:`WarningLines`, once per process
    (``placer controller`` replaces it with its own logging)."""
    logger = logging.getLogger("placer")
    if not any(isinstance(h, WarningLines) for h in logger.handlers):
        logger.addHandler(WarningLines())


def exit_codes_text(width: int = 100) -> str:
    """The exit-code table of every command (:data:`placer.errors.EXIT_CODES`) as help text."""
    lines = ["exit codes:"]
    for code, meaning in EXIT_CODES:
        wrapped = textwrap.wrap(meaning, width - 6)
        lines.append(f"  {code}   {wrapped[0]}")
        lines += [f"      {more}" for more in wrapped[1:]]
    return "\n".join(lines) + "\n"


def command_names() -> list[str]:
    """Every subcommand, sorted: the modules of this package not starting with ``_``."""
    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def build_parser(commands: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The ``placer`` parser with every subcommand, or only ``commands`` (their modules alone
    are imported: what one command needs, not what all the others do)."""
    parser = _Parser(
        prog="placer",
        description="Multi-cluster placement for Kubernetes AI workloads.",
    )
    parser.add_argument("--version", action="version", version=f"placer {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name in command_names() if commands is None else commands:
        module = importlib.import_module(f"{__name__}.{name}")
        register = getattr(module, "register", None)
        if callable(register):
            register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``placer`` console script."""
    arguments = sys.argv[1:] if argv is None else list(argv)
    # `placer get ...` builds the parser of `get` alone and `placer --version` none; `placer`,
    # `placer --help` and an unknown command build all (the list of commands, suggestions)
    names = command_names()
    first = arguments[0] if arguments else None
    commands = [first] if first in names else [] if first == "--version" else names
    parser = build_parser([c for c in commands if c is not None])
    try:
        args = parser.parse_args(arguments)
    except SystemExit as done:  # --help, --version, or a usage error already printed
        return done.code if isinstance(done.code, int) else EXIT_USAGE
    handler: Handler | None = getattr(args, "func", None)
    if handler is None:
        parser.print_help(sys.stderr)
        return EXIT_USAGE
    _log_warnings()
    try:
        return handler(args)
    except PlacerError as err:
        print(f"error: {err}", file=sys.stderr)
        return err.exit_code
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return EXIT_ERROR
    except BrokenPipeError:
        return EXIT_ERROR
