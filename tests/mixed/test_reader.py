"""Reading mixed files: every error names the file, the key and the fix; the CLI exits 2."""

from __future__ import annotations

import pytest

from hetopt import load, loads
from hetopt.errors import InputError
from hetopt.generate.toml import dumps
from hetopt.mixed.synthetic import random_instance
from hetopt.readers.mixed import mixed_data

from .conftest import INSTANCES, one_type_file

GOOD = one_type_file(microbatches=4, microbatch_size=2, link_s=0.1, cross_bandwidth_gbps=25.0, gradient_gib=[1.0, 1.0],
                     gpu={"name": "A100", "count": 2, "memory_gib": 40.0, "bandwidth_gbps": 100.0},
                     tp={"degree": 1, "time_s": [[1.0, 1.0], [1.5, 1.5]], "static_gib": [1.0, 1.0],
                         "activation_gib": [[1.0, 1.0], [2.0, 2.0]]})


def test_reads_units():
    inst = loads(GOOD, source="x.toml")
    assert inst.gradient_bytes == (2**30, 2**30) and inst.cross_bandwidth == 25e9 / 8
    g = inst.gpus[0]
    assert g.memory_bytes == 40 * 2**30 and g.tp[0].activation_bytes[1] == (2 * 2**30, 2 * 2**30)


@pytest.mark.parametrize(("edit", "key", "words"), [
    (("microbatches = 4", "microbatches = 0"), "microbatches", "from 1"),
    (("microbatch_size = 2", "microbatch_size = 2.5"), "microbatch_size", "whole number"),
    (("layers = 2", "layers = 3"), "gradient_gib", "3 numbers"),
    (("layers = 2", "layer = 2"), "layer", "did you mean"),
    (("link_s = 0.1", "link_s = -0.1"), "link_s", ">= 0"),
    (("cross_bandwidth_gbps = 25.0", "cross_bandwidth_gbps = 0.0"), "cross_bandwidth_gbps", "> 0"),
    (("count = 2", "count = -1"), "gpu[0].count", "from 0"),
    (("memory_gib = 40.0", "memory_gib = 0.0"), "gpu[0].memory_gib", "> 0"),
    (("degree = 1", "degree = 0"), "gpu[0].tp[0].degree", "from 1"),
    (("time_s = [[1.0, 1.0], [1.5, 1.5]]", "time_s = [[1.0, 1.0], [1.5, 1.5], [2.0, 2.0]]"), "gpu[0].tp[0].time_s",
     "1 to 2 rows"),
    (("time_s = [[1.0, 1.0], [1.5, 1.5]]", "time_s = [[1.0, 1.0]]"), "gpu[0].tp[0].activation_gib", "1 rows"),
    (("time_s = [[1.0, 1.0], [1.5, 1.5]]", "time_s = [[1.0, 1.0], [0.5, 1.5]]"), "gpu[0].tp[0].time_s[1][0]",
     "below the row"),
    (("count = 2", "count = 2\nunit = 4"), "gpu[0].count", "whole units"),
    (("link_s = 0.1", "link_s = 0.1\noverlap = 1.5"), "overlap", "share"),
    (("link_s = 0.1", "link_s = 0.1\nbuckets = 3"), "buckets", "list of whole numbers"),
    (("link_s = 0.1", "link_s = 0.1\nbuckets = [1, 0.5]"), "buckets[1]", "whole number"),
    (("time_s = [[1.0, 1.0], [1.5, 1.5]]", "time_s = [[1.0, 1.0], [1.5]]"), "gpu[0].tp[0].time_s[1]", "2 numbers"),
    (("time_s = [[1.0, 1.0], [1.5, 1.5]]", "time_s = [[1.0, -1.0], [1.5, 1.5]]"), "gpu[0].tp[0].time_s[0][1]", ">= 0"),
    (("time_s = [[1.0, 1.0], [1.5, 1.5]]", "time_s = [1.0, 1.0]"), "gpu[0].tp[0].time_s", "list of lists"),
    (("static_gib = [1.0, 1.0]", "static_gib = [1.0, nan]"), "gpu[0].tp[0].static_gib[1]", "finite"),
    (("activation_gib = [[1.0, 1.0], [2.0, 2.0]]\n", ""), "gpu[0].tp[0].activation_gib", "missing"),
    (('name = "A100"', 'name = "A100"\nspeed = 3'), "gpu[0].speed", "unknown key"),
])
def test_errors_name_file_and_key(reader_refuses, edit, key, words):
    assert words in reader_refuses(GOOD, edit, key)


def test_duplicate_degree():
    text = GOOD + GOOD[GOOD.index("[[gpu.tp]]"):]
    with pytest.raises(InputError, match=r"bad.toml: gpu\[0\].tp\[1\].degree: 1 is given twice"):
        loads(text, source="bad.toml")


