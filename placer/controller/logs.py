"""Structured logs: one JSON object per line, for log collectors (or plain text for people).

Every record gets ``time`` (RFC 3339 with milliseconds, UTC), ``level``, ``logger`` and ``msg``;
the controller adds context with ``extra=`` — ``event`` (a stable name such as ``placed``,
``unschedulable``, ``failover``), ``workload`` (``Kind/namespace/name``), ``cluster``,
``decision``, ``reason`` and a few counts. Only those keys are emitted: an arbitrary object
handed to ``extra`` never reaches the output, and the messages are built from placer's own
errors, whose texts are already free of credentials (see :mod:`placer.kube.translate`).
"""

from __future__ import annotations

import json
import logging
import sys
from typing import Any, TextIO

from placer.timestamps import rfc3339

__all__ = ["CONTEXT_KEYS", "JsonFormatter", "configure_logging"]

#: ``extra=`` keys copied into the JSON line.
CONTEXT_KEYS = (
    "event",
    "workload",
    "cluster",
    "decision",
    "reason",
    "identity",
    "count",
    "placed",
    "unplaced",
    "seconds",
    "kind",
    "timings",
)


class JsonFormatter(logging.Formatter):
    """Formats a record as one JSON line (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": rfc3339(record.created, digits=3),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in CONTEXT_KEYS:
            value = record.__dict__.get(key)
            if isinstance(value, (str, int, float, bool)):
                line[key] = value
            elif isinstance(value, dict):
                line[key] = {
                    str(k): v for k, v in value.items() if isinstance(v, (str, int, float, bool))
                }
        if record.exc_info and record.exc_info[0] is not None:
            line["error"] = f"{record.exc_info[0].__name__}: {record.exc_info[1]}"
        return json.dumps(line, ensure_ascii=False)


def configure_logging(
    level: str = "info", *, fmt: str = "json", stream: TextIO | None = None
) -> None:
    """Send every log record to ``stream`` (stderr) as JSON lines, or plain text.

    placer's loggers log at ``level``; other libraries' only warnings and errors (urllib3's
    per-retry warnings are left out: placer reports an unreachable member itself), so that
    the stream stays one format.
    """
    handler = logging.StreamHandler(stream or sys.stderr)
    if fmt == "json":
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(logging.WARNING)
    placer = logging.getLogger("placer")
    placer.handlers[:] = []
    placer.setLevel(level.upper())
    placer.propagate = True
    logging.getLogger("urllib3").setLevel(logging.ERROR)
