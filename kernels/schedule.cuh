/*
 * schedule.cuh - the scheduler's decisions (kernels/schedule.cu) as a
 * decode CTA reads them: which request, KV head, split and KV tiles it
 * covers, and which packed query rows.  Shared by every decode kernel
 * family, so they all split the same way and the combine kernel does not
 * care which one ran.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_SCHEDULE_CUH
#define MLA_SCHEDULE_CUH

#include "mla.h"
#include "mla_params.h"
#include "ptx.cuh"

namespace mla {

/* The work of one CTA: grid (m_blocks, h_kv, batch * max_splits). */
struct CtaWork {
    int b, kh, split, nsplit;
    int len;       /* keys of request b */
    int t0, t1;    /* KV tiles [t0, t1) of block_n keys */
    int m_base;    /* first packed row */
    int rows_here; /* valid rows of this M tile, 1..block_m */
};

/* Volatile, so that each role reloads these after its setmaxnreg instead
 * of keeping them live across the role split (a value live into a
 * 40-register branch would be spilled). */
MLA_DEV int ld_volatile_s32(const int32_t *p)
{
    int v;
    asm volatile("ld.global.s32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}

/* ---- the split choice, shared by mla_schedule and self-scheduling ---- */

/* Longest valid length: the plan's bound and the block table's. */
MLA_DEV long long len_limit(const mla_decode_params &p)
{
    const long long cap_pages = (long long)p.max_pages_per_seq * p.page_size;
    return cap_pages < p.max_seq_len ? cap_pages : (long long)p.max_seq_len;
}

/* Splits *ns and tiles per split *tps of a request of len > 0 keys, out
 * of a batch of `total` KV tiles: the request's share of one wave of
 * target_ctas CTAs, rounded down, so the grid holds at most one wave (a
 * few CTAs past it would run as a second wave, as long as the first) but
 * for requests too short for a share of their own.  At least one split,
 * at most max_splits, and at least min_split_tiles tiles each (each extra
 * split costs a 512-wide fp32 partial per row and a longer combine).  No
 * split is left empty. */
MLA_DEV void split_request(const mla_decode_params &p, int len, int bn, long long total,
                           int &ns, int &tps)
{
    const long long per_split = (long long)p.m_blocks * p.h_kv;
    const long long wave = p.target_ctas / (per_split > 0 ? per_split : 1);
    const long long nt = (len + bn - 1) / bn;
    const long long by_size = nt / (p.min_split_tiles > 1 ? p.min_split_tiles : 1);
    long long s = total > 0 ? nt * wave / total : 1;
    s = s < by_size ? s : by_size;
    s = s < p.max_splits ? s : (long long)p.max_splits;
    s = s < 1 ? 1 : s;
    tps = (int)((nt + s - 1) / s);
    ns = (int)((nt + tps - 1) / tps);
}

/* Whether this lane finds a block-table entry of request b (len keys,
 * valid) outside [0, num_pages); the lanes of a warp cover every page. */
MLA_DEV bool bad_pages(const mla_decode_params &p, int b, int len, uint32_t lane)
{
    const int32_t *bt = (const int32_t *)p.block_table + (int64_t)b * p.max_pages_per_seq;
    const int npages = (int)(((int64_t)len + p.page_size - 1) >> p.page_shift);
    bool bad = false;
    for (int pg = (int)lane; pg < npages; pg += 32) {
        const int32_t e = bt[pg];
        bad |= e < 0 || (int64_t)e >= p.num_pages;
    }
    return bad;
}

/*
 * Self-scheduling (p.self_schedule, small batches): every decode CTA
 * makes mla_schedule's decision itself, so a call is two launches and no
 * memset.  Each CTA validates every request (the host allows it only
 * while that is a few thousand block-table entries) so that all of them
 * agree, before anything is written, on whether the call is valid.  The
 * decision stays in four words of the CTA's shared memory (`slot`, in its
 * barrier block); the first CTA of each request also stores its split and
 * tile counts in the workspace for mla_combine, and CTA (0, 0, 0) the
 * status word, which so needs no zeroing.  Called by every thread of the
 * CTA, before the warp roles split.
 */
constexpr uint32_t kSchedStatus = 0, kSchedSplits = 4, kSchedTiles = 8, kSchedTotal = 12;

MLA_DEV void self_schedule(const mla_decode_params &p, int bn, uint32_t slot)
{
    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    const int32_t *lens = (const int32_t *)p.seq_lens;
    if (threadIdx.x == 0)
        sts32(slot + kSchedTotal, 0u);
    __syncthreads();
    const long long limit = len_limit(p);
    bool bad = false;
    uint32_t tiles = 0;
    for (int b = (int)warp; b < p.batch; b += (int)nwarps) {
        const int len = lens[b];
        if (len < 0 || len > limit) {
            bad = true;
            continue;
        }
        tiles += (uint32_t)((len + bn - 1) / bn);
        bad |= bad_pages(p, b, len, lane);
    }
    /* The host bounds batch x tiles far below 2^32. */
    if (lane == 0 && tiles)
        asm volatile("red.shared.add.u32 [%0], %1;" ::"r"(slot + kSchedTotal), "r"(tiles)
                     : "memory");
    const bool any_bad = __syncthreads_or(bad) != 0;
    if (threadIdx.x == 0) {
        const int b = (int)blockIdx.z / p.max_splits;
        const int len = lens[b];
        int ns = 1, tps = 0;
        if (!any_bad && len > 0)
            split_request(p, len, bn, lds32(slot + kSchedTotal), ns, tps);
        const int status = any_bad ? (int)MLA_STATUS_OUT_OF_BOUNDS : 0;
        sts32(slot + kSchedStatus, (uint32_t)status);
        sts32(slot + kSchedSplits, (uint32_t)ns);
        sts32(slot + kSchedTiles, (uint32_t)tps);
        if (blockIdx.x == 0 && blockIdx.y == 0 && (int)blockIdx.z == b * p.max_splits) {
            uint8_t *ws = (uint8_t *)p.workspace;
            ((int32_t *)(ws + p.ws_splits))[b] = ns;
            ((int32_t *)(ws + p.ws_tiles))[b] = tps;
            if (b == 0)
                *(int32_t *)ws = status;
        }
    }
    __syncthreads();
}

/* Splits of this CTA's request: from the CTA's own decision (`slot`) when
 * self-scheduled, else from mla_schedule's.  Read where needed rather than
 * kept live. */
MLA_DEV int request_splits(const mla_decode_params &p, uint32_t slot, int b)
{
    if (p.self_schedule)
        return (int)lds32(slot + kSchedSplits);
    return ld_volatile_s32((const int32_t *)((const uint8_t *)p.workspace + p.ws_splits) + b);
}

/*
 * Fills w; false if the CTA has nothing to do (bad input anywhere, or a
 * split past its request's split count).  Uniform over the CTA.  Reads
 * the decision of self_schedule() in `slot`, or the workspace mla_schedule
 * wrote (so after griddep_wait), and seq_lens.
 */
MLA_DEV bool cta_work(const mla_decode_params &p, int bn, uint32_t slot, CtaWork &w)
{
    const uint8_t *ws = (const uint8_t *)p.workspace;
    w.b = (int)blockIdx.z / p.max_splits;
    w.split = (int)blockIdx.z - w.b * p.max_splits;
    w.kh = (int)blockIdx.y;
    int tps;
    if (p.self_schedule) {
        if (lds32(slot + kSchedStatus) != 0)
            return false; /* bad input somewhere: write nothing */
        w.nsplit = (int)lds32(slot + kSchedSplits);
        tps = (int)lds32(slot + kSchedTiles);
    } else {
        if (ld_volatile_s32((const int32_t *)ws) != 0)
            return false;
        w.nsplit = ld_volatile_s32((const int32_t *)(ws + p.ws_splits) + w.b);
        tps = ld_volatile_s32((const int32_t *)(ws + p.ws_tiles) + w.b);
    }
    if (w.split >= w.nsplit)
        return false;
    w.len = ld_volatile_s32((const int32_t *)p.seq_lens + w.b);
    const int ntiles = (w.len + bn - 1) / bn;
    w.m_base = (int)blockIdx.x * p.block_m;
    w.rows_here = min(p.block_m, p.rows - w.m_base);
    w.t0 = w.split * tps;
    w.t1 = min(w.t0 + tps, ntiles);
    if (p.causal) {
        /* The last valid row sees the most keys; later tiles are all
         * masked for this CTA. */
        const int qi_last = (w.m_base + w.rows_here - 1) / p.heads_per_kv;
        const int lim = w.len - p.q_len + 1 + qi_last;
        w.t1 = min(w.t1, lim > 0 ? (lim + bn - 1) / bn : 0);
    }
    if (w.t1 < w.t0)
        w.t1 = w.t0;
    return true;
}

/* Key limit of row r of the M tile: keys < the limit are visible (0 for
 * a row past the last). */
MLA_DEV int row_limit(const mla_decode_params &p, const CtaWork &w, int r)
{
    const int row = w.m_base + r;
    if (row >= p.rows)
        return 0;
    const int qi = row / p.heads_per_kv;
    return p.causal ? w.len - p.q_len + 1 + qi : w.len;
}

/* Key limits of the two rows (row0 and row0 + 8 of the M tile) a thread
 * holds in the 16x8 accumulator layout. */
MLA_DEV void row_limits(const mla_decode_params &p, const CtaWork &w, int row0, int (&lim)[2])
{
    lim[0] = row_limit(p, w, row0);
    lim[1] = row_limit(p, w, row0 + 8);
}

/* Global Q row (bf16 [batch, q_len, h_q, 576]) of packed row r. */
MLA_DEV int64_t q_row_index(const mla_decode_params &p, const CtaWork &w, int r)
{
    const int mrow = w.m_base + r;
    const int qi = mrow / p.heads_per_kv;
    const int hh = mrow - qi * p.heads_per_kv;
    return ((int64_t)w.b * p.q_len + qi) * p.h_q + (int64_t)w.kh * p.heads_per_kv + hh;
}

} /* namespace mla */

#endif /* MLA_SCHEDULE_CUH */
