"""Shared fixtures of the virtual fleet's tests."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from placer.kube import KubeClient, load_kubeconfigs, open_client
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup
from tests.builders import fleets


@pytest.fixture
def member(tmp_path: Path) -> Iterator[KubeClient]:
    fleet = fleets.fleet(fleets.cluster("m1", fleets.node("n1", gpus=4)))
    virtual = VirtualFleet(fleet, setup=realism_setup()).start()
    client = open_client(
        load_kubeconfigs([virtual.write_kubeconfig(tmp_path / "kubeconfig")]), "m1", name="m1"
    )
    yield client
    client.close()
    virtual.stop()
