#!/usr/bin/env python3
"""One decode step's kernel timeline from bench/cuda_util/kernel_trace.cpp's CSV (CUPTI records,
graph kernels included, each kernel timed where it ran among the others, unlike ncu's serialised
runs): the kernels between the last two sampling kernels (sample_kernel ends each step), in start
order, with their start and end in us from the step's first start, duration, stream and hardware
channel (a graph's parallel branches run on different channels); then the step's span, the time
with no kernel running, and the widest such gaps. With programmatic dependent launch a kernel
starts (its blocks resident, waiting) before its predecessor ends, so overlap alone does not mean
two kernels' work ran together: read the ends.

  tools/device/kernel_timeline.py TRACE.csv [--rows N]
"""
import argparse
import csv
import re


def short(name: str) -> str:
    """The kernel's name without namespaces and arguments (template arguments kept)."""
    base = re.sub(r"\(anonymous namespace\)::|<unnamed>::|deepinfer::|cuda::", "", name)
    base = re.sub(r"^void ", "", base.split("(")[0])
    return base[-60:]


def step_rows(rows):
    """The rows of the last whole step: after the second-to-last sample_kernel, to the last."""
    marks = [i for i, r in enumerate(rows) if "sample_kernel" in r["name"]]
    if len(marks) < 2:
        return rows
    return rows[marks[-2] + 1 : marks[-1] + 1]


def idle_gaps(step):
    """(gap start, gap length) of the times inside the step when no kernel runs, in ns."""
    gaps, end = [], step[0]["start"]
    for r in step:
        if r["start"] > end:
            gaps.append((end, r["start"] - end))
        end = max(end, r["end"])
    return gaps


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("trace")
    ap.add_argument("--rows", type=int, default=400)
    args = ap.parse_args()
    with open(args.trace, newline="") as f:
        rows = [
            {"start": int(r["start_ns"]), "end": int(r["end_ns"]), "stream": r["stream"], "channel": r["channel"],
             "graph": r["graph"], "name": r["name"]}
            for r in csv.DictReader(f)
        ]
    if not rows:
        print(f"{args.trace}: no kernels")
        return
    rows.sort(key=lambda r: r["start"])
    step = step_rows(rows)
    t0 = step[0]["start"]
    span = max(r["end"] for r in step) - t0
    busy_sum = sum(r["end"] - r["start"] for r in step)
    gaps = idle_gaps(step)
    print(f"step: {len(step)} kernels, span {span / 1e3:.1f} us, kernels' own times summed {busy_sum / 1e3:.1f} us, "
          f"no kernel running {sum(g for _, g in gaps) / 1e3:.1f} us in {len(gaps)} gaps")
    channels = sorted({r["channel"] for r in step}, key=lambda c: int(c) if c.isdigit() else 0)
    print(f"channels: {' '.join(channels)}; streams: {' '.join(sorted({r['stream'] for r in step}))}")
    print(f"{'start':>8} {'end':>8} {'us':>7} {'str':>4} {'ch':>4}  kernel")
    for r in step[: args.rows]:
        print(f"{(r['start'] - t0) / 1e3:8.1f} {(r['end'] - t0) / 1e3:8.1f} {(r['end'] - r['start']) / 1e3:7.2f} "
              f"{r['stream']:>4} {r['channel']:>4}  {short(r['name'])}")
    if gaps:
        print("widest gaps (us at, us long):",
              ", ".join(f"{(a - t0) / 1e3:.1f}: {g / 1e3:.2f}" for a, g in sorted(gaps, key=lambda x: -x[1])[:10]))


if __name__ == "__main__":
    main()
