#!/usr/bin/env python3
"""Self-checks of the NumPy DeepSeek-V4.1 reference.  python3 tools/reference/test_deepseek_v41.py

1. causality: appending tokens never changes earlier logits (full forward; incremental path);
2. incremental (token by token with cache state) and chunked prefill equal the full forward;
3. Engram: hash ids against a direct n-gram computation (padding, pad tokens, collisions), the
   gated write against a per-stream scalar loop, and the stored fixture hash ids;
4. the low-precision helpers (e4m3 / e2m1 grids, ties, ue8m0 scales);
5. the fixtures in tests/data/tiny-v41-*: recomputed logits, tensor names and shapes.
"""

import os
import sys

try:
    import numpy as np
except ImportError:                      # a python3 without NumPy (e.g. pyenv): use Debian's
    if os.path.exists("/usr/bin/python3") and os.path.realpath(sys.executable) != "/usr/bin/python3.11":
        os.execv("/usr/bin/python3", ["/usr/bin/python3"] + sys.argv)
    raise

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import deepseek_v41 as R  # noqa: E402
import make_v41_fixtures as M  # noqa: E402
from tokenizer_compress import build_compressed_token_map  # noqa: E402

FAILS = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        FAILS.append(what)


def small_model(seed=7, kv_quant=False):
    tm, n = build_compressed_token_map(M.TOKENIZER)
    v = M.VARIANTS["a"]
    tc = M.text_config(v, n, [0, 0])
    probe = R.Config(**{k: tc[k] for k in R.Config.__dataclass_fields__ if k in tc})
    rows = [int(sum(sum(x) for x in layer)) for layer in R.engram_primes(probe)]
    cfg = R.Config.from_json({"text_config": M.text_config(v, n, rows)})
    rng = np.random.default_rng(seed)
    w = M.random_weights(cfg, rng)
    return R.Model(cfg, w, tm, kv_quant=kv_quant), M.make_inputs(rng, 56)


def test_causality(model, ids):
    full = model.forward(ids[1])
    worst = 0.0
    for t in (1, 2, 7, 9, 16, 25, 33):
        worst = max(worst, np.abs(model.forward(ids[1, :t]) - full[:t]).max())
    check(worst < 1e-10, f"causal full forward: prefixes agree with the longer forward ({worst:.1e})")
    alt = ids[1].copy()
    alt[30:] = (alt[30:] * 7 + 3) % 1024
    d = np.abs(model.forward(alt)[:30] - full[:30]).max()
    check(d < 1e-10, f"changing tokens >= 30 leaves logits < 30 unchanged ({d:.1e})")
    check(np.abs(model.forward(alt)[30:] - full[30:]).max() > 1e-3, "...and does change the later ones")


def test_incremental(model, ids):
    for b in range(2):
        full = model.forward(ids[b])
        inc = R.Session(model).step(ids[b])
        check(np.abs(inc - full).max() < 1e-5,
              f"seq {b}: token-by-token decode == full forward ({np.abs(inc - full).max():.1e})")
    for split in ((1, 55), (8, 8, 40), (13, 1, 1, 41)):
        s, parts, at = R.Session(model), [], 0
        for n in split:
            parts.append(s.step(ids[0, at:at + n]))
            at += n
        d = np.abs(np.concatenate(parts) - model.forward(ids[0])).max()
        check(d < 1e-5, f"chunked prefill {split} == full forward ({d:.1e})")


def direct_hash(cfg, token_map, ids, t, layer_idx, ngram, head, mult, primes, offsets):
    """The hash of the `ngram`-gram ending at t, from its explicit (padded) token tuple."""
    pad = token_map[cfg.engram_pad_token_id]
    toks = [token_map[ids[t - s]] if t - s >= 0 else pad for s in range(ngram)]
    h = 0
    for s, tok in enumerate(toks):
        h ^= int(tok) * int(mult[layer_idx][s])
    col = (ngram - 2) * cfg.engram_n_heads + head
    return h % int(primes[layer_idx][ngram - 2][head]) + int(offsets[layer_idx][col])


