"""Issue 16 in the controller: reservations with backfill for big gangs that wait.

One member (``m1``: 12 nodes of 8 GPUs). The members run no scheduler, so placed Jobs hold
their capacity through the in-flight ledger (their planned pods on the member's nodes). Ten
one-node Jobs expected to run an hour fill ten nodes; a gang of twelve 8-GPU pods then needs the
whole member: it gets a reservation on the twelve nodes from the moment the ten are expected to
end. From then on a one-node Job expected to be done by then backfills into a free node, one
without an expected run time or expected to run past the start does not.
"""

from __future__ import annotations

import json
import signal
import time
from typing import Any

import httpx
import pytest

from placer.cli import main
from placer.controller import Endpoints, HttpServer
from placer.controller.reservationstore import CONFIGMAP, DATA_KEY
from placer.controller.settings import BackoffSettings
from placer.fleet import fleet_from_kubeconfigs
from placer.solver.reservations import ReservationPolicy
from placer.timestamps import parse_rfc3339
from tests.controller.conftest import HubFleet, Running

HOUR = 3600.0


def reserving(hubfleet: HubFleet, **overrides: Any) -> Running:
    """A controller on ``m1`` alone, reservations for gangs of 64 GPUs or more at once."""
    fleet = fleet_from_kubeconfigs([hubfleet.members_kubeconfig], ["m1"], timeout=5.0)
    policy = ReservationPolicy(after_s=0, min_gpus=64, grace_s=60)
    return hubfleet.controller(fleet, reservations=policy, **overrides)


def timed_job(hubfleet: HubFleet, name: str, runtime: str | None, **kwargs: Any) -> dict[str, Any]:
    body = hubfleet.job(name, gpus=8, **kwargs)
    if runtime is not None:
        body["metadata"]["annotations"] = {"placer.dev/expected-runtime": runtime}
    return body


def hub_job(hubfleet: HubFleet, name: str) -> dict[str, Any]:
    return hubfleet.hub.store.get("jobs", name, hubfleet.NAMESPACE)


def kept(hubfleet: HubFleet) -> list[dict[str, Any]]:
    """The reservations in the hub's ConfigMap (none when it does not exist)."""
    for obj in hubfleet.hub.store.list("configmaps", "placer-system"):
        if obj["metadata"]["name"] == CONFIGMAP:
            return list(json.loads(obj["data"][DATA_KEY]))
    return []


def fill(hubfleet: HubFleet, count: int = 10, runtime: str = "1h") -> list[str]:
    """``count`` one-node Jobs expected to run ``runtime``, placed on m1."""
    names = [f"warm-{i}" for i in range(count)]
    for name in names:
        hubfleet.hub.store.create(timed_job(hubfleet, name, runtime))
    hubfleet.wait_for(
        lambda: all(hubfleet.placed_cluster(hub_job(hubfleet, n)) == "m1" for n in names),
        timeout=60,
        what="the warm Jobs placed",
    )
    return names


def reserved(hubfleet: HubFleet, name: str) -> dict[str, Any]:
    """Wait for ``name``'s ``Reserved=True`` condition and return it."""
    found: dict[str, Any] = hubfleet.wait_for(
        lambda: (
            (c := hubfleet.condition(hub_job(hubfleet, name), "Reserved"))
            and c["status"] == "True"
            and c
        ),
        timeout=60,
        what=f"{name} reserved",
    )
    return found


def refused_by_reservation(hubfleet: HubFleet, name: str) -> str:
    """Wait until ``name`` is refused for the reservation's taint; its message."""
    message: str = hubfleet.wait_for(
        lambda: (
            (c := hubfleet.condition(hub_job(hubfleet, name)) or {}).get("status") == "False"
            and "placer.dev/reserved" in c.get("message", "")
            and c["message"]
        ),
        timeout=60,
        what=f"{name} kept off the reserved nodes",
    )
    return message


