/*
 * hopper_seesaw.cuh - the consumer warpgroups (warps 0-7) of the wide
 * sm_90a kernel for BF16 caches: 64 packed query rows per CTA M tile.
 *
 * The tiles go in pairs, the even one in stage 0 and the odd one in stage
 * 1.  WG 0 computes the scores of the even tile, WG 1 those of the odd
 * one, each for all 64 keys at once (wgmma m64n64k16 over the 576 dims),
 * so the Q tile is read once per tile, not once per warpgroup.  WG w owns
 * O[:, 256 w .. 256 w + 255] and multiplies both tiles' P into it: its own
 * tile's P from registers, the other's from shared memory (the tile's
 * RoPE chunk, which P V does not read).  The running row maximum goes from
 * WG 0 to WG 1 and back once per pair:
 *
 *   WG 0: S_a = Q K_a^T; m_a = max(m, rowmax S_a); P_a; hand m_a, P_a to
 *         WG 1; O_L = O_L x + P_a V_a,L; free stage 0; take m_b from WG 1;
 *         O_L = O_L y + P_b V_b,L; free stage 1;
 *   WG 1: S_b = Q K_b^T; take m_a; O_R = O_R x + P_a V_a,R (queued
 *         behind S_b); m_b = max(m_a, rowmax S_b); P_b; hand m_b, P_b to
 *         WG 0; free stage 0; O_R = O_R y + P_b V_b,R; free stage 1
 *
 * (x, y: the factors of the old maxima).  S_b fills the tensor pipe
 * while WG 0 computes its softmax, and WG 1's softmax runs while its
 * P_a V_a,R does: each softmax would otherwise leave the pipe idle.  In a
 * piece's first pair WG 1 goes in the older order (take m_a, P_a V_a,R,
 * then S_b): both tiles land at once there, and S_b would share the
 * pipe with S_a, which every step of the pair waits for (at b8, 0.2-0.6
 * us faster than the new order there; doc/performance.md).  With two
 * 72-KB stages the loads are the limit at 128 heads, so each stage is
 * freed in two parts (part_chunks, hopper_layout.cuh), each by the one
 * warpgroup that still reads it once the tile's scores retired: WG 0
 * frees stage 0's V_L once P_a V_a,L retired, WG 1 the rest once P_a
 * V_a,R did (in the new order after its softmax and hand-over), stage 1
 * likewise at the pair's end; the loader refills a part while the
 * other is still read, and the scores start on the part that lands
 * first.  Both warpgroups end every pair with the same maximum;
 * each keeps the row sum of its own tile's P, and the two sums add at
 * the end.  The maxima pass through the stage-scale area
 * (unused with BF16), ordered by the mbarriers to_wg1 / to_wg0 (one
 * phase per pair; each side writes its next value only after it waited
 * for the other's, so one word per row and side suffices).
 *
 * The kernel has no converter warpgroup (384 threads, hopper.cu): both
 * warpgroups load the Q tile first, and each P V k-step is one m64n256k16
 * over the warpgroup's 256 columns, which the entry limit of 168
 * registers admits (at 512 threads, 128, it would take two m64n128k16).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_HOPPER_SEESAW_CUH
#define MLA_HOPPER_SEESAW_CUH

#include "hopper_layout.cuh"
#include "hopper_consume.cuh"
#include "hopper_load.cuh"
#include "wgmma.cuh"
#include "softmax.cuh"
#include "epilogue.cuh"
#include "trace.cuh"

namespace mla {
namespace hopper {

/* S[64 x 64] = Q K^T over the 9 chunks of the tile at stg (descriptors
 * built once and advanced by one add): first chunks ROT .. ROT + 3, the
 * stage's part that lands first (part_chunks), then, once phase `phase`
 * of barrier `rest` completed, the others; at(false) before that wait,
 * at(true) after it (the kernel trace's stamps). */
template <uint32_t ROT, typename AT>
MLA_DEV void qk_tile(float (&s)[8][4], uint32_t sq, uint32_t stg, uint32_t rest, uint32_t phase,
                     AT at)
{
    const uint64_t qa = wg_desc(sq, 16u, 1024u), kb = wg_desc(stg, 16u, 1024u);
#pragma unroll
    for (uint32_t j = 0; j < 9; j++) {
        if (j == 4) {
            at(false);
            mbar_wait(rest, phase);
            at(true);
            wg_fence(); /* after the wait's loop, as ptxas would put it */
        }
        const uint32_t ch = j == 8 ? 8u : (j + ROT) & 7u; /* constant: a runtime order spilled */
#pragma unroll
        for (uint32_t ks = 0; ks < 4; ks++) {
            const uint32_t off = ch * kChunk + 32u * ks;
            wgmma_m64n64_ss(s, wg_desc_add(qa, off), wg_desc_add(kb, off),
                            (j | ks) != 0 ? 1u : 0u);
        }
    }
}

