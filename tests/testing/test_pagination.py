"""List pagination: ``limit``/``continue`` over a consistent snapshot, and expired tokens."""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from kubernetes import client
from kubernetes.client.rest import ApiException

from placer.testing import ApiServer, synthetic_cluster

Client = Callable[..., client.ApiClient]


def test_pages_share_one_resource_version_and_ignore_later_writes(
    apiserver: ApiServer, kube_client: Client
) -> None:
    apiserver.store.seed(synthetic_cluster(10, 1200, seed=3))
    core = client.CoreV1Api(kube_client(apiserver))
    first = core.list_pod_for_all_namespaces(limit=500)
    assert len(first.items) == 500
    assert first.metadata.remaining_item_count == 700
    rv = first.metadata.resource_version
    # a write between pages does not show up in later pages
    apiserver.store.seed(
        [
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "zz-late", "namespace": "team-7"},
            }
        ]
    )
    names = [p.metadata.name for p in first.items]
    token = first.metadata._continue
    pages = 1
    while token:
        page = core.list_pod_for_all_namespaces(limit=500, _continue=token)
        assert page.metadata.resource_version == rv
        names += [p.metadata.name for p in page.items]
        token = page.metadata._continue
        pages += 1
    assert pages == 3
    assert len(names) == len(set(names)) == 1200
    assert "zz-late" not in names
    assert len(core.list_pod_for_all_namespaces().items) == 1201


def test_paginated_selectors_omit_remaining_count(
    apiserver: ApiServer, kube_client: Client
) -> None:
    apiserver.store.seed(synthetic_cluster(20, 0))
    core = client.CoreV1Api(kube_client(apiserver))
    page = core.list_node(limit=3, label_selector="topology.kubernetes.io/zone=region-1a")
    assert len(page.items) == 3 and page.metadata._continue
    assert page.metadata.remaining_item_count is None


def test_expired_continue_token_is_410(apiserver: ApiServer, kube_client: Client) -> None:
    apiserver.store.seed(synthetic_cluster(20, 0))
    core = client.CoreV1Api(kube_client(apiserver))
    page = core.list_node(limit=5)
    apiserver.store.compact()
    with pytest.raises(ApiException) as err:
        core.list_node(limit=5, _continue=page.metadata._continue)
    status = json.loads(err.value.body)
    assert (status["code"], status["reason"]) == (410, "Expired")
    assert status["message"].startswith("The provided continue parameter is too old")


def test_garbage_continue_token_is_400(apiserver: ApiServer, kube_client: Client) -> None:
    core = client.CoreV1Api(kube_client(apiserver))
    with pytest.raises(ApiException) as err:
        core.list_node(limit=5, _continue="not-a-token")
    assert err.value.status == 400


def test_history_window_expires_tokens(
    start_apiserver: Callable[..., ApiServer], kube_client: Client
) -> None:
    server = start_apiserver("small", history_size=4)
    server.store.seed(synthetic_cluster(10, 0))
    core = client.CoreV1Api(kube_client(server))
    page = core.list_node(limit=2)
    for i in range(10):  # more node events than the history keeps
        server.store.patch("nodes", "node-00000", {"metadata": {"labels": {"i": str(i)}}})
    with pytest.raises(ApiException) as err:
        core.list_node(limit=2, _continue=page.metadata._continue)
    assert err.value.status == 410
