"""Pictures (``hetopt draw``, ``--draw``): every kind rendered from committed results and read back.

The fixtures in ``tests/fixtures/draw/`` are results as ``hetopt solve --json`` and ``hetopt
plan --json`` wrote them (commands in their README), so these tests do not depend on today's
solver numbers. PNGs are read back with matplotlib's image reader; SVGs with xml.etree, where
every counted artist is an element whose ``id`` is the artist's gid.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path
from xml.etree import ElementTree

import pytest

mpl_image = pytest.importorskip("matplotlib.image", reason="the plot extra (matplotlib) is not installed")

from hetopt.cli import main  # noqa: E402
from hetopt.draw import draw, draw_file, style  # noqa: E402
from hetopt.draw import pipeline as pipeline_picture  # noqa: E402
from hetopt.pipeline.simulate import one_f_one_b_order, schedule_1f1b, simulate_1f1b  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "draw"
KINDS = ("allocation", "islands", "pipeline", "plan")
SVG = "{http://www.w3.org/2000/svg}"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def fixture(kind: str) -> dict:
    return json.loads((FIXTURES / f"{kind}.json").read_text(encoding="utf-8"))


def svg_groups(path: Path) -> dict[str, ElementTree.Element]:
    """Every element with an id, by id."""
    root = ElementTree.parse(path).getroot()
    return {el.get("id"): el for el in root.iter() if el.get("id")}


def shapes(element: ElementTree.Element) -> int:
    """The shapes one artist drew (a collection's rectangles, a patch's outline)."""
    return sum(1 for el in element.iter() if el.tag in (f"{SVG}path", f"{SVG}use"))


def matching(groups: dict, pattern: str) -> list[re.Match]:
    return [m for m in (re.fullmatch(pattern, gid) for gid in groups) if m]


# -- every kind, both formats, read back ---------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_is_a_png_of_the_stated_size(kind, tmp_path):
    picture = draw_file(str(FIXTURES / f"{kind}.json"), str(tmp_path / f"{kind}.png"))
    assert picture.kind == kind
    assert picture.path.read_bytes()[:8] == PNG_MAGIC
    pixels = mpl_image.imread(picture.path)
    assert pixels.shape[:2] == (picture.height_px, picture.width_px)
    assert picture.width_px == round(style.WIDTH_IN * style.DPI) == 1000
    assert 200 <= picture.height_px <= style.MAX_HEIGHT_IN * style.DPI
    # a picture, not a blank page: several colours, and ink on a good part of it
    flat = pixels[..., :3].reshape(-1, 3)
    assert len({tuple(p) for p in flat[:: max(1, len(flat) // 20000)]}) > 10
    assert (flat.sum(axis=1) < 2.9).mean() > 0.05


@pytest.mark.parametrize("kind", KINDS)
def test_each_kind_is_an_svg_with_the_png_size_in_points(kind, tmp_path):
    png = draw_file(str(FIXTURES / f"{kind}.json"), str(tmp_path / f"{kind}.png"))
    svg = draw_file(str(FIXTURES / f"{kind}.json"), str(tmp_path / f"{kind}.svg"))
    root = ElementTree.parse(svg.path).getroot()
    assert root.tag == f"{SVG}svg"
    width, height = (float(root.get(k).removesuffix("pt")) for k in ("width", "height"))
    assert width == pytest.approx(png.width_px * 72 / style.DPI)
    assert height == pytest.approx(png.height_px * 72 / style.DPI, abs=1.0)


def test_pipeline_has_a_lane_per_stage_and_a_bar_per_operation(tmp_path):
    doc = fixture("pipeline")
    stages, M = doc["solution"]["stages"], doc["solution"]["microbatches"]
    out = draw(doc, tmp_path / "p.svg")
    groups = svg_groups(out.path)
    lanes = {int(m[1]) for m in matching(groups, r"stage-(\d+)-forward")}
    assert lanes == set(range(len(stages)))
    for s in range(len(stages)):
        assert shapes(groups[f"stage-{s}-forward"]) == M
        assert shapes(groups[f"stage-{s}-backward"]) == M
    # idle: stage 0 waits for every gradient to come back, so it has gaps; the bottleneck is
    # the slowest F + B (the t4 stage of the tiny instance), one bracket per island block
    assert shapes(groups["stage-0-idle"]) > 1
    slowest = max(st["forward_s"] + st["backward_s"] for st in stages)
    assert {int(m[1]) for m in matching(groups, r"bottleneck-(\d+)")} == {
        s for s, st in enumerate(stages) if st["forward_s"] + st["backward_s"] == slowest}
    assert len(matching(groups, r"block-\d+")) == len(doc["solution"]["blocks"])


def test_pipeline_png_grows_with_the_lanes(tmp_path):
    doc = fixture("pipeline")
    one = draw(doc, tmp_path / "one.png")
    more = copy.deepcopy(doc)
    more["solution"]["stages"] = more["solution"]["stages"] * 2  # six stages, same blocks
    six = draw(more, tmp_path / "six.png")
    per_lane = round(pipeline_picture.LANE_IN * style.DPI)
    assert mpl_image.imread(six.path).shape[0] - mpl_image.imread(one.path).shape[0] == pytest.approx(3 * per_lane, abs=1)


def test_allocation_bars_show_batch_share_and_memory(tmp_path):
    doc = fixture("allocation")
    gpus = doc["solution"]["gpus"]
    groups = svg_groups(draw(doc, tmp_path / "a.svg").path)
    segments = Counter(int(m[1]) for m in matching(groups, r"batch-(\d+)-(\d+)"))
    assert segments == Counter({i: g["microbatches"] for i, g in enumerate(gpus)})  # ℓ stacked micro-batches
    for name in ("share-lp", "share-greedy", "memory", "capacity"):
        assert len(matching(groups, rf"{name}-\d+")) == len(gpus), name


def test_allocation_without_greedy_or_capacity_draws_what_it_has(tmp_path):
    doc = fixture("allocation")
    for g in doc["solution"]["gpus"]:
        g["state_share_greedy"] = None
        del g["capacity_gib"]
    groups = svg_groups(draw(doc, tmp_path / "a.svg").path)
    assert not matching(groups, r"share-greedy-\d+") and not matching(groups, r"capacity-\d+")
    assert len(matching(groups, r"share-lp-\d+")) == len(doc["solution"]["gpus"])


def test_allocation_with_too_many_microbatches_draws_one_bar_per_gpu(tmp_path):
    from hetopt.draw import allocation as allocation_picture

    doc = fixture("allocation")
    gpus = doc["solution"]["gpus"]
    for g in gpus:  # a planner-sized batch in micro-batches of one
        g["microbatch_size"], g["microbatches"] = 1, allocation_picture.MAX_STACKED // len(gpus) + 1
    groups = svg_groups(draw(doc, tmp_path / "a.svg").path)
    assert not matching(groups, r"batch-\d+-\d+")
    assert {int(m[1]) for m in matching(groups, r"batch-(\d+)")} == set(range(len(gpus)))


def test_islands_group_every_node_and_show_bandwidth(tmp_path):
    doc = fixture("islands")
    islands = doc["solution"]["islands"]
    groups = svg_groups(draw(doc, tmp_path / "i.svg").path)
    assert len(matching(groups, r"island-\d+")) == len(islands) == doc["solution"]["num_islands"]
    nodes = Counter(int(m[1]) for m in matching(groups, r"node-(\d+)-(\d+)"))
    assert nodes == Counter({k: len(isl["nodes"]) for k, isl in enumerate(islands)})
    assert {int(m[1]) for m in matching(groups, r"internal-(\d+)")} == {
        k for k, isl in enumerate(islands) if isl["slowest_internal_gbps"] is not None}
    assert {int(m[1]) for m in matching(groups, r"leaving-(\d+)")} == {
        k for k, isl in enumerate(islands) if isl["fastest_leaving_gbps"] is not None}


def test_plan_draws_every_stage_and_every_alternative(tmp_path):
    doc = fixture("plan")
    groups = svg_groups(draw(doc, tmp_path / "plan.svg").path)
    assert len(matching(groups, r"stage-\d+")) == len(doc["stages"])
    names = {m[1] for m in matching(groups, r"alternative-(.+)")}
    assert names == {"composed"} | {a["name"] for a in doc["alternatives"] if a["iteration_time_s"] is not None}


def test_plan_alternative_without_a_plan_has_no_bar(tmp_path):
    doc = fixture("plan")
    doc["alternatives"][0]["iteration_time_s"] = None
    groups = svg_groups(draw(doc, tmp_path / "plan.svg").path)
    assert f"alternative-{doc['alternatives'][0]['name']}" not in groups
    assert len(matching(groups, r"alternative-.+")) == len(doc["alternatives"])  # the plan's own bar, the other three


def test_svg_repeats_byte_for_byte(tmp_path):
    first = draw(fixture("plan"), tmp_path / "a.svg").path.read_bytes()
    assert draw(fixture("plan"), tmp_path / "b.svg").path.read_bytes() == first


# -- the plan's Gantt chart (hetopt draw plan.json --gantt) -------------------------------------------


@pytest.fixture(scope="module")
def plan_document() -> dict:
    """A plan as ``hetopt plan --json`` writes it today: three islands of Tangram's C3 in use."""
    import hetopt
    from hetopt.jsonout import plain

    return plain(hetopt.plan("tangram-c3", "gpt3-13b", global_batch=32, microbatch_size=2, alternatives=False))


