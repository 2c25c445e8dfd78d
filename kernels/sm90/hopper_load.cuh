/*
 * hopper_load.cuh - the producer side of the sm_90a kernels: the loader
 * (one elected lane issuing TMA boxes or bulk copies through the block
 * table) and the Q tile, filled by the converter warpgroup of the narrow
 * kernels (by the consumers in the wide kernels, which have none).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_HOPPER_LOAD_CUH
#define MLA_HOPPER_LOAD_CUH

#include "hopper_layout.cuh"
#include "trace.cuh"

namespace mla {
namespace hopper {

/* A page's first row of tile t's keys, and the page of tile t + 1 (read
 * ahead, off the path from one issue to the next). */
MLA_DEV int tile_row0(const mla_decode_params &p, const int32_t *bt, int t, int c_t1, int &page)
{
    const int row0 = (page << p.page_shift) + ((t * (int)kBN) & (p.page_size - 1));
    page = t + 1 < c_t1 ? page_at(p, bt, ((t + 1) * (int)kBN) >> p.page_shift) : 0;
    return row0;
}

/*
 * The wide BF16 kernel's loader: each tile in the two parts of its stage
 * (part_chunks), a part issued once its warpgroup freed it: stage s's
 * part s first, as the pair frees them (WG 0 frees its part of stage 0
 * after P_a V_a,L, WG 1 its part after P_a V_a,R; then stage 1's).  The
 * scores start on the part that lands first.  Chunks 0-3 and 4-7 go as
 * one copy each (kv_map4), chunk 8 alone: each copy held this thread
 * about 200 clocks whatever its size, so nine 8-KB boxes a tile kept
 * the loads behind the consumers (doc/performance.md).
 */
MLA_DEV void load_seesaw(const mla_hopper_params &hp, const Cta &c)
{
    const mla_decode_params &p = hp.p;
    const void *map = &hp.kv_map, *map4 = &hp.kv_map4;
    prefetch_tensormap(map);
    prefetch_tensormap(map4);
    const uint64_t pol = policy_kv_stream();
    const int32_t *bt = (const int32_t *)p.block_table + (int64_t)c.b * p.max_pages_per_seq;
    uint32_t phase = 0;
    int page = c.page0;
    for (int t = c.t0; t < c.t1; t++) {
        const uint32_t s = (uint32_t)(t - c.t0) & 1u;
        const int row0 = tile_row0(p, bt, t, c.t1, page);
        /* The tiles past the first wait for the Q tile, which the first
         * tile's scores need with it.  Issued together, Q and two or more
         * tiles shared the SM's inbound bytes, and the first scores
         * waited for all of them (doc/performance.md). */
        if (t == c.t0 + 1)
            mbar_wait(c.bars + kBarQ, 0);
        trace(p, kTrLoad, (t - c.t0) >> 1, s ? kTrAcquireOdd : kTrAcquireEven);
#pragma unroll 1
        for (uint32_t k = 0; k < kParts; k++) {
            const uint32_t part = s ^ k, chunks = part_chunks(s, part);
            const uint32_t bar = c.bars + kBarLoaded + part_bar(s, part);
            mbar_wait(c.bars + kBarFree + part_bar(s, part), phase ^ 1u);
            mbar_arrive_expect_tx(bar, (uint32_t)__popc(chunks) * kChunk);
            /* Chunks 0-3 and 4-7 a copy each (kv_map4), chunk 8 alone. */
            if (chunks & 0x00fu)
                tma_load_4d(c.stage(s), map4, 0, row0, 0, c.kh, bar, pol);
            if (chunks & 0x0f0u)
                tma_load_4d(c.stage(s) + 4u * kChunk, map4, 0, row0, 4, c.kh, bar, pol);
            if (chunks & 0x100u)
                tma_load_3d(c.stage(s) + 8u * kChunk, map, 512, c.kh, row0, bar, pol);
            trace(p, kTrLoad, (t - c.t0) >> 1,
                  (s ? kTrIssueOdd : kTrIssueEven) + (k ? kTrIssueSecond : 0u));
        }
        phase ^= s;
    }
}

