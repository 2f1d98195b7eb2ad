"""Kubeconfig files: finding them, merging them as kubectl does, and naming what is wrong.

Why not only ``kubernetes.config``: the official loader merges ``a:b`` paths too, but it skips
missing files silently, keeps the *last* ``current-context`` (kubectl keeps the first), resolves
relative certificate paths against the current directory once the merged dict is handed around,
and its error messages name entries by their full Python ``repr`` — token included. So this
module reads and validates the YAML itself, with kubectl's rules:

* sources, in order of precedence: the ``--kubeconfig`` files given (each must exist), else the
  ``KUBECONFIG`` list (``:``-separated; missing entries are skipped like kubectl does, but at
  least one must exist), else ``~/.kube/config``;
* merging: the first file that defines a cluster, user or context name wins; the first
  ``current-context`` wins;
* relative file references (``certificate-authority``, ``client-certificate``, ``client-key``,
  ``tokenFile``) are resolved against the directory of the file that holds them.

The official loader is still what turns one context into an ``ApiClient`` (it knows exec
plugins, OIDC, token files): :meth:`KubeconfigSet.client_config` hands it a self-contained,
single-context dict.

Credentials never leave this module in text: :meth:`KubeconfigSet.redact` replaces every secret
value (tokens, passwords, private keys, auth-provider secrets, exec env values) in a message, and
errors here never quote user entries.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from placer.errors import FleetConfigError
from placer.yamlload import read_yaml_file

__all__ = ["ROLE_EXTENSION", "ROLE_HUB", "ContextInfo", "KubeconfigSet", "load_kubeconfigs"]

#: Keys of a kubeconfig ``user`` entry whose values are secrets.
_SECRET_USER_KEYS = ("token", "password", "client-key-data")
#: Keys of an ``auth-provider.config`` mapping whose values are secrets.
_SECRET_PROVIDER_KEYS = ("id-token", "refresh-token", "access-token", "client-secret")
#: File references resolved against the directory of the file that holds them.
_CLUSTER_FILES = ("certificate-authority",)
_USER_FILES = ("client-certificate", "client-key", "tokenFile")
_REDACTED = "<redacted>"
#: the context extension saying what a context is to placer (``{"role": "hub"}``), written by
#: ``placer fleet up --hub`` for its hub.
ROLE_EXTENSION = "placer.dev/role"
#: :attr:`ContextInfo.role` of a placement controller's hub.
ROLE_HUB = "hub"


@dataclass(frozen=True)
class ContextInfo:
    """One context of a kubeconfig set, without any credential."""

    name: str
    #: name of the ``clusters`` entry the context points at.
    cluster: str
    #: API server URL of that cluster.
    server: str
    #: name of the ``users`` entry (empty for none).
    user: str
    #: the context's default namespace (``default`` when unset).
    namespace: str
    #: the kubeconfig file that defines the context.
    source: str
    #: what placer is told the context is (its ``placer.dev/role`` extension): ``hub`` for a
    #: placement controller's hub, which commands reaching member clusters leave out unless
    #: it is named; ``""`` otherwise.
    role: str = ""


def _role(extensions: object) -> str:
    """The ``role`` of a context's :data:`ROLE_EXTENSION` extension (``""`` when none)."""
    if not isinstance(extensions, list):
        return ""
    for item in extensions:
        if isinstance(item, Mapping) and item.get("name") == ROLE_EXTENSION:
            extension = item.get("extension")
            if isinstance(extension, Mapping) and isinstance(extension.get("role"), str):
                return str(extension["role"])
    return ""


@dataclass(frozen=True)
class _Entry:
    """A named cluster/user/context entry and the file it came from."""

    body: Mapping[str, Any]
    source: str
    field: str


