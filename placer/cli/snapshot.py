"""``placer snapshot``: gather the fleet and write a capacity snapshot (YAML).

The snapshot records every member cluster — unreachable ones with their reason — and never
holds credentials. When no cluster at all could be gathered nothing is written.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from placer.cli._fleet import (
    add_fleet_options,
    fleet_config_from_args,
    report_unreachable,
    require_reachable,
)
from placer.cli._types import output_file
from placer.fleet import gather_fleet
from placer.snapshot import dump_snapshot, dumps_snapshot

__all__ = ["register", "run"]


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "snapshot",
        help="gather free capacity from the fleet and write a snapshot",
        description=(
            "Gather nodes and pods of every member cluster concurrently and write a "
            "FleetSnapshot YAML (input of `placer simulate` and `placer fleet show|up`)."
        ),
    )
    add_fleet_options(parser)
    parser.add_argument(
        "-o",
        "--output",
        type=output_file,
        metavar="FILE",
        required=True,
        help="snapshot file to write (- = stdout)",
    )
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    config = fleet_config_from_args(args)
    fleet = gather_fleet(config)
    report_unreachable(fleet)
    reached = [c.name for c in fleet.clusters if c.reachable]
    require_reachable(config.names, reached, f"nothing written ({config.source})")
    reachable = len(reached)
    if args.output == "-":
        sys.stdout.write(dumps_snapshot(fleet))
    else:
        dump_snapshot(fleet, Path(args.output))
        nodes = sum(len(c.nodes) for c in fleet.clusters)
        print(
            f"wrote {args.output}: {len(fleet.clusters)} clusters ({reachable} reachable), "
            f"{nodes} nodes, captured {fleet.captured_at}",
            file=sys.stderr,
        )
    return 0
