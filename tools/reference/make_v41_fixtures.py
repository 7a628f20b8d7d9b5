#!/usr/bin/env python3
"""Make the tiny DeepSeek-V4.1 fixtures tests/data/tiny-v41-{a,b} with tools/reference/deepseek_v41.py.

    python3 tools/reference/make_v41_fixtures.py [a|b ...]

a: every weight F32.  b: the released formats -- dense FP8 e4m3 with 32x32 E8M0 block scales,
routed experts MXFP4 (I8-packed e2m1, E8M0 per 32 along K), Engram tables FP8 with E8M0 per 32,
BF16 norms/embeddings/router/compressor/indexer-key weights, F32 mHC/sinks/gate bias.
The reference runs on the dequantized values (exact arithmetic). Seeds are searched until every
top-k decision of the reference (experts, candidate blocks, index entries) has a clear margin.
"""

import json
import os
import shutil
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import deepseek_v41 as R  # noqa: E402
from tokenizer_compress import build_compressed_token_map  # noqa: E402

ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
TOKENIZER = os.path.join(ROOT, "tests", "data", "tiny-v4-b", "tokenizer.json")

VARIANTS = {
    "a": dict(hidden_size=32, moe_intermediate_size=16, T=72, seed=41001, quant=False),
    "b": dict(hidden_size=32, moe_intermediate_size=32, T=72, seed=41101, quant=True),
}


def text_config(v, compressed_vocab, engram_rows):
    return {
        "model_type": "deepseek_v41_text",
        "vocab_size": 1024, "hidden_size": v["hidden_size"], "num_hidden_layers": 10,
        "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 32, "qk_rope_head_dim": 8,
        "q_lora_rank": 16, "o_groups": 2, "o_lora_rank": 16,
        "rope_theta": 10000.0, "compress_rope_theta": 160000.0,
        "rope_scaling": {"type": "yarn", "rope_type": "yarn", "factor": 16,
                         "original_max_position_embeddings": 65536, "beta_fast": 32, "beta_slow": 1},
        "max_position_embeddings": 4096, "sliding_window": 8,
        # 0/2/1 schedule: SWA x2, ratio-2 groups {2,3} {4,5}, ratio-1 group {6..9}
        "compress_ratios": [0, 0, 2, 2, 2, 2, 1, 1, 1, 1],
        "kv_source_layer_ids": [2, 4, 6],
        "index_source_layer_ids": [2, 4, 6, 8],
        "candidate_source_layer_id": 6, "candidate_topk_blocks": 3, "candidate_block_size": 4,
        "index_n_heads": 8, "index_head_dim": 32, "index_topk": 6,
        "moe_intermediate_size": v["moe_intermediate_size"], "n_routed_experts": 8,
        "n_shared_experts": 1, "num_experts_per_tok": 2, "scoring_func": "sqrtsoftplus",
        "gate_temp": 0.7, "norm_topk_prob": True, "routed_scaling_factor": 1.5,
        "topk_method": "noaux_tc", "swiglu_limit": 10.0,
        "hc_mult": 4, "hc_sinkhorn_iters": 20, "hc_eps": 1e-6,
        "engram_layer_ids": [1, 4], "engram_num_embeddings": engram_rows,
        "engram_max_ngram_size": 3, "engram_vocab_size": 16, "engram_n_heads": 2,
        "engram_head_dim": 32, "engram_pad_token_id": 2,
        "engram_compressed_vocab_size": compressed_vocab,
        "num_nextn_predict_layers": 0, "hidden_act": "silu", "rms_norm_eps": 1e-20,
        "tie_word_embeddings": False, "bos_token_id": 0, "eos_token_id": 1,
    }


