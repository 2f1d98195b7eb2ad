"""``python -m placer.testing serve|bench``: run a loopback API server, or measure one.

``serve`` runs until interrupted, for people (poke at it with kubectl: ``--kubeconfig-out``) and
for :class:`ApiServerProcess` (``--ready-json --exit-on-stdin-eof``); the token comes from
``$PLACER_TESTING_TOKEN`` when set. ``bench`` prints a JSON report of request latency and
paginated list times through the official client (see ``placer.testing._bench``).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import signal
import sys
import threading
from collections.abc import Iterable
from typing import Any

from placer.testing._bench import run_bench
from placer.testing._kubeconfig import write_kubeconfig
from placer.testing._process import TOKEN_ENV, load_objects
from placer.testing._server import ApiServer
from placer.testing._synthetic import synthetic_cluster


def main(argv: list[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    parser = argparse.ArgumentParser(
        prog="python -m placer.testing", description=__doc__.splitlines()[0]
    )
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run a loopback API server")
    serve.add_argument("--port", type=int, default=0, help="port (default: any free one)")
    serve.add_argument("--name", default="loopback", help="context name in --kubeconfig-out")
    serve.add_argument(
        "--seed",
        action="append",
        default=[],
        metavar="FILE",
        help="load objects from FILE (JSON, JSON Lines, YAML); repeatable",
    )
    serve.add_argument("--nodes", type=int, default=0, help="synthetic nodes to load")
    serve.add_argument("--pods", type=int, default=0, help="synthetic pods to load")
    serve.add_argument(
        "--synthetic-seed", type=int, default=0, help="random seed of synthetic content"
    )
    serve.add_argument("--latency", type=float, default=0.0, help="seconds added to every request")
    serve.add_argument("--kubeconfig-out", metavar="PATH", help="write a kubeconfig for the server")
    serve.add_argument(
        "--ready-json", action="store_true", help="print url/port/ca_pem as one JSON line"
    )
    serve.add_argument("--exit-on-stdin-eof", action="store_true", help="stop when stdin closes")
    bench = sub.add_parser("bench", help="measure request latency and paginated lists")
    bench.add_argument("--nodes", type=int, default=500, help="synthetic nodes (default 500)")
    bench.add_argument("--pods", type=int, default=5000, help="synthetic pods (default 5000)")
    bench.add_argument("--page", type=int, default=500, help="list page size (default 500)")
    bench.add_argument("--requests", type=int, default=500, help="GETs timed (default 500)")
    bench.add_argument("--repeat", type=int, default=5, help="full lists timed (default 5)")
    bench.add_argument("--process", action="store_true", help="run the server in a child process")
    args = parser.parse_args(argv)
    if args.command == "bench":
        report = run_bench(
            nodes=args.nodes,
            pods=args.pods,
            page=args.page,
            requests=args.requests,
            repeat=args.repeat,
            process=args.process,
        )
        print(json.dumps(report, indent=2))
        return 0

    server = ApiServer(name=args.name, token=os.environ.get(TOKEN_ENV) or None, port=args.port)
    sources: list[Iterable[dict[str, Any]]] = []
    try:
        sources = [load_objects(path) for path in args.seed]
        count = server.store.seed(itertools.chain(*sources))
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if args.nodes or args.pods:
        count += server.store.seed(
            synthetic_cluster(args.nodes, args.pods, seed=args.synthetic_seed)
        )
    server.faults.latency = args.latency
    server.start()
    done = threading.Event()
    try:
        if args.kubeconfig_out:
            write_kubeconfig(args.kubeconfig_out, {args.name: server})
        if args.ready_json:
            ready = {
                "url": server.url,
                "port": server.port,
                "ca_pem": server.ca_pem.decode(),
                "objects": count,
            }
            sys.stdout.write(json.dumps(ready) + "\n")
            sys.stdout.flush()
        else:
            print(
                f"serving {count} objects at {server.url}"
                + (f"; kubeconfig: {args.kubeconfig_out}" if args.kubeconfig_out else "")
            )
        for sig in (signal.SIGINT, signal.SIGTERM):
            signal.signal(sig, lambda *_: done.set())
        if args.exit_on_stdin_eof:

            def wait_for_eof() -> None:
                sys.stdin.buffer.read()
                done.set()

            threading.Thread(target=wait_for_eof, daemon=True).start()
        done.wait()
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