def test_big_gang_gets_a_reservation_small_work_backfills_only_when_done_in_time(
    hubfleet: HubFleet, capsys: pytest.CaptureFixture[str]
) -> None:
    running = reserving(hubfleet)
    server = HttpServer(
        Endpoints(
            healthy=running.controller.healthy,
            ready=running.controller.ready,
            metrics=running.controller.metrics.exposition,
            fleet=running.controller.fleet_document,
            placements=running.controller.placements_document,
        ),
        host="127.0.0.1",
        port=0,
    ).start()
    try:
        warm = fill(hubfleet)
        placed_at = max(
            parse_rfc3339(hubfleet.annotations(hub_job(hubfleet, n))["placer.dev/placed-at"]) or 0
            for n in warm
        )
        hubfleet.hub.store.create(hubfleet.job("pretrain", gpus=8, pods=12))
        condition = reserved(hubfleet, "pretrain")
        assert "cluster m1" in condition["message"]

        (entry,) = kept(hubfleet)
        assert (entry["kind"], entry["name"], entry["cluster"]) == ("Job", "pretrain", "m1")
        assert sorted(entry["nodes"]) == sorted(f"m1-n{i}" for i in range(12))
        start = parse_rfc3339(entry["start"])
        assert start is not None and abs(start - (placed_at + HOUR)) < 5, (entry, placed_at)
        assert entry["uid"] == hub_job(hubfleet, "pretrain")["metadata"]["uid"]
        events = hubfleet.wait_for(
            lambda: [e for e in hubfleet.events("pretrain") if e["reason"] == "Reserved"],
            what="the Reserved Event",
        )
        assert "cluster m1" in events[0]["message"] and events[0]["type"] == "Normal"

        # done in five minutes, long before the start: backfills into a free node
        hubfleet.hub.store.create(timed_job(hubfleet, "eval", "5m"))
        hubfleet.wait_for(
            lambda: hubfleet.placed_cluster(hub_job(hubfleet, "eval")) == "m1",
            timeout=60,
            what="eval backfilled",
        )
        # no estimate, or one past the start: kept off the reserved nodes, though one is free
        hubfleet.hub.store.create(timed_job(hubfleet, "sweep", None))
        hubfleet.hub.store.create(timed_job(hubfleet, "finetune", "2h"))
        for name in ("sweep", "finetune"):
            message = refused_by_reservation(hubfleet, name)
            assert "Job/team-a/pretrain" in message, message
            assert hubfleet.placed_cluster(hub_job(hubfleet, name)) is None
        assert hubfleet.copies("sweep") == {} and hubfleet.copies("finetune") == {}

        document = httpx.get(f"{server.url}/v1/placements").json()
        (listed,) = document["reservations"]
        assert listed["name"] == "pretrain" and listed["cluster"] == "m1"
        (item,) = [p for p in document["placements"] if p["name"] == "pretrain"]
        assert item["reservation"]["start"] == entry["start"] and item["state"] != "placed"
        metrics = httpx.get(f"{server.url}/metrics").text
        assert 'placer_reservations{cluster="m1"} 1.0' in metrics
        # placer get reservations, against the hub: a table, and the same items as JSON
        hub = ["--hub-context", "hub", "--kubeconfig", str(hubfleet.hub_kubeconfig)]
        capsys.readouterr()
        assert main(["get", "reservations", *hub]) == 0
        header, row = capsys.readouterr().out.splitlines()
        assert header.split()[:7] == [
            "NAMESPACE",
            "NAME",
            "KIND",
            "GPU",
            "CLUSTER",
            "NODES",
            "START",
        ]
        cells = row.split()
        assert cells[:7] == ["team-a", "pretrain", "Job", "96", "m1", "12", "in"], row
        assert cells[7].endswith("m") and 55 <= int(cells[7][:-1]) <= 59, row  # an hour less
        assert main(["get", "reservations", *hub, "-o", "json"]) == 0
        (shown,) = json.loads(capsys.readouterr().out)["reservations"]
        assert shown == {**entry, "gpus": 96}
        assert main(["get", "reservations", *hub, "-n", "other", "-o", "json"]) == 0
        assert json.loads(capsys.readouterr().out) == {"reservations": []}
        # -A (kubectl's habit) is every namespace, as without -n
        assert main(["get", "reservations", *hub, "-A", "-o", "json"]) == 0
        assert json.loads(capsys.readouterr().out) == {"reservations": [shown]}
        assert 'placer_reservation_outcomes_total{outcome="made"} 1.0' in metrics

        # the warm Jobs and eval end early (deleted): the gang is placed, its reservation ends
        for name in (*warm, "eval"):
            hubfleet.hub.store.delete("jobs", name, hubfleet.NAMESPACE)
        hubfleet.wait_for(
            lambda: hubfleet.placed_cluster(hub_job(hubfleet, "pretrain")) == "m1",
            timeout=60,
            what="pretrain placed",
        )
        hubfleet.wait_for(lambda: kept(hubfleet) == [], what="the reservation released")
        hubfleet.wait_for(
            lambda: hubfleet.condition(hub_job(hubfleet, "pretrain"), "Reserved") is None,
            what="the Reserved condition gone",
        )
        assert hubfleet.placed_cluster(hub_job(hubfleet, "sweep")) is None  # the gang has m1
        metrics = running.controller.metrics.exposition().decode()
        assert 'placer_reservation_outcomes_total{outcome="placed"} 1.0' in metrics
        assert 'placer_reservations{cluster="m1"}' not in metrics
        assert running.controller.placements_document()["reservations"] == []
    finally:
        server.stop()


