"""Options shared by the commands that decide placements (``plan``, ``submit``): the manifests,
the policies and the solver's knobs, declared once so that they read and behave the same."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING

from placer.cli._types import SEED, seconds, seconds_or_zero
from placer.errors import UsageError
from placer.policy import PlacementPolicy, load_policies, unknown_cluster_names
from placer.queues import QueueSet, load_queues
from placer.solver import MODES, SOLVERS

if TYPE_CHECKING:
    from placer.solver.rebalance import RebalancePolicy
    from placer.solver.reservations import ReservationPolicy

__all__ = [
    "add_decision_options",
    "add_manifest_option",
    "add_policy_option",
    "add_queues_option",
    "add_rebalance_options",
    "add_reserve_preempt_options",
    "decision_policies",
    "decision_queues",
    "rebalance_policy",
]

_POLICY_HELP = "PlacementPolicy YAML (repeatable; the first policy selecting a workload applies)"


def add_policy_option(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, help: str = _POLICY_HELP
) -> None:
    """``--policy FILE``, repeatable (``args.policy``: the paths in order)."""
    parser.add_argument("--policy", action="append", default=[], metavar="FILE", help=help)


def add_queues_option(parser: argparse.ArgumentParser | argparse._ArgumentGroup) -> None:
    """``--queues FILE``: Queue and PriorityClass documents (``args.queues``; docs/queues.md)."""
    parser.add_argument(
        "--queues",
        metavar="FILE",
        help="Queue (placer.dev/v1alpha1) and PriorityClass YAML: quotas, limits, over-quota "
        "weights and priorities the decision honours (docs/queues.md)",
    )


def decision_queues(args: argparse.Namespace) -> QueueSet | None:
    """The queues of ``--queues FILE``, or ``None`` without it."""
    path = getattr(args, "queues", None)
    return load_queues(path) if path else None


def add_rebalance_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, needs: str
) -> None:
    """``--rebalance TOLERANCE`` and ``--rebalance-max-age SECONDS`` (``simulate --mode
    stream`` and ``controller``: the same names and meaning); ``needs``: what turns the
    command's preemption on, in words."""
    parser.add_argument(
        "--rebalance",
        type=float,
        default=None,
        metavar="TOLERANCE",
        help=f"{needs}: fair-share rebalancing — evict over-share queues' over-quota work for "
        "under-share queues' waiting work while the over-quota split is off the weights by "
        "more than TOLERANCE of the over-quota GPUs (0.05: 5 points; docs/queues.md); "
        "default: off",
    )
    parser.add_argument(
        "--rebalance-max-age",
        type=seconds_or_zero,
        default=None,
        metavar="SECONDS",
        help="with --rebalance: evict only work that has run at most this long",
    )


def rebalance_policy(
    args: argparse.Namespace, preemption: bool, needs: str
) -> RebalancePolicy | None:
    """``--rebalance`` and ``--rebalance-max-age`` as a policy (``None``: no rebalancing);
    ``preemption``: whether the command may evict (else ``--rebalance`` is refused, saying
    it goes ``needs``)."""
    from placer.solver.rebalance import RebalancePolicy

    if args.rebalance is None:
        if args.rebalance_max_age is not None:
            raise UsageError("--rebalance-max-age goes with --rebalance TOLERANCE")
        return None
    if not preemption:
        raise UsageError(f"--rebalance goes {needs}")
    try:
        return RebalancePolicy(tolerance=args.rebalance, max_age_s=args.rebalance_max_age)
    except ValueError as error:
        raise UsageError(
            f"--rebalance {args.rebalance:g} / --rebalance-max-age: {error} "
            "(TOLERANCE is a fraction of the over-quota GPUs, from 0 to below 1, e.g. 0.05)"
        ) from error


def add_reserve_preempt_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup, rules: str = ""
) -> None:
    """``--reserve-preempt-after`` and ``--reserve-preempt-slack`` (``simulate --mode stream``
    and ``controller``: the same names and meaning); ``rules``: what else the command's
    evictions keep to, in words."""
    parser.add_argument(
        "--reserve-preempt-after",
        type=seconds_or_zero,
        default=None,
        metavar="SECONDS",
        help="with --reserve-after: a reserved gang waiting this long (since it arrived) "
        "whose start is still more than --reserve-preempt-slack ahead starts at once, "
        "evicting whole gangs of lower priority, or of its priority and smaller; never "
        f'placer.dev/preemptible: "false"{rules} (docs/reservations.md); default: never evicts',
    )
    parser.add_argument(
        "--reserve-preempt-slack",
        type=seconds_or_zero,
        default=None,
        metavar="SECONDS",
        help="with --reserve-preempt-after: a start at most this far ahead is waited for "
        "(default 3600)",
    )


