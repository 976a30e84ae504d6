"""The instance validates itself: files and the API get the same one-line InputError.

Extreme values that the readers used to accept crashed the solvers or made them wrong
(issue 9): ``forward_s = 1e308`` (TypeError), stage times >= 1e15 s (HiGHS IndexError),
>= 1e10 s (CP-SAT TypeError), an unused option at 1e25 s (CBC proved a feasible instance
infeasible), NaN, M <= 0, empty stage lists. Each is now rejected with the accepted range.
"""

from __future__ import annotations

import dataclasses
import math
import re

import pytest

import hetopt
from hetopt.cli import main
from hetopt.errors import InputError
from hetopt.pipeline.problem import (
    GIB,
    MAX_TIME_RATIO,
    MAX_TIME_S,
    MIN_TIME_S,
    PipelineIsland,
    PipelineInstance,
    PipelineOption,
    StagePlan,
)
from hetopt.result import Status

from .conftest import INSTANCES

TINY = INSTANCES / "tiny.toml"
#: tiny.toml's optimum (dp, bruteforce): option 1 (the 8-layer V100 option) is unused.
TINY_OPTIMUM = 1.262


def _tiny() -> PipelineInstance:
    return hetopt.load(TINY)


def _with_stage(inst: PipelineInstance, o: int, **changes) -> PipelineInstance:
    opts = list(inst.options)
    st = opts[o].stages
    opts[o] = dataclasses.replace(opts[o], stages=(dataclasses.replace(st[0], **changes),) + st[1:])
    return dataclasses.replace(inst, options=tuple(opts))


def _file_with(tmp_path, old: str, new: str):
    text = TINY.read_text()
    assert old in text
    path = tmp_path / "x.toml"
    path.write_text(text.replace(old, new, 1))
    return path


# the second [[option]] of tiny.toml (8 layers on the V100s, unused by the optimum)
UNUSED_FORWARD = "layers = 8\n  forward_s = 0.040"


