"""Argument types shared by every command: numbers, ports, addresses and output paths.

A bad value is refused while the command line is parsed (``error: argument --timeout: must be a
positive number of seconds, got 'nan'``, exit code 2), never later as a traceback or a loop that
fails every cycle. Each type is a callable for ``argparse``'s ``type=``; it raises
``argparse.ArgumentTypeError`` with the rule and the value.

* :func:`seconds` — a positive finite number of seconds, at most :data:`MAX_SECONDS` (``nan``,
  ``inf``, ``0``, ``-1`` and ``1e300`` are refused: a timeout the OS cannot hold overflows);
* :func:`seconds_or_zero` — the same, ``0`` allowed (an interval that can be switched off);
* :func:`count` — an integer within bounds (``count(1, 100_000)``);
* :data:`SEED` — a solver seed: OR-Tools takes a 32-bit signed integer;
* :func:`port` — a TCP port, ``0`` for any free one;
* :func:`address` — an IP address or host name to listen on;
* :func:`output_file` — a file that can be written: its folder exists and is writable, it is not
  a folder itself (checked before any work is done, so a mistyped path costs nothing).
"""

from __future__ import annotations

import argparse
import ipaddress
import math
import os
import re
from collections.abc import Callable
from pathlib import Path

__all__ = [
    "MAX_SECONDS",
    "SEED",
    "address",
    "count",
    "output_file",
    "port",
    "seconds",
    "seconds_or_zero",
]

#: Longest duration accepted (about 115 days): beyond, timeouts overflow the OS's timers.
MAX_SECONDS = 1e7


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}")
    return value


def seconds(text: str) -> float:
    """A positive, finite number of seconds, at most :data:`MAX_SECONDS`."""
    value = _number(text, "a positive number of seconds")
    if not 0 < value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"must be a positive number of seconds up to {MAX_SECONDS:g}, got {text!r}"
        )
    return value


def seconds_or_zero(text: str) -> float:
    """Like :func:`seconds`, and ``0`` is allowed."""
    value = _number(text, "a number of seconds (0 or more)")
    if not 0 <= value <= MAX_SECONDS:
        raise argparse.ArgumentTypeError(
            f"must be a number of seconds from 0 to {MAX_SECONDS:g}, got {text!r}"
        )
    return value


def count(low: int, high: int, what: str = "an integer") -> Callable[[str], int]:
    """An integer from ``low`` to ``high`` (inclusive)."""

    def parse(text: str) -> int:
        if not re.fullmatch(r"\s*[+-]?\d{1,30}\s*", text):
            raise argparse.ArgumentTypeError(
                f"must be {what} from {low} to {high}, got {text[:40]!r}"
            )
        value = int(text)
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"must be {what} from {low} to {high}, got {text!r}")
        return value

    parse.__name__ = "integer"  # argparse names the type in its own messages
    return parse


#: A solver seed (OR-Tools' random_seed is a 32-bit signed integer).
SEED = count(0, 2**31 - 1, "a seed")


def port(text: str) -> int:
    """A TCP port (0 = any free port)."""
    return count(0, 65535, "a port number")(text)


def address(text: str) -> str:
    """An IP address or a host name to listen on."""
    candidate = text.strip()
    try:
        ipaddress.ip_address(candidate)
        return candidate
    except ValueError:
        pass
    label = r"(?!-)[A-Za-z0-9-]{1,63}(?<!-)"
    if len(candidate) <= 253 and re.fullmatch(rf"{label}(\.{label})*\.?", candidate):
        if not re.fullmatch(r"[\d.]+", candidate):  # 999.1.1.1 is no host name
            return candidate
    raise argparse.ArgumentTypeError(f"must be an IP address or a host name, got {text!r}")


def output_file(text: str) -> str:
    """A file placer can write (``-`` = standard output): checked before any work is done."""
    if text == "-":
        return text
    path = Path(text)
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text!r} is a directory; give a file name")
    folder = path.parent if str(path.parent) else Path(".")
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(
            f"cannot write {text!r}: folder {str(folder)!r} does not exist"
        )
    if path.exists() and not os.access(path, os.W_OK):
        raise argparse.ArgumentTypeError(f"cannot write {text!r}: permission denied")
    if not path.exists() and not os.access(folder, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(
            f"cannot write {text!r}: folder {str(folder)!r} is not writable"
        )
    return text
