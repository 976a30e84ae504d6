"""The command line on bad options, bad paths and bugs: one line on stderr and a documented exit code."""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

import hetopt.cli as cli
from hetopt.cli import EXIT_INTERNAL, EXIT_USAGE, main
from hetopt.errors import SolverBug

ROOT = Path(__file__).resolve().parents[2]
TINY = str(ROOT / "instances" / "allocation" / "tiny-2gpu.toml")
ISLANDS = str(ROOT / "instances" / "islands" / "tiny.toml")
INFEASIBLE = str(ROOT / "instances" / "pipeline" / "infeasible-gpt3-13b-t4x4.toml")


def run(capsys, *argv):
    """(exit code, stdout, stderr lines) of one in-process run."""
    try:
        code = main(list(argv))
    except SystemExit as exc:  # argparse's own usage errors
        code = exc.code
    captured = capsys.readouterr()
    return code, captured.out, captured.err.splitlines()


@pytest.mark.parametrize("value", ["-1", "-1e-9", "nan", "inf", "abc"])
@pytest.mark.parametrize("command", ["solve", "crosscheck", "bench"])
def test_a_bad_time_limit_is_one_line_and_exit_2(capsys, command, value):
    code, out, err = run(capsys, command, TINY, f"--time-limit={value}")
    assert code == EXIT_USAGE and out == "" and len(err) == 1 and "--time-limit" in err[0]


@pytest.mark.parametrize("flag", ["--threads=0", "--seed=-1", "--workers=0", "--backend=gurobi"])
def test_bad_solver_options_are_one_line_and_exit_2(capsys, flag):
    code, out, err = run(capsys, "solve", TINY, flag)
    assert code == EXIT_USAGE and out == "" and err[-1].startswith("hetopt: ") and len(err) <= 2  # + the --workers note


def test_threads_and_the_deprecated_workers(capsys):
    code, out, err = run(capsys, "solve", TINY, "--method", "cpsat", "--threads", "2", "--json")
    assert code == 0 and err == [] and json.loads(out)["status"] == "OPTIMAL"
    code, out, err = run(capsys, "crosscheck", TINY, "--methods", "dp,cpsat", "--workers", "2", "--json")
    assert code == 0 and json.loads(out)["agree"] is True
    assert len(err) == 1 and "deprecated" in err[0] and "--threads" in err[0]


@pytest.mark.parametrize("methods", ["dp", "dp,dp", ""])
def test_crosscheck_of_fewer_than_two_methods_is_a_usage_error(capsys, methods):
    code, out, err = run(capsys, "crosscheck", TINY, "--methods", methods)
    assert code == EXIT_USAGE and out == "" and len(err) == 1 and "at least two" in err[0]


def test_crosscheck_with_one_proven_answer_says_so(capsys):
    code, out, err = run(capsys, "crosscheck", ISLANDS, "--methods", "dp,greedy")
    assert code == 0 and "agree: yes" not in out
    assert "only one method proved an answer (dp)" in out
    code, out, err = run(capsys, "crosscheck", ISLANDS, "--methods", "dp,greedy", "--json")
    doc = json.loads(out)
    assert doc["agree"] is None and doc["compared"] == 1


def test_bench_repeat_0_is_exit_2(capsys):
    code, out, err = run(capsys, "bench", TINY, "--repeat", "0")
    assert code == EXIT_USAGE and out == "" and len(err) == 1 and "--repeat" in err[0]


def test_bench_csv_lines_end_in_newline_only(capsys):
    code, out, err = run(capsys, "bench", TINY, "--methods", "dp,milp", "--csv")
    assert code == 0 and "\r" not in out
    assert [r["method"] for r in csv.DictReader(io.StringIO(out))] == ["dp", "milp"]


def test_bench_table_prints_wall_time_in_fixed_point(capsys):
    # "5.5e-05" in the wall_s column read as 5.5 s next to solve's 0.000 s
    code, out, err = run(capsys, "bench", INFEASIBLE, "--methods", "dp,milp")
    assert code == 0 and "INFEASIBLE" in out
    assert "e-0" not in out and "0.000" in out


@pytest.mark.parametrize("kind", ["folder", "folder/", "missing-folder", "under-a-file"])
def test_solve_out_is_checked_before_solving(capsys, tmp_path, monkeypatch, kind):
    target = {
        "folder": str(tmp_path),
        "folder/": str(tmp_path / "new") + "/",
        "missing-folder": str(tmp_path / "nope" / "r.json"),
        "under-a-file": TINY + "/r.json",
    }[kind]
    monkeypatch.setattr(cli, "solve", lambda *a, **k: pytest.fail("solved before checking --out"))
    code, out, err = run(capsys, "solve", TINY, "--out", target)
    assert code == EXIT_USAGE and out == "" and len(err) == 1 and "--out" in err[0]


