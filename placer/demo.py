"""``make demo``: the whole story on the embedded virtual fleet, no cluster needed.

1. start the virtual fleet of ``clusters/demo.yaml`` in this process (three loopback API
   servers: east, west, central, with realism: applied workloads get pods, nodes, a status);
2. ``placer submit -f examples/jobset-demo.yaml --wait``: the seed JobSet (a leader and two
   workers, 4 GPUs each) — the decision, and why east and west were refused;
3. ``placer get -A``: the workloads across the fleet;
4. ``placer describe jobset/demo``: the tree with its pods on central's nodes and the
   placement record;
5. stop the fleet (the temporary kubeconfig is removed).

Each step prints the command it runs, as a user would type it against the kubeconfig.
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

from placer.cli import main as cli_main
from placer.snapshot import load_snapshot
from placer.virtual.fleet import VirtualFleet
from placer.virtual.realism import realism_setup

ROOT = Path(__file__).resolve().parent.parent


def _run(args: list[str], shown: list[str]) -> int:
    print(f"\n$ placer {' '.join(shown)}", flush=True)
    code = cli_main(args)
    sys.stdout.flush()
    sys.stderr.flush()
    return code


def main() -> int:
    started = time.monotonic()
    snapshot = ROOT / "clusters" / "demo.yaml"
    example = ROOT / "examples" / "jobset-demo.yaml"
    print(f"Starting the virtual fleet of {snapshot.relative_to(ROOT)} ...", flush=True)
    with tempfile.TemporaryDirectory(prefix="placer-demo-") as tmp:
        with VirtualFleet(load_snapshot(snapshot), setup=realism_setup()) as fleet:
            kubeconfig = fleet.write_kubeconfig(Path(tmp) / "kubeconfig")
            for name, url in fleet.urls.items():
                print(f"  cluster {name}: {url}", flush=True)
            fleet_args = ["--kubeconfig", str(kubeconfig)]
            steps = [
                ["submit", "-f", str(example.relative_to(ROOT)), "--wait=30s"],
                ["get", "-A"],
                ["describe", "jobset/demo"],
            ]
            for step in steps:
                args = [*step, *fleet_args]
                if step[0] == "submit":
                    args[2] = str(example)
                code = _run(args, [*step, "--kubeconfig", "KUBECONFIG"])
                if code != 0:
                    print(f"demo: step `placer {step[0]}` failed (exit {code})", file=sys.stderr)
                    return code
        print(f"\nFleet stopped. Demo done in {time.monotonic() - started:.1f} s.", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
