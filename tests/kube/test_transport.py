"""The light transport and the fallback to the official client, over real HTTPS.

Every test writes a real kubeconfig file for a loopback API server and opens a client with
:func:`placer.kube.open_client`, as the CLI does; which transport served it is checked on the
client, and what the server saw in its request log.
"""

from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.errors import (
    ClusterUnreachableError,
    ConflictError,
    FleetConfigError,
    ForbiddenError,
    NotFoundError,
    UnauthorizedError,
)
from placer.kube import ClientSettings, KubeClient, load_kubeconfigs, open_client, transport
from placer.kube.transport import LightTransport, OfficialTransport, light_connection
from placer.testing import ApiServer

NODE = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "n1"}}


def write_config(
    path: Path,
    server: ApiServer,
    *,
    cluster: Mapping[str, Any] | None = None,
    user: Mapping[str, Any] | None = None,
) -> Path:
    """A one-context kubeconfig (context ``c``) for ``server``; ``cluster``/``user``: the
    entries' fields (default: the server's CA as data, its token)."""
    ca = base64.b64encode(server.ca_pem).decode()
    document = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "c",
                "cluster": {
                    "server": server.url,
                    **(cluster if cluster is not None else {"certificate-authority-data": ca}),
                },
            }
        ],
        "users": [
            {"name": "u", "user": dict(user if user is not None else {"token": server.token})}
        ],
        "contexts": [{"name": "c", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "c",
    }
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    return path


def opened(path: Path, **settings: Any) -> KubeClient:
    return open_client(load_kubeconfigs([path]), "c", settings=ClientSettings(**settings))


@pytest.fixture
def server(start_apiserver: Callable[..., ApiServer]) -> ApiServer:
    server = start_apiserver("c", client_certificates=True)
    server.store.seed([NODE])
    return server


def test_token_and_ca_data_go_through_the_light_transport(
    server: ApiServer, tmp_path: Path
) -> None:
    with opened(write_config(tmp_path / "kc", server)) as client:
        assert isinstance(client.transport, LightTransport)
        assert [n["metadata"]["name"] for n in client.list("v1", "Node").items] == ["n1"]
        created = client.create(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
        )
        assert created["metadata"]["namespace"] == "default"
    agents = {r.user_agent for r in server.requests}
    assert agents == {"placer"}
    assert server.token not in repr(client.transport)


def test_the_same_answers_as_the_official_client(server: ApiServer, tmp_path: Path) -> None:
    path = write_config(tmp_path / "kc", server)
    with opened(path) as light, opened(path, light_transport=False) as official:
        assert isinstance(light.transport, LightTransport)
        assert isinstance(official.transport, OfficialTransport)
        assert light.server == official.server == server.url
        assert light.list("v1", "Node") == official.list("v1", "Node")
        patch = {"metadata": {"labels": {"a": "b"}}}
        assert (
            light.patch("v1", "Node", "n1", patch)["metadata"]["labels"]
            == official.patch("v1", "Node", "n1", patch)["metadata"]["labels"]
        )


def test_token_file_is_read(server: ApiServer, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(server.token + "\n", encoding="utf-8")
    # relative to the kubeconfig's folder, as kubectl resolves it
    path = write_config(
        tmp_path / "kc",
        server,
        user={"tokenFile": "token"},
    )
    with opened(path) as client:
        assert isinstance(client.transport, LightTransport)
        assert client.get("v1", "Node", "n1")["metadata"]["name"] == "n1"


def test_a_rotated_token_file_is_read_again(
    server: ApiServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    token = tmp_path / "token"
    token.write_text("an-old-token", encoding="utf-8")
    with opened(write_config(tmp_path / "kc", server, user={"tokenFile": str(token)})) as client:
        with pytest.raises(UnauthorizedError):
            client.get("v1", "Node", "n1")
        token.write_text(server.token, encoding="utf-8")  # rotated, e.g. by the kubelet
        with pytest.raises(UnauthorizedError):  # read again only after a minute
            client.get("v1", "Node", "n1")
        monkeypatch.setattr(transport, "TOKEN_FILE_TTL", 0.0)
        assert client.get("v1", "Node", "n1")["metadata"]["name"] == "n1"
        token.unlink()  # mid-rotation: the last token read is kept
        assert client.get("v1", "Node", "n1")["metadata"]["name"] == "n1"


def test_a_missing_token_file_is_refused_when_opening(server: ApiServer, tmp_path: Path) -> None:
    path = write_config(tmp_path / "kc", server, user={"tokenFile": "no-such-token"})
    with pytest.raises(FleetConfigError) as info:
        opened(path)
    text = str(info.value)
    assert str(path) in text and "'c'" in text and "no-such-token" in text


@pytest.mark.parametrize("as_data", [True, False], ids=["data", "files"])
def test_client_certificate_authenticates(server: ApiServer, tmp_path: Path, as_data: bool) -> None:
    cert, key = server.issue_client_certificate("alice")
    user: dict[str, Any]
    if as_data:
        user = {
            "client-certificate-data": base64.b64encode(cert).decode(),
            "client-key-data": base64.b64encode(key).decode(),
        }
    else:
        (tmp_path / "alice.crt").write_bytes(cert)
        (tmp_path / "alice.key").write_bytes(key)
        user = {"client-certificate": "alice.crt", "client-key": "alice.key"}
    ca = tmp_path / "ca.pem"
    ca.write_bytes(server.ca_pem)
    path = write_config(
        tmp_path / "kc", server, cluster={"certificate-authority": str(ca)}, user=user
    )
    with opened(path) as client:
        assert isinstance(client.transport, LightTransport)
        assert client.get("v1", "Node", "n1")["metadata"]["name"] == "n1"
    # no certificate, no token: refused, so the certificate is what authenticated above
    with opened(write_config(tmp_path / "none", server, user={})) as client:
        with pytest.raises(UnauthorizedError):
            client.get("v1", "Node", "n1")


def test_an_unknown_ca_is_a_clear_tls_error(server: ApiServer, tmp_path: Path) -> None:
    import trustme

    stranger = ApiServer(name="stranger", ca=trustme.CA()).start()
    try:
        # the CA of another server: verification must fail, naming TLS and what to check
        other_ca = base64.b64encode(stranger.ca_pem).decode()
        path = write_config(
            tmp_path / "kc", server, cluster={"certificate-authority-data": other_ca}
        )
        with opened(path) as client:
            with pytest.raises(ClusterUnreachableError) as info:
                client.list("v1", "Node")
    finally:
        stranger.stop()
    error = info.value
    assert error.reason == "TLSError" and error.code == 0
    assert "certificate verify failed" in str(error).lower()
    assert "certificate-authority" in (error.hint or "")
    assert server.token not in str(error)
    # insecure-skip-tls-verify: the same server is read without verification
    insecure = write_config(
        tmp_path / "insecure", server, cluster={"insecure-skip-tls-verify": True}
    )
    with pytest.warns(Warning):  # urllib3's InsecureRequestWarning, as with the official client
        with opened(insecure) as client:
            assert isinstance(client.transport, LightTransport)
            assert client.get("v1", "Node", "n1")["metadata"]["name"] == "n1"


def test_error_statuses_are_kept(server: ApiServer, tmp_path: Path) -> None:
    with opened(write_config(tmp_path / "kc", server)) as client:
        assert isinstance(client.transport, LightTransport)
        with pytest.raises(NotFoundError) as missing:
            client.get("v1", "Node", "nope")
        assert missing.value.code == 404 and missing.value.reason == "NotFound"
        assert missing.value.details.get("name") == "nope"
        body = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}}
        client.create(body)
        with pytest.raises(ConflictError) as exists:
            client.create(body)
        assert exists.value.reason == "AlreadyExists" and exists.value.code == 409
        server.faults.fail(403, verb="list", resource="nodes", message="nodes is forbidden: no")
        with pytest.raises(ForbiddenError) as forbidden:
            client.list("v1", "Node")
        assert forbidden.value.code == 403 and forbidden.value.reason == "Forbidden"
        assert "nodes is forbidden: no" in forbidden.value.status_message
        assert forbidden.value.cluster == "c"


def test_a_wrong_token_is_refused_and_never_shown(server: ApiServer, tmp_path: Path) -> None:
    path = write_config(tmp_path / "kc", server, user={"token": "s3cret-wrong-token"})
    with opened(path) as client:
        with pytest.raises(UnauthorizedError) as info:
            client.list("v1", "Node")
    assert info.value.code == 401 and "s3cret-wrong-token" not in str(info.value)


def test_unreadable_client_key_names_file_and_context(server: ApiServer, tmp_path: Path) -> None:
    path = write_config(
        tmp_path / "kc",
        server,
        user={"client-certificate": "missing.crt", "client-key": "missing.key", "token": "t0k"},
    )
    with pytest.raises(FleetConfigError) as info:
        opened(path)
    text = str(info.value)
    assert str(path) in text and "'c'" in text and "missing.crt" in text and "t0k" not in text


def test_exec_plugin_falls_back_to_the_official_client(server: ApiServer, tmp_path: Path) -> None:
    plugin = tmp_path / "token-plugin"
    credential = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "kind": "ExecCredential",
        "status": {"token": server.token},
    }
    plugin.write_text(
        f"#!{sys.executable}\nprint({json.dumps(json.dumps(credential))})\n", encoding="utf-8"
    )
    plugin.chmod(0o755)
    exec_user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": str(plugin),
        }
    }
    with opened(write_config(tmp_path / "kc", server, user=exec_user)) as client:
        assert isinstance(client.transport, OfficialTransport)
        assert client.get("v1", "Node", "n1")["metadata"]["name"] == "n1"
        with pytest.raises(NotFoundError) as missing:  # the same errors through the fallback
            client.get("v1", "Node", "nope")
        assert missing.value.reason == "NotFound"