def test_reservation_survives_a_restart_and_is_released_when_its_gang_is_deleted(
    hubfleet: HubFleet,
) -> None:
    first = reserving(hubfleet)
    fill(hubfleet)
    hubfleet.hub.store.create(hubfleet.job("pretrain", gpus=8, pods=12))
    reserved(hubfleet, "pretrain")
    (before,) = kept(hubfleet)
    first.halt()

    # unschedulable work is tried again after 0.5 s only once room came back (else 5 min)
    second = reserving(hubfleet, backoff=BackoffSettings(initial=0.5, maximum=300))
    reserving_ = second.controller.cycle.reserving
    assert reserving_ is not None
    hubfleet.wait_for(lambda: reserving_.loaded, what="the reservations read again")
    (held,) = reserving_.document()
    assert held == before  # the same cluster, nodes and start: not planned again
    # the rule holds under the new leader: no estimate, no backfill
    hubfleet.hub.store.create(timed_job(hubfleet, "sweep", None))
    refused_by_reservation(hubfleet, "sweep")
    # an expected run time that is not one is an error naming the annotation
    hubfleet.hub.store.create(timed_job(hubfleet, "typo", "soon"))
    invalid = hubfleet.wait_for(
        lambda: (
            (c := hubfleet.condition(hub_job(hubfleet, "typo")) or {}).get("reason")
            == "InvalidWorkload"
            and c
        ),
        what="typo reported",
    )
    assert "annotation placer.dev/expected-runtime: 'soon' is not a duration" in invalid["message"]
    time.sleep(1.0)  # a few cycles of the gang under the new leader
    assert kept(hubfleet) == [before]

    hubfleet.hub.store.delete("jobs", "pretrain", hubfleet.NAMESPACE)
    hubfleet.wait_for(lambda: kept(hubfleet) == [], what="the reservation released")
    assert reserving_.held() == []
    # its nodes are free for anyone again: sweep takes a free one, at once
    hubfleet.wait_for(
        lambda: hubfleet.placed_cluster(hub_job(hubfleet, "sweep")) == "m1",
        timeout=20,
        what="sweep placed once the reservation is gone",
    )
    metrics = second.controller.metrics.exposition().decode()
    assert 'placer_reservation_outcomes_total{outcome="gone"} 1.0' in metrics


def test_reservation_is_planned_again_when_a_reserved_node_is_cordoned(
    hubfleet: HubFleet,
) -> None:
    """A gang of ten nodes is reserved on ten of the twelve; one of them is cordoned: the
    reservation is planned again, on nodes that are all usable."""
    running = reserving(hubfleet)
    fill(hubfleet)
    hubfleet.hub.store.create(hubfleet.job("pretrain", gpus=8, pods=10))
    reserved(hubfleet, "pretrain")
    (before,) = kept(hubfleet)
    assert len(before["nodes"]) == 10
    cordoned = before["nodes"][0]
    hubfleet.members["m1"].store.patch(
        "nodes", cordoned, {"spec": {"unschedulable": True}}, patch_type="merge"
    )

    def planned_again() -> dict[str, Any] | None:
        found = kept(hubfleet)
        return found[0] if found and cordoned not in found[0]["nodes"] else None

    after = hubfleet.wait_for(planned_again, timeout=60, what="the reservation planned again")
    assert len(after["nodes"]) == 10 and after["uid"] == before["uid"]
    message = hubfleet.wait_for(
        lambda: (
            (c := hubfleet.condition(hub_job(hubfleet, "pretrain"), "Reserved") or {})
            and c.get("status") == "True"
            and cordoned not in c["message"]
            and c["message"]
        ),
        what="the Reserved condition naming the new nodes",
    )
    assert "cluster m1" in message
    metrics = running.controller.metrics.exposition().decode()
    assert 'placer_reservation_outcomes_total{outcome="replanned"} 1.0' in metrics
    assert 'placer_reservation_outcomes_total{outcome="made"} 2.0' in metrics


