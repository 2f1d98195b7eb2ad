"""Kubernetes quantities and canonical units."""

from __future__ import annotations

from fractions import Fraction

import pytest

from placer.quantity import format_quantity, parse_quantity, to_base, to_canonical


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("500m", Fraction(1, 2)),
        ("2", Fraction(2)),
        ("16Gi", Fraction(16 * 2**30)),
        ("1e3", Fraction(1000)),
        ("1.5k", Fraction(1500)),
        (".5", Fraction(1, 2)),
        (4, Fraction(4)),
        (0.25, Fraction(1, 4)),
        ("100n", Fraction(1, 10**7)),
    ],
)
def test_parse(text: object, value: Fraction) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("bad", ["", "abc", "1Qi", "--1", True, None, "1.2.3"])
def test_parse_rejects(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_quantity(bad)


def test_canonical_rounds_up_like_the_scheduler() -> None:
    assert to_canonical("cpu", "0.0001") == 1  # MilliValue rounds up
    assert to_canonical("cpu", "1.5") == 1500
    assert to_canonical("memory", "1.5") == 2
    assert to_canonical("nvidia.com/gpu", 4) == 4


def test_base_and_format() -> None:
    assert to_base("cpu", 500) == 0.5
    assert to_base("cpu", 4000) == 4
    assert format_quantity("cpu", 500) == "500m"
    assert format_quantity("cpu", 4000) == "4"
    assert format_quantity("memory", 16 * 2**30) == "16Gi"
    assert format_quantity("memory", 70_000_000) == "70000000"
    assert format_quantity("nvidia.com/gpu", 8) == "8"
