"""`placer get` lists an object once when the catalog defines its kind in two versions and the
member serves both (LLMInferenceService v1alpha1 and v1alpha2: one object, two URLs)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from placer.cli import main
from placer.definitions import Catalog
from placer.kube import load_kubeconfigs, open_client
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup
from tests.builders import fleets

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "tests" / "definitions" / "samples" / "llminferenceservice.yaml"


def test_a_kind_in_two_catalog_versions_is_listed_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    versions = sorted(
        d.target.version
        for d in Catalog.builtin().definitions
        if d.target is not None and d.target.kind == "LLMInferenceService"
    )
    assert versions == ["v1alpha1", "v1alpha2"]
    model = fleets.fleet(fleets.cluster("m1", fleets.node("n1", gpus=8, cpu=256, memory=2048)))
    with VirtualFleet(model, setup=realism_setup()) as virtual:
        kubeconfig = virtual.write_kubeconfig(tmp_path / "kc")
        fleet = ("--kubeconfig", str(kubeconfig))
        assert main(["submit", "-f", str(SAMPLE), *fleet]) == 0
        client = open_client(load_kubeconfigs([kubeconfig]), "m1", name="m1")
        served = {
            version: sorted(
                item["metadata"]["uid"]
                for item in client.list(f"serving.kserve.io/{version}", "LLMInferenceService").items
            )
            for version in versions
        }
        client.close()
        assert len(served["v1alpha1"]) == 2 and served["v1alpha1"] == served["v1alpha2"]
        capsys.readouterr()
        assert main(["get", "-A", *fleet]) == 0
        rows = capsys.readouterr().out.splitlines()[1:]
        assert sorted(row.split()[2] for row in rows) == ["llama-pd", "llama-small"]
        assert main(["get", "llminferenceservices", "-A", "-o", "json", *fleet]) == 0
        data = json.loads(capsys.readouterr().out)
        assert data["count"] == 2