struct SeesawConsumer {
    /* No converter: 384 threads, whose entry limit takes the m64n256 P V
     * wgmmas; the consumers load Q themselves. */
    static_assert(kNoConverter<MLA_FMT_BF16, false> &&
                      mla_entry_regs(kThreads<MLA_FMT_BF16, false>) > 128,
                  "m64n256 takes more than 128 registers at entry");
    const mla_decode_params &p;
    const Cta &c;
    uint32_t wg, g, tq, tid;
    int row0;
    int lim[2];
    uint32_t mine, other; /* row0's maximum word of this WG / of the other */
    float o[32][4];
    float s[8][4];
    uint32_t pf[4][4]; /* P of this WG's tile, the A fragments of its 4 k-steps */
    OnlineSoftmax sm;

    MLA_DEV SeesawConsumer(const mla_decode_params &p_, const Cta &c_, uint32_t wg_,
                           uint32_t wl, uint32_t lane)
        : p(p_), c(c_), wg(wg_), g(lane >> 2), tq(lane & 3u), tid(128u * wg_ + 32u * wl + lane)
    {
        row0 = (int)(16u * wl + g);
        row_limits(p, c, row0, lim);
        mine = c.sscl + 4u * (64u * wg + (uint32_t)row0);
        other = c.sscl + 4u * (64u * (wg ^ 1u) + (uint32_t)row0);
#pragma unroll
        for (int i = 0; i < 32; i++)
            o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
        sm.init();
    }

    /* Queue S of tile t in stage st (warpgroup W's: st.stage == wg ==
     * W), one commit group (scores_done waits for it): on the stage's
     * part W once it landed, then on the other.  The tail tile waits for
     * both, to zero its rows past the keys. */
    template <uint32_t W>
    MLA_DEV void scores(int t, const PipeState &st)
    {
        const uint32_t stg = c.stage(st.stage);
        const uint32_t first = c.bars + kBarLoaded + part_bar(W, W);
        const uint32_t rest = c.bars + kBarLoaded + part_bar(W, W ^ 1u);
        mbar_wait(first, st.phase);
        stamp(t, kStLanded); /* t or t - 1: the same pair */
        const uint32_t nvalid = (uint32_t)min((int)kBN, c.len - t * (int)kBN);
        if (nvalid < kBN) { /* the other WG reads these rows only after a hand-over */
            mbar_wait(rest, st.phase);
            zero_tail(stg, nvalid, tid & 127u, 128u, kNbWg0 + wg);
        }
        wg_fence();
#ifdef MLA_KERNEL_TRACE
        const auto at = [&](bool landed) { stamp(t, landed ? kStRest : kStFirstIssued); };
#else
        const auto at = [](bool) {}; /* a capture cost 8 instructions even unused */
#endif
        qk_tile<4u * W>(s, c.sq, stg, rest, st.phase, at);
        wg_commit();
    }

    /* This WG's part of stage st is free for the loader. */
    MLA_DEV void release(const PipeState &st)
    {
        mbar_arrive(c.bars + kBarFree + part_bar(st.stage, wg));
    }

    MLA_DEV void scores_done()
    {
        wg_wait<0>();
        wg_hold(s);
    }

    /* Once the P V queued before the scores retired: free its stage. */
    MLA_DEV void retire_before_scores(const PipeState &st)
    {
        wg_wait<1>();
        wg_hold(o);
        release(st);
    }