def test_what_the_light_transport_declines() -> None:
    def config(cluster: dict[str, Any], user: dict[str, Any]) -> dict[str, Any]:
        return {
            "clusters": [{"name": "c", "cluster": {"server": "https://h:6443", **cluster}}],
            "users": [{"name": "u", "user": user}],
        }

    assert light_connection(config({}, {"token": "t"}), environ={}).declined == ""
    assert "exec" in light_connection(config({}, {"exec": {}}), environ={}).declined
    assert (
        "auth-provider" in light_connection(config({}, {"auth-provider": {}}), environ={}).declined
    )
    assert (
        "proxy"
        in light_connection(config({"proxy-url": "socks5://p:1080"}, {}), environ={}).declined
    )
    assert (
        "environment"
        in light_connection(config({}, {}), environ={"HTTPS_PROXY": "http://p:3128"}).declined
    )
    proxied = light_connection(config({"proxy-url": "http://p:3128"}, {}), environ={})
    assert proxied.declined == "" and proxied.proxy_url == "http://p:3128"
    # a token wins over a token file and basic auth, as in client-go
    both = light_connection(
        config({}, {"token": "t", "tokenFile": "/f", "username": "a", "password": "b"}), environ={}
    )
    assert both.token == "t" and both.token_file is None and both.basic_auth is None
    assert "'t'" not in repr(both)


def test_the_cli_never_imports_the_official_client(server: ApiServer, tmp_path: Path) -> None:
    """``placer get`` on a token kubeconfig talks through the light transport: the official
    client (and the pydantic, requests and oauthlib it imports) is never loaded."""
    path = write_config(tmp_path / "kc", server)
    probe = textwrap.dedent(
        """
        import sys
        from placer.cli import main
        code = main(["get", "-A", "--kubeconfig", sys.argv[1]])
        loaded = sorted(m for m in ("kubernetes", "pydantic", "requests") if m in sys.modules)
        print("loaded:", ",".join(loaded))
        sys.exit(code)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", probe, str(path)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "NO_PROXY": "", "HTTPS_PROXY": "", "https_proxy": ""},
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert "loaded: \n" in done.stdout
    assert server.requests and {r.user_agent for r in server.requests} == {"placer"}
