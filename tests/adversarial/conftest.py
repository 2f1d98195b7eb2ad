"""Shared pieces of the adversarial suite: a Hypothesis profile and hostile definition builders.

Hypothesis runs are bounded (``max_examples``, no per-example deadline on this shared machine)
and derandomized, so ``make test`` explores the same examples every run and stays reproducible.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, settings

from tests.builders import objects

settings.register_profile(
    "placer",
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
settings.load_profile("placer")

#: A valid Karta whose root status expression is replaced by the hostile one under test.
KARTA: dict[str, Any] = objects.karta("hostile", kind="Widget", component="widget")
#: Where :func:`karta_with` puts the expression, as validation names it.
EXPRESSION_FIELD = (
    "spec.structureDefinition.rootComponent.statusDefinition.statusMappings.running[0]"
    ".byExpression.expression"
)


def _karta_with(expression: str, name: str = "hostile") -> dict[str, Any]:
    data = copy.deepcopy(KARTA)
    data["metadata"]["name"] = name
    root = data["spec"]["structureDefinition"]["rootComponent"]
    root["statusDefinition"]["statusMappings"]["running"][0]["byExpression"]["expression"] = (
        expression
    )
    return data


@pytest.fixture
def karta_with() -> Callable[..., dict[str, Any]]:
    """``karta_with(expression, name="hostile")``: :data:`KARTA` with ``expression`` as its
    running status expression (validation names it :data:`EXPRESSION_FIELD`)."""
    return _karta_with


@pytest.fixture
def write_yaml(tmp_path: Path) -> Callable[..., Path]:
    """``write_yaml(name, *documents)``: a YAML file under ``tmp_path``."""

    def write(name: str, *documents: Any) -> Path:
        path = tmp_path / name
        path.write_text(yaml.safe_dump_all(documents, sort_keys=False))
        return path

    return write
