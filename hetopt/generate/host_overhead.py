"""Measuring the host side of one transformer layer in eager PyTorch.

A training step in eager PyTorch is issued op by op from the host: Python calls the module,
the dispatcher picks a kernel, autograd records a node, the kernel is launched. The GPU runs
ahead of none of that: when its kernels take less time than the host needs to issue them, the
host sets the pace (formulations/costmodel.md, "The host's floor").

This script measures that host time with the kernels made negligible: a GPT layer in the op
sequence Megatron-LM runs (LayerNorm; the QKV projection; split into heads; ``baddbmm`` for the
scores; masked softmax; dropout; ``bmm`` with the values; the output projection, dropout and
residual; LayerNorm; the two-matrix GELU FFN, dropout and residual), on CPU tensors of one to a
few elements, one thread. What remains is the per-op cost of Python, the dispatcher and
autograd, with a one-element CPU kernel standing in for the CUDA launch (``cudaLaunchKernel``
is a few microseconds more; not counted, so the measured floor is a lower bound).

An MoE layer replaces the FFN with Megatron-Core's MoE op sequence: the router's linear,
softmax and top-k; the permutation of the routed token copies by expert (argsort, gather,
per-expert counts and split); each local expert's FFN in turn, as its ``SequentialMLP`` runs
them; the unpermutation (scatter back, scale by the routing weights, sum the k copies). Timed
with 1, 2, 4, 8 and 16 local experts, the least-squares line gives the layer's base and the
cost of one more local expert.

``python -m hetopt.generate.host_overhead`` prints the medians the cost model's
``HOST_LAYER_FORWARD_S`` and ``HOST_LAYER_BACKWARD_S`` hold, the MoE line in units of the dense
layer of the same run (``HOST_MOE_LAYER``, ``HOST_LOCAL_EXPERT``), and the op counts. It needs torch (the ``runtimes`` extra).
"""

from __future__ import annotations

import statistics
import time

#: Layer shape of the measurement: small enough that no kernel costs more than its call.
HIDDEN, HEADS, TOKENS = 8, 2, 2
#: Layers per timed call (amortises the loop) and timed calls per sample.
LAYERS, CALLS = 8, 300


#: Local experts of the timed MoE layers (the line through them: base and per-expert cost).
LOCAL_EXPERTS = (1, 2, 4, 8, 16)
#: Routed copies of a token (top-k) in the timed MoE layers.
TOP_K = 2


