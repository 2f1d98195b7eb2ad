"""Real kubeconfig files for loopback servers.

One cluster, user and context per server, named after the context; the CA goes in
``certificate-authority-data`` and the token in the user's ``token``, so the official client,
kubectl and placer all read the file exactly as they would read a real one. Options break a
context on purpose (a wrong token, no CA) for tests of failure reporting.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Collection, Mapping
from pathlib import Path
from typing import Any, Protocol

import yaml

__all__ = ["Endpoint", "kubeconfig_dict", "write_kubeconfig"]


class Endpoint(Protocol):
    """What a kubeconfig needs of a server (``ApiServer`` and ``ApiServerProcess`` both fit)."""

    @property
    def url(self) -> str: ...

    @property
    def token(self) -> str: ...

    @property
    def ca_pem(self) -> bytes: ...


def kubeconfig_dict(
    servers: Mapping[str, Endpoint],
    *,
    current_context: str | None = None,
    namespaces: Mapping[str, str] | None = None,
    tokens: Mapping[str, str] | None = None,
    without_ca: Collection[str] = (),
    extensions: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The kubeconfig document for ``servers`` (context name -> server).

    Args:
        servers: context name to server, in the order the contexts are written.
        current_context: the ``current-context`` (default: the first context).
        namespaces: default namespace per context.
        tokens: token per context overriding the server's (e.g. a wrong one, for 401 tests).
        without_ca: contexts written without ``certificate-authority-data`` (the client then
            fails TLS verification, as with a cluster whose CA you do not have).
        extensions: per context, its ``extensions`` (name -> extension object), as kubeconfig
            context extensions (minikube's ``context_info``, placer's ``placer.dev/role``).

    Raises:
        ValueError: no servers, or an option names an unknown context.
    """
    if not servers:
        raise ValueError("a kubeconfig needs at least one server")
    for option, names in (
        ("namespaces", namespaces or {}),
        ("tokens", tokens or {}),
        ("without_ca", without_ca),
        ("extensions", extensions or {}),
    ):
        unknown = sorted(set(names) - set(servers))
        if unknown:
            raise ValueError(f"{option} names unknown contexts: {', '.join(unknown)}")
    current = current_context or next(iter(servers))
    if current not in servers:
        raise ValueError(f"current_context {current!r} is not one of the servers")
    clusters, users, contexts = [], [], []
    for name, server in servers.items():
        cluster: dict[str, Any] = {"server": server.url}
        if name not in without_ca:
            cluster["certificate-authority-data"] = base64.b64encode(server.ca_pem).decode()
        clusters.append({"name": name, "cluster": cluster})
        token = (tokens or {}).get(name, server.token)
        users.append({"name": f"{name}-user", "user": {"token": token}})
        context: dict[str, Any] = {"cluster": name, "user": f"{name}-user"}
        if namespaces and name in namespaces:
            context["namespace"] = namespaces[name]
        if extensions and name in extensions:
            context["extensions"] = [
                {"name": key, "extension": dict(value)} for key, value in extensions[name].items()
            ]
        contexts.append({"name": name, "context": context})
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "preferences": {},
        "clusters": clusters,
        "users": users,
        "contexts": contexts,
        "current-context": current,
    }


def write_kubeconfig(
    path: str | os.PathLike[str],
    servers: Mapping[str, Endpoint],
    *,
    current_context: str | None = None,
    namespaces: Mapping[str, str] | None = None,
    tokens: Mapping[str, str] | None = None,
    without_ca: Collection[str] = (),
    extensions: Mapping[str, Mapping[str, Any]] | None = None,
) -> Path:
    """Write a kubeconfig file (mode 0600) for ``servers``; see :func:`kubeconfig_dict`.

    Returns:
        The path written.
    """
    doc = kubeconfig_dict(
        servers,
        current_context=current_context,
        namespaces=namespaces,
        tokens=tokens,
        without_ca=without_ca,
        extensions=extensions,
    )
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        yaml.safe_dump(doc, handle, sort_keys=False)
    return target
