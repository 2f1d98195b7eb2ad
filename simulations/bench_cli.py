"""Benchmark: how long a ``placer`` command takes from the shell, start-up included.

Issue 18, target 4 (median of 5 runs, warm bytecode cache): ``placer submit`` of one workload
on the demo fleet ≤ 0.5 s wall, ``placer get -A`` ≤ 0.35 s, ``placer plan --snapshot`` ≤ 0.4 s.

Commands, each run as its own process through the ``placer`` console script:

* ``version``: ``placer --version`` (the interpreter and the CLI's start-up; no target);
* ``plan``: ``placer plan -f examples/jobset-demo.yaml --snapshot clusters/demo.yaml``;
* ``get``: ``placer get -A`` on the demo fleet served by ``placer fleet up`` (in its own
  process), the seed JobSet placed there beforehand, so one workload is listed;
* ``submit``: ``placer submit -f examples/jobset-demo.yaml`` on a demo fleet started afresh
  for every run (so that it places, as a first submit does); its exit code must be 0.

States:

* ``warm``: placer's bytecode written and the compiled catalog in place (one untimed run of
  each command first): every run after the first;
* ``cold``: neither — placer's ``__pycache__`` directories removed, ``PYTHONDONTWRITEBYTECODE``
  set and the compiled catalog's directory emptied before every run: the first run after
  installing or changing placer (third-party packages keep the bytecode pip wrote).

Side by side (``--baseline DIR``, e.g. a ``git worktree`` of the commit before a change): every
run is made alternately with the code of ``DIR`` (``PYTHONPATH=DIR``) and with this checkout's,
so both see the same machine load, and the medians are compared. The seconds are wall seconds
of the whole process; the CPU seconds (user + system of the process) are reported next to them,
as this shared machine's load stretches wall times. One more run per command and code with
``python -X importtime`` gives the seconds spent importing modules.

Run: ``python -m simulations.bench_cli --baseline DIR`` (a few minutes). Results in
``simulations/results/bench_cli.{json,md}``.
"""

from __future__ import annotations

import argparse
import os
import re
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path
from typing import Any

from simulations.benchmarking import commit_of, heading, measure, table, virtual_fleet

ROOT = Path(__file__).resolve().parents[1]
DEMO = ROOT / "clusters" / "demo.yaml"
WORKLOAD = ROOT / "examples" / "jobset-demo.yaml"
#: wall seconds, median of the warm runs (issue 18)
TARGETS = {"submit": 0.5, "get": 0.35, "plan": 0.4}
COMMANDS = ("version", "plan", "get", "submit")
STATES = ("warm", "cold")


class Code:
    """One version of placer's code: the checkout at ``root``, named ``name``."""

    def __init__(self, name: str, root: Path, workdir: Path) -> None:
        self.name = name
        self.root = root
        self.cache = workdir / f"catalog-cache-{name}"

    def environ(self, state: str) -> dict[str, str]:
        env = dict(os.environ)
        env["PYTHONPATH"] = str(self.root)
        env["PLACER_CACHE_DIR"] = str(self.cache)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        if state == "cold":
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        return env

    def make_cold(self) -> None:
        """No bytecode of placer's modules, no compiled catalog."""
        for pycache in (self.root / "placer").rglob("__pycache__"):
            shutil.rmtree(pycache, ignore_errors=True)
        shutil.rmtree(self.cache, ignore_errors=True)

    def commit(self) -> str:
        return commit_of(self.root)


def placer_script() -> str:
    """The ``placer`` console script of this interpreter's environment."""
    script = Path(sys.executable).parent / "placer"
    if not script.exists():
        raise SystemExit(f"{script} not found: install placer (make install)")
    return str(script)


