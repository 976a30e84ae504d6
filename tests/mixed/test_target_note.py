"""The mixed-stages row says what a ``--target`` runtime cannot run of it (issue 27): a stock
runtime starts one job with one TP size and one micro-batch size per replica; Cephalo has no TP."""

from __future__ import annotations

import pytest

from hetopt.mixed.problem import Member, MixedSolution, Stage
from hetopt.planner.alternatives.mixed import stock_runtime_note

NAMES = ("A100", "V100")


def _solution(*members: Member) -> MixedSolution:
    return MixedSolution((Stage(0, 24, members),), NAMES)


@pytest.mark.parametrize("target,title", [("megatron", "Megatron-LM"), ("deepspeed", "DeepSpeed"), ("torchtitan", "torchtitan")])
def test_different_tp_and_shares_in_one_stage_are_named(target, title):
    # 32 A100 replicas at TP 1 with 5 samples each, 24 V100 replicas at TP 4 with 4 each (a8v24's plan)
    note = stock_runtime_note(_solution(Member(0, 1, 32, 160), Member(1, 4, 24, 96)), target)
    assert note == f"; {title} cannot run it as one job: TP 1 and 4 in one stage, 4 and 5 samples a replica"


def test_one_tp_and_one_share_is_runnable():
    assert stock_runtime_note(_solution(Member(0, 2, 4, 8), Member(1, 2, 2, 4)), "megatron") == ""
    # an uneven split inside one type is two shares too
    assert stock_runtime_note(_solution(Member(0, 2, 3, 7)), "megatron").endswith("2 and 3 samples a replica")


def test_cephalo_runs_per_gpu_batches_but_no_tp():
    assert stock_runtime_note(_solution(Member(0, 1, 4, 8), Member(1, 1, 2, 2)), "cephalo") == ""
    assert stock_runtime_note(_solution(Member(0, 2, 4, 8)), "cephalo") == "; Cephalo cannot run it as one job: TP"


def test_without_a_target_nothing_is_said():
    assert stock_runtime_note(_solution(Member(0, 1, 32, 160), Member(1, 4, 24, 96)), None) == ""