@pytest.mark.parametrize("value", ["1e308", "1e25", "1e15", "1e10", "-0.5", "nan", "1e-9"])
def test_extreme_forward_time_exits_2_with_the_range(tmp_path, capsys, value):
    path = _file_with(tmp_path, UNUSED_FORWARD, f"layers = 8\n  forward_s = {value}")
    assert main(["solve", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err
    assert f"{path}: option[1].stage[0].forward_s: must be" in err, err


def test_api_and_file_give_the_same_message(tmp_path, capsys):
    path = _file_with(tmp_path, UNUSED_FORWARD, "layers = 8\n  forward_s = 1e308")
    assert main(["solve", str(path)]) == 2
    from_file = capsys.readouterr().err.strip()
    with pytest.raises(InputError) as exc:
        _with_stage(_tiny(), 1, forward_s=1e308)
    assert from_file.endswith(str(exc.value)), (from_file, str(exc.value))
    assert f"{MAX_TIME_S:g}" in str(exc.value)


@pytest.mark.parametrize(
    "change,where",
    [
        (dict(microbatches=0), "microbatches"),
        (dict(microbatches=-3), "microbatches"),
        (dict(layers=0), "layers"),
        (dict(memory_fraction=2.0), "memory_fraction"),
        (dict(memory_fraction=math.nan), "memory_fraction"),
        (dict(islands=()), "island"),
        (dict(link_s=((0.0, 0.002), (0.003, 0.0))), "link v100-t4"),
        (dict(link_s=((0.0, -0.002), (-0.002, 0.0))), "link v100-t4"),
        (dict(link_s=((0.0, math.nan), (math.nan, 0.0))), "link v100-t4"),
        (dict(link_s=((0.0,),)), "link_s"),
    ],
)
def test_instance_fields_are_validated(change, where):
    with pytest.raises(InputError, match=f"^{where}: "):
        dataclasses.replace(_tiny(), **change)


@pytest.mark.parametrize(
    "change,where",
    [
        (dict(forward_s=math.nan), "option[1].stage[0].forward_s"),
        (dict(backward_s=math.inf), "option[1].stage[0].backward_s"),
        (dict(activation_bytes=math.nan), "option[1].stage[0].activation_gib"),
        (dict(static_bytes=-1.0), "option[1].stage[0].static_gib"),
        (dict(static_bytes=1e300), "option[1].stage[0].static_gib"),
        (dict(gpus=0), "option[1].stage[0].gpus"),
        (dict(layers=7), "option[1].stage"),
    ],
)
def test_stage_fields_are_validated(change, where):
    with pytest.raises(InputError, match=f"^{re.escape(where)}: "):
        _with_stage(_tiny(), 1, **change)


def test_options_are_validated():
    inst = _tiny()
    bad = [
        (PipelineOption(1, 4, ()), "option[3].stage"),
        (PipelineOption(5, 4, inst.options[0].stages), "option[3].island"),
        (PipelineOption(0, 4, inst.options[0].stages, "tail"), "option[3].role"),
        (PipelineOption(0, 9, inst.options[0].stages), "option[3].layers"),
    ]
    for opt, where in bad:
        with pytest.raises(InputError, match=f"^{re.escape(where)}: "):
            dataclasses.replace(inst, options=inst.options + (opt,))


def test_times_spanning_more_than_the_solvers_resolve_are_rejected():
    inst = _tiny()  # smallest positive time: the 0.002 s link
    with pytest.raises(InputError, match=r"^link v100-t4: .* factor 1e\+06"):
        _with_stage(inst, 1, forward_s=0.002 * MAX_TIME_RATIO * 1.01)
    with pytest.raises(InputError, match=r"^option\[1\]\.stage\[0\]\.forward_s: must be 0 or at least 1e-06 s"):
        _with_stage(inst, 1, forward_s=MIN_TIME_S / 4, backward_s=MIN_TIME_S / 4)


@pytest.mark.parametrize("method", ["dp", "milp", "milp-cbc", "cpsat", "bruteforce"])
def test_an_unused_option_at_the_largest_accepted_time_changes_nothing(method):
    """CBC proved this instance infeasible at 1e25 s; at the edge of the range every method agrees."""
    inst = _with_stage(_tiny(), 1, forward_s=0.002 * MAX_TIME_RATIO - 0.08)
    r = hetopt.solve(inst, method)
    assert r.status is Status.OPTIMAL, r.reason
    assert math.isclose(r.objective, TINY_OPTIMUM, rel_tol=1e-9)


@pytest.mark.parametrize("method", ["dp", "milp", "milp-cbc", "cpsat"])
def test_the_largest_accepted_times_solve_or_decline(method):
    """Times of MAX_TIME_S with the most micro-batches: HiGHS and CP-SAT crashed above 1e10 s."""
    big = StagePlan(1, MAX_TIME_S / 2, MAX_TIME_S / 2, GIB, 0.0)
    small = StagePlan(1, MAX_TIME_S / 4, MAX_TIME_S / 4, GIB, 0.0)
    inst = PipelineInstance(
        "huge", 2, 65_536, (PipelineIsland("a", 1, 8 * GIB), PipelineIsland("b", 1, 8 * GIB)),
        (PipelineOption(0, 1, (big,)), PipelineOption(1, 1, (small,)), PipelineOption(1, 2, (dataclasses.replace(small, layers=2),))),
        ((0.0, MAX_TIME_S), (MAX_TIME_S, 0.0)),
    )
    r = hetopt.solve(inst, method)
    if method == "cpsat" and r.status is Status.DECLINED:
        assert "integer range" in r.reason
        return
    assert r.status is Status.OPTIMAL, r.reason
    assert math.isclose(r.objective, MAX_TIME_S / 2 * 65_536, rel_tol=1e-9)
