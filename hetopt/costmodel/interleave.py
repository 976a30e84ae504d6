"""A stage's price under Megatron's interleaved 1F1B schedule: activations in flight and times as
the composition's closed form must see them (Narayanan et al. SC'21, §2.2.2).

Part of the cost model's one home for a stage's price (:mod:`hetopt.costmodel.stage` prices a
stage; this rescales the stages of an interleaved layout).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from hetopt.costmodel.stage import StageCost


def interleaved_in_flight(q: int, pp: int, vpp: int, microbatches: int) -> float:
    """Micro-batches of activations stage q holds at its peak under Megatron's interleaved 1F1B.

    Megatron-LM's schedule runs (p − q − 1)·2 + (v − 1)·p warm-up chunk forwards on rank q
    (``get_forward_backward_func``, interleaved: ``num_warmup_microbatches``), at most all
    M·v chunks, then holds one more; a chunk is 1/v of the stage's layers.

    Examples
    --------
    >>> interleaved_in_flight(0, 4, 2, 16), interleaved_in_flight(3, 4, 2, 16)
    (5.5, 2.5)
    """
    chunks = min((pp - q - 1) * 2 + (vpp - 1) * pp, microbatches * vpp - 1) + 1
    return chunks / vpp

def interleaved_stages(stages: Sequence[StageCost], vpp: int, microbatches: int) -> tuple[StageCost, ...]:
    """The stages of an interleaved layout as the composition's 1F1B closed form must see them.

    The interleaved schedule (Narayanan et al. SC'21, §2.2.2) takes
    T = M·max t + (Σ t − max t)/v: the bottleneck GPU is busy M·t and the warm-up and
    cool-down are made of chunks of 1/v of a stage. The closed form Σ x + (M − 1)·max x
    gives exactly that when the slowest stage keeps its time and the others enter at 1/v of
    theirs; the activations are scaled so that the composition's in-flight count (p − q for a
    whole-model block) times them is :func:`interleaved_in_flight` times the real ones.
    Only a whole-model plan may be interleaved (nothing runs in front of or behind it).

    Examples
    --------
    >>> st = StageCost(2, 0.1, 0.2, static_bytes=4.0, activation_bytes=2.0, gpus=1)
    >>> slow = StageCost(2, 0.2, 0.4, static_bytes=4.0, activation_bytes=2.0, gpus=1)
    >>> out = interleaved_stages([st, slow], 2, 8)
    >>> [round(x.time_s, 6) for x in out], round(sum(x.time_s for x in out) + 7 * max(x.time_s for x in out), 9)
    ([0.15, 0.6], 4.95)
    """
    pp = len(stages)
    slowest = max(range(pp), key=lambda q: stages[q].time_s)
    out = []
    for q, st in enumerate(stages):
        share = 1.0 if q == slowest else 1.0 / vpp
        scale = interleaved_in_flight(q, pp, vpp, microbatches) / min(pp - q, microbatches)
        out.append(replace(st, forward_s=st.forward_s * share, backward_s=st.backward_s * share,
                           activation_bytes=st.activation_bytes * scale))
    return tuple(out)


__all__ = ["interleaved_in_flight", "interleaved_stages"]
