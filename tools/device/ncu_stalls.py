#!/usr/bin/env python3
"""Why each profiled kernel's warps wait, from `ncu --import REP --page raw --csv` output: per kernel
(one row each), its duration and the top stall reasons as cycles per issued instruction
(smsp__average_warps_issue_stalled_<reason>_per_issue_active.ratio, what ncu's Warp State section
charts), largest first.

  tools/device/ncu_stalls.py RAW.csv [TOP]
"""
import csv
import sys

PREFIX, SUFFIX = "smsp__average_warps_issue_stalled_", "_per_issue_active.ratio"


def number(s: str) -> float:
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return float("nan")


def main(path: str, top: int = 8) -> None:
    rows = list(csv.reader(l for l in open(path, errors="replace") if l.startswith('"')))
    if len(rows) < 3:
        print(f"{path}: no kernel rows")
        return
    head, units, rows = rows[0], rows[1], rows[2:]
    col = {h: i for i, h in enumerate(head)}
    name_i = col.get("Kernel Name", col.get("Function Name", 0))
    dur_i = col.get("gpu__time_duration.sum")
    stalls = [(h[len(PREFIX):-len(SUFFIX)], i) for h, i in col.items() if h.startswith(PREFIX) and h.endswith(SUFFIX)]
    for r in rows:
        dur = f"{number(r[dur_i]):.0f} {units[dur_i]}" if dur_i is not None else "?"
        vals = sorted(((number(r[i]), s) for s, i in stalls), reverse=True)
        total = sum(v for v, _ in vals if v == v)
        print(f"{r[name_i][:110]}\n  duration {dur}; stalled cycles per issued instruction {total:.2f}:")
        print("  " + ", ".join(f"{s} {v:.2f}" for v, s in vals[:top]))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 8)
