"""Aggregated discovery (``apidiscovery.k8s.io/v2``) on ``/api`` and ``/apis``, as kubectl and
the kubernetes client see it: the format, the content negotiation, the ETag, and kubectl's whole
discovery in two requests instead of one per group/version (``-v=6`` shows its requests)."""

from __future__ import annotations

import http.client
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import kubernetes
import pytest

from placer.testing import ApiServer

KUBECTL = shutil.which("kubectl")
V2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList"
V2BETA1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList"
#: what kubectl 1.32 sends on /api and /apis
KUBECTL_ACCEPT = f"{V2},{V2BETA1},application/json"


def _get(
    conn: http.client.HTTPSConnection, apiserver: ApiServer, path: str, **headers: str
) -> tuple[http.client.HTTPResponse, bytes]:
    conn.request("GET", path, headers={"Authorization": f"Bearer {apiserver.token}", **headers})
    response = conn.getresponse()
    return response, response.read()


def _jobsets(apiserver: ApiServer) -> None:
    apiserver.store.register_resource(
        "jobset.x-k8s.io", "v1alpha2", "JobSet", short_names=["js"], status=True
    )


def test_apis_answers_the_aggregated_list_when_asked_first(
    apiserver: ApiServer, conn: http.client.HTTPSConnection
) -> None:
    """Every group and version of the legacy documents, with every resource as its
    group/version's APIResourceList says it (scope, kind, verbs, short names, subresources)."""
    _jobsets(apiserver)
    response, body = _get(conn, apiserver, "/apis", Accept=KUBECTL_ACCEPT)
    assert response.status == 200
    assert response.getheader("Content-Type") == V2
    assert response.getheader("Vary") == "Accept"
    doc = json.loads(body)
    assert (doc["kind"], doc["apiVersion"]) == ("APIGroupDiscoveryList", "apidiscovery.k8s.io/v2")
    groups = {g["metadata"]["name"]: g for g in doc["items"]}
    _, legacy = _get(conn, apiserver, "/apis", Accept="application/json")
    assert list(groups) == [g["name"] for g in json.loads(legacy)["groups"]]
    apps = groups["apps"]["versions"][0]
    assert (apps["version"], apps["freshness"]) == ("v1", "Current")
    deployments = next(r for r in apps["resources"] if r["resource"] == "deployments")
    assert deployments["responseKind"] == {"group": "apps", "version": "v1", "kind": "Deployment"}
    assert deployments["scope"] == "Namespaced" and deployments["singularResource"] == "deployment"
    assert {"get", "list", "watch", "create", "patch", "delete"} <= set(deployments["verbs"])
    subresources = {s["subresource"]: s for s in deployments["subresources"]}
    assert subresources["scale"]["responseKind"] == {
        "group": "autoscaling",
        "version": "v1",
        "kind": "Scale",
    }
    assert subresources["status"]["responseKind"]["kind"] == "Deployment"
    [jobset_version] = groups["jobset.x-k8s.io"]["versions"]
    [jobsets] = jobset_version["resources"]
    assert jobsets["shortNames"] == ["js"] and jobsets["responseKind"]["version"] == "v1alpha2"
    for group in doc["items"]:  # the same resources as each group/version's APIResourceList
        name = group["metadata"]["name"]
        for version in group["versions"]:
            _, listed = _get(conn, apiserver, f"/apis/{name}/{version['version']}")
            plain = {r["name"] for r in json.loads(listed)["resources"] if "/" not in r["name"]}
            assert {r["resource"] for r in version["resources"]} == plain, name


