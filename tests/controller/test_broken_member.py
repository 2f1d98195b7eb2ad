"""Acceptance: one broken member does not stop placement (issue 12 item 5).

A member that answers 401 (a stale token) or 403 on listing one workload kind is left out of
decisions, with its reason in the metrics, ``/v1/fleet`` and on the hub objects it blocks
(``Placed=False``, reason ``WaitingForCluster``, and an Event); the others go on. Only an
object whose copy may be on that member waits: one listed on the hub when the controller
started (an earlier controller may have dispatched it and died before recording it) and of a
kind the member cannot list. Objects created later, and objects of kinds the member lists,
are placed on the other members.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from placer.controller import Endpoints, HttpServer
from placer.definitions import Catalog
from placer.virtual.realism import register_catalog_kinds
from tests.builders import objects


def job_state(hubfleet: Any, name: str, plural: str = "jobs") -> tuple[str | None, dict[str, Any]]:
    obj = hubfleet.hub.store.get(plural, name, hubfleet.NAMESPACE)
    return hubfleet.placed_cluster(obj), hubfleet.condition(obj) or {}


def placed_on(hubfleet: Any, names: list[str], plural: str = "jobs") -> dict[str, str] | None:
    """Where each of ``names`` is placed (recorded and ``Placed=True``), or None until all are."""
    where = {}
    for name in names:
        cluster, condition = job_state(hubfleet, name, plural)
        if not cluster or condition.get("status") != "True":
            return None
        where[name] = cluster
    return where


def jobset(name: str, gpus: int = 2) -> dict[str, Any]:
    return objects.jobset(
        name, gpus=gpus, namespace="team-a", labels={"placer.dev/queue": "q"}, suspend=True
    )


def metric(controller: Any, prefix: str) -> float | None:
    for line in controller.metrics.exposition().decode().splitlines():
        if line.startswith(prefix):
            return float(line.split()[-1])
    return None


def wait_until_acting(hubfleet: Any, controller: Any) -> None:
    """Until the controller listed the hub's Jobs (objects created later are born under it)."""
    hubfleet.wait_for(lambda: controller.ready()[0] and controller.leading, what="acting")
    hubfleet.wait_for(
        lambda: controller.hub_cache.synced("batch/v1", "Job"),
        what="hub Jobs listed",
    )


def assert_waits_for(
    hubfleet: Any, name: str, cluster: str, words: tuple[str, ...], plural: str = "jobs"
) -> None:
    def waiting() -> dict[str, Any] | None:
        _, condition = job_state(hubfleet, name, plural)
        return condition if condition.get("reason") == "WaitingForCluster" else None

    condition = hubfleet.wait_for(waiting, what=f"{name} waiting for {cluster}")
    assert condition["status"] == "False"
    assert job_state(hubfleet, name, plural)[0] is None
    message = condition["message"]
    assert message.startswith(f"waiting for cluster {cluster}: "), message
    assert f"({cluster}: " in message and all(w in message for w in words), message
    events = [e for e in hubfleet.events(name) if e["reason"] == "WaitingForCluster"]
    assert len(events) == 1 and events[0]["type"] == "Warning", events
    assert events[0]["message"] == message


