/*
 * hopper_consume.cuh - what the consumer warpgroups of both sm_90a
 * layouts share: zeroing a BF16 tile's rows past the length, turning one
 * thread's barrier test into an answer the whole warpgroup agrees on, and
 * the order of the steps of the tile loop.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_HOPPER_CONSUME_CUH
#define MLA_HOPPER_CONSUME_CUH

#include "hopper_layout.cuh"
#include "wgmma.cuh"

namespace mla {
namespace hopper {

/* BF16 cache: rows at or past the length hold whatever the page's tail
 * holds (NaN included, and V of such a row would meet P = 0 in P V);
 * zero them (all 9 chunks) before any MMA reads the tile.  Both consumer
 * warpgroups (tid 0..255) take part. */
MLA_DEV void zero_tail(uint32_t stg, uint32_t nvalid, uint32_t tid)
{
    const uint32_t n = (kBN - nvalid) * 72u;
    for (uint32_t i = tid; i < n; i += 256u) {
        const uint32_t r = nvalid + i / 72u, gi = i % 72u;
        sts128(stg + (gi >> 3) * kChunk + r * 128u + (gi & 7u) * 16u, 0u, 0u, 0u, 0u);
    }
    fence_proxy_async();
    bar_sync(kNbTail, 256);
}

/* Whether phase `parity` of `bar` has completed, as one answer for every
 * thread of consumer warpgroup wg (the wgmma sequence that follows must be
 * the same in all four warps), from one thread's non-blocking test. */
MLA_DEV bool wg_test(const Cta &c, uint32_t wg, uint32_t tid, uint32_t bar, uint32_t parity)
{
    const uint32_t flag = c.bars + kFlags + 4u * wg;
    if ((tid & 127u) == 0)
        sts32(flag, mbar_test(bar, parity) ? 1u : 0u);
    bar_sync(kNbWg0 + wg, 128);
    return lds32(flag) != 0u;
}

/*
 * The consumers' tile loop, the same order for both layouts (K is
 * WideConsumer or NarrowConsumer: ready, scores, softmax, publish_p, pv,
 * wait_o, release).  Scores of tile t + 1 are queued ahead of P V of tile
 * t when t + 1 is already in shared memory, so its softmax runs while the
 * tensor cores do P V; otherwise P V goes first and the stage is freed
 * before blocking on the load (holding it would serialize load and
 * compute).
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
            k.scores(t + 1, nx);
            k.pv(st);
            wg_wait<1>(); /* groups retire in order: the scores are done */
            k.softmax(t + 1);
            k.wait_o();
            k.release(st);
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
