#!/usr/bin/env python3
# make-seeds.py - write the seed corpus of fuzz_api (tests/fuzz/corpus/):
# short programs in fuzz_api's input format that reach valid decodes and
# appends in every format, and a few refused calls.  Run from anywhere.
# SPDX-License-Identifier: MIT
import os
import struct

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

# Indices into fuzz_api.c's tables (pick_param, pick_int, pick_double).
P = {"NUM_HEADS": 0, "NUM_KV_HEADS": 1, "Q_LEN": 2, "KV_FORMAT": 5, "PAGE_SIZE": 6,
     "SCALE_BLOCK_SIZE": 7, "CAUSAL": 8, "KV_ROW_BYTES": 11, "SOFTMAX_SCALE": 13,
     "KV_SCALE": 14, "UNKNOWN": 17}
I = {0: 0, 1: 1, 2: 2, 3: 3, 8: 5, 16: 7, 32: 9, 48: 11, 64: 12, 128: 15, 129: 16, -1: 23}
D = {0.0: 0, 1.0: 2, 0.5: 3, 1e-30: 5, 1e30: 6, 1e31: 8, 0.0125: 9}


def set_int(param, value):
    return bytes([0, P[param], I[value]])


def set_float(param, value):
    return bytes([2, P[param], D[value], 1])


def decode(batch, max_seq_len, pages, mpps, lens, entries, mangles=(0,) * 7, reps=2,
           scales=False):
    out = bytes([4, 1, (batch - 1) % 4, 1]) + struct.pack("<H", max_seq_len - 1)
    out += bytes([pages - 1, mpps - 1])
    for r in range(reps):
        out += bytes([1, 0x11 + r, 2, 0x22])        # q, cache: patterned
        if scales:
            out += bytes([3, 0x33])                  # E4M3 block scales
        for n in lens:
            out += bytes([0]) + struct.pack("<H", n)
        for e in entries:
            out += bytes([0, e])
        out += bytes([1]) + bytes(mangles) + bytes([0, 0, 0])
    return out + bytes([1])


def append(pages, slots, mangles=(0, 0, 0), scales=False):
    out = bytes([6, pages - 1, len(slots)])
    out += bytes([1, 0x44]) + (bytes([2, 0x55]) if scales else b"") + bytes([1, 0x66])
    for s in slots:
        out += bytes([0]) + struct.pack("<H", s + 1)
    return out + bytes(mangles) + bytes([0, 0])


small = set_int("NUM_HEADS", 16) + set_int("PAGE_SIZE", 16)
seeds = {
    "decode-bf16": small + decode(2, 33, 4, 2, [20, 5], [3, 1, 0, 2]),
    "decode-e4m3-g64": set_int("KV_FORMAT", 1) + set_int("SCALE_BLOCK_SIZE", 64) + small
    + set_float("KV_SCALE", 0.5) + decode(2, 33, 4, 2, [17, 32], [0, 1, 2, 3], scales=True),
    "decode-e4m3": set_int("KV_FORMAT", 1) + set_float("KV_SCALE", 0.0125) + small
    + decode(1, 17, 2, 2, [17], [1, 0]),
    "decode-dsmla-causal": set_int("KV_FORMAT", 2) + set_int("Q_LEN", 2) + set_int("CAUSAL", 1)
    + set_int("NUM_HEADS", 8) + set_int("PAGE_SIZE", 16) + decode(3, 48, 6, 2, [0, 1, 31], [5, 4, 3, 2, 1, 0]),
    "decode-overlap": small + decode(2, 33, 4, 2, [20, 5], [3, 1, 0, 2], mangles=(0, 0, 0, 0, 239, 0, 0)),  # out onto kv_cache
    "decode-oob": small + decode(2, 16, 4, 2, [20, 5], [3, 9, 0, 2]),
    "append-e4m3-g32": set_int("KV_FORMAT", 1) + set_int("SCALE_BLOCK_SIZE", 32) + small
    + append(3, [0, 5, -1, 47], scales=True),
    "append-dsmla": set_int("KV_FORMAT", 2) + small + append(2, [1, 2, 3, 31, 7]),
    "append-bf16-overlap": small + append(2, [0, 1], mangles=(237, 0, 0)),  # cache onto latent
    "config-refusals": set_int("PAGE_SIZE", 48) + set_int("NUM_HEADS", 129)
    + set_int("KV_ROW_BYTES", 1) + set_int("UNKNOWN", 1) + set_float("SOFTMAX_SCALE", 1e31)
    + set_float("KV_SCALE", 1e30) + set_int("KV_FORMAT", 1) + set_float("SOFTMAX_SCALE", 1e30)
    + decode(1, 16, 1, 1, [1], [0]) + bytes([3, P["UNKNOWN"], 0, 7, 1]),
}
os.makedirs(HERE, exist_ok=True)
for name, data in sorted(seeds.items()):
    with open(os.path.join(HERE, name), "wb") as f:
        f.write(data)
print("wrote %d seeds to %s" % (len(seeds), HERE))