def _layer_class(torch, experts: int = 0):
    """A GPT layer (``experts`` 0) or an MoE layer with ``experts`` local experts."""
    functional = torch.nn.functional
    h, heads, s = HIDDEN, HEADS, TOKENS
    d = h // heads

    class GptLayer(torch.nn.Module):
        """Megatron's op sequence for a [s, b, h] input (b = 1)."""

        def __init__(self) -> None:
            super().__init__()
            self.ln1, self.ln2 = torch.nn.LayerNorm(h), torch.nn.LayerNorm(h)
            self.qkv, self.proj = torch.nn.Linear(h, 3 * h), torch.nn.Linear(h, h)
            if experts:
                # the router scores every expert of the model (at least top-k); the layer computes
                # its local ones
                self.router = torch.nn.Linear(h, max(experts, TOP_K), bias=False)
                self.fc1 = torch.nn.ModuleList(torch.nn.Linear(h, 4 * h) for _ in range(experts))
                self.fc2 = torch.nn.ModuleList(torch.nn.Linear(4 * h, h) for _ in range(experts))
            else:
                self.fc1, self.fc2 = torch.nn.Linear(h, 4 * h), torch.nn.Linear(4 * h, h)
            self.register_buffer("mask", torch.ones(s, s, dtype=torch.bool).triu(1))

        def ffn(self, y):
            if not experts:
                return self.fc2(functional.gelu(self.fc1(y)))
            tokens = y.view(s, h)
            weights, chosen = torch.topk(torch.softmax(self.router(tokens), dim=-1), TOP_K, dim=-1)
            order = torch.argsort(chosen.view(-1), stable=True)  # permute: the copies grouped by expert
            routed = tokens.index_select(0, order // TOP_K)
            counts = torch.bincount(chosen.view(-1), minlength=self.router.out_features).tolist()
            parts = torch.split(routed, counts)
            # the local experts' FFNs in turn; the other experts' copies stand in for what the
            # other EP ranks send back
            outs = [self.fc2[e](functional.gelu(self.fc1[e](parts[e]))) for e in range(experts)] + list(parts[experts:])
            back = torch.zeros(s * TOP_K, h).index_copy(0, order, torch.cat(outs))  # unpermute
            return (back.view(s, TOP_K, h) * weights.unsqueeze(-1)).sum(dim=1).view(s, 1, h)

        def forward(self, x):
            y = self.ln1(x)
            q, k, v = torch.split(self.qkv(y).view(s, 1, heads, 3 * d), d, dim=-1)
            q, k, v = (t.reshape(s, heads, d).transpose(0, 1) for t in (q, k, v))
            scores = torch.baddbmm(torch.empty(heads, s, s), q, k.transpose(1, 2), beta=0.0, alpha=d ** -0.5)
            p = functional.dropout(torch.softmax(scores.masked_fill(self.mask, -1e4), dim=-1), 0.1, True)
            ctx = torch.bmm(p, v).transpose(0, 1).contiguous().view(s, 1, h)
            x = x + functional.dropout(self.proj(ctx), 0.1, True)
            return x + functional.dropout(self.ffn(self.ln2(x)), 0.1, True)

    return GptLayer


def measure(samples: int = 5, experts: int = 0) -> dict[str, float]:
    """Median host seconds per layer of forward and of backward, and ops per layer (an MoE layer
    with ``experts`` local experts; 0: a dense GPT layer).

    Examples
    --------
    >>> m = measure(samples=1)  # doctest: +SKIP
    >>> sorted(m)  # doctest: +SKIP
    ['backward_nodes', 'backward_s', 'forward_ops', 'forward_s']
    """
    import torch

    torch.set_num_threads(1)
    torch.manual_seed(0)
    layers = torch.nn.Sequential(*[_layer_class(torch, experts)() for _ in range(LAYERS)])
    x = torch.randn(TOKENS, 1, HIDDEN, requires_grad=True)
    for _ in range(50):  # warm the allocator and the dispatcher's caches
        layers(x).sum().backward()
    forward, both = [], []
    for _ in range(samples):
        t0 = time.perf_counter()
        for _ in range(CALLS):
            layers(x)
        t1 = time.perf_counter()
        for _ in range(CALLS):
            layers(x).sum().backward()
        t2 = time.perf_counter()
        forward.append((t1 - t0) / CALLS / LAYERS)
        both.append((t2 - t1) / CALLS / LAYERS)
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU]) as prof:
        out = layers(x)
    forward_ops = sum(1 for e in prof.events() if e.cpu_parent is None)
    loss = out.sum()
    with profile(activities=[ProfilerActivity.CPU]) as prof:
        loss.backward()
    # autograd's nodes (the layers' backward functions and their weights' gradient
    # accumulation), less the loss's three: the sum's backward, the seed gradient, the input's
    nodes = sum(1 for e in prof.events() if e.cpu_parent is None) - 3
    fwd = statistics.median(forward)
    return {"forward_s": fwd, "backward_s": statistics.median(both) - fwd,
            "forward_ops": forward_ops / LAYERS, "backward_nodes": nodes / LAYERS}


def moe_line(samples: int = 5, dense: dict[str, float] | None = None) -> dict:
    """The MoE layer's host time as a line in its local experts, in units of the dense layer's
    measured in the same run: (base, per expert), forward and backward, least squares over
    :data:`LOCAL_EXPERTS`."""
    dense = dense or measure(samples)
    xs = LOCAL_EXPERTS
    runs = [measure(samples, e) for e in xs]
    mean_x = statistics.fmean(xs)

    def line(key: str) -> tuple[float, float]:
        ys = [r[key] / dense[key] for r in runs]
        slope = (sum((x - mean_x) * (y - statistics.fmean(ys)) for x, y in zip(xs, ys))
                 / sum((x - mean_x) ** 2 for x in xs))
        return statistics.fmean(ys) - slope * mean_x, slope

    return {"forward": line("forward_s"), "backward": line("backward_s"),
            "forward_ops": tuple(r["forward_ops"] for r in runs)}


def main(samples: int = 5) -> int:
    """Print the measured constants (``python -m hetopt.generate.host_overhead``)."""
    import platform

    import torch

    m = measure(samples)
    print(f"# torch {torch.__version__}, {platform.processor() or platform.machine()}, one thread, "
          f"median of {samples}; {m['forward_ops']:.0f} forward ops and {m['backward_nodes']:.0f} backward nodes a layer")
    print(f"HOST_LAYER_FORWARD_S = {m['forward_s']:.3g}")
    print(f"HOST_LAYER_BACKWARD_S = {m['backward_s']:.3g}")
    moe = moe_line(samples, m)
    print(f"# MoE layers with {', '.join(map(str, LOCAL_EXPERTS))} local experts (top-{TOP_K}): "
          f"{', '.join(f'{n:.0f}' for n in moe['forward_ops'])} forward ops; in dense layers of this run")
    print(f"HOST_MOE_LAYER = ({moe['forward'][0]:.3g}, {moe['backward'][0]:.3g})")
    print(f"HOST_LOCAL_EXPERT = ({moe['forward'][1]:.3g}, {moe['backward'][1]:.3g})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
