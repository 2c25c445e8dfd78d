#!/usr/bin/env python3
"""Side-by-side timing of libmla and FlashMLA on this machine's GPU: one process, the same tensors.

  python3 bench/sxs.py --lib .libs/libmla.so.1 --flashmla-anchor DIR [options]
  python3 bench/sxs.py --lib .libs/libmla.so.1 [options]       # FlashMLA from its Python package

libmla is loaded through its public C API (ctypes) on the CUDA primary context PyTorch uses.  FlashMLA comes
from its Python package (`flash_mla`: get_mla_metadata + flash_mla_with_kvcache), or, with --flashmla-anchor DIR,
from a directory holding sxs_perf.py and FlashMLA's sources (its build_flashmla() compiles a two-function
binding, dense_decode_fwd and sparse_decode_fwd, and caches it under /tmp), or, with --flashmla-module FILE,
from that binding as built before (flashmla_anchor.so under /tmp/flashmla-anchor/build, on the same PyTorch).
Needs PyTorch with CUDA.

Method (doc/performance.md): per shape, one CUDA graph of --calls back-to-back calls replayed --reps times; the
per-call time is the median replay over --calls.  FlashMLA's scheduler metadata is computed once per shape and
reused, as engines do per layer; libmla is timed two ways: `decode` (each call is a whole mla_decode, its
schedule included) and `step` (the graph holds one mla_schedule and --calls mla_decode_scheduled, as an engine
runs one step over that many layers; the per-layer time includes 1/--calls of the schedule).  A shape's graphs
are timed one after another (FlashMLA's first), or with --interleave captured first and replayed in turns, so
that a drift of the card's clocks over the shape falls on all of them alike: for comparing builds (it also
moves FlashMLA's own times on some shapes, so ratios against FlashMLA come from the default order).  Before timing,
libmla's output is compared with FlashMLA's on the same input (BF16: the same cache; FP8: FlashMLA BF16 on the
dequantized cache): a cosine difference above 1e-5 marks the shape WRONG.

Lengths (--dist): uniform (every request --seq-len); normal (FlashMLA's benchmark: N(s, (s/2)^2), at least
q_len); mix (one request in 16 of 8 x --seq-len, the others --seq-len / 16: a few long requests among many
short ones).  Inputs: q and latent rows ~ N(0, 0.1^2) clamped to +-1, pages randomly permuted, page 64.

FlashMLA's sparse FP8 decode is timed beside its BF16 decode for DS_MLA at 64 and 128 heads.  Its headline
shape (b128 h128 q_len 2, 2048 tokens a query) is `--format ds_mla --heads 128 --batch 128 --q-len 2
--seq-len 2048`; libmla's q_len 2 is causal, and so are the index lists (query 0 sees one token less).

--caches N makes a graph's calls read N copies of the cache in turn (--caches 10 with --calls 10: every call
its own, as an engine's layers are).  The default, one cache read by every call, is the anchor's method; at
small batches that cache stays in L2 from one call to the next.

--kernels adds, per shape, each kernel's mean duration in the decode graph and FlashMLA's (PyTorch's profiler).

--hot-pages makes request b read only pages 2b and 2b + 1, in turn (for both libraries): the cache the lengths
ask for then stays in L2, and the times are the kernels' without DRAM (for a load-bound kernel: how far its
consumers are from the loads).

--power samples the board's power and SM clock (nvidia-smi, every 5 ms) while each graph replays and prints
their means per graph on a line after the shape's rows: for telling whether a library's graph runs at the card's
power limit and at what clock.  Use enough --reps for a few hundred samples (a replay of 10 calls at h128 b132
s8192 takes about 5 ms).

--trace-dir DIR, for builds configured with --enable-kernel-trace (their build info ends in "trace"): their
workspaces start zeroed, and after each shape's timing the wide BF16 kernel's step stamps of the last call (the
workspace's last 2 MiB) go to DIR/LABEL-SHAPE.bin, for bench/trace.py.  The stamps make that build slower.

--lib may be repeated, as [LABEL=]PATH[@KERNEL], to time several builds (or forced kernels) of libmla against
the same FlashMLA times in one process: one row per build and shape, the build's label first.  A build that
cannot run a shape (a forced kernel that does not serve it) gets a row saying so.

Ratios above 1 mean libmla is faster.  KV TB/s counts the cache bytes the lengths need; the fractions are of
--read-roof (read-only streaming, TB/s) and --gemm-roof (dense BF16, TFLOP/s) measured on the same card.
"""
import argparse
import ctypes as C
import importlib.machinery
import importlib.util
import json
import math
import os
import subprocess
import sys
import threading
import time

