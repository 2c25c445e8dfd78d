#!/usr/bin/env python3
"""Warp-stall samples of one kernel from Nsight Compute's source page.

  ncu --import REPORT.ncu-rep --page source --csv --print-source sass > K.csv
  python3 bench/ncu_stalls.py K.csv [N]

Prints the sampled stall reasons summed over the kernel's SASS, and the N
lines (default 12) with the most samples, each with its three largest
reasons.  The CSV may be gzipped (K.csv.gz).
"""
import collections
import csv
import gzip
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    path = sys.argv[1]
    top_n = int(sys.argv[2]) if len(sys.argv) > 2 else 12
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        rows = list(csv.reader(f))
    header, data = rows[1], [r for r in rows[2:] if len(r) >= len(rows[1])]
    ix = {h: i for i, h in enumerate(header)}
    stalls = [h for h in header if h.startswith("stall_") and "Not Issued" not in h]

    def num(r, h):
        try:
            return int(r[ix[h]])
        except ValueError:
            return 0

    total = collections.Counter()
    for r in data:
        for h in stalls:
            total[h] += num(r, h)
    samples = sum(num(r, "# Samples") for r in data)
    executed = sum(1 for r in data if num(r, "Instructions Executed") > 0)
    print(f"{rows[0][1]}: {samples} samples, {executed} of {len(data)} instructions executed")
    all_stalls = max(1, sum(total.values()))
    for h, v in total.most_common(12):
        print(f"  {h:28s} {v:7d} {100 * v / all_stalls:5.1f}%")
    for r in sorted(data, key=lambda r: -num(r, "# Samples"))[:top_n]:
        why = sorted(((num(r, h), h[6:]) for h in stalls if num(r, h)), reverse=True)[:3]
        print(f"  {r[0][-5:]} {r[1].strip()[:50]:50s} {num(r, '# Samples'):6d} {why}")


if __name__ == "__main__":
    main()
