"""The profile file: read, written back the same, and refused with one line when bad."""

from __future__ import annotations

import pytest

from hetopt.errors import InputError
from hetopt.profile.format import (CollectiveRow, HostRow, LayerRow, OptimizerRow, Profile, Provenance, parse_profile,
                                   profile_text, read_profile, write_profile)


def sample() -> Profile:
    prov = Provenance("tester", "2026-12-05T00:00:00Z", gpu_name="cpu", torch="2.13.0+cpu", backend="gloo")
    return Profile(prov,
                   layers=(LayerRow("cpu", "tiny", "layer", 1, 2, 64, "none", "fp32", 0.0015, 0.003, 1.5 * 2**20, 64),
                           LayerRow("cpu", "tiny", "head", 1, 2, 64, "none", "fp32", 0.001, 0.002, includes=("tp_collectives",))),
                   optimizer=(OptimizerRow("cpu", "fp32", 1e6, 0.004),),
                   collectives=(CollectiveRow("cpu", "all_reduce", "intra", 2, 4096.0, 2e-5),),
                   hosts=(HostRow("cpu", "torch2", 1e-4, 2e-4),))


def test_round_trip(tmp_path):
    p = sample()
    path = tmp_path / "p.toml"
    write_profile(p, path)
    back = read_profile(path)
    assert back == p
    assert back.gpus() == ("cpu",) and back.rows == 5


def data() -> dict:
    import tomllib
    return tomllib.loads(profile_text(sample()))


@pytest.mark.parametrize("edit, where", [
    (lambda d: d.update(format="other"), "format"),
    (lambda d: d.update(version=9), "version"),
    (lambda d: d.pop("provenance"), "provenance"),
    (lambda d: d["provenance"].pop("measured_by"), "provenance.measured_by"),
    (lambda d: d["layer"][0].update(forward_ms=-1.0), "layer[0].forward_ms"),
    (lambda d: d["layer"][0].update(part="attention"), "layer[0].part"),
    (lambda d: d["layer"][0].update(tp=0), "layer[0].tp"),
    (lambda d: d["layer"][0].update(forwrd_ms=1.0), "layer[0].forwrd_ms"),
    (lambda d: d["layer"][1].update(includes=["dp"]), "layer[1].includes"),
    (lambda d: d["collective"][0].update(op="broadcast"), "collective[0].op"),
    (lambda d: d["collective"][0].update(ranks=1), "collective[0].ranks"),
    (lambda d: d["collective"][0].update(time_us=float("inf")), "collective[0].time_us"),
    (lambda d: d["optimizer"][0].update(parameters=0), "optimizer[0].parameters"),
    (lambda d: d["layer"].append(dict(d["layer"][0])), "layer[2]"),
])
def test_bad_files_one_line(edit, where):
    d = data()
    edit(d)
    with pytest.raises(InputError) as info:
        parse_profile(d, "p.toml")
    text = str(info.value)
    assert text.startswith(f"p.toml: {where}:") and "\n" not in text


def test_missing_file(tmp_path):
    with pytest.raises(InputError, match="no such file"):
        read_profile(tmp_path / "none.toml")
