#!/usr/bin/env python3
"""Summarizes run.sh's output (stdin): per variant the median tx/s, its
range, the median of the per-round ratios to bare with their range, WAL
records and bytes per transaction (medians), and the load average's range,
as a Markdown table in the order the variants first appear."""
import re
import statistics
import sys

rows = {}
order = []
for line in sys.stdin:
    m = re.match(r"(\d+) (\S+) tps=([\d.]+) .*wal_B_per_txn=(\d+) wal_rec_per_txn=([\d.]+) .*load=([\d.]+)", line)
    if not m:
        continue
    rnd, v, tps, wb, wr, load = m.groups()
    if v not in rows:
        rows[v] = {}
        order.append(v)
    rows[v][int(rnd)] = (float(tps), int(wb), float(wr), float(load))

bare = rows.get("bare", {})
loads = [r[3] for v in rows.values() for r in v.values()]
print(f"load average {min(loads):.1f}–{max(loads):.1f}")
print()
print("| variant | tx/s (median) | range | ratio to bare (median of rounds) | range | WAL records/tx | WAL B/tx |")
print("| --- | ---: | ---: | ---: | ---: | ---: | ---: |")
for v in order:
    r = rows[v]
    tps = [x[0] for x in r.values()]
    ratios = [r[k][0] / bare[k][0] for k in r if k in bare]
    print(f"| {v} | {statistics.median(tps):.0f} | {min(tps):.0f}–{max(tps):.0f} | "
          f"{statistics.median(ratios):.2f} | {min(ratios):.2f}–{max(ratios):.2f} | "
          f"{statistics.median(x[2] for x in r.values()):.2f} | {statistics.median(x[1] for x in r.values()):.0f} |")
