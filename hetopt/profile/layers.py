"""One part of a GPT model in torch, the shape of a :class:`~hetopt.workload.ModelConfig`, timed.

``hetopt profile`` measures one part per setting, never a stage of several: a transformer layer
(LayerNorm, causal self-attention, LayerNorm, a two-matrix GELU FFN, residuals), the input
embedding (token and position tables) or the output head (the vocabulary projection and the
cross-entropy loss). Under TP degree t the part holds one GPU's share of it (heads/t, ffn/t,
vocab/t, as Megatron splits them); its TP collectives are measured apart, as collectives
(docs/formats.md, "Profiles").

torch is imported by the functions that need it (``import hetopt`` works without it).
"""

from __future__ import annotations

import statistics
import time
from dataclasses import dataclass

from hetopt.errors import InputError

#: torch's dtype of each precision a profile names (tf32: fp32 tensors, TF32 matmuls on CUDA)
DTYPES = {"fp32": "float32", "tf32": "float32", "bf16": "bfloat16", "fp16": "float16"}
#: The extra that brings torch (the message when it is missing).
TORCH_EXTRA = "pip install 'hetopt[runtimes]'"


def need_torch():
    """torch, or an InputError naming the extra that installs it."""
    try:
        import torch
    except ImportError:
        raise InputError(f"hetopt profile: measuring needs torch, which is not installed ({TORCH_EXTRA}); "
                         "--dry-run and `hetopt profile import` work without it") from None
    return torch


@dataclass(frozen=True)
class Timing:
    """Median seconds of the forward and backward passes, and the peak bytes of one micro-batch (None off CUDA)."""

    forward_s: float
    backward_s: float
    peak_bytes: float | None


def build_part(torch, part: str, *, hidden: int, heads: int, ffn: int, vocab: int, seq: int, tp: int):
    """The torch module of one GPU's share of ``part`` under TP degree ``tp``."""
    nn, F = torch.nn, torch.nn.functional
    h, a, f, v = hidden, heads // tp, ffn // tp, max(1, vocab // tp)
    d = hidden // heads

    class Layer(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
            self.qkv, self.proj = nn.Linear(h, 3 * a * d), nn.Linear(a * d, h)
            self.fc1, self.fc2 = nn.Linear(h, f), nn.Linear(f, h)

        def forward(self, x):
            b, s, _ = x.shape
            q, k, val = self.qkv(self.ln1(x)).view(b, s, 3, a, d).permute(2, 0, 3, 1, 4)
            y = F.scaled_dot_product_attention(q, k, val, is_causal=True)
            x = x + self.proj(y.transpose(1, 2).reshape(b, s, a * d))
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    class Embedding(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens, self.positions = nn.Embedding(v, h), nn.Embedding(seq, h)

        def forward(self, ids):
            return self.tokens(ids) + self.positions(torch.arange(ids.shape[1], device=ids.device))

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln, self.out = nn.LayerNorm(h), nn.Linear(h, v, bias=False)

        def forward(self, x, labels):
            logits = self.out(self.ln(x)).float()
            return F.cross_entropy(logits.view(-1, v), labels.view(-1))

    return {"layer": Layer, "embedding": Embedding, "head": Head}[part]()


def time_part(torch, part: str, *, hidden: int, heads: int, ffn: int, vocab: int, seq: int, tp: int, microbatch: int,
              recompute: str, precision: str, device: str, warmup: int, repeats: int) -> Timing:
    """Forward and backward medians of ``repeats`` runs after ``warmup``, of one micro-batch.

    Full recomputation runs the forward without keeping activations (``torch.utils.checkpoint``)
    and again inside the backward, as Megatron's full recomputation does; selective
    recomputation is timed as none (its attention recompute is not reproduced here).
    """
    torch.manual_seed(0)
    cuda = device.startswith("cuda")
    if precision == "tf32" and cuda:
        torch.backends.cuda.matmul.allow_tf32 = True
    dtype = getattr(torch, DTYPES[precision])
    module = build_part(torch, part, hidden=hidden, heads=heads, ffn=ffn, vocab=vocab, seq=seq, tp=tp).to(device, dtype)
    v = max(1, vocab // tp)

    def inputs():
        if part == "embedding":
            return (torch.randint(0, v, (microbatch, seq), device=device),)
        x = torch.randn(microbatch, seq, hidden, device=device, dtype=dtype, requires_grad=True)
        if part == "head":
            return x, torch.randint(0, v, (microbatch, seq), device=device)
        return (x,)

    def run_forward(args):
        if recompute == "full" and part == "layer":
            from torch.utils.checkpoint import checkpoint
            return checkpoint(module, *args, use_reentrant=False)
        return module(*args)

    def sync():
        if cuda:
            torch.cuda.synchronize(device)

    forwards, backwards = [], []
    if cuda:
        torch.cuda.reset_peak_memory_stats(device)
    for i in range(warmup + repeats):
        args = inputs()
        sync()
        t0 = time.perf_counter()
        out = run_forward(args)
        sync()
        t1 = time.perf_counter()
        loss = out if out.dim() == 0 else out.float().square().mean()
        t2 = time.perf_counter()  # the stand-in loss of a layer or embedding is not the part's work
        loss.backward()
        sync()
        t3 = time.perf_counter()
        module.zero_grad(set_to_none=True)
        if i >= warmup:
            forwards.append(t1 - t0)
            backwards.append(t3 - t2)
    peak = float(torch.cuda.max_memory_allocated(device)) if cuda else None
    return Timing(statistics.median(forwards), statistics.median(backwards), peak)


def time_optimizer(torch, parameters: int, *, precision: str, device: str, warmup: int, repeats: int) -> float:
    """Median seconds of one Adam step (fp32 state, as mixed-precision training keeps it) over ``parameters``."""
    cuda = device.startswith("cuda")
    weights = torch.nn.Parameter(torch.zeros(int(parameters), device=device, dtype=torch.float32))
    weights.grad = torch.ones_like(weights)
    opt = torch.optim.Adam([weights], lr=1e-4)
    times = []
    for i in range(warmup + repeats):
        if cuda:
            torch.cuda.synchronize(device)
        t0 = time.perf_counter()
        opt.step()
        if cuda:
            torch.cuda.synchronize(device)
        if i >= warmup:
            times.append(time.perf_counter() - t0)
    return statistics.median(times)


#: The layer the host's time is measured on: so small that its kernels take nothing beside the
#: host's time to issue its ops (the same ops as any GPT layer's).
HOST_PROBE = {"hidden": 64, "heads": 4, "ffn": 256, "vocab": 64, "seq": 8, "tp": 1, "microbatch": 1}


def time_host(torch, *, device: str, warmup: int, repeats: int) -> Timing:
    """The host's seconds to run one (tiny) layer's ops, forward and backward: :data:`HOST_PROBE`."""
    return time_part(torch, "layer", recompute="none", precision="fp32", device=device, warmup=warmup, repeats=repeats,
                     **HOST_PROBE)
