/*
 * hopper_consume.cuh - what the consumer warpgroups of the sm_90a layouts
 * share: zeroing a BF16 tile's rows past the length, turning one thread's
 * barrier test into an answer both consumer warpgroups agree on, the
 * narrow BF16 kernel's tile loop, the wide BF16 kernel's P V and end, and
 * the narrow kernels' column reductions and P tile.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_HOPPER_CONSUME_CUH
#define MLA_HOPPER_CONSUME_CUH

#include "hopper_layout.cuh"
#include "wgmma.cuh"
#include "softmax.cuh"
#include "epilogue.cuh"

namespace mla {
namespace hopper {

/* BF16 cache: rows at or past the length hold whatever the page's tail
 * holds (NaN included, and V of such a row would meet P = 0 in P V);
 * zero them (all 9 chunks) before any MMA reads the tile.  Threads tid
 * 0..nthreads - 1 take part and meet at named barrier `bar` (by default
 * both consumer warpgroups). */
MLA_DEV void zero_tail(uint32_t stg, uint32_t nvalid, uint32_t tid, uint32_t nthreads = 256u,
                       uint32_t bar = kNbTail)
{
    const uint32_t n = (kBN - nvalid) * 72u;
    for (uint32_t i = tid; i < n; i += nthreads) {
        const uint32_t r = nvalid + i / 72u, gi = i % 72u;
        sts128(stg + (gi >> 3) * kChunk + r * 128u + (gi & 7u) * 16u, 0u, 0u, 0u, 0u);
    }
    fence_proxy_async();
    bar_sync(bar, nthreads);
}

/* Whether phase `parity` of `bar` has completed, as one answer for both
 * consumer warpgroups (256 threads, tid 0..255), from thread 0's
 * non-blocking test, reduced by the named barrier kNbReady.  consume_tiles
 * branches on it, and both branches hold barriers of the two warpgroups
 * (scores: kNbTail, softmax: kNbMax) in different instructions: bar.sync
 * is barrier.sync.aligned, which every thread taking part must reach at
 * the same instruction, so the two warpgroups must take the same branch
 * (a test per warpgroup let them differ whenever a tile landed between
 * the two tests).  The answer is made visibly uniform (__shfl_sync), so
 * that ptxas keeps the wgmma sequences behind it off a divergent path
 * (else it serializes them: C7520). */
MLA_DEV bool consumers_test(uint32_t tid, uint32_t bar, uint32_t parity)
{
    bool done = false;
    if (tid == 0)
        done = mbar_test(bar, parity);
    return __shfl_sync(0xffffffffu, bar_red_or(kNbReady, 256, done) ? 1 : 0, 0) != 0;
}

/* Queue O[:, 256 wg .. 256 wg + 255] += P V for the wide BF16 tile at
 * stg, P (bf16, 64 rows x 64 keys, K-major) in the tile's chunk 8, V read
 * N-major from chunks 4 wg .. 4 wg + 3 (kChunk apart: the descriptor's
 * lbo), one m64n256 wgmma a k-step; one commit group. */
MLA_DEV void pv_chunk8(float (&o)[32][4], uint32_t stg, uint32_t wg)
{
    const uint64_t pa = wg_desc(stg + 8u * kChunk, 16u, 1024u);
    const uint64_t vb = wg_desc(stg + wg * 4u * kChunk, kChunk, 1024u);
    wg_fence();
#pragma unroll
    for (uint32_t ks = 0; ks < 4; ks++)
        wgmma_m64n256_ss_tb(o, wg_desc_add(pa, 32u * ks), wg_desc_add(vb, 2048u * ks), 1u);
    wg_commit();
    wg_hold(o); /* o stays in these registers until the wait */
}

/* The end of a wide BF16 CTA, once every tile is consumed: each consumer
 * warpgroup summed its own part of every row with the same maxima, so the
 * two row sums add (through the exchange area, ordered by the single-use
 * mbarrier sums); then each writes its 256 columns of the rows.  tid:
 * 0..255 over both warpgroups. */
MLA_DEV void finish_wide(const mla_decode_params &p, const Cta &c, const float (&o)[32][4],
                         const OnlineSoftmax &sm, int row0, uint32_t wg, uint32_t tq,
                         uint32_t tid)
{
    /* The combine kernel may start launching; its griddepcontrol.wait
     * still waits for this grid to finish and its writes to be visible. */
    if (tid == 0)
        griddep_launch_dependents();
    float lsum[2];
    sm.finish(lsum);
    const uint32_t mine = c.xchg + 4u * (64u * wg + (uint32_t)row0);
    const uint32_t other = c.xchg + 4u * (64u * (wg ^ 1u) + (uint32_t)row0);
    if (tq == 0) {
        sts32(mine, __float_as_uint(lsum[0]));
        sts32(mine + 32u, __float_as_uint(lsum[1]));
    }
    mbar_arrive(c.bars + kBarSums);
    mbar_wait(c.bars + kBarSums, 0);
    lsum[0] += lds_f32(other);
    lsum[1] += lds_f32(other + 32u);
    write_output(p, c, o, sm.m, lsum, row0, wg, tq);
}

/* Row stride of the narrow kernels' fp32 output staging (a stage, once all
 * tiles are done): 512 floats + 16 bytes, so the 4 query columns of a
 * warp's store fall in different banks. */