/*
 * Per tile: BF16 (the narrow kernel; the wide one's loader is
 * load_seesaw) as one box of 64 rows per 64 columns, landing in a stage
 * in the wgmma layout (SWIZZLE_128B).  (Three copies a tile, as the
 * wide loader's, measured no faster here: this kernel waits on DRAM.)  FP8 (NARROW:
 * the narrow kernels and the wide FP8 one) as bulk copies of its 64 rows
 * to the start of the stage, row-major (kBulkTile: one copy with one KV
 * head, else one per row), E4M3 block scales by one bulk copy to `scl`.
 * ALT: the consumer warpgroups take alternate tiles, each waiting on its
 * own loaded barriers (narrow FP8: loaded for the piece's even tiles,
 * loaded1 for its odd ones; Bars).
 */
template <int FMT, bool NARROW, bool ALT = false>
MLA_DEV void load_role(const mla_hopper_params &hp, const Cta &c)
{
    const mla_decode_params &p = hp.p;
    if constexpr (FMT == MLA_FMT_BF16 && !NARROW) {
        load_seesaw(hp, c);
        return;
    }
    const void *map0 = &hp.kv_map;
    /* FP8 copies its tiles without a tensor map. */
    constexpr bool kBulk = kBulkTile<FMT, NARROW>;
    static_assert(kBulk || FMT == MLA_FMT_BF16, "FP8 tiles land by bulk copies");
    if (!kBulk)
        prefetch_tensormap(map0);
    const uint64_t pol = policy_kv_stream();
    const int32_t *bt = (const int32_t *)p.block_table + (int64_t)c.b * p.max_pages_per_seq;
    const int spr = FMT == MLA_FMT_FP8_E4M3 ? p.scales_per_row : 0;
    const uint32_t sbytes = kBN * 4u * (uint32_t)spr;
    /* An FP8 tile is its rows' bytes, plus E4M3's block scales. */
    const uint32_t bytes = FMT == MLA_FMT_BF16 ? kTile : kBN * kFp8RowPitch<FMT> + sbytes;
    const Pipe pipe = c.pipe();
    PipeState st;
    st.init();
    int page = c.page0;
    for (int t = c.t0; t < c.t1; t++) {
        const int row0 = tile_row0(p, bt, t, c.t1, page);
        /* Narrow BF16: the tiles past the first wait for the Q tile, as
         * in load_seesaw. */
        if (!kBulk && t == c.t0 + 1)
            mbar_wait(c.bars + kBarQ, 0);
        pipe.producer_acquire(st);
        const uint32_t bar =
            pipe.full_bar(st) + (ALT && ((t - c.t0) & 1) ? kBarLoaded1 - kBarLoaded : 0u);
        const uint32_t dst = c.stage(st.stage);
        const uint32_t scl = c.scales(st.stage);
        mbar_arrive_expect_tx(bar, bytes);
        if (FMT == MLA_FMT_BF16) {
#pragma unroll
            for (int k = 0; k < 9; k++)
                tma_load_3d(c.stage(st.stage) + k * kChunk, map0, 64 * k, c.kh, row0, bar, pol);
        } else {
            /* One KV head: the tile's rows are contiguous, one copy (the
             * 64-byte-wide boxes moved E4M3 tiles 6 % slower); else its
             * rows are h_kv rows apart, one copy each. */
            constexpr uint32_t kRow = kFp8RowPitch<FMT>;
            const uint8_t *src = (const uint8_t *)p.kv + ((int64_t)row0 * p.h_kv + c.kh) * kRow;
            if (p.h_kv == 1)
                bulk_g2s(dst, src, kBN * kRow, bar, pol);
            else
                for (uint32_t r = 0; r < kBN; r++)
                    bulk_g2s(dst + r * kRow, src + (int64_t)r * p.h_kv * kRow, kRow, bar, pol);
        }
        if (spr > 0) /* h_kv == 1: the tile's scales are contiguous */
            bulk_g2s(scl, (const float *)p.scales + (int64_t)row0 * spr, sbytes, bar, pol);
        st.advance(c.nstages);
    }
}

