"""What the cost model has been calibrated on, and a plan's regimes that no calibration covers.

The shipped calibration sets (``hetopt.catalog.CALIBRATION_SETS``: measured runs) and the GPU
catalog (``calibrated``: a measured per-layer profile, of the GPU or of its chip) are the
model's evidence. A plan that relies on a regime outside them is priced by the same physics,
but nothing measured says how far off it is; :func:`outside_calibration` names such regimes,
one sentence each, and ``hetopt plan`` and ``hetopt validate`` print them:

* a GPU the catalog marks as not calibrated (no profile of its own or of its chip);
* a network (one node's, between the nodes of an island) more than ``NETWORK_FACTOR`` away from
  every network a calibration run measured;
* a micro-batch of fewer tokens per GPU than ``TOKENS_FACTOR`` times the fewest a calibration run
  used (small GEMMs, where launch overheads dominate);
* stages priced at the host's floor (``cm.host_floor_s``): a measurement of eager PyTorch on one
  machine, which no calibration run binds.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from dataclasses import dataclass

from hetopt.hardware import GpuType
from hetopt.units import GBPS

#: A network within this factor of a measured one counts as measured.
NETWORK_FACTOR = 2.0
#: A micro-batch of at least this share of the fewest tokens per GPU measured counts as measured.
TOKENS_FACTOR = 0.5


@dataclass(frozen=True)
class Coverage:
    """The regimes the calibration sets measured."""

    networks_gbps: tuple[float, ...]  # one node's network, of every multi-node calibration cluster
    fewest_tokens: int  # tokens per GPU in one micro-batch, the fewest of any calibration row


@functools.lru_cache(maxsize=1)
def calibration_coverage() -> Coverage:
    """What the shipped calibration sets measured (read once)."""
    from hetopt.catalog import CALIBRATION_SETS, instances_dir
    from hetopt.planner.evaluation.published import load_published

    networks, tokens = set(), []
    for name in CALIBRATION_SETS:
        for m in load_published(instances_dir() / "published" / f"{name}.toml"):
            if m.island.nodes > 1:
                networks.add(round(m.island.inter_bandwidth / GBPS, 6))
            if m.layout.microbatch:
                tokens.append(m.layout.microbatch * m.seq // max(1, m.layout.cp))
    return Coverage(tuple(sorted(networks)), min(tokens))


def outside_calibration(gpus: Iterable[GpuType], networks_gbps: Iterable[float], tokens_per_gpu: Iterable[int],
                        coverage: Coverage | None = None, *, host_bound: int = 0) -> list[str]:
    """One sentence per regime of a plan or a layout that no calibration covers (empty: none).

    Parameters
    ----------
    gpus
        The GPU types it runs on.
    networks_gbps
        One node's network of every island whose stages span nodes, Gb/s.
    tokens_per_gpu
        Tokens per GPU in one micro-batch, per stage or layout.
    host_bound
        How many of its stages the host's floor prices (``StageCost.host_bound``).

    Examples
    --------
    >>> cov = Coverage(networks_gbps=(50.0, 1600.0), fewest_tokens=1024)
    >>> from hetopt.hardware import load_gpus
    >>> outside_calibration([load_gpus()["T4"]], [10.0], [256], cov)  # doctest: +NORMALIZE_WHITESPACE
    ['network 10 Gb/s a node: no calibration run measured one within 2x (measured: 50, 1600 Gb/s)',
     'micro-batches of 256 tokens per GPU: below half the fewest a calibration run used (1024)']
    >>> outside_calibration([], [], [], cov, host_bound=2)[0][:44]
    "2 stages priced at the host's floor (its ker"
    """
    coverage = calibration_coverage() if coverage is None else coverage
    notes = [f"{g.name}: no measured profile calibrates it (the catalog's figures{': ' + g.calibration if g.calibration else ''})"
             for g in dict.fromkeys(gpus) if not g.calibrated]
    measured = ", ".join(f"{x:g}" for x in coverage.networks_gbps)
    for gbps in sorted(set(networks_gbps)):
        if not any(x / NETWORK_FACTOR <= gbps <= x * NETWORK_FACTOR for x in coverage.networks_gbps):
            notes.append(f"network {gbps:g} Gb/s a node: no calibration run measured one within {NETWORK_FACTOR:g}x "
                         f"(measured: {measured} Gb/s)")
    fewest = min(tokens_per_gpu, default=None)
    if fewest is not None and fewest < TOKENS_FACTOR * coverage.fewest_tokens:
        notes.append(f"micro-batches of {fewest} tokens per GPU: below half the fewest a calibration run used "
                     f"({coverage.fewest_tokens})")
    if host_bound:
        notes.append(f"{host_bound} stage{'s' if host_bound > 1 else ''} priced at the host's floor (its kernels are "
                     "shorter than eager PyTorch's time to issue them, measured on one machine; no calibration run "
                     "binds it)")
    return notes


__all__ = ["Coverage", "NETWORK_FACTOR", "TOKENS_FACTOR", "calibration_coverage", "outside_calibration"]
