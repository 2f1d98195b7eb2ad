"""What each request costs the controller: the official loader's token hook is throttled.

(The throttle lives in :func:`placer.kube.open_client`; it is tested here because the
controller, which sends thousands of requests a minute, is what needs it.)
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from kubernetes.config import kube_config

from placer.kube import load_kubeconfigs, open_client


def test_token_refresh_hook_runs_at_most_once_per_interval(
    apiserver: Any, kubeconfig_for: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs: list[int] = []
    original = kube_config.KubeConfigLoader._set_config

    def counting(self: Any, configuration: Any) -> None:
        runs.append(1)
        original(self, configuration)

    monkeypatch.setattr(kube_config.KubeConfigLoader, "_set_config", counting)
    path: Path = kubeconfig_for(apiserver)
    client = open_client(load_kubeconfigs([path]), apiserver.name)
    try:
        loaded = len(runs)
        for _ in range(50):
            assert client.server_version()["major"] == "1"  # authenticated every time
        # without the throttle: one run per request (50); with it: one per second at most
        assert len(runs) - loaded <= 3
    finally:
        client.close()
