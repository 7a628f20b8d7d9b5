#!/usr/bin/env python3
"""Assemble `deepinfer bench --json` files of one device call into the issue's results format.

  tools/device/collect_bench.py --machine M --git-rev R --command C [--peer PEER.json] [--note N] BENCH.json... > OUT.json

Each bench file gives a decode row (when it timed decode steps) and a prefill row; the peer file
(bench/peer_transformers.py's output) adds transformers' tokens/s for the same shapes. Floors are
the bench's own: decode = bytes a step must move / device copy bandwidth measured in the same run;
prefill (--device cuda) = batch x one prompt's FLOPs / FP8 tensor rate measured in the same run
(prefill_floor_ms); files without it (cpu, older benches) leave the prefill floor fields null.
Benches run with --profile add each phase's parts ("profile_ms": part, ms, and where the bench
knows it the part's floor_ms / x_floor); their times are eager, synchronised per part.
"""
import argparse
import datetime
import json
import sys


def model_name(b):
    syn = b.get("synthetic") or {}
    spec = syn.get("spec", "")
    if spec == "v4-flash-ep8":
        return "v4-flash-ep8"
    if spec:
        return f"v4-flash-{syn.get('layers')}" + ("" if syn.get("experts") == 256 else f"x{syn.get('experts')}")
    return b.get("model_dir", "?")


def peer_for(peer, model, phase, batch, context):
    if not peer or peer.get("model") != model:
        return None
    for r in peer.get("rows", []):
        if r.get("phase") == phase and r.get("batch") == batch and r.get("context") == context:
            return {"name": "transformers", "tokens_per_s": r.get("tokens_per_s")}
    return None


def prefill_row(b, f, model, peer):
    """The prefill row of one bench file (its tokens/s, time, floor and, with --profile, parts)."""
    batch, prompt = b["batch"], b["prompt_len"]
    prefill_ms = prompt * batch / b["prefill_tokens_per_s"] * 1e3
    pfloor = b.get("prefill_floor_ms")
    row = {"model": model, "phase": "prefill", "batch": batch, "context": prompt,
           "tokens_per_s": round(b["prefill_tokens_per_s"], 1), "step_ms": round(prefill_ms, 3),
           "floor_ms": round(pfloor, 3) if pfloor else None,
           "floor_ratio": round(prefill_ms / pfloor, 2) if pfloor else None,
           "peer": peer_for(peer, model, "prefill", batch, prompt), "source": f.split("/")[-1]}
    if pfloor:
        row["flops_per_prompt"] = b.get("prefill_flops")
        row["fp8_tflops"] = b.get("fp8_tflops")
    if b.get("prefill_profile_ms"):  # --profile: parts (each with its floor), eager
        row["profile_ms"] = b["prefill_profile_ms"]
        row["bf16_tflops"] = b.get("bf16_tflops")
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--machine", required=True)
    ap.add_argument("--git-rev", required=True)
    ap.add_argument("--command", required=True)
    ap.add_argument("--peer")
    ap.add_argument("--note", default="")
    ap.add_argument("files", nargs="+")
    a = ap.parse_args()
    peer = json.load(open(a.peer)) if a.peer else None
    rows = []
    for f in a.files:
        b = json.load(open(f))
        model = model_name(b)
        batch, prompt, gen = b["batch"], b["prompt_len"], b["gen_len"]
        if b.get("prefill_tokens_per_s") is not None:  # None: --fill-state, no prefill ran
            rows.append(prefill_row(b, f, model, peer))
        if gen > 0:
            step, floor = b["decode_step_ms"], b["decode_floor_ms"]
            row = {"model": model, "phase": "decode", "batch": batch, "context": prompt + gen // 2,
                   "tokens_per_s": round(b["decode_tokens_per_s"], 1), "step_ms": round(step, 3),
                   "floor_ms": round(floor, 3), "floor_ratio": round(step / floor, 2) if floor else None,
                   "step_parts_ms": b.get("decode_step_parts_ms"), "sampling": b.get("sampling"),
                   "peer": peer_for(peer, model, "decode", batch, prompt), "source": f.split("/")[-1]}
            if b.get("decode_profile_ms"):
                row["profile_ms"] = b["decode_profile_ms"]
            rows.append(row)
    json.dump({"machine": a.machine, "git_rev": a.git_rev, "command": a.command,
               "date": datetime.date.today().isoformat(), "note": a.note, "rows": rows}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    main()
