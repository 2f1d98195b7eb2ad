"""Acceptance: a lost member's workloads move after the grace period; stale copies go on return."""

from __future__ import annotations

import logging
import time
from typing import Any

import pytest


def test_member_lost_then_back(hubfleet: Any, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO, logger="placer")
    grace = 2.0
    hubfleet.controller(grace_period=grace)
    names = [f"f{i}" for i in range(6)]
    for name in names:
        hubfleet.hub.store.create(hubfleet.job(name, gpus=4))
    hubfleet.wait_for(
        lambda: (
            len(hubfleet.hub_jobs()) == 6
            and all(hubfleet.placed_cluster(j) for j in hubfleet.hub_jobs())
        ),
        what="all placed",
    )
    where = {j["metadata"]["name"]: hubfleet.placed_cluster(j) for j in hubfleet.hub_jobs()}
    lost = where["f0"]
    on_lost = sorted(n for n, c in where.items() if c == lost)

    hubfleet.members[lost].stop()
    stopped_at = time.monotonic()

    def moved() -> bool:
        jobs = {j["metadata"]["name"]: j for j in hubfleet.hub_jobs()}
        return all(
            hubfleet.placed_cluster(jobs[n]) not in (None, lost)
            and (hubfleet.condition(jobs[n]) or {}).get("status") == "True"
            for n in on_lost
        )

    hubfleet.wait_for(moved, timeout=30, what="workloads of the lost member re-placed")
    assert time.monotonic() - stopped_at >= grace  # not before the grace period
    for name in on_lost:

        def reasons(name: str = name) -> list[str]:
            return sorted(e["reason"] for e in hubfleet.events(name))

        hubfleet.wait_for(lambda: len(reasons()) == 3, what=f"events of {name}")
        assert reasons() == ["ClusterLost", "Placed", "Placed"]
    # the others did not move
    for name, cluster in where.items():
        if cluster != lost:
            assert list(hubfleet.copies(name)) == [cluster]

    # the member comes back with its stale copies: they are deleted, the new ones stay
    assert all(
        name in {o["metadata"]["name"] for o in hubfleet.members[lost].store.list("jobs")}
        for name in on_lost
    )
    hubfleet.members[lost].start()
    hubfleet.wait_for(
        lambda: all(len(hubfleet.copies(n)) == 1 for n in names),
        timeout=30,
        what="stale copies removed",
    )
    for job in hubfleet.hub_jobs():
        assert list(hubfleet.copies(job["metadata"]["name"])) == [hubfleet.placed_cluster(job)]
    # the unreachable member's errors were logged, without any credential
    assert "unreachable" in caplog.text
    for server in (hubfleet.hub, *hubfleet.members.values()):
        assert server.token not in caplog.text
