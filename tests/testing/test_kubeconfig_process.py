"""Kubeconfig files (several contexts, broken ones on purpose) and servers in child processes."""

from __future__ import annotations

import json
import ssl
import stat
import urllib.error
import urllib.request
from collections.abc import Callable
from pathlib import Path

import pytest
import urllib3
import yaml
from kubernetes import client, config

from placer.testing import ApiServer, ApiServerProcess, synthetic_cluster, write_kubeconfig


def test_one_file_many_contexts(start_apiserver: Callable[..., ApiServer], tmp_path: Path) -> None:
    east, west = start_apiserver("east"), start_apiserver("west")
    east.store.seed(synthetic_cluster(2, 0))
    west.store.seed(synthetic_cluster(5, 0))
    path = write_kubeconfig(
        tmp_path / "kc", {"east": east, "west": west}, namespaces={"west": "team"}
    )
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    doc = yaml.safe_load(path.read_text())
    assert doc["current-context"] == "east"
    assert [c["name"] for c in doc["contexts"]] == ["east", "west"]
    contexts, current = config.list_kube_config_contexts(str(path))
    assert current["name"] == "east" and contexts[1]["context"]["namespace"] == "team"
    counts = {}
    for name in ("east", "west"):
        api = config.new_client_from_config(str(path), context=name, persist_config=False)
        counts[name] = len(client.CoreV1Api(api).list_node().items)
        api.close()
    assert counts == {"east": 2, "west": 5}


def test_missing_ca_fails_tls_verification(
    apiserver: ApiServer, kubeconfig_for: Callable[..., Path]
) -> None:
    path = kubeconfig_for(apiserver, without_ca=["test"])
    assert "certificate-authority-data" not in path.read_text()
    api = config.new_client_from_config(str(path), context="test", persist_config=False)
    with pytest.raises(urllib3.exceptions.MaxRetryError) as err:
        client.CoreV1Api(api).list_node()
    api.close()
    assert "CERTIFICATE_VERIFY_FAILED" in str(err.value)


def test_bad_options_are_refused(apiserver: ApiServer, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="unknown contexts: nope"):
        write_kubeconfig(tmp_path / "kc", {"test": apiserver}, tokens={"nope": "x"})
    with pytest.raises(ValueError, match="at least one server"):
        write_kubeconfig(tmp_path / "kc", {})


def test_server_in_a_child_process(tmp_path: Path) -> None:
    seed = tmp_path / "seed.jsonl"
    seed.write_text("\n".join(json.dumps(o) for o in synthetic_cluster(3, 30, seed=2)))
    with ApiServerProcess(seed=[seed], synthetic=(2, 0)) as proc:
        assert proc.running and proc.objects == 35
        path = write_kubeconfig(tmp_path / "kc", {"child": proc})
        api = config.new_client_from_config(str(path), context="child", persist_config=False)
        core = client.CoreV1Api(api)
        assert len(core.list_pod_for_all_namespaces(limit=10).items) == 10
        # two seeds of node-00000..: the synthetic ones overwrite the file's first two
        assert len(core.list_node().items) == 3
        api.close()
    assert not proc.running


def test_child_process_reports_a_bad_seed(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text("{nope")
    with pytest.raises(RuntimeError, match=r"bad\.json"):
        ApiServerProcess(seed=[bad]).start()


def test_request_counts_of_a_server_in_a_child_process(tmp_path: Path) -> None:
    """What a client asked of a server in another process, counted by verb and resource
    (GET /placer-testing/requests, authenticated), for benchmarks."""
    with ApiServerProcess(synthetic=(3, 4)) as proc:
        path = write_kubeconfig(tmp_path / "kc", {"child": proc})
        api = config.new_client_from_config(str(path), context="child", persist_config=False)
        core = client.CoreV1Api(api)
        core.list_node()
        core.list_node()
        core.list_pod_for_all_namespaces(watch=False)
        core.read_node("node-00000")
        api.close()
        counts = proc.request_counts()
        assert counts[("list", "nodes")] == 2
        assert counts[("list", "pods")] == 1
        assert counts[("get", "nodes")] == 1
        assert proc.request_counts()[("get", "")] == counts.get(("get", ""), 0) + 1
        context = ssl.create_default_context(cadata=proc.ca_pem.decode())
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(f"{proc.url}/placer-testing/requests", context=context)
        refused.value.close()
        assert refused.value.code == 401  # the counts are not for anyone