/*
 * The narrow FP8 Q tile (16 rows, swizzled like load_q's), its dims
 * permuted to match the K fragments the consumers build in registers
 * (hopper_narrow_fp8.cuh): in each 64-dim chunk, k-step s (16 dims) of
 * thread quad t holds at its fragment positions 2t, 2t + 1 the dims 16 t +
 * 4 s, + 1, and at 2t + 8, 2t + 9 the dims 16 t + 4 s + 2, + 3.  Stored
 * granule (8 columns j = 8 h .. 8 h + 7 of step s) of a row is therefore
 * the bf16 pairs at dims 16 t + 4 s + 2 h, t = 0..3: four 4-byte pieces.
 * 16 x 72 granules, 9 per thread; rows past rows_here are zeros.
 */
struct QGranule {
    const uint32_t *src; /* the granule's first pair (piece t at src + 8 t); null: dead row */
    uint32_t dst;        /* its shared address */
    uint32_t ch;         /* its 64-dim chunk */
};

/* Granule i of the tile (row i / 72; thread tid takes i = tid + THREADS
 * k), every index from i: the narrow FP8 converter's form. */
MLA_DEV QGranule q_granule(const mla_decode_params &p, const Cta &c, uint32_t i)
{
    const uint32_t r = i / 72u, gi = i % 72u, ch = gi >> 3, s = (gi & 7u) >> 1, h = gi & 1u;
    QGranule q;
    q.src = nullptr;
    if ((int)r < c.rows_here)
        q.src = (const uint32_t *)((const uint8_t *)p.q +
                                   q_row_index(p, c, (int)r) * (MLA_D_QK * 2)) +
                32u * ch + 2u * s + h;
    q.dst = c.sq + ch * c.qchunk + (r >> 3) * 1024u + (r & 7u) * 128u +
            sw128_granule(r, gi & 7u);
    q.ch = ch;
    return q;
}

/* A thread's row of the tile, THREADS / ROWS threads a row: its source
 * row, computed once, and its first granule g0; its granules are g0 +
 * (THREADS / ROWS) k. */
struct QRow {
    const uint8_t *src; /* the row in Q (a dead row: Q's first, never read) */
    uint32_t r, g0;
    bool live;
};

template <uint32_t ROWS, uint32_t THREADS>
MLA_DEV QRow q_row(const mla_decode_params &p, const Cta &c, uint32_t tid)
{
    constexpr uint32_t kTpr = THREADS / ROWS;
    static_assert(THREADS % ROWS == 0 && 8u % kTpr == 0, "whole granules of 8-granule chunks");
    QRow q;
    q.r = tid / kTpr;
    q.g0 = tid % kTpr;
    /* A dead row's loads are skipped by `live`, not by a null base: every
     * address the loads are built from is inside Q. */
    q.live = (int)q.r < c.rows_here;
    q.src = (const uint8_t *)p.q + (q.live ? q_row_index(p, c, (int)q.r) * (MLA_D_QK * 2) : 0);
    return q;
}

/* Granule k of the thread's row (gi = g0 + kTpr k). */
template <uint32_t ROWS, uint32_t THREADS>
MLA_DEV QGranule q_granule(const Cta &c, const QRow &row, uint32_t k)
{
    constexpr uint32_t kTpr = THREADS / ROWS;
    const uint32_t gi = row.g0 + kTpr * k, ch = kTpr * k >> 3, s = (gi & 7u) >> 1, h = gi & 1u;
    QGranule q;
    q.src = (const uint32_t *)row.src + 32u * ch + 2u * s + h;
    q.dst = c.sq + ch * c.qchunk + (row.r >> 3) * 1024u + (row.r & 7u) * 128u +
            sw128_granule(row.r, row.g0 + (kTpr * k & 7u));
    q.ch = ch;
    return q;
}

