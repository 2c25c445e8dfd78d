/*
 * hopper_narrow.cuh - the consumer warpgroups (warps 0-7) of the narrow
 * sm_90a kernel for a BF16 cache, at most 16 packed query rows (h_q / h_kv
 * * q_len <= 16: DeepSeek under TP8, 16 heads and one query token, among
 * others).  FP8 caches: hopper_narrow_fp8.cuh.
 *
 * With 16 rows a 64-row wgmma would compute 48 rows of nothing and read
 * the Q tile once per 32 keys; here the keys and the value dims are the M
 * of the MMAs and the query rows the N:
 *   S^T[64 keys x 16] = K Q^T      wgmma m64n16k16, A = K (the stage),
 *                                  B = Q (the 16-row Q tile), K-major both;
 *                                  WG w takes k-steps 18 w .. 18 w + 17 of
 *                                  the 36 and the two partial tiles are
 *                                  added through shared memory, so each
 *                                  WG then holds all of S^T;
 *   softmax per query column       over the 64 keys: 8 lanes and the 4
 *                                  warps of the WG (shared memory); both
 *                                  WGs compute it, identically;
 *   O^T[256 dims x 16] += V^T P^T  WG w: value dims 256 w .. 256 w + 255,
 *                                  4 x wgmma m64n16k16 per 16 keys, A = V^T
 *                                  (the stage read MN-major), B = P^T (the
 *                                  WG's own 16 x 64 bf16 P tile).
 * Per 64-key tile a CTA reads the K/V tile once for QK and once for P V
 * and the small Q tile once, instead of the Q tile twice over.  O^T is 32
 * fp32 registers a thread; at the end it is staged row-major in shared
 * memory and written out with 16-byte accesses.
 *
 * Accumulator layout of m64n16 (wgmma.cuh): warp w of a WG holds M rows
 * 16 w + g and 16 w + g + 8 (g = lane / 4), columns 8 nt + 2 t (+1) (t =
 * lane % 4) in d[nt][e]; column slot r = 2 nt + (e & 1) (softmax.cuh's
 * ColumnSoftmax).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_HOPPER_NARROW_CUH
#define MLA_HOPPER_NARROW_CUH

#include "hopper_layout.cuh"
#include "hopper_consume.cuh"
#include "wgmma.cuh"
#include "softmax.cuh"
#include "epilogue.cuh"

namespace mla {
namespace hopper {

/*
 * This WG's half of S^T = K Q^T: k-steps 18 wg .. 18 wg + 17 of the 36
 * (16 dims each; chunk k / 4, step k % 4), one instruction stream for both
 * WGs (the wgmma sequence must not branch).
 */
MLA_DEV void qk_narrow(float (&s)[2][4], uint32_t sq, uint32_t stg, uint32_t wg)
{
    wg_fence();
#pragma unroll
    for (int i = 0; i < 18; i++) {
        const uint32_t k = 18u * wg + (uint32_t)i, ch = k >> 2, ks = k & 3u;
        const uint64_t da = wg_desc(stg + ch * kChunk + 32u * ks, 16u, 1024u);
        const uint64_t db = wg_desc(sq + ch * kNarrowQChunk + 32u * ks, 16u, 1024u);
        wgmma_m64n16_ss<0>(s, da, db, i != 0 ? 1u : 0u);
    }
}

/* BF16 cache (FP8: hopper_narrow_fp8.cuh). */
struct NarrowConsumer {
    const mla_decode_params &p;
    const Cta &c;
    uint32_t wg, w, g, t, tid;
    int lim[4];      /* key limit of each column slot */
    uint32_t pbuf;   /* this WG's P tile */
    float o[4][2][4]; /* O^T, value dims 256 wg + 64 mb + ... (m-block mb) */
    float s[2][4];
    float alpha[4];
    ColumnSoftmax sm;

    MLA_DEV NarrowConsumer(const mla_decode_params &p_, const Cta &c_, uint32_t wg_, uint32_t wl,
                           uint32_t lane)
        : p(p_), c(c_), wg(wg_), w(wl), g(lane >> 2), t(lane & 3u),
          tid(128u * wg_ + 32u * wl + lane)
    {
#pragma unroll
        for (int r = 0; r < 4; r++)
            lim[r] = row_limit(p, c, column(r));
        pbuf = c.pbuf + kPTile * wg;
        const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        scale_columns(o, zero); /* O^T = 0 */
        sm.init();
    }