class KubeconfigSet:
    """Several kubeconfig files merged with kubectl's rules (see module docstring).

    Build it with :func:`load_kubeconfigs` (or :meth:`from_dicts` in tests).
    """

    def __init__(self, documents: Sequence[tuple[str, Mapping[str, Any]]]) -> None:
        """Merge parsed kubeconfig ``documents`` given as ``(source, data)`` pairs, in order."""
        self.files: tuple[str, ...] = tuple(source for source, _ in documents)
        self._clusters: dict[str, _Entry] = {}
        self._users: dict[str, _Entry] = {}
        self._contexts: dict[str, _Entry] = {}
        self.current_context: str | None = None
        self._secrets: set[str] = set()
        for source, data in documents:
            self._merge(source, data)

    @classmethod
    def from_dicts(cls, *documents: tuple[str, Mapping[str, Any]]) -> KubeconfigSet:
        """A set from already parsed documents, each ``(source name, kubeconfig dict)``."""
        return cls(documents)

    # ----------------------------------------------------------------------------------------
    # reading

    def context_names(self) -> tuple[str, ...]:
        """Every context name, in merge order (first file first)."""
        return tuple(self._contexts)

    def contexts(self) -> tuple[ContextInfo, ...]:
        """Every context, resolved (raises ``FleetConfigError`` on a dangling reference)."""
        return tuple(self.context(name) for name in self._contexts)

    def context(self, name: str) -> ContextInfo:
        """The context called ``name``.

        Raises:
            FleetConfigError: unknown context, or it points at a missing cluster or user.
        """
        entry = self._context_entry(name)
        body = entry.body.get("context")
        cluster_name = body.get("cluster") if isinstance(body, Mapping) else None
        if not isinstance(cluster_name, str) or not cluster_name:
            raise FleetConfigError(
                "must name a cluster", source=entry.source, field=f"{entry.field}.context.cluster"
            )
        assert isinstance(body, Mapping)
        cluster = self._clusters.get(cluster_name)
        if cluster is None:
            raise FleetConfigError(
                f"context {name!r} points at cluster {cluster_name!r}, which no kubeconfig defines",
                source=entry.source,
                field=f"{entry.field}.context.cluster",
                hint=f"add a clusters entry named {cluster_name!r} or fix the context",
            )
        user_name = body.get("user") or ""
        if not isinstance(user_name, str):
            raise FleetConfigError(
                "must be a string", source=entry.source, field=f"{entry.field}.context.user"
            )
        if user_name and user_name not in self._users:
            raise FleetConfigError(
                f"context {name!r} points at user {user_name!r}, which no kubeconfig defines",
                source=entry.source,
                field=f"{entry.field}.context.user",
                hint=f"add a users entry named {user_name!r} or fix the context",
            )
        namespace = body.get("namespace") or "default"
        return ContextInfo(
            name=name,
            cluster=cluster_name,
            server=str(cluster.body["cluster"]["server"]),
            user=user_name,
            namespace=str(namespace),
            source=entry.source,
            role=_role(body.get("extensions")),
        )

    def client_config(self, name: str) -> dict[str, Any]:
        """A self-contained kubeconfig dict holding only context ``name``, for the official loader.

        Relative file references are made absolute (against the file that held them).
        """
        info = self.context(name)
        cluster = self._clusters[info.cluster]
        data: dict[str, Any] = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": name,
            "clusters": [
                {"name": info.cluster, "cluster": _absolute(cluster.body["cluster"], cluster)}
            ],
            "contexts": [{"name": name, "context": dict(self._contexts[name].body["context"])}],
            "users": [],
        }
        if info.user:
            user = self._users[info.user]
            body = user.body.get("user") or {}
            data["users"].append({"name": info.user, "user": _absolute(body, user, _USER_FILES)})
        return data

    def exec_plugin_problem(self, name: str) -> FleetConfigError | None:
        """Why context ``name`` cannot log in: its user's exec credential plugin is not installed
        (the official loader would only log it and go on without credentials); else ``None``.
        """
        info = self.context(name)
        if not info.user:
            return None
        entry = self._users[info.user]
        body = entry.body.get("user")
        exec_ = body.get("exec") if isinstance(body, Mapping) else None
        if not isinstance(exec_, Mapping):
            return None
        command = exec_.get("command")
        field = f"users[name={info.user}].user.exec.command"
        if not isinstance(command, str) or not command.strip():
            return FleetConfigError(
                f"context {name!r}: user {info.user!r} has an exec credential plugin without a "
                "command",
                source=entry.source,
                field=field,
            )
        if os.sep in command:  # kubectl: a path with a slash is relative to the kubeconfig
            path = Path(command).expanduser()
            if not path.is_absolute():
                path = Path(entry.source).resolve().parent / path
            found = path.is_file() and os.access(path, os.X_OK)
        else:
            found = shutil.which(command) is not None
        if found:
            return None
        install = exec_.get("installHint")
        what_to_do = (
            self.redact(" ".join(install.split()))[:300]
            if isinstance(install, str) and install.strip()
            else f"install {command!r}"
        )
        return FleetConfigError(
            f"context {name!r}: user {info.user!r} logs in with the exec credential plugin "
            f"{command!r}, which is not installed here "
            f"({'no such executable file' if os.sep in command else 'not found on PATH'}); "
            f"the plugin's own advice: {what_to_do}"
            if isinstance(install, str) and install.strip()
            else f"context {name!r}: user {info.user!r} logs in with the exec credential plugin "
            f"{command!r}, which is not installed here "
            f"({'no such executable file' if os.sep in command else 'not found on PATH'})",
            source=entry.source,
            field=field,
            hint=f"{what_to_do}, or add its folder to PATH, or use a kubeconfig user that logs in "
            "another way (token, client certificate)",
        )

    def describe_sources(self) -> str:
        """The files of the set, for messages (``a.yaml, b.yaml``)."""
        return ", ".join(self.files) if self.files else "<no kubeconfig>"

    def redact(self, text: str) -> str:
        """``text`` with every secret value of these kubeconfigs replaced by ``<redacted>``."""
        for secret in sorted(self._secrets, key=len, reverse=True):
            text = text.replace(secret, _REDACTED)
        return text

    # ----------------------------------------------------------------------------------------
    # merging

    def _context_entry(self, name: str) -> _Entry:
        entry = self._contexts.get(name)
        if entry is None:
            known = ", ".join(self._contexts) or "none"
            raise FleetConfigError(
                f"unknown context {name!r} (known: {known})",
                source=self.describe_sources(),
                field="contexts",
                hint="list the contexts with `kubectl config get-contexts` or check --context",
            )
        return entry

    def _merge(self, source: str, data: Mapping[str, Any]) -> None:
        if not isinstance(data, Mapping):
            raise FleetConfigError(
                "a kubeconfig must be a mapping with clusters, contexts and users", source=source
            )
        current = data.get("current-context")
        if current is not None and not isinstance(current, str):
            raise FleetConfigError("must be a string", source=source, field="current-context")
        if current and self.current_context is None:
            self.current_context = current
        for section, target in (
            ("clusters", self._clusters),
            ("users", self._users),
            ("contexts", self._contexts),
        ):
            for index, item in enumerate(_named_list(data.get(section), source, section)):
                field = f"{section}[{index}]"
                self._check_entry(section, item, source, field)
                # kubectl: the first file that defines a name wins
                target.setdefault(str(item["name"]), _Entry(item, source, field))

    def _check_entry(self, section: str, item: Mapping[str, Any], source: str, field: str) -> None:
        inner_key = section[:-1]  # clusters -> cluster
        body = item.get(inner_key)
        if section == "users":
            if body is None:
                return
            if not isinstance(body, Mapping):
                raise FleetConfigError("must be a mapping", source=source, field=f"{field}.user")
            self._collect_secrets(body)
            return
        if not isinstance(body, Mapping):
            raise FleetConfigError(
                f"must be a mapping (the {inner_key} itself)",
                source=source,
                field=f"{field}.{inner_key}",
            )
        if section == "clusters":
            server = body.get("server")
            if not isinstance(server, str) or not server.startswith(("https://", "http://")):
                raise FleetConfigError(
                    "must be the API server URL (https://HOST:PORT)",
                    source=source,
                    field=f"{field}.cluster.server",
                )

    def _collect_secrets(self, user: Mapping[str, Any]) -> None:
        for key in _SECRET_USER_KEYS:
            value = user.get(key)
            if isinstance(value, str) and value:
                self._secrets.add(value)
        provider = user.get("auth-provider")
        if isinstance(provider, Mapping) and isinstance(provider.get("config"), Mapping):
            for key in _SECRET_PROVIDER_KEYS:
                value = provider["config"].get(key)
                if isinstance(value, str) and value:
                    self._secrets.add(value)
        exec_ = user.get("exec")
        if isinstance(exec_, Mapping) and isinstance(exec_.get("env"), list):
            for item in exec_["env"]:
                if isinstance(item, Mapping) and isinstance(item.get("value"), str):
                    if item["value"]:
                        self._secrets.add(item["value"])


