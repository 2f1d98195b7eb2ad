"""Acceptance: bad objects on the hub get a condition and an Event; everything else goes on.

Also: Karta definitions on the hub extend the catalog while the controller runs, and a
PlacementPolicy on the hub opts objects in and steers them.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

DEPLOY = Path(__file__).resolve().parents[2] / "deploy"

WIDGET_KARTA: dict[str, Any] = {
    "apiVersion": "run.ai/v1alpha1",
    "kind": "Karta",
    "metadata": {"name": "widget"},
    "spec": {
        "structureDefinition": {
            "rootComponent": {
                "name": "widget",
                "kind": {"group": "example.com", "version": "v1", "kind": "Widget"},
                "specDefinition": {"podTemplateSpecPath": ".spec.template"},
                "scaleDefinition": {"replicasPath": ".spec.replicas"},
                "statusDefinition": {
                    "statusMappings": {
                        "running": [
                            {
                                "byExpression": {
                                    "expression": ".status.ready == true",
                                    "expectedResult": "true",
                                }
                            }
                        ]
                    }
                },
            }
        }
    },
}


def _widget(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "team-a", "labels": {"placer.dev/queue": "q"}},
        "spec": {
            "replicas": 2,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "w",
                            "image": "w",
                            "resources": {"limits": {"nvidia.com/gpu": "1"}},
                        }
                    ]
                }
            },
        },
    }


def _jobset(name: str, *, replicas: Any) -> dict[str, Any]:
    pod = {"spec": {"containers": [{"name": "c", "image": "c"}]}}
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": name, "namespace": "team-a", "labels": {"placer.dev/queue": "q"}},
        "spec": {
            "replicatedJobs": [
                {"name": "worker", "replicas": replicas, "template": {"spec": {"template": pod}}}
            ]
        },
    }


def _policy(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "placer.dev/v1alpha1",
        "kind": "PlacementPolicy",
        "metadata": {"name": name},
        "spec": spec,
    }


def _reasons(hubfleet: Any, name: str, namespace: str = "team-a") -> list[str]:
    return [e["reason"] for e in hubfleet.events(name, namespace)]


def test_bad_objects_are_reported_and_the_rest_is_placed(hubfleet: Any) -> None:
    hub = hubfleet.hub.store
    for crd in ("kartas.run.ai.yaml", "placementpolicies.placer.dev.yaml"):
        hub.create(yaml.safe_load((DEPLOY / "crds" / crd).read_text()))  # deploy/'s own CRDs
    for store in (hub, *(m.store for m in hubfleet.members.values())):
        store.register_resource("example.com", "v1", "Widget", "widgets")
        store.register_resource("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets")

    broken_karta = copy.deepcopy(WIDGET_KARTA)
    del broken_karta["spec"]["structureDefinition"]["rootComponent"]["statusDefinition"]
    hub.create(broken_karta)
    hub.create(_policy("broken", {"objective": "fastest"}))
    hub.create(
        _policy(
            "vision",
            {
                "resourceSelectors": {"labelSelectors": [{"matchLabels": {"team": "vision"}}]},
                "preferredClusters": ["m3"],
            },
        )
    )
    hubfleet.controller()

    hub.create(_widget("widget-1"))  # its kind's only definition is invalid
    hub.create(_jobset("bad-field", replicas="two"))  # no schema checks the field's type
    hub.create(hubfleet.job("good", gpus=2))
    hub.create(hubfleet.job("by-policy", queue=False, labels={"team": "vision"}))
    hub.create(hubfleet.job("ignored", queue=False))  # neither label nor policy

    def state(name: str, kind: str = "jobs") -> dict[str, Any]:
        return dict(hubfleet.condition(hub.get(kind, name, "team-a")) or {})

    hubfleet.wait_for(lambda: state("good").get("status") == "True", what="good placed")
    hubfleet.wait_for(lambda: state("by-policy").get("status") == "True", what="policy placed")
    assert list(hubfleet.copies("by-policy")) == ["m3"]  # the policy's preferred cluster
    hubfleet.wait_for(
        lambda: state("bad-field", "jobsets").get("reason") == "InvalidWorkload", what="bad"
    )
    assert (
        "spec.replicatedJobs[0].replicas is the string 'two', not a whole number"
        in state("bad-field", "jobsets")["message"]
    )
    hubfleet.wait_for(lambda: "InvalidWorkload" in _reasons(hubfleet, "bad-field"), what="event")
    hubfleet.wait_for(
        lambda: state("widget-1", "widgets").get("reason") == "NoDefinition", what="no definition"
    )
    message = state("widget-1", "widgets")["message"]
    assert "Karta/widget on the hub is invalid" in message
    assert "must have status definition" in message
    hubfleet.wait_for(lambda: "NoDefinition" in _reasons(hubfleet, "widget-1"), what="event")
    assert not hubfleet.copies("bad-field", kind="jobsets")
    assert not hubfleet.copies("widget-1", kind="widgets")
    assert state("ignored") == {} and not hubfleet.copies("ignored")

    # the invalid policy and definition are told so on their own objects
    def config_events(name: str) -> list[str]:
        return [
            e["reason"]
            for e in hub.list("events", "default")
            if e["involvedObject"]["name"] == name
        ]

    hubfleet.wait_for(lambda: "InvalidPolicy" in config_events("broken"), what="policy event")
    hubfleet.wait_for(lambda: "InvalidDefinition" in config_events("widget"), what="karta event")
    broken = hub.get("placementpolicies", "broken")
    (valid,) = broken["status"]["conditions"]
    assert valid["type"] == "Valid" and valid["status"] == "False"
    assert "spec.objective" in valid["message"] and "fastest" in valid["message"]

    # fixing the definition on the hub extends the catalog live: the widget gets placed
    fixed = hub.get("kartas", "widget")
    fixed["spec"] = WIDGET_KARTA["spec"]
    hub.replace(fixed)
    hubfleet.wait_for(
        lambda: state("widget-1", "widgets").get("status") == "True", what="widget placed"
    )
    (cluster,) = hubfleet.copies("widget-1", kind="widgets")
    assert hubfleet.placed_cluster(hub.get("widgets", "widget-1", "team-a")) == cluster

    # a policy created later opts in objects that were ignored until then
    hub.create(hubfleet.job("late", queue=False, labels={"team": "late"}))
    hubfleet.wait_for(lambda: state("good").get("status") == "True", what="loop alive")
    assert not hubfleet.copies("late")
    selector = {"labelSelectors": [{"matchLabels": {"team": "late"}}]}
    hub.create(_policy("late", {"resourceSelectors": selector, "preferredClusters": ["m2"]}))
    hubfleet.wait_for(lambda: state("late").get("status") == "True", what="late placed")
    assert list(hubfleet.copies("late")) == ["m2"]
