"""Loopback API servers in their own processes, and loading seed files.

A server in the test process shares its GIL with the client under test; for benchmarks that
gather from 16 clusters concurrently that would measure the server, not the client.
:class:`ApiServerProcess` runs ``python -m placer.testing serve`` as a child process, seeded from
a file (JSON, JSON Lines or YAML) or with synthetic content, and exposes the same ``url``,
``token`` and ``ca_pem`` as :class:`ApiServer`, so :func:`write_kubeconfig` takes either.

Protocol with the child: the token goes in the environment (never on a command line), the child
prints one JSON line (``url``, ``port``, ``ca_pem``, ``objects``) on stdout when it serves, and
exits cleanly when its stdin closes (so a dying parent never leaves servers behind).
"""

from __future__ import annotations

import json
import os
import secrets
import selectors
import ssl
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from types import TracebackType
from typing import IO, Any

import yaml

__all__ = ["ApiServerProcess", "load_objects"]

TOKEN_ENV = "PLACER_TESTING_TOKEN"


def load_objects(path: str | os.PathLike[str]) -> Iterator[dict[str, Any]]:
    """Objects from a seed file: a JSON array or ``List``, JSON Lines (``.jsonl``), or YAML
    documents (``List`` documents are expanded).

    Raises:
        ValueError: the file is not one of those formats (names the file).
    """
    target = Path(path)
    text = target.read_text(encoding="utf-8")
    try:
        if target.suffix == ".jsonl":
            docs: list[Any] = [json.loads(line) for line in text.splitlines() if line.strip()]
        elif target.suffix == ".json":
            docs = [json.loads(text)]
        else:
            loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
            docs = list(yaml.load_all(text, Loader=loader))
    except (ValueError, yaml.YAMLError) as exc:
        raise ValueError(f"{target}: not JSON, JSON Lines or YAML: {exc}") from None
    for doc in docs:
        if doc is None:
            continue
        if isinstance(doc, list):
            items: list[Any] = doc
        elif isinstance(doc, dict) and isinstance(doc.get("items"), list):
            items = doc["items"]
        else:
            items = [doc]
        for item in items:
            if not isinstance(item, dict):
                raise ValueError(
                    f"{target}: every object must be a mapping, got {type(item).__name__}"
                )
            yield item


def _read_all(handle: IO[bytes]) -> str:
    """The whole file, read without moving the offset the child shares with us."""
    fd = handle.fileno()
    return os.pread(fd, os.fstat(fd).st_size, 0).decode(errors="replace")