def test_a_problem_that_is_not_a_string_is_exit_2(capsys, tmp_path):
    bad = tmp_path / "p.toml"
    bad.write_text("problem = [1, 2]\n")
    code, out, err = run(capsys, "solve", str(bad))
    assert code == EXIT_USAGE and len(err) == 1 and "problem: must be a string" in err[0]


@pytest.mark.parametrize(
    ("path", "says"),
    [
        ("instances/clusters/tangram-c3.toml", "hetopt plan --cluster"),
        ("instances/models/gpt3-13b.toml", "hetopt plan --model"),
        ("instances/gpus.toml", "GPU catalog"),
    ],
)
def test_a_cluster_model_or_catalog_file_given_to_solve_is_named(capsys, path, says):
    code, out, err = run(capsys, "solve", str(ROOT / path))
    assert code == EXIT_USAGE and len(err) == 1 and says in err[0]


@pytest.mark.parametrize(
    ("exc", "says"),
    [(RuntimeError("boom"), "internal error: RuntimeError: boom"), (SolverBug("x/dp: wrong"), "solver bug: x/dp: wrong"),
     (AttributeError("no attribute"), "internal error: AttributeError")],
)
def test_an_unexpected_exception_is_exit_4_without_a_traceback(capsys, monkeypatch, exc, says):
    def failing(*args, **kwargs):
        raise exc

    monkeypatch.setattr(cli, "solve", failing)
    monkeypatch.delenv(cli.DEBUG_ENV, raising=False)
    code, out, err = run(capsys, "solve", TINY)
    assert code == EXIT_INTERNAL and len(err) == 1 and says in err[0] and "report" in err[0]
    code, out, err = run(capsys, "solve", TINY, "--debug")
    assert code == EXIT_INTERNAL and err[0].startswith("Traceback") and says in err[-1]
    monkeypatch.setenv(cli.DEBUG_ENV, "1")
    code, out, err = run(capsys, "solve", TINY)
    assert code == EXIT_INTERNAL and err[0].startswith("Traceback")


def test_help_lists_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["--help"])
    out = capsys.readouterr().out
    assert "exit codes" in out and "4  internal error" in out and "3  time limit" in out


def test_validate_refuses_unknown_ids_and_a_set_that_repeats_one(capsys, tmp_path):
    code, out, err = run(capsys, "validate", "--only", "no-such-row")
    assert code == EXIT_USAGE and out == "" and len(err) == 1 and "no measurement 'no-such-row'" in err[0]
    code, out, err = run(capsys, "validate", "--only", ",")
    assert code == EXIT_USAGE and len(err) == 1 and "give comma-separated measurement ids" in err[0]
    text = (ROOT / "instances" / "published" / "eleutherai-neox-a100.toml").read_text()
    row = text[text.index("[[measurement]]"):]
    twice = tmp_path / "twice.toml"
    twice.write_text(text + "\n" + row)
    code, out, err = run(capsys, "validate", "--file", str(twice))
    assert code == EXIT_USAGE and len(err) == 1 and "measurement[1].id" in err[0] and "also names measurement[0]" in err[0]


@pytest.mark.parametrize("kv_heads", [3, 8])
def test_a_model_whose_kv_heads_do_not_divide_its_heads_is_refused(capsys, tmp_path, kv_heads):
    model = tmp_path / "gqa.toml"
    model.write_text(f'name = "gqa"\narchitecture = "llama"\nlayers = 4\nhidden = 256\nheads = 4\nkv_heads = {kv_heads}\n'
                     'ffn = 1024\nvocab = 1000\nsequence = 512\n')
    code, out, err = run(capsys, "plan", "--cluster", "cephalo-a", "--model", str(model), "--global-batch", "8")
    assert code == EXIT_USAGE and len(err) == 1 and f"kv_heads: {kv_heads} does not divide heads 4" in err[0]


def test_crosscheck_by_the_familys_choice_of_one_method_reports_it_alone(capsys, monkeypatch):
    """On an instance too large for all but dp, the default crosscheck runs dp and says there
    was nothing to compare (exit 0), as the help's exit codes promise; it was a usage error
    naming --methods, which the user had not given (found by fuzzing)."""
    from hetopt import solvers

    import dataclasses

    allocation = solvers.family("allocation")
    monkeypatch.setitem(solvers.FAMILIES, "allocation", dataclasses.replace(allocation, crosscheck_methods=lambda instance: ["dp"]))
    code, out, err = run(capsys, "crosscheck", TINY)
    assert code == 0 and err == [] and "only one method proved an answer (dp)" in out


