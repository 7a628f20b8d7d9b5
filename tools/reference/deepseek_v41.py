"""Independent NumPy reference of the DeepSeek-V4.1 text model (`model_type: deepseek_v41`).

Written from the public description of DeepSeek's official `inference/model.py` and
`inference/engram.py` (DeepSeek-V4.1-Flash, revision dba1be0a...) and transformers'
`models/deepseek_v41`; see tools/reference/README.md for the spec this encodes, every detail the
public description leaves open, and what was chosen. No torch: float64 NumPy throughout, so it is
an "exact arithmetic" oracle. Optional `kv_quant=True` adds the KV / indexer rounding that both the
official reference and transformers apply (FP8 window KV, FP4 compressed KV, FP4 indexer q/k).

Two independent code paths compute the same function:
  * `Model.forward(ids)`        full-sequence prefill, all positions at once (masks);
  * `Session.step(ids_chunk)`   incremental, with explicit per-sequence state (window rings,
                                compressor partial groups, shared compressed caches, index keys,
                                the n-gram history); chunks of any length, including 1 token.
The per-token pieces (linear layers, norms, mHC, MoE, Engram gate) are shared.
"""

from __future__ import annotations

import json
import math
import os
import struct
from dataclasses import dataclass, field

import numpy as np

# ----------------------------------------------------------------------------------------------
# safetensors (minimal reader/writer) and low-precision formats
# ----------------------------------------------------------------------------------------------

_ST_DTYPES = {
    "F64": np.float64, "F32": np.float32, "F16": np.float16, "I64": np.int64, "I32": np.int32,
    "I16": np.int16, "I8": np.int8, "U8": np.uint8, "BOOL": np.bool_,
    "BF16": np.uint16, "F8_E4M3": np.uint8, "F8_E8M0": np.uint8,
}


def read_safetensors(path):
    """Returns {name: (dtype_string, raw numpy array)}; BF16/F8 come back as raw integer bits."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
        data = f.read()
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        arr = np.frombuffer(data[a:b], dtype=_ST_DTYPES[info["dtype"]]).reshape(info["shape"])
        out[name] = (info["dtype"], arr)
    return out


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: (dtype_string, numpy array holding that dtype's bits)}. Sorted names,
    8-byte aligned header padded with spaces, little-endian data."""
    header, blobs, off = {}, [], 0
    for name in sorted(tensors):
        dt, arr = tensors[name]
        arr = np.ascontiguousarray(arr.astype(_ST_DTYPES[dt], copy=False))
        raw = arr.tobytes()
        header[name] = {"dtype": dt, "shape": list(arr.shape), "data_offsets": [off, off + len(raw)]}
        blobs.append(raw)
        off += len(raw)
    if metadata:
        header["__metadata__"] = {k: str(v) for k, v in metadata.items()}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for raw in blobs:
            f.write(raw)


def _e4m3_table():
    """All 256 float8_e4m3fn values (NaN at 0x7f/0xff)."""
    vals = np.zeros(256)
    for c in range(256):
        s, e, m = c >> 7, (c >> 3) & 0xF, c & 7
        if e == 15 and m == 7:
            v = np.nan
        elif e == 0:
            v = m / 8.0 * 2.0 ** -6
        else:
            v = (1 + m / 8.0) * 2.0 ** (e - 7)
        vals[c] = -v if s else v
    return vals


E4M3 = _e4m3_table()
E2M1 = np.array([0, .5, 1, 1.5, 2, 3, 4, 6, -0., -.5, -1, -1.5, -2, -3, -4, -6])


def e8m0_decode(bits):
    return np.ldexp(1.0, bits.astype(np.int64) - 127)


def bf16_decode(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32).astype(np.float64)


def round_e4m3(x):
    """Round-to-nearest-even onto the e4m3fn grid, saturating at +-448 (inputs pre-scaled)."""
    x = np.clip(np.asarray(x, np.float64), -448.0, 448.0)
    a = np.abs(x)
    e = np.floor(np.log2(np.where(a > 0, a, 1.0)))
    e = np.maximum(e, -6.0)                      # subnormal quantum is 2^-9
    q = np.ldexp(1.0, (e - 3).astype(np.int64))
    return np.sign(x) * np.round(a / q) * q      # np.round is half-to-even


def e4m3_encode(x):
    """Bits of values that are already exactly on the e4m3 grid."""
    x = np.asarray(x, np.float64)
    pos = E4M3[:127]                             # codes 0..126, increasing
    idx = np.searchsorted(pos, np.abs(x))
    assert np.all(pos[np.minimum(idx, 126)] == np.abs(x)), "value not on the e4m3 grid"
    return (idx | np.where(np.signbit(x), 128, 0)).astype(np.uint8)


