/*
 * hopper_consume.cuh - steps the consumer warpgroups of both sm_90a
 * layouts share: zeroing a BF16 tile's rows past the length, and turning
 * one thread's barrier test into an answer the whole warpgroup agrees on.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_HOPPER_CONSUME_CUH
#define MLA_HOPPER_CONSUME_CUH

#include "hopper_layout.cuh"

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

} /* namespace hopper */
} /* namespace mla */

#endif /* MLA_HOPPER_CONSUME_CUH */
