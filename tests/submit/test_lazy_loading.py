"""A first ``placer submit`` loads only what its common path runs (issue 18, CLI latency): not
the updater (a workload already placed and changed), the fair-share decision (``--queues``),
the verifier (another decision wrote meanwhile), the watcher (the controller's informers) or
the describe view; the submit itself is unchanged (it dispatches)."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable

from tests.submit.conftest import ROOT, SEED, Fleet

#: modules a first submit of one workload on the demo fleet does not need.
NOT_ON_SUBMIT_PATH = (
    "placer.dispatch.update",
    "placer.dispatch.removal",
    "placer.dispatch.changes",
    "placer.solver.fairshare",
    "placer.solver.verifier",
    "placer.kube.watching",
    "placer.definitions.view",
    "pandas",
)


def test_a_first_submit_loads_no_updater_fair_share_verifier_or_watcher(
    demo_fleet: Callable[..., Fleet],
) -> None:
    fleet = demo_fleet()
    code = (
        "import contextlib, io, json, sys, placer.cli\n"
        "out = io.StringIO()\n"
        "with contextlib.redirect_stdout(out):\n"
        f"    code = placer.cli.main(['submit', '-f', {str(SEED)!r}, '--kubeconfig',"
        f" {str(fleet.kubeconfig)!r}, '-o', 'json'])\n"
        f"print(json.dumps([code, json.loads(out.getvalue()),"
        f" sorted(m for m in {NOT_ON_SUBMIT_PATH!r} if m in sys.modules)]))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    exit_code, report, loaded = json.loads(done.stdout.strip().splitlines()[-1])
    assert exit_code == 0, done.stderr
    assert [p["state"] for p in report["placements"]] == ["dispatched"]
    assert len(fleet.jobsets("central")) == 1  # placed where the demo's answer is
    assert loaded == []
