"""The official client's typed APIs (CoreV1Api, AppsV1Api) against a loopback server, through a
real kubeconfig file: CRUD, selectors, the real Status errors, dry runs, namespaces."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from placer.testing import ApiServer

Client = Callable[..., client.ApiClient]


def _pod(name: str, labels: dict[str, str] | None = None, node: str | None = None) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1PodSpec(
            node_name=node, containers=[client.V1Container(name="c", image="busybox")]
        ),
    )


def _status(err: pytest.ExceptionInfo[ApiException]) -> dict[str, Any]:
    body = json.loads(err.value.body)
    assert body["kind"] == "Status"
    assert body["code"] == err.value.status
    return dict(body)


@pytest.fixture
def core(apiserver: ApiServer, kube_client: Client) -> client.CoreV1Api:
    return client.CoreV1Api(kube_client(apiserver))


def test_create_get_list_delete_pod(core: client.CoreV1Api) -> None:
    created = core.create_namespaced_pod("default", _pod("web-1", {"app": "web"}))
    assert created.metadata.uid and created.metadata.resource_version
    assert created.status.phase == "Pending"  # the server resets status on create
    assert created.spec.restart_policy == "Always"  # and defaults the spec
    got = core.read_namespaced_pod("web-1", "default")
    assert got.metadata.uid == created.metadata.uid
    listed = core.list_namespaced_pod("default", label_selector="app=web")
    assert [p.metadata.name for p in listed.items] == ["web-1"]
    assert int(listed.metadata.resource_version) >= int(created.metadata.resource_version)
    deleted = core.delete_namespaced_pod("web-1", "default")
    assert deleted.metadata.name == "web-1"  # built-ins answer DELETE with the object
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod("web-1", "default")
    status = _status(err)
    assert (status["reason"], status["message"]) == ("NotFound", 'pods "web-1" not found')
    assert status["details"] == {"name": "web-1", "kind": "pods"}


def test_wrong_token_is_401_unauthorized(apiserver: ApiServer, kube_client: Client) -> None:
    core = client.CoreV1Api(kube_client(apiserver, tokens={"test": "not-the-token"}))
    with pytest.raises(ApiException) as err:
        core.list_node()
    assert _status(err)["reason"] == "Unauthorized"


def test_seeded_nodes_are_listed_with_label_and_field_selectors(
    apiserver: ApiServer, core: client.CoreV1Api
) -> None:
    apiserver.store.seed(
        {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": f"n{i}", "labels": {"gpu": "a100" if i % 2 else "h100"}},
            "spec": {"unschedulable": i == 3},
            "status": {"allocatable": {"cpu": "8", "nvidia.com/gpu": "8"}},
        }
        for i in range(5)
    )
    assert [n.metadata.name for n in core.list_node(label_selector="gpu=a100").items] == [
        "n1",
        "n3",
    ]
    assert [n.metadata.name for n in core.list_node(label_selector="gpu notin (a100)").items] == [
        "n0",
        "n2",
        "n4",
    ]
    cordoned = core.list_node(field_selector="spec.unschedulable=true").items
    assert [n.metadata.name for n in cordoned] == ["n3"]
    assert core.read_node("n0").status.allocatable["nvidia.com/gpu"] == "8"


def test_pods_across_namespaces_by_node_and_phase(
    apiserver: ApiServer, core: client.CoreV1Api
) -> None:
    for i, (node, phase) in enumerate(
        [("n1", "Running"), ("n1", "Succeeded"), ("n2", "Running"), (None, "Pending")]
    ):
        pod = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": f"p{i}", "namespace": f"team-{i % 2}"},
            "spec": {"containers": [{"name": "c", "image": "x"}], "nodeName": node},
            "status": {"phase": phase},
        }
        apiserver.store.seed([pod])
    on_n1 = core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1").items
    assert sorted(p.metadata.name for p in on_n1) == ["p0", "p1"]
    live = core.list_pod_for_all_namespaces(
        field_selector="status.phase!=Succeeded,status.phase!=Failed,spec.nodeName!="
    ).items
    assert sorted(p.metadata.name for p in live) == ["p0", "p2"]
    assert [p.metadata.name for p in core.list_namespaced_pod("team-1").items] == ["p1", "p3"]
    assert core.list_namespaced_pod("no-such-namespace").items == []  # lists do not 404


def test_unsupported_field_selector_is_400(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as err:
        core.list_node(field_selector="status.capacity=1")
    status = _status(err)
    assert status["reason"] == "BadRequest"
    assert status["message"] == "field label not supported: status.capacity"


def test_malformed_label_selector_is_400(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as err:
        core.list_node(label_selector="gpu in a100")
    status = _status(err)
    assert status["reason"] == "BadRequest"
    assert status["message"].startswith("unable to parse requirement")


def test_create_twice_is_409_already_exists(core: client.CoreV1Api) -> None:
    core.create_namespaced_config_map("default", client.V1ConfigMap(metadata={"name": "cfg"}))
    with pytest.raises(ApiException) as err:
        core.create_namespaced_config_map("default", client.V1ConfigMap(metadata={"name": "cfg"}))
    status = _status(err)
    assert (status["reason"], status["message"]) == (
        "AlreadyExists",
        'configmaps "cfg" already exists',
    )


def test_stale_resource_version_is_409_conflict(core: client.CoreV1Api) -> None:
    cm = core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata={"name": "cfg"}, data={"a": "1"})
    )
    cm.data = {"a": "2"}
    updated = core.replace_namespaced_config_map("cfg", "default", cm)
    assert int(updated.metadata.resource_version) > int(cm.metadata.resource_version)
    cm.data = {"a": "3"}  # still carries the old resourceVersion
    with pytest.raises(ApiException) as err:
        core.replace_namespaced_config_map("cfg", "default", cm)
    status = _status(err)
    assert status["reason"] == "Conflict"
    assert "the object has been modified" in status["message"]


def test_no_op_write_keeps_the_resource_version(core: client.CoreV1Api) -> None:
    cm = core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata={"name": "cfg"}, data={"a": "1"})
    )
    same = core.patch_namespaced_config_map("cfg", "default", {"data": {"a": "1"}})
    assert same.metadata.resource_version == cm.metadata.resource_version
    changed = core.patch_namespaced_config_map("cfg", "default", {"data": {"a": "2"}})
    assert int(changed.metadata.resource_version) == int(cm.metadata.resource_version) + 1


def test_invalid_pod_is_422_with_causes(core: client.CoreV1Api) -> None:
    bad = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "Bad_Name"},
        "spec": {"containers": [{"name": "c"}]},
    }
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("default", bad)
    status = _status(err)
    assert status["reason"] == "Invalid"
    fields = {c["field"] for c in status["details"]["causes"]}
    assert fields == {"metadata.name", "spec.containers[0].image"}
    assert status["message"].startswith('Pod "Bad_Name" is invalid: [')


def test_create_in_missing_namespace_is_404(core: client.CoreV1Api) -> None:
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("nowhere", _pod("p"))
    status = _status(err)
    assert (status["reason"], status["message"]) == ("NotFound", 'namespaces "nowhere" not found')


def test_generate_name(core: client.CoreV1Api) -> None:
    made = core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata=client.V1ObjectMeta(generate_name="run-"))
    )
    assert made.metadata.name.startswith("run-") and len(made.metadata.name) == len("run-") + 5


def test_dry_run_validates_but_stores_nothing(apiserver: ApiServer, core: client.CoreV1Api) -> None:
    before = apiserver.store.resource_version
    made = core.create_namespaced_pod("default", _pod("dry"), dry_run="All")
    assert made.metadata.name == "dry" and made.metadata.uid
    with pytest.raises(ApiException):
        core.read_namespaced_pod("dry", "default")
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod(
            "default",
            {"metadata": {"name": "x"}, "spec": {"containers": [{"name": "c"}]}},
            dry_run="All",
        )
    assert _status(err)["reason"] == "Invalid"
    core.create_namespaced_pod("default", _pod("real"))
    core.delete_namespaced_pod("real", "default", dry_run="All")
    assert core.read_namespaced_pod("real", "default").metadata.name == "real"
    patched = core.patch_namespaced_pod(
        "real", "default", {"metadata": {"labels": {"x": "y"}}}, dry_run="All"
    )
    assert patched.metadata.labels == {"x": "y"}
    assert core.read_namespaced_pod("real", "default").metadata.labels is None
    assert int(apiserver.store.resource_version) == int(before) + 1  # only the real create


def test_strategic_merge_patch_merges_containers_by_name(core: client.CoreV1Api) -> None:
    pod = _pod("web")
    pod.spec.containers.append(client.V1Container(name="sidecar", image="envoy"))
    core.create_namespaced_pod("default", pod)
    patched = core.patch_namespaced_pod(
        "web", "default", {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}
    )
    assert [(c.name, c.image) for c in patched.spec.containers] == [
        ("c", "busybox:2"),
        ("sidecar", "envoy"),
    ]


def test_pod_status_subresource(core: client.CoreV1Api) -> None:
    core.create_namespaced_pod("default", _pod("p"))
    main = core.patch_namespaced_pod("p", "default", {"status": {"phase": "Running"}})
    assert main.status.phase == "Pending"  # the main resource ignores status
    status = core.patch_namespaced_pod_status(
        "p", "default", {"status": {"phase": "Running"}, "spec": {"nodeName": "n1"}}
    )
    assert status.status.phase == "Running"
    assert status.spec.node_name is None  # the status subresource ignores the rest
    assert status.metadata.generation is None  # pods of a 1.31 server have no generation


def test_deployment_generation_follows_the_spec(apiserver: ApiServer, kube_client: Client) -> None:
    apps = client.AppsV1Api(kube_client(apiserver))
    made = apps.create_namespaced_deployment("default", _deployment("web"))
    assert made.metadata.generation == 1
    labelled = apps.patch_namespaced_deployment(
        "web", "default", {"metadata": {"labels": {"a": "b"}}}
    )
    assert labelled.metadata.generation == 1  # metadata does not bump generation
    status = apps.patch_namespaced_deployment_status("web", "default", {"status": {"replicas": 1}})
    assert status.metadata.generation == 1 and status.status.replicas == 1
    scaled = apps.patch_namespaced_deployment("web", "default", {"spec": {"replicas": 3}})
    assert scaled.metadata.generation == 2 and scaled.status.replicas == 1


def _deployment(name: str, selector: str = "web") -> client.V1Deployment:
    template = client.V1PodTemplateSpec(
        metadata=client.V1ObjectMeta(labels={"app": "web"}),
        spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="nginx")]),
    )
    return client.V1Deployment(
        metadata=client.V1ObjectMeta(name=name),
        spec=client.V1DeploymentSpec(
            selector=client.V1LabelSelector(match_labels={"app": selector}), template=template
        ),
    )


def test_deployment_validation_and_replicas_default(
    apiserver: ApiServer, kube_client: Client
) -> None:
    apps = client.AppsV1Api(kube_client(apiserver))
    assert apps.create_namespaced_deployment("default", _deployment("web")).spec.replicas == 1
    with pytest.raises(ApiException) as err:
        apps.create_namespaced_deployment("default", _deployment("bad", selector="other"))
    causes = _status(err)["details"]["causes"]
    assert [c["field"] for c in causes] == ["spec.template.metadata.labels"]


def test_namespace_deletion_removes_its_content(
    apiserver: ApiServer, core: client.CoreV1Api
) -> None:
    core.create_namespace(client.V1Namespace(metadata={"name": "team"}))
    core.create_namespaced_pod("team", _pod("p"))
    held = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "held", "finalizers": ["x/y"]},
    }
    core.create_namespaced_config_map("team", held)
    core.delete_namespace("team")
    assert core.read_namespace("team").status.phase == "Terminating"
    assert core.list_namespaced_pod("team").items == []
    assert core.read_namespaced_config_map("held", "team").metadata.deletion_timestamp
    with pytest.raises(ApiException) as err:
        core.create_namespaced_pod("team", _pod("late"))
    assert _status(err)["reason"] == "Forbidden"
    core.patch_namespaced_config_map("held", "team", {"metadata": {"finalizers": None}})
    with pytest.raises(ApiException) as gone:
        core.read_namespace("team")
    assert gone.value.status == 404


def test_owner_references_are_garbage_collected(
    apiserver: ApiServer, core: client.CoreV1Api
) -> None:
    owner = core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata={"name": "owner"})
    )
    ref = client.V1OwnerReference(
        api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid
    )
    for name in ("a", "b"):
        core.create_namespaced_config_map(
            "default",
            client.V1ConfigMap(metadata=client.V1ObjectMeta(name=name, owner_references=[ref])),
        )
    core.delete_namespaced_config_map("owner", "default")
    assert [c.metadata.name for c in core.list_namespaced_config_map("default").items] == []


def test_orphan_propagation_keeps_dependents(apiserver: ApiServer, core: client.CoreV1Api) -> None:
    owner = core.create_namespaced_config_map(
        "default", client.V1ConfigMap(metadata={"name": "owner"})
    )
    ref = client.V1OwnerReference(
        api_version="v1", kind="ConfigMap", name="owner", uid=owner.metadata.uid
    )
    core.create_namespaced_config_map(
        "default",
        client.V1ConfigMap(metadata=client.V1ObjectMeta(name="dep", owner_references=[ref])),
    )
    core.delete_namespaced_config_map("owner", "default", propagation_policy="Orphan")
    dep = core.read_namespaced_config_map("dep", "default")
    assert not dep.metadata.owner_references


def test_deployment_scale_subresource(apiserver: ApiServer, kube_client: Client) -> None:
    apps = client.AppsV1Api(kube_client(apiserver))
    apps.create_namespaced_deployment("default", _deployment("web"))
    scale = apps.read_namespaced_deployment_scale("web", "default")
    assert (scale.spec.replicas, scale.status.selector) == (1, "app=web")
    scaled = apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": 4}})
    assert scaled.spec.replicas == 4
    deployment = apps.read_namespaced_deployment("web", "default")
    assert (deployment.spec.replicas, deployment.metadata.generation) == (4, 2)
    with pytest.raises(ApiException) as err:
        apps.patch_namespaced_deployment_scale("web", "default", {"spec": {"replicas": -1}})
    assert _status(err)["reason"] == "Invalid"
