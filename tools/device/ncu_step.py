#!/usr/bin/env python3
"""One decode step's kernels from `ncu --csv --metrics gpu__time_duration.sum` output (run_ncu.sh
TIME_BENCH): the kernels between the last two sampling launches (sample_kernel ends each step),
summed by name (share, calls, mean), then optionally the first N of them in launch order.
Usage: ncu_step.py NCU.csv [N]"""
import csv, sys, collections
lines = [l for l in open(sys.argv[1], errors="replace") if l.startswith('"')]
rows = []
for r in csv.DictReader(lines):
    if r.get("Metric Name") != "gpu__time_duration.sum": continue
    v = float(r["Metric Value"].replace(",", ""))
    unit = r.get("Metric Unit", "nsecond")
    ns = v * {"nsecond": 1, "usecond": 1e3, "msecond": 1e6, "second": 1e9}.get(unit, 1)
    rows.append((int(r["ID"]), r["Kernel Name"], ns))
rows.sort()
marks = [i for i, r in enumerate(rows) if "sample_kernel" in r[1]]
a, b = marks[-2] + 1, marks[-1] + 1
step = rows[a:b]
tot = sum(r[2] for r in step)
print(f"step kernels {len(step)}, sum {tot/1e3:.1f} us")
agg = collections.defaultdict(lambda: [0, 0.0])
for _, n, ns in step:
    k = n.split("(")[0][-70:]
    agg[k][0] += 1; agg[k][1] += ns
for k, (c, ns) in sorted(agg.items(), key=lambda x: -x[1][1]):
    print(f"{ns/1e3:9.1f} us {100*ns/tot:5.1f}% {c:4d} x {ns/c/1e3:7.2f}  {k}")
if len(sys.argv) > 2:
    for i, n, ns in step[: int(sys.argv[2])]:
        print(f"{ns/1e3:8.2f}  {n[:110]}")
