/*
 * schedule.cu - the split-KV scheduler: checks the device-resident lengths
 * and block table, keeps the lengths it read, and cuts the step's work into
 * pieces of equal cost whatever the mix of lengths (the contract is in
 * mla_params.h).  Launched by mla_decode() before the decode kernel, or
 * once per step by mla_schedule() for every decode of that step.
 *
 * CTA 0 does the cutting with three passes over the lengths, each thread
 * taking a contiguous run of requests, so that prefix sums give every
 * request its place on the cost line: (1) read and check the lengths,
 * total the cost; (2) count each request's pieces and the split ones, and
 * a histogram of piece sizes; (3) write the pieces, largest first.  The
 * block table's entries are checked by CTA 0 after that when it is alone,
 * else by CTAs 1.. at the same time, one warp per request.
 *
 * SPDX-License-Identifier: MIT
 */
#include "mla.h"
#include "mla_params.h"
#include "ptx.cuh"
#include "schedule.cuh"

namespace mla {
namespace sched {

constexpr int kThreads = MLA_SCHEDULE_THREADS;
constexpr int kWarps = kThreads / 32;
/* Piece sizes for the largest-first order, in 1/kBuckets of the share. */
constexpr int kBuckets = 32;

struct Shared {
    long long warp_sum[kWarps];
    int hist[kBuckets];
    int base[kBuckets];
};

/* Exclusive prefix sum of v over the CTA, and the total. */
MLA_DEV long long block_scan(long long v, Shared &sh, long long &total)
{
    const int lane = (int)(threadIdx.x & 31u), warp = (int)(threadIdx.x >> 5);
    long long x = v;
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const long long y = __shfl_up_sync(0xffffffffu, x, o);
        if (lane >= o)
            x += y;
    }
    if (lane == 31)
        sh.warp_sum[warp] = x;
    __syncthreads();
    long long before = 0;
    total = 0;
    for (int w = 0; w < kWarps; w++) {
        const long long s = sh.warp_sum[w];
        before += w < warp ? s : 0;
        total += s;
    }
    __syncthreads(); /* warp_sum is reused by the next scan */
    return before + x - v;
}

/* The cutting rule, for one request of nt > 0 tiles whose cost line
 * starts at c (its fixed cost first, then one unit per tile): the part
 * boundaries x = k * share inside its tiles are the cuts, except those
 * that would leave fewer than min_tiles tiles on either side.  Calls
 * f(t0, t1, i) for piece i = 0, 1, ... and returns the count. */
template <class F>
MLA_DEV int cut_request(long long c, int nt, long long share, int cost, int min_tiles, F &&f)
{
    const long long a = c + cost, e = a + nt; /* tile t sits at a + t */
    int prev = 0, n = 0;
    for (long long x = (a / share + 1) * share; x < e; x += share) {
        const int t = (int)(x - a);
        if (t - prev < min_tiles || nt - t < min_tiles)
            continue;
        f(prev, t, n++);
        prev = t;
    }
    f(prev, nt, n++);
    return n;
}

/* Larger pieces in lower buckets (dispatched first). */
MLA_DEV int bucket(int tiles, long long share, int min_tiles)
{
    const long long k = (long long)tiles * kBuckets / (share + min_tiles);
    return kBuckets - 1 - (int)(k < kBuckets - 1 ? k : kBuckets - 1);
}

MLA_DEV int ceil_tiles(int len, int bn)
{
    return (int)(((long long)len + bn - 1) / bn);
}

/* CTA 0: lengths, pieces, header; the block table too when alone. */
MLA_DEV void cut_pieces(const mla_decode_params &p)
{
    __shared__ Shared sh;
    const int tid = (int)threadIdx.x;
    const int32_t *lens = (const int32_t *)p.seq_lens;
    uint8_t *ws = (uint8_t *)p.workspace;
    int32_t *kept = (int32_t *)(ws + p.ws_lens);
    int2 *reqs = (int2 *)(ws + p.ws_reqs);
    int4 *pieces = (int4 *)(ws + p.ws_pieces);
    const long long limit = len_limit(p);
    const int bn = p.block_n, cost = p.piece_cost, min_tiles = p.min_piece_tiles;
    const int per = (p.batch + kThreads - 1) / kThreads;
    const int lo = min(p.batch, tid * per), hi = min(p.batch, lo + per);

    /* 1: the lengths, read once; the cost line. */
    long long mine = 0;
    bool bad = false;
    for (int b = lo; b < hi; b++) {
        int len = lens[b];
        if (len < 0 || len > limit) {
            bad = true;
            len = 0;
        }
        kept[b] = len;
        const int nt = ceil_tiles(len, bn);
        mine += nt ? nt + cost : 0;
    }
    if (tid < kBuckets)
        sh.hist[tid] = 0;
    long long total;
    const long long c0 = block_scan(mine, sh, total);
    const bool bad_len = __syncthreads_or(bad) != 0;
    const long long share = total > 0 ? (total + p.parts - 1) / p.parts : 1;

    /* 2: piece counts, split pieces, sizes. */
    long long c = c0;
    int split = 0;
    for (int b = lo; b < hi; b++) {
        const int nt = ceil_tiles(kept[b], bn);
        if (!nt)
            continue;
        const int n = cut_request(c, nt, share, cost, min_tiles, [&](int t0, int t1, int) {
            atomicAdd(&sh.hist[bucket(t1 - t0, share, min_tiles)], 1);
        });
        split += n > 1 ? n : 0;
        c += nt + cost;
    }
    long long nsplit;
    long long slot = block_scan(split, sh, nsplit);
    if (tid == 0) {
        int acc = 0;
        for (int k = 0; k < kBuckets; k++) {
            sh.base[k] = acc;
            acc += sh.hist[k];
        }
        sh.hist[0] = acc; /* the piece count, read below */
    }
    __syncthreads();
    const int npieces = sh.hist[0];

    /* 3: the pieces, each request's split ones on consecutive slots. */
    c = c0;
    for (int b = lo; b < hi; b++) {
        const int nt = ceil_tiles(kept[b], bn);
        if (!nt) {
            reqs[b] = make_int2(0, -1);
            continue;
        }
        const int n = cut_request(c, nt, share, cost, min_tiles, [](int, int, int) {});
        const int first = n > 1 ? (int)slot : -1;
        cut_request(c, nt, share, cost, min_tiles, [&](int t0, int t1, int i) {
            const int at = atomicAdd(&sh.base[bucket(t1 - t0, share, min_tiles)], 1);
            pieces[at] = make_int4(b, t0, t1, n > 1 ? first + i : -1);
        });
        reqs[b] = make_int2(n, first);
        slot += n > 1 ? n : 0;
        c += nt + cost;
    }

    /* Alone: the block table too (the lengths above, kept). */
    bool bad_page = false;
    if (p.sched_ctas == 1) {
        __syncthreads(); /* kept[] of every thread */
        const uint32_t lane = threadIdx.x & 31u;
        for (int b = tid >> 5; b < p.batch; b += kWarps)
            bad_page |= __any_sync(0xffffffffu, bad_pages(p, b, kept[b], lane));
    }
    bad_page = __syncthreads_or(bad_page) != 0;
    if (tid == 0) {
        mla_ws_header *h = ws_header(p);
        h->plan_tag = p.plan_tag;
        h->num_pieces = npieces;
        h->block_table = p.block_table;
        h->num_pages = p.num_pages;
        h->max_pages_per_seq = p.max_pages_per_seq;
        h->magic = MLA_WS_MAGIC;
        const int32_t st = bad_len || bad_page ? (int32_t)MLA_STATUS_OUT_OF_BOUNDS : 0;
        if (p.sched_ctas == 1)
            h->status = st; /* no memset before a lone CTA */
        else if (st)
            atomicExch(&h->status, st);
    }
}

/* CTAs 1..: the block-table entries, one warp per request. */
MLA_DEV void check_pages(const mla_decode_params &p)
{
    const int32_t *lens = (const int32_t *)p.seq_lens;
    const uint32_t lane = threadIdx.x & 31u;
    const long long limit = len_limit(p);
    const int stride = (int)(gridDim.x - 1) * kWarps;
    for (int b = (int)(blockIdx.x - 1) * kWarps + (int)(threadIdx.x >> 5); b < p.batch;
         b += stride) {
        const int len = lens[b];
        if (len < 0 || len > limit)
            continue; /* CTA 0 reports it */
        if (__any_sync(0xffffffffu, bad_pages(p, b, len, lane)) && lane == 0)
            atomicExch(&ws_header(p)->status, (int32_t)MLA_STATUS_OUT_OF_BOUNDS);
    }
}

} /* namespace sched */
} /* namespace mla */

extern "C" __global__ void __launch_bounds__(MLA_SCHEDULE_THREADS, 1)
    mla_schedule_pieces(const __grid_constant__ mla_decode_params p)
{
    mla::griddep_wait();
    if (blockIdx.x == 0)
        mla::sched::cut_pieces(p);
    else
        mla::sched::check_pages(p);
    mla::griddep_launch_dependents();
}
