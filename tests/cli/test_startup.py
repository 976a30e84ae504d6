"""The import boundary that keeps ``hetopt`` quick to start (issue 13, part 4).

``hetopt solve FILE --method dp`` must not import the heavy libraries only other methods use:
OR-Tools (CP-SAT), PuLP (MILP), SciPy's optimize and sparse modules, networkx. Each check runs
in a fresh interpreter, so modules other tests imported cannot hide a leak.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
TINY = ROOT / "instances" / "allocation" / "tiny-2gpu.toml"

#: Modules the dp path must not load (and their submodules).
HEAVY = ("ortools", "pulp", "scipy.optimize", "scipy.sparse", "networkx")

#: Run in a fresh interpreter: the statement, then print which HEAVY modules are loaded.
PROBE = """
import json, sys
{statement}
heavy = {heavy!r}
print(json.dumps(sorted(m for m in sys.modules if any(m == h or m.startswith(h + ".") for h in heavy))))
"""


def _loaded_after(statement: str) -> set[str]:
    code = PROBE.format(statement=statement, heavy=HEAVY)
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    return {h for h in HEAVY if any(m == h or m.startswith(h + ".") for m in loaded)}


@pytest.mark.parametrize("statement", [
    "import hetopt",
    "import hetopt.cli",
    # the dp solve path in-process, as the command runs it (human output, then JSON)
    f"import hetopt.cli; assert hetopt.cli.main(['solve', {str(TINY)!r}, '--method', 'dp']) == 0",
    f"import hetopt.cli; assert hetopt.cli.main(['solve', {str(TINY)!r}, '--json']) == 0",
    "import hetopt.cli; hetopt.cli.main(['methods'])",
])
def test_the_dp_path_imports_no_heavy_solver_library(statement):
    assert _loaded_after(statement) == set()


def test_the_probe_sees_a_heavy_import_when_one_happens():
    # the MILP and CP-SAT methods do load their libraries: the probe above can fail
    statement = (f"import hetopt.cli; hetopt.cli.main(['solve', {str(TINY)!r}, '--method', 'milp']); "
                 f"hetopt.cli.main(['solve', {str(TINY)!r}, '--method', 'cpsat'])")
    assert {"pulp", "ortools"} <= _loaded_after(statement)


def test_public_names_of_the_families_still_import():
    # the registries name methods by module path; the old package-level names resolve lazily
    from hetopt.allocation import TIME_QUANTUM_S, solve_milp
    from hetopt.islands import solve_dp, solve_greedy
    from hetopt.pipeline import error_bound, solve_cpsat_model

    assert solve_milp.__module__ == "hetopt.allocation.milp" and TIME_QUANTUM_S == 1e-9
    assert solve_dp.__module__ == "hetopt.islands.dp" and solve_greedy.__module__ == "hetopt.islands.heuristic"
    assert solve_cpsat_model.__module__ == "hetopt.pipeline.cpsat" and callable(error_bound)
    with pytest.raises(ImportError):
        from hetopt.allocation import no_such_name  # noqa: F401
