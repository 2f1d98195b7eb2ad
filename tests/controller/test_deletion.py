"""Acceptance: a deleted hub object leaves every queue and cache; the controller goes idle.

Issue 12 item 2: after a hub object was deleted, the controller sometimes logged
``"event": "finalized"`` thousands of times a second. The race: the patch that removes placer's
finalizer makes the hub delete the object; when the watch's DELETED event reached the
controller before the patch's answer, the answer (the object as last written) was put back
into the caches, and every reconcile of that ghost "finalized" it again without a request.

The race is made deterministic here: a reactor on the hub holds the answer of the write that
removes a Job for good until the controller has taken the DELETED event in (the reactor runs
in the request's thread, after the write, before the answer is sent).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from placer.model import WorkloadRef
from placer.testing import WriteEvent

FOREIGN = "example.com/keep"


class EventCounter(logging.Handler):
    """Counts the controller's log records by their ``event``."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.counts: dict[str, int] = {}
        self.total = 0
        self._lock = threading.Lock()

    def emit(self, record: logging.LogRecord) -> None:
        event = str(record.__dict__.get("event") or "")
        with self._lock:
            self.total += 1
            self.counts[event] = self.counts.get(event, 0) + 1


@pytest.fixture
def log_events() -> Iterator[EventCounter]:
    counter = EventCounter()
    logger = logging.getLogger("placer")
    level = logger.level
    logger.addHandler(counter)
    logger.setLevel(logging.INFO)
    yield counter
    logger.removeHandler(counter)
    logger.setLevel(level)


def reconciles(controller: Any) -> float:
    for line in controller.metrics.exposition().decode().splitlines():
        if line.startswith("placer_reconciles_total "):
            return float(line.split()[-1])
    raise AssertionError("placer_reconciles_total is not exported")


def knows(controller: Any, name: str, namespace: str) -> bool:
    """Whether the controller still holds the hub Job (its object cache, read under its lock)."""
    ref = WorkloadRef("batch/v1", "Job", namespace, name)
    return controller.hub_cache.get(ref) is not None


def hold_answers_until_seen_gone(hubfleet: Any, controller: Any) -> None:
    """Answer a write that removes a Job for good only once the controller saw it go."""

    def reactor(event: WriteEvent) -> None:
        if event.type != "DELETED" or event.resource.kind != "Job":
            return
        meta = event.object["metadata"]
        deadline = time.monotonic() + 5.0
        while knows(controller, meta["name"], meta["namespace"]) and time.monotonic() < deadline:
            time.sleep(0.005)

    hubfleet.hub.store.add_reactor(reactor)


def assert_idle(hubfleet: Any, controller: Any, log_events: EventCounter, window: float) -> None:
    """Over ``window`` seconds, the controller reconciles nothing and logs (almost) nothing."""
    hubfleet.wait_for(
        lambda: not any(controller.queue.sizes()[k] for k in ("queued", "processing")),
        what="the controller's work queue drained",
    )
    before_reconciles, before_logs = reconciles(controller), log_events.total
    time.sleep(window)
    spent = reconciles(controller) - before_reconciles
    logged = log_events.total - before_logs
    assert spent <= 2, f"{spent:g} reconciles in {window:g}s after every object was deleted"
    assert logged <= 2, f"{logged} log lines in {window:g}s: {log_events.counts}"


def assert_forgotten(controller: Any) -> None:
    """Nothing of the deleted objects is left in the controller's queues and caches."""
    hub = controller.hub_cache.sizes()
    queue = controller.queue.sizes()
    pending = controller.pending.sizes()
    members = controller.members.sizes()
    left = {
        "objects": hub["objects"],
        "by_uid": hub["by_uid"],
        "dirty": queue["queued"],
        "busy": queue["processing"],
        "pending": pending["pending"],
        "retry": queue["delayed"],
        "first_seen": hub["first_seen"],
        "backoff": pending["backoff"],
        "decomposed": hub["decomposed"],
        "touched": members["touched"],
        "blocked": members["blocked"],
    }
    assert not any(left.values()), left
    for informer in controller.hub_cache.informers():
        assert informer.objects() == [], informer


