"""A workload moved away from a member avoids it (placer.dev/avoid-clusters, read by decompose
and honoured by the solver with its reason)."""

from __future__ import annotations

import copy
from pathlib import Path

import yaml

from placer.definitions import Catalog, decompose
from placer.snapshot import load_snapshot
from placer.solver import solve

ROOT = Path(__file__).resolve().parents[2]
SEED = yaml.safe_load((ROOT / "examples" / "jobset-demo.yaml").read_text())


def test_an_avoided_cluster_is_left_out_with_its_reason() -> None:
    fleet = load_snapshot(ROOT / "clusters" / "demo.yaml")
    body = copy.deepcopy(SEED)
    assert solve([decompose(body, Catalog.builtin()).workload], fleet).placements[0].cluster == (
        "central"
    )
    body["metadata"]["annotations"] = {"placer.dev/avoid-clusters": "central, west"}
    workload = decompose(body, Catalog.builtin()).workload
    assert workload.avoid_clusters == ("central", "west")
    decision = solve([workload], fleet)
    assert not decision.placements
    [unplaced] = decision.unplaced
    assert "moved away from this cluster" in unplaced.reasons["central"]
    assert "placer.dev/avoid-clusters" in unplaced.reasons["west"]


def test_the_snapshot_free_decision_leaves_avoided_clusters_out_too() -> None:
    """`placer submit --snapshot-free` (and re-decisions of a dispatch made without capacity)
    choose among the clusters the workload does not avoid."""
    from placer.dispatch.submit import snapshot_free_decision
    from placer.model import AVOIDED_REASON

    fleet = load_snapshot(ROOT / "clusters" / "demo.yaml")
    body = copy.deepcopy(SEED)
    first = fleet.clusters[0].name
    workload = decompose(body, Catalog.builtin()).workload
    assert snapshot_free_decision([workload], fleet, ()).placements[0].cluster == first
    body["metadata"]["annotations"] = {"placer.dev/avoid-clusters": first}
    workload = decompose(body, Catalog.builtin()).workload
    decision = snapshot_free_decision([workload], fleet, ())
    assert decision.placements[0].cluster == fleet.clusters[1].name
    body["metadata"]["annotations"] = {"placer.dev/avoid-clusters": ",".join(fleet.names)}
    decision = snapshot_free_decision([decompose(body, Catalog.builtin()).workload], fleet, ())
    assert not decision.placements
    assert set(decision.unplaced[0].reasons.values()) == {AVOIDED_REASON}