def test_a_plan_picture_keeps_each_islands_layout_at_any_number_of_stages(plan_document, tmp_path):
    """Issue 44: the layouts were written in the stage bars only, where they fit, and were lost
    past a few stages (here every bar is narrower than its layout)."""
    text = draw(plan_document, tmp_path / "plan.svg").path.read_text(encoding="utf-8")
    stages = plan_document["stages"]
    for s in stages:
        assert s["layout"] in text
    assert f"{len(stages)} stages over {len({s['island'] for s in stages})} of" in text


def test_the_plan_gantt_is_the_plans_own_simulation(plan_document, tmp_path):
    doc = plan_document
    stages = doc["stages"]
    forward, backward = [s["forward_s"] for s in stages], [s["backward_s"] for s in stages]
    links = [s["link_after_s"] for s in stages]
    assert [s["time_s"] for s in stages] == pytest.approx([f + b for f, b in zip(forward, backward)], rel=1e-12)
    assert sum(1 for x in links if x > 0) == len({s["island"] for s in stages}) - 1  # one link between two blocks
    makespan, _ = schedule_1f1b(forward, backward, links, doc["microbatches"])
    assert makespan == pytest.approx(doc["simulated_s"], rel=1e-12)  # the schedule the planner simulated
    picture = draw(doc, tmp_path / "gantt.svg", gantt=True)
    assert picture.kind == "gantt"
    groups = svg_groups(picture.path)
    for k in range(len(stages)):  # one forward and one backward bar per micro-batch on every lane
        assert shapes(groups[f"stage-{k}-forward"]) == shapes(groups[f"stage-{k}-backward"]) == doc["microbatches"]
    text = picture.path.read_text(encoding="utf-8")
    for s in stages:  # each island's block is named with its layout
        assert s["island"] in text and s["layout"] in text