def test_deleted_objects_leave_the_controller_idle(hubfleet: Any, log_events: EventCounter) -> None:
    running = hubfleet.controller()
    controller = running.controller
    hold_answers_until_seen_gone(hubfleet, controller)
    rounds, per_round = 3, 8
    for round_ in range(rounds):
        names = [f"r{round_}-{i}" for i in range(per_round)]
        for name in names:
            hubfleet.hub.store.create(hubfleet.job(name, gpus=2))

        def placed(names: list[str] = names) -> bool:
            jobs = {j["metadata"]["name"]: j for j in hubfleet.hub_jobs()}
            return all(
                n in jobs and (hubfleet.condition(jobs[n]) or {}).get("status") == "True"
                for n in names
            )

        hubfleet.wait_for(placed, what=f"round {round_} placed")
        for name in names:
            hubfleet.hub.store.delete("jobs", name, hubfleet.NAMESPACE)
        hubfleet.wait_for(lambda: not hubfleet.hub_jobs(), what=f"round {round_} finalized")
        hubfleet.wait_for(
            lambda names=names: not any(hubfleet.copies(n) for n in names),
            what=f"round {round_} copies deleted",
        )
    assert_idle(hubfleet, controller, log_events, window=2.0)
    assert log_events.counts.get("finalized") == rounds * per_round, log_events.counts
    assert_forgotten(controller)


def test_an_object_kept_by_another_finalizer_does_not_spin(
    hubfleet: Any, log_events: EventCounter
) -> None:
    running = hubfleet.controller()
    controller = running.controller
    job = hubfleet.job("kept", gpus=1)
    job["metadata"]["finalizers"] = [FOREIGN]
    hubfleet.hub.store.create(job)
    hubfleet.wait_for(
        lambda: hubfleet.placed_cluster(hubfleet.hub.store.get("jobs", "kept", "team-a")),
        what="placed",
    )
    hubfleet.hub.store.delete("jobs", "kept", hubfleet.NAMESPACE)

    def only_foreign_left() -> bool:
        obj = hubfleet.hub.store.get("jobs", "kept", hubfleet.NAMESPACE)
        return obj["metadata"].get("finalizers") == [FOREIGN] and not hubfleet.copies("kept")

    hubfleet.wait_for(only_foreign_left, what="placer's finalizer removed, the copy deleted")
    assert_idle(hubfleet, controller, log_events, window=2.0)
    assert log_events.counts.get("finalized") == 1, log_events.counts

    # the other owner lets go: the object goes, and so does everything the controller held
    hubfleet.hub.store.patch(
        "jobs", "kept", {"metadata": {"finalizers": None}}, namespace=hubfleet.NAMESPACE
    )
    hubfleet.wait_for(lambda: not hubfleet.hub_jobs(), what="object gone")
    assert_idle(hubfleet, controller, log_events, window=1.0)
    assert_forgotten(controller)


def test_objects_deleted_while_no_controller_ran_lose_their_copies_first(hubfleet: Any) -> None:
    """A controller starting on objects being deleted deletes their copies before it lets the
    objects go (the finalizer's promise), even while a member's copies are still being listed:
    letting them go first leaves copies that only a later stale-copy sweep may find."""
    first = hubfleet.controller()
    names = [f"d{i}" for i in range(6)]
    for name in names:
        hubfleet.hub.store.create(hubfleet.job(name, gpus=2))
    hubfleet.wait_for(
        lambda: (
            all(hubfleet.placed_cluster(j) for j in hubfleet.hub_jobs())
            and len(hubfleet.hub_jobs()) == len(names)
        ),
        what="placed",
    )
    first.halt()
    for name in names:  # deleted while no controller runs: the finalizer keeps them
        hubfleet.hub.store.delete("jobs", name, hubfleet.NAMESPACE)
    assert len(hubfleet.hub_jobs()) == len(names)

    order: list[tuple[str, str]] = []
    lock = threading.Lock()

    def note(where: str) -> Any:
        def reactor(event: WriteEvent) -> None:
            if event.type == "DELETED" and event.resource.kind == "Job":
                with lock:
                    order.append((where, event.object["metadata"]["name"]))

        return reactor

    hubfleet.hub.store.add_reactor(note("hub"))
    for server in hubfleet.members.values():
        server.store.add_reactor(note("member"))
        server.faults.delay(1.5, times=2, verb="list", resource="jobs.batch")  # listed slowly
    hubfleet.controller(identity="second")
    hubfleet.wait_for(lambda: not hubfleet.hub_jobs(), timeout=30, what="objects finalized")
    hubfleet.wait_for(
        lambda: not any(hubfleet.copies(n) for n in names), timeout=30, what="copies deleted"
    )
    for name in names:
        events = [where for where, n in order if n == name]
        assert events == ["member", "hub"], f"{name}: {events}"