def test_api_answers_the_core_group_and_legacy_json_stays(
    apiserver: ApiServer, conn: http.client.HTTPSConnection
) -> None:
    response, body = _get(conn, apiserver, "/api", Accept=KUBECTL_ACCEPT)
    doc = json.loads(body)
    [core] = doc["items"]
    assert core["metadata"] == {} and [v["version"] for v in core["versions"]] == ["v1"]
    pods = next(r for r in core["versions"][0]["resources"] if r["resource"] == "pods")
    assert pods["responseKind"] == {"group": "", "version": "v1", "kind": "Pod"}
    assert {s["subresource"] for s in pods["subresources"]} >= {"log", "status"}
    nodes = next(r for r in core["versions"][0]["resources"] if r["resource"] == "nodes")
    assert nodes["scope"] == "Cluster"
    # plain JSON first, or no Accept at all: the legacy APIVersions
    for accept in ("application/json", f"application/json,{V2}", ""):
        response, body = _get(conn, apiserver, "/api", **({"Accept": accept} if accept else {}))
        assert response.getheader("Content-Type") == "application/json"
        assert json.loads(body)["kind"] == "APIVersions"


def test_v2beta1_when_asked_for_it_and_304_for_a_known_etag(
    apiserver: ApiServer, conn: http.client.HTTPSConnection
) -> None:
    response, body = _get(conn, apiserver, "/apis", Accept=f"{V2BETA1},application/json")
    assert response.getheader("Content-Type") == V2BETA1
    assert json.loads(body)["apiVersion"] == "apidiscovery.k8s.io/v2beta1"
    response, _ = _get(conn, apiserver, "/apis", Accept=V2)
    etag = response.getheader("ETag")
    assert etag and etag.startswith('"')
    response, body = _get(conn, apiserver, "/apis", Accept=V2, **{"If-None-Match": etag})
    assert (response.status, body) == (304, b"")
    _jobsets(apiserver)  # a new CRD: a new document, a new ETag
    response, body = _get(conn, apiserver, "/apis", Accept=V2, **{"If-None-Match": etag})
    assert response.status == 200 and response.getheader("ETag") != etag
    assert "jobset.x-k8s.io" in {g["metadata"]["name"] for g in json.loads(body)["items"]}


def test_the_kubernetes_client_reads_it(apiserver: ApiServer, kubeconfig_for: Any) -> None:
    """The official client, through its kubeconfig, asking as client-go does."""
    _jobsets(apiserver)
    api = kubernetes.config.new_client_from_config(config_file=str(kubeconfig_for(apiserver)))
    try:
        method, url, headers, body, _ = api.param_serialize(
            "GET", "/apis", header_params={"Accept": KUBECTL_ACCEPT}, auth_settings=["BearerToken"]
        )
        response = api.call_api(method, url, header_params=headers, body=body)
        response.read()
        status, headers, data = response.status, response.getheaders(), json.loads(response.data)
    finally:
        api.close()
    assert status == 200 and headers["Content-Type"] == V2
    assert "jobset.x-k8s.io" in {g["metadata"]["name"] for g in data["items"]}


@pytest.mark.kubectl
@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed")
def test_kubectl_discovers_in_two_requests(
    apiserver: ApiServer, kubeconfig_for: Any, tmp_path: Path
) -> None:
    """``kubectl get jobsets -A`` with an empty cache: /version, GET /api and GET /apis
    (aggregated), then the list — no request per group/version (it made one per served group/version
    before); ``kubectl api-resources`` lists the same resources as before, from it."""
    _jobsets(apiserver)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig_for(apiserver)), "HOME": str(tmp_path)}

    def kubectl(*args: str) -> subprocess.CompletedProcess[str]:
        assert KUBECTL is not None
        cmd = [KUBECTL, f"--cache-dir={tmp_path / 'cache'}", *args]
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=60)
        assert done.returncode == 0, done.stderr
        return done

    apiserver.clear_requests()
    done = kubectl("get", "jobsets", "-A", "-v=6")
    paths = [r.path for r in apiserver.requests]
    assert paths == ["/version", "/api", "/apis", "/apis/jobset.x-k8s.io/v1alpha2/jobsets"]
    assert "GET https://" in done.stderr  # -v=6 shows them
    resources = kubectl("api-resources", "-o", "wide").stdout
    row = next(line for line in resources.splitlines() if line.startswith("jobsets "))
    assert row.split()[:5] == ["jobsets", "js", "jobset.x-k8s.io/v1alpha2", "true", "JobSet"]
    assert "deployments" in resources and "pods" in resources
