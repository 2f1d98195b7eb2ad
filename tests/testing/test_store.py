"""The in-process store API: seeding, god-mode writes, copies, name resolution, registration,
seed files and synthetic content."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from placer.testing import StatusError, Store, load_objects, synthetic_cluster


def test_seed_creates_namespaces_and_assigns_metadata() -> None:
    store = Store()
    count = store.seed(synthetic_cluster(4, 40, seed=1, namespaces=3))
    assert count == 44
    assert {n["metadata"]["name"] for n in store.list("namespaces")} >= {
        "team-0",
        "team-1",
        "team-2",
    }
    pod = store.list("pods")[0]
    assert pod["metadata"]["uid"] and pod["metadata"]["creationTimestamp"]
    assert pod["status"]["phase"] in {"Running", "Pending", "Succeeded", "Failed"}  # kept as seeded
    versions = [int(p["metadata"]["resourceVersion"]) for p in store.list("pods")]
    assert len(set(versions)) == 40  # one resourceVersion per object


def test_synthetic_content_never_overcommits_a_node() -> None:
    objects = list(synthetic_cluster(20, 400, seed=7))
    gpus = {
        o["metadata"]["name"]: int(o["status"]["allocatable"]["nvidia.com/gpu"])
        for o in objects
        if o["kind"] == "Node"
    }
    used: dict[str, int] = {}
    for pod in (o for o in objects if o["kind"] == "Pod" and o["status"]["phase"] == "Running"):
        requests = pod["spec"]["containers"][0]["resources"]["requests"]
        node = pod["spec"]["nodeName"]
        used[node] = used.get(node, 0) + int(requests.get("nvidia.com/gpu", 0))
    assert used and all(used[n] <= gpus[n] for n in used)
    assert objects == list(synthetic_cluster(20, 400, seed=7))  # reproducible


def test_reads_are_copies() -> None:
    store = Store()
    store.seed(
        [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "1"}}]
    )
    got = store.get("cm", "c")
    got["data"]["a"] = "changed"
    assert store.get("configmaps", "c", "default")["data"] == {"a": "1"}


def test_put_overwrites_without_rules_but_keeps_identity() -> None:
    store = Store()
    made = store.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "c", "image": "x"}]},
        }
    )
    assert made["status"] == {"phase": "Pending"}
    pod = store.get("pods", "p")
    pod["status"] = {"phase": "Running"}
    pod["spec"]["nodeName"] = "n1"
    put = store.put(pod)
    assert put["status"]["phase"] == "Running" and put["metadata"]["uid"] == made["metadata"]["uid"]
    assert int(put["metadata"]["resourceVersion"]) > int(made["metadata"]["resourceVersion"])


@pytest.mark.parametrize(
    ("name", "plural"),
    [
        ("po", "pods"),
        ("Pod", "pods"),
        ("deploy", "deployments"),
        ("deployments.apps", "deployments"),
        ("deployments.v1.apps", "deployments"),
        ("events", "events"),
        ("crd", "customresourcedefinitions"),
    ],
)
def test_resource_names_resolve_like_kubectl(name: str, plural: str) -> None:
    assert Store().resource(name).plural == plural


def test_core_events_win_over_events_k8s_io() -> None:
    assert Store().resource("events").group == ""
    assert Store().resource("events.events.k8s.io").group == "events.k8s.io"


def test_unknown_resource_is_404() -> None:
    with pytest.raises(StatusError) as err:
        Store().resource("widgets")
    assert err.value.code == 404


@pytest.mark.parametrize(
    ("kind", "plural"),
    [("Policy", "policies"), ("Gateway", "gateways"), ("Mesh", "meshes"), ("Box", "boxes")],
)
def test_register_resource_guesses_plurals(kind: str, plural: str) -> None:
    store = Store()
    rt = store.register_resource("example.com", "v1", kind)
    assert rt.plural == plural
    assert store.get("crd", f"{plural}.example.com")["spec"]["names"]["kind"] == kind


def test_create_rejects_a_kind_nobody_serves() -> None:
    with pytest.raises(StatusError) as err:
        Store().create(
            {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
        )
    assert err.value.code == 404 and "no matches for kind" in err.value.message


def test_load_objects_reads_json_jsonl_and_yaml(tmp_path: Path) -> None:
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n"}}
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}
    (tmp_path / "list.json").write_text(json.dumps({"kind": "List", "items": [node, pod]}))
    (tmp_path / "lines.jsonl").write_text(json.dumps(node) + "\n\n" + json.dumps(pod) + "\n")
    (tmp_path / "docs.yaml").write_text(
        yaml.safe_dump(node) + "---\n" + yaml.safe_dump({"kind": "List", "items": [pod]})
    )
    for name in ("list.json", "lines.jsonl", "docs.yaml"):
        assert [o["kind"] for o in load_objects(tmp_path / name)] == ["Node", "Pod"]
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"bad\.json"):
        list(load_objects(tmp_path / "bad.json"))
