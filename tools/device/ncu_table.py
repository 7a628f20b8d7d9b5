#!/usr/bin/env python3
"""Device time by kernel from `ncu --csv --metrics gpu__time_duration.sum` output: share, total,
calls, mean (kernel names cut at the template arguments' end, 100 characters)."""
import collections
import csv
import sys


def main(path: str, top: int = 30) -> None:
    lines = [l for l in open(path, errors="replace") if l.startswith('"')]
    total = collections.defaultdict(float)
    calls = collections.Counter()
    for r in csv.DictReader(lines):
        if r.get("Metric Name") != "gpu__time_duration.sum":
            continue
        v = float(r["Metric Value"].replace(",", ""))
        unit = r.get("Metric Unit", "nsecond")
        ns = v * {"nsecond": 1, "usecond": 1e3, "msecond": 1e6, "second": 1e9}.get(unit, 1)
        name = r["Kernel Name"][:100]
        total[name] += ns
        calls[name] += 1
    all_ns = sum(total.values())
    print(f"kernels: {sum(calls.values())} launches, {len(total)} names, device time {all_ns / 1e6:.2f} ms")
    for name, ns in sorted(total.items(), key=lambda x: -x[1])[:top]:
        print(f"{ns / all_ns * 100:5.1f}% {ns / 1e6:8.3f} ms {calls[name]:6d} x {ns / calls[name] / 1e3:8.2f} us  {name}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 30)