def test_draw_gantt_on_the_command_line(plan_document, tmp_path, capsys):
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(plan_document), encoding="utf-8")
    assert main(["draw", str(path), "--gantt", "-o", str(tmp_path / "gantt.png")]) == 0
    assert "gantt.png: gantt picture, 1000 x" in capsys.readouterr().out
    _one_line_exit_2(capsys, ["draw", str(FIXTURES / "allocation.json"), "--gantt", "-o", str(tmp_path / "x.svg")],
                     "--gantt: " + str(FIXTURES / "allocation.json") + " is an allocation result, which has no 1F1B schedule")
    # a plan written before its stages carried their forward and backward times
    _one_line_exit_2(capsys, ["draw", str(FIXTURES / "plan.json"), "--gantt", "-o", str(tmp_path / "x.svg")],
                     "stages[0].forward_s: missing")
    assert main(["draw", str(FIXTURES / "pipeline.json"), "--gantt", "-o", str(tmp_path / "p.svg")]) == 0  # one already


def test_a_one_stage_schedule_says_stage(tmp_path):
    """Counts in the pictures' titles are singular when one ("1 stages" before)."""
    import hetopt
    from hetopt.jsonout import plain

    doc = plain(hetopt.plan("tangram-c2", "gpt3-1.3b", global_batch=128, alternatives=False))
    assert len(doc["stages"]) == 1 and doc["microbatches"] == 1  # the README's plan: one stage, one micro-batch
    text = draw(doc, tmp_path / "one.svg", gantt=True).path.read_text(encoding="utf-8")
    assert "1 stage × 1 micro-batch" in text
    assert "1 stage over 1 of" in draw(doc, tmp_path / "plan.svg").path.read_text(encoding="utf-8")