def test_a_plan_priced_below_the_solvers_resolution_names_the_model_and_the_fix(capsys):
    """A one-token sequence makes a link cost 0.5 µs, below the pipeline family's 1 µs: the
    message named only the family's internal key (link m1-...: time_s); it names the model
    and --seq now (found by fuzzing)."""
    code, out, err = run(capsys, "plan", "--cluster", "cephalo-a", "--model", "gpt3-1.3b", "--global-batch", "8", "--seq", "1",
                         "--no-alternatives")
    assert code == EXIT_USAGE and len(err) == 1 and "model GPT-3 1.3B" in err[0] and "(--seq)" in err[0]


def test_replicas_on_a_cluster_of_one_node_plan(capsys, tmp_path):
    """One node needs no [network]; --replicas on it failed on the replicas family's internal
    bandwidth key (0 Gb/s) where the plain plan succeeded (found by fuzzing)."""
    one = tmp_path / "one.toml"
    one.write_text('name = "one"\n[[node]]\nname = "a"\ngpu = "A100-SXM4-80GB"\ngpus = 8\n')
    code, out, err = run(capsys, "plan", "--cluster", str(one), "--model", "gpt3-1.3b", "--global-batch", "16", "--replicas",
                         "--no-alternatives", "--json")
    assert code == 0 and err == [], err
    assert json.loads(out)["replicas"]["status"] in ("OPTIMAL", "FEASIBLE")


def test_solve_prints_at_most_a_screenful_of_solution_rows(capsys, tmp_path):
    """A solution of thousands of rows took seconds to lay out after the solver had kept its
    time limit (found by fuzzing); the table stops at MAX_TABLE_ROWS and counts the rest."""
    head = Path(TINY).read_text().split("[[gpu]]")[0].replace("global_batch = 8", "global_batch = 512")
    groups = "".join(f'[[gpu]]\ntype = "g{i}"\ncount = 1\nmemory_gib = {16 + i % 8}.0\nforward_slope_s = {0.001 + i * 1e-6}\n'
                     'forward_intercept_s = 0.002\nbackward_slope_s = 0.002\nbackward_intercept_s = 0.004\n' for i in range(cli.MAX_TABLE_ROWS + 10))
    path = tmp_path / "many.toml"
    path.write_text(head + groups)
    code, out, err = run(capsys, "solve", str(path))
    assert code == 0, err
    assert "... 10 more rows (every row: --json)" in out


def test_odd_values_in_a_scheduler_a_profile_or_a_result_get_one_line(capsys, tmp_path):
    """Found by fuzzing: an unclosed IPv6 bracket ("Invalid IPv6 URL", naming nothing), NaN
    latencies in a profile ("TOML has no nan", after a file was written), a result whose time
    is 1e308 s (matplotlib's warning lines, then "Axis limits cannot be NaN or Inf")."""
    code, out, err = run(capsys, "plan", "--cluster", "cephalo-a", "--model", "gpt3-1.3b", "--global-batch", "8",
                         "--scheduler", "tcp://[::1")
    assert code == EXIT_USAGE and len(err) == 1 and "--scheduler tcp://[::1: not an address" in err[0]

    profiles = tmp_path / "profiles"
    profiles.mkdir()
    for src in (ROOT / "instances" / "profiles" / "cephalo").glob("*.json"):
        (profiles / src.name).write_text(src.read_text())
    latencies = json.loads((profiles / "model_latencies.json").read_text())

    def poison(node):  # every number a NaN
        if isinstance(node, dict):
            return {k: poison(v) for k, v in node.items()}
        if isinstance(node, list):
            return [poison(v) for v in node]
        return float("nan") if isinstance(node, (int, float)) else node

    (profiles / "model_latencies.json").write_text(json.dumps(poison(latencies)))
    out_folder = tmp_path / "out"
    code, out, err = run(capsys, "generate", "allocation", "--out", str(out_folder), "--profiles", str(profiles))
    assert code == EXIT_USAGE and len(err) == 1 and "every latency must be a finite number" in err[0]
    assert not any(out_folder.glob("*.toml"))  # refused before anything was written

    code, out, err = run(capsys, "solve", str(ROOT / "instances" / "pipeline" / "tiny.toml"), "--json")
    doc = json.loads(out)
    doc["solution"]["stages"][0]["forward_s"] = 1e308
    result = tmp_path / "huge.json"
    result.write_text(json.dumps(doc))
    code, out, err = run(capsys, "draw", str(result), "-o", str(tmp_path / "huge.svg"))
    assert code == EXIT_USAGE and len(err) == 1 and "huge.json: a time or size too large to draw" in err[0], err