class ApiServerProcess:
    """A loopback API server running in a child process.

    The child has its own CA (:attr:`ca_pem` changes with every :meth:`start`) and its own
    store, loaded from ``seed``/``synthetic`` at each start; the parent cannot reach the store or
    the faults (``latency`` is fixed at start). A child with 500 nodes and 5,000 pods uses
    about 60 MB.

    Args:
        seed: seed files loaded at start (see :func:`load_objects`).
        synthetic: ``(nodes, pods)`` of synthetic content (see ``synthetic_cluster``) to load.
        synthetic_seed: random seed of the synthetic content.
        token: bearer token (default: random).
        port: port (0: any free one; kept across :meth:`stop`/:meth:`start`).
        latency: seconds added to every request (a slow cluster).
        name: label used in the child's thread names.
        startup_timeout: seconds to wait for the child to serve.
    """

    def __init__(
        self,
        *,
        seed: list[str | os.PathLike[str]] | None = None,
        synthetic: tuple[int, int] | None = None,
        synthetic_seed: int = 0,
        token: str | None = None,
        port: int = 0,
        latency: float = 0.0,
        name: str = "loopback",
        startup_timeout: float = 60.0,
    ) -> None:
        self.seed = [str(p) for p in seed or ()]
        self.synthetic = synthetic
        self.synthetic_seed = synthetic_seed
        self.token = token or secrets.token_urlsafe(24)
        self.port = port
        self.latency = latency
        self.name = name
        self.startup_timeout = startup_timeout
        self.objects = 0
        self._ca_pem = b""
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: IO[bytes] | None = None

    @property
    def url(self) -> str:
        """``https://127.0.0.1:PORT``."""
        return f"https://127.0.0.1:{self.port}"

    @property
    def ca_pem(self) -> bytes:
        """PEM of the child's CA (a new one per start)."""
        return self._ca_pem

    @property
    def pid(self) -> int | None:
        """The child's process id while it runs."""
        return self._proc.pid if self._proc else None

    @property
    def running(self) -> bool:
        """Whether the child is alive."""
        return self._proc is not None and self._proc.poll() is None

    def start(self) -> ApiServerProcess:
        """Start the child and wait until it serves; returns ``self``.

        Raises:
            RuntimeError: the child exited or did not report within ``startup_timeout`` (its
                stderr is included).
        """
        if self.running:
            return self
        cmd = [
            sys.executable,
            "-m",
            "placer.testing",
            "serve",
            "--port",
            str(self.port),
            "--ready-json",
            "--exit-on-stdin-eof",
            "--name",
            self.name,
        ]
        for path in self.seed:
            cmd += ["--seed", path]
        if self.synthetic:
            cmd += [
                "--nodes",
                str(self.synthetic[0]),
                "--pods",
                str(self.synthetic[1]),
                "--synthetic-seed",
                str(self.synthetic_seed),
            ]
        if self.latency:
            cmd += ["--latency", str(self.latency)]
        env = {**os.environ, TOKEN_ENV: self.token}
        # stderr goes to a file, not a pipe: a child logging a lot must never block on it
        self._stderr = tempfile.TemporaryFile()
        proc = subprocess.Popen(
            cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self._stderr, env=env
        )
        self._proc = proc
        assert proc.stdout is not None
        line = b""
        deadline = time.monotonic() + self.startup_timeout
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            while not line.endswith(b"\n"):
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not sel.select(remaining):
                    self._fail("did not start in time")
                chunk = os.read(proc.stdout.fileno(), 65536)
                if not chunk:
                    self._fail("exited during start")
                line += chunk
        ready = json.loads(line)
        self.port = int(ready["port"])
        self._ca_pem = str(ready["ca_pem"]).encode()
        self.objects = int(ready["objects"])
        return self

    def request_counts(self) -> dict[tuple[str, str], int]:
        """``(verb, resource)`` -> requests the child has had since it started (asked of it
        over HTTPS: ``GET /placer-testing/requests``, which counts itself as a ``get``)."""
        context = ssl.create_default_context(cadata=self.ca_pem.decode())
        request = urllib.request.Request(
            f"{self.url}/placer-testing/requests",
            headers={"Authorization": f"Bearer {self.token}"},
        )
        with urllib.request.urlopen(request, context=context, timeout=10) as answer:
            data = json.loads(answer.read())
        return {(c["verb"], c["resource"]): int(c["count"]) for c in data["counts"]}

    def _fail(self, what: str) -> None:
        proc = self._proc
        self._proc = None
        assert proc is not None
        proc.kill()
        proc.communicate(timeout=10)
        err = self._read_stderr()
        raise RuntimeError(f"loopback API server process {what}: {err}")

    def _read_stderr(self) -> str:
        handle, self._stderr = self._stderr, None
        if handle is None:
            return ""
        with handle:
            return _read_all(handle).strip()

    @property
    def stderr(self) -> str:
        """What the child wrote on stderr so far (its logs)."""
        return _read_all(self._stderr) if self._stderr is not None else ""

    def stop(self, timeout: float = 10.0) -> None:
        """Close the child's stdin (it stops cleanly) and wait; kill it after ``timeout``."""
        proc, self._proc = self._proc, None
        if proc is None:
            return
        try:
            proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
        self._read_stderr()

    def __enter__(self) -> ApiServerProcess:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()
