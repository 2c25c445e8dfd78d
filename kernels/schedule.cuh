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

#include "mla_params.h"
#include "ptx.cuh"

namespace mla {

/* The work of one CTA: grid (m_blocks, h_kv, batch * max_splits). */
struct CtaWork {
    int b, kh, split, nsplit;
    int len;       /* keys of request b */
    int t0, t1;    /* KV tiles [t0, t1) of block_n keys */
    int m_base;    /* first packed row */
    int rows_here; /* valid rows of this M tile, 1..64 */
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

/*
 * Fills w; false if the CTA has nothing to do (bad input anywhere, or a
 * split past its request's split count).  Uniform over the CTA.  Only
 * reads the workspace the scheduler wrote (so after griddep_wait) and
 * seq_lens.
 */
MLA_DEV bool cta_work(const mla_decode_params &p, int bn, CtaWork &w)
{
    const uint8_t *ws = (const uint8_t *)p.workspace;
    if (ld_volatile_s32((const int32_t *)ws) != 0)
        return false; /* bad input somewhere: write nothing */
    w.b = (int)blockIdx.z / p.max_splits;
    w.split = (int)blockIdx.z - w.b * p.max_splits;
    w.kh = (int)blockIdx.y;
    w.nsplit = ld_volatile_s32((const int32_t *)(ws + p.ws_splits) + w.b);
    if (w.split >= w.nsplit)
        return false;
    w.len = ld_volatile_s32((const int32_t *)p.seq_lens + w.b);
    const int tps = ld_volatile_s32((const int32_t *)(ws + p.ws_tiles) + w.b);
    const int ntiles = (w.len + bn - 1) / bn;
    w.m_base = (int)blockIdx.x * MLA_BLOCK_M;
    w.rows_here = min(MLA_BLOCK_M, p.rows - w.m_base);
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
