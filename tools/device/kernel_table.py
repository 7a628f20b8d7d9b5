#!/usr/bin/env python3
"""Top kernels of an `nsys stats -r cuda_gpu_kern_sum -f csv` table: share, total, calls, mean."""
import csv
import sys


def main(path: str, top: int = 30) -> None:
    rows = list(csv.DictReader(open(path)))
    total = sum(float(r["Total Time (ns)"]) for r in rows)
    print(f"kernels: {len(rows)}, device time {total / 1e6:.1f} ms")
    for r in rows[:top]:
        t = float(r["Total Time (ns)"])
        print(f"{t / total * 100:5.1f}% {t / 1e6:8.2f} ms {int(r['Instances']):7d} x "
              f"{float(r['Avg (ns)']) / 1e3:8.2f} us  {r['Name'][:100]}")


if __name__ == "__main__":
    main(sys.argv[1])
