"""Where the carried trace files live, and a CSV reader that names the file, line and column.

The trace files are package data of ``placer.traces`` (``placer/traces/data/``, see its
README), so the readers find them relative to this module whether placer runs from a checkout
or from an installed wheel; nothing here depends on the working directory, on the benchmarks
(``simulations/``) or on ``../shared``. Large task lists are stored gzip-compressed and read
transparently.

Every reader in ``placer.traces`` (and in the benchmarks' fleet builders) also accepts a path
to a user's own file in the same format, so a malformed row must produce an
:class:`~placer.errors.InputError` that says which file, which line and which column is wrong —
never a ``ValueError`` traceback. :class:`CsvRow` does that once for all readers.
"""

from __future__ import annotations

import csv
import gzip
import io
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from placer.errors import InputError

__all__ = ["DATA_DIR", "KALOS_DIR", "OPENB_DIR", "CsvRow", "read_csv"]

DATA_DIR = Path(__file__).resolve().parent / "data"
OPENB_DIR = DATA_DIR / "alibaba-openb-gpu-2023"
KALOS_DIR = DATA_DIR / "acme-kalos-gangs-derived"

#: DictReader key for cells beyond the header (a malformed row).
_EXTRA = "\0extra"


@dataclass(frozen=True)
class CsvRow:
    """One data row of a CSV file, with typed accessors that fail with a precise message."""

    source: str
    #: 1-based line number in the file (the header is line 1 when there is one).
    line: int
    values: Mapping[str, str]

    def has(self, column: str) -> bool:
        """Whether the column exists and is not empty in this row."""
        return bool(self.values.get(column, "").strip())

    def text(self, column: str) -> str:
        """The cell as text (stripped); a missing column is an error, an empty cell is ``""``."""
        if column not in self.values:
            raise self.error(column, "the column is missing")
        return self.values[column].strip()

    def integer(self, column: str, *, minimum: int = 0) -> int:
        """The cell as a whole number ``>= minimum`` (``"12.0"`` is accepted as 12)."""
        value = self.number(column, minimum=minimum)
        if not value.is_integer():
            raise self.error(column, f"{self.text(column)!r} is not a whole number")
        return int(value)

    def optional_integer(self, column: str, *, minimum: int = 0) -> int | None:
        """Like :meth:`integer`, but ``None`` when the column is absent or the cell empty."""
        return self.integer(column, minimum=minimum) if self.has(column) else None

    def number(self, column: str, *, minimum: float = 0.0) -> float:
        """The cell as a finite number ``>= minimum``."""
        raw = self.text(column)
        try:
            value = float(raw)
        except ValueError:
            raise self.error(column, f"{raw!r} is not a number") from None
        if value != value or value in (float("inf"), float("-inf")):
            raise self.error(column, f"{raw!r} is not a finite number")
        if value < minimum:
            raise self.error(column, f"{raw!r} is below {minimum:g}")
        return value

    def error(self, column: str, message: str) -> InputError:
        """An :class:`InputError` pointing at this row and column."""
        return InputError(message, source=self.source, field=f"line {self.line}, column {column}")


def read_csv(
    path: str | Path,
    *,
    required: Sequence[str] = (),
    columns: Sequence[str] | None = None,
) -> list[CsvRow]:
    """Read a CSV (or gzip-compressed ``.csv.gz``) file into rows.

    Args:
        path: the file.
        required: columns the header must have (checked up front, so a wrong file fails with
            one message instead of one per row).
        columns: column names for a file without a header row; ``None`` when the first line is
            the header.

    Raises:
        InputError: the file is missing or unreadable, a required column is absent, or a row
            has more cells than the header.
    """
    source = str(path)
    try:
        raw = Path(path).read_bytes()
        if source.endswith(".gz"):
            raw = gzip.decompress(raw)
        text = raw.decode("utf-8")
    except FileNotFoundError:
        raise InputError(
            "no such file",
            source=source,
            hint="check the path; the carried traces are listed in placer/traces/data/README.md",
        ) from None
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read: {exc}", source=source) from None
    reader = csv.DictReader(io.StringIO(text), fieldnames=columns, restkey=_EXTRA)
    header = list(reader.fieldnames or [])
    missing = [c for c in required if c not in header]
    if missing:
        raise InputError(
            f"missing column(s) {', '.join(missing)}; the header has {', '.join(header) or 'none'}",
            source=source,
            field="header",
        )
    rows: list[CsvRow] = []
    for record in reader:
        line = reader.line_num
        extra = record.get(_EXTRA)
        if extra is not None:
            raise InputError(
                f"{len(header) + len(extra)} cells for {len(header)} columns",
                source=source,
                field=f"line {line}",
            )
        values = {k: (v if v is not None else "") for k, v in record.items()}
        rows.append(CsvRow(source=source, line=line, values=values))
    return rows
