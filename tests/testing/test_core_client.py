"""The official client's typed APIs (CoreV1Api) against a loopback server through a kubeconfig."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from placer.testing import ApiServer


def _pod(name: str, labels: dict[str, str] | None = None, node: str | None = None) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels),
        spec=client.V1PodSpec(
            node_name=node, containers=[client.V1Container(name="c", image="busybox")]
        ),
    )


def test_create_get_list_delete_pod(
    apiserver: ApiServer, kube_client: Callable[..., client.ApiClient]
) -> None:
    core = client.CoreV1Api(kube_client(apiserver))
    created = core.create_namespaced_pod("default", _pod("web-1", {"app": "web"}))
    assert created.metadata.uid and created.metadata.resource_version
    assert created.status.phase == "Pending"  # the server resets status on create
    got = core.read_namespaced_pod("web-1", "default")
    assert got.metadata.uid == created.metadata.uid
    listed = core.list_namespaced_pod("default", label_selector="app=web")
    assert [p.metadata.name for p in listed.items] == ["web-1"]
    assert int(listed.metadata.resource_version) >= int(created.metadata.resource_version)
    deleted = core.delete_namespaced_pod("web-1", "default")
    assert deleted.metadata.name == "web-1"
    with pytest.raises(ApiException) as err:
        core.read_namespaced_pod("web-1", "default")
    assert err.value.status == 404
    assert '"reason":"NotFound"' in err.value.body
    assert 'pods \\"web-1\\" not found' in err.value.body


def test_wrong_token_is_401_unauthorized(
    apiserver: ApiServer, kube_client: Callable[..., client.ApiClient]
) -> None:
    core = client.CoreV1Api(kube_client(apiserver, tokens={"test": "not-the-token"}))
    with pytest.raises(ApiException) as err:
        core.list_node()
    assert err.value.status == 401
    assert '"reason":"Unauthorized"' in err.value.body


def test_seeded_nodes_are_listed_with_selectors(
    apiserver: ApiServer, kube_client: Callable[..., client.ApiClient]
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
    core = client.CoreV1Api(kube_client(apiserver))
    names = [n.metadata.name for n in core.list_node(label_selector="gpu=a100").items]
    assert names == ["n1", "n3"]
    cordoned = core.list_node(field_selector="spec.unschedulable=true").items
    assert [n.metadata.name for n in cordoned] == ["n3"]
    assert core.read_node("n0").status.allocatable["nvidia.com/gpu"] == "8"
