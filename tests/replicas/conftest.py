"""Shared helpers of the replicas tests."""

from __future__ import annotations

from pathlib import Path

from hetopt.replicas.problem import GBPS, Candidate, IslandShape, ReplicasInstance

INSTANCES = Path(__file__).resolve().parents[2] / "instances" / "replicas"


def two_shapes(**overrides) -> ReplicasInstance:
    """A hand-checkable instance: 2 A-islands, 1 B-island, two candidates, N = 6, no ring latency."""
    fields = {
        "name": "hand",
        "microbatches": 6,
        "shapes": (IslandShape("A", 2, "A100", 8), IslandShape("B", 1, "V100", 8)),
        "candidates": (
            # T(n) = 1 + 0.5 (n - 1); ρ = 1e9 / 1e10 = 0.1 s
            Candidate("a", (1, 0), 1.0, 0.5, 1e9, 1e10),
            # T(n) = 2 + 1 (n - 1); ρ = 2e9 / 1e10 = 0.2 s
            Candidate("ab", (1, 1), 2.0, 1.0, 2e9, 1e10),
        ),
        "hop_latency_s": 0.0,
    }
    fields.update(overrides)
    return ReplicasInstance(**fields)


def candidate(name="c", uses=(1,), fill=1.0, per=0.5, grad=1e9, gbps=100.0) -> Candidate:
    """One candidate with defaults."""
    return Candidate(name, tuple(uses), fill, per, grad, gbps * GBPS)