def timed(argv: Sequence[str], env: dict[str, str], cwd: Path) -> tuple[float, float, str]:
    """Wall and CPU seconds of one process, and its output (it must exit 0)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} exited {done.returncode}:\n{done.stderr}")
    return wall, cpu, done.stdout + done.stderr


def import_seconds(stderr: str) -> float:
    """Seconds of the top-level imports ``python -X importtime`` reported."""
    total = 0
    for line in stderr.splitlines():
        found = re.match(r"import time:\s+\d+ \|\s+(\d+) \| (\S.*)$", line)
        if found:  # top level: the module name is not indented
            total += int(found.group(1))
    return total / 1e6


class Bench:
    """The runs of every command with every code, and the fleets they need."""

    def __init__(self, codes: Sequence[Code], workdir: Path, stack: ExitStack) -> None:
        self.codes = codes
        self.workdir = workdir
        self.stack = stack
        self.script = placer_script()
        self._get_fleet: Path | None = None

    def argv(self, command: str, kubeconfig: Path | None) -> list[str]:
        kube = ["--kubeconfig", str(kubeconfig)] if kubeconfig is not None else []
        return {
            "version": [self.script, "--version"],
            "plan": [self.script, "plan", "-f", str(WORKLOAD), "--snapshot", str(DEMO)],
            "get": [self.script, "get", "-A", *kube],
            "submit": [self.script, "submit", "-f", str(WORKLOAD), *kube],
        }[command]

    def get_fleet(self) -> Path:
        """One demo fleet with the seed JobSet placed, for every ``get`` run."""
        if self._get_fleet is None:
            kubeconfig = self.stack.enter_context(virtual_fleet(DEMO, self.workdir))
            # writing no bytecode: the cold runs must find none
            timed(self.argv("submit", kubeconfig), self.codes[-1].environ("cold"), ROOT)
            self._get_fleet = kubeconfig
        return self._get_fleet

    def run(self, command: str, code: Code, state: str, python_options: Sequence[str] = ()) -> Any:
        """One timed run: (wall, cpu, output)."""
        env = code.environ(state)
        if state == "cold":
            shutil.rmtree(code.cache, ignore_errors=True)
        if command == "submit":  # a fresh fleet: the workload places
            with virtual_fleet(DEMO, self.workdir) as kubeconfig:
                argv = self.argv(command, kubeconfig)
                return timed(self.python(argv, python_options), env, ROOT)
        kubeconfig = self.get_fleet() if command == "get" else None
        return timed(self.python(self.argv(command, kubeconfig), python_options), env, ROOT)

    def python(self, argv: list[str], options: Sequence[str]) -> list[str]:
        if not options:
            return argv
        return [
            sys.executable,
            *options,
            "-c",
            "import sys; from placer.cli import main; sys.argv[0] = 'placer'; sys.exit(main())",
            *argv[1:],
        ]


def run_all(
    codes: Sequence[Code], commands: Sequence[str], repeat: int, log: Callable[[str], None]
) -> dict[str, Any]:
    results: dict[str, Any] = {
        state: {c: {code.name: {"wall_s": [], "cpu_s": []} for code in codes} for c in commands}
        for state in STATES
    }
    imports: dict[str, dict[str, float]] = {c: {} for c in commands}
    with tempfile.TemporaryDirectory(prefix="bench-cli-") as tmp, ExitStack() as stack:
        workdir = Path(tmp)
        for code in codes:
            code.cache = workdir / code.cache.name
        # the fleets' processes (this checkout's code) write no bytecode the cold runs could use
        os.environ["PYTHONDONTWRITEBYTECODE"] = "1"
        bench = Bench(codes, workdir, stack)
        if "get" in commands:
            bench.get_fleet()
        for state in STATES[::-1]:  # cold first: the warm state then builds on nothing stale
            if state == "cold":
                for code in codes:
                    code.make_cold()
            else:
                for command in commands:  # the untimed first run: bytecode, compiled catalog
                    for code in codes:
                        bench.run(command, code, "warm")
            for i in range(repeat):
                for command in commands:
                    for code in codes:
                        wall, cpu, _ = bench.run(command, code, state)
                        row = results[state][command][code.name]
                        row["wall_s"].append(round(wall, 4))
                        row["cpu_s"].append(round(cpu, 4))
                        log(f"{state} {i + 1}/{repeat} {command:8} {code.name:9} {wall:.3f} s")
        for command in commands:
            for code in codes:
                _, _, output = bench.run(command, code, "warm", ("-X", "importtime"))
                imports[command][code.name] = round(import_seconds(output), 3)
    for state in STATES:
        for command in commands:
            for row in results[state][command].values():
                row["median_wall_s"] = round(statistics.median(row["wall_s"]), 3)
                row["median_cpu_s"] = round(statistics.median(row["cpu_s"]), 3)
    return {"runs": results, "import_s": imports}


def summarize(runs: dict[str, Any], codes: Sequence[Code]) -> dict[str, Any]:
    """Per command: the warm medians, the target and whether it is met, the ratio to the
    baseline."""
    current = codes[-1].name
    rows: dict[str, Any] = {}
    for command, by_code in runs["runs"]["warm"].items():
        row: dict[str, Any] = {
            "target_s": TARGETS.get(command),
            "warm_median_s": by_code[current]["median_wall_s"],
            "warm_median_cpu_s": by_code[current]["median_cpu_s"],
            "cold_median_s": runs["runs"]["cold"][command][current]["median_wall_s"],
            "import_s": runs["import_s"][command].get(current),
        }
        if command in TARGETS:
            row["met"] = row["warm_median_s"] <= TARGETS[command]
        if len(codes) > 1:
            base = codes[0].name
            row["baseline_warm_median_s"] = by_code[base]["median_wall_s"]
            row["baseline_cold_median_s"] = runs["runs"]["cold"][command][base]["median_wall_s"]
            row["baseline_import_s"] = runs["import_s"][command].get(base)
            row["ratio_warm"] = round(row["warm_median_s"] / row["baseline_warm_median_s"], 3)
        rows[command] = row
    return rows


def markdown(result: dict[str, Any], meta: dict[str, Any]) -> str:
    base = result.get("baseline")
    lines = heading(
        "bench_cli: a `placer` command from the shell",
        meta,
        f"Median of {result['repeat']} runs per command and state"
        + (f", alternating with the code of {base}" if base else "")
        + f"; load average {meta['load_average_at_start']} at the start, "
        f"{result['load_average_at_end']} at the end.",
    )
    header = ["command", "target", "warm (median)", "met", "CPU", "imports", "cold"]
    if base:
        header += [f"warm at {base}", f"cold at {base}", f"imports at {base}", "warm ratio"]
    rows = []
    for command, row in result["summary"].items():
        target = row["target_s"]
        cells: list[object] = [
            f"`{command}`",
            f"≤ {target} s" if target else "–",
            row["warm_median_s"],
            ("yes" if row["met"] else "**no**") if "met" in row else "–",
            row["warm_median_cpu_s"],
            row["import_s"],
            row["cold_median_s"],
        ]
        if base:
            cells += [
                row["baseline_warm_median_s"],
                row["baseline_cold_median_s"],
                row["baseline_import_s"],
                f"{row['ratio_warm']}x",
            ]
        rows.append(cells)
    lines += [table(header, rows), ""]
    lines += [
        "Seconds of wall time of the whole process (CPU: user + system of the process; "
        "imports: the top-level imports `python -X importtime` reports, one more run). "
        "Warm: bytecode and compiled catalog in place; cold: neither (see the script's "
        "docstring). Every run:",
        "",
    ]
    detail = []
    for state, commands in result["runs"]["runs"].items():
        for command, by_code in commands.items():
            for code, row in by_code.items():
                walls = ", ".join(f"{w:.3f}" for w in row["wall_s"])
                detail.append([state, f"`{command}`", code, walls, row["median_wall_s"]])
    lines += [table(["state", "command", "code", "wall seconds per run", "median"], detail), ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="timed runs per command and state")
    parser.add_argument(
        "--baseline", type=Path, help="also run the code of this checkout, alternately"
    )
    parser.add_argument(
        "--commands", default=",".join(COMMANDS), help=f"comma-separated, of {COMMANDS}"
    )
    parser.add_argument("--no-write", action="store_true", help="print, do not write results")
    args = parser.parse_args(argv)
    commands = [c for c in args.commands.split(",") if c]
    unknown = set(commands) - set(COMMANDS)
    if unknown:
        parser.error(f"unknown commands {sorted(unknown)}")
    codes = [Code("current", ROOT, Path())]
    if args.baseline is not None:
        codes.insert(0, Code("baseline", args.baseline.resolve(), Path()))

    def run() -> dict[str, Any]:
        runs = run_all(codes, commands, args.repeat, lambda text: print(text, flush=True))
        return {
            "repeat": args.repeat,
            "baseline": codes[0].commit() if len(codes) > 1 else None,
            "targets_s": TARGETS,
            "summary": summarize(runs, codes),
            "runs": runs,
            "load_average_at_end": [round(x, 2) for x in os.getloadavg()],
        }

    if args.no_write:
        result = run()
        for command, row in result["summary"].items():
            print(command, row)
        return 0
    result, paths = measure("bench_cli", run, markdown)
    for command, row in result["summary"].items():
        print(command, row)
    print("wrote", ", ".join(str(p) for p in paths))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