# -- the schedule behind the Gantt chart ------------------------------------------------------------


@pytest.mark.parametrize("seed", range(8))
def test_schedule_is_the_simulation_operation_by_operation(seed):
    import random

    rng = random.Random(seed)
    S, M = rng.randint(1, 6), rng.randint(1, 9)
    forward = [rng.uniform(0.1, 2.0) for _ in range(S)]
    backward = [rng.uniform(0.1, 4.0) for _ in range(S)]
    links = [rng.choice([0.0, rng.uniform(0.0, 1.0)]) for _ in range(S - 1)] + [0.0]
    makespan, ops = schedule_1f1b(forward, backward, links, M)
    assert makespan == simulate_1f1b(forward, backward, links, M).makespan_s
    assert len(ops) == 2 * S * M
    end = {(o.stage, o.kind, o.microbatch): o.end_s for o in ops}
    for s in range(S):
        mine = sorted((o for o in ops if o.stage == s), key=lambda o: o.start_s)
        assert [(o.kind, o.microbatch) for o in mine] == one_f_one_b_order(s, S, M)  # 1F1B order
        assert all(a.end_s <= b.start_s + 1e-12 for a, b in zip(mine, mine[1:]))  # one at a time
        for o in mine:
            assert o.end_s - o.start_s == pytest.approx(forward[s] if o.kind == "F" else backward[s])
            if o.kind == "F" and s > 0:  # activations cross the link before s in half its time
                assert o.start_s >= end[(s - 1, "F", o.microbatch)] + links[s - 1] / 2 - 1e-9
            if o.kind == "B":
                ready = end[(s, "F", o.microbatch)] if s == S - 1 else end[(s + 1, "B", o.microbatch)] + links[s] / 2
                assert o.start_s >= ready - 1e-9
    assert max(o.end_s for o in ops) == makespan


# -- the command line -------------------------------------------------------------------------------