@pytest.mark.parametrize(("node", "says"), [('node = "abc"', "node: a string, not an array of tables"),
                                            ('[node]\nname = "a"', "node: a table, not an array of tables")])
def test_a_cluster_whose_node_is_not_an_array_of_tables_says_so(capsys, tmp_path, node, says):
    """It said 'node: missing' (found by fuzzing)."""
    path = tmp_path / "c.toml"
    path.write_text(f'name = "c"\n{node}\n')
    code, out, err = run(capsys, "plan", "--cluster", str(path), "--model", "gpt3-1.3b", "--global-batch", "8")
    assert code == EXIT_USAGE and len(err) == 1 and says in err[0]


def test_drawing_a_toml_input_points_to_what_draws_it(capsys, tmp_path):
    code, out, err = run(capsys, "draw", str(ROOT / "instances" / "clusters" / "cephalo-a.toml"), "-o", str(tmp_path / "x.svg"))
    assert code == EXIT_USAGE and len(err) == 1 and "a TOML input, not a result" in err[0] and "hetopt plan" in err[0]


def test_a_layout_in_another_scripts_digits_and_an_moe_model_without_moe_layers_are_refused(capsys, tmp_path):
    """Found by fuzzing: "tp=١" (Arabic-Indic one) planned as tp=1; moe_every past the last
    layer gave a model with experts on no layer."""
    code, out, err = run(capsys, "plan", "--cluster", "cephalo-a", "--model", "gpt3-1.3b", "--global-batch", "8",
                         "--layout", "tp=\u0661 pp=1 dp=1")
    assert code == EXIT_USAGE and len(err) == 1 and "must be a whole number" in err[0]
    model = tmp_path / "moe.toml"
    model.write_text('name = "moe"\narchitecture = "gpt"\nlayers = 4\nhidden = 256\nheads = 4\nffn = 1024\nvocab = 1000\n'
                     "sequence = 512\nexperts = 8\ntop_k = 2\nmoe_every = 99\n")
    code, out, err = run(capsys, "plan", "--cluster", "cephalo-a", "--model", str(model), "--global-batch", "8")
    assert code == EXIT_USAGE and len(err) == 1 and "moe_every: 99 exceeds layers 4" in err[0]


def test_a_suite_naming_an_unknown_method_names_the_suite_and_its_key(capsys, tmp_path):
    suite = tmp_path / "suite.toml"
    suite.write_text(f'suite = "x"\n[[instance]]\npath = "{TINY}"\nmethods = ["foo"]\n')
    code, out, err = run(capsys, "bench", str(suite))
    assert code == EXIT_USAGE and len(err) == 1 and "suite.toml: instance[0].methods: unknown method 'foo'" in err[0]


def test_generate_writes_nothing_from_profiles_that_give_instances_the_reader_refuses(capsys, tmp_path):
    """Negated latencies wrote instances that solve then refused (found by fuzzing)."""
    profiles = tmp_path / "profiles"
    profiles.mkdir()
    for src in (ROOT / "instances" / "profiles" / "cephalo").glob("*.json"):
        (profiles / src.name).write_text(src.read_text())

    def negate(node):
        if isinstance(node, dict):
            return {k: negate(v) for k, v in node.items()}
        if isinstance(node, list):
            return [negate(v) for v in node]
        return -node if isinstance(node, (int, float)) and not isinstance(node, bool) else node

    latencies = json.loads((profiles / "model_latencies.json").read_text())
    (profiles / "model_latencies.json").write_text(json.dumps(negate(latencies)))
    out_folder = tmp_path / "out"
    code, out, err = run(capsys, "generate", "allocation", "--out", str(out_folder), "--profiles", str(profiles))
    assert code == EXIT_USAGE and len(err) == 1 and "gives an instance the reader refuses" in err[0]
    assert not out_folder.exists()


def test_generate_refuses_profiles_where_it_reads_none(capsys, tmp_path):
    code, out, err = run(capsys, "generate", "pipeline", "--out", str(tmp_path / "p"), "--profiles", str(tmp_path))
    assert code == EXIT_USAGE and len(err) == 1 and "only `hetopt generate allocation` reads profiles" in err[0]


def test_a_time_limit_longer_than_poll_can_wait_is_kept(capsys):
    """poll() takes at most 2^31 ms: --time-limit 1e10 on a MILP method was exit 4 (found by fuzzing)."""
    code, out, err = run(capsys, "solve", TINY, "--method", "milp", "--time-limit", "1e10")
    assert code == 0 and err == []
