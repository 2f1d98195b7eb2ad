"""Issue 14 in the controller: fair-share rebalancing (``placer controller --rebalance``).

One member (``m1``: 12 nodes of 8 GPUs, 96 GPUs; its Jobs run pods: :class:`placer.virtual.
realism.Realism`). team-a (quota 16, ``overQuotaWeight`` 1) fills it with twelve 8-GPU Jobs, 80
GPUs over its quota, half of them protected (``placer.dev/preemptible: "false"``); then team-b
(quota 0, ``overQuotaWeight`` 3) asks for six 8-GPU Jobs, all over its quota: reclaim cannot
help it (it is in no quota). The weights divide the 80 over-quota GPUs 32 : 48 (team-b asks
48: it gets all of it, team-a the rest), so rebalancing evicts exactly six of team-a's Jobs —
its six unprotected ones — for team-b's six, and then stops. team-c (quota 0, weight 1) waits
with a priority-10 Job no node can hold: not part of the split, and no obstacle to lower
priorities.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest

from placer.cli import main
from placer.controller import ControllerSettings
from placer.solver.rebalance import RebalancePolicy
from tests.controller.conftest import HubFleet
from tests.controller.test_eviction import Invariants, controller, preempted, with_pods
from tests.controller.test_queues import GPU, hub_job, queue, serve_queues, team_job

PROTECTED = {"placer.dev/preemptible": "false"}


def teams(hubfleet: HubFleet, *, reclaimable: bool = True) -> None:
    """team-a (quota 16, weight 1), team-b (quota 0, weight 3) and team-c (quota 0, weight 1)
    on the hub."""
    team_a = queue("team-a", 16, overQuotaWeight=1)
    if not reclaimable:
        team_a["spec"]["reclaimable"] = False
    serve_queues(
        hubfleet,
        team_a,
        queue("team-b", 0, overQuotaWeight=3),
        queue("team-c", 0, overQuotaWeight=1),
    )


def fill(hubfleet: HubFleet, protected: int, others: int) -> tuple[list[str], list[str]]:
    """team-a's Jobs on m1: ``protected`` of them protected, then ``others`` (created last: the
    youngest, the ones an eviction would pick first if protection were ignored)."""
    guarded = [f"a-kept-{i}" for i in range(protected)]
    free = [f"a-{i}" for i in range(others)]
    for name in guarded:
        hubfleet.hub.store.create(team_job(hubfleet, name, "team-a", **PROTECTED))
    for name in free:
        hubfleet.hub.store.create(team_job(hubfleet, name, "team-a"))
    hubfleet.wait_for(
        lambda: all(hubfleet.placed_cluster(hub_job(hubfleet, n)) == "m1" for n in guarded + free),
        timeout=60,
        what="team-a's Jobs placed",
    )
    return guarded, free


def submit_b(hubfleet: HubFleet, count: int) -> list[str]:
    names = [f"b-{i}" for i in range(count)]
    for name in names:
        hubfleet.hub.store.create(team_job(hubfleet, name, "team-b"))
    return names


def metric(running: Any, reason: str) -> float:
    for line in running.controller.metrics.exposition().decode().splitlines():
        if line.startswith(f'placer_preemptions_total{{reason="{reason}"}}'):
            return float(line.split()[-1])
    return 0.0


def test_rebalancing_evicts_over_share_work_toward_the_weight_split(
    hubfleet: HubFleet, caplog: pytest.LogCaptureFixture
) -> None:
    """team-b's six over-quota Jobs are placed by evicting team-a's six unprotected Jobs (reason
    ``Rebalance``, Events naming the preemptors, ``placer_preemptions_total{reason=
    "rebalance"}`` 6), at most four moves a cycle; the over-quota GPUs end 32 : 48 as the
    weights say, and nothing more is evicted after. Never more GPUs than m1 has, never two
    copies of a Job."""
    caplog.set_level(logging.INFO, logger="placer.controller")
    m1 = hubfleet.members["m1"]
    with_pods(m1)
    invariants = Invariants(hubfleet, ("m1",))
    teams(hubfleet)
    running = controller(hubfleet, ("m1",), rebalance=RebalancePolicy(tolerance=0.05))
    guarded, free = fill(hubfleet, protected=6, others=6)
    # team-c's priority-10 Job asks for a pod of 16 GPUs: no node of m1 could ever hold it;
    # it neither counts as team-c's demand nor holds team-b's priority-0 work back
    huge = hubfleet.job("c-huge", gpus=16, labels={"placer.dev/queue": "team-c"})
    huge["metadata"]["labels"]["placer.dev/priority"] = "10"
    hubfleet.hub.store.create(huge)
    hubfleet.wait_for(
        lambda: (
            (hubfleet.condition(hub_job(hubfleet, "c-huge")) or {}).get("reason") == "Unschedulable"
        ),
        what="team-c's Job unschedulable",
    )
    started = time.monotonic()
    b_jobs = submit_b(hubfleet, 6)
    hubfleet.wait_for(
        lambda: all(hubfleet.placed_cluster(hub_job(hubfleet, n)) == "m1" for n in b_jobs),
        timeout=90,
        what="team-b's Jobs placed by rebalancing",
    )
    print(f"team-b's six Jobs placed {time.monotonic() - started:.1f} s after they were created")
    # exactly team-a's unprotected Jobs were evicted, and all of them
    assert sorted(preempted(hubfleet, free + guarded)) == sorted(free)
    assert all(hubfleet.placed_cluster(hub_job(hubfleet, n)) == "m1" for n in guarded)
    preemptors = set()
    for name in free:
        victim = hub_job(hubfleet, name)
        condition = hubfleet.condition(victim, "Preempted") or {}
        assert condition["reason"] == "Rebalance", condition
        assert "fair-share rebalancing" in condition["message"]
        named = [b for b in b_jobs if f"Job/team-a/{b}" in condition["message"]]
        assert len(named) == 1, condition["message"]
        preemptors.add(named[0])
        assert hubfleet.placed_cluster(victim) is None
        [parked] = hubfleet.copies(name).values()  # suspended on m1, naming its preemptor
        assert parked["spec"]["suspend"] is True
        assert hubfleet.annotations(parked)["placer.dev/preempted-by"] == f"Job/team-a/{named[0]}"
        events = hubfleet.wait_for(
            lambda name=name: [e for e in hubfleet.events(name) if e["reason"] == "Preempted"],
            what=f"{name}'s Preempted Event",
        )
        assert events[0]["type"] == "Warning" and named[0] in events[0]["message"]
    assert preemptors == set(b_jobs)  # one victim each: no preemptor evicted twice
    for name in b_jobs:
        hubfleet.wait_for(
            lambda name=name: any(
                e["reason"] == "Preempting" and "rebalance" in e["message"]
                for e in hubfleet.events(name)
            ),
            what=f"{name}'s Preempting Event",
        )
    assert metric(running, "rebalance") == 6.0
    assert metric(running, "reclaim") == 0.0 and metric(running, "preempt") == 0.0
    series = (
        f'placer_queue_allocated{{queue="team-a",resource="{GPU}"}} 48.0',
        f'placer_queue_allocated{{queue="team-b",resource="{GPU}"}} 48.0',
        f'placer_queue_pending{{queue="team-a",resource="{GPU}"}} 48.0',
    )
    hubfleet.wait_for(
        lambda: all(s in running.controller.metrics.exposition().decode() for s in series),
        timeout=30,
        what="the queue gauges at the weight split",
    )
    # settled: the split is the weights' (gaps 0), the victims wait, nothing more is evicted
    time.sleep(2.0)  # (ten batch windows, backoffs of 0.2-2 s: the victims are decided again)
    assert metric(running, "rebalance") == 6.0
    assert all(hubfleet.placed_cluster(hub_job(hubfleet, n)) is None for n in free)
    assert hubfleet.placed_cluster(hub_job(hubfleet, "c-huge")) is None
    copies = m1.store.list("jobs", hubfleet.NAMESPACE)
    assert sum(1 for c in copies if not c["spec"].get("suspend")) == 12
    assert invariants.checks > 0 and invariants.violations == []
    per_cycle = moves_per_cycle(caplog.records)
    print(f"rebalancing evictions per cycle: {per_cycle}")
    assert sum(per_cycle) == 6 and max(per_cycle) <= RebalancePolicy().max_evictions


def moves_per_cycle(records: list[logging.LogRecord]) -> list[int]:
    """The rebalancing evictions of each cycle that made some, from the controller's log (both
    records come from the cycle thread, in order)."""
    counts = [0]
    for record in records:
        event = getattr(record, "event", None)
        if event == "cycle":
            counts.append(0)
        elif event == "preempted" and getattr(record, "reason", None) == "rebalance":
            counts[-1] += 1
    return [c for c in counts if c]


@pytest.mark.parametrize(
    ("protected", "overrides", "reclaimable"),
    [
        (True, {"rebalance": RebalancePolicy(tolerance=0.05)}, True),
        (False, {"rebalance": RebalancePolicy(tolerance=0.05)}, False),
        (False, {}, True),
    ],
    ids=["preemptible-false", "queue-not-reclaimable", "rebalance-off"],
)
def test_no_rebalancing_of_protected_work_or_when_off(
    hubfleet: HubFleet, protected: bool, overrides: dict[str, Any], reclaimable: bool
) -> None:
    """Every one of team-a's Jobs protected, team-a's queue ``reclaimable: false``, or a
    controller without ``--rebalance`` (the default): team-b's over-quota Jobs wait
    (``Unschedulable``), nothing is evicted."""
    teams(hubfleet, reclaimable=reclaimable)
    running = controller(hubfleet, ("m1",), **overrides)
    guarded, free = fill(hubfleet, protected=12 if protected else 0, others=0 if protected else 12)
    b_jobs = submit_b(hubfleet, 2)
    hubfleet.wait_for(
        lambda: all(
            (hubfleet.condition(hub_job(hubfleet, n)) or {}).get("reason") == "Unschedulable"
            for n in b_jobs
        ),
        timeout=30,
        what="team-b's Jobs unschedulable",
    )
    time.sleep(1.0)  # (several cycles: team-b's Jobs are decided again after their backoff)
    names = guarded + free
    assert all(hubfleet.placed_cluster(hub_job(hubfleet, n)) == "m1" for n in names)
    assert preempted(hubfleet, names) == []
    assert "placer_preemptions_total{" not in running.controller.metrics.exposition().decode()


def test_rebalance_needs_preemption(hubfleet: HubFleet, capsys: pytest.CaptureFixture[str]) -> None:
    """``--rebalance`` with ``--no-preemption`` is refused (it evicts), as is a tolerance out of
    [0, 1); the settings refuse the same."""
    kubeconfigs = ["--kubeconfig", str(hubfleet.hub_kubeconfig)]
    kubeconfigs += ["--kubeconfig", str(hubfleet.members_kubeconfig)]
    base = ["controller", "--hub-context", "hub", *kubeconfigs, "--no-leader-election"]
    assert main([*base, "--rebalance", "0.05", "--no-preemption"]) == 2
    assert "--rebalance goes with preemption: not with --no-preemption" in capsys.readouterr().err
    assert main([*base, "--rebalance", "1.5"]) == 2
    assert "TOLERANCE is a fraction" in capsys.readouterr().err
    assert main([*base, "--rebalance-max-age", "60"]) == 2
    assert "--rebalance-max-age goes with --rebalance" in capsys.readouterr().err
    with pytest.raises(ValueError, match="needs preemption on"):
        ControllerSettings(rebalance=RebalancePolicy(), preemption=False)


def test_a_move_whose_eviction_fails_is_not_repeated_at_once(hubfleet: HubFleet) -> None:
    """m1 refuses every update of a Job (the suspension is a PUT): the move's victim cannot be
    evicted, so nothing is evicted and team-b's Job waits, tried again only after its backoff
    (0.2 s doubling to 2 s here), not at every batch window; once m1 accepts the write again
    the move is made and team-b's Job placed."""
    teams(hubfleet)
    running = controller(hubfleet, ("m1",), rebalance=RebalancePolicy(tolerance=0.05))
    _, free = fill(hubfleet, protected=0, others=12)
    m1 = hubfleet.members["m1"]
    refused = m1.faults.fail(403, times=None, verb="update", resource="jobs.batch")
    hubfleet.hub.store.create(team_job(hubfleet, "b-0", "team-b"))
    hubfleet.wait_for(lambda: refused.hits >= 1, what="the suspension tried")
    time.sleep(4.0)
    tries = refused.hits
    print(f"suspensions tried in about 4 s while refused: {tries}")
    # the backoff allows at most 0.2 + 0.4 + 0.8 + 1.6 + 2: six decisions of b-0 in 4 s; a move
    # repeated at every batch window (0.2 s) would be about 20
    assert 1 <= tries <= 7
    assert preempted(hubfleet, free) == []
    assert all(hubfleet.placed_cluster(hub_job(hubfleet, n)) == "m1" for n in free)
    assert metric(running, "rebalance") == 0.0
    m1.faults.clear()
    hubfleet.wait_for(
        lambda: hubfleet.placed_cluster(hub_job(hubfleet, "b-0")) == "m1",
        timeout=30,
        what="team-b's Job placed once the eviction goes through",
    )
    assert len(preempted(hubfleet, free)) == 1 and metric(running, "rebalance") == 1.0
