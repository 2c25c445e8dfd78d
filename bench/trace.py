#!/usr/bin/env python3
"""The wide BF16 kernel's pair of tiles, step by step, from a kernel trace build's stamps.

  ./configure --enable-kernel-trace ...; make
  python3 bench/sxs.py --lib trace=lib/.libs/libmla.so.1 --trace-dir DIR --format bf16 --heads 128 ...
  python3 bench/trace.py DIR/*.bin

Each file holds the step stamps of one decode call (the last of a shape's timing): for the decode grid's
first 16 CTAs (blockIdx.x fastest), clock64 when each role passed each step of each pair of tiles
(kernels/common/trace.cuh).  Printed per file: the CTAs (SM, request, tiles, time, clock rate), then each
step's time from the start of its pair (warpgroup 0's), median and 10th / 90th percentiles over the pairs
but each CTA's first and last, the first pairs alone, and the refills (a tile's copy issued to a
warpgroup's wait on it ending: its landing, or later where the warpgroup came late).  clock64 is an SM's
own counter: only stamps of one CTA are compared.  Only the standard library is needed.
"""

import statistics
import struct
import sys

CTAS, ROLES, PAIRS, STEPS = 16, 4, 256, 16  # MLA_TRACE_* (kernels/common/mla_params.h)
WG_STEPS = ["pair start", "its tile's first part landed", "its S retired", "its P handed over",
            "its part of stage 0 freed", "the other's max taken", "pair end", "its softmax done",
            "its scores' first part issued", "its tile's second part landed"]
LOAD_STEPS = ["even tile: first part issued", "odd tile: first part issued",
              "even tile: waits for its first part", "odd tile: waits for its first part",
              "even tile: second part issued", "odd tile: second part issued"]
ROLE = ["WG 0", "WG 1", "loader"]


def load(path):
    raw = open(path, "rb").read()
    if len(raw) != CTAS * ROLES * PAIRS * STEPS * 8:
        sys.exit(f"{path}: {len(raw)} bytes, not a trace")
    v = struct.unpack(f"<{len(raw) // 8}Q", raw)
    return lambda cta, role, pair, step: v[((cta * ROLES + role) * PAIRS + pair) * STEPS + step]


def pct(xs, q):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * (len(xs) - 1) + 0.5))]


def summary(xs):
    if not xs:
        return "-"
    return f"{statistics.median(xs):7.0f} ({pct(xs, 0.1):6.0f} - {pct(xs, 0.9):6.0f}) n={len(xs)}"


def report(path):
    t = load(path)
    ctas = []
    for k in range(CTAS):
        if t(k, 3, 0, 4) >> 32 != 0x7ACE:
            continue
        t0, t1 = t(k, 3, 0, 2), t(k, 3, 0, 3)
        ctas.append(dict(k=k, sm=t(k, 3, 0, 4) & 0xFFFFFFFF, b=t(k, 3, 0, 5) & 0xFFFFFFFF,
                         kh=t(k, 3, 0, 5) >> 32, t0=t0, t1=t1, pairs=(t1 - t0 + 1) // 2,
                         g0=t(k, 3, 0, 0), g1=t(k, 3, 0, 1), c0=t(k, 3, 0, 6), c1=t(k, 3, 0, 7)))
    print(f"== {path}: {len(ctas)} CTAs with stamps")
    if not ctas:
        return
    g_min = min(c["g0"] for c in ctas)
    print("  cta  sm  request kv-head tiles        start us  end us   MHz")
    for c in ctas:
        mhz = (c["c1"] - c["c0"]) / (c["g1"] - c["g0"]) * 1e3 if c["g1"] > c["g0"] else 0
        print(f"  {c['k']:3d} {c['sm']:3d} {c['b']:8d} {c['kh']:7d} {c['t0']:5d}-{c['t1']:<5d}"
              f" {(c['g0'] - g_min) / 1e3:9.2f} {(c['g1'] - g_min) / 1e3:7.2f} {mhz:6.0f}")
    inner = {}  # (role, step) -> clocks from the pair's start, pairs but each CTA's first and last
    first = {}
    durations, refills = [], {0: [], 1: []}
    for c in ctas:
        k, n = c["k"], min(c["pairs"], PAIRS)
        for j in range(n):
            top = t(k, 0, j, 0)
            if not top:
                continue
            where = first if j == 0 else inner if j < n - 1 else None
            if where is not None:
                for role, names in ((0, WG_STEPS), (1, WG_STEPS), (2, LOAD_STEPS)):
                    for step in range(len(names)):
                        x = t(k, role, j, step)
                        if x:
                            where.setdefault((role, step), []).append(x - top)
            if 0 < j < n - 1 and t(k, 0, j + 1, 0):
                durations.append(t(k, 0, j + 1, 0) - top)
            # A refill: tile of pair j issued, seen landed by the warpgroup that scores it.
            for wg in (0, 1):
                issued, seen = t(k, 2, j, wg), t(k, wg, j, 1)
                if j > 0 and issued and seen > issued:
                    refills[wg].append(seen - issued)
    print(f"  pair (WG 0's start to its next), clocks: {summary(durations)}")
    for title, d in (("pairs but each CTA's first and last", inner), ("first pairs", first)):
        print(f"  {title}: clocks from the pair's start, median (p10 - p90)")
        rows = sorted(d.items(), key=lambda kv: statistics.median(kv[1]))
        for (role, step), xs in rows:
            names = LOAD_STEPS if role == 2 else WG_STEPS
            print(f"    {ROLE[role]:6s} {names[step]:32s} {summary(xs)}")
    for wg in (0, 1):
        print(f"  refill of WG {wg}'s tile, issue to its wait's end: {summary(refills[wg])}")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for path in sys.argv[1:]:
        report(path)


if __name__ == "__main__":
    main()