/* Q rows 0 .. NROWS - 1 (64, or 16 in the narrow layout) of this M tile
 * into the swizzled Q tile (chunks of c.qchunk bytes); rows past rows_here
 * are zeros (their scores are never used, but must not be NaN garbage
 * inside the MMA).  NTHREADS threads, NTHREADS / NROWS to a row (the wide
 * BF16 kernel's two consumer warpgroups: 4, 18 granules of 16 bytes
 * each; the narrow BF16 kernel's converter warpgroup: 8, 9 each), all in
 * flight at once as cp.async copies.  A thread's granules are one row's
 * (q_row), so its source row (a division by heads_per_kv) is computed
 * once and its copies differ by constants: this code runs once a CTA,
 * cold, on the path to the first scores.  The caller waits for them
 * (cp_async_wait_all). */
template <uint32_t NROWS, uint32_t NTHREADS>
MLA_DEV void load_q(const mla_decode_params &p, const Cta &c, uint32_t tid)
{
    constexpr uint32_t kTpr = NTHREADS / NROWS, kPer = 72u / kTpr;
    const QRow row = q_row<NROWS, NTHREADS>(p, c, tid);
    const uint8_t *src = row.src + 16u * row.g0;
    const uint32_t dst = c.sq + (row.r >> 3) * 1024u + (row.r & 7u) * 128u;
#pragma unroll
    for (uint32_t j = 0; j < kPer; j++) {
        /* granule g0 + kTpr j: chunk kTpr j / 8, g0 + kTpr j % 8 in it */
        cp_async_16z(dst + (kTpr * j >> 3) * c.qchunk +
                         sw128_granule(row.r, row.g0 + (kTpr * j & 7u)),
                     src + 16u * kTpr * j, row.live ? 16u : 0u);
    }
}

/* BF16 as it is, all in flight as cp.async copies; the caller waits
 * (cp_async_wait_all).  ROWS rows (16, or the wide FP8 kernel's 64) by
 * THREADS threads. */
template <uint32_t ROWS = MLA_NARROW_ROWS, uint32_t THREADS = 128>
MLA_DEV void load_q_permuted(const mla_decode_params &p, const Cta &c, uint32_t tid)
{
    static_assert(ROWS * 72u % THREADS == 0, "whole granules a thread");
#pragma unroll 3
    for (uint32_t k = 0; k < ROWS * 72u / THREADS; k++) {
        const QGranule q = q_granule(p, c, tid + THREADS * k);
#pragma unroll
        for (uint32_t t = 0; t < 4; t++)
            cp_async_4z(q.dst + 4u * t, q.src ? q.src + 8u * t : (const uint32_t *)p.q,
                        q.src ? 4u : 0u);
    }
}

/*
 * The same tile with chunks 0 .. nf16 - 1 in f16 times 2^kq (the rest
 * BF16 as it is), for QK MMAs against K converted by one cvt per pair
 * (e4m3_lo/hi_f16x2).  kq puts the tile's largest |q| in [2^14, 2^15), so
 * f16 holds every bf16 value exactly but those below 2^-38 of that
 * largest (flushed towards zero: a change of the scores far below fp32
 * accumulation error); returns 2^-kq, the factor that undoes it.  ALL:
 * the BF16 chunks are scaled by 2^kq too (exact), and count for the
 * largest |q| (for scores that sum f16 and BF16 chunks in one
 * accumulator).  All THREADS threads call it; named barrier BAR, scratch
 * words at maxw (one a warp).
 */
template <uint32_t ROWS = MLA_NARROW_ROWS, uint32_t THREADS = 128, uint32_t BAR = kNbCvt,
          bool ALL = false>
