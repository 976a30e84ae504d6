"""The shipped replicas instances are the generator's output."""

from __future__ import annotations

import pytest

from hetopt.generate.replicas import RANDOM, SETTINGS, build_instance, instance_data, random_text
from hetopt.generate.toml import dumps
from hetopt.replicas.problem import evaluate
from hetopt.replicas.dp import solve_dp

from .conftest import INSTANCES


@pytest.mark.parametrize(("seed", "sizes"), RANDOM)
def test_random_files_are_the_generators_output(seed, sizes):
    assert (INSTANCES / f"random-{seed}.toml").read_text(encoding="utf-8") == random_text(seed, sizes)


@pytest.mark.slow
def test_datacenter_file_is_the_generators_output():
    st = SETTINGS[0]
    text = (INSTANCES / f"{st.name}.toml").read_text(encoding="utf-8")
    built = build_instance(st)
    assert f'name = "{st.name}"' in text
    # the figures come from the cost model: compare the data, not the description
    data = instance_data(built, "")
    assert all(f'name = "{c["name"]}"' in text for c in data["candidate"])
    assert dumps({"candidate": data["candidate"]}).strip() in text


def test_datacenter_instance_plans_many_replicas():
    from hetopt import load

    inst = load(INSTANCES / "datacenter-512-gpt3-175b-b1536.toml")
    r = solve_dp(inst)
    assert r.status.value == "OPTIMAL" and len(r.solution.replicas) >= 4
    ev = evaluate(inst, r.solution)
    assert ev.details["sync_s"] > 0 and r.objective == ev.objective