    /* Query column (packed row) of slot r. */
    MLA_DEV int column(int r) const { return narrow_column(r, t); }

    /* Queue this WG's half of S^T for tile tt; one commit group. */
    MLA_DEV void scores(int tt, const PipeState &st)
    {
        const uint32_t stg = c.stage(st.stage);
        mbar_wait(c.pipe().full_bar(st), st.phase);
        const uint32_t nvalid = (uint32_t)min((int)kBN, c.len - tt * (int)kBN);
        if (nvalid < kBN)
            zero_tail(stg, nvalid, tid);
        qk_narrow(s, c.sq, stg, wg);
        wg_commit();
    }

    /*
     * Once this WG's partial S^T of tile tt has retired: add the other
     * WG's (through the exchange slot of the tile's parity in the split),
     * then the column softmax: probabilities in s, the factors for O^T in
     * alpha.
     */
    MLA_DEV void softmax(int tt)
    {
        const uint32_t par = (uint32_t)(tt - c.t0) & 1u;
        wg_hold(s);
        /* Two planes of 16 bytes a thread (conflict-free 128-bit access):
         * mla_narrow_smem::xchg[par][wg][plane][thread]. */
        using X = decltype(mla_narrow_smem::xchg);
        constexpr uint32_t kPar = sizeof(X{}[0]), kWg = sizeof(X{}[0][0]),
                           kPlane = sizeof(X{}[0][0][0]);
        const uint32_t x = c.xchg + kPar * par + 16u * (tid & 127u);
        const uint32_t mine = x + kWg * wg, other = x + kWg * (wg ^ 1u);
        sts128(mine, __float_as_uint(s[0][0]), __float_as_uint(s[0][1]),
               __float_as_uint(s[0][2]), __float_as_uint(s[0][3]));
        sts128(mine + kPlane, __float_as_uint(s[1][0]), __float_as_uint(s[1][1]),
               __float_as_uint(s[1][2]), __float_as_uint(s[1][3]));
        bar_sync(kNbMax, 256);
        const uint4 o0 = lds128(other), o1 = lds128(other + kPlane);
        /* The same sum in both WGs (fp32 addition commutes). */
        s[0][0] += __uint_as_float(o0.x);
        s[0][1] += __uint_as_float(o0.y);
        s[0][2] += __uint_as_float(o0.z);
        s[0][3] += __uint_as_float(o0.w);
        s[1][0] += __uint_as_float(o1.x);
        s[1][1] += __uint_as_float(o1.y);
        s[1][2] += __uint_as_float(o1.z);
        s[1][3] += __uint_as_float(o1.w);

        float mx[4];
        sm.tile_max(s, p.score_scale_log2, tt * (int)kBN + 16 * (int)w + (int)g, lim, mx);
        column_reduce(mx, true);
        sm.tile_exp(s, mx, alpha);
    }

    MLA_DEV void column_reduce(float (&v)[4], bool is_max) const
    {
        hopper::column_reduce(c, wg, w, g, t, v, is_max);
    }

