"""The islands family at its edges (issue 29): names are checked; a model too large is declined
from its size before OR-Tools is loaded, so a short limit does not turn it into a time limit."""

from __future__ import annotations

import dataclasses

import pytest

from hetopt import load, solve
from hetopt.catalog import instances_dir
from hetopt.errors import InputError
from hetopt.result import Status


def test_the_instance_name_must_be_a_string():
    inst = load(instances_dir() / "islands" / "tangram-c2.toml")
    with pytest.raises(InputError, match="name: must be a non-empty string") as err:
        dataclasses.replace(inst, name=None)
    assert err.value.field == "name"


@pytest.mark.parametrize("method", ["cpsat", "milp"])
def test_the_datacenter_is_declined_for_its_size(method):
    inst = load(instances_dir() / "islands" / "datacenter-512-nodes.toml")
    r = solve(inst, method, time_limit=5.0)
    assert r.status is Status.DECLINED and "terms" in r.reason and "use dp" in r.reason