import torch

DEV = torch.device("cuda")
vp = C.c_void_p
P_HEADS, P_KVH, P_QLEN, P_FMT, P_PAGE, P_SBLK, P_CAUSAL, P_ROWB, P_SPR = 1, 2, 3, 6, 7, 8, 9, 12, 13
FMT = {"bf16": 0, "e4m3": 1, "ds_mla": 2}
# MLA_XPARAM_KERNEL (mla_experimental.h) and the names of its values, in value order (MLA_XKERNEL_NAMES).
P_XKERNEL = 0x10000
XKERNELS = ["auto", "portable", "hopper", "hopper-wide", "hopper-narrow", "hopper-wide8"]
# MLA_TRACE_BYTES (kernels/common/mla_params.h): a kernel trace build's step stamps, the workspace's last bytes.
TRACE_BYTES = 16 * 4 * 256 * 16 * 8

# (format, heads, batch, q_len, seq_len, dist): FlashMLA's standard grid, then the length mixes.
PRESET = [
    ("bf16", 16, 132, 1, 8192, "uniform"), ("bf16", 16, 64, 1, 4096, "uniform"),
    ("bf16", 16, 8, 1, 4096, "uniform"), ("bf16", 64, 132, 1, 8192, "uniform"),
    ("bf16", 128, 132, 1, 8192, "uniform"), ("bf16", 128, 64, 1, 4096, "uniform"),
    ("bf16", 128, 8, 1, 4096, "uniform"), ("bf16", 128, 1, 1, 4096, "uniform"),
    ("bf16", 128, 64, 2, 4096, "uniform"), ("bf16", 64, 64, 4, 4096, "uniform"),
    ("bf16", 128, 128, 1, 8192, "normal"), ("bf16", 16, 128, 1, 8192, "normal"),
    ("bf16", 128, 128, 1, 4096, "mix"), ("bf16", 16, 128, 1, 4096, "mix"),
    ("e4m3/128", 16, 132, 1, 8192, "uniform"), ("e4m3", 16, 132, 1, 8192, "uniform"),
    ("ds_mla", 16, 132, 1, 8192, "uniform"), ("e4m3/128", 128, 132, 1, 8192, "uniform"),
    ("ds_mla", 128, 132, 1, 8192, "uniform"), ("ds_mla", 128, 64, 1, 4096, "uniform"),
    ("ds_mla", 64, 132, 1, 8192, "uniform"), ("e4m3/128", 128, 128, 1, 8192, "normal"),
    ("e4m3/128", 16, 128, 1, 4096, "mix"),
]


class Mla:
    """libmla through its public C API."""

    def __init__(self, path):
        L = C.CDLL(path)
        L.mla_context_create.argtypes = [C.POINTER(vp), C.c_int]
        L.mla_context_last_error.argtypes = [vp]
        L.mla_context_last_error.restype = C.c_char_p
        L.mla_status_string.restype = C.c_char_p
        L.mla_build_info.restype = C.c_char_p
        L.mla_config_create.argtypes = [C.POINTER(vp)]
        L.mla_config_set_int.argtypes = [vp, C.c_int, C.c_int64]
        L.mla_config_get_int.argtypes = [vp, C.c_int, C.POINTER(C.c_int64)]
        L.mla_config_destroy.argtypes = [vp]
        L.mla_plan_create.argtypes = [C.POINTER(vp), vp, vp, C.c_int32, C.c_int32]
        L.mla_plan_destroy.argtypes = [vp]
        L.mla_plan_workspace_size.argtypes = [vp, C.POINTER(C.c_size_t)]
        L.mla_decode.argtypes = [vp, vp, vp, vp, C.c_int64, vp, C.c_int32, vp, vp, vp, vp, C.c_size_t, vp]
        L.mla_schedule.argtypes = [vp, C.c_int64, vp, C.c_int32, vp, vp, C.c_size_t, vp]
        L.mla_decode_scheduled.argtypes = [vp, vp, vp, vp, C.c_int64, vp, C.c_int32, vp, vp, vp, C.c_size_t, vp]
        L.mla_kv_append.argtypes = [vp, vp, vp, vp, C.c_int64, vp, vp, C.c_int64, vp]
        self.L = L
        self.ctx = vp()
        st = L.mla_context_create(C.byref(self.ctx), 0)
        if st:
            raise RuntimeError("mla_context_create: " + L.mla_status_string(st).decode())
        self.info = L.mla_build_info().decode()
        self.traced = self.info.endswith(" trace")

    def check(self, st, what):
        if st:
            raise RuntimeError(f"{what}: {self.L.mla_status_string(st).decode()}: "
                               f"{self.L.mla_context_last_error(self.ctx).decode()}")

    kernel = 0  # MLA_XPARAM_KERNEL of every plan (--kernel)

    def config(self, h_q, s_q, fmt, sblk, causal, page=64):
        cfg = vp()
        self.check(self.L.mla_config_create(C.byref(cfg)), "mla_config_create")
        for p, v in [(P_HEADS, h_q), (P_QLEN, s_q), (P_FMT, FMT[fmt]), (P_PAGE, page), (P_SBLK, sblk),
                     (P_CAUSAL, int(causal)), (P_XKERNEL, self.kernel)]:
            self.check(self.L.mla_config_set_int(cfg, p, v), "mla_config_set_int")
        return cfg

    def geti(self, cfg, p):
        v = C.c_int64()
        self.check(self.L.mla_config_get_int(cfg, p, C.byref(v)), "mla_config_get_int")
        return v.value


