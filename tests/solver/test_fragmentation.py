"""FGD's fragmentation measure: the mix keeps node constraints, and a shape that may not run
on a node counts all of that node's free GPU as fragmentation ("no access"); the fill term
counts the GPUs that repeated pods of a shape cannot take."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from placer.solver.fragmentation import (
    FILL,
    FILL_SHARED,
    fill_of,
    fill_weight,
    frag_added,
    frag_of,
    frag_score,
    mix_of,
)
from placer.solver.state import ClusterState, PodShape, resource_names


def _state(kit: Any, *nodes: Any) -> ClusterState:
    the_cluster = kit.cluster("c", *nodes)
    return ClusterState(the_cluster, resource_names([]))


def test_mix_merges_shapes_by_requests_and_node_constraints(kit: Any) -> None:
    names = resource_names([])
    free = PodShape.of(kit.pod(gpus=1), names)
    free_again = PodShape.of(kit.pod(gpus=1), names)
    t4 = PodShape.of(kit.pod(gpus=1, selector={"gpu": "T4"}), names)
    cpu_only = PodShape.of(kit.pod(cpu=2), names)
    mix = mix_of([(free, 1.0), (t4, 1.0), (free_again, 2.0), (cpu_only, 5.0)])
    assert mix is not None
    # same requests, different selector: two shapes in two classes; CPU-only pods left out
    assert mix.weight.tolist() == [0.75, 0.25]
    assert [c.demand.node_selector for c in mix.classes] == [{}, {"gpu": "T4"}]
    assert mix.klass is not None and mix.klass.tolist() == [0, 1]
    assert mix_of([(cpu_only, 1.0)]) is None


def test_coverage_keeps_the_most_frequent_shapes(kit: Any) -> None:
    names = resource_names([])
    shapes = [(PodShape.of(kit.pod(share=100 * k), names), float(k)) for k in range(1, 5)]
    # weights 4, 3, 2, 1 of 10: 4 + 3 covers 70 %, 4 + 3 + 2 covers 90 %
    kept = mix_of(shapes, coverage=0.7)
    assert kept is not None and kept.share.tolist() == [400, 300]
    kept = mix_of(shapes, coverage=0.75)
    assert kept is not None and kept.share.tolist() == [400, 300, 200]
    every = mix_of(shapes)
    assert every is not None and len(every.weight) == 4


def test_a_shape_without_access_counts_every_free_thousandth(kit: Any) -> None:
    names = resource_names([])
    t4 = PodShape.of(kit.pod(gpus=1, selector={"gpu": "T4"}), names)
    anywhere = PodShape.of(kit.pod(gpus=1), names)
    mix = mix_of([(anywhere, 1.0), (t4, 1.0)])
    assert mix is not None
    state = _state(
        kit,
        kit.node("t4", gpus=3, devices=[1000, 1000, 500], labels={"gpu": "T4"}),
        kit.node("v100", gpus=3, devices=[1000, 1000, 500], labels={"gpu": "V100"}),
    )
    rows = np.arange(2)
    # whole-GPU shapes: the partly used device (500) is a fragment where the shape may run;
    # the T4 shape may not run on v100: all 2,500 free thousandths are fragments there
    assert frag_of(mix, state.free, state.dev).tolist() == [500.0, 500.0]
    allowed = np.array([[True, True], [True, False]])
    assert frag_of(mix, state.free, state.dev, allowed).tolist() == [500.0, 1500.0]
    # one more whole GPU: nothing added on t4, F drops by half its 1,000 on v100
    assert frag_added(mix, state, anywhere, rows).tolist() == [0.0, -500.0]


def test_an_unconstrained_pod_leaves_the_only_node_a_constrained_shape_may_use(
    kit: Any, decide: Any
) -> None:
    # two nodes alike but for their GPU model; T4 first, so node order alone would pick it
    the_fleet = kit.fleet(
        kit.cluster(
            "c",
            kit.node("t4", gpus=4, labels={"gpu": "T4"}),
            kit.node("v100", gpus=4, labels={"gpu": "V100"}),
        )
    )
    anywhere = kit.pod(gpus=1)
    t4 = kit.pod(gpus=1, selector={"gpu": "T4"})
    job = kit.workload("job", ("w", 1, anywhere))
    decision = decide([job], the_fleet, mode="online", pod_mix=[(anywhere, 1.0), (t4, 1.0)])
    assert decision.placements[0].pods[0].node == "v100"
    # without T4-bound pods in the mix both nodes score alike: the first one wins
    decision = decide([job], the_fleet, mode="online", pod_mix=[(anywhere, 1.0)])
    assert decision.placements[0].pods[0].node == "t4"


@pytest.mark.parametrize("order", [("t4", "v100"), ("v100", "t4")])
def test_online_stream_keeps_t4_nodes_for_t4_pods(
    kit: Any, decide: Any, order: tuple[str, str]
) -> None:
    # 2 T4 + 2 V100 GPUs; two unconstrained pods then two T4-bound ones: all four fit only
    # if the unconstrained pods leave the T4 node alone (the default mix: the decision's pods)
    nodes = {m: kit.node(m, gpus=2, labels={"gpu": m.upper()}) for m in order}
    the_fleet = kit.fleet(kit.cluster("c", *(nodes[m] for m in order)))
    jobs = [kit.workload(f"any{i}", ("w", 1, kit.pod(gpus=1))) for i in range(2)]
    jobs += [
        kit.workload(f"t4-{i}", ("w", 1, kit.pod(gpus=1, selector={"gpu": "T4"}))) for i in range(2)
    ]
    decision = decide(jobs, the_fleet, mode="online")
    assert len(decision.placements) == 4
    on = {p.workload.name: p.pods[0].node for p in decision.placements}
    assert on == {"any0": "v100", "any1": "v100", "t4-0": "t4", "t4-1": "t4"}


def test_changes_within_one_step_tie_and_best_fit_decides(kit: Any, decide: Any) -> None:
    # mix: 2 % half-GPU pods, 98 % tenth-GPU pods; a tenth on "b" leaves 460 on its device,
    # too little for a half: F grows by 0.02 x 460 = 9.2 thousandths there, 0 on "a"
    half, tenth = kit.pod(share=500), kit.pod(share=100)
    the_fleet = kit.fleet(
        kit.cluster(
            "c", kit.node("a", gpus=1, devices=[1000]), kit.node("b", gpus=1, devices=[560])
        )
    )
    names = resource_names([])
    mix = mix_of([(PodShape.of(half, names), 0.02), (PodShape.of(tenth, names), 0.98)])
    assert mix is not None
    state = ClusterState(the_fleet.clusters[0], names)
    shape = PodShape.of(tenth, names)
    rows = np.arange(2)
    assert frag_added(mix, state, shape, rows) == pytest.approx([0.0, 9.2])
    assert frag_score(mix, state, shape, rows).tolist() == [0.0, 0.0]
    # FGD's F alone in steps of 4: 0 and 2; the fill term adds 8 on each (a tenth on "a"
    # leaves 900, one half-GPU pod less). A shared pod weighs it by ``fill_shared``: at 0.5,
    # 4 and 8.6; at the default 0.2, 1.6 and 8.96. ``fill`` (whole-GPU pods) plays no part
    no_fill = replace(mix, step=4.0, fill=1.0, fill_shared=0.0)
    assert frag_score(no_fill, state, shape, rows).tolist() == [0.0, 2.0]
    half_fill = replace(mix, step=4.0, fill=0.0, fill_shared=0.5)
    assert frag_score(half_fill, state, shape, rows).tolist() == [1.0, 2.0]
    assert frag_score(replace(mix, step=4.0), state, shape, rows).tolist() == [0.0, 2.0]
    # within one step (15 thousandths): best-fit picks the fuller device
    job = kit.workload("job", ("w", 1, tenth))
    decision = decide([job], the_fleet, mode="online", pod_mix=[(half, 0.02), (tenth, 0.98)])
    assert decision.placements[0].pods[0].node == "b"


def test_the_fill_term_counts_gpus_that_repeated_pods_cannot_take(kit: Any) -> None:
    names = resource_names([])
    typical = PodShape.of(kit.pod(gpus=1, cpu=8), names)
    tenth = PodShape.of(kit.pod(share=300, cpu=1), names)
    mix = mix_of([(typical, 1.0)])
    assert mix is not None
    # 8 idle GPUs, cores for two typical pods: FGD's F counts nothing (one pod fits), the
    # fill term the 6 GPUs two pods leave
    state = _state(kit, kit.node("x", gpus=8, cpu=16))
    assert frag_of(mix, state.free, state.dev).tolist() == [0.0]
    assert fill_of(mix, state.free, state.dev).tolist() == [6000.0]
    # a shared shape: 3 pods of 300 take 900 of a free device, 100 left; none where it may
    # not run
    shared = mix_of([(tenth, 1.0)])
    assert shared is not None
    state = _state(kit, kit.node("y", gpus=1, devices=[1000]))
    assert fill_of(shared, state.free, state.dev).tolist() == [100.0]
    assert fill_of(shared, state.free, state.dev, np.array([[False]])).tolist() == [1000.0]


def test_a_cpu_heavy_pod_goes_where_it_strands_no_gpu(kit: Any, decide: Any) -> None:
    # typical pods: 1 GPU and 8 cores. A 1-GPU 32-core pod on "a" (64 cores) leaves cores for
    # 4 typical pods next to 7 GPUs; on "b" (128 cores) for 12. FGD's F grows on neither
    # (a typical pod still fits both), and best-fit alone prefers the fuller "a"
    typical, heavy = kit.pod(gpus=1, cpu=8), kit.pod(gpus=1, cpu=32)
    the_fleet = kit.fleet(
        kit.cluster("c", kit.node("a", gpus=8, cpu=64), kit.node("b", gpus=8, cpu=128))
    )
    names = resource_names([])
    mix = mix_of([(PodShape.of(typical, names), 1.0)])
    assert mix is not None
    state = ClusterState(the_fleet.clusters[0], names)
    shape, rows = PodShape.of(heavy, names), np.arange(2)
    assert frag_added(mix, state, shape, rows).tolist() == [0.0, 0.0]
    assert frag_score(replace(mix, fill=0.0), state, shape, rows).tolist() == [0.0, 0.0]
    # the fill term: 3,000 thousandths stranded on "a", none on "b" (a pod of whole GPUs
    # weighs it by ``fill``; ``fill_shared`` plays no part)
    alone = replace(mix, fill=1.0, fill_shared=0.0, step=1.0)
    assert frag_score(alone, state, shape, rows).tolist() == [3000.0, 0.0]
    assert fill_weight(mix, shape) == FILL
    job = kit.workload("job", ("w", 1, heavy))
    decision = decide([job], the_fleet, mode="online", pod_mix=[(typical, 1.0)])
    assert decision.placements[0].pods[0].node == "b"


def test_the_fill_weight_depends_on_the_pod_placed(kit: Any) -> None:
    # whole GPUs: ``fill``; a share of one device or no GPU: ``fill_shared``
    names = resource_names([])
    whole, share, cpu = (
        PodShape.of(kit.pod(gpus=2, cpu=8), names),
        PodShape.of(kit.pod(share=300, cpu=1), names),
        PodShape.of(kit.pod(cpu=4), names),
    )
    mix = mix_of([(whole, 1.0), (share, 1.0)])
    assert mix is not None
    assert (mix.fill, mix.fill_shared) == (FILL, FILL_SHARED)
    assert FILL != FILL_SHARED
    custom = replace(mix, fill=0.9, fill_shared=0.1)
    assert [fill_weight(custom, s) for s in (whole, share, cpu)] == [0.9, 0.1, 0.1]