def test_reservation_expires_when_its_start_passes_and_the_gang_still_cannot_start(
    hubfleet: HubFleet,
) -> None:
    """The warm Jobs say they run two seconds but keep running: at the start (no grace) the
    gang still cannot start, and its reservation is planned again."""
    fleet = fleet_from_kubeconfigs([hubfleet.members_kubeconfig], ["m1"], timeout=5.0)
    policy = ReservationPolicy(after_s=0, min_gpus=64, grace_s=0)
    running = hubfleet.controller(fleet, reservations=policy)
    fill(hubfleet, runtime="2s")
    hubfleet.hub.store.create(hubfleet.job("pretrain", gpus=8, pods=12))
    reserved(hubfleet, "pretrain")
    (first,) = kept(hubfleet)

    def later() -> dict[str, Any] | None:
        found = kept(hubfleet)
        return found[0] if found and found[0]["planned"] != first["planned"] else None

    again = hubfleet.wait_for(later, timeout=60, what="the expired reservation planned again")
    assert (parse_rfc3339(again["start"]) or 0) > (parse_rfc3339(first["start"]) or 0)
    metrics = running.controller.metrics.exposition().decode()
    assert 'placer_reservation_outcomes_total{outcome="replanned"}' in metrics
    assert hubfleet.placed_cluster(hub_job(hubfleet, "pretrain")) is None


