"""Hostile Karta objects on the hub (issue 12, items 3 and 4), against a running controller.

* A Karta whose jq reads the controller's environment (``error($ENV.SECRET)``) is invalid: the
  secret never reaches a condition, an Event, ``/v1/placements`` or the log.
* A Karta whose jq costs exponentially much (``"ab" | .+. | .+. ...``) is invalid with its reason,
  and the controller, which used to abort on it (libjq out of memory), goes on placing the rest.
* A jq run-time message quoting the object (``error(.spec.token)``) is cut short wherever it is
  shown.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import httpx
import pytest
import yaml

from placer.controller import Endpoints, HttpServer
from tests.builders import objects

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"
SECRET = "AKIA-s3cr3t-never-to-be-shown"
TOKEN = "tok-" + "q" * 2000


def _karta(name: str, kind: str, *, replicas: str = ".spec.replicas") -> dict[str, Any]:
    return objects.karta(name, kind=kind, replicas_path=replicas)


def _object(kind: str, name: str, **spec: Any) -> dict[str, Any]:
    return objects.custom_object(kind, name, **spec)


def test_hostile_kartas_are_refused_and_leak_nothing(
    hubfleet: Any, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setenv("PLACER_TEST_SECRET", SECRET)
    caplog.set_level(logging.DEBUG)
    hub = hubfleet.hub.store
    hub.create(yaml.safe_load((DEPLOY / "crds" / "kartas.run.ai.yaml").read_text()))
    kinds = {"Spy": "spies", "Bomb": "bombs", "Leaky": "leakies"}
    for store in (hub, *(m.store for m in hubfleet.members.values())):
        for kind, plural in kinds.items():
            store.register_resource("example.com", "v1", kind, plural)
    hub.create(_karta("spy", "Spy", replicas="error($ENV.PLACER_TEST_SECRET)"))
    hub.create(_karta("bomb", "Bomb", replicas='"ab" | ' + " | ".join([".+."] * 34)))
    hub.create(_karta("leaky", "Leaky", replicas="error(.spec.token)"))

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
        hub.create(_object("Spy", "spy-1"))
        hub.create(_object("Bomb", "bomb-1"))
        hub.create(_object("Leaky", "leaky-1", token=TOKEN))
        hub.create(hubfleet.job("good", gpus=2))

        def state(kind: str, name: str) -> dict[str, Any]:
            return dict(hubfleet.condition(hub.get(kind, name, "team-a")) or {})

        hubfleet.wait_for(lambda: state("jobs", "good").get("status") == "True", what="placed")
        hubfleet.wait_for(
            lambda: state("spies", "spy-1").get("reason") == "NoDefinition", what="spy refused"
        )
        hubfleet.wait_for(
            lambda: state("bombs", "bomb-1").get("reason") == "NoDefinition", what="bomb refused"
        )
        hubfleet.wait_for(
            lambda: state("leakies", "leaky-1").get("reason") == "InvalidWorkload",
            what="leaky refused",
        )
        spy = state("spies", "spy-1")["message"]
        assert "Karta/spy on the hub is invalid" in spy and "$ENV" in spy
        assert "environment variables" in spy
        bomb = state("bombs", "bomb-1")["message"]
        assert "Karta/bomb on the hub is invalid" in bomb and "can grow to" in bomb
        leaky = state("leakies", "leaky-1")["message"]
        assert "jq said: tok-qqq" in leaky and "more characters not shown" in leaky
        assert controller.healthy()  # still running, still placing
        hub.create(hubfleet.job("after", gpus=1))
        hubfleet.wait_for(lambda: state("jobs", "after").get("status") == "True", what="after")

        placements = httpx.get(f"{server.url}/v1/placements").text
    finally:
        server.stop()
    # what placer wrote on the hub: Events and the status of every object (the leaky object's
    # own spec holds the token, of course)
    written = [hub.list("events", ns) for ns in ("team-a", "default")]
    written += [
        obj.get("status")
        for plural in ("kartas", *kinds.values(), "jobs")
        for obj in hub.list(plural, None if plural == "kartas" else "team-a")
    ]
    everything = json.dumps(written, default=str)
    for place, text in (
        ("hub objects and Events", everything),
        ("/v1/placements", placements),
        ("log", caplog.text),
    ):
        assert SECRET not in text, place
        assert TOKEN not in text, place