def e2m1_codes(x):
    """Round-to-nearest-even e2m1 codes (sign in bit 3) of pre-clamped values in [-6, 6]."""
    a = np.abs(x)
    # ties: 0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, 3.5->4, 5->4 (to the even code)
    up = np.array([False, True, False, True, False, True, False])
    bnd = np.array([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
    codes = np.zeros(a.shape, np.int64)
    for b, u in zip(bnd, up):
        codes += (a >= b) if u else (a > b)
    return (codes | np.where(np.signbit(x), 8, 0)).astype(np.uint8)


def pow2_ceil(t):
    """2^ceil(log2 t) for t > 0 (the ue8m0 scale rounding)."""
    m, e = np.frexp(t)
    return np.ldexp(1.0, np.where(m == 0.5, e - 1, e))


def fake_fp8_block(x, block):
    """Official act_quant(..., inplace=True) on the last dim: ue8m0 scale per `block`."""
    n = x.shape[-1]
    b = x.reshape(*x.shape[:-1], n // block, block)
    s = pow2_ceil(np.maximum(np.abs(b).max(-1, keepdims=True), 1e-4) / 448.0)
    return (round_e4m3(b / s) * s).reshape(x.shape)


def fake_fp4_block(x, block, e4m3_scale=False):
    """Official fp4_act_quant(..., inplace=True): e2m1 values, scale per `block` (ue8m0, or e4m3
    for the compressed KV)."""
    n = x.shape[-1]
    b = x.reshape(*x.shape[:-1], n // block, block)
    amax = np.abs(b).max(-1, keepdims=True)
    if e4m3_scale:
        s = round_e4m3(np.maximum(amax, 6.0 * 2.0 ** -9) / 6.0)
    else:
        s = pow2_ceil(np.maximum(amax, 6.0 * 2.0 ** -126) / 6.0)
    return (E2M1[e2m1_codes(np.clip(b / s, -6, 6))] * s).reshape(x.shape)


def dequant_fp8_weight(w_bits, s_bits, block):
    w = E4M3[w_bits]
    s = e8m0_decode(s_bits)
    s = np.repeat(np.repeat(s, block, 0), block, 1)[: w.shape[0], : w.shape[1]]
    return w * s


def dequant_fp4_weight(w_i8, s_bits, block=32):
    u = w_i8.view(np.uint8)
    lo, hi = E2M1[u & 0xF], E2M1[u >> 4]
    w = np.stack([lo, hi], -1).reshape(u.shape[0], u.shape[1] * 2)   # low nibble = even column
    return w * np.repeat(e8m0_decode(s_bits), block, 1)


def load_weights(path):
    """Dequantize everything to float64: X.weight + X.scale pairs (FP8 32x32 blocks, or MXFP4 for
    I8-packed experts, or FP8 rows with per-32 scales for Engram tables)."""
    raw = read_safetensors(path)
    out = {}
    for name, (dt, arr) in raw.items():
        if name.endswith(".scale") and name[:-6] + ".weight" in raw:
            continue
        if dt == "BF16":
            out[name] = bf16_decode(arr)
        elif dt in ("F32", "F64", "F16"):
            out[name] = arr.astype(np.float64)
        elif dt in ("F8_E4M3", "I8"):
            sname = name[:-7] + ".scale"
            sdt, s = raw[sname]
            assert sdt == "F8_E8M0", sname
            if dt == "I8":
                out[name] = dequant_fp4_weight(arr, s)
            elif ".engram.embed." in name:   # one scale per 32 consecutive columns of a row
                out[name] = E4M3[arr] * np.repeat(e8m0_decode(s), arr.shape[1] // s.shape[1], 1)
            else:
                out[name] = dequant_fp8_weight(arr, s, 32)
        else:
            out[name] = arr
    return out


# ----------------------------------------------------------------------------------------------
# config
# ----------------------------------------------------------------------------------------------

@dataclass
class Config:
    vocab_size: int
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    head_dim: int
    q_lora_rank: int
    qk_rope_head_dim: int
    o_groups: int
    o_lora_rank: int
    sliding_window: int
    compress_ratios: list
    kv_source_layer_ids: list
    index_source_layer_ids: list
    candidate_source_layer_id: int
    candidate_topk_blocks: int
    candidate_block_size: int
    index_n_heads: int
    index_head_dim: int
    index_topk: int
    moe_intermediate_size: int
    n_routed_experts: int
    num_experts_per_tok: int
    scoring_func: str = "sqrtsoftplus"
    gate_temp: float = 1.0
    norm_topk_prob: bool = True
    routed_scaling_factor: float = 1.5
    swiglu_limit: float = 10.0
    hc_mult: int = 4
    hc_sinkhorn_iters: int = 20
    hc_eps: float = 1e-6
    rms_norm_eps: float = 1e-20
    rope_theta: float = 10000.0
    compress_rope_theta: float = 160000.0
    rope_scaling: dict = field(default_factory=dict)
    engram_layer_ids: list = field(default_factory=list)
    engram_num_embeddings: list = field(default_factory=list)
    engram_max_ngram_size: int = 1
    engram_vocab_size: int = 0
    engram_n_heads: int = 0
    engram_head_dim: int = 0
    engram_pad_token_id: int = 2
    engram_compressed_vocab_size: int = 0

    @classmethod
    def from_json(cls, path_or_dict):
        d = path_or_dict
        if not isinstance(d, dict):
            with open(d) as f:
                d = json.load(f)
        tc = dict(d.get("text_config", d))
        if "engram_pad_token_id" not in tc and "engram_pad_id" in tc:
            tc["engram_pad_token_id"] = tc["engram_pad_id"]
        names = cls.__dataclass_fields__.keys()
        c = cls(**{k: tc[k] for k in names if k in tc})
        c.compress_ratios = list(c.compress_ratios[: c.num_hidden_layers])
        c.validate()
        return c

    def validate(self):
        n, r = self.num_hidden_layers, self.compress_ratios
        kv, ix = self.kv_source_layer_ids, self.index_source_layer_ids
        assert all(r[i] > 0 for i in kv) and all(r[i] > 0 for i in ix)
        assert all(i in ix for i in kv), "every KV source must also be an index source (as released)"
        for i in range(n):
            if r[i] > 0:
                s = self.kv_source(i)
                assert s is not None and all(r[j] == r[i] for j in range(s, i + 1)), \
                    f"layer {i}: ratio differs from its KV source"
        if self.candidate_source_layer_id >= 0:
            assert self.candidate_source_layer_id in ix
            b = self.candidate_block_size
            assert self.candidate_topk_blocks * b - (b - 1) >= self.index_topk, \
                "candidate pool too small: selection would fall back on -inf picks"

    def kv_source(self, layer):
        s = [i for i in self.kv_source_layer_ids if i <= layer]
        return max(s) if s else None

    def index_source(self, layer):
        s = [i for i in self.index_source_layer_ids if i <= layer]
        return max(s) if s else None


# ----------------------------------------------------------------------------------------------
# Engram hashing (token ids only; independent of the network)
# ----------------------------------------------------------------------------------------------

def is_prime(n):
    if n < 2:
        return False
    small = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)
    for p in small:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for a in small:                               # deterministic for n < 3.3e24
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def engram_primes(cfg):
    """[layer][ngram_size-2][head] bucket moduli: for every (layer, n-gram size) the search
    restarts at engram_vocab_size-1, never reusing a prime -- i.e. consecutive primes above
    engram_vocab_size-1 handed out in (layer, n-gram, head) order."""
    seen, out = set(), []
    for _ in cfg.engram_layer_ids:
        per = []
        for _ in range(cfg.engram_max_ngram_size - 1):
            cur, row = cfg.engram_vocab_size - 1, []
            for _ in range(cfg.engram_n_heads):
                c = cur + 1
                while not is_prime(c) or c in seen:
                    c += 1
                seen.add(c)
                row.append(c)
                cur = c
            per.append(row)
        out.append(per)
    return out


def engram_multipliers(layer_ids, max_ngram, compressed_vocab):
    """Per (layer, look-back) odd multipliers from NumPy's PCG64 `default_rng(10007*layer)`."""
    bound = max(1, (np.iinfo(np.int64).max // compressed_vocab) // 2)
    rows = []
    for lid in layer_ids:
        g = np.random.default_rng(10007 * lid)
        rows.append(g.integers(low=0, high=bound, size=(max_ngram,), dtype=np.int64) * 2 + 1)
    return np.stack(rows)


class EngramHasher:
    """hash ids [T, n_engram_layers, (max_ngram-1)*n_heads] for positions of one sequence."""

    DEAD = -1

    def __init__(self, cfg, token_map):
        self.cfg = cfg
        self.token_map = np.asarray(token_map, np.int64)
        assert self.token_map.max() < cfg.engram_compressed_vocab_size
        self.pad = int(self.token_map[cfg.engram_pad_token_id])
        self.primes = np.array(engram_primes(cfg), np.int64)                  # [L, N-1, H]
        flat = self.primes.reshape(len(cfg.engram_layer_ids), -1)
        self.offsets = np.concatenate([np.zeros((flat.shape[0], 1), np.int64),
                                       np.cumsum(flat, 1)[:, :-1]], 1)        # [L, cols]
        assert list(flat.sum(1)) == list(cfg.engram_num_embeddings), \
            "engram_num_embeddings must equal the per-layer sum of the bucket primes"
        self.mult = engram_multipliers(cfg.engram_layer_ids, cfg.engram_max_ngram_size,
                                       cfg.engram_compressed_vocab_size)       # [L, N]

    def hash_positions(self, history, positions):
        """history: compressed ids by absolute position (DEAD marks image tokens)."""
        N = self.cfg.engram_max_ngram_size
        out = []
        for t in positions:
            toks, blocked = [], False
            for shift in range(N):
                src = history[t - shift] if t >= shift else self.DEAD
                blocked = blocked or t < shift or src == self.DEAD
                toks.append(self.pad if blocked else int(src))
            row = []
            for li in range(self.mult.shape[0]):
                prod = [toks[s] * int(self.mult[li, s]) for s in range(N)]
                rolling = prod[0]
                for i in range(1, N):
                    rolling ^= prod[i]
                    for h in range(self.primes.shape[2]):
                        row.append(rolling % int(self.primes[li, i - 1, h]))
            out.append(row)
        out = np.array(out, np.int64).reshape(len(positions), self.mult.shape[0], -1)
        return out + self.offsets[None]

    def __call__(self, ids):
        hist = self.token_map[np.asarray(ids)]
        return self.hash_positions(hist, range(len(ids)))


# ----------------------------------------------------------------------------------------------
# building blocks
# ----------------------------------------------------------------------------------------------

def rms_norm(x, w, eps):
    return x / np.sqrt(np.mean(x * x, -1, keepdims=True) + eps) * (1.0 if w is None else w)


def rope_freqs(rd, base, scaling):
    """Per-pair angular frequencies; YaRN frequency blend when `scaling` is given (no mscale)."""
    f = 1.0 / base ** (np.arange(0, rd, 2, dtype=np.float64) / rd)
    if scaling:
        orig, fac = scaling["original_max_position_embeddings"], scaling["factor"]
        bf, bs = scaling.get("beta_fast", 32), scaling.get("beta_slow", 1)

        def cdim(rot):
            return rd * math.log(orig / (rot * 2 * math.pi)) / (2 * math.log(base))
        lo, hi = max(math.floor(cdim(bf)), 0), min(math.ceil(cdim(bs)), rd - 1)
        ramp = np.clip((np.arange(rd // 2) - lo) / max(hi - lo, 1e-3), 0, 1)
        f = f / fac * ramp + f * (1 - ramp)
    return f


def rope(x, pos, freqs, inverse=False):
    """Interleaved pairs (2i, 2i+1) of the LAST 2*len(freqs) dims, rotated by pos*freq_i.
    x: [..., T, (heads,) d] with pos broadcast against the T axis (pos shape [T])."""
    rd = 2 * len(freqs)
    ang = np.asarray(pos, np.float64)[:, None] * freqs[None]          # [T, rd/2]
    c, s = np.cos(ang), np.sin(ang)
    if x.ndim == 3:                                                    # [T, H, d]
        c, s = c[:, None, :], s[:, None, :]
    if inverse:
        s = -s
    y = x.copy()
    ev, od = x[..., -rd::2], x[..., -rd + 1::2]
    y[..., -rd::2] = ev * c - od * s
    y[..., -rd + 1::2] = ev * s + od * c
    return y


def silu(x):
    return x / (1.0 + np.exp(-x))


def sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def softplus(x):
    return np.logaddexp(0.0, x)


def topk_idx(scores, k):
    """Indices of the k largest (stable: ties -> lower index). Fixtures are checked for margins
    so the tie rule never matters there."""
    order = np.argsort(-scores, kind="stable")
    return order[:k]


# ----------------------------------------------------------------------------------------------
# the model
# ----------------------------------------------------------------------------------------------

class Model:
    def __init__(self, cfg: Config, weights: dict, token_map=None, kv_quant=False, trace=None):
        self.cfg, self.w, self.kv_quant = cfg, weights, kv_quant
        self.trace = trace               # optional list collecting top-k margins (fixture checks)
        rd = cfg.qk_rope_head_dim
        self.freqs_main = rope_freqs(rd, cfg.rope_theta, None)
        sc = dict(cfg.rope_scaling or {})
        use_yarn = sc.get("rope_type", sc.get("type")) == "yarn"
        self.freqs_comp = rope_freqs(rd, cfg.compress_rope_theta, sc if use_yarn else None)
        self.hasher = EngramHasher(cfg, token_map) if cfg.engram_layer_ids else None

    # -- helpers -------------------------------------------------------------------------------
    def W(self, name):
        return self.w[name]

    def lin(self, x, name):
        return x @ self.w[name].T

    def freqs(self, layer):
        return self.freqs_comp if self.cfg.compress_ratios[layer] else self.freqs_main

    def _margin(self, kind, scores, k):
        if self.trace is None:
            return
        s = np.sort(scores[np.isfinite(scores)])[::-1]
        if 0 < k < len(s):
            self.trace.append((kind, float(s[k - 1] - s[k]), float(np.abs(s[:k + 1]).max())))

    def hc_mixes(self, X, l, site):
        """X: [T, hc, d] -> pre [T,hc], post [T,hc], comb [T,hc,hc] (comb[j,k]: from stream j to k)."""
        c, p = self.cfg, f"layers.{l}.hc_{site}_"
        fn, base, scale = self.W(p + "fn"), self.W(p + "base"), self.W(p + "scale")
        n = c.hc_mult
        flat = X.reshape(X.shape[0], -1)
        m = (flat @ fn.T) / np.sqrt(np.mean(flat * flat, -1, keepdims=True) + c.rms_norm_eps)
        pre = sigmoid(m[:, :n] * scale[0] + base[:n]) + c.hc_eps
        post = 2.0 * sigmoid(m[:, n:2 * n] * scale[1] + base[n:2 * n])
        logits = (m[:, 2 * n:] * scale[2] + base[2 * n:]).reshape(-1, n, n)
        e = np.exp(logits - logits.max(-1, keepdims=True))
        comb = e / e.sum(-1, keepdims=True) + c.hc_eps
        comb = comb / (comb.sum(-2, keepdims=True) + c.hc_eps)
        for _ in range(c.hc_sinkhorn_iters - 1):
            comb = comb / (comb.sum(-1, keepdims=True) + c.hc_eps)
            comb = comb / (comb.sum(-2, keepdims=True) + c.hc_eps)
        return pre, post, comb

    @staticmethod
    def hc_collapse(X, pre):
        return np.einsum("tj,tjd->td", pre, X)

    @staticmethod
    def hc_expand(f, X, post, comb):
        return post[:, :, None] * f[:, None, :] + np.einsum("tjk,tjd->tkd", comb, X)

    def engram(self, X, l, hash_ids):
        """X: [T, hc, d]; hash_ids: [T, cols] rows of this layer's table."""
        c, p = self.cfg, f"layers.{l}.engram."
        rows = self.W(p + "embed.weight")[hash_ids]                        # [T, cols, hd]
        kv = rows.reshape(rows.shape[0], -1) @ self.W(p + "wkv.weight").T
        d, n = c.hidden_size, c.hc_mult
        key, value = kv[:, : n * d].reshape(-1, n, d), kv[:, n * d:]
        wq = self.W(p + "q_weight") * self.W(p + "k_weight")
        eps = c.rms_norm_eps
        rstd = 1 / np.sqrt(np.mean(X * X, -1) + eps) / np.sqrt(np.mean(key * key, -1) + eps)
        dot = (X * wq[None] * key).sum(-1) * rstd / math.sqrt(d)
        gate = sigmoid(np.copysign(np.sqrt(np.maximum(np.abs(dot), 1e-6)), dot))   # [T, hc]
        return X + gate[:, :, None] * value[:, None, :]

    def moe(self, x, l):
        c, p = self.cfg, f"layers.{l}.ffn."
        logits = self.lin(x, p + "gate.weight") / c.gate_temp
        if c.scoring_func == "sqrtsoftplus":
            s = np.sqrt(softplus(logits))
        elif c.scoring_func == "sigmoid":
            s = sigmoid(logits)
        else:
            e = np.exp(logits - logits.max(-1, keepdims=True))
            s = e / e.sum(-1, keepdims=True)
        sel = s + self.W(p + "gate.bias")
        y = np.zeros_like(x)
        lim = c.swiglu_limit
        for t in range(x.shape[0]):
            k = c.num_experts_per_tok
            idx = topk_idx(sel[t], k)
            self._margin("expert", sel[t], k)
            w = s[t, idx]
            if c.norm_topk_prob and k > 1:
                w = w / (w.sum() + 1e-20)
            w = w * c.routed_scaling_factor
            for e_, we in zip(idx, w):
                y[t] += self.expert(x[t], f"{p}experts.{e_}.", we, lim)
        for t in range(x.shape[0]):
            y[t] += self.expert(x[t], p + "shared_experts.", 1.0, lim)
        return y

    def expert(self, x, p, weight, lim):
        g = self.lin(x, p + "w1.weight")
        u = self.lin(x, p + "w3.weight")
        if lim > 0:
            g, u = np.minimum(g, lim), np.clip(u, -lim, lim)
        return self.lin(silu(g) * u * weight, p + "w2.weight")

    # -- attention pieces shared by both paths --------------------------------------------------
    def q_proj(self, x, l, pos):
        c, p = self.cfg, f"layers.{l}.attn."
        qr = rms_norm(self.lin(x, p + "wq_a.weight"), self.W(p + "q_norm.weight"), c.rms_norm_eps)
        q = self.lin(qr, p + "wq_b.weight").reshape(-1, c.num_attention_heads, c.head_dim)
        return qr, rope(q, pos, self.freqs(l))             # no per-head q norm in V4.1

    def window_kv(self, x, l, pos):
        c, p = self.cfg, f"layers.{l}.attn."
        kv = rms_norm(self.lin(x, p + "wkv.weight"), self.W(p + "kv_norm.weight"), c.rms_norm_eps)
        kv = rope(kv, pos, self.freqs(l))
        if self.kv_quant:
            kv = fake_fp8_block(kv, 32)
        return kv

    def compress_latents(self, kvs, gates, l):
        """Pool complete groups. kvs/gates: [G, ratio, D] (gates None at ratio 1: kvs [G, D])."""
        c, p = self.cfg, f"layers.{l}.attn.compressor."
        if gates is None:
            lat = kvs
        else:
            e = np.exp(gates - gates.max(1, keepdims=True))
            lat = (kvs * e / e.sum(1, keepdims=True)).sum(1)
        return rms_norm(lat, self.W(p + "norm.weight"), c.rms_norm_eps)     # pre-RoPE latent

    def index_keys(self, lat, l, gpos):
        c, p = self.cfg, f"layers.{l}.attn.indexer."
        k = rms_norm(lat @ self.W(p + "wk.weight").T, self.W(p + "k_norm.weight"), c.rms_norm_eps)
        k = rope(k, gpos, self.freqs_comp)
        return fake_fp4_block(k, 32) if self.kv_quant else k

    def comp_entries(self, lat, gpos):
        e = rope(lat, gpos, self.freqs_comp)
        return fake_fp4_block(e, 16, e4m3_scale=True) if self.kv_quant else e

    def index_scores(self, x, qr, l, pos, keys):
        """[T, G] scores of each query against the index keys (unmasked)."""
        c, p = self.cfg, f"layers.{l}.attn.indexer."
        q = self.lin(qr, p + "wq_b.weight").reshape(-1, c.index_n_heads, c.index_head_dim)
        q = rope(q, pos, self.freqs_comp)
        if self.kv_quant:
            q = fake_fp4_block(q, 32)
        w = self.lin(x, p + "weights_proj.weight") * (c.index_head_dim ** -0.5 * c.index_n_heads ** -0.5)
        d = np.maximum(np.einsum("thd,gd->thg", q, keys), 0.0)
        return np.einsum("thg,th->tg", d, w)

    def candidate_mask(self, scores, n_vis):
        """Level one: keep the best `candidate_topk_blocks` blocks (block score = max over its
        visible positions; the block holding the newest visible position is always kept)."""
        c = self.cfg
        b, G = c.candidate_block_size, scores.shape[0]
        nb = -(-G // b)
        pad = np.full(nb * b, -np.inf)
        pad[:G] = scores
        bs = pad.reshape(nb, b).max(1)
        bs[(n_vis - 1) // b] = np.inf
        k = min(c.candidate_topk_blocks, nb)
        self._margin("block", bs[np.isfinite(bs)], k - 1)
        keep = np.zeros(nb, bool)
        top = topk_idx(bs, k)
        keep[top[bs[top] > -np.inf]] = True
        return np.repeat(keep, b)[:G]

    def select(self, s, n_vis, l, cand_in):
        """Per query: returns (selected entry ids, candidate mask or None)."""
        c = self.cfg
        s = s.copy()
        s[n_vis:] = -np.inf
        cand_out = None
        if l == c.candidate_source_layer_id:
            cand_out = self.candidate_mask(s, n_vis)
        elif 0 <= c.candidate_source_layer_id < l:
            s = np.where(cand_in, s, -np.inf)
        k = min(c.index_topk, n_vis)
        self._margin("index", s, k)
        idx = topk_idx(s, k)
        assert np.all(np.isfinite(s[idx]))
        return np.sort(idx), cand_out

    def attend(self, q, keys, l, pos_q):
        """q: [H, D]; keys: [S, D] (value == key); one softmax with the per-head sink."""
        c, p = self.cfg, f"layers.{l}.attn."
        sink = self.W(p + "attn_sink")
        lg = q @ keys.T / math.sqrt(c.head_dim)                              # [H, S]
        m = np.maximum(lg.max(-1), sink) if keys.shape[0] else sink
        e = np.exp(lg - m[:, None])
        den = e.sum(-1) + np.exp(sink - m)
        o = (e / den[:, None]) @ keys                                        # [H, D]
        o = rope(o[None], np.array([pos_q]), self.freqs(l), inverse=True)[0]
        return o

    def out_proj(self, o, l):
        """o: [T, H, D] -> grouped wo_a (block-diagonal), then wo_b."""
        c, p = self.cfg, f"layers.{l}.attn."
        G = c.o_groups
        og = o.reshape(o.shape[0], G, -1)
        wa = self.W(p + "wo_a.weight").reshape(G, c.o_lora_rank, -1)
        z = np.einsum("tgi,gri->tgr", og, wa).reshape(o.shape[0], -1)
        return self.lin(z, p + "wo_b.weight")

    # -- full-sequence forward ------------------------------------------------------------------
    def forward(self, ids, return_hidden=False):
        """ids: [T] of one sequence -> logits [T, V] (every position)."""
        c = self.cfg
        ids = np.asarray(ids)
        T = len(ids)
        pos = np.arange(T)
        hashes = self.hasher(ids) if self.hasher else None
        X = np.repeat(self.W("embed.weight")[ids][:, None, :], c.hc_mult, 1)
        pre_mix = np.zeros((T, c.hc_mult))
        pre_mix[:, 0] = 1.0
        shared = {}
        for l in range(c.num_hidden_layers):
            if l in c.engram_layer_ids:
                X = self.engram(X, l, hashes[:, c.engram_layer_ids.index(l)])
            a_pre, a_post, a_comb = self.hc_mixes(X, l, "attn")
            x = rms_norm(self.hc_collapse(X, pre_mix), self.W(f"layers.{l}.attn_norm.weight"), c.rms_norm_eps)
            X = self.hc_expand(self.attention_full(x, l, pos, shared), X, a_post, a_comb)
            f_pre, f_post, f_comb = self.hc_mixes(X, l, "ffn")
            x = rms_norm(self.hc_collapse(X, a_pre), self.W(f"layers.{l}.ffn_norm.weight"), c.rms_norm_eps)
            X = self.hc_expand(self.moe(x, l), X, f_post, f_comb)
            pre_mix = f_pre
        h = rms_norm(self.hc_collapse(X, pre_mix), self.W("norm.weight"), c.rms_norm_eps)
        logits = h @ self.W("head.weight").T
        return (logits, h) if return_hidden else logits

    def attention_full(self, x, l, pos, shared):
        c = self.cfg
        T, r, win = x.shape[0], c.compress_ratios[l], c.sliding_window
        qr, q = self.q_proj(x, l, pos)
        kv = self.window_kv(x, l, pos)
        if r and l in c.kv_source_layer_ids:
            p = f"layers.{l}.attn.compressor."
            G = T // r
            if r == 1:
                lat = self.compress_latents(self.lin(x, p + "wkv.weight"), None, l)
            elif G == 0:
                lat = np.zeros((0, c.head_dim))
            else:
                kvs = self.lin(x[: G * r], p + "wkv.weight").reshape(G, r, -1)
                gts = self.lin(x[: G * r], p + "wgate.weight").reshape(G, r, -1)
                lat = self.compress_latents(kvs, gts, l)
            gpos = np.arange(G) * r
            shared["ck"] = self.comp_entries(lat, gpos)
            shared["ik"] = self.index_keys(lat, l, gpos)
        if r and l in c.index_source_layer_ids:
            S = self.index_scores(x, qr, l, pos, shared["ik"])
            sel, cands = [], []
            for t in range(T):
                n_vis = (t + 1) // r
                if n_vis == 0:
                    sel.append(np.zeros(0, np.int64))
                    cands.append(None)
                    continue
                cin = shared["cand"][t] if 0 <= c.candidate_source_layer_id < l else None
                s_idx, cand = self.select(S[t], n_vis, l, cin)
                sel.append(s_idx)
                cands.append(cand)
            shared["sel"] = sel
            if l == c.candidate_source_layer_id:
                shared["cand"] = cands
        outs = []
        for t in range(T):
            keys = kv[max(0, t - win + 1): t + 1]
            if r:
                keys = np.concatenate([keys, shared["ck"][shared["sel"][t]]], 0)
            outs.append(self.attend(q[t], keys, l, t))
        return self.out_proj(np.stack(outs), l)


# ----------------------------------------------------------------------------------------------
# incremental path: explicit per-sequence state, chunks of any size
# ----------------------------------------------------------------------------------------------

class Session:
    """One sequence's decode state. State per layer:
      ring[l]      the last `sliding_window` window-KV rows (ring slot = pos % window)
      part[l]      KV sources with ratio > 1: wkv/wgate rows of the incomplete group
      ck[l], ik[l] KV sources: compressed KV entries (post-RoPE) and index keys, by group
      history      compressed token ids by position (Engram n-gram look-back)
    Index selections and candidate masks are per query and recomputed every step; nothing
    else is carried between steps."""

    def __init__(self, model: Model):
        self.m, c = model, model.cfg
        self.c = c
        self.pos = 0
        L = c.num_hidden_layers
        self.ring = [np.zeros((c.sliding_window, c.head_dim)) for _ in range(L)]
        self.part = {l: ([], []) for l in c.kv_source_layer_ids}
        self.ck = {l: np.zeros((0, c.head_dim)) for l in c.kv_source_layer_ids}
        self.ik = {l: np.zeros((0, c.index_head_dim)) for l in c.kv_source_layer_ids}
        self.history = []

    def step(self, ids):
        """Feed a chunk; returns logits [len(ids), V]. Positions are processed one at a time
        through the whole stack (all layers for token t before token t+1)."""
        return np.stack([self._token(int(t)) for t in np.atleast_1d(ids)])

    def _token(self, tok):
        m, c, t = self.m, self.c, self.pos
        hashes = None
        if m.hasher:
            self.history.append(int(m.hasher.token_map[tok]))
            hashes = m.hasher.hash_positions(self.history, [t])[0]
        X = np.repeat(m.W("embed.weight")[[tok]][:, None, :], c.hc_mult, 1)
        pre_mix = np.zeros((1, c.hc_mult))
        pre_mix[:, 0] = 1.0
        shared = {}
        for l in range(c.num_hidden_layers):
            if l in c.engram_layer_ids:
                X = m.engram(X, l, hashes[None, c.engram_layer_ids.index(l)])
            a_pre, a_post, a_comb = m.hc_mixes(X, l, "attn")
            x = rms_norm(m.hc_collapse(X, pre_mix), m.W(f"layers.{l}.attn_norm.weight"), c.rms_norm_eps)
            X = m.hc_expand(self._attention(x, l, t, shared), X, a_post, a_comb)
            f_pre, f_post, f_comb = m.hc_mixes(X, l, "ffn")
            x = rms_norm(m.hc_collapse(X, a_pre), m.W(f"layers.{l}.ffn_norm.weight"), c.rms_norm_eps)
            X = m.hc_expand(m.moe(x, l), X, f_post, f_comb)
            pre_mix = f_pre
        h = rms_norm(m.hc_collapse(X, pre_mix), m.W("norm.weight"), c.rms_norm_eps)
        self.pos += 1
        return (h @ m.W("head.weight").T)[0]

    def _attention(self, x, l, t, shared):
        m, c = self.m, self.c
        r, win = c.compress_ratios[l], c.sliding_window
        pos = np.array([t])
        qr, q = m.q_proj(x, l, pos)
        self.ring[l][t % win] = m.window_kv(x, l, pos)[0]
        n_win = min(t + 1, win)
        keys = self.ring[l][[(t - i) % win for i in range(n_win)][::-1]]
        if r and l in c.kv_source_layer_ids:
            p = f"layers.{l}.attn.compressor."
            kv_row = m.lin(x, p + "wkv.weight")[0]
            lat = None
            if r == 1:
                lat = m.compress_latents(kv_row[None], None, l)
            else:
                kvs, gts = self.part[l]
                kvs.append(kv_row)
                gts.append(m.lin(x, p + "wgate.weight")[0])
                if len(kvs) == r:                        # group complete: pool and drain
                    lat = m.compress_latents(np.stack(kvs)[None], np.stack(gts)[None], l)
                    self.part[l] = ([], [])
            if lat is not None:
                g = np.array([(t + 1) // r - 1]) * r   # first token of the group just closed
                self.ck[l] = np.concatenate([self.ck[l], m.comp_entries(lat, g)])
                self.ik[l] = np.concatenate([self.ik[l], m.index_keys(lat, l, g)])
        if r:
            src = c.kv_source(l)
            n_vis = (t + 1) // r
            assert self.ck[src].shape[0] == n_vis
            if l in c.index_source_layer_ids:
                if n_vis == 0:
                    shared["sel"] = np.zeros(0, np.int64)
                else:
                    s = m.index_scores(x, qr, l, pos, self.ik[src])[0]
                    cin = shared.get("cand") if 0 <= c.candidate_source_layer_id < l else None
                    sel, cand = m.select(s, n_vis, l, cin)
                    shared["sel"] = sel
                    if l == c.candidate_source_layer_id:
                        shared["cand"] = cand
            keys = np.concatenate([keys, self.ck[src][shared["sel"]]], 0)
        o = m.attend(q[0], keys, l, t)
        return m.out_proj(o[None], l)


def load_model(folder, kv_quant=False, trace=None):
    cfg = Config.from_json(os.path.join(folder, "config.json"))
    w = load_weights(os.path.join(folder, "model.safetensors"))
    tm = None
    if cfg.engram_layer_ids:
        tm_path = os.path.join(folder, "engram_token_map.json")
        if os.path.exists(tm_path):
            with open(tm_path) as f:
                tm = json.load(f)["token_map"]
        else:
            from tokenizer_compress import build_compressed_token_map
            tm, n = build_compressed_token_map(os.path.join(folder, "tokenizer.json"))
            assert n == cfg.engram_compressed_vocab_size
    return Model(cfg, w, tm, kv_quant=kv_quant, trace=trace)
