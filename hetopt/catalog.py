"""Where the shipped reference data lives: the one definition of the ``instances/`` path.

The repository's top-level ``instances/`` folder (GPU catalog, model shapes, cluster files,
Cephalo's measured profiles, published measurements, instance files and suites) ships as the
package ``hetopt._instances`` (``pyproject.toml`` maps it), so an editable install, a source
checkout and a wheel install all find it here. Only the edges (readers, generators, the CLI)
call this; algorithms take data, never paths (CONVENTIONS §7). Imports nothing of the project
(but its error type, when the data cannot be found).
"""

from __future__ import annotations

from pathlib import Path


def instances_dir() -> Path:
    """The folder of the shipped reference data and instances.

    Returns
    -------
    Path
        ``instances/`` of the checkout (editable install) or ``hetopt/_instances`` of an
        installed wheel; it holds ``gpus.toml``, ``models/``, ``clusters/``, ``profiles/``,
        ``published/``, ``allocation/``, ``pipeline/``, ``islands/`` and ``suites/``.

    Examples
    --------
    >>> (instances_dir() / "gpus.toml").is_file()
    True
    """
    try:
        import hetopt._instances
    except ModuleNotFoundError:  # run from a checkout that was never installed: its own folder
        from hetopt.errors import InputError

        here = Path(__file__).resolve().parent.parent / "instances"
        if (here / "gpus.toml").is_file():
            return here
        raise InputError("hetopt's shipped data (instances/) is missing: install the package as the README says "
                         "(python -m pip install -e \".[test]\")") from None
    return Path(hetopt._instances.__file__).resolve().parent


#: The shipped published sets (``instances/published``) the cost model is calibrated on, the
#: first being ``hetopt validate``'s default; the other shipped sets are held out: nothing was
#: fitted to them.
CALIBRATION_SETS = ("megatron-sc21", "amp-t4-g4dn", "sailor-gh200")