def test_engram(model, ids):
    c, hs = model.cfg, model.hasher
    tm = hs.token_map
    got = hs(ids[1])
    bad, collisions, seen = 0, 0, {}
    for t in range(len(ids[1])):
        for li in range(len(c.engram_layer_ids)):
            for ng in range(2, c.engram_max_ngram_size + 1):
                for h in range(c.engram_n_heads):
                    want = direct_hash(c, tm, ids[1], t, li, ng, h, hs.mult, hs.primes, hs.offsets)
                    col = (ng - 2) * c.engram_n_heads + h
                    bad += int(got[t, li, col] != want)
                    key = (li, col, want)
                    gram = tuple(int(tm[ids[1][t - s]]) if t >= s else -1 for s in range(ng))
                    if key in seen and seen[key] != gram:
                        collisions += 1
                    seen.setdefault(key, gram)
    check(bad == 0, "hash ids == direct n-gram computation (every position, layer, n-gram, head)")
    check(collisions > 0, f"distinct n-grams share buckets ({collisions} collisions exercised)")
    # look-back padding at the sequence start equals a real pad token (compressed id of id 2)
    i2 = ids[1].copy()
    z = np.concatenate([[2, 2], i2])
    check(np.array_equal(hs(z)[2][:, : c.engram_n_heads * 2], hs(i2)[0][:, : c.engram_n_heads * 2]),
          "padding at position 0 hashes like two real pad tokens before it")
    # compressed-vocabulary collapse: ids mapping to the same compressed id hash alike
    a, b = next((i, j) for i in range(1024) for j in range(i + 1, 1024) if tm[i] == tm[j])
    x1, x2 = ids[1].copy(), ids[1].copy()
    x1[5], x2[5] = a, b
    check(np.array_equal(hs(x1), hs(x2)), f"tokens {a} and {b} (same compressed id) hash alike")
    rows = sum(c.engram_num_embeddings)
    check(got.min() >= 0 and all(got[:, li].max() < c.engram_num_embeddings[li]
                                 for li in range(len(c.engram_layer_ids))) and rows > 0,
          "hash ids index inside each layer's table")
    # the gated write, stream by stream with scalar loops
    l = c.engram_layer_ids[0]
    rng = np.random.default_rng(3)
    X = rng.standard_normal((5, c.hc_mult, c.hidden_size))
    hid = got[:5, 0]
    out = model.engram(X, l, hid)
    p = f"layers.{l}.engram."
    tab, wkv = model.W(p + "embed.weight"), model.W(p + "wkv.weight")
    qw, kw = model.W(p + "q_weight"), model.W(p + "k_weight")
    d, worst = c.hidden_size, 0.0
    for t in range(5):
        e = np.concatenate([tab[i] for i in hid[t]])
        kv = wkv @ e
        value = kv[c.hc_mult * d:]
        for s in range(c.hc_mult):
            key = kv[s * d:(s + 1) * d]
            h = X[t, s]
            dot = sum(h[i] * qw[s, i] * kw[s, i] * key[i] for i in range(d))
            dot /= np.sqrt(np.mean(h ** 2) + c.rms_norm_eps) * np.sqrt(np.mean(key ** 2) + c.rms_norm_eps)
            dot /= np.sqrt(d)
            r = max(abs(dot), 1e-6) ** 0.5
            gate = 1 / (1 + np.exp(-(r if dot >= 0 else -r)))
            worst = max(worst, np.abs(out[t, s] - (h + gate * value)).max())
    check(worst < 1e-12, f"Engram gated write == per-stream scalar computation ({worst:.1e})")


def test_formats():
    vals = R.E4M3[np.isfinite(R.E4M3)]
    check(np.array_equal(R.round_e4m3(vals), vals), "e4m3 grid values round to themselves")
    check(np.array_equal(R.E4M3[R.e4m3_encode(vals)], vals), "e4m3 encode/decode round trip")
    check(R.round_e4m3(np.array([1.0625]))[0] == 1.0 and R.round_e4m3(np.array([1.1875]))[0] == 1.25,
          "e4m3 ties to even")
    ties = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, -0.25, -5.0])
    check(list(R.E2M1[R.e2m1_codes(ties)]) == [0, 1, 1, 2, 2, 4, 4, -0.0, -4],
          "e2m1 ties to the even code")
    check(list(R.pow2_ceil(np.array([1.0, 1.5, 0.25, 3.0]))) == [1.0, 2.0, 0.25, 4.0], "ue8m0 pow2 ceil")
    rng = np.random.default_rng(0)
    w = rng.standard_normal((40, 64))
    q, s = M.quant_mxfp4(w)
    back = R.dequant_fp4_weight(q, s)
    check(np.abs(back - w).max() <= np.abs(w).max() / 3, "MXFP4 pack/unpack (low nibble = even column)")
    q, s = M.quant_fp8_blocks(w)
    check(np.abs(R.dequant_fp8_weight(q, s, 32) - w).max() < 0.07 * np.abs(w).max(), "FP8 32x32 blocks")


