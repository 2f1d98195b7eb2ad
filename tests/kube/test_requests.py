"""Pure request building: paths, query parameters, patch content types, DeleteOptions."""

from __future__ import annotations

import pytest

from placer.kube import PatchType, ResourceRef
from placer.kube.requests import (
    apply_request,
    create_request,
    delete_request,
    get_request,
    list_request,
    patch_request,
    watch_request,
)
from placer.kube.resources import WELL_KNOWN, resources_from_discovery

JOBSET = ResourceRef("jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", True)
NODE = WELL_KNOWN[("v1", "Node")]
POD = WELL_KNOWN[("v1", "Pod")]


def test_paths_for_core_and_group_kinds() -> None:
    assert POD.path() == "/api/v1/pods"
    assert POD.path(namespace="ns", name="p") == "/api/v1/namespaces/ns/pods/p"
    assert NODE.path(name="n1", subresource="status") == "/api/v1/nodes/n1/status"
    assert JOBSET.path(namespace="a b", name="x/y") == (
        "/apis/jobset.x-k8s.io/v1alpha2/namespaces/a%20b/jobsets/x%2Fy"
    )
    assert JOBSET.api_version == "jobset.x-k8s.io/v1alpha2"


def test_list_pages_drop_resource_version_with_a_continue_token() -> None:
    first = list_request(POD, field_selector="status.phase!=Failed", limit=500)
    assert first.url == "/api/v1/pods?fieldSelector=status.phase%21%3DFailed&limit=500"
    nxt = list_request(POD, limit=500, continue_token="abc", resource_version="7")
    assert dict(nxt.query) == {"limit": "500", "continue": "abc"}


def test_watch_request_asks_for_bookmarks_from_a_version() -> None:
    request = watch_request(JOBSET, namespace="ns", resource_version="42", timeout_seconds=5)
    assert dict(request.query) == {
        "watch": "true",
        "resourceVersion": "42",
        "allowWatchBookmarks": "true",
        "timeoutSeconds": "5",
    }
    assert request.path.endswith("/namespaces/ns/jobsets")


def test_scope_mistakes_are_refused() -> None:
    with pytest.raises(ValueError, match="cluster-scoped"):
        get_request(NODE, "n1", namespace="ns")
    with pytest.raises(ValueError, match="namespaced"):
        get_request(JOBSET, "x")


def test_patch_types_and_apply() -> None:
    merge = patch_request(JOBSET, "x", {"spec": {}}, namespace="ns")
    assert merge.content_type == "application/merge-patch+json"
    json_patch = patch_request(
        JOBSET,
        "x",
        [{"op": "add", "path": "/a", "value": 1}],
        namespace="ns",
        patch_type=PatchType.JSON,
    )
    assert json_patch.body == [{"op": "add", "path": "/a", "value": 1}]
    with pytest.raises(ValueError, match="list of operations"):
        patch_request(JOBSET, "x", {"a": 1}, namespace="ns", patch_type=PatchType.JSON)
    body = {"apiVersion": JOBSET.api_version, "kind": "JobSet", "metadata": {"name": "x"}}
    apply = apply_request(
        JOBSET, body, namespace="ns", field_manager="placer", force=True, dry_run=True
    )
    assert apply.method == "PATCH"
    assert apply.content_type == "application/apply-patch+yaml"
    assert dict(apply.query) == {"fieldManager": "placer", "force": "true", "dryRun": "All"}
    with pytest.raises(ValueError, match="field manager"):
        patch_request(JOBSET, "x", body, namespace="ns", patch_type=PatchType.APPLY)


def test_create_and_delete_bodies() -> None:
    create = create_request(POD, {"metadata": {"generateName": "p-"}}, namespace="ns", dry_run=True)
    assert create.path == "/api/v1/namespaces/ns/pods" and dict(create.query) == {"dryRun": "All"}
    delete = delete_request(JOBSET, "x", namespace="ns", propagation_policy="Foreground")
    assert delete.body == {
        "kind": "DeleteOptions",
        "apiVersion": "v1",
        "propagationPolicy": "Foreground",
    }
    with pytest.raises(ValueError, match="propagation"):
        delete_request(JOBSET, "x", namespace="ns", propagation_policy="Sometimes")


def test_discovery_folds_subresources_into_their_kind() -> None:
    document = {
        "resources": [
            {"name": "jobsets", "kind": "JobSet", "namespaced": True},
            {"name": "jobsets/status", "kind": "JobSet", "namespaced": True},
            {"name": "widgets", "kind": "Widget", "namespaced": False},
        ]
    }
    kinds = resources_from_discovery("jobset.x-k8s.io/v1alpha2", document)
    assert kinds["JobSet"] == JOBSET.__class__(
        "jobset.x-k8s.io", "v1alpha2", "JobSet", "jobsets", True, frozenset({"status"})
    )
    assert kinds["Widget"].namespaced is False


def test_discovery_keeps_singular_and_short_names_as_aliases() -> None:
    document = {
        "resources": [
            {
                "name": "leaderworkersets",
                "singularName": "leaderworkerset",
                "shortNames": ["LWS", "lws"],
                "kind": "LeaderWorkerSet",
                "namespaced": True,
            },
            {"name": "leaderworkersets/scale", "kind": "Scale", "namespaced": True},
            {"name": "plain", "kind": "Plain", "singularName": "", "namespaced": True},
        ]
    }
    kinds = resources_from_discovery("leaderworkerset.x-k8s.io/v1", document)
    assert kinds["LeaderWorkerSet"].aliases == ("leaderworkerset", "lws")
    assert kinds["LeaderWorkerSet"].subresources == frozenset({"scale"})
    assert kinds["Plain"].aliases == ()