def lengths(dist, b, s, s_q, g):
    if dist == "uniform":
        return [s] * b
    if dist == "normal":
        return [max(int(torch.normal(float(s), s / 2, (1,), generator=g).item()), s_q) for _ in range(b)]
    if dist == "mix":
        return [8 * s if i % 16 == 0 else max(s // 16, s_q) for i in range(b)]
    raise ValueError(dist)


class Problem:
    def __init__(self, b, s_q, h_q, s_k, dist, seed):
        g = torch.Generator().manual_seed(seed)
        self.lens_list = lengths(dist, b, s_k, s_q, g)
        self.b, self.s_q, self.h_q = b, s_q, h_q
        self.total = sum(self.lens_list)
        pps = (max(self.lens_list) + 63) // 64
        self.num_pages = b * pps
        self.table = torch.randperm(self.num_pages, generator=g).to(torch.int32).view(b, pps).to(DEV)
        self.lens = torch.tensor(self.lens_list, dtype=torch.int32, device=DEV)
        torch.manual_seed(seed)
        self.q = (torch.randn(b, s_q, h_q, 576, device=DEV) / 10).clamp(-1, 1).to(torch.bfloat16)
        self.kv = (torch.randn(self.num_pages, 64, 1, 576, device=DEV) / 10).clamp(-1, 1).to(torch.bfloat16)


def quantize(mla, pb, fmt, sblk):
    """The FP8 cache as libmla's mla_kv_append writes it, and its exact dequantization."""
    cfg = mla.config(pb.h_q, pb.s_q, fmt, sblk, False)
    rowb, spr = mla.geti(cfg, P_ROWB), mla.geti(cfg, P_SPR)
    kv = torch.zeros(pb.num_pages, 64, 1, rowb, dtype=torch.uint8, device=DEV)
    sc = torch.zeros(pb.num_pages, 64, 1, spr, dtype=torch.float32, device=DEV) if spr else None
    n = pb.num_pages * 64
    slots = torch.arange(n, dtype=torch.int64, device=DEV)
    mla.check(mla.L.mla_kv_append(mla.ctx, cfg, kv.data_ptr(), sc.data_ptr() if sc is not None else None,
                                  pb.num_pages, pb.kv.data_ptr(), slots.data_ptr(), n,
                                  torch.cuda.current_stream().cuda_stream), "mla_kv_append")
    mla.L.mla_config_destroy(cfg)
    if fmt == "e4m3":
        deq = kv.view(torch.float8_e4m3fn).float()
        if sc is not None:
            deq = deq * sc.repeat_interleave(sblk, dim=-1)[..., :576]
    else:
        nope = kv[..., :512].contiguous().view(torch.float8_e4m3fn).float()
        nope = nope * kv[..., 512:528].contiguous().view(torch.float32).repeat_interleave(128, dim=-1)
        deq = torch.cat([nope, kv[..., 528:656].contiguous().view(torch.bfloat16).float()], dim=-1)
    return kv, sc, deq.to(torch.bfloat16), rowb + 4 * spr


class MlaCall:
    """One libmla plan and its buffers over the caches of its layers: decode(i) is a whole mla_decode on cache i,
    schedule() one mla_schedule, layer(i) one mla_decode_scheduled on cache i."""

    def __init__(self, mla, pb, fmt, sblk, causal, caches):
        self.mla, self.pb = mla, pb
        self.caches = caches  # (kv, scales or None) of each layer, for decode(i) and layer(i)
        self.cfg = mla.config(pb.h_q, pb.s_q, fmt, sblk, causal)
        self.plan = vp()
        mla.check(mla.L.mla_plan_create(C.byref(self.plan), mla.ctx, self.cfg, pb.b, max(pb.lens_list)),
                  "mla_plan_create")
        n = C.c_size_t()
        mla.check(mla.L.mla_plan_workspace_size(self.plan, C.byref(n)), "mla_plan_workspace_size")
        self.nws = n.value
        # A trace build's stamps: zeros where a CTA wrote none.
        self.ws = (torch.zeros if mla.traced else torch.empty)(n.value, dtype=torch.uint8, device=DEV)
        self.out = torch.empty(pb.b, pb.s_q, pb.h_q, 512, dtype=torch.bfloat16, device=DEV)
        self.lse = torch.empty(pb.b, pb.h_q, pb.s_q, dtype=torch.float32, device=DEV)

    def _sc(self, i):
        sc = self.caches[i][1]
        return sc.data_ptr() if sc is not None else None

    def decode(self, i=0):
        pb = self.pb
        self.mla.check(self.mla.L.mla_decode(
            self.plan, pb.q.data_ptr(), self.caches[i][0].data_ptr(), self._sc(i), pb.num_pages, pb.table.data_ptr(),
            pb.table.shape[1], pb.lens.data_ptr(), self.out.data_ptr(), self.lse.data_ptr(), self.ws.data_ptr(),
            self.nws, torch.cuda.current_stream().cuda_stream), "mla_decode")
        return self.out

    def schedule(self):
        pb = self.pb
        self.mla.check(self.mla.L.mla_schedule(
            self.plan, pb.num_pages, pb.table.data_ptr(), pb.table.shape[1], pb.lens.data_ptr(),
            self.ws.data_ptr(), self.nws, torch.cuda.current_stream().cuda_stream), "mla_schedule")

    def layer(self, i=0):
        pb = self.pb
        self.mla.check(self.mla.L.mla_decode_scheduled(
            self.plan, pb.q.data_ptr(), self.caches[i][0].data_ptr(), self._sc(i), pb.num_pages, pb.table.data_ptr(),
            pb.table.shape[1], self.out.data_ptr(), self.lse.data_ptr(), self.ws.data_ptr(), self.nws,
            torch.cuda.current_stream().cuda_stream), "mla_decode_scheduled")
        return self.out

    def close(self):
        self.mla.L.mla_plan_destroy(self.plan)
        self.mla.L.mla_config_destroy(self.cfg)


class FlashMLA:
    """FlashMLA's dense BF16 decode (and sparse FP8 decode where the binding has it)."""

    def __init__(self, anchor, module=None):
        self.anchor = None
        if module:
            # The same binding, built earlier by the anchor's build_flashmla() on this machine's PyTorch.
            loader = importlib.machinery.ExtensionFileLoader("flashmla_anchor", module)
            spec = importlib.util.spec_from_loader("flashmla_anchor", loader)
            self.anchor = importlib.util.module_from_spec(spec)
            loader.exec_module(self.anchor)
            self.name = "FlashMLA (anchor build, prebuilt)"
        elif anchor:
            spec = importlib.util.spec_from_file_location("sxs_anchor", os.path.join(anchor, "sxs_perf.py"))
            mod = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(mod)
            self.anchor = mod.build_flashmla()
            self.name = "FlashMLA (anchor build)"
        else:
            import flash_mla  # noqa: F401  (optional dependency)
            self.pkg = flash_mla
            self.name = "FlashMLA (flash_mla package)"

    def dense(self, pb, kv, causal):
        """A callable timing one dense BF16 decode with metadata computed once."""
        scale = 1 / math.sqrt(576)
        if self.anchor:
            fm = self.anchor
            out, _, m0, m1 = fm.dense_decode_fwd(pb.q, kv, 512, pb.lens, pb.table, scale, causal, None, None)
            return out, lambda: fm.dense_decode_fwd(pb.q, kv, 512, pb.lens, pb.table, scale, causal, m0, m1)
        f = self.pkg
        meta, splits = f.get_mla_metadata(pb.lens, pb.s_q * pb.h_q, 1)
        run = lambda: f.flash_mla_with_kvcache(pb.q, kv, pb.table, pb.lens, 512, meta, splits,  # noqa: E731
                                               softmax_scale=scale, causal=causal)
        return run()[0], run

    def sparse(self, pb, kv, causal):
        """FlashMLA's sparse FP8 decode over the same DS_MLA bytes, every token a query sees (all of its
        request's, causal: but the last q_len - 1 - i for query i) as its index list; None where
        unavailable."""
        if not self.anchor or not hasattr(self.anchor, "sparse_decode_fwd"):
            return None
        fm, scale = self.anchor, 1 / math.sqrt(576)
        topk = (max(pb.lens_list) + 63) // 64 * 64
        t = torch.arange(topk, device=DEV)
        pg = pb.table.long().gather(1, (t // 64).clamp_max(pb.table.shape[1] - 1).unsqueeze(0).expand(pb.b, -1))
        qi = torch.arange(pb.s_q, device=DEV)
        vis = (pb.lens.long().unsqueeze(1) - ((pb.s_q - 1 - qi).unsqueeze(0) if causal else 0)).expand(
            pb.b, pb.s_q)
        idx = torch.where(t.view(1, 1, -1) < vis.unsqueeze(2), (pg * 64 + t % 64).unsqueeze(1), -1)
        idx = idx.to(torch.int32).contiguous()  # [b, s_q, topk]
        kv4 = kv.view(pb.num_pages, 64, 1, 656)
        _, _, m0, m1 = fm.sparse_decode_fwd(pb.q, kv4, idx, None, None, None, None, None, None, None, 512, scale)
        return lambda: fm.sparse_decode_fwd(pb.q, kv4, idx, None, None, m0, m1, None, None, None, 512, scale)


def capture(body):
    """A CUDA graph of body(), after a warm-up call on the current and on a side stream, replayed once."""
    body()
    torch.cuda.synchronize()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        body()
    torch.cuda.current_stream().wait_stream(s)
    torch.cuda.synchronize()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        body()
    g.replay()
    torch.cuda.synchronize()
    return g


def replay_time(g, calls):
    """One timed replay of g, us per call."""
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    g.replay()
    b.record()
    b.synchronize()
    return a.elapsed_time(b) * 1000 / calls


class PowerLog:
    """nvidia-smi's samples of board power (W) and SM clock (MHz), each stamped with the host's monotonic clock
    as it arrives; mean(windows) averages those inside the given (start, end) windows."""

    def __init__(self, ms=5):
        def smi(q, gpu):
            r = subprocess.run(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits", f"-i={gpu}"],
                               capture_output=True, text=True)
            return r.returncode == 0 and "N/A" not in r.stdout and "ERR" not in r.stdout
        # The GPU PyTorch uses, by UUID (its index may differ from nvidia-smi's under CUDA_VISIBLE_DEVICES).
        try:
            gpu = str(torch.cuda.get_device_properties(torch.cuda.current_device()).uuid)
            gpu = gpu if gpu.startswith("GPU-") else "GPU-" + gpu
        except (AttributeError, RuntimeError):
            gpu = "0"
        if not smi("clocks.sm", gpu):
            gpu = "0"
        q = "power.draw.instant,clocks.sm"
        if not smi(q, gpu):
            q = "power.draw,clocks.sm"  # drivers without the instant reading: a 1-s average
        self.query = q if gpu != "0" else q + ", nvidia-smi's GPU 0"
        self.proc = subprocess.Popen(["nvidia-smi", f"--query-gpu={q}", "--format=csv,noheader,nounits",
                                      f"-lms={ms}", f"-i={gpu}"], stdout=subprocess.PIPE, text=True)
        self.samples = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        for line in self.proc.stdout:
            try:
                w, mhz = (float(x) for x in line.split(","))
            except ValueError:
                continue
            self.samples.append((time.monotonic(), w, mhz))

    def mean(self, windows):
        got = [(w, mhz) for t, w, mhz in list(self.samples) for a, b in windows if a <= t <= b]
        if not got:
            return None
        return len(got), sum(w for w, _ in got) / len(got), sum(m for _, m in got) / len(got)

    def close(self):
        self.proc.terminate()
        self.proc.wait()


class Timing:
    """The graphs of one shape and their times: each median over reps of one replay, over calls (us per
    call).  By default a graph is timed as it is added, its reps in a row; with interleave, every graph is
    captured first and run() replays them in turns (rep 1 of each, then rep 2, ...), so that a drift of the
    card's clocks over the shape (the same library loaded first and last differed by up to 17 % at BF16 h128,
    doc/performance.md) falls on every graph alike.  With kernels, three more replays of each graph added with
    split=True run under PyTorch's profiler after the timing, and split(i) gives each kernel's mean duration."""

    def __init__(self, calls, reps, interleave=False, kernels=False, power=None):
        self.calls, self.reps, self.interleave, self.kernels, self.power = calls, reps, interleave, kernels, power
        self.graphs, self.ts, self.splits, self.profile, self.windows = [], [], [], [], []

    def add(self, body, split=False):
        self.graphs.append(capture(body))
        self.ts.append([])
        self.splits.append(None)
        self.profile.append(split and self.kernels)
        self.windows.append([])
        i = len(self.graphs) - 1
        if not self.interleave:
            self._time([i])
        return i

    def run(self):
        if self.interleave:
            self._time(range(len(self.graphs)))

    def _time(self, idx):
        for _ in range(self.reps):
            for i in idx:
                t0 = time.monotonic()
                self.ts[i].append(replay_time(self.graphs[i], self.calls))
                self.windows[i].append((t0, time.monotonic()))
        for i in idx:
            if self.profile[i]:
                self.splits[i] = kernel_split(self.graphs[i])

    def t(self, i):
        ts = sorted(self.ts[i])
        return ts[len(ts) // 2]

    def split(self, i):
        return self.splits[i]

    def watts(self, i):
        """'W W, MHz MHz (n samples)' over graph i's replays, or None without --power."""
        if self.power is None or i is None:
            return None
        m = self.power.mean(self.windows[i])
        return f"{m[1]:.0f} W, {m[2]:.0f} MHz ({m[0]} samples)" if m else "no samples"


def kernel_split(g, reps=3):
    """Mean duration (us) of each kernel in replays of graph g, in order of first start.  A kernel launched
    with programmatic dependent launch starts before its predecessor ends: its duration includes the wait."""
    from torch.profiler import ProfilerActivity, profile
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            g.replay()
        torch.cuda.synchronize()
    evs = sorted((e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA
                  and "Memcpy" not in e.name and "Memset" not in e.name), key=lambda e: e.time_range.start)
    dur = {}
    for e in evs:
        dur.setdefault(e.name.split("<")[0].split("(")[0].strip()[:48], []).append(
            e.time_range.end - e.time_range.start)
    return ", ".join(f"{k} {sum(v) / len(v):.1f}" for k, v in dur.items())


def cycle(fns, n):
    """n calls, of fns[0], fns[1], ... in turn."""
    def body():
        for i in range(n):
            fns[i % len(fns)]()
    return body


def cos_diff(a, b):
    x, y = a.double().flatten(), b.double().flatten()
    den = (x * x + y * y).sum()
    return float(1 - 2 * (x * y).sum() / den) if den > 0 else 0.0


def git_commit(path):
    try:
        return subprocess.run(["git", "-C", path, "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lib", required=True, action="append",
                    help="libmla.so.1 to time, as [LABEL=]PATH[@KERNEL]; repeat to compare builds in one run")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--flashmla-anchor", help="directory with sxs_perf.py and FlashMLA's sources")
    src.add_argument("--flashmla-module", help="the anchor's binding as built before (flashmla_anchor.so under "
                    "/tmp/flashmla-anchor/build), instead of building it again")
    ap.add_argument("--preset", action="store_true", help="FlashMLA's standard grid and the length mixes")
    ap.add_argument("--format", default="bf16", help="comma list: bf16, e4m3, e4m3/G, ds_mla")
    ap.add_argument("--heads", default="16,128")
    ap.add_argument("--batch", default="132")
    ap.add_argument("--seq-len", default="8192")
    ap.add_argument("--q-len", default="1")
    ap.add_argument("--dist", default="uniform", help="comma list: uniform, normal, mix")
    ap.add_argument("--calls", type=int, default=10, help="calls (layers) per graph")
    ap.add_argument("--reps", type=int, default=7, help="graph replays; the median is reported")
    ap.add_argument("--caches", type=int, default=1,
                    help="copies of the cache a graph's calls read in turn (default 1, the anchor's method: "
                    "every call reads one cache, which at small batches stays in L2 between them; --calls: "
                    "every layer its own, as an engine's layers are)")
    ap.add_argument("--read-roof", type=float, default=4.48, help="read-only streaming rate, TB/s")
    ap.add_argument("--gemm-roof", type=float, default=790.0, help="dense BF16 rate, TFLOP/s")
    ap.add_argument("--json", help="write every number here")
    ap.add_argument("--kernel", default="auto", choices=XKERNELS,
                    help="libmla's decode kernel (MLA_XPARAM_KERNEL, experimental); a shape it does not serve fails")
    ap.add_argument("--kernels", action="store_true",
                    help="also print each kernel's mean duration in the decode and FlashMLA graphs")
    ap.add_argument("--hot-pages", action="store_true",
                    help="request b reads pages 2b, 2b + 1 in turn: the cache stays in L2 (a diagnostic)")
    ap.add_argument("--power", action="store_true",
                    help="print the mean board power and SM clock during each graph's replays (nvidia-smi)")
    ap.add_argument("--trace-dir", help="save the step stamps of kernel trace builds here (see above)")
    ap.add_argument("--interleave", action="store_true",
                    help="per shape, capture every graph first and replay them in turns, for comparing builds "
                    "(see Timing)")
    a = ap.parse_args()
    if a.preset:
        cases = PRESET
    else:
        cases = [(f, int(h), int(b), int(q), int(s), d) for f in a.format.split(",") for h in a.heads.split(",")
                 for b in a.batch.split(",") for q in a.q_len.split(",") for s in a.seq_len.split(",")
                 for d in a.dist.split(",")]
    fm = FlashMLA(a.flashmla_anchor, a.flashmla_module)
    power = PowerLog() if a.power else None
    libs = []  # (label, Mla, kernel name)
    for i, spec in enumerate(a.lib):
        label, _, rest = spec.rpartition("=") if "=" in spec else (f"lib{i}", "", spec)
        path, _, kname = rest.partition("@")
        kname = kname or a.kernel
        if kname not in XKERNELS:
            ap.error(f"--lib {spec}: unknown kernel {kname}")
        m = Mla(path)
        m.kernel = XKERNELS.index(kname)
        libs.append((label, m, kname))
    multi = len(libs) > 1
    here = os.path.dirname(os.path.abspath(__file__))
    for label, m, kname in libs:
        # One build: the checkout's commit (sxs.py beside the library's sources); several: their labels.
        which = f"{label}: libmla {m.info} (kernel {kname})" if multi else \
            f"libmla {m.info} (commit {git_commit(here)}, kernel {kname})"
        print(f"# {torch.cuda.get_device_name()}; {which}; {fm.name}; "
              f"{time.strftime('%Y-%m-%d %H:%M')}; graph of {a.calls} calls, median of {a.reps} replays"
              + (f"; the calls read {a.caches} copies of the cache in turn" if a.caches > 1 else "")
              + ("; hot pages (request b reads pages 2b, 2b + 1)" if a.hot_pages else "")
              + ("; a shape's graphs replayed in turns" if a.interleave else ""))
    print(("| build " if multi else "") +
          "| kv | h_q | b | q_len | s_k | lengths | libmla decode us | libmla step us/layer | FlashMLA BF16 us "
          "| FM/decode | FM/step | FlashMLA sparse-FP8 us | FMsp/step | TFLOP/s (step) | KV TB/s (step) "
          "| % read roof | % GEMM roof |")
    print("|" + "---|" * (18 if multi else 17))
    rows = []
    for fmt_name, h, b, q, s, dist in cases:
        fmt, _, g = fmt_name.partition("/")
        sblk = int(g) if g else 0
        causal = q > 1
        pb = Problem(b, q, h, s, dist, seed=1)
        if a.hot_pages:
            turn = torch.arange(pb.table.shape[1], dtype=torch.int32, device=DEV) & 1
            hot = 2 * torch.arange(b, dtype=torch.int32, device=DEV)[:, None] + turn[None, :]
            pb.table.copy_(hot % pb.num_pages)
        if fmt == "bf16":
            kv, sc, deq, rowb = pb.kv, None, pb.kv, 1152
        else:
            kv, sc, deq, rowb = quantize(libs[0][1], pb, fmt, sblk)
        if a.caches > 1 and a.caches * (kv.nbytes + deq.nbytes) > 16 << 30:
            ap.error(f"--caches {a.caches}: more than 16 GiB of copies at {fmt_name} b{b} s{s}")
        # Copies of the cache (its scales, FlashMLA's dequantized one) for the calls to read in turn.
        copies = [(kv, sc, deq)]
        for _ in range(a.caches - 1):
            k = kv.clone()
            copies.append((k, sc.clone() if sc is not None else None, k if deq is kv else deq.clone()))
        ref, fm_run = fm.dense(pb, deq, causal)
        fm_runs = [fm_run] + [fm.dense(pb, d, causal)[1] for _, _, d in copies[1:]]
        tm = Timing(a.calls, a.reps, a.interleave, a.kernels, power)
        s_fm = tm.add(cycle(fm_runs, a.calls), split=True)
        s_sp = None
        if fmt == "ds_mla" and h in (64, 128):
            sps = [fm.sparse(pb, k, causal) for k, _, _ in copies]
            if sps[0]:
                s_sp = tm.add(cycle(sps, a.calls))
        shape = f"| {fmt_name} | {h} | {b} | {q} | {s} | {dist} |"
        runs = []  # per library: its label and error, or its call, checks and graph slots
        for label, mla, kname in libs:
            try:
                call = MlaCall(mla, pb, fmt, sblk, causal, [(k, c) for k, c, _ in copies])
            except RuntimeError as e:
                runs.append(dict(label=label, error=e))
                continue
            got = call.decode().float()
            cd = cos_diff(got, ref.float())
            ok = cd <= 1e-5 and not bool(torch.isnan(got).any())
            call.schedule()
            cd2 = cos_diff(call.layer().float(), got)
            ok = ok and cd2 == 0.0
            s_dec = tm.add(cycle([lambda i=i, call=call: call.decode(i) for i in range(a.caches)], a.calls),
                           split=True)

            def step(call=call):
                call.schedule()
                for i in range(a.calls):
                    call.layer(i % a.caches)
            s_step = tm.add(step)
            runs.append(dict(label=label, kname=kname, call=call, cd=cd, cd2=cd2, ok=ok, s_dec=s_dec, s_step=s_step))
        tm.run()
        t_fm = tm.t(s_fm)
        t_sp = tm.t(s_sp) if s_sp is not None else None
        for run in runs:
            lead = f"| {run['label']} " if multi else ""
            if "error" in run:
                print(f"{lead}{shape} not run: {run['error']} |", flush=True)
                continue
            label, kname, call, cd, cd2, ok, s_dec, s_step = (
                run[k] for k in ("label", "kname", "call", "cd", "cd2", "ok", "s_dec", "s_step"))
            t_dec, t_step = tm.t(s_dec), tm.t(s_step)
            if a.trace_dir and call.mla.traced:
                os.makedirs(a.trace_dir, exist_ok=True)
                name = f"{label}-{fmt_name.replace('/', '_')}-h{h}-b{b}-q{q}-s{s}-{dist}.bin"
                with open(os.path.join(a.trace_dir, name), "wb") as f:
                    f.write(bytes(call.ws[-TRACE_BYTES:].cpu().tolist()))
            call.close()
            flops = 2 * 1088 * h * q * pb.total
            kv_bytes = pb.total * rowb
            tf = flops / (t_step * 1e-6) / 1e12
            tb = kv_bytes / (t_step * 1e-6) / 1e12
            row = dict(format=fmt_name, heads=h, batch=b, q_len=q, seq_len=s, dist=dist,
                       libmla_decode_us=t_dec, libmla_step_us=t_step, flashmla_bf16_us=t_fm,
                       flashmla_sparse_fp8_us=t_sp, cos_diff=cd, agree=ok, libmla_tflops=tf, libmla_kv_tbs=tb,
                       read_roof_frac=tb / a.read_roof, gemm_roof_frac=tf / a.gemm_roof)
            if multi:
                row.update(build=label, kernel=kname)
            rows.append(row)
            sp_txt = f"{t_sp:.1f} | {t_sp / t_step:.2f}" if t_sp else "- | -"
            mark = "" if ok else f" WRONG (cos diff {cd:.1e}, step vs decode {cd2:.1e})"
            print(f"{lead}{shape} {t_dec:.1f}{mark} | {t_step:.1f} | {t_fm:.1f} | "
                  f"{t_fm / t_dec:.2f} | {t_fm / t_step:.2f} | {sp_txt} | {tf:.0f} | {tb:.2f} | "
                  f"{100 * tb / a.read_roof:.0f} | {100 * tf / a.gemm_roof:.0f} |", flush=True)
            if a.kernels:
                row["kernels_us"] = dict(libmla_decode=tm.split(s_dec), flashmla=tm.split(s_fm))
                print(f"#   kernels, us: libmla decode: {tm.split(s_dec)}; FlashMLA: {tm.split(s_fm)}", flush=True)
            if power:
                time.sleep(0.05)  # the last samples of the replays still in nvidia-smi's pipe
                pw = dict(libmla_decode=tm.watts(s_dec), libmla_step=tm.watts(s_step), flashmla=tm.watts(s_fm))
                row["power"] = pw
                print(f"#   power ({power.query}): libmla decode {pw['libmla_decode']}; step {pw['libmla_step']}; "
                      f"FlashMLA {pw['flashmla']}", flush=True)
        # What holds the shape's tensors (the calls, FlashMLA's closures), before its cache goes.
        tm = runs = call = got = fm_run = fm_runs = sps = copies = None
        del pb, kv, sc, deq, ref
        torch.cuda.empty_cache()
    if power:
        power.close()
    if a.json:
        with open(a.json, "w") as f:
            info = {lb: m.info for lb, m, _ in libs} if multi else libs[0][1].info
            json.dump(dict(device=torch.cuda.get_device_name(), libmla=info, flashmla=fm.name,
                           calls=a.calls, reps=a.reps, interleave=a.interleave, rows=rows), f, indent=1)


if __name__ == "__main__":
    main()