def test_fixture(name):
    folder = os.path.join(ROOT, "tests", "data", name)
    if not os.path.exists(os.path.join(folder, "reference.safetensors")):
        print(f"skip {name}: not made")
        return
    model = R.load_model(folder)
    ref = {k: v[1] for k, v in R.read_safetensors(os.path.join(folder, "reference.safetensors")).items()}
    ids, lg = ref["input_ids"], ref["logits"]
    worst = 0.0
    for b, t in ((0, 0), (0, 9), (1, 30), (1, ids.shape[1] - 1)):
        worst = max(worst, np.abs(model.forward(ids[b, : t + 1])[-1] - lg[b, t]).max())
    check(worst < 1e-5, f"{name}: recomputed logits match reference.safetensors ({worst:.1e})")
    lp = ref["logprobs"]
    check(np.abs(np.log(np.exp(lp.astype(np.float64)).sum(-1))).max() < 1e-5, f"{name}: logprobs normalised")
    full = np.stack([model.forward(ids[b]) for b in range(2)])
    check(np.abs(full - lg).max() < 1e-5, f"{name}: one full forward == per-prefix logits")
    check(np.array_equal(np.stack([model.hasher(ids[b]) for b in range(2)]), ref["engram.hash_ids"]),
          f"{name}: stored engram.hash_ids reproduced")
    g = ref["greedy_output"][0]
    s = R.Session(model)
    lgp = s.step(g[:-1])
    check(all(int(np.argmax(lgp[i])) == int(g[i + 1]) for i in range(15, len(g) - 1)),
          f"{name}: greedy_output is the argmax continuation")
    # names and shapes against the architecture
    c = model.cfg
    names = set(R.read_safetensors(os.path.join(folder, "model.safetensors")))
    want = expected_names(c)
    check(want <= names, f"{name}: every expected tensor present ({len(want - names)} missing)")
    extra = {n for n in names - want if not n.endswith(".scale")}
    check(not extra, f"{name}: no unexpected tensors {sorted(extra)[:5]}")


def expected_names(c):
    n = {"embed.weight", "head.weight", "norm.weight"}
    for l in range(c.num_hidden_layers):
        p = f"layers.{l}."
        n |= {p + s for s in ("attn_norm.weight", "ffn_norm.weight", "hc_attn_fn", "hc_attn_base",
                              "hc_attn_scale", "hc_ffn_fn", "hc_ffn_base", "hc_ffn_scale")}
        n |= {p + "attn." + s for s in ("attn_sink", "wq_a.weight", "q_norm.weight", "wq_b.weight",
                                        "wkv.weight", "kv_norm.weight", "wo_a.weight", "wo_b.weight")}
        if l in c.kv_source_layer_ids:
            n |= {p + "attn.compressor.wkv.weight", p + "attn.compressor.norm.weight"}
            if c.compress_ratios[l] > 1:
                n.add(p + "attn.compressor.wgate.weight")
            n |= {p + "attn.indexer.wk.weight", p + "attn.indexer.k_norm.weight"}
        if l in c.index_source_layer_ids:
            n |= {p + "attn.indexer.wq_b.weight", p + "attn.indexer.weights_proj.weight"}
        n |= {p + "ffn.gate.weight", p + "ffn.gate.bias"}
        for e in [f"experts.{i}" for i in range(c.n_routed_experts)] + ["shared_experts"]:
            n |= {p + f"ffn.{e}.w{k}.weight" for k in (1, 2, 3)}
        if l in c.engram_layer_ids:
            n |= {p + "engram." + s for s in ("embed.weight", "wkv.weight", "q_weight", "k_weight")}
    return n


if __name__ == "__main__":
    model, ids = small_model()
    test_causality(model, ids)
    test_incremental(model, ids)
    qmodel, _ = small_model(kv_quant=True)
    test_incremental(qmodel, ids)            # same equality with the KV rounding on
    test_engram(model, ids)
    test_formats()
    for name in ("tiny-v41-a", "tiny-v41-b"):
        test_fixture(name)
    print(f"\n{'FAILED: ' + str(len(FAILS)) if FAILS else 'all checks passed'}")
    sys.exit(1 if FAILS else 0)