def add_reserve_horizon_options(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
) -> None:
    """``--reserve-horizon`` and ``--reserve-horizon-cluster`` (``simulate --mode stream`` and
    ``controller``: the same names and meaning)."""
    parser.add_argument(
        "--reserve-horizon",
        type=seconds,
        default=None,
        metavar="SECONDS",
        help="with --reserve-after: a drain horizon: one cluster (--reserve-horizon-cluster, "
        "else the one with the most GPUs) takes only work expected to run at most this long, "
        "so it empties for a big gang within about this long without evictions "
        "(docs/reservations.md); default: none",
    )
    parser.add_argument(
        "--reserve-horizon-cluster",
        default=None,
        metavar="NAME",
        help="with --reserve-horizon: the cluster it keeps (default: the one with the most GPUs)",
    )


def shared_reservation_policy(
    args: argparse.Namespace,
    *,
    min_gpus: float,
    max_reservations: int,
    grace_s: float | None = None,
) -> ReservationPolicy:
    """The ``ReservationPolicy`` of the ``--reserve-*`` flags ``simulate`` and ``controller``
    share (``--reserve-after`` given), with the command's own ``grace_s`` (``None``: the
    policy's default); the flags that go with another are checked."""
    if args.reserve_preempt_slack is not None and args.reserve_preempt_after is None:
        raise UsageError(
            "--reserve-preempt-slack goes with --reserve-preempt-after",
            hint="--reserve-preempt-after SECONDS lets a reserved gang that waited that long "
            "evict (docs/reservations.md)",
        )
    if args.reserve_horizon_cluster is not None and args.reserve_horizon is None:
        raise UsageError("--reserve-horizon-cluster goes with --reserve-horizon")
    from placer.solver.reservations import ReservationPolicy

    defaults = ReservationPolicy()
    slack = args.reserve_preempt_slack
    try:
        return ReservationPolicy(
            after_s=args.reserve_after,
            priority=args.reserve_priority,
            min_gpus=min_gpus,
            max_reservations=max_reservations,
            grace_s=defaults.grace_s if grace_s is None else grace_s,
            preempt_after_s=args.reserve_preempt_after,
            preempt_slack_s=defaults.preempt_slack_s if slack is None else slack,
            horizon_s=args.reserve_horizon,
            horizon_cluster=args.reserve_horizon_cluster,
        )
    except ValueError as err:
        raise UsageError(str(err)) from None


def add_manifest_option(parser: argparse.ArgumentParser) -> None:
    """``-f/--filename``, repeatable and required: files, directories or ``-`` (stdin)."""
    parser.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="FILE",
        help="workload manifests: YAML/JSON files, directories (read recursively) or - "
        "(stdin); repeatable",
    )


def add_decision_options(parser: argparse.ArgumentParser, *, with_mode: bool = False) -> None:
    """``--policy``, ``--queues``, ``--solver``, (``--mode``), ``--time-limit`` and ``--seed``."""
    add_policy_option(parser)
    add_queues_option(parser)
    parser.add_argument("--solver", choices=SOLVERS, default="cpsat", help="default cpsat")
    if with_mode:
        parser.add_argument("--mode", choices=MODES, default="batch", help="default batch")
    parser.add_argument(
        "--time-limit",
        type=seconds,
        default=1.0,
        metavar="SECONDS",
        help="seconds for the decision, CPU time of this process (default 1)",
    )
    parser.add_argument("--seed", type=SEED, default=0, metavar="N", help="solver seed (default 0)")


def decision_policies(args: argparse.Namespace) -> list[PlacementPolicy]:
    """Check the solver options of ``args`` and load its ``--policy`` files, in order."""
    if not args.time_limit > 0:
        raise UsageError(f"--time-limit must be positive, got {args.time_limit:g}")
    policies: list[PlacementPolicy] = []
    for path in args.policy:
        policies += load_policies(path)
    return policies


def warn_unknown_clusters(policies: Sequence[PlacementPolicy], clusters: Sequence[str]) -> None:
    """``warning:`` lines for policies naming clusters the fleet does not have (typos)."""
    for warning in unknown_cluster_names(policies, clusters):
        print(f"warning: {warning}", file=sys.stderr)
