"""Bad input on the command line (issue 12, item 7): each case gets one ``error:`` line and an
exit code, never a traceback, a hang or silent acceptance.

Every case runs the real ``placer`` command in a child process (``python -m placer``), with real
files and, where it needs clusters, the loopback API servers through real kubeconfig files.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from placer.snapshot import load_snapshot
from placer.testing import ApiServer
from placer.virtual.fleet import VirtualFleet
from placer.yamlload import MAX_ALIAS_VALUES
from tests.builders.waiting import wait_until

#: one `python -m placer` process per case: slow (make test-fast leaves them out).
pytestmark = pytest.mark.slow

REPO = Path(__file__).resolve().parents[2]
DEMO = REPO / "clusters" / "demo.yaml"

#: nine anchors, each a list of nine aliases to the previous one: 9^9 strings once expanded
BOMB = 'a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]\n' + "".join(
    f"{name}: &{name} [{', '.join(['*' + previous] * 9)}]\n"
    for previous, name in zip("abcdefgh", "bcdefghi", strict=True)
)


def placer(
    *args: str, stdin: bytes = b"", timeout: float = 120, env: dict[str, str] | None = None
) -> tuple[int, str]:
    """Run ``placer ARGS``; returns the exit code and stderr (checked for tracebacks)."""
    proc = subprocess.run(
        [sys.executable, "-m", "placer", *args],
        input=stdin,
        capture_output=True,
        timeout=timeout,
        cwd=REPO,
        env={**os.environ, **(env or {})},
    )
    err = proc.stderr.decode("utf-8", "replace")
    assert "Traceback" not in err, err
    assert "Traceback" not in proc.stdout.decode("utf-8", "replace")
    return proc.returncode, err


def _job(name: str, limits: dict[str, Any] | None = None, requests: Any = None) -> dict[str, Any]:
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = limits
    if requests is not None:
        resources["requests"] = requests
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "c", "image": "c", "resources": resources}],
                }
            }
        },
    }


def _write(path: Path, *documents: Any) -> Path:
    path.write_text(yaml.safe_dump_all(documents))
    return path


# --------------------------------------------------------------------------------------------
# YAML bombs in every reader of user input


def test_the_bomb_really_is_one() -> None:
    loaded = yaml.load(BOMB, Loader=yaml.CSafeLoader)  # shared references: cheap to build
    assert len(loaded["b"]) == 9 and len(BOMB) < 700
    assert 9**9 > MAX_ALIAS_VALUES


def _bomb_job(tmp_path: Path) -> Path:
    text = (
        yaml.safe_dump(_job("bomb")) + "x:\n" + "".join(f"  {line}\n" for line in BOMB.splitlines())
    )
    path = tmp_path / "bomb.yaml"
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    "make_args",
    [
        pytest.param(lambda p, b: ["plan", "-f", str(b), "--snapshot", str(DEMO)], id="manifest"),
        pytest.param(lambda p, b: ["validate", str(b)], id="definition"),
        pytest.param(
            lambda p, b: ["plan", "-f", str(p / "ok.yaml"), "--snapshot", str(b)], id="snapshot"
        ),
        pytest.param(
            lambda p, b: [
                "plan",
                "-f",
                str(p / "ok.yaml"),
                "--snapshot",
                str(DEMO),
                "--policy",
                str(b),
            ],
            id="policy",
        ),
        pytest.param(lambda p, b: ["snapshot", "--fleet", str(b), "-o", str(p / "s")], id="fleet"),
        pytest.param(
            lambda p, b: ["snapshot", "--kubeconfig", str(b), "-o", str(p / "s")], id="kubeconfig"
        ),
        pytest.param(
            lambda p, b: ["plan", "-f", "-", "--snapshot", str(DEMO)], id="manifest-on-stdin"
        ),
    ],
)
def test_an_alias_bomb_is_refused_by_every_reader(
    tmp_path: Path, make_args: Callable[[Path, Path], list[str]]
) -> None:
    bomb = _bomb_job(tmp_path)
    _write(tmp_path / "ok.yaml", _job("ok", {"nvidia.com/gpu": "1"}))
    code, err = placer(*make_args(tmp_path, bomb), stdin=bomb.read_bytes(), timeout=60)
    assert code != 0
    assert "alias" in err and "refused" in err, err


def test_a_recursive_alias_and_deep_nesting_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text(yaml.safe_dump(_job("loop")) + "x: &a [*a]\n")
    code, err = placer("plan", "-f", str(path), "--snapshot", str(DEMO))
    assert code != 0 and "recursive alias" in err
    deep = tmp_path / "deep.yaml"
    deep.write_text(yaml.safe_dump(_job("deep")) + "x: " + "[" * 900 + "]" * 900 + "\n")
    code, err = placer("plan", "-f", str(deep), "--snapshot", str(DEMO))
    assert code != 0 and "nested deeper" in err


# --------------------------------------------------------------------------------------------
# files that are not files


def test_non_utf8_stdin_is_an_error_line() -> None:
    code, err = placer("plan", "-f", "-", "--snapshot", str(DEMO), stdin=b"\xff\xfe kind: Job\n")
    assert code != 0
    assert err.startswith("error: <stdin>: not UTF-8") or "error: <stdin>: not UTF-8" in err


@pytest.mark.parametrize(
    "args",
    [
        ["plan", "-f", "/dev/zero", "--snapshot", str(DEMO)],
        ["plan", "-f", "{ok}", "--snapshot", "/dev/zero"],
        ["plan", "-f", "{ok}", "--snapshot", str(DEMO), "--policy", "/dev/zero"],
        ["snapshot", "--fleet", "/dev/zero", "-o", "{tmp}/s.yaml"],
        ["snapshot", "--kubeconfig", "/dev/zero", "-o", "{tmp}/s.yaml"],
        ["validate", "/dev/zero"],
    ],
    ids=["manifest", "snapshot", "policy", "fleet", "kubeconfig", "definition"],
)
def test_dev_zero_is_refused_quickly(tmp_path: Path, args: list[str]) -> None:
    ok = _write(tmp_path / "ok.yaml", _job("ok", {"nvidia.com/gpu": "1"}))
    filled = [a.format(ok=ok, tmp=tmp_path) for a in args]
    code, err = placer(*filled, timeout=60)
    assert code != 0 and "error: /dev/zero: " in err, err
    assert "MiB" in err or "not a regular file" in err, err


# --------------------------------------------------------------------------------------------
# numbers on the command line


@pytest.mark.parametrize(
    ("args", "flag"),
    [
        (["plan", "-f", "x.yaml", "--snapshot", str(DEMO), "--timeout", "1e300"], "--timeout"),
        (["plan", "-f", "x.yaml", "--snapshot", str(DEMO), "--time-limit", "nan"], "--time-limit"),
        (["plan", "-f", "x.yaml", "--snapshot", str(DEMO), "--seed", str(10**30)], "--seed"),
        (["controller", "--hub-context", "h", "--timeout", "nan"], "--timeout"),
        (["controller", "--hub-context", "h", "--max-batch", "0"], "--max-batch"),
        (["controller", "--hub-context", "h", "--time-limit", "0"], "--time-limit"),
        (["controller", "--hub-context", "h", "--metrics-port", "99999"], "--metrics-port"),
        (["controller", "--hub-context", "h", "--bind", "999.1.1.1"], "--bind"),
        (["controller", "--hub-context", "h", "--workers", "-1"], "--workers"),
        (["controller", "--hub-context", "h", "--batch-window", "inf"], "--batch-window"),
        (
            ["simulate", "--snapshot", str(DEMO), "--workloads", "w", "--interval", "-1"],
            "--interval",
        ),
        (["fleet", "up", str(DEMO), "--kubeconfig-out", "/no/such/folder/kc"], "--kubeconfig-out"),
        (["snapshot", "--kubeconfig", "x", "-o", "/"], "-o/--output"),
    ],
)
def test_bad_numbers_and_paths_are_usage_errors(args: list[str], flag: str) -> None:
    code, err = placer(*args, timeout=60)
    assert code == 2
    assert f"error: argument {flag}: " in err, err


def test_huge_workload_specs_are_refused() -> None:
    for spec, word in (
        ("synthetic:gangs?count=1000000000", "count"),
        ("synthetic:gangs?count=1e9", "count"),
        ("synthetic:gangs?load=1e300", "load"),
        ("synthetic:gangs?seed=" + "9" * 40 + "&count=5", "seed"),
    ):
        code, err = placer("simulate", "--snapshot", str(DEMO), "--workloads", spec, timeout=60)
        assert code != 0 and f"{word}: " in err, (spec, err)


def test_an_unwritable_kubeconfig_out_is_an_error_line(tmp_path: Path) -> None:
    code, err = placer("fleet", "up", str(DEMO), "--kubeconfig-out", "/proc/placer-kc", timeout=60)
    assert code != 0 and "/proc/placer-kc" in err and "cannot write" in err


# --------------------------------------------------------------------------------------------
# requests Kubernetes would refuse


@pytest.mark.parametrize(
    ("resources", "message"),
    [
        ({"limits": {"nvidia.com/gpu": "-8"}}, "'-8' must be greater than or equal to 0"),
        ({"limits": {"nvidia.com/gpu": "4.5"}}, "'4.5' must be an integer"),
        ({"requests": {"cpu": "-1"}}, "must be greater than or equal to 0"),
        ({"requests": {"memory": "1e400"}}, "out of range"),
        ({"requests": {"memory": "9" * 40 + "Ei"}}, "too large"),
        (
            {"requests": {"nvidia.com/gpu": "2"}, "limits": {"nvidia.com/gpu": "4"}},
            "must be equal to the nvidia.com/gpu limit",
        ),
        ({"requests": {"cpu": "4"}, "limits": {"cpu": "2"}}, "less than or equal to the cpu limit"),
    ],
)
def test_requests_kubernetes_refuses_are_refused(
    tmp_path: Path, resources: dict[str, Any], message: str
) -> None:
    job = _job("bad", resources.get("limits"), resources.get("requests"))
    path = _write(tmp_path / "bad.yaml", job)
    code, err = placer("plan", "-f", str(path), "--snapshot", str(DEMO))
    assert code != 0 and message in err, err
    assert "containers[0].resources." in err


@pytest.fixture
def demo_fleet(tmp_path: Path) -> Iterator[tuple[VirtualFleet, Path]]:
    virtual = VirtualFleet(load_snapshot(DEMO)).start()
    try:
        yield virtual, virtual.write_kubeconfig(tmp_path / "kc")
    finally:
        virtual.stop()


def test_a_negative_request_is_never_dispatched(
    tmp_path: Path, demo_fleet: tuple[VirtualFleet, Path]
) -> None:
    virtual, kubeconfig = demo_fleet
    path = _write(tmp_path / "neg.yaml", _job("negative", {"nvidia.com/gpu": "-8"}))
    code, err = placer("submit", "-f", str(path), "--kubeconfig", str(kubeconfig))
    assert code != 0 and "must be greater than or equal to 0" in err
    for name in virtual.urls:
        assert not virtual.server(name).store.list("jobs", "default")


@pytest.mark.parametrize(
    ("document", "what"),
    [
        ("- a\n- b\n", "a list"),
        ("hello\n", "a string"),
        ("apiVersion: v1\nkind: List\nitems: [3]\n", "a number"),
    ],
    ids=["list", "scalar", "list-item"],
)
def test_a_document_that_is_no_object_is_an_error_line(
    tmp_path: Path, demo_fleet: tuple[VirtualFleet, Path], document: str, what: str
) -> None:
    """A YAML document that is not a mapping is named with its file by every command that
    reads workloads (it was a Python traceback in plan, submit, simulate and delete)."""
    virtual, kubeconfig = demo_fleet
    good = _write(tmp_path / "good.yaml", _job("good", {"nvidia.com/gpu": "1"}))
    bad = tmp_path / "bad.yaml"
    bad.write_text(document)
    fleet = ["--kubeconfig", str(kubeconfig)]
    for args in (
        ["plan", "-f", str(good), "-f", str(bad), "--snapshot", str(DEMO)],
        ["describe", "-f", str(bad)],
        ["simulate", "--snapshot", str(DEMO), "--workloads", str(bad), "--no-progress"],
        ["submit", "-f", str(good), "-f", str(bad), *fleet],
        ["delete", "-f", str(bad), *fleet],
    ):
        code, err = placer(*args)
        assert code == 1, (args, err)
        assert f"error: {bad}: the document is {what}, not a Kubernetes object" in err, err
        assert "To fix: each YAML document must be one object" in err
    for name in virtual.urls:  # nothing of the batch was dispatched
        assert not virtual.server(name).store.list("jobs", "default")


def test_a_policy_naming_no_cluster_of_the_fleet_is_a_warning(
    tmp_path: Path, demo_fleet: tuple[VirtualFleet, Path]
) -> None:
    """A typo in preferredClusters or clusterCosts changed nothing, silently."""
    _, kubeconfig = demo_fleet
    policy = _write(
        tmp_path / "policy.yaml",
        {
            "apiVersion": "placer.dev/v1alpha1",
            "kind": "PlacementPolicy",
            "metadata": {"name": "typo"},
            "spec": {"preferredClusters": ["centrl", "east"], "clusterCosts": {"wset": 1}},
        },
    )
    job = _write(tmp_path / "job.yaml", _job("small", {"nvidia.com/gpu": "1"}))
    expected = [
        f"warning: {policy}: policy typo: spec.preferredClusters names centrl, not a cluster of "
        "the fleet (clusters: east, west, central); it changes nothing there",
        f"warning: {policy}: policy typo: spec.clusterCosts names wset, not a cluster of the "
        "fleet (clusters: east, west, central); it changes nothing there",
    ]
    for args in (
        ["plan", "-f", str(job), "--snapshot", str(DEMO)],
        ["simulate", "--snapshot", str(DEMO), "--workloads", str(job), "--no-progress"],
        ["submit", "-f", str(job), "--kubeconfig", str(kubeconfig), "--dry-run"],
    ):
        code, err = placer(*args, "--policy", str(policy))
        assert code == 0, (args, err)
        for line in expected:
            assert line in err, (args, err)


def test_the_same_object_twice_in_plan(tmp_path: Path) -> None:
    path = _write(tmp_path / "twice.yaml", _job("twice"), _job("twice"))
    code, err = placer("plan", "-f", str(path), "--snapshot", str(DEMO))
    assert code != 0 and "Job/default/twice is given twice" in err


# --------------------------------------------------------------------------------------------
# the controller's listening socket


@pytest.fixture
def hub_kubeconfig(
    start_apiserver: Callable[..., ApiServer], kubeconfig_for: Callable[..., Path]
) -> Path:
    hub = start_apiserver("hub")
    member = start_apiserver("m1")
    return kubeconfig_for({"hub": hub, "m1": member})


def _controller(hub_kubeconfig: Path, bind: str, port: int) -> tuple[int, str]:
    return placer(
        "controller",
        "--hub-context",
        "hub",
        "--kubeconfig",
        str(hub_kubeconfig),
        "--bind",
        bind,
        "--metrics-port",
        str(port),
        "--no-leader-election",
        timeout=60,
    )


def test_a_busy_metrics_port_is_an_error_line(hub_kubeconfig: Path) -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        code, err = _controller(hub_kubeconfig, "127.0.0.1", port)
    assert code == 1
    assert f"error: cannot serve /metrics on 127.0.0.1:{port}" in err, err


def test_an_address_of_another_host_is_an_error_line(hub_kubeconfig: Path) -> None:
    code, err = _controller(hub_kubeconfig, "192.0.2.1", 0)  # TEST-NET-1: never this host's
    assert code == 1 and "error: cannot serve /metrics on 192.0.2.1:0" in err, err


def test_any_free_port_is_named_in_the_first_log_line(hub_kubeconfig: Path) -> None:
    """``--metrics-port 0`` picks a free port; the controller says which, so a user (or a
    script) can reach /readyz and /metrics on it."""
    process = subprocess.Popen(
        [
            *(sys.executable, "-m", "placer", "controller", "--hub-context", "hub"),
            *("--kubeconfig", str(hub_kubeconfig), "--metrics-port", "0", "--no-leader-election"),
        ],
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        assert process.stderr is not None
        first = json.loads(process.stderr.readline())
        assert first["event"] == "serving", first
        url = first["msg"].rpartition(" on ")[2]
        assert url.startswith("http://127.0.0.1:") and not url.endswith(":0"), url
        wait_until(lambda: _status(url + "/readyz") == 200, timeout=60)
    finally:
        process.send_signal(signal.SIGINT)
        code = process.wait(timeout=30)
        assert process.stderr is not None
        process.stderr.close()
    assert code == 0


def _status(url: str) -> int:
    try:
        with urllib.request.urlopen(url, timeout=2) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return int(error.code)


# --------------------------------------------------------------------------------------------
# kubeconfigs


def test_a_password_in_the_server_url_is_never_shown(
    tmp_path: Path, start_apiserver: Callable[..., ApiServer], kubeconfig_for: Callable[..., Path]
) -> None:
    """``https://user:password@host`` in a kubeconfig: the unreachable cluster's reason named
    the URL with its password, in warnings, snapshots and submit's JSON."""
    path = kubeconfig_for(start_apiserver("east"))
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    data = yaml.safe_load(path.read_text())
    data["clusters"][0]["cluster"]["server"] = f"https://admin:pw-S3CRET@127.0.0.1:{port}"
    path.write_text(yaml.safe_dump(data))
    job = _write(tmp_path / "job.yaml", _job("small", {"nvidia.com/gpu": "1"}))
    snapshot = tmp_path / "snapshot.yaml"
    fleet = ["--kubeconfig", str(path), "--timeout", "5"]
    for args in (
        ["fleet", "show", *fleet],
        ["snapshot", *fleet, "-o", str(snapshot)],
        ["submit", "-f", str(job), *fleet, "-o", "json"],
    ):
        proc = subprocess.run(
            [sys.executable, "-m", "placer", *args], capture_output=True, text=True, cwd=REPO
        )
        assert proc.returncode == 3, (args, proc.stderr)
        assert f"unreachable (https://127.0.0.1:{port})" in proc.stderr, proc.stderr
        assert "S3CRET" not in proc.stdout + proc.stderr and "admin" not in proc.stderr
    assert not snapshot.exists()


def test_a_missing_exec_plugin_is_named(
    tmp_path: Path, start_apiserver: Callable[..., ApiServer], kubeconfig_for: Callable[..., Path]
) -> None:
    server = start_apiserver("gke")
    path = kubeconfig_for(server)
    data = yaml.safe_load(path.read_text())
    data["users"][0]["user"] = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": "acme-cloud-auth-plugin",
            "args": ["token"],
            "installHint": "Install acme-cloud-auth-plugin from https://acme.example/install",
        }
    }
    path.write_text(yaml.safe_dump(data))
    code, err = placer("snapshot", "--kubeconfig", str(path), "-o", str(tmp_path / "s.yaml"))
    assert code != 0
    assert "exec credential plugin 'acme-cloud-auth-plugin'" in err
    assert "context 'gke'" in err and "not found on PATH" in err
    assert "https://acme.example/install" in err
