"""The describe view: tree arrangement, resource table, number formatting."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from placer.definitions import Catalog, Document, decompose
from placer.definitions.view import build_view, format_amount, render_text

Sample = Callable[[str], list[Document]]
GI = 2**30


@pytest.mark.parametrize(
    ("resource", "amount", "text"),
    [
        ("cpu", 8000, "8"),
        ("cpu", 1500, "1500m"),
        ("cpu", 0, "0"),
        ("memory", 16 * GI, "16Gi"),
        ("memory", 512 * 2**20, "512Mi"),
        ("memory", 70_000_000, "70M"),
        ("memory", 1234567, "1234567"),
        ("ephemeral-storage", 20 * GI, "20Gi"),
        ("nvidia.com/gpu", 12, "12"),
    ],
)
def test_format_amount(resource: str, amount: int, text: str) -> None:
    assert format_amount(resource, amount) == text


def test_nested_groups_render_as_a_tree(catalog: Catalog, sample: Sample) -> None:
    view = build_view(decompose(sample("leaderworkerset")[0].data, catalog))
    (group,) = view.rows
    assert (group.name, group.replicas, group.holds_pods) == ("group", 8, False)
    assert [(c.name, c.replicas) for c in group.children] == [("leader", 2), ("worker", 6)]
    text = render_text(view)
    assert (
        "`-- group        replicas: 8   gpu: 64\n    |-- leader   replicas: 2   gpu: 16\n" in text
    )
    assert "\nleader      2          16    16       64Gi\n" in text


def test_pod_bearing_roots_come_first_and_plumbing_is_dropped(
    catalog: Catalog, sample: Sample
) -> None:
    view = build_view(decompose(sample("deployment")[0].data, catalog))
    # the Deployment's ReplicaSet component has no pods, no replicas: not shown
    assert [row.label for row in view.rows] == ["deployment"]


def test_zero_replica_components_stay_in_the_tree_not_in_the_table(
    catalog: Catalog, sample: Sample
) -> None:
    text = render_text(build_view(decompose(sample("inferenceservice")[0].data, catalog)))
    assert "`-- explainer     replicas: 0" in text
    table = text.split("Resources:\n")[1]
    assert "explainer" not in table
    assert "TOTAL                     3          2     5075m   18Gi" in table


def test_every_requested_resource_gets_a_column(catalog: Catalog, sample: Sample) -> None:
    text = render_text(build_view(decompose(sample("raycluster")[0].data, catalog)))
    header = text.split("Resources:\n")[1].splitlines()[0]
    assert header.split() == ["COMPONENT", "REPLICAS", "GPU", "CPU", "MEMORY", "google.com/tpu"]
    assert "worker/tpu-slice   4          0     96    384Gi    16" in text
