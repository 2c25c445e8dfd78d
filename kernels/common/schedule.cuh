/*
 * schedule.cuh - the schedule (kernels/service/schedule.cu) as a decode CTA
 * reads it: which request, KV head, piece and KV tiles it covers, and
 * which packed query rows.  Shared by every decode kernel family, so they
 * all split the same way and the combine kernel does not care which one
 * ran.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_SCHEDULE_CUH
#define MLA_SCHEDULE_CUH

#include "mla.h"
#include "mla_params.h"
#include "ptx.cuh"

namespace mla {

/* The work of one CTA: grid (m_blocks, h_kv, max_pieces), piece z =
 * blockIdx.z of the schedule (kernels/service/schedule.cu). */
struct CtaWork {
    int b, kh;
    int slot;      /* partial slot of a split piece, -1: write out/lse */
    int len;       /* keys of request b */
    int t0, t1;    /* KV tiles [t0, t1) of block_n keys */
    int m_base;    /* first packed row */
    int rows_here; /* valid rows of this M tile, 1..block_m */
};

MLA_DEV mla_ws_header *ws_header(const mla_decode_params &p)
{
    return (mla_ws_header *)p.workspace;
}

/* Longest valid length: the plan's bound and the block table's. */
MLA_DEV long long len_limit(const mla_decode_params &p)
{
    const long long cap_pages = (long long)p.max_pages_per_seq * p.page_size;
    return cap_pages < p.max_seq_len ? cap_pages : (long long)p.max_seq_len;
}

/* Page number `i` of a block-table row, clamped into the cache: the
 * schedule checked the entries, but they live in caller memory that could
 * change before a later decode reads them again. */
MLA_DEV int page_at(const mla_decode_params &p, const int32_t *bt, int i)
{
    const long long last = p.num_pages - 1 < 0x7fffffffLL ? p.num_pages - 1 : 0x7fffffffLL;
    return (int)min((uint32_t)bt[i], (uint32_t)last); /* negative: huge, clamped too */
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

/* The header's first 16 bytes (status, magic, plan_tag, num_pieces). */
MLA_DEV int4 header_head(const mla_decode_params &p)
{
    return ld_volatile_v4(ws_header(p));
}

/* Whether a header head is a schedule of this plan's layout. */
MLA_DEV bool layout_matches(const mla_decode_params &p, const int4 &head)
{
    return (uint32_t)head.y == MLA_WS_MAGIC && (uint32_t)head.z == p.plan_tag;
}

/* Whether the schedule was made for this call's block table and cache
 * (mla_decode_scheduled may be handed other ones): one round trip. */
MLA_DEV bool args_match(const mla_decode_params &p)
{
    const int4 a = ld_volatile_v4((const uint8_t *)ws_header(p) + 16);
    const int4 b = ld_volatile_v4((const uint8_t *)ws_header(p) + 32);
    const uint64_t bt = (uint64_t)(uint32_t)a.x | (uint64_t)(uint32_t)a.y << 32;
    const int64_t np = (int64_t)((uint64_t)(uint32_t)a.z | (uint64_t)(uint32_t)a.w << 32);
    return bt == p.block_table && np == p.num_pages && b.x == p.max_pages_per_seq;
}

MLA_DEV bool schedule_matches(const mla_decode_params &p)
{
    return layout_matches(p, header_head(p)) && args_match(p);
}

/* Whether a block-table-checking CTA of the scheduler (1..sched_ctas-1)
 * flagged a bad entry: its flag bytes, 16 at a time (loads independent of
 * each other and of the header's). */
MLA_DEV bool flagged(const mla_decode_params &p)
{
    const uint8_t *flags = (const uint8_t *)ws_header(p) + MLA_WS_FLAGS_OFFSET;
    uint32_t any = 0;
    for (int k = 0; k < (p.sched_ctas + 15) / 16; k++) {
        const int4 v = ld_volatile_v4(flags + 16 * k);
        const uint32_t w[4] = {(uint32_t)v.x, (uint32_t)v.y, (uint32_t)v.z, (uint32_t)v.w};
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const int i = 16 * k + j; /* CTA i's flag */
            if (i >= 1 && i < p.sched_ctas)
                any |= (w[j >> 2] >> (8 * (j & 3))) & 0xffu;
        }
    }
    return any != 0;
}

/* Whether a schedule with head `head` (flags: flagged) recorded no bad
 * input: its status word and every block-table CTA's flag are 0 (else
 * the call's verdict, which mla_workspace_status reports, is not 0). */
MLA_DEV bool schedule_clean(const int4 &head, bool flags)
{
    return head.x == 0 && !flags;
}

/* Whether a schedule with head `head` (args: args_match, flags:
 * flagged) gives this CTA work: it is this call's schedule, recorded no
 * bad input, and has a piece z = blockIdx.z. */
MLA_DEV bool has_piece(const mla_decode_params &p, const int4 &head, bool args, bool flags)
{
    return layout_matches(p, head) && args && schedule_clean(head, flags) &&
           (int)blockIdx.z < head.w;
}