def test_elastic_growth_never_takes_reserved_nodes(hubfleet: HubFleet) -> None:
    """A running elastic PyTorchJob would grow onto nodes that free up; they are reserved for
    the waiting gang, and growth runs past any start: it stays as placed."""
    from tests.elastic.test_controller import pytorchjob, resized_events

    for server in (hubfleet.hub, *hubfleet.members.values()):
        server.store.register_resource("kubeflow.org", "v1", "PyTorchJob", "pytorchjobs")
    reserving(hubfleet)
    warm = fill(hubfleet)
    elastic = pytorchjob("elastic")
    elastic["metadata"]["annotations"] = {"placer.dev/expected-runtime": "1h"}
    hubfleet.hub.store.create(elastic)
    copy = hubfleet.wait_for(
        lambda: hubfleet.copies("elastic", kind="pytorchjobs").get("m1"), what="elastic placed"
    )
    assert copy["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3  # 2 free nodes
    hubfleet.hub.store.create(hubfleet.job("pretrain", gpus=8, pods=12))
    reserved(hubfleet, "pretrain")
    for name in warm[:2]:  # two nodes free up, reserved for pretrain
        hubfleet.hub.store.delete("jobs", name, hubfleet.NAMESPACE)
    hubfleet.wait_for(
        lambda: not hubfleet.copies(warm[0]) and not hubfleet.copies(warm[1]),
        what="two warm Jobs gone",
    )
    time.sleep(2.0)  # several gathers, each of which would grow it
    now = hubfleet.copies("elastic", kind="pytorchjobs")["m1"]
    assert now["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] == 3
    assert resized_events(hubfleet, "elastic") == []


@pytest.mark.slow
def test_reservation_survives_a_leader_killed_and_a_standby_taking_over(
    hubfleet: HubFleet,
) -> None:
    """Two ``placer controller`` processes with leader election: the leader makes the
    reservation and is killed (SIGKILL); the standby takes over the Lease, reads the
    reservation from the hub and keeps to it — same nodes and start, the rule of backfill
    applied to work that arrives after the takeover."""
    from tests.controller.test_processes import _free_port, _holder

    flags = ("--reserve-after", "0", "--reserve-min-gpus", "64")
    members = ("--kubeconfig", str(hubfleet.members_kubeconfig), "--context", "m1")
    leader = hubfleet.process("ctl-a", *flags, members=members)
    hubfleet.wait_for(lambda: _holder(hubfleet) == "ctl-a", timeout=30, what="ctl-a leads")
    port = _free_port()
    hubfleet.process("ctl-b", *flags, port=port, members=members)
    fill(hubfleet)
    hubfleet.hub.store.create(hubfleet.job("pretrain", gpus=8, pods=12))
    reserved(hubfleet, "pretrain")
    (before,) = kept(hubfleet)

    leader.send_signal(signal.SIGKILL)
    leader.wait(timeout=10)
    hubfleet.wait_for(lambda: _holder(hubfleet) == "ctl-b", timeout=60, what="ctl-b takes over")
    hubfleet.hub.store.create(timed_job(hubfleet, "sweep", None))
    message = refused_by_reservation(hubfleet, "sweep")
    assert "Job/team-a/pretrain" in message
    document = hubfleet.wait_for(
        lambda: (
            httpx.get(f"http://127.0.0.1:{port}/v1/placements").json()
            if httpx.get(f"http://127.0.0.1:{port}/readyz").status_code == 200
            else None
        ),
        timeout=30,
        what="ctl-b answers",
    )
    assert document["reservations"] == [before]  # the same nodes and start, not planned again
    assert kept(hubfleet) == [before]
    assert '"event": "reservations-read"' in hubfleet.log("ctl-b")


def test_the_drain_horizon_keeps_its_member_for_work_that_ends_within_it(
    hubfleet: HubFleet,
) -> None:
    """Members m1 and m2; a drain horizon of one hour keeps m1 (named): a whole-member Job
    expected to run ten hours goes to m2 although m1 is as free; one without an expected run
    time then waits (m2 full, m1 refused for the horizon's taint); one expected to run half an
    hour takes m1."""
    fleet = fleet_from_kubeconfigs([hubfleet.members_kubeconfig], ["m1", "m2"], timeout=5.0)
    policy = ReservationPolicy(after_s=100 * HOUR, horizon_s=HOUR, horizon_cluster="m1")
    hubfleet.controller(fleet, reservations=policy)
    hubfleet.hub.store.create(timed_job(hubfleet, "long", "10h", pods=12))
    hubfleet.wait_for(
        lambda: hubfleet.placed_cluster(hub_job(hubfleet, "long")) == "m2",
        timeout=60,
        what="the long Job placed on m2",
    )
    hubfleet.hub.store.create(timed_job(hubfleet, "untimed", None, pods=12))
    message = hubfleet.wait_for(
        lambda: (
            (c := hubfleet.condition(hub_job(hubfleet, "untimed")) or {}).get("status") == "False"
            and "placer.dev/drain-horizon" in c.get("message", "")
            and c["message"]
        ),
        timeout=60,
        what="the Job without an expected run time kept off m1",
    )
    assert "m1" in message
    hubfleet.hub.store.create(timed_job(hubfleet, "short", "30m", pods=12))
    hubfleet.wait_for(
        lambda: hubfleet.placed_cluster(hub_job(hubfleet, "short")) == "m1",
        timeout=60,
        what="the short Job placed on m1",
    )
    assert hubfleet.placed_cluster(hub_job(hubfleet, "untimed")) is None


def test_the_controller_checks_the_drain_horizon_flags(tmp_path: Any) -> None:
    from placer.cli import build_parser
    from placer.cli.controller import reservation_policy
    from placer.errors import UsageError

    parser = build_parser()
    base = ["controller", "--hub-context", "hub", "--kubeconfig", str(tmp_path / "none")]
    args = parser.parse_args([*base, "--reserve-horizon", "3600"])
    with pytest.raises(UsageError, match="--reserve-horizon needs --reserve-after"):
        reservation_policy(args)
    args = parser.parse_args([*base, "--reserve-after", "60", "--reserve-horizon-cluster", "m1"])
    with pytest.raises(UsageError, match="goes with --reserve-horizon"):
        reservation_policy(args)
    horizon = ["--reserve-horizon", "7200", "--reserve-horizon-cluster", "m1"]
    policy = reservation_policy(parser.parse_args([*base, "--reserve-after", "60", *horizon]))
    assert policy is not None and (policy.horizon_s, policy.horizon_cluster) == (7200.0, "m1")