def test_too_many_types():
    text = GOOD + 4 * GOOD[GOOD.index("[[gpu]]"):].replace('"A100"', '"X"')
    with pytest.raises(InputError, match=r"bad.toml: gpu: "):
        loads(text, source="bad.toml")


def test_cli_bad_file_exits_2_with_one_line(solve_refuses):
    solve_refuses(GOOD.replace("count = 2", "count = 2.5"), "gpu[0].count")


def test_round_trip():
    inst = random_instance(7)
    again = loads(dumps(mixed_data(inst)), source="x.toml")
    assert again.layers == inst.layers and again.microbatch_size == inst.microbatch_size
    for g, h in zip(inst.gpus, again.gpus):
        assert g.count == h.count
        for row, again_row in zip(g.tp[0].time_s, h.tp[0].time_s):  # the file keeps 12 digits
            assert again_row == pytest.approx(row, rel=1e-11)
        assert h.memory_bytes == pytest.approx(g.memory_bytes, rel=1e-9)


def test_shipped_instances_load():
    paths = sorted(INSTANCES.glob("*.toml"))
    assert len(paths) >= 2
    for path in paths:
        assert load(path).problem == "mixed"


def test_round_trip_keeps_units_overlap_buckets_and_short_rows():
    inst = random_instance(4, microbatch_size=4, variety=True)
    again = loads(dumps(mixed_data(inst)), source="x.toml")
    assert again.overlap == inst.overlap and again.buckets == inst.buckets
    assert [g.unit for g in again.gpus] == [g.unit for g in inst.gpus]
    assert [[t.shares for t in g.tp] for g in again.gpus] == [[t.shares for t in g.tp] for g in inst.gpus]
    assert any(g.unit == 2 for g in inst.gpus) or any(t.shares < 4 for g in inst.gpus for t in g.tp)


@pytest.mark.parametrize(("edit", "key", "got"), [
    (("memory_gib = 40.0", "memory_gib = 1e300"), "gpu[0].memory_gib", "1e+300"),
    (("memory_gib = 40.0", "memory_gib = 2e6"), "gpu[0].memory_gib", "2000000"),
    (("static_gib = [1.0, 1.0]", "static_gib = [-1.0, 1.0]"), "gpu[0].tp[0].static_gib[0]", "-1"),
    (("gradient_gib = [1.0, 1.0]", "gradient_gib = [1.0, -0.5]"), "gradient_gib[1]", "-0.5"),
    (("activation_gib = [[1.0, 1.0], [2.0, 2.0]]", "activation_gib = [[1.0, 1.0], [2.0, 1e300]]"),
     "gpu[0].tp[0].activation_gib[1][1]", "1e+300"),
    (("bandwidth_gbps = 100.0", "bandwidth_gbps = 1e300"), "gpu[0].bandwidth_gbps", "1e+300"),
    (("cross_bandwidth_gbps = 25.0", "cross_bandwidth_gbps = 1e308"), "cross_bandwidth_gbps", "1e+308"),
])
def test_an_out_of_range_value_is_shown_as_written_in_its_keys_unit(reader_refuses, edit, key, got):
    """Issue 44, item 4: "(got None)" for 1e300 GiB, bytes under a GiB key for negatives."""
    message = reader_refuses(GOOD, edit, key)
    assert message.endswith(f"(got {got})"), message
    unit = "Gb/s" if "gbps" in key else "GiB"
    assert unit in message and "bytes" not in message, message


def test_a_falling_activation_row_is_shown_in_gib():
    text = GOOD.replace("activation_gib = [[1.0, 1.0], [2.0, 2.0]]", "activation_gib = [[1.0, 1.0], [0.75, 2.0]]")
    with pytest.raises(InputError) as err:
        loads(text, source="bad.toml")
    message = str(err.value)
    assert message.startswith("bad.toml: gpu[0].tp[0].activation_gib[1][0]: 0.75 is below the row of one sample "
                              "fewer (1);"), message
    assert message.endswith("raise it to at least 1"), message


def test_an_instance_built_in_code_is_told_in_the_files_units():
    """The constructor shows an SI field in its key's unit: inf bytes as inf GiB, not None."""
    import dataclasses
    import math

    inst = loads(GOOD, source="x.toml")
    grp = inst.gpus[0]
    with pytest.raises(InputError, match=r"^gpu\[0\]\.memory_gib: must be a finite number of GiB, > 0 .*\(got inf\)$"):
        dataclasses.replace(inst, gpus=(dataclasses.replace(grp, memory_bytes=math.inf),))
    with pytest.raises(InputError, match=r"^gpu\[0\]\.bandwidth_gbps: .*Gb/s.*\(got 'fast'\)$"):
        dataclasses.replace(inst, gpus=(dataclasses.replace(grp, bandwidth="fast"),))
    with pytest.raises(InputError, match=r"^gradient_gib\[0\]: must be a finite number of GiB, >= 0 .*\(got -0\.25\)$"):
        dataclasses.replace(inst, gradient_bytes=(-0.25 * 2**30, 0.0))