/*
 * Whether this CTA has work (has_piece).  Uniform over the CTA; checked
 * once, before the warp roles split (nothing writes the header while the
 * grid runs, but for report_bad_call's status word, which only a CTA
 * that finds no match writes).
 */
MLA_DEV bool cta_has_work(const mla_decode_params &p)
{
    const int4 head = header_head(p);
    const bool args = args_match(p); /* issued beside the head's load */
    return has_piece(p, head, args, head.x == 0 && flagged(p));
}

/* Called by one thread of CTA (0, 0, 0) when it found nothing to do: if
 * that is because the schedule of this plan's layout in the workspace was
 * made for another cache or block table, the call was invalid; record it
 * for mla_workspace_status (and nothing runs on this workspace until the
 * next schedule).  A workspace that holds no schedule of this layout at
 * all is reported by mla_workspace_status itself. */
MLA_DEV void report_bad_call(const mla_decode_params &p)
{
    if (blockIdx.x | blockIdx.y | blockIdx.z)
        return;
    if (layout_matches(p, header_head(p)) && !args_match(p))
        ws_header(p)->status = (int32_t)MLA_STATUS_INVALID_ARGUMENT;
}

/* w from piece record pc = (b, t0, t1, slot) of blockIdx.z and the
 * request's length len. */
MLA_DEV void fill_work(const mla_decode_params &p, int bn, const int4 &pc, int len, CtaWork &w)
{
    w.b = pc.x;
    w.t0 = pc.y;
    w.t1 = pc.z;
    w.slot = pc.w;
    w.kh = (int)blockIdx.y;
    w.len = len;
    w.m_base = (int)blockIdx.x * p.block_m;
    w.rows_here = min(p.block_m, p.rows - w.m_base);
    /* Causal: every M tile takes the piece's tiles, those only later query
     * tokens see included (at most one more tile), so that the two CTAs of
     * a pair agree; V rows a row does not see meet it with weight 0 (mla.h:
     * NaN or Inf there may then reach it, depending on the kernel). */
    /* (t1 never exceeds the request's tiles: the schedule's bound, kept
     * here against a schedule made for other lengths.) */
    w.t1 = min(w.t1, (w.len + bn - 1) / bn);
    if (w.t1 < w.t0)
        w.t1 = w.t0;
}

/*
 * Fills w from piece blockIdx.z of the schedule, for a CTA that
 * cta_has_work(); returns true.  Each role of the portable kernel calls
 * it on its own after the split, so it reloads rather than keeps these
 * values (the sm_90a kernels read them once: cta_start).
 */
MLA_DEV bool cta_work(const mla_decode_params &p, int bn, CtaWork &w)
{
    const uint8_t *ws = (const uint8_t *)p.workspace;
    const int4 pc = ld_volatile_v4(ws + p.ws_pieces + 16u * blockIdx.z);
    fill_work(p, bn, pc, ld_volatile_s32((const int32_t *)(ws + p.ws_lens) + pc.x), w);
    return true;
}

/*
 * What a CTA of the sm_90a kernels reads of the schedule, all before its
 * roles split: the header and the flags, then its piece, then the
 * request's length and the page of its first tile, three round trips
 * (flagged() uses each flag word as it comes, and volatile loads keep
 * their order, so the piece goes out after the flags have returned).
 * Before, with each role reading its piece and length again after the
 * split and the loader its page, they were five, and the loader's first
 * copy went out about 2 us after the CTA's wait (doc/performance.md,
 * Small batches).  The last loads go out before the first ones are known
 * to be this call's schedule, so their indices are clamped into the
 * buffers; nothing uses them unless `work`.
 */
struct CtaStart {
    int4 piece; /* b, t0, t1, slot */
    int len;    /* keys of request b */
    int page0;  /* page_at of tile t0's page */
    bool work;  /* has_piece */
};

MLA_DEV CtaStart cta_start(const mla_decode_params &p, int bn)
{
    const uint8_t *ws = (const uint8_t *)p.workspace;
    CtaStart s;
    const int4 head = header_head(p);
    const bool args = args_match(p);
    const bool flags = flagged(p);
    s.piece = ld_volatile_v4(ws + p.ws_pieces + 16u * blockIdx.z);
    const int b = min(max(s.piece.x, 0), p.batch - 1);
    const long long pg = ((long long)max(s.piece.y, 0) * bn) >> p.page_shift;
    s.len = ld_volatile_s32((const int32_t *)(ws + p.ws_lens) + b);
    s.page0 = page_at(p, (const int32_t *)p.block_table + (int64_t)b * p.max_pages_per_seq,
                      (int)min(pg, (long long)p.max_pages_per_seq - 1));
    s.work = has_piece(p, head, args, flags);
    return s;
}

/* Key limit of row r of the M tile: keys < the limit are visible (0 for
 * a row past the last). */
MLA_DEV int row_limit(const mla_decode_params &p, const CtaWork &w, int r)
{
    const int row = w.m_base + r;
    if (row >= p.rows)
        return 0;
    return mla_visible_keys(p.causal, p.q_len, w.len, row / p.heads_per_kv);
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