    /* P of tile t in s and pf, the running maximum past it in sm.m, and
     * the factor for what O holds. */
    MLA_DEV void softmax(int t, float (&alpha)[2])
    {
        float mx[2];
        sm.tile_max<8, true>(s, p.score_scale_log2, t * (int)kBN + 2 * (int)tq, lim, mx);
        sm.tile_exp<8>(s, mx, alpha);
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            pf[ks][0] = pack_bf16x2(s[2 * ks][0], s[2 * ks][1]);         /* row g, keys 2t..  */
            pf[ks][1] = pack_bf16x2(s[2 * ks][2], s[2 * ks][3]);         /* row g + 8         */
            pf[ks][2] = pack_bf16x2(s[2 * ks + 1][0], s[2 * ks + 1][1]); /* row g, keys 2t + 8 */
            pf[ks][3] = pack_bf16x2(s[2 * ks + 1][2], s[2 * ks + 1][3]);
        }
    }

    /* Hand the running maximum (and with_p: this WG's P, bf16 in chunk 8
     * of stage `stage`, K-major like the A of pv_shared) to the other WG
     * through mbarrier `bar`. */
    MLA_DEV void hand_over(uint32_t stage, bool with_p, uint32_t bar)
    {
        if (tq == 0) {
            sts32(mine, __float_as_uint(sm.m[0]));
            sts32(mine + 32u, __float_as_uint(sm.m[1]));
        }
        if (with_p) {
            const uint32_t pb = c.stage(stage) + 8u * kChunk + (uint32_t)row0 * 128u + 4u * tq;
#pragma unroll
            for (int nt = 0; nt < 8; nt++) {
                const uint32_t gr = sw128_granule(g, (uint32_t)nt); /* g = row0 & 7 */
                sts32(pb + gr, pf[nt >> 1][2 * (nt & 1)]);
                sts32(pb + 1024u + gr, pf[nt >> 1][2 * (nt & 1) + 1]);
            }
            fence_proxy_async();
        }
        mbar_arrive(bar);
    }

    /* Wait for the other WG's maximum (phase `parity` of mbarrier `bar`)
     * and make it ours: the factor for what O and the row sum hold. */
    MLA_DEV void take_max(uint32_t bar, uint32_t parity, float (&alpha)[2])
    {
        mbar_wait(bar, parity);
#pragma unroll
        for (int r = 0; r < 2; r++) {
            new_max(sm.m[r], lds_f32(other + 32u * (uint32_t)r), alpha[r]);
            sm.l[r] *= alpha[r];
        }
    }

    /* O *= f, row by row; no wgmma may be writing O. */
    MLA_DEV void rescale(const float (&f)[2])
    {
        if (f[0] != 1.0f || f[1] != 1.0f)
            scale_rows(o, f);
    }

    /* Queue O += P V over this WG's 256 columns of the tile in stage
     * `stage`, P from pf; one commit group.  V is chunks 4 wg .. 4 wg + 3,
     * kChunk apart (the descriptor's lbo): one m64n256 a k-step. */
    MLA_DEV void pv_own(uint32_t stage)
    {
        const uint64_t vb = wg_desc(c.stage(stage) + wg * 4u * kChunk, kChunk, 1024u);
        wg_fence();
#pragma unroll
        for (uint32_t ks = 0; ks < 4; ks++)
            wgmma_m64n256_rs_tb(o, pf[ks], wg_desc_add(vb, 2048u * ks), 1u);
        wg_commit();
        wg_hold(o);
    }

    /* The same with the other WG's P from chunk 8 of the stage. */
    MLA_DEV void pv_shared(uint32_t stage) { pv_chunk8(o, c.stage(stage), wg); }

    /* Wait for every wgmma of this WG and free its part of stage st. */
    MLA_DEV void retire(const PipeState &st)
    {
        wg_wait<0>();
        wg_hold(o);
        release(st);
    }

    /* WG 0's pair: S_a, its softmax, P_a handed over, P_a V_a,L; then
     * P_b V_b,L once WG 1 handed m_b and P_b over. */
    MLA_DEV void pair_wg0(int ta, bool has_b, const PipeState &sa, const PipeState &sb)
    {
        float f[2];
        stamp(ta, kStTop);
        scores<0>(ta, sa);
        scores_done();
        stamp(ta, kStScored);
        softmax(ta, f);
        stamp(ta, kStSoftmax);
        hand_over(0, true, c.bars + kBarToWg1);
        stamp(ta, kStHanded);
        rescale(f); /* every wgmma of this WG has retired */
        pv_own(0);
        retire(sa);
        stamp(ta, kStFreedA);
        take_max(c.bars + kBarToWg0, sa.phase, f);
        stamp(ta, kStTook);
        rescale(f);
        if (has_b) {
            pv_shared(1);
            retire(sb);
        }
        stamp(ta, kStEnd);
    }

    /* WG 1's pair in order: P_a V_a,R once WG 0 handed m_a and P_a over,
     * S_b queued behind it, its softmax, P_b handed over, P_b V_b,R. */
    MLA_DEV void pair_wg1(int ta, bool has_b, const PipeState &sa, const PipeState &sb)
    {
        float f[2];
        stamp(ta, kStTop);
        take_max(c.bars + kBarToWg1, sa.phase, f);
        stamp(ta, kStTook);
        rescale(f); /* every wgmma of this WG has retired */
        pv_shared(0);
        if (has_b) {
            scores<1>(ta + 1, sb);
            retire_before_scores(sa);
            stamp(ta, kStFreedA);
            scores_done();
            stamp(ta, kStScored);
            softmax(ta + 1, f);
            stamp(ta, kStSoftmax);
            hand_over(1, true, c.bars + kBarToWg0);
            stamp(ta, kStHanded);
            rescale(f);
            pv_own(1);
            retire(sb);
        } else {
            retire(sa);
            stamp(ta, kStFreedA);
            hand_over(1, false, c.bars + kBarToWg0);
        }
        stamp(ta, kStEnd);
    }

    /* WG 1's pair with S_b first: queued before m_a is taken, so that it
     * fills the tensor pipe through WG 0's softmax and WG 1's own softmax
     * runs while P_a V_a,R does. */
    MLA_DEV void pair_wg1_ahead(int ta, const PipeState &sa, const PipeState &sb)
    {
        float f[2];
        stamp(ta, kStTop);
        scores<1>(ta + 1, sb);
        take_max(c.bars + kBarToWg1, sa.phase, f);
        stamp(ta, kStTook);
        rescale(f); /* S_b in flight writes s, not O */
        pv_shared(0); /* P_a from shared memory: softmax may write pf under it */
        wg_wait<1>(); /* S_b */
        wg_hold(s);
        stamp(ta, kStScored);
        softmax(ta + 1, f);
        stamp(ta, kStSoftmax);
        hand_over(1, true, c.bars + kBarToWg0);
        stamp(ta, kStHanded);
        retire(sa);
        stamp(ta, kStFreedA);
        rescale(f);
        pv_own(1);
        retire(sb);
        stamp(ta, kStEnd);
    }

    /* Kernel trace builds: this WG's step of the pair at tile ta, the
     * same step numbers in every order: the pair's start, its tile
     * landed, its S retired, its P handed over, its part of stage 0
     * freed, the other WG's maximum taken, the pair's end; its softmax
     * done (before the hand-over); its scores' first part issued, its
     * tile's second part landed. */
    enum : uint32_t { kStTop, kStLanded, kStScored, kStHanded, kStFreedA, kStTook, kStEnd,
                      kStSoftmax, kStFirstIssued, kStRest };
    MLA_DEV void stamp(int ta, uint32_t step)
    {
        if ((tid & 127u) == 0)
            trace(p, wg, (ta - c.t0) >> 1, step);
    }

    MLA_DEV void run()
    {
        /* Both warpgroups load the Q tile, as the converter does in the
         * narrow kernels (barrier q: 256 arrivals). */
        load_q<MLA_BLOCK_M, 256u>(p, c, tid);
        cp_async_wait_all();
        fence_proxy_async(); /* wgmma reads the tile through the async proxy */
        mbar_arrive(c.bars + kBarQ);
        mbar_wait(c.bars + kBarQ, 0);
        PipeState sa, sb;
        sa.init();
        sb.init();
        sb.stage = 1;
        /* WG 1's first pair in the older order (the header says why),
         * peeled: the choice inside the loop made ptxas serialize every
         * wgmma (C7518), as do wgmmas in flight over the back edge, which
         * is why WG 0 does not queue the next S_a. */
        int ta = c.t0;
        if (wg == 1 && ta < c.t1) {
            pair_wg1(ta, ta + 1 < c.t1, sa, sb);
            sa.phase ^= 1u;
            sb.phase ^= 1u;
            ta += 2;
        }
        for (; ta < c.t1; ta += 2) {
            const bool has_b = ta + 1 < c.t1;
            if (wg == 0)
                pair_wg0(ta, has_b, sa, sb);
            else if (has_b)
                pair_wg1_ahead(ta, sa, sb);
            else
                pair_wg1(ta, false, sa, sb);
            sa.phase ^= 1u;
            sb.phase ^= 1u;
        }
        /* Both WGs end with the same maxima; each summed its own tiles. */
        finish_wide(p, c, o, sm, row0, wg, tq, tid);
    }
};

} /* namespace hopper */
} /* namespace mla */

#endif /* MLA_HOPPER_SEESAW_CUH */
