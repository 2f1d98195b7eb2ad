"""kubectl against a loopback server: proof that the fake speaks what kubectl expects
(discovery, Table output, server-side and client-side apply validated through the server's
OpenAPI documents, merge/JSON/status patches, delete, wait).

Skipped when kubectl is absent. Every call uses a fresh ``--cache-dir``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from placer.testing import ApiServer, synthetic_cluster

KUBECTL = shutil.which("kubectl")
pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed"),
]

JOBSET = """\
apiVersion: jobset.x-k8s.io/v1alpha2
kind: JobSet
metadata:
  name: demo
  namespace: default
spec:
  replicatedJobs:
  - name: workers
    replicas: 3
"""

QUEUE = """\
apiVersion: placer.dev/v1alpha1
kind: Queue
metadata:
  name: team-a
spec:
  resources:
    nvidia.com/gpu: {quota: 8}
"""


@pytest.fixture
def kubectl(apiserver: ApiServer, kubeconfig_for: Any, tmp_path: Path) -> Any:
    apiserver.store.register_resource("jobset.x-k8s.io", "v1alpha2", "JobSet", short_names=["js"])
    kubeconfig = kubeconfig_for(apiserver)
    env = {**os.environ, "KUBECONFIG": str(kubeconfig), "HOME": str(tmp_path)}

    def run(
        *args: str, stdin: str | None = None, check: bool = True
    ) -> subprocess.CompletedProcess[str]:
        assert KUBECTL is not None
        cmd = [KUBECTL, f"--cache-dir={tmp_path / 'cache'}", *args]
        done = subprocess.run(cmd, input=stdin, capture_output=True, text=True, env=env, timeout=60)
        if check:
            assert done.returncode == 0, f"{' '.join(args)}: {done.stderr}"
        return done

    return run


def test_get_nodes_and_pods_with_selectors(apiserver: ApiServer, kubectl: Any) -> None:
    apiserver.store.seed(synthetic_cluster(3, 12, seed=1))
    nodes = kubectl("get", "nodes", "-o", "name").stdout.split()
    assert nodes == ["node/node-00000", "node/node-00001", "node/node-00002"]
    bound = [p for p in apiserver.store.list("pods") if p["spec"].get("nodeName") == "node-00001"]
    names = kubectl(
        "get", "pods", "-A", "--field-selector", "spec.nodeName=node-00001", "-o", "name"
    ).stdout.split()
    assert sorted(names) == sorted(f"pod/{p['metadata']['name']}" for p in bound)
    table = kubectl("get", "nodes").stdout
    assert table.splitlines()[0].split()[0] == "NAME"
    resources = kubectl("api-resources", "-o", "name").stdout.split()
    assert {"pods", "nodes", "jobsets.jobset.x-k8s.io", "deployments.apps"} <= set(resources)


def test_server_side_apply_patch_wait_delete(apiserver: ApiServer, kubectl: Any) -> None:
    out = kubectl("apply", "--server-side", "-f", "-", stdin=JOBSET).stdout
    assert "serverside-applied" in out
    stored = apiserver.store.get("jobsets", "demo", "default")
    assert stored["metadata"]["managedFields"][0]["manager"] == "kubectl"
    kubectl("patch", "js", "demo", "--type=merge", "-p", '{"spec":{"suspend":true}}')
    kubectl(
        "patch",
        "js",
        "demo",
        "--type=json",
        "-p",
        '[{"op":"replace","path":"/spec/replicatedJobs/0/replicas","value":4}]',
    )
    refused = kubectl("patch", "js", "demo", "-p", '{"spec":{}}', check=False)
    assert refused.returncode != 0 and "application/strategic-merge-patch+json" in refused.stderr
    kubectl(
        "patch",
        "js",
        "demo",
        "--subresource=status",
        "--type=merge",
        "-p",
        '{"status":{"conditions":[{"type":"Completed","status":"True"}]}}',
    )
    kubectl("wait", "--for=condition=Completed", "js/demo", "--timeout=10s")
    kubectl(
        "wait", "--for=jsonpath={.spec.replicatedJobs[0].replicas}=4", "js/demo", "--timeout=10s"
    )
    stored = apiserver.store.get("jobsets", "demo", "default")
    assert stored["spec"]["suspend"] is True
    assert stored["status"]["conditions"][0]["type"] == "Completed"
    kubectl("delete", "js", "demo", "--wait=true")
    assert apiserver.store.list("jobsets") == []


def test_built_in_create_apply_and_delete(apiserver: ApiServer, kubectl: Any) -> None:
    kubectl("create", "namespace", "team")
    kubectl("create", "configmap", "cfg", "-n", "team", "--from-literal=a=1")
    manifest = (
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cfg\n  namespace: team\n"
        "data:\n  a: '2'\n"
    )
    kubectl("apply", "--server-side", "--force-conflicts", "-f", "-", stdin=manifest)
    assert apiserver.store.get("configmaps", "cfg", "team")["data"] == {"a": "2"}
    kubectl("delete", "namespace", "team", "--wait=true", "--timeout=10s")
    assert [n["metadata"]["name"] for n in apiserver.store.list("namespaces")] == [
        "default",
        "kube-node-lease",
        "kube-public",
        "kube-system",
    ]


def test_scale_and_client_side_apply_of_a_deployment(apiserver: ApiServer, kubectl: Any) -> None:
    deployment = """\
apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: c, image: "nginx:1", env: [{name: A, value: "1"}, {name: B, value: "2"}]}
      - {name: side, image: envoy}
"""
    kubectl("apply", "-f", "-", stdin=deployment)
    changed = deployment.replace("nginx:1", "nginx:2").replace(', {name: B, value: "2"}', "")
    changed = changed.replace("      - {name: side, image: envoy}\n", "")
    kubectl("apply", "-f", "-", stdin=changed)  # strategic merge patch
    kubectl("scale", "deploy/web", "--replicas=3")
    stored = apiserver.store.get("deployments", "web")
    [container] = stored["spec"]["template"]["spec"]["containers"]
    assert (container["image"], container["env"]) == ("nginx:2", [{"name": "A", "value": "1"}])
    assert (stored["spec"]["replicas"], stored["metadata"]["generation"]) == (3, 3)


def test_missing_object_error_reads_like_a_real_cluster(kubectl: Any) -> None:
    failed = kubectl("get", "pod", "ghost", check=False)
    assert failed.returncode == 1
    assert 'pods "ghost" not found' in failed.stderr


def test_auth_can_i_answers_from_standing_403_rules(apiserver: ApiServer, kubectl: Any) -> None:
    """``kubectl auth can-i`` posts a SelfSubjectAccessReview: yes, unless a standing 403
    rule (an identity without that RBAC right) would refuse the request it describes."""
    assert kubectl("auth", "can-i", "create", "jobsets").stdout.strip() == "yes"
    apiserver.faults.fail(403, times=None, verb="create", resource="jobsets.jobset.x-k8s.io")
    denied = kubectl("auth", "can-i", "create", "jobsets", check=False)
    assert denied.returncode == 1 and denied.stdout.strip() == "no"
    assert kubectl("auth", "can-i", "list", "jobsets").stdout.strip() == "yes"
    apiserver.faults.fail(403, times=None, verb="list", resource="configmaps", namespace="ops")
    assert kubectl("auth", "can-i", "list", "configmaps", "-n", "ops", check=False).returncode == 1
    assert kubectl("auth", "can-i", "list", "configmaps", "-n", "dev").stdout.strip() == "yes"


def test_queue_printer_columns_show_the_schema_default(apiserver: ApiServer, kubectl: Any) -> None:
    crd = Path(__file__).resolve().parents[2] / "deploy" / "crds" / "queues.placer.dev.yaml"
    kubectl("apply", "-f", str(crd))
    kubectl("create", "-f", "-", stdin=QUEUE)
    table = kubectl("get", "queues").stdout.splitlines()
    assert table[0].split()[:3] == ["NAME", "PARENT", "RECLAIMABLE"]
    assert table[1].split()[:2] == ["team-a", "true"]
