"""Shared fixtures: loopback Kubernetes API servers and kubeconfig files for them.

* ``api_ca`` (session): one throwaway CA for every server of the run.
* ``start_apiserver``: factory ``start_apiserver(name="c1", **ApiServer options) -> ApiServer``;
  every server it started is stopped at teardown (and checked to leave no thread behind).
* ``apiserver``: one started server named ``test``.
* ``kubeconfig_for``: factory ``kubeconfig_for(server_or_mapping, **write_kubeconfig options)
  -> Path`` writing a fresh kubeconfig file under ``tmp_path``; a single server becomes the
  context named after it.
* ``kube_client``: factory ``kube_client(server, **kubeconfig options) -> kubernetes ApiClient``
  built from a real kubeconfig file; closed at teardown.
* ``built_wheel`` (session): placer's wheel, built with pip from a copy of the sources.
"""

from __future__ import annotations

import itertools
import os
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest
import trustme
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config

from placer.testing import ApiServer, write_kubeconfig

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session", autouse=True)
def _catalog_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The compiled catalog of the run's commands in a directory of the run, not in $HOME."""
    before = os.environ.get("PLACER_CACHE_DIR")
    os.environ["PLACER_CACHE_DIR"] = str(tmp_path_factory.mktemp("placer-cache"))
    yield
    if before is None:
        os.environ.pop("PLACER_CACHE_DIR", None)
    else:
        os.environ["PLACER_CACHE_DIR"] = before


@pytest.fixture(scope="session")
def api_ca() -> trustme.CA:
    """A throwaway certificate authority shared by every loopback server of the session."""
    return trustme.CA()


@pytest.fixture
def start_apiserver(api_ca: trustme.CA) -> Iterator[Callable[..., ApiServer]]:
    """Factory starting loopback API servers; all are stopped at teardown."""
    servers: list[ApiServer] = []

    def start(name: str = "test", **options: Any) -> ApiServer:
        server = ApiServer(name=name, ca=api_ca, **options).start()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.stop()
    prefixes = tuple(f"apiserver-{server.port}-" for server in servers)
    leaked = [t.name for t in threading.enumerate() if t.name.startswith(prefixes)]
    assert not leaked, f"loopback API server threads survived stop(): {leaked}"


@pytest.fixture
def apiserver(start_apiserver: Callable[..., ApiServer]) -> ApiServer:
    """One started loopback API server (context name ``test``)."""
    return start_apiserver("test")


@pytest.fixture
def kubeconfig_for(tmp_path: Path) -> Callable[..., Path]:
    """Factory writing a kubeconfig for one server or a mapping of context name to server."""
    counter = itertools.count()

    def write(servers: ApiServer | Mapping[str, ApiServer], **options: Any) -> Path:
        mapping = {servers.name: servers} if isinstance(servers, ApiServer) else servers
        return write_kubeconfig(tmp_path / f"kubeconfig-{next(counter)}", mapping, **options)

    return write


@pytest.fixture
def kube_client(
    kubeconfig_for: Callable[..., Path],
) -> Iterator[Callable[..., k8s_client.ApiClient]]:
    """Factory of official-client ``ApiClient``s for a server, through a kubeconfig file."""
    clients: list[k8s_client.ApiClient] = []

    def make(server: ApiServer, **options: Any) -> k8s_client.ApiClient:
        path = kubeconfig_for(server, **options)
        api = k8s_config.new_client_from_config(
            config_file=str(path), context=server.name, persist_config=False
        )
        clients.append(api)
        return api

    yield make
    for api in clients:
        api.close()


@pytest.fixture(scope="session")
def built_wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """placer's wheel, built with ``pip wheel`` from a copy of the sources (as a user's pip
    would build it: symlinks resolved, package data by pyproject.toml alone)."""
    tmp_path = tmp_path_factory.mktemp("wheel")
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    for name in ("placer", "simulations", "catalog"):
        shutil.copytree(REPO / name, source / name, symlinks=True, ignore=ignore)
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "-q",
            "--no-deps",
            "-w",
            str(tmp_path / "dist"),
            ".",
        ],
        cwd=source,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stderr[-2000:]
    (wheel,) = (tmp_path / "dist").glob("placer-*.whl")
    return wheel