    /* After the previous P V retired: rescale O^T, write P (bf16, row =
     * query column, 64 keys, 128B-swizzled) into this WG's P tile (one
     * per WG, whatever the stage). */
    MLA_DEV void publish_p(const PipeState &)
    {
        if (alpha[0] != 1.0f || alpha[1] != 1.0f || alpha[2] != 1.0f || alpha[3] != 1.0f)
            scale_columns(o, alpha);
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const uint32_t q = (uint32_t)column(2 * nt + (e & 1));
                const uint32_t key = 16u * w + g + 8u * (uint32_t)(e >> 1);
                sts16(p_tile_addr(pbuf, q, key), (uint16_t)(pack_bf16x2(s[nt][e], 0.0f) & 0xffffu));
            }
        fence_proxy_async();
        bar_sync(kNbWg0 + wg, 128);
    }

    /* Queue O^T[256 wg .., :] += V^T P^T for the tile in stage st. */
    MLA_DEV void pv(const PipeState &st)
    {
        const uint32_t stg = c.stage(st.stage);
        wg_fence();
#pragma unroll
        for (int mb = 0; mb < 4; mb++) {
            const uint32_t va = stg + (4u * wg + (uint32_t)mb) * kChunk;
#pragma unroll
            for (int ks = 0; ks < 4; ks++)
                wgmma_m64n16_ss<1>(o[mb], wg_desc(va + 2048u * ks, kChunk, 1024u),
                                   wg_desc(pbuf + 32u * ks, 16u, 1024u), 1u);
        }
        wg_commit();
#pragma unroll
        for (int mb = 0; mb < 4; mb++)
            wg_hold(o[mb]);
    }

    /* P V of the tile in stage st has retired: the stage can be refilled. */
    MLA_DEV void release(const PipeState &st) const { c.pipe().consumer_release(st); }

    MLA_DEV void wait_o()
    {
        wg_wait<0>();
#pragma unroll
        for (int mb = 0; mb < 4; mb++)
            wg_hold(o[mb]);
    }

    MLA_DEV bool ready(const PipeState &st) const
    {
        return consumers_test(tid, c.pipe().full_bar(st), st.phase);
    }

    MLA_DEV void run()
    {
        mbar_wait(c.bars + kBarQ, 0);
        consume_tiles(*this, c.t0, c.t1);

        if (tid == 0)
            griddep_launch_dependents();

        /* Column sums: 8 lanes, then the 4 warps (both WGs hold them all).
         * The last reads of the column exchange were before publish_p's
         * barrier. */
        float lsum[4];
        sm.finish(lsum);
        column_reduce(lsum, false);

        /* Every wgmma of both WGs has retired: stage 0 can take O, and
         * past its 16 staged rows the columns' factors. */
        bar_sync(kNbSum, 256);
        const OutTarget out(c);
        const uint32_t stg0 = c.stage(0), fac = stg0 + MLA_NARROW_ROWS * kStageRow;
        /* A column's factor and LSE by one lane of warp 0 (lanes t = 0..3
         * hold all 16 columns: column q is slot 2 (q / 8) + q % 2 of lane
         * q % 8 / 2), in a branch: this code runs once a CTA, so its
         * instructions are fetched cold, and 8 unrolled copies a thread
         * cost more than the barrier it adds. */
        if (tid < 32u) {
            const uint32_t q = tid & 15u;
            const int rq = 2 * (int)(q >> 3) + (int)(q & 1u);
            float mq = 0.0f, lq = 0.0f;
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const float a = __shfl_sync(0xffffffffu, sm.m[r], (q & 7u) >> 1);
                const float b = __shfl_sync(0xffffffffu, lsum[r], (q & 7u) >> 1);
                if (r == rq) {
                    mq = a;
                    lq = b;
                }
            }
            if (tid < 16u) {
                sts32(fac + 4u * q, __float_as_uint(out.inv_sum(p, c.m_base + (int)q, lq)));
                if ((int)q < c.rows_here)
                    out.write_lse(p, c.m_base + (int)q, mq, lq);
            }
        }
        bar_sync(kNbSum, 256);
        float f[4];
#pragma unroll
        for (int r = 0; r < 4; r++)
            f[r] = lds_f32(fac + 4u * (uint32_t)column(r));
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const uint32_t row = stg0 + (uint32_t)column(2 * nt + (e & 1)) * kStageRow;
#pragma unroll
                for (int mb = 0; mb < 4; mb++) {
                    const uint32_t dim = 256u * wg + 64u * mb + 16u * w + g + 8u * (e >> 1);
                    sts32(row + 4u * dim, __float_as_uint(o[mb][nt][e] * f[2 * nt + (e & 1)]));
                }
            }
        bar_sync(kNbSum, 256);
        write_staged_rows<1>(p, out, stg0, kStageRow, c.rows_here, tid, 256u);
    }
};

} /* namespace hopper */
} /* namespace mla */

#endif /* MLA_HOPPER_NARROW_CUH */
