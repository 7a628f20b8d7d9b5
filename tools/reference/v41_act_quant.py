"""The NumPy V4.1 reference (deepseek_v41.py) with kv_quant=True plus [O]'s activation rounding: the
input of every FP8/FP4 linear through FP8 e4m3 per 32 along K (ue8m0 scale, `fake_fp8_block`):
attn wq_a, wkv, wq_b, wo_b (not wo_a: [O] runs it in bf16), indexer wq_b, routed and shared experts'
w1/w3 and w2 inputs, Engram wkv (its gathered table rows). Not rounded: the bf16 linears (compressor,
indexer wk / weights_proj, router, head).

One deliberate difference from [O]: the routing weight is applied after w2 (the C++ engine's order,
V4's MoE code), not multiplied into the w2 input as [O] does; under rounding the two differ
(docs/v41.md section 5). So this checks the engine's implementation of the rounding sites, not [O]'s
expert order.

Writes tests/data/v41-act-quant/<fixture>.safetensors with `logits_act_quant` [B, T, V] (one full
forward per sequence of the fixture's input_ids). Run from the repository root:
    /usr/bin/python3 tools/reference/v41_act_quant.py tiny-v41-a tiny-v41-b
"""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import deepseek_v41 as ref  # noqa: E402

ROUNDED = ("attn.wq_a.weight", "attn.wkv.weight", "attn.wq_b.weight", "attn.wo_b.weight", "indexer.wq_b.weight",
           "w1.weight", "w2.weight", "w3.weight")


def fake_fp8(x, block=32):
    """fake_fp8_block along the last dim; a last block shorter than `block` (dims below 32 on the
    tiny fixtures, e.g. q_lora_rank 16) gets its own scale, as the engine's numerics::fake_fp8."""
    x = np.asarray(x, dtype=np.float64)
    n = x.shape[-1]
    full = n // block * block
    parts = []
    if full:
        parts.append(ref.fake_fp8_block(x[..., :full], block))
    if full < n:
        parts.append(ref.fake_fp8_block(x[..., full:], n - full))
    return np.concatenate(parts, -1)


class ActQuantModel(ref.Model):
    def lin(self, x, name):
        if name.endswith(ROUNDED) and "compressor" not in name:
            x = fake_fp8(x)
        return x @ self.w[name].T

    def engram(self, X, l, hash_ids):
        p = f"layers.{l}.engram."
        saved = self.w[p + "embed.weight"]
        rows = saved[hash_ids]                                               # [T, cols, hd]
        q = fake_fp8(rows.reshape(rows.shape[0], -1))
        # Hand the rounded rows to the parent through a per-call table of exactly those rows.
        T, cols = hash_ids.shape
        self.w[p + "embed.weight"] = q.reshape(T * cols, -1)
        try:
            return super().engram(X, l, np.arange(T * cols).reshape(T, cols))
        finally:
            self.w[p + "embed.weight"] = saved

    def expert(self, x, p, weight, lim):
        return super().expert(x, p, 1.0, lim) * weight


def main(names):
    os.makedirs("tests/data/v41-act-quant", exist_ok=True)
    for name in names:
        folder = os.path.join("tests/data", name)
        base = ref.load_model(folder, kv_quant=True)
        model = ActQuantModel(base.cfg, base.w, base.hasher.token_map if base.hasher else None, kv_quant=True)
        ids = ref.read_safetensors(os.path.join(folder, "reference.safetensors"))["input_ids"][1]
        logits = np.stack([model.forward(ids[b]) for b in range(ids.shape[0])])
        out = os.path.join("tests/data/v41-act-quant", name + ".safetensors")
        ref.write_safetensors(out, {"logits_act_quant": ("F32", logits.astype(np.float32))},
                              {"generator": "tools/reference/v41_act_quant.py", "fixture": name})
        print(out, logits.shape)


if __name__ == "__main__":
    main(sys.argv[1:] or ["tiny-v41-a", "tiny-v41-b"])
