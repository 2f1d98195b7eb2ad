"""Fleet options shared by every command that reads live clusters.

``--kubeconfig PATH`` and ``--context NAME`` (both repeatable; ``KUBECONFIG`` honoured when no
``--kubeconfig`` is given), or ``--fleet FILE``; ``--timeout SECONDS`` per cluster. Commands
call :func:`add_fleet_options` on their parser and :func:`fleet_config_from_args` to get the
:class:`placer.fleet.FleetConfig`.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from placer.cli._types import seconds
from placer.errors import FleetUnreachableError, UsageError
from placer.fleet import FleetConfig, fleet_from_kubeconfigs, load_fleet_file
from placer.fleet.config import DEFAULT_TIMEOUT
from placer.model import Fleet

if TYPE_CHECKING:
    from placer.fleet.clients import MemberClients

__all__ = [
    "add_fleet_options",
    "fleet_config_from_args",
    "has_fleet_options",
    "report_unreachable",
    "require_reachable",
    "unusable_warnings",
]


def add_fleet_options(parser: argparse.ArgumentParser) -> None:
    """Add ``--kubeconfig``, ``--context``, ``--fleet`` and ``--timeout``."""
    group = parser.add_argument_group("fleet options")
    group.add_argument(
        "--kubeconfig",
        action="append",
        default=[],
        metavar="PATH",
        help="kubeconfig file (repeatable; default: $KUBECONFIG or ~/.kube/config)",
    )
    group.add_argument(
        "--context",
        action="append",
        default=[],
        metavar="NAME",
        help="member cluster context (repeatable; default: every context)",
    )
    group.add_argument(
        "--fleet",
        metavar="FILE",
        help="fleet file: clusters with kubeconfig, context, labels, taints, timeout",
    )
    group.add_argument(
        "--timeout",
        type=seconds,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help=f"per-cluster gathering timeout (default {DEFAULT_TIMEOUT:g})",
    )


def has_fleet_options(args: argparse.Namespace) -> bool:
    """Whether any fleet option was given on the command line."""
    return bool(args.kubeconfig or args.context or args.fleet)


def fleet_config_from_args(args: argparse.Namespace) -> FleetConfig:
    """The member clusters the options describe."""
    if args.timeout <= 0:
        raise UsageError("--timeout must be a positive number of seconds")
    if args.fleet:
        if args.kubeconfig or args.context:
            raise UsageError(
                "--fleet cannot be combined with --kubeconfig/--context",
                hint="put kubeconfig and context of each cluster in the fleet file",
            )
        return load_fleet_file(args.fleet, timeout=args.timeout)
    return fleet_from_kubeconfigs(args.kubeconfig, args.context, timeout=args.timeout)


def report_unreachable(fleet: Fleet) -> None:
    """One ``warning:`` line on stderr per cluster that could not be gathered."""
    for cluster in fleet.clusters:
        if not cluster.reachable:
            print(f"warning: cluster {cluster.name}: {cluster.reason}", file=sys.stderr)


def unusable_warnings(config: FleetConfig, clients: MemberClients) -> list[str]:
    """One warning per member cluster left without a client, with the reason (the kubeconfig
    entry's problem, e.g. a ``certificate-authority-data`` that is not base64)."""
    return [
        f"cluster {s.name}: no usable kubeconfig entry: "
        f"{clients.problems.get(s.name) or s.problem or 'no kubeconfig'}"
        for s in config.clusters
        if s.name not in clients
    ]


def require_reachable(names: Sequence[str], reached: Sequence[str], what: str) -> None:
    """Raise :class:`FleetUnreachableError` (exit 3) when none of the clusters ``names`` was
    reached; ``what`` says what could therefore not be done."""
    if reached:
        return
    listed = ", ".join(names) if names else "no clusters configured"
    raise FleetUnreachableError(
        f"no cluster of the fleet could be reached ({listed}): {what}",
        hint="check the kubeconfig contexts, the network and the clusters' API servers (each "
        "cluster's reason is given above or, for a snapshot, in the file)",
    )
