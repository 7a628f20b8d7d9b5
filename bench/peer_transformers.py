#!/usr/bin/env python3
"""The transformers peer for the GPU bench: V4-Flash shapes in transformers' DeepseekV4ForCausalLM.

Builds a random-weight DeepSeek-V4-Flash with the first N layers (bf16, on one CUDA device), then
measures, each in its own try/except:
  - prefill at each --prefill-tokens length: one forward at batch 1 (median of --prefill-reps, after
    one warm-up), tokens_per_s = tokens / median seconds;
  - decode at each --batches size and each --contexts length: prefill the context per sequence (in
    chunks, so eager attention's [B, 64, chunk, keys] scores fit), then step_ms = median of --steps
    timed calls of model(input_ids=next, past_key_values=cache, use_cache=True), each between two
    torch.cuda.synchronize(); tokens_per_s = batch * 1000 / step_ms.
Rows run cheapest first (prefill by length, then decode by the tokens its context fill costs), so a
--time-budget cut loses the dearest ones. Writes {"machine", "torch", "transformers", "rows": [...]}
to --out; a failed or skipped measurement is a row with "error". Progress goes to stderr.

  python3 bench/peer_transformers.py --out bench/results/peer-transformers-h200.json
  python3 bench/peer_transformers.py --print-config      # the config dict; needs no torch
  python3 bench/peer_transformers.py --plan --batches 1,8,32 --contexts 4096,32768  # the rows, in order

Needs PyTorch and transformers >= 5.8.1 with models/deepseek_v4 (written against 5.17's field names,
the ones tools' fixtures /work/shared/fixtures/tiny-v4-*/config.json were saved with).
"""

import argparse
import json
import os
import statistics
import sys
import time

FLASH_NUM_LAYERS = 43
HASH_LAYERS = 3
CSA_RATE = 4
HCA_RATE = 128
# V4-Flash `compress_ratios` (config.json), backbone part only: [0, 0] + [4, 128] * 20 + [4].
FLASH_COMPRESS_RATIOS = [0, 0] + [CSA_RATE, HCA_RATE] * 20 + [CSA_RATE]
# transformers' configuration_deepseek_v4.py `_COMPRESS_RATIO_TO_LAYER_TYPE`.
RATIO_TO_LAYER_TYPE = {
    0: "sliding_attention",
    CSA_RATE: "compressed_sparse_attention",
    HCA_RATE: "heavily_compressed_attention",
}
HEAD_DIM = 512
REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ROPE_DIM = 64