def test_results_carry_what_the_pictures_need(capsys):
    # the allocation's capacity per GPU (tiny-2gpu.toml: A6000 48 GiB, T4 16 GiB) and the pipeline's M (tiny.toml: 16)
    assert main(["solve", str(ROOT / "instances" / "allocation" / "tiny-2gpu.toml"), "--json"]) == 0
    gpus = json.loads(capsys.readouterr().out)["solution"]["gpus"]
    assert [(g["type"], g["capacity_gib"]) for g in gpus] == [("A6000", 48.0), ("T4", 16.0)]
    assert all(g["memory_gib"] <= g["capacity_gib"] for g in gpus)
    assert main(["solve", str(ROOT / "instances" / "pipeline" / "tiny.toml"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["solution"]["microbatches"] == 16


def test_draw_command_writes_the_picture(tmp_path, capsys):
    out = tmp_path / "pipeline.png"
    assert main(["draw", str(FIXTURES / "pipeline.json"), "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == PNG_MAGIC
    assert "pipeline picture" in capsys.readouterr().out


def _one_line_exit_2(capsys, argv, words):
    assert main(argv) == 2
    captured = capsys.readouterr()
    err = captured.err
    assert words in err, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    return captured


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("{not json", "not JSON"),
        ("[1, 2]", "not a hetopt result"),
        ('{"cluster": "x"}', "not a hetopt result"),
        ('{"problem": "replicas", "status": "OPTIMAL", "solution": {}}', "no picture for 'replicas'"),
        ('{"problem": "allocation", "status": "INFEASIBLE", "solution": null}', "status INFEASIBLE"),
        ('{"problem": "pipeline", "agree": true, "results": []}', "crosscheck"),
        ('{"problem": "pipeline", "status": "OPTIMAL", "solution": {"stages": [], "blocks": []}}',
         "solution.stages: is empty"),
    ],
)
def test_draw_rejects_what_is_not_a_drawable_result(tmp_path, capsys, content, words):
    bad = tmp_path / "bad.json"
    bad.write_text(content, encoding="utf-8")
    _one_line_exit_2(capsys, ["draw", str(bad), "-o", str(tmp_path / "x.svg")], words)
    assert not (tmp_path / "x.svg").exists()


def test_draw_names_a_missing_field(tmp_path, capsys):
    doc = fixture("pipeline")
    del doc["solution"]["microbatches"]  # a result from before the field existed
    old = tmp_path / "old.json"
    old.write_text(json.dumps(doc), encoding="utf-8")
    _one_line_exit_2(capsys, ["draw", str(old), "-o", str(tmp_path / "x.svg")], f"{old}: solution.microbatches: missing")


def test_draw_of_a_pipeline_beyond_the_simulator_limit_names_the_file(tmp_path, capsys):
    doc = fixture("pipeline")
    doc["solution"]["microbatches"] = 65_536  # 3 stages: 393,216 operations, above 250,000
    big = tmp_path / "big.json"
    big.write_text(json.dumps(doc), encoding="utf-8")
    _one_line_exit_2(capsys, ["draw", str(big), "-o", str(tmp_path / "x.svg")], f"{big}: the 1F1B simulation of 3 stages")


@pytest.mark.parametrize(("target", "words"), [("x.pdf", "written as .svg or .png"), ("no-such-folder/x.svg", "no folder"),
                                               ("", "is a folder")])
def test_draw_rejects_a_bad_target(tmp_path, capsys, target, words):
    _one_line_exit_2(capsys, ["draw", str(FIXTURES / "plan.json"), "-o", str(tmp_path / target) + ("/" if not target else "")],
                     words)


def test_draw_of_an_instance_file_says_to_solve_it_first(tmp_path, capsys):
    tiny = ROOT / "instances" / "pipeline" / "tiny.toml"
    _one_line_exit_2(capsys, ["draw", str(tiny), "-o", str(tmp_path / "x.svg")], f"hetopt solve {tiny} --draw")


def test_draw_of_a_missing_file(tmp_path, capsys):
    _one_line_exit_2(capsys, ["draw", str(tmp_path / "none.json"), "-o", str(tmp_path / "x.svg")], "no such file")


def test_without_matplotlib_every_way_in_says_what_to_install(tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # `import matplotlib` now raises ImportError
    tiny = ROOT / "instances" / "pipeline" / "tiny.toml"
    hint = 'pip install -e ".[plot]"'
    _one_line_exit_2(capsys, ["draw", str(FIXTURES / "pipeline.json"), "-o", str(tmp_path / "x.svg")], hint)
    captured = _one_line_exit_2(capsys, ["solve", str(tiny), "--draw", str(tmp_path / "x.svg")], hint)
    assert captured.out == ""  # checked before solving
    assert not (tmp_path / "x.svg").exists()


def test_solve_draw_writes_the_picture_of_the_result(tmp_path, capsys):
    out = tmp_path / "tiny.svg"
    tiny = ROOT / "instances" / "pipeline" / "tiny.toml"
    assert main(["solve", str(tiny), "--json", "--draw", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)  # still exactly one JSON document on stdout
    groups = svg_groups(out)
    assert len(matching(groups, r"stage-\d+-forward")) == len(doc["solution"]["stages"])


def test_solve_draw_checks_the_file_type_before_solving(tmp_path, capsys):
    tiny = ROOT / "instances" / "allocation" / "tiny-2gpu.toml"
    captured = _one_line_exit_2(capsys, ["solve", str(tiny), "--draw", str(tmp_path / "x.jpg")], "--draw")
    assert captured.out == ""


def test_solve_draw_of_an_infeasible_result_notes_it_and_keeps_the_exit_code(tmp_path, capsys):
    out = tmp_path / "x.png"
    assert main(["solve", str(ROOT / "instances" / "allocation" / "tiny-infeasible.toml"), "--draw", str(out)]) == 1
    assert "no picture" in capsys.readouterr().err
    assert not out.exists()


def test_plan_draw_writes_the_plan_picture(tmp_path, capsys):
    out = tmp_path / "plan.svg"
    assert main(["plan", "--cluster", "cephalo-a", "--model", "gpt3-2.7b", "--seq", "512", "--workers", "1",
                 "--global-batch", "32", "--microbatch", "2", "--json", "--draw", str(out)]) == 0
    doc = json.loads(capsys.readouterr().out)
    groups = svg_groups(out)
    assert len(matching(groups, r"stage-\d+")) == len(doc["stages"])
    assert len(matching(groups, r"alternative-.+")) == 1 + sum(a["iteration_time_s"] is not None for a in doc["alternatives"])


def test_importing_the_draw_package_or_the_cli_does_not_import_matplotlib():
    code = "import sys, hetopt.cli, hetopt.draw; print(sorted(m for m in sys.modules if m.startswith('matplotlib')))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert proc.stdout.strip() == "[]"


def test_the_drawing_page_shows_a_committed_picture_of_each_kind():
    text = (ROOT / "docs" / "drawing.md").read_text(encoding="utf-8")
    for kind in (*KINDS, "gantt"):
        shown = re.findall(rf"\]\((pictures/{kind}[\w.-]*\.(?:svg|png))\)", text)
        assert shown, kind
        assert all((ROOT / "docs" / path).is_file() for path in shown), shown


def test_a_result_too_large_to_draw_is_refused_up_front_with_the_limit(tmp_path):
    """A 20,000-GPU allocation (hetopt's own solve --json) or an island of 200,000 nodes ran
    for minutes (found by fuzzing): bars and squares below a pixel are refused, naming the key."""
    from hetopt.draw import allocation as allocation_picture
    from hetopt.draw import islands as islands_picture
    from hetopt.errors import InputError

    gpu = {"type": "T4", "microbatch_size": 1, "microbatches": 1, "state_share": 0.0, "memory_gib": 1.0}
    many = {"problem": "allocation", "solution": {"gpus": [gpu] * (allocation_picture.MAX_GPUS + 1)}}
    with pytest.raises(InputError, match=r"big.json: solution.gpus: 2,049 GPUs, above the 2,048"):
        draw(many, tmp_path / "a.svg", source="big.json")
    nodes = [f"n{i}" for i in range(islands_picture.MAX_NODES + 1)]
    wide = {"problem": "islands", "solution": {"islands": [{"nodes": nodes, "gpus": 8, "gpu": "T4"}]}}
    with pytest.raises(InputError, match=r"big.json: solution.islands: 8,193 nodes, above the 8,192"):
        draw(wide, tmp_path / "i.svg", source="big.json")
