"""Issue 40, part 4: memory that fits on a real GPU.

Every GPU keeps a headroom for what training holds beyond its tensors (CUDA context, NCCL's
buffers, the allocator's fragmentation; ``hetopt.hardware.HEADROOM_PARTS``, each with a source),
shown in the plan and changed with ``memory_headroom``; a node's ``memory_gib`` is its capacity in
the cost model (ECC, MIG slices, a shared GPU), not only a key of the islands grouping.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

import hetopt
from hetopt import cli
from hetopt.errors import InputError
from hetopt.hardware import DEFAULT_HEADROOM_GIB, HEADROOM_PARTS
from hetopt.planner.builtin import BuiltinParallelizer
from hetopt.units import MEMORY_RTOL


def _t4_cluster(tmp_path: Path, memory_gib: float | None) -> Path:
    """Two nodes of 4 T4s, with the nodes' memory_gib given (None: the catalog's 16)."""
    memory = "" if memory_gib is None else f"memory_gib = {memory_gib}\n"
    nodes = "".join(f'[[node]]\nname = "t4-{k}"\ngpu = "T4"\ngpus = 4\n{memory}' for k in range(2))
    path = tmp_path / "t4.toml"
    path.write_text(f'name = "t4x8"\n{nodes}[network]\ndefault_gbps = 24.0\n')
    return path


def _plan(cluster: Path, **options):
    return hetopt.plan(str(cluster), "gpt3-1.3b", global_batch=32, alternatives=False, **options)


def test_the_default_headroom_is_its_parts_each_with_a_source() -> None:
    assert DEFAULT_HEADROOM_GIB == sum(p.gib for p in HEADROOM_PARTS) and DEFAULT_HEADROOM_GIB > 1.0
    assert {p.what for p in HEADROOM_PARTS} == {"CUDA context", "NCCL communicators' buffers",
                                                "caching allocator fragmentation"}
    assert all(p.gib > 0 and p.source for p in HEADROOM_PARTS)
    assert BuiltinParallelizer().reserved_bytes == DEFAULT_HEADROOM_GIB * 2**30


def test_t4_nodes_at_12_gib_get_no_stage_over_12_gib(tmp_path: Path) -> None:
    # the issue's bar: the nodes' memory_gib is the capacity the stages must fit, headroom included
    p = _plan(_t4_cluster(tmp_path, 12))
    assert p.status.has_solution and p.stages
    for stage in p.stages:
        assert stage.capacity_gib == 12
        assert stage.memory_gib <= 12 * (1 + MEMORY_RTOL)


def test_the_catalog_memory_is_the_capacity_when_the_nodes_say_none(tmp_path: Path) -> None:
    p = _plan(_t4_cluster(tmp_path, None))
    assert {s.capacity_gib for s in p.stages} == {16}
    assert all(s.memory_gib <= 16 * (1 + MEMORY_RTOL) for s in p.stages)


@pytest.mark.parametrize("headroom", [0.0, 4.0])
def test_the_headroom_is_held_by_every_stage_and_shown(tmp_path: Path, headroom: float) -> None:
    p = _plan(_t4_cluster(tmp_path, 12), memory_headroom=headroom)
    assert p.memory == {"headroom_gib": headroom, "parts": [{"what": "given", "gib": headroom,
                                                              "source": "the plan's request (memory_headroom)"}]}
    # a stage's memory holds the headroom beside its tensors, within the capacity
    assert all(headroom < s.memory_gib <= 12 * (1 + MEMORY_RTOL) for s in p.stages)


def test_a_larger_headroom_leaves_less_for_tensors(tmp_path: Path) -> None:
    # the plan with no headroom holds stages above what 12 - 4 GiB leaves: more headroom changes the plan
    lean, roomy = (_plan(_t4_cluster(tmp_path, 12), memory_headroom=h) for h in (0.0, 4.0))
    assert max(s.memory_gib for s in lean.stages) > 8.0
    assert max(s.memory_gib - 4.0 for s in roomy.stages) <= 8.0 * (1 + MEMORY_RTOL)
    assert roomy.iteration_time_s >= lean.iteration_time_s * (1 - 1e-9)


def test_the_plan_json_shows_the_headroom_its_parts_and_each_stage_capacity(tmp_path: Path,
                                                                           capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["plan", "--cluster", str(_t4_cluster(tmp_path, 12)), "--model", "gpt3-1.3b", "--global-batch", "32",
                     "--no-alternatives", "--json"])
    doc = json.loads(capsys.readouterr().out)
    assert code == 0
    assert doc["memory"]["headroom_gib"] == DEFAULT_HEADROOM_GIB
    assert [p["what"] for p in doc["memory"]["parts"]] == [p.what for p in HEADROOM_PARTS]
    assert all(p["source"] for p in doc["memory"]["parts"])
    assert all(s["capacity_gib"] == 12 and s["memory_gib"] <= 12 * (1 + MEMORY_RTOL) for s in doc["stages"])
    assert [n["memory_gib"] for n in doc["nodes"]] == [12, 12]


def test_the_printed_plan_sets_each_stage_against_its_capacity(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["plan", "--cluster", str(_t4_cluster(tmp_path, 12)), "--model", "gpt3-1.3b", "--global-batch", "32",
                     "--no-alternatives", "--memory-headroom", "3"])
    out = capsys.readouterr().out
    assert code == 0 and " of 12 " in out
    assert "with a headroom of 3 GiB (given 3), of the nodes' memory_gib" in out


@pytest.mark.parametrize("value, says", [("-1", "--memory-headroom: must be >= 0 (got -1.0)"),
                                          ("nan", "--memory-headroom: must be a finite number (got nan)"),
                                          ("5000", "--memory-headroom: must be at most 1024 GiB per GPU (got 5000.0)")])
def test_a_bad_headroom_exits_2_with_one_line(value: str, says: str, capsys: pytest.CaptureFixture[str]) -> None:
    code = cli.main(["plan", "--cluster", "tangram-c1", "--model", "gpt3-1.3b", "--global-batch", "8",
                     "--memory-headroom", value])
    err = capsys.readouterr().err
    assert code == 2 and says in err and len(err.strip().splitlines()) == 1


def test_a_headroom_beside_your_own_parallelizer_is_refused() -> None:
    with pytest.raises(InputError) as err:
        hetopt.plan("tangram-c1", "gpt3-1.3b", global_batch=8, memory_headroom=1.0, parallelizer=BuiltinParallelizer())
    assert err.value.field == "memory_headroom"