def full_config(v, tc):
    cfg = {
        "architectures": ["DeepseekV41ForCausalLM"], "model_type": "deepseek_v41",
        "bos_token_id": 0, "eos_token_id": 1, "pad_token_id": 2, "tie_word_embeddings": False,
        "torch_dtype": "float32" if not v["quant"] else "bfloat16",
        "text_config": tc,
    }
    if v["quant"]:
        cfg["quantization_config"] = {"quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic",
                                      "weight_block_size": [32, 32], "scale_fmt": "ue8m0",
                                      "expert_dtype": "fp4"}
    return cfg


def random_weights(c: R.Config, rng):
    """Parameters at sane scales: unit-RMS embeddings, 1/sqrt(fan_in) projections, norms near 1,
    mHC mixes of order 1, small biases/sinks."""
    d, H, D, n = c.hidden_size, c.num_attention_heads, c.head_dim, c.hc_mult
    w = {}

    def lin(name, out, inp, gain=1.0):
        w[name] = rng.standard_normal((out, inp)) * gain / np.sqrt(inp)

    def norm(name, dim):
        w[name] = 1.0 + 0.1 * rng.standard_normal(dim)

    w["embed.weight"] = rng.standard_normal((c.vocab_size, d))
    w["head.weight"] = rng.standard_normal((c.vocab_size, d)) * 2.0 / np.sqrt(d)
    norm("norm.weight", d)
    for l in range(c.num_hidden_layers):
        p = f"layers.{l}."
        norm(p + "attn_norm.weight", d)
        norm(p + "ffn_norm.weight", d)
        for site in ("attn", "ffn"):
            w[p + f"hc_{site}_fn"] = rng.standard_normal(((2 + n) * n, n * d)) * 0.1
            w[p + f"hc_{site}_base"] = rng.standard_normal((2 + n) * n) * 0.5
            w[p + f"hc_{site}_scale"] = 0.5 + rng.random(3)
        a = p + "attn."
        w[a + "attn_sink"] = rng.standard_normal(H) * 0.5
        lin(a + "wq_a.weight", c.q_lora_rank, d)
        norm(a + "q_norm.weight", c.q_lora_rank)
        lin(a + "wq_b.weight", H * D, c.q_lora_rank, 2.0)
        lin(a + "wkv.weight", D, d)
        norm(a + "kv_norm.weight", D)
        lin(a + "wo_a.weight", c.o_groups * c.o_lora_rank, H * D // c.o_groups)
        lin(a + "wo_b.weight", d, c.o_groups * c.o_lora_rank, 0.5)
        r = c.compress_ratios[l]
        if l in c.kv_source_layer_ids:
            lin(a + "compressor.wkv.weight", D, d)
            if r > 1:
                lin(a + "compressor.wgate.weight", D, d, 2.0)
            norm(a + "compressor.norm.weight", D)
        if l in c.index_source_layer_ids:
            lin(a + "indexer.wq_b.weight", c.index_n_heads * c.index_head_dim, c.q_lora_rank, 2.0)
            lin(a + "indexer.weights_proj.weight", c.index_n_heads, d, 2.0)
            if l in c.kv_source_layer_ids:
                lin(a + "indexer.wk.weight", c.index_head_dim, D, 2.0)
                norm(a + "indexer.k_norm.weight", c.index_head_dim)
        f = p + "ffn."
        lin(f + "gate.weight", c.n_routed_experts, d, 2.0)
        w[f + "gate.bias"] = rng.standard_normal(c.n_routed_experts) * 0.1
        I = c.moe_intermediate_size
        for e in [f"experts.{i}" for i in range(c.n_routed_experts)] + ["shared_experts"]:
            lin(f + e + ".w1.weight", I, d, 2.0)
            lin(f + e + ".w3.weight", I, d, 2.0)
            lin(f + e + ".w2.weight", d, I, 0.5)
        if l in c.engram_layer_ids:
            g = p + "engram."
            rows = c.engram_num_embeddings[c.engram_layer_ids.index(l)]
            cols = (c.engram_max_ngram_size - 1) * c.engram_n_heads
            w[g + "embed.weight"] = rng.standard_normal((rows, c.engram_head_dim))
            lin(g + "wkv.weight", d * (n + 1), cols * c.engram_head_dim)
            w[g + "q_weight"] = 1.0 + 0.3 * rng.standard_normal((n, d))
            w[g + "k_weight"] = 1.0 + 0.3 * rng.standard_normal((n, d))
    return w


# -- storage formats ---------------------------------------------------------------------------

def bf16_bits(x):
    b = np.asarray(x, np.float32).view(np.uint32).astype(np.uint64)
    b = (b + 0x7FFF + ((b >> 16) & 1)) >> 16                       # round to nearest even
    return b.astype(np.uint16)


def quant_fp8_blocks(w, block=32):
    """Weight -> (e4m3 bits, e8m0 bits) with one power-of-two scale per block x block tile."""
    out, inp = w.shape
    nb0, nb1 = -(-out // block), -(-inp // block)
    pad = np.zeros((nb0 * block, nb1 * block))
    pad[:out, :inp] = w
    t = pad.reshape(nb0, block, nb1, block)
    amax = np.maximum(np.abs(t).max((1, 3)), 1e-30)
    s = R.pow2_ceil(amax / 448.0)
    q = R.round_e4m3(t / s[:, None, :, None]).reshape(nb0 * block, nb1 * block)[:out, :inp]
    e = (np.log2(s).astype(np.int64) + 127).astype(np.uint8)
    return R.e4m3_encode(q), e


def quant_fp8_rows(w, block=32):
    rows, dim = w.shape
    t = w.reshape(rows, dim // block, block)
    s = R.pow2_ceil(np.maximum(np.abs(t).max(-1), 1e-30) / 448.0)
    q = R.round_e4m3(t / s[..., None]).reshape(rows, dim)
    return R.e4m3_encode(q), (np.log2(s).astype(np.int64) + 127).astype(np.uint8)


def quant_mxfp4(w, block=32):
    out, inp = w.shape
    t = w.reshape(out, inp // block, block)
    s = R.pow2_ceil(np.maximum(np.abs(t).max(-1), 1e-30) / 6.0)
    codes = R.e2m1_codes(np.clip(t / s[..., None], -6, 6)).reshape(out, inp)
    packed = (codes[:, 0::2] | (codes[:, 1::2] << 4)).astype(np.uint8).view(np.int8)
    return packed, (np.log2(s).astype(np.int64) + 127).astype(np.uint8)


FP8_NAMES = ("attn.wq_a.weight", "attn.wq_b.weight", "attn.wkv.weight", "attn.wo_a.weight",
             "attn.wo_b.weight", "attn.indexer.wq_b.weight", "engram.wkv.weight")


def to_storage(w, quant):
    """Returns safetensors tensors and the dequantized float64 weights the reference uses."""
    if not quant:
        st = {k: ("F32", v.astype(np.float32)) for k, v in w.items()}
        return st, {k: v.astype(np.float32).astype(np.float64) for k, v in w.items()}
    st = {}
    for k, v in w.items():
        if k.endswith(FP8_NAMES) or ".shared_experts." in k:
            q, s = quant_fp8_blocks(v)
            st[k], st[k[:-7] + ".scale"] = ("F8_E4M3", q), ("F8_E8M0", s)
        elif ".experts." in k:
            q, s = quant_mxfp4(v)
            st[k], st[k[:-7] + ".scale"] = ("I8", q), ("F8_E8M0", s)
        elif k.endswith("engram.embed.weight"):
            q, s = quant_fp8_rows(v)
            st[k], st[k[:-7] + ".scale"] = ("F8_E4M3", q), ("F8_E8M0", s)
        elif "hc_" in k or k.endswith(("attn_sink", "gate.bias")):
            st[k] = ("F32", v.astype(np.float32))
        else:
            st[k] = ("BF16", bf16_bits(v))
    return st, None


# -- generation -------------------------------------------------------------------------------

def make_inputs(rng, T):
    ids = rng.integers(3, 1024, size=(2, T))
    ids[0, 0] = 0                                   # BOS
    ids[1, 10:13] = 2                               # real pad tokens: hash like look-back padding
    ids[1, 40:52] = ids[1, 20:32]                   # a repeated span: identical n-gram hashes
    return ids


def greedy(model, prompt, n_new):
    s = R.Session(model)
    out = list(prompt)
    lg = s.step(np.array(prompt))[-1]
    for _ in range(n_new):
        t = int(np.argmax(lg))
        out.append(t)
        lg = s.step(np.array([t]))[-1]
    return out


def check_margins(model, ids, rel=3e-5):
    model.trace = []
    for b in range(ids.shape[0]):
        model.forward(ids[b])
    tr, model.trace = model.trace, None
    worst = min(m / max(1.0, s) for _, m, s in tr)
    kinds = {k: sum(1 for t in tr if t[0] == k) for k in ("expert", "index", "block")}
    return worst >= rel, worst, kinds


def pruning_stats(model, ids):
    """How often the two-level top-k changes the reindex layer's choice (must be > 0)."""
    c = model.cfg
    changed, total = 0, 0
    orig = model.select

    def spy(s, n_vis, l, cand_in):
        nonlocal changed, total
        res = orig(s, n_vis, l, cand_in)
        if cand_in is not None:
            free = np.sort(R.topk_idx(np.where(np.arange(len(s)) < n_vis, s, -np.inf),
                                      min(c.index_topk, n_vis)))
            total += 1
            changed += int(not np.array_equal(free, res[0]))
        return res
    model.select = spy
    model.forward(ids[0])
    model.select = orig
    return changed, total


def make(variant):
    v = VARIANTS[variant]
    out_dir = os.path.join(ROOT, "tests", "data", f"tiny-v41-{variant}")
    os.makedirs(out_dir, exist_ok=True)
    token_map, n_comp = build_compressed_token_map(TOKENIZER)
    seed = v["seed"]
    while True:
        rng = np.random.default_rng(seed)
        # engram table rows follow from the bucket primes
        tc = text_config(v, n_comp, [0, 0])
        probe = R.Config(**{k: tc[k] for k in R.Config.__dataclass_fields__ if k in tc})
        rows = [int(sum(sum(x) for x in layer)) for layer in R.engram_primes(probe)]
        tc = text_config(v, n_comp, rows)
        cfg = R.Config.from_json({"text_config": tc})
        w = random_weights(cfg, rng)
        st, deq = to_storage(w, v["quant"])
        tmp = os.path.join(out_dir, "model.safetensors")
        R.write_safetensors(tmp, st, {"format": "pt"})
        if deq is None:
            deq = R.load_weights(tmp)
        model = R.Model(cfg, deq, token_map)
        ids = make_inputs(rng, v["T"])
        ok, worst, kinds = check_margins(model, ids)
        changed, total = pruning_stats(model, ids)
        print(f"seed {seed}: worst relative top-k margin {worst:.2e} over {kinds}; "
              f"two-level top-k changed {changed}/{total} reindex selections")
        if ok and changed > 0:
            break
        seed += 1
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(full_config(v, tc), f, indent=1)
        f.write("\n")
    with open(os.path.join(out_dir, "generation_config.json"), "w") as f:
        json.dump({"bos_token_id": 0, "eos_token_id": 1, "do_sample": False}, f, indent=1)
        f.write("\n")
    shutil.copy(TOKENIZER, os.path.join(out_dir, "tokenizer.json"))
    shutil.copy(os.path.join(os.path.dirname(TOKENIZER), "tokenizer_config.json"),
                os.path.join(out_dir, "tokenizer_config.json"))

    T = v["T"]
    logits = np.zeros((2, T, cfg.vocab_size))
    for b in range(2):
        for t in range(T):                          # each position: last of a fresh forward
            logits[b, t] = model.forward(ids[b, : t + 1])[-1]
    mx = logits.max(-1, keepdims=True)
    logprobs = logits - mx - np.log(np.exp(logits - mx).sum(-1, keepdims=True))
    # incremental decode, and chunked prefill (split at 29), must reproduce them
    inc = np.stack([R.Session(model).step(ids[b]) for b in range(2)])
    ses = R.Session(model)
    chunked = np.concatenate([ses.step(ids[0, :29]), ses.step(ids[0, 29:])])
    d_inc, d_chunk = np.abs(inc - logits).max(), np.abs(chunked - logits[0]).max()
    print(f"incremental vs per-prefix: {d_inc:.2e}; chunked: {d_chunk:.2e}")
    assert d_inc < 1e-9 and d_chunk < 1e-9
    qmodel = R.Model(cfg, deq, token_map, kv_quant=True)
    logits_kvq = np.stack([qmodel.forward(ids[b]) for b in range(2)])
    _, kvq_worst, _ = check_margins(qmodel, ids)

    prompt = [int(x) for x in ids[0, :16]]
    gen = greedy(model, prompt, 24)
    hashes = np.stack([model.hasher(ids[b]) for b in range(2)])
    ref = {
        "input_ids": ("I32", ids.astype(np.int32)),
        "logits": ("F32", logits.astype(np.float32)),
        "logprobs": ("F32", logprobs.astype(np.float32)),
        "logits_kv_quant": ("F32", logits_kvq.astype(np.float32)),
        "greedy_prompt": ("I32", np.array([prompt], np.int32)),
        "greedy_output": ("I32", np.array([gen], np.int32)),
        "engram.token_map": ("I64", np.asarray(token_map, np.int64)),
        "engram.primes": ("I64", model.hasher.primes),
        "engram.offsets": ("I64", model.hasher.offsets),
        "engram.multipliers": ("I64", model.hasher.mult),
        "engram.hash_ids": ("I64", hashes),
        # the released model's multipliers (layers 1 and 14, compressed vocab 99,092)
        "engram.released_multipliers": ("I64", R.engram_multipliers([1, 14], 4, 99092)),
    }
    R.write_safetensors(os.path.join(out_dir, "reference.safetensors"), ref)
    note = {
        "variant": variant, "seed": seed, "T": T, "chunked_prefill_split": 29,
        "worst_relative_topk_margin": worst, "topk_decisions": kinds,
        "two_level_topk_changed_selections": [changed, total],
        "max_abs_incremental_minus_logits": float(d_inc),
        "kv_quant_worst_relative_topk_margin": kvq_worst,
        "note": ("logits[b,t]: float64 reference logits (stored F32) at position t, the last "
                 "position of a fresh forward over input_ids[b,:t+1]; exact arithmetic (no "
                 "activation or KV rounding; weights are the dequantized stored values). "
                 "logits_kv_quant: one full forward per sequence with the official/transformers "
                 "KV rounding (FP8 window KV block 32 ue8m0, FP4 compressed KV block 16 e4m3 "
                 "scales, FP4 indexer q/k block 32 ue8m0). greedy_output = prompt + 24 argmax "
                 "tokens. engram.*: the n-gram hashing inputs and the hash ids of input_ids "
                 "[B,T,engram layer,(n-gram,head)], table rows already offset per layer. Made by "
                 "tools/reference/make_v41_fixtures.py; see tools/reference/README.md."),
    }
    with open(os.path.join(out_dir, "reference.json"), "w") as f:
        json.dump(note, f, indent=1)
        f.write("\n")
    for name in sorted(os.listdir(out_dir)):
        print(f"  {name}: {os.path.getsize(os.path.join(out_dir, name))} bytes")


if __name__ == "__main__":
    for v in sys.argv[1:] or ["a"]:
        make(v)
