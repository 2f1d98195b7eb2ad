"""Kubeconfig files: precedence, kubectl merge rules, relative paths, errors, redaction."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.errors import FleetConfigError
from placer.kube import KubeconfigSet, load_kubeconfigs

SECRET = "s3cr3t-token-value"


def kubeconfig(
    contexts: dict[str, str], *, current: str | None = None, token: str = SECRET
) -> dict[str, Any]:
    """A kubeconfig with one cluster and user per context (context -> server)."""
    data: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {"name": f"{c}-cluster", "cluster": {"server": s, "certificate-authority": "ca.pem"}}
            for c, s in contexts.items()
        ],
        "users": [{"name": f"{c}-user", "user": {"token": token}} for c in contexts],
        "contexts": [
            {"name": c, "context": {"cluster": f"{c}-cluster", "user": f"{c}-user"}}
            for c in contexts
        ],
    }
    if current:
        data["current-context"] = current
    return data


def write(path: Path, data: object) -> Path:
    path.write_text(yaml.safe_dump(data), encoding="utf-8")
    return path


def test_explicit_files_merge_first_wins(tmp_path: Path) -> None:
    a = write(tmp_path / "a.yaml", kubeconfig({"east": "https://a:1", "west": "https://a:2"}))
    b = write(
        tmp_path / "b.yaml",
        kubeconfig({"west": "https://b:2", "central": "https://b:3"}, current="central"),
    )
    merged = load_kubeconfigs([a, b])
    assert merged.context_names() == ("east", "west", "central")
    # kubectl: the first file that defines a name wins
    assert merged.context("west").server == "https://a:2"
    assert merged.context("west").source == str(a)
    assert merged.current_context == "central"


def test_kubeconfig_env_list_skips_missing_files(tmp_path: Path) -> None:
    a = write(tmp_path / "a.yaml", kubeconfig({"east": "https://a:1"}))
    env = {"KUBECONFIG": f"{tmp_path / 'missing.yaml'}:{a}", "HOME": str(tmp_path)}
    assert load_kubeconfigs(environ=env).context_names() == ("east",)


def test_default_file_in_home(tmp_path: Path) -> None:
    (tmp_path / ".kube").mkdir()
    write(tmp_path / ".kube" / "config", kubeconfig({"home": "https://h:1"}))
    assert load_kubeconfigs(environ={"HOME": str(tmp_path)}).context_names() == ("home",)


def test_relative_certificate_paths_resolve_against_their_file(tmp_path: Path) -> None:
    sub = tmp_path / "sub"
    sub.mkdir()
    a = write(sub / "a.yaml", kubeconfig({"east": "https://a:1"}))
    data = load_kubeconfigs([a]).client_config("east")
    assert data["clusters"][0]["cluster"]["certificate-authority"] == str(sub / "ca.pem")
    assert [c["name"] for c in data["contexts"]] == ["east"]


@pytest.mark.parametrize(
    ("content", "fragment"),
    [
        ("", "empty"),
        ("clusters: [1, 2", "not valid YAML: line"),
        ("[1, 2]", "must be a mapping"),
        ("clusters: {a: 1}", "clusters: must be a list"),
        ("clusters: [{cluster: {server: 'https://x'}}]", "clusters[0].name"),
        ("clusters: [{name: c, cluster: {server: 'ftp://x'}}]", "clusters[0].cluster.server"),
    ],
)
def test_malformed_kubeconfig_names_file_and_field(
    tmp_path: Path, content: str, fragment: str
) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(FleetConfigError) as info:
        load_kubeconfigs([path])
    assert str(path) in str(info.value)
    assert fragment in str(info.value)


def test_missing_file_is_an_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(FleetConfigError, match=r"nope\.yaml: no such kubeconfig file"):
        load_kubeconfigs([tmp_path / "nope.yaml"])


def test_no_kubeconfig_anywhere(tmp_path: Path) -> None:
    with pytest.raises(FleetConfigError, match=r"~/\.kube/config does not exist"):
        load_kubeconfigs(environ={"HOME": str(tmp_path)})
    with pytest.raises(FleetConfigError, match="none of the files listed in KUBECONFIG"):
        load_kubeconfigs(environ={"KUBECONFIG": str(tmp_path / "x"), "HOME": str(tmp_path)})


def test_unknown_and_dangling_contexts(tmp_path: Path) -> None:
    data = kubeconfig({"east": "https://a:1"})
    data["contexts"].append({"name": "broken", "context": {"cluster": "nowhere", "user": "x"}})
    merged = load_kubeconfigs([write(tmp_path / "a.yaml", data)])
    with pytest.raises(FleetConfigError, match=r"unknown context 'west' \(known: east, broken\)"):
        merged.context("west")
    with pytest.raises(FleetConfigError, match=r"contexts\[1\].context.cluster.*'nowhere'"):
        merged.context("broken")


def test_secrets_are_redacted_and_never_in_errors(tmp_path: Path) -> None:
    data = kubeconfig({"east": "https://a:1"})
    data["users"][0]["user"]["auth-provider"] = {"config": {"refresh-token": "refresh-xyz"}}
    merged = KubeconfigSet.from_dicts(("inline", data))
    text = f"failed with {SECRET} and refresh-xyz"
    assert merged.redact(text) == "failed with <redacted> and <redacted>"
    with pytest.raises(FleetConfigError) as info:
        merged.context("nope")
    assert SECRET not in str(info.value)