def log(msg):
    print(f"[peer_transformers {time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def flash_layer_types(num_layers):
    """The first num_layers entries of V4-Flash's attention schedule, in transformers' names."""
    if not 1 <= num_layers <= FLASH_NUM_LAYERS:
        raise ValueError(f"--layers must be in 1..{FLASH_NUM_LAYERS}, got {num_layers}")
    return [RATIO_TO_LAYER_TYPE[r] for r in FLASH_COMPRESS_RATIOS[:num_layers]]


def flash_config_dict(num_layers):
    """DeepseekV4Config kwargs for V4-Flash's real shapes with num_layers layers (no torch needed).

    Field names are transformers 5.17's (the dataclass fields of DeepseekV4Config). The schedule is
    passed explicitly: the config's default layer_types is the V4-Pro pattern.
    """
    partial = ROPE_DIM / HEAD_DIM
    return {
        "vocab_size": 129280,
        "hidden_size": 4096,
        "num_hidden_layers": num_layers,
        "num_attention_heads": 64,
        "num_key_value_heads": 1,
        "head_dim": HEAD_DIM,
        "partial_rotary_factor": partial,
        "q_lora_rank": 1024,
        "o_groups": 8,
        "o_lora_rank": 1024,
        "moe_intermediate_size": 2048,
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "num_experts_per_tok": 6,
        "scoring_func": "sqrtsoftplus",
        "norm_topk_prob": True,
        "routed_scaling_factor": 1.5,
        "swiglu_limit": 10.0,
        "hidden_act": "silu",
        "sliding_window": 128,
        "compress_rates": {
            "compressed_sparse_attention": CSA_RATE,
            "heavily_compressed_attention": HCA_RATE,
        },
        "layer_types": flash_layer_types(num_layers),
        "mlp_layer_types": ["hash_moe"] * min(num_layers, HASH_LAYERS)
        + ["moe"] * max(0, num_layers - HASH_LAYERS),
        "index_n_heads": 64,
        "index_head_dim": 128,
        "index_topk": 512,
        "hc_mult": 4,
        "hc_sinkhorn_iters": 20,
        "hc_eps": 1e-6,
        "rms_norm_eps": 1e-6,
        "rope_theta": 10000.0,
        "compress_rope_theta": 160000.0,
        "rope_parameters": {
            "main": {"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": partial},
            "compress": {
                "rope_type": "yarn",
                "rope_theta": 160000.0,
                "partial_rotary_factor": partial,
                "factor": 16.0,
                "original_max_position_embeddings": 65536,
                "beta_fast": 32,
                "beta_slow": 1,
                "attention_factor": 1.0,
            },
        },
        "max_position_embeddings": 1048576,
        "num_nextn_predict_layers": 1,
        "attention_bias": False,
        "attention_dropout": 0.0,
        "initializer_range": 0.02,
        "tie_word_embeddings": False,
        "bos_token_id": 0,
        "eos_token_id": 1,
        "use_cache": True,
    }


def check_config_dict(cfg):
    """Constraints transformers' DeepseekV4 modules rely on; returns a list of problems (empty = ok)."""
    problems = []
    n = cfg["num_hidden_layers"]
    for key in ("layer_types", "mlp_layer_types"):
        if len(cfg[key]) != n:
            problems.append(f"len({key}) = {len(cfg[key])} != num_hidden_layers = {n}")
    if any(t not in RATIO_TO_LAYER_TYPE.values() for t in cfg["layer_types"]):
        problems.append(f"unknown layer type in {cfg['layer_types']}")
    if any(t not in ("hash_moe", "moe") for t in cfg["mlp_layer_types"]):
        problems.append(f"unknown mlp layer type in {cfg['mlp_layer_types']}")
    if (cfg["num_attention_heads"] * cfg["head_dim"]) % cfg["o_groups"]:
        problems.append("num_attention_heads * head_dim must divide by o_groups")
    rope_dim = cfg["head_dim"] * cfg["partial_rotary_factor"]
    if rope_dim != ROPE_DIM or rope_dim % 2:
        problems.append(f"rope dims {rope_dim} != {ROPE_DIM}")
    compress = cfg["rope_parameters"]["compress"]
    if compress["factor"] * compress["original_max_position_embeddings"] != cfg["max_position_embeddings"]:
        problems.append("yarn factor * original_max_position_embeddings != max_position_embeddings")
    return problems


def check_field_names(cfg, saved_config_path):
    """Keys of cfg that a config.json saved by transformers 5.17 (a tiny-v4 fixture) does not have."""
    if not os.path.exists(saved_config_path):
        return [f"{saved_config_path} not found; field names not checked"]
    with open(saved_config_path) as f:
        saved = json.load(f)
    problems = [f"field {k!r} is not in {saved_config_path}" for k in sorted(set(cfg) - set(saved))]
    for label in ("main", "compress"):
        extra = set(cfg["rope_parameters"][label]) - set(saved["rope_parameters"][label])
        if extra:
            problems.append(f"rope_parameters.{label} keys {sorted(extra)} are not in {saved_config_path}")
    return problems


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--layers", type=int, default=4, help="first N V4-Flash layers (default 4)")
    p.add_argument("--out", default="peer-transformers.json", help="JSON result path")
    p.add_argument("--print-config", action="store_true",
                   help="print the config dict, check it (and its field names against --saved-config), exit; "
                        "needs no torch")
    p.add_argument("--saved-config", default=os.path.join(REPO_ROOT, "tests/data/tiny-v4-a/config.json"),
                   help="a config.json saved by transformers 5.17, for --print-config's field-name check")
    p.add_argument("--batches", default="1,32", help="decode batch sizes, comma separated")
    p.add_argument("--contexts", "--context", default="4096", help="decode contexts per sequence, comma separated")
    p.add_argument("--steps", type=int, default=20, help="timed decode steps (>= 10)")
    p.add_argument("--warmup", type=int, default=3, help="untimed decode steps before timing")
    p.add_argument("--prefill-tokens", default="2048", help="batch-1 prefill lengths, comma separated")
    p.add_argument("--prefill-reps", type=int, default=3, help="timed prefill forwards")
    p.add_argument("--chunk-tokens", type=int, default=8192,
                   help="tokens (batch x chunk) per forward while filling a decode context")
    p.add_argument("--time-budget", type=float, default=240.0, help="seconds; later rows are skipped")
    p.add_argument("--experts-impl", default="",
                   help="config._experts_implementation to force (eager|grouped_mm|batched_mm); "
                        "default: transformers' own choice")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--plan", action="store_true", help="print the rows in the order they would run, exit; needs no torch")
    args = p.parse_args(argv)
    if args.steps < 10:
        p.error("--steps must be >= 10")
    args.batch_list = positive_list(p, "--batches", args.batches)
    args.context_list = positive_list(p, "--contexts", args.contexts)
    args.prefill_list = positive_list(p, "--prefill-tokens", args.prefill_tokens)
    return args


def positive_list(parser, name, text):
    """'1,32' -> [1, 32]; anything else than positive integers is a usage error."""
    try:
        values = [int(v) for v in text.split(",") if v.strip()]
    except ValueError:
        parser.error(f"{name} must be comma-separated integers, got {text!r}")
    if not values or any(v <= 0 for v in values):
        parser.error(f"{name} must be positive integers, got {text!r}")
    return values


def planned_rows(model_name, args):
    """Every row to measure, cheapest first: the prefills by length, then the decodes by the tokens
    their context fill forwards (batch x context), the smaller batch first on a tie."""
    rows = [{"model": model_name, "phase": "prefill", "batch": 1, "context": t} for t in sorted(set(args.prefill_list))]
    decode = [(b * c, b, c) for b in set(args.batch_list) for c in set(args.context_list)]
    rows += [{"model": model_name, "phase": "decode", "batch": b, "context": c} for _, b, c in sorted(decode)]
    return rows


class Budget:
    def __init__(self, seconds):
        self.start = time.monotonic()
        self.seconds = seconds

    def elapsed(self):
        return time.monotonic() - self.start

    def exceeded(self):
        return self.elapsed() > self.seconds


def machine_name(torch):
    prop = torch.cuda.get_device_properties(0)
    return f"{prop.name}, {prop.multi_processor_count} SMs, {prop.total_memory / 2**30:.0f} GiB"


def dtype_counts(model):
    counts = {}
    for p in model.parameters():
        counts[str(p.dtype)] = counts.get(str(p.dtype), 0) + p.numel()
    return counts


def build_model(torch, cfg_dict, args):
    """Random init directly on the GPU in bf16 (no CPU copy of the weights)."""
    from transformers import DeepseekV4Config, DeepseekV4ForCausalLM

    config = DeepseekV4Config(**cfg_dict)
    if config.layer_types != cfg_dict["layer_types"]:
        raise RuntimeError(f"config folded layer_types to {config.layer_types}")
    if args.experts_impl:
        try:
            config._experts_implementation = args.experts_impl
        except Exception as exc:  # noqa: BLE001 - set_experts_implementation below may still work
            log(f"config._experts_implementation = {args.experts_impl!r} failed: {exc}")
    torch.manual_seed(args.seed)
    with torch.device("cuda"):
        try:
            model = DeepseekV4ForCausalLM._from_config(config, dtype=torch.bfloat16)
        except TypeError:  # older spelling
            model = DeepseekV4ForCausalLM._from_config(config, torch_dtype=torch.bfloat16)
    if args.experts_impl and hasattr(model, "set_experts_implementation"):
        model.set_experts_implementation(args.experts_impl)
    model = ensure_on_gpu(torch, model)
    model.eval()
    rerandomise(torch, model, config)
    return model


def ensure_on_gpu(torch, model):
    """Should transformers have ignored the torch.device("cuda") context: a meta model is materialised on
    the GPU and initialised there (to_empty + _init_weights); a CPU one is moved (slow)."""
    devices = {p.device.type for p in model.parameters()}
    if devices == {"cuda"}:
        return model
    log(f"parameters were created on {sorted(devices)}, not on the GPU")
    if devices == {"meta"}:
        model = model.to_empty(device="cuda")
        with torch.no_grad():
            for module in model.modules():
                model._init_weights(module)
        return model
    return model.to("cuda")


def rerandomise(torch, model, config):
    """_init_weights zeroes tid2eid (every hash-routed token would pick expert 0 six times) and the
    router bias; give them valid, distinct random values."""
    gen = torch.Generator(device="cuda").manual_seed(7)
    with torch.no_grad():
        for module in model.modules():
            tid2eid = getattr(module, "tid2eid", None)
            if isinstance(tid2eid, torch.Tensor):
                scores = torch.rand(tid2eid.shape[0], config.n_routed_experts, device="cuda", generator=gen)
                tid2eid.copy_(scores.topk(tid2eid.shape[1], dim=-1).indices.to(tid2eid.dtype))
            bias = getattr(module, "e_score_correction_bias", None)
            if isinstance(bias, torch.Tensor):
                bias.copy_(torch.randn(bias.shape, device="cuda", generator=gen).to(bias.dtype) * 1e-3)
            sinks = getattr(module, "sinks", None)
            if isinstance(sinks, torch.Tensor):
                sinks.copy_(torch.randn(sinks.shape, device="cuda", generator=gen).to(sinks.dtype) * 0.1)


def uniform_bf16(torch, model):
    for p in model.parameters():
        if p.is_floating_point() and p.dtype != torch.bfloat16:
            p.data = p.data.to(torch.bfloat16)


def smoke_forward(torch, model, vocab):
    ids = torch.randint(2, vocab, (1, 16), device="cuda")
    out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
    torch.cuda.synchronize()
    return bool(torch.isfinite(out.logits).all())


def fill_context(torch, model, ids, chunk_tokens):
    """Prefill ids [B, C] into a fresh transformers cache, chunk by chunk; returns (cache, last logits,
    chunk length used). Halves the chunk on CUDA OOM (down to 32 tokens)."""
    batch, context = ids.shape
    chunk = max(1, min(context, chunk_tokens // batch))
    while True:
        try:
            return fill_context_once(torch, model, ids, chunk), chunk
        except torch.cuda.OutOfMemoryError:
            if chunk <= 32:
                raise
        # Only reached after an OOM, outside the handler, so the failed forward's tensors are freed.
        torch.cuda.empty_cache()
        chunk //= 2
        log(f"  OOM while filling the context; retrying with chunks of {chunk}")


def fill_context_once(torch, model, ids, chunk):
    cache, logits = None, None
    for start in range(0, ids.shape[1], chunk):
        out = model(input_ids=ids[:, start:start + chunk], past_key_values=cache, use_cache=True,
                    logits_to_keep=1)
        cache, logits = out.past_key_values, out.logits
    torch.cuda.synchronize()
    return cache, logits


def measure_decode(torch, model, vocab, batch, context, args):
    ids = torch.randint(2, vocab, (batch, context), device="cuda")
    t0 = time.perf_counter()
    (cache, logits), chunk = fill_context(torch, model, ids, args.chunk_tokens)
    fill_s = time.perf_counter() - t0
    seen = int(cache.get_seq_length())  # the model derives decode positions from this
    if seen != context:
        log(f"  WARNING: cache reports {seen} tokens after prefilling {context}")
    log(f"  context {context} x {batch} filled in {fill_s:.1f} s (chunks of {chunk})")
    nxt = logits[:, -1].argmax(dim=-1, keepdim=True)
    times = []
    finite = True
    for step in range(args.warmup + args.steps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        out = model(input_ids=nxt, past_key_values=cache, use_cache=True)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t
        if step >= args.warmup:
            times.append(dt)
        cache = out.past_key_values
        finite = finite and bool(torch.isfinite(out.logits).all())
        nxt = out.logits[:, -1].argmax(dim=-1, keepdim=True)
    step_ms = statistics.median(times) * 1e3
    return {
        "tokens_per_s": round(batch * 1e3 / step_ms, 2),
        "step_ms": round(step_ms, 3),
        "step_ms_min": round(min(times) * 1e3, 3),
        "step_ms_max": round(max(times) * 1e3, 3),
        "timed_steps": len(times),
        "context_fill_s": round(fill_s, 2),
        "context_fill_chunk": chunk,
        "cache_seq_length": seen,
        "finite": finite,
    }


def measure_prefill(torch, model, vocab, tokens, args):
    ids = torch.randint(2, vocab, (1, tokens), device="cuda")
    times = []
    finite = True
    for rep in range(1 + args.prefill_reps):
        torch.cuda.synchronize()
        t = time.perf_counter()
        out = model(input_ids=ids, use_cache=True, logits_to_keep=1)
        torch.cuda.synchronize()
        dt = time.perf_counter() - t
        if rep > 0:
            times.append(dt)
        finite = finite and bool(torch.isfinite(out.logits).all())
        del out
    med = statistics.median(times)
    return {
        "tokens_per_s": round(tokens / med, 1),
        "step_ms": round(med * 1e3, 3),
        "timed_reps": len(times),
        "logits": "last position only (logits_to_keep=1)",
        "finite": finite,
    }


def run_row(torch, rows, budget, base, fn):
    """One measurement: appends a result row or an error row; never raises."""
    if budget.exceeded():
        rows.append({**base, "error": "time budget"})
        log(f"skip {base}: time budget ({budget.elapsed():.0f} s used)")
        return
    log(f"measure {base}")
    torch.cuda.reset_peak_memory_stats()
    try:
        result = fn()
        row = {**base, **result, "peak_gib": round(torch.cuda.max_memory_allocated() / 2**30, 2)}
        log(f"  -> {row}")
    except Exception as exc:  # noqa: BLE001 - every failure becomes an error row
        row = {**base, "error": f"{type(exc).__name__}: {exc}"[:2000]}
        log(f"  -> FAILED {row['error']}")
    rows.append(row)
    torch.cuda.empty_cache()


def write_json(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def main(argv):
    args = parse_args(argv)
    cfg_dict = flash_config_dict(args.layers)
    problems = check_config_dict(cfg_dict)
    if args.print_config:
        problems += check_field_names(cfg_dict, args.saved_config)
        print(json.dumps(cfg_dict, indent=1))
        for problem in problems:
            print(f"config problem: {problem}", file=sys.stderr)
        return 1 if problems else 0
    if problems:
        raise SystemExit(f"config problems: {problems}")
    model_name = f"v4-flash-{args.layers}"
    planned = planned_rows(model_name, args)
    if args.plan:
        for base in planned:
            print(json.dumps(base))
        return 0

    budget = Budget(args.time_budget)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    import torch  # lazily: --print-config runs without torch
    import transformers

    doc = {"machine": "", "torch": torch.__version__, "transformers": transformers.__version__,
           "model": model_name, "config": cfg_dict, "rows": []}
    rows = doc["rows"]
    if not torch.cuda.is_available():
        for base in planned:
            rows.append({**base, "error": "no CUDA device"})
        write_json(args.out, doc)
        log("no CUDA device")
        return 1
    doc["machine"] = machine_name(torch)
    log(f"{doc['machine']}; torch {torch.__version__}, transformers {transformers.__version__}")

    try:
        t0 = time.perf_counter()
        model = build_model(torch, cfg_dict, args)
        torch.cuda.synchronize()
        doc["build_s"] = round(time.perf_counter() - t0, 1)
        doc["param_dtypes_as_built"] = dtype_counts(model)
        doc["weights_gib"] = round(sum(p.numel() * p.element_size() for p in model.parameters()) / 2**30, 2)
        doc["attn_implementation"] = str(getattr(model.config, "_attn_implementation", ""))
        doc["experts_implementation"] = str(getattr(model.config, "_experts_implementation", ""))
        log(f"built {model_name} in {doc['build_s']} s: {doc['weights_gib']} GiB, "
            f"dtypes {doc['param_dtypes_as_built']}, attn {doc['attn_implementation']}, "
            f"experts {doc['experts_implementation']}")
        with torch.inference_mode():
            try:
                doc["smoke_finite"] = smoke_forward(torch, model, cfg_dict["vocab_size"])
                doc["dtype_policy"] = "as built by _from_config(dtype=bfloat16)"
            except RuntimeError as exc:  # fp32-kept modules feeding bf16 linears
                log(f"smoke forward failed ({exc}); casting every parameter to bf16")
                uniform_bf16(torch, model)
                doc["dtype_policy"] = f"uniform bf16 (as built failed: {str(exc)[:300]})"
                doc["smoke_finite"] = smoke_forward(torch, model, cfg_dict["vocab_size"])
    except Exception as exc:  # noqa: BLE001
        log(f"model build failed: {type(exc).__name__}: {exc}")
        for base in planned:
            rows.append({**base, "error": f"model build: {type(exc).__name__}: {exc}"[:2000]})
        write_json(args.out, doc)
        return 1

    vocab = cfg_dict["vocab_size"]
    with torch.inference_mode():
        for base in planned:
            if base["phase"] == "prefill":
                fn = (lambda t: lambda: measure_prefill(torch, model, vocab, t, args))(base["context"])
            else:
                fn = (lambda b, c: lambda: measure_decode(torch, model, vocab, b, c, args))(base["batch"], base["context"])
            run_row(torch, rows, budget, base, fn)
            write_json(args.out, doc)
    doc["total_s"] = round(budget.elapsed(), 1)
    write_json(args.out, doc)
    log(f"wrote {args.out} ({doc['total_s']} s)")
    return 0 if all("error" not in r for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
