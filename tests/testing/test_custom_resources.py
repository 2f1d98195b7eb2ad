"""Custom resources through CustomObjectsApi and DynamicClient: registration (directly or by
creating a CRD), discovery, status subresource, patch types, server-side apply, dry runs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client, dynamic
from kubernetes.client.rest import ApiException

from placer.testing import ApiServer, StatusError
from tests.builders import objects
from tests.builders import objects as build

Client = Callable[..., client.ApiClient]
GROUP, VERSION, PLURAL = "jobset.x-k8s.io", "v1alpha2", "jobsets"


_jobset = objects.jobset


def _status(err: pytest.ExceptionInfo[ApiException]) -> dict[str, Any]:
    body = json.loads(err.value.body)
    assert body["kind"] == "Status" and body["code"] == err.value.status
    return dict(body)


@pytest.fixture
def server(apiserver: ApiServer) -> ApiServer:
    apiserver.store.register_resource(GROUP, VERSION, "JobSet", short_names=["js"])
    return apiserver


@pytest.fixture
def objects(server: ApiServer, kube_client: Client) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(kube_client(server))


@pytest.fixture
def dyn(server: ApiServer, kube_client: Client, tmp_path: Path) -> dynamic.DynamicClient:
    return dynamic.DynamicClient(kube_client(server), cache_file=str(tmp_path / "discovery.json"))


def test_discovery_lists_the_resource_and_its_status(dyn: dynamic.DynamicClient) -> None:
    jobsets = dyn.resources.get(api_version=f"{GROUP}/{VERSION}", kind="JobSet")
    assert (jobsets.name, jobsets.namespaced, jobsets.short_names) == ("jobsets", True, ["js"])
    assert jobsets.subresources["status"].kind == "JobSet"
    crd = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")
    established = crd.get(name=f"{PLURAL}.{GROUP}")
    conditions = {c["type"]: c["status"] for c in established.status.conditions}
    assert conditions == {"NamesAccepted": "True", "Established": "True"}


def test_crud_and_delete_answers_a_status(objects: client.CustomObjectsApi) -> None:
    made = objects.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, _jobset("a"))
    assert made["metadata"]["generation"] == 1 and "status" not in made
    listed = objects.list_namespaced_custom_object(GROUP, VERSION, "default", PLURAL)
    assert listed["kind"] == "JobSetList"
    assert listed["items"][0]["kind"] == "JobSet"  # custom resource lists keep item kinds
    gone = objects.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "a")
    assert (gone["kind"], gone["status"], gone["details"]["name"]) == ("Status", "Success", "a")
    with pytest.raises(ApiException) as err:
        objects.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "a")
    status = _status(err)
    assert status["message"] == 'jobsets.jobset.x-k8s.io "a" not found'
    assert status["details"] == {"name": "a", "group": GROUP, "kind": PLURAL}


def test_status_subresource_and_generation_rules(objects: client.CustomObjectsApi) -> None:
    objects.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, _jobset("a"))
    main = objects.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "a", {"status": {"phase": "Running"}}
    )
    assert "status" not in main and main["metadata"]["generation"] == 1
    status = objects.patch_namespaced_custom_object_status(
        GROUP, VERSION, "default", PLURAL, "a", {"status": {"phase": "Running"}, "spec": {"x": 1}}
    )
    assert status["status"] == {"phase": "Running"}
    assert "x" not in status["spec"] and status["metadata"]["generation"] == 1
    spec = objects.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "a", {"spec": {"suspend": True}}
    )
    assert spec["metadata"]["generation"] == 2 and spec["status"] == {"phase": "Running"}


def test_json_patch_and_strategic_merge_refused(objects: client.CustomObjectsApi) -> None:
    objects.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, _jobset("a"))
    patched = objects.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        "default",
        PLURAL,
        "a",
        [{"op": "replace", "path": "/spec/replicatedJobs/0/replicas", "value": 4}],
        _content_type="application/json-patch+json",
    )
    assert patched["spec"]["replicatedJobs"][0]["replicas"] == 4
    with pytest.raises(ApiException) as failed:
        objects.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            "default",
            PLURAL,
            "a",
            [{"op": "test", "path": "/spec/replicatedJobs/0/replicas", "value": 1}],
            _content_type="application/json-patch+json",
        )
    assert failed.value.status == 422
    with pytest.raises(ApiException) as err:
        objects.patch_namespaced_custom_object(
            GROUP,
            VERSION,
            "default",
            PLURAL,
            "a",
            {"spec": {}},
            _content_type="application/strategic-merge-patch+json",
        )
    assert _status(err)["reason"] == "UnsupportedMediaType"


def test_replace_needs_the_resource_version(objects: client.CustomObjectsApi) -> None:
    made = objects.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, _jobset("a"))
    body = _jobset("a", replicas=2)
    with pytest.raises(ApiException) as err:
        objects.replace_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "a", body)
    assert _status(err)["reason"] == "Invalid"
    body["metadata"]["resourceVersion"] = made["metadata"]["resourceVersion"]
    replaced = objects.replace_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "a", body
    )
    assert replaced["spec"]["replicatedJobs"][0]["replicas"] == 2
    with pytest.raises(ApiException) as stale:
        objects.replace_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "a", body)
    assert _status(stale)["reason"] == "Conflict"


def test_finalizers_hold_deletion(objects: client.CustomObjectsApi) -> None:
    body = _jobset("a")
    body["metadata"]["finalizers"] = ["placer.dev/cleanup"]
    objects.create_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, body)
    pending = objects.delete_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "a")
    assert pending["kind"] == "JobSet" and pending["metadata"]["deletionTimestamp"]
    objects.patch_namespaced_custom_object(
        GROUP, VERSION, "default", PLURAL, "a", {"metadata": {"finalizers": []}}
    )
    with pytest.raises(ApiException) as err:
        objects.get_namespaced_custom_object(GROUP, VERSION, "default", PLURAL, "a")
    assert err.value.status == 404


def test_creating_a_crd_serves_the_resource(
    apiserver: ApiServer, kube_client: Client, tmp_path: Path
) -> None:
    api = kube_client(apiserver)
    served = {
        "name": "v1",
        "served": True,
        "storage": True,
        "subresources": {"status": {}},
        "selectableFields": [{"jsonPath": ".spec.rayVersion"}],
    }
    crd = build.crd("ray.io", "RayCluster", "rayclusters", versions=[served], singular="raycluster")
    client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
    objects = client.CustomObjectsApi(api)
    for name, version in (("a", "2.9"), ("b", "2.10")):
        objects.create_namespaced_custom_object(
            "ray.io",
            "v1",
            "default",
            "rayclusters",
            {
                "apiVersion": "ray.io/v1",
                "kind": "RayCluster",
                "metadata": {"name": name},
                "spec": {"rayVersion": version},
            },
        )
    found = objects.list_namespaced_custom_object(
        "ray.io", "v1", "default", "rayclusters", field_selector="spec.rayVersion=2.10"
    )
    assert [o["metadata"]["name"] for o in found["items"]] == ["b"]
    dyn = dynamic.DynamicClient(api, cache_file=str(tmp_path / "cache.json"))
    assert dyn.resources.get(api_version="ray.io/v1", kind="RayCluster").name == "rayclusters"
    client.ApiextensionsV1Api(api).delete_custom_resource_definition("rayclusters.ray.io")
    with pytest.raises(ApiException) as err:
        objects.list_namespaced_custom_object("ray.io", "v1", "default", "rayclusters")
    assert err.value.status == 404


def test_invalid_crd_is_422(apiserver: ApiServer, kube_client: Client) -> None:
    crd = build.crd("example.com", "Thing", "things", versions=[])
    crd["metadata"]["name"] = "wrong.example.com"
    with pytest.raises(ApiException) as err:
        client.ApiextensionsV1Api(kube_client(apiserver)).create_custom_resource_definition(crd)
    fields = {c["field"] for c in _status(err)["details"]["causes"]}
    assert fields == {"spec.versions", "metadata.name"}


def test_server_side_apply_creates_then_merges(dyn: dynamic.DynamicClient) -> None:
    jobsets = dyn.resources.get(api_version=f"{GROUP}/{VERSION}", kind="JobSet")
    first = jobsets.server_side_apply(
        _jobset("a", suspend=True), name="a", namespace="default", field_manager="placer"
    )
    assert first.spec.suspend is True
    [entry] = first.to_dict()["metadata"]["managedFields"]
    assert (entry["manager"], entry["operation"]) == ("placer", "Apply")
    assert entry["fieldsV1"]["f:spec"]["f:suspend"] == {}
    # the same manager drops a field it applied before: the server removes it
    second = jobsets.server_side_apply(
        _jobset("a", replicas=3), name="a", namespace="default", field_manager="placer"
    )
    assert second.spec.replicatedJobs[0]["replicas"] == 3
    assert "suspend" not in second.spec
    assert second.metadata.generation == 2


def test_server_side_apply_conflicts_between_managers(dyn: dynamic.DynamicClient) -> None:
    jobsets = dyn.resources.get(api_version=f"{GROUP}/{VERSION}", kind="JobSet")
    jobsets.server_side_apply(
        _jobset("a", replicas=1), name="a", namespace="default", field_manager="alice"
    )
    with pytest.raises(ApiException) as err:
        jobsets.server_side_apply(
            _jobset("a", replicas=2), name="a", namespace="default", field_manager="bob"
        )
    status = _status(err)
    assert status["reason"] == "Conflict"
    assert status["details"]["causes"][0]["field"] == ".spec.replicatedJobs"
    assert 'conflict with "alice"' in status["message"]
    forced = jobsets.server_side_apply(
        _jobset("a", replicas=2),
        name="a",
        namespace="default",
        field_manager="bob",
        force_conflicts=True,
    )
    assert forced.spec.replicatedJobs[0]["replicas"] == 2
    managers = {e["manager"] for e in forced.to_dict()["metadata"]["managedFields"]}
    assert managers == {"bob"}  # alice lost her only field


def test_apply_without_field_manager_is_422(dyn: dynamic.DynamicClient) -> None:
    jobsets = dyn.resources.get(api_version=f"{GROUP}/{VERSION}", kind="JobSet")
    with pytest.raises(ApiException) as err:
        jobsets.patch(
            body=_jobset("a"),
            name="a",
            namespace="default",
            content_type="application/apply-patch+yaml",
        )
    assert _status(err)["reason"] == "Invalid"


def test_dry_run_apply_and_patch(server: ApiServer, dyn: dynamic.DynamicClient) -> None:
    jobsets = dyn.resources.get(api_version=f"{GROUP}/{VERSION}", kind="JobSet")
    dry = jobsets.server_side_apply(
        _jobset("a"), name="a", namespace="default", field_manager="placer", dry_run="All"
    )
    assert dry.metadata.name == "a"
    assert server.store.list(PLURAL) == []
    jobsets.create(body=_jobset("a"), namespace="default")
    before = server.store.resource_version
    jobsets.patch(
        name="a",
        namespace="default",
        body={"spec": {"suspend": True}},
        content_type="application/merge-patch+json",
        dry_run="All",
    )
    assert server.store.get(PLURAL, "a", "default")["spec"].get("suspend") is None
    jobsets.delete(name="a", namespace="default", dry_run="All")
    assert server.store.resource_version == before


def test_cluster_scoped_custom_resource_and_second_version(
    apiserver: ApiServer, kube_client: Client
) -> None:
    store = apiserver.store
    store.register_resource("example.com", "v1beta1", "Widget", namespaced=False, status=False)
    store.register_resource("example.com", "v1", "Widget", namespaced=False, status=False)
    objects = client.CustomObjectsApi(kube_client(apiserver))
    objects.create_cluster_custom_object(
        "example.com",
        "v1beta1",
        "widgets",
        {
            "apiVersion": "example.com/v1beta1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": 1},
        },
    )
    # one storage, served in both versions
    assert (
        objects.get_cluster_custom_object("example.com", "v1", "widgets", "w")["apiVersion"]
        == "example.com/v1"
    )
    without_status = objects.patch_cluster_custom_object(
        "example.com", "v1", "widgets", "w", {"status": {"ok": True}}
    )
    assert without_status["status"] == {"ok": True}  # no status subresource: status is plain data
    assert without_status["metadata"]["generation"] == 2
    group = api_group = client.ApisApi(kube_client(apiserver)).get_api_versions()
    preferred = {g.name: g.preferred_version.version for g in api_group.groups}
    assert preferred["example.com"] == "v1"
    assert group is api_group


def test_unchanged_crd_write_is_a_no_op(server: ApiServer) -> None:
    store = server.store
    crd = store.get("crd", f"{PLURAL}.{GROUP}")
    assert store.replace(crd)["metadata"]["resourceVersion"] == crd["metadata"]["resourceVersion"]
    same = store.register_resource(GROUP, VERSION, "JobSet", short_names=["js"])
    assert same.plural == PLURAL
    assert (
        store.get("crd", f"{PLURAL}.{GROUP}")["metadata"]["resourceVersion"]
        == crd["metadata"]["resourceVersion"]
    )


def test_custom_resource_scale_subresource(apiserver: ApiServer, kube_client: Client) -> None:
    apiserver.store.register_resource(
        "leaderworkerset.x-k8s.io", "v1", "LeaderWorkerSet", scale=True
    )
    objects = client.CustomObjectsApi(kube_client(apiserver))
    body = {
        "apiVersion": "leaderworkerset.x-k8s.io/v1",
        "kind": "LeaderWorkerSet",
        "metadata": {"name": "lws"},
        "spec": {"replicas": 2},
    }
    objects.create_namespaced_custom_object(
        "leaderworkerset.x-k8s.io", "v1", "default", "leaderworkersets", body
    )
    objects.patch_namespaced_custom_object_status(
        "leaderworkerset.x-k8s.io",
        "v1",
        "default",
        "leaderworkersets",
        "lws",
        {"status": {"replicas": 2, "selector": "app=lws"}},
    )
    scale = objects.get_namespaced_custom_object_scale(
        "leaderworkerset.x-k8s.io", "v1", "default", "leaderworkersets", "lws"
    )
    assert scale["spec"] == {"replicas": 2} and scale["status"] == {
        "replicas": 2,
        "selector": "app=lws",
    }
    objects.patch_namespaced_custom_object_scale(
        "leaderworkerset.x-k8s.io",
        "v1",
        "default",
        "leaderworkersets",
        "lws",
        {"spec": {"replicas": 5}},
    )
    assert apiserver.store.get("leaderworkersets", "lws")["spec"]["replicas"] == 5


def test_server_side_apply_shares_keyed_list_items(apiserver: ApiServer) -> None:
    store = apiserver.store
    base = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "c", "image": "x"}]},
            },
        },
    }

    def containers(obj: dict[str, Any]) -> list[tuple[str, Any, Any]]:
        return [
            (c["name"], c.get("image"), c.get("env"))
            for c in obj["spec"]["template"]["spec"]["containers"]
        ]

    store.apply(base, field_manager="owner")
    extra = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "c", "env": [{"name": "E", "value": "1"}]},
                        {"name": "side", "image": "envoy"},
                    ]
                }
            }
        },
    }
    # another manager adds fields to the same container and a second container: no conflict
    assert containers(store.apply(extra, field_manager="injector")) == [
        ("c", "x", [{"name": "E", "value": "1"}]),
        ("side", "envoy", None),
    ]
    # the first manager re-applies its own configuration: the injector's fields stay
    assert len(containers(store.apply(base, field_manager="owner"))) == 2
    # the injector stops applying its container and env: both go, the owner's image stays
    extra["spec"]["template"]["spec"]["containers"] = [{"name": "c"}]
    assert containers(store.apply(extra, field_manager="injector")) == [("c", "x", None)]
    # changing the owner's image is a conflict naming the keyed path
    extra["spec"]["template"]["spec"]["containers"] = [{"name": "c", "image": "y"}]
    with pytest.raises(StatusError) as err:
        store.apply(extra, field_manager="injector")
    assert (
        err.value.details["causes"][0]["field"]
        == '.spec.template.spec.containers["name"="c"].image'
    )


def test_schema_defaults_are_applied_on_create_and_update(
    apiserver: ApiServer, kube_client: Client
) -> None:
    api = kube_client(apiserver)
    entry = {"type": "object", "properties": {"weight": {"type": "number", "default": 1}}}
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "reclaimable": {"type": "boolean", "default": True},
                    "mode": {"type": "string", "default": "fast"},
                    "resources": {"type": "object", "additionalProperties": entry},
                    "steps": {"type": "array", "items": entry},
                },
            }
        },
    }
    crd = build.crd("example.com", "Pool", "pools", scope="Cluster", schema=schema)
    client.ApiextensionsV1Api(api).create_custom_resource_definition(crd)
    pools = client.CustomObjectsApi(api)
    made = pools.create_cluster_custom_object(
        "example.com",
        "v1",
        "pools",
        {
            "apiVersion": "example.com/v1",
            "kind": "Pool",
            "metadata": {"name": "a"},
            "spec": {"mode": "slow", "resources": {"gpu": {}}, "steps": [{}, {"weight": 3}]},
        },
    )
    assert made["spec"] == {
        "reclaimable": True,
        "mode": "slow",
        "resources": {"gpu": {"weight": 1}},
        "steps": [{"weight": 1}, {"weight": 3}],
    }
    made["spec"] = {"reclaimable": False}
    replaced = pools.replace_cluster_custom_object("example.com", "v1", "pools", "a", made)
    assert replaced["spec"] == {"reclaimable": False, "mode": "fast"}
