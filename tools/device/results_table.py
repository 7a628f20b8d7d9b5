#!/usr/bin/env python3
"""A results file (bench/results/*.json in the issue's format, e.g. plan_matrix.sh's matrix.json) as
the markdown table docs/performance.md keeps: one row per (model, phase, batch, context), with the
step time against its floor and tokens/s against the transformers peer where it ran the same shape.

  tools/device/results_table.py bench/results/matrix-h200.json [--targets]

--targets adds a column that says, per row, whether the issue's target for it is met: decode at
batch 1-64 at most 1.3x its floor, prefill at 8k at least 50% of the FP8 rate (floor ratio <= 2),
the EP slice at batch 256 and context 4096 at least 25,000 tokens/s, and against the peer at least
40x at batch 1 and 5x at batch 32 (decode).
"""
import argparse
import json
import sys


def fmt(x, spec):
    return "" if x is None else format(x, spec)


def target(row):
    """The issue's verdict for this row ("met" / "missed (...)"), or "" where it sets none."""
    verdicts = []
    ratio, phase, batch = row.get("floor_ratio"), row.get("phase"), row.get("batch")
    if phase == "decode" and 1 <= batch <= 64 and ratio is not None:
        verdicts.append(("<= 1.3x floor", ratio <= 1.3))
    if phase == "prefill" and row.get("context") == 8192 and ratio is not None:
        verdicts.append((">= 50% FP8", ratio <= 2.0))
    if row.get("model") == "v4-flash-ep8" and phase == "decode" and batch == 256 and row.get("context", 0) >= 4096:
        verdicts.append((">= 25,000 tok/s", row.get("tokens_per_s", 0) >= 25000))
    peer = (row.get("peer") or {}).get("tokens_per_s")
    if phase == "decode" and peer and batch in (1, 32):
        need = 40 if batch == 1 else 5
        verdicts.append((f">= {need}x peer", row["tokens_per_s"] / peer >= need))
    return "; ".join(f"{what}: {'met' if ok else 'missed'}" for what, ok in verdicts)


def table(doc, with_targets=False):
    head = ["model", "phase", "batch", "context", "tokens/s", "step ms", "floor ms", "x floor", "peer tok/s", "x peer"]
    if with_targets:
        head.append("target")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(["---"] * 2 + ["---:"] * (len(head) - 2 - with_targets)) +
             ("|---|" if with_targets else "|")]
    rows = sorted(doc.get("rows", []), key=lambda r: (r.get("model", ""), r.get("phase", ""), r.get("context", 0),
                                                       r.get("batch", 0)))
    for r in rows:
        peer = (r.get("peer") or {}).get("tokens_per_s")
        cells = [r.get("model", "?"), r.get("phase", "?"), str(r.get("batch", "")), str(r.get("context", "")),
                 fmt(r.get("tokens_per_s"), ",.0f"), fmt(r.get("step_ms"), ".3f"), fmt(r.get("floor_ms"), ".3f"),
                 fmt(r.get("floor_ratio"), ".2f"), fmt(peer, ",.1f"),
                 fmt(r["tokens_per_s"] / peer if peer and r.get("tokens_per_s") else None, ".1f")]
        if with_targets:
            cells.append(target(r))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results")
    ap.add_argument("--targets", action="store_true")
    a = ap.parse_args(argv)
    with open(a.results) as f:
        doc = json.load(f)
    print(f"{doc.get('machine', '?')}, git {doc.get('git_rev', '?')}, {doc.get('date', '?')}: `{doc.get('command', '?')}`")
    print()
    print(table(doc, a.targets))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
