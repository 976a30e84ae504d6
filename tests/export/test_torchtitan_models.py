"""The torchtitan models the exporter names are the ones the installed torchtitan ships, shape for shape.

``hetopt.export.torchtitan.TORCHTITAN_FLAVORS`` was read from torchtitan v0.2.2 (the ``runtimes``
extra); this test reads the installed package again, building every flavor of ``llama3_args`` and
``qwen3_args`` on the meta device (no memory, no GPU) and reading its weights' shapes.
"""

from __future__ import annotations

import importlib
import warnings

import pytest

from hetopt.export.torchtitan import TORCHTITAN_FLAVORS, shipped_flavor
from hetopt.planner.request import as_model

#: The families compared: each module's table of flavors and its model class.
FAMILIES = {"llama3": ("llama3_args", "Transformer"), "qwen3": ("qwen3_args", "Qwen3Model")}


def _installed() -> dict[tuple[str, str], tuple]:
    torch = pytest.importorskip("torch")
    found = {}
    for family, (table, cls) in FAMILIES.items():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            mod = importlib.import_module(f"torchtitan.models.{family}")
        for flavor, args in getattr(mod, table).items():
            if flavor.startswith("debug") or getattr(args, "attn_type", "sdpa") != "sdpa":
                continue  # debug models, and the same shapes with flex or varlen attention
            with torch.device("meta"):
                model = getattr(mod, cls)(args)
            shapes = {k: tuple(v.shape) for k, v in model.state_dict().items()}
            layers = len({k.split(".")[1] for k in shapes if k.startswith("layers.")})
            vocab, hidden = shapes["tok_embeddings.weight"]
            head_dim = shapes["layers.0.attention.wq.weight"][0] // args.n_heads
            kv_heads = shapes["layers.0.attention.wk.weight"][0] // head_dim
            if getattr(args, "moe_enabled", False):
                experts, ffn = shapes["layers.0.moe.experts.w1"][:2]
                top_k = args.moe_args.top_k
            else:
                experts, top_k, ffn = 1, 1, shapes["layers.0.feed_forward.w1.weight"][0]
            found[(family, flavor)] = (layers, hidden, args.n_heads, kv_heads, head_dim, ffn, vocab, experts, top_k,
                                       bool(getattr(args, "enable_weight_tying", False)))
    return found


@pytest.mark.runtime
def test_the_flavors_are_the_installed_torchtitans() -> None:
    pytest.importorskip("torchtitan")
    assert _installed() == TORCHTITAN_FLAVORS


@pytest.mark.parametrize("model, names", [("llama-3-8b", ("llama3", "8B")), ("llama-3-70b", ("llama3", "70B")),
                                          ("qwen3-30b-a3b", ("qwen3", "30B-A3B"))])
def test_the_shipped_models_of_the_same_shape_are_named(model: str, names: tuple[str, str]) -> None:
    assert shipped_flavor(as_model(model)) == names