def load_kubeconfigs(
    paths: Sequence[str | Path] = (),
    *,
    environ: Mapping[str, str] | None = None,
) -> KubeconfigSet:
    """Find, read and merge kubeconfig files (see module docstring for the precedence).

    Args:
        paths: explicit files (``--kubeconfig``, repeatable); each must exist.
        environ: the environment to read ``KUBECONFIG`` and ``HOME`` from (default
            ``os.environ``).

    Raises:
        FleetConfigError: naming the file (and field) that is missing or malformed.
    """
    env = os.environ if environ is None else environ
    files: list[Path] = []
    if paths:
        for path in paths:
            file = Path(path).expanduser()
            if file.exists() and not file.is_file():
                raise FleetConfigError(
                    "not a regular file (a kubeconfig is a YAML file)",
                    source=str(path),
                    hint="check the --kubeconfig path",
                )
            if not file.is_file():
                raise FleetConfigError(
                    "no such kubeconfig file",
                    source=str(path),
                    hint="check the --kubeconfig path",
                )
            files.append(file)
    elif env.get("KUBECONFIG"):
        listed = [p for p in env["KUBECONFIG"].split(os.pathsep) if p]
        files = [Path(p).expanduser() for p in listed if Path(p).expanduser().is_file()]
        if not files:
            raise FleetConfigError(
                "none of the files listed in KUBECONFIG exists",
                source=f"KUBECONFIG={env['KUBECONFIG']}",
                hint="fix KUBECONFIG or pass --kubeconfig PATH",
            )
    else:
        home = env.get("HOME") or str(Path.home())
        default = Path(home) / ".kube" / "config"
        if not default.is_file():
            raise FleetConfigError(
                "no kubeconfig: ~/.kube/config does not exist and KUBECONFIG is not set",
                source=str(default),
                hint="pass --kubeconfig PATH, set KUBECONFIG, or give a --fleet FILE",
            )
        files = [default]
    return KubeconfigSet([(str(file), _read_yaml(file)) for file in files])