MLA_DEV float load_q_permuted_f16(const mla_decode_params &p, const Cta &c, uint32_t tid,
                                  uint32_t nf16, uint32_t maxw)
{
    static_assert(ROWS * 72u % THREADS == 0, "whole granules a thread");
    constexpr uint32_t kIters = ROWS * 72u / THREADS;
    /* The wide FP8 kernel's consumers (256 threads, 18 granules each) hold
     * a thread's 72 words in registers across the reduction: one pass,
     * every load in flight at once.  The narrow kernels' converter
     * warpgroup (40-56 registers) makes two passes over them, the second
     * from L1. */
    constexpr bool kHold = THREADS == 256;
    uint32_t held[kHold ? kIters : 1][4];
    /* Granule k of this thread: the wide FP8 consumers compute their row
     * once (q_row), the narrow converter every index from tid. */
    QRow row{};
    if constexpr (kHold)
        row = q_row<ROWS, THREADS>(p, c, tid);
    auto granule = [&](uint32_t k) {
        if constexpr (kHold)
            return q_granule<ROWS, THREADS>(c, row, k);
        else
            return q_granule(p, c, tid + THREADS * k);
    };
    /* |q| bits of word x; NaN and Inf left out, or one head's would
     * scale every head's row to nothing (they stay NaN / Inf in their own
     * row: times 2^kq below). */
    auto absbits = [](uint32_t x) {
        const uint32_t lo = (x << 16) & 0x7fff0000u, hi = x & 0x7fff0000u;
        return max(lo < 0x7f800000u ? lo : 0u, hi < 0x7f800000u ? hi : 0u);
    };
    uint32_t m = 0u; /* bits of the largest |q|: non-negative floats order as integers */
    if constexpr (kHold) {
#pragma unroll
        for (uint32_t k = 0; k < kIters; k++) {
            const QGranule q = granule(k);
#pragma unroll
            for (uint32_t t = 0; t < 4; t++)
                held[k][t] = row.live ? __ldg(q.src + 8u * t) : 0u;
        }
#pragma unroll
        for (uint32_t k = 0; k < kIters; k++) {
            if (ALL || granule(k).ch < nf16)
#pragma unroll
                for (uint32_t t = 0; t < 4; t++)
                    m = max(m, absbits(held[k][t]));
        }
    } else {
#pragma unroll 3
        for (uint32_t k = 0; k < kIters; k++) {
            const QGranule q = granule(k);
            if (q.src && (ALL || q.ch < nf16))
#pragma unroll
                for (uint32_t t = 0; t < 4; t++)
                    m = max(m, absbits(__ldg(q.src + 8u * t)));
        }
    }
    m = __reduce_max_sync(0xffffffffu, m);
    if ((tid & 31u) == 0)
        sts32(maxw + 4u * (tid >> 5), m);
    bar_sync(BAR, THREADS);
    if constexpr (THREADS == 128) {
        m = max(max(lds32(maxw), lds32(maxw + 4u)), max(lds32(maxw + 8u), lds32(maxw + 12u)));
    } else {
        m = 0u;
#pragma unroll
        for (uint32_t w = 0; w < THREADS / 32u; w++)
            m = max(m, lds32(maxw + 4u * w));
    }
    /* floor(log2 max) = e; kq = 14 - e, kept where 2^kq and 2^-kq are
     * normal floats (a zero tile: anything). */
    const int e = (int)(m >> 23) - 127;
    const int kq = max(-120, min(100, 14 - e));
    const float up = __int_as_float((127 + kq) << 23);
    /* The held words need constant indices: unrolled in full. */
#pragma unroll(kHold ? kIters : 3)
    for (uint32_t k = 0; k < kIters; k++) {
        const QGranule q = granule(k);
#pragma unroll
        for (uint32_t t = 0; t < 4; t++) {
            uint32_t x;
            if constexpr (kHold)
                x = held[k][t];
            else
                x = q.src ? __ldg(q.src + 8u * t) : 0u;
            if (q.ch < nf16) {
                const float lo = __uint_as_float(x << 16) * up;
                const float hi = __uint_as_float(x & 0xffff0000u) * up;
                x = pack_f16x2(lo, hi);
            } else if (ALL) {
                const float lo = __uint_as_float(x << 16) * up;
                const float hi = __uint_as_float(x & 0xffff0000u) * up;
                x = pack_bf16x2(lo, hi);
            }
            sts32(q.dst + 4u * t, x);
        }
    }
    return __int_as_float((127 - kq) << 23);
}

} /* namespace hopper */
} /* namespace mla */

#endif /* MLA_HOPPER_LOAD_CUH */