constexpr uint32_t kStageRow = 2064;
static_assert(MLA_NARROW_ROWS * kStageRow <= kTile &&
                  MLA_NARROW_ROWS * kStageRow <= mla_narrow8_stage_bytes(MLA_FMT_FP8_E4M3, 0) &&
                  MLA_NARROW_ROWS * kStageRow <= mla_narrow8_stage_bytes(MLA_FMT_FP8_DS_MLA, 0),
              "the narrow kernels stage their output in stage 0");
static_assert(MLA_NARROW_ROWS * (kStageRow + 4u) <= kTile,
              "the narrow BF16 kernel's column factors follow its staged rows");

/* Query column (packed row) of accumulator slot r of an m64n16 S^T or O^T
 * fragment (slot r = 2 nt + (e & 1) of d[nt][e], t = lane % 4). */
MLA_DEV int narrow_column(int r, uint32_t t)
{
    return 8 * (r >> 1) + 2 * (int)t + (r & 1);
}

/* acc *= the factor of each element's query column (narrow fragments).
 * SEL: a factor of 0 sets 0 whatever acc holds (zeroing uninitialized
 * accumulators); else a plain multiply (the running rescale: acc is
 * finite there, P and V are). */
template <bool SEL = true, int MB>
MLA_DEV void scale_columns(float (&acc)[MB][2][4], const float (&f)[4])
{
#pragma unroll
    for (int mb = 0; mb < MB; mb++)
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const float x = f[2 * nt + (e & 1)];
                acc[mb][nt][e] = SEL && x == 0.0f ? 0.0f : acc[mb][nt][e] * x;
            }
}

/* v[r] (slot r of the narrow fragment) over the 4 warps of consumer
 * warpgroup wg, max or sum, from each warp's value (the same in its 8
 * lanes of equal t) through the column exchange.  The caller puts a
 * warpgroup barrier between two calls.  Returns whether `flag` held in
 * any thread of the warpgroup (its barrier reduces it: RED). */
template <bool RED = false>
MLA_DEV bool column_reduce(const Cta &c, uint32_t wg, uint32_t w, uint32_t g, uint32_t t,
                           float (&v)[4], bool is_max, bool flag = false)
{
    const uint32_t base = c.cmax + 256u * wg;
    if (g == 0) {
#pragma unroll
        for (int r = 0; r < 4; r++)
            sts32(base + 4u * (16u * w + (uint32_t)narrow_column(r, t)), __float_as_uint(v[r]));
    }
    bool any = false;
    if (RED)
        any = bar_red_or(kNbWg0 + wg, 128, flag);
    else
        bar_sync(kNbWg0 + wg, 128);
#pragma unroll
    for (int r = 0; r < 4; r++) {
        float a = lds_f32(base + 4u * (uint32_t)narrow_column(r, t));
#pragma unroll
        for (uint32_t k = 1; k < 4; k++) {
            const float b = lds_f32(base + 4u * (16u * k + (uint32_t)narrow_column(r, t)));
            a = is_max ? fmaxf(a, b) : a + b;
        }
        v[r] = a;
    }
    return any;
}

/* Where P of (query column q, key position k) goes in a narrow P tile
 * (16 rows of 64 keys, bf16, 128B-swizzled: the K-major B of O^T = V^T P^T). */
MLA_DEV uint32_t p_tile_addr(uint32_t pbuf, uint32_t q, uint32_t k)
{
    return pbuf + (q >> 3) * 1024u + (q & 7u) * 128u +
           (sw128_granule(q, k >> 3) | ((k & 7u) * 2u));
}

/*
 * The narrow BF16 consumers' tile loop (K is NarrowConsumer: ready,
 * scores, softmax, publish_p, pv, wait_o, release).  P V of tile t goes
 * first and its stage is freed as soon as it retires: with two stages, a
 * stage held while the consumers work on the other leaves the CTA no
 * load in flight.  When tile t + 1 is already in shared memory its
 * scores are queued right behind that P V, so the tensor cores run both
 * back to back; otherwise the consumers block on its load after the
 * release.  k.ready is one answer for both warpgroups (consumers_test):
 * the two branches reach the warpgroups' common barriers in different
 * instructions.
 */
template <class K>
MLA_DEV void consume_tiles(K &k, int t0, int t1)
{
    PipeState st;
    st.init();
    if (t0 < t1) {
        k.scores(t0, st);
        wg_wait<0>();
        k.softmax(t0);
        k.publish_p(st);
    }
    for (int t = t0; t < t1; t++) {
        PipeState nx = st;
        nx.advance(kStages);
        const bool next = t + 1 < t1;
        if (next && k.ready(nx)) {
            k.pv(st);
            k.scores(t + 1, nx);
            wg_wait<1>(); /* groups retire in order: P V is done */
            k.release(st);
            k.wait_o(); /* and the scores */
            k.softmax(t + 1);
        } else {
            k.pv(st);
            k.wait_o();
            k.release(st);
            if (next) {
                k.scores(t + 1, nx);
                wg_wait<0>();
                k.softmax(t + 1);
            }
        }
        if (next)
            k.publish_p(nx);
        st = nx;
    }
}

} /* namespace hopper */
} /* namespace mla */

#endif /* MLA_HOPPER_CONSUME_CUH */