def _read_yaml(file: Path) -> Mapping[str, Any]:
    data = read_yaml_file(file, FleetConfigError)
    if data is None:
        raise FleetConfigError("the kubeconfig file is empty", source=str(file))
    if not isinstance(data, Mapping):
        raise FleetConfigError(
            "a kubeconfig must be a mapping with clusters, contexts and users", source=str(file)
        )
    return data


def _named_list(value: object, source: str, section: str) -> Iterable[Mapping[str, Any]]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise FleetConfigError("must be a list", source=source, field=section)
    for index, item in enumerate(value):
        if not isinstance(item, Mapping):
            raise FleetConfigError("must be a mapping", source=source, field=f"{section}[{index}]")
        name = item.get("name")
        if not isinstance(name, str) or not name:
            raise FleetConfigError(
                "must have a non-empty name", source=source, field=f"{section}[{index}].name"
            )
    return value


def _absolute(
    body: Mapping[str, Any], entry: _Entry, keys: Sequence[str] = _CLUSTER_FILES
) -> dict[str, Any]:
    result = dict(body)
    base = Path(entry.source).parent
    for key in keys:
        value = result.get(key)
        if isinstance(value, str) and value and not Path(value).expanduser().is_absolute():
            result[key] = str((base / value).resolve())
        elif isinstance(value, str) and value.startswith("~"):
            result[key] = str(Path(value).expanduser())
    return result