@pytest.fixture
def logged(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    caplog.set_level(logging.INFO, logger="placer")
    yield caplog


def test_a_member_refusing_credentials_holds_back_only_what_may_be_there(
    hubfleet: Any, logged: pytest.LogCaptureFixture
) -> None:
    old = [f"old-{i}" for i in range(3)]
    for name in old:  # listed when the controller starts: an earlier one may have placed them
        hubfleet.hub.store.create(hubfleet.job(name, gpus=2))
    stale_token = hubfleet.members["m1"].faults.fail(401, times=None)
    running = hubfleet.controller()
    controller = running.controller
    server = HttpServer(
        Endpoints(
            healthy=controller.healthy,
            ready=controller.ready,
            metrics=controller.metrics.exposition,
            fleet=controller.fleet_document,
            placements=controller.placements_document,
        ),
        host="127.0.0.1",
        port=0,
    ).start()
    try:
        wait_until_acting(hubfleet, controller)
        new = [f"new-{i}" for i in range(6)]
        for name in new:
            hubfleet.hub.store.create(hubfleet.job(name, gpus=2))

        # the others go on: the new workloads are placed on m2 and m3 at once
        where = hubfleet.wait_for(lambda: placed_on(hubfleet, new), timeout=20, what="new placed")
        assert set(where.values()) <= {"m2", "m3"}, where
        # those listed at start wait for m1, and say why on the hub object
        for name in old:
            assert_waits_for(hubfleet, name, "m1", ("401", "refresh the token"))

        # the reason in the metrics and in /v1/fleet
        text = httpx.get(f"{server.url}/metrics").text
        assert 'placer_cluster_excluded{cluster="m1",reason="Unauthorized"} 1.0' in text
        assert 'placer_cluster_reachable{cluster="m1"} 0.0' in text
        hubfleet.wait_for(
            lambda: metric(controller, 'placer_waiting_for_cluster{cluster="m1"}') == 3,
            what="3 waiting for m1 in the metrics",
        )
        fleet = httpx.get(f"{server.url}/v1/fleet").json()
        (m1,) = [c for c in fleet["clusters"] if c["name"] == "m1"]
        assert m1["reachable"] is False and "401" in m1["reason"], m1
        assert all(c["reachable"] for c in fleet["clusters"] if c["name"] != "m1")

        # the token is fixed: the waiting ones are placed, m1 is used again
        assert stale_token.hits > 0
        hubfleet.members["m1"].faults.clear()
        hubfleet.wait_for(lambda: placed_on(hubfleet, old), timeout=30, what="old placed")
        hubfleet.wait_for(
            lambda: "placer_cluster_excluded{" not in controller.metrics.exposition().decode(),
            what="m1 no longer excluded",
        )
        assert metric(controller, 'placer_waiting_for_cluster{cluster="m1"}') == 0
        for name in [*old, *new]:
            assert len(hubfleet.copies(name)) == 1, name
    finally:
        server.stop()
    for server_ in (hubfleet.hub, *hubfleet.members.values()):
        assert server_.token not in logged.text


def test_a_member_forbidding_one_kind_holds_back_only_that_kind(
    hubfleet: Any, logged: pytest.LogCaptureFixture
) -> None:
    catalog = Catalog.builtin()
    for server in (hubfleet.hub, *hubfleet.members.values()):
        register_catalog_kinds(server.store, catalog)
    hubfleet.hub.store.create(hubfleet.job("old-job", gpus=2))
    hubfleet.hub.store.create(jobset("old-jobset"))
    m2 = hubfleet.members["m2"]
    for verb in ("list", "watch"):
        m2.faults.fail(403, times=None, verb=verb, resource="jobs.batch")
    running = hubfleet.controller()
    controller = running.controller
    wait_until_acting(hubfleet, controller)
    hubfleet.hub.store.create(hubfleet.job("new-job", gpus=2))

    # a JobSet (m2 lists JobSets: no copy there unseen) and a Job created since go on, not on m2
    where = hubfleet.wait_for(
        lambda: placed_on(hubfleet, ["new-job"]), timeout=20, what="new-job placed"
    )
    where |= hubfleet.wait_for(
        lambda: placed_on(hubfleet, ["old-jobset"], "jobsets"),
        timeout=20,
        what="old-jobset placed",
    )
    assert "m2" not in where.values(), where
    # the Job listed at start may have a copy on m2: it waits, and says why
    assert_waits_for(hubfleet, "old-job", "m2", ("403", "jobs", "RBAC"))
    assert metric(controller, 'placer_cluster_excluded{cluster="m2",reason="Forbidden"}') == 1
    assert metric(controller, 'placer_cluster_reachable{cluster="m2"}') == 1  # it answers
    assert "member m2 is left out of placement decisions" in logged.text

    m2.faults.clear()
    hubfleet.wait_for(lambda: placed_on(hubfleet, ["old-job"]), timeout=30, what="old-job placed")
    assert len(hubfleet.copies("old-job")) == 1


def test_a_member_refusing_after_it_was_listed_is_left_out_without_flapping(
    hubfleet: Any, logged: pytest.LogCaptureFixture
) -> None:
    running = hubfleet.controller()
    controller = running.controller
    hubfleet.hub.store.create(hubfleet.job("before", gpus=2))
    hubfleet.wait_for(lambda: placed_on(hubfleet, ["before"]), what="placed")
    hubfleet.members["m1"].faults.fail(401, times=None)
    hubfleet.wait_for(
        lambda: metric(controller, 'placer_cluster_excluded{cluster="m1",reason="Unauthorized"}'),
        what="m1 excluded",
    )
    later = [f"later-{i}" for i in range(6)]
    for name in later:
        hubfleet.hub.store.create(hubfleet.job(name, gpus=2))
    where = hubfleet.wait_for(lambda: placed_on(hubfleet, later), timeout=20, what="placed")
    assert "m1" not in where.values(), where
    # m1's health is said once, not flipped back and forth by its watches
    health = [r for r in logged.records if getattr(r, "event", "") == "member-health"]
    assert [r.getMessage().split(":")[0] for r in health] == ["member m1 is unreachable"]
