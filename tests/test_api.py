"""The Python API's faces (issue 44, items 5 and 9): what a user of ``import hetopt`` meets."""

from __future__ import annotations

import pytest

import hetopt
from hetopt.errors import InputError


@pytest.mark.parametrize("path", [123, None, 1.5, ["a.toml"]])
def test_load_of_something_not_a_path_is_an_input_error_of_one_line(path):
    with pytest.raises(InputError) as info:
        hetopt.load(path)
    text = str(info.value)
    assert text.startswith("path: ") and "\n" not in text and type(path).__name__ in text


@pytest.mark.parametrize("text", [123, None, b"problem = 'mixed'"])
def test_loads_of_something_not_text_is_an_input_error_of_one_line(text):
    with pytest.raises(InputError) as info:
        hetopt.loads(text)
    assert str(info.value).startswith("text: ") and "\n" not in str(info.value)


# -- item 9: what print() shows, what dir() lists, units and layouts on the public objects ------

@pytest.fixture(scope="module")
def small_plan():
    return hetopt.plan("cephalo-a", "opt-350m", global_batch=32)


def _aligned(text: str) -> list[str]:
    """The keys of a summary whose colons line up (SciPy's OptimizeResult style)."""
    lines = text.splitlines()
    column = lines[0].index(": ")
    keys = [line[:column].strip() for line in lines if line[:column].strip()]
    assert all(line[column:column + 2] in (": ", "  ") for line in lines), text
    return keys


def test_print_result_is_a_short_aligned_summary_and_repr_keeps_every_field():
    r = hetopt.solve(hetopt.load(_instance("allocation", "tiny-2gpu.toml")))
    text = str(r)
    keys = _aligned(text)
    assert keys[:7] == ["problem", "method", "status", "objective", "bound", "gap", "wall_s"], text
    assert "solution" in keys and "iteration time" in text and len(text) < 800
    assert repr(r).startswith("Result(problem='allocation'") and "state_share" in repr(r)


def test_print_of_an_answer_without_a_plan_gives_its_reason():
    inst = hetopt.load(_instance("mixed", "tiny.toml"))
    r = hetopt.solve(inst, "dp", time_limit=0)
    assert _aligned(str(r))[-1] == "reason" and "objective" not in str(r)


def test_print_crosscheck_lists_one_line_per_method():
    check = hetopt.crosscheck(hetopt.load(_instance("mixed", "tiny.toml")))
    text = str(check)
    assert _aligned(text)[:3] == ["problem", "agree", "results"]
    assert text.count("OPTIMAL") == len(check.results) and "agree: yes" in text
    assert repr(check).startswith("CrossCheck(")


def test_print_plan_is_a_short_summary_with_its_stages(small_plan):
    text = str(small_plan)
    keys = _aligned(text)
    assert keys[:2] == ["plan", "status"] and {"iteration_time_s", "throughput_samples_s", "stages"} <= set(keys)
    assert f"{len(small_plan.stages)} stages on" in text
    assert sum(row.layout_text in text for row in small_plan.stages) == len(small_plan.stages)
    assert len(text) < 1500 < len(repr(small_plan)) and repr(small_plan).startswith("HeteroPlan(")


def test_the_lazily_loaded_planner_is_in_dir():
    import subprocess
    import sys

    code = ("import sys, hetopt; names = dir(hetopt); "
            "print(all(n in names for n in ('plan', 'PlanRequest', 'HeteroPlan', 'solve')), "
            "'hetopt.planner.plan' in sys.modules, set(hetopt.__all__) <= set(names))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["True", "False", "True"]  # listed, not loaded by listing


def test_a_stage_row_has_its_layout_as_integers_and_as_text(small_plan):
    for row in small_plan.stages:
        assert all(isinstance(x, int) and x >= 1 for x in (row.tp, row.pp, row.dp, row.ep, row.cp))
        assert row.layout_text.startswith(f"tp{row.tp} pp{row.pp}") and f" dp{row.dp} " in row.layout_text
        assert row.layout == row.layout_text  # the previous name, kept one release


def test_memory_is_bytes_on_objects_and_gib_in_the_json(small_plan):
    from hetopt.jsonout import plain

    row = small_plan.stages[0]
    assert row.memory_bytes > 2**20 and row.memory_gib == row.memory_bytes / 2**30
    doc = plain(small_plan)["stages"][0]
    assert doc["memory_gib"] == row.memory_gib and "memory_bytes" not in doc
    assert doc["layout"] == row.layout_text and (doc["tp"], doc["pp"], doc["dp"]) == (row.tp, row.pp, row.dp)
    # the families' objects carry bytes too (their JSON says GiB)
    r = hetopt.solve(hetopt.load(_instance("allocation", "tiny-2gpu.toml")))
    gpu = r.solution.gpus[0]
    assert gpu.memory_bytes > 2**20 and plain(r.solution)["gpus"][0]["memory_gib"] == gpu.memory_bytes / 2**30


def _instance(family: str, name: str):
    from hetopt.catalog import instances_dir

    return instances_dir() / family / name
