/*
 * hopper_wide.cuh - the consumer warpgroups (warps 0-7) of the wide sm_90a
 * kernels for FP8 caches, whose tiles the converter warpgroup turns into
 * BF16 in place (hopper_convert.cuh), for any number of packed query rows
 * (64 per CTA M tile; BF16 caches and E4M3 pairs take hopper_seesaw.cuh).  WG w computes
 * the scores of keys 32 w .. 32 w + 31 of the tile for all 64 rows (wgmma
 * m64n32k16 over 576 dims, so each score is computed once), starting on
 * each chunk group as soon as it is converted, exchanges row maxima with
 * the other WG through shared memory, writes its half of P (bf16) into
 * the stage's RoPE chunk (which P V does not read), and after a barrier
 * accumulates O[:, 256 w .. 256 w + 255] += P V with wgmma m64n128k16 x 2
 * (A = P, B = V read N-major from the same tile).  When tile t + 1 is
 * already in shared memory its scores are queued ahead of P V of tile t,
 * and its softmax runs while the tensor cores finish P V.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_HOPPER_WIDE_CUH
#define MLA_HOPPER_WIDE_CUH

#include "hopper_layout.cuh"
#include "hopper_convert.cuh"
#include "hopper_consume.cuh"
#include "wgmma.cuh"
#include "softmax.cuh"
#include "epilogue.cuh"

namespace mla {
namespace hopper {

/* S[64 x 32] (+)= Q K^T over 64-column chunks [C0, C1), K rows 32 wg ..
 * +31; ACC 0 starts from zero. */
template <int C0, int C1, int ACC = 0>
MLA_DEV void qk_chunks(float (&s)[4][4], uint32_t sq, uint32_t stg, uint32_t wg)
{
#pragma unroll
    for (int ch = C0; ch < C1; ch++) {
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            const uint64_t da = wg_desc(sq + ch * kChunk + 32u * ks, 16u, 1024u);
            const uint64_t db = wg_desc(stg + ch * kChunk + wg * 4096u + 32u * ks, 16u, 1024u);
            wgmma_m64n32_ss(s, da, db, (ACC || ch != C0 || ks != 0) ? 1u : 0u);
        }
    }
}

/* One consumer thread's state and the steps of a tile. */
template <int FMT>
struct WideConsumer {
    static_assert(FMT != MLA_FMT_BF16, "BF16 tiles go to SeesawConsumer");
    const mla_decode_params &p;
    const Cta &c;
    uint32_t wg, g, tq, tid;
    int row0;
    int lim[2];
    uint32_t mine, other; /* this row's slot in the exchange, and the other WG's */
    float rope_factor;
    float o[32][4];
    float s[4][4], sr[4][4]; /* scores of the tile in flight (sr: DS_MLA RoPE part) */
    float alpha[2];
    OnlineSoftmax sm;

    MLA_DEV WideConsumer(const mla_decode_params &p_, const Cta &c_, uint32_t wg_, uint32_t wl,
                     uint32_t lane)
        : p(p_), c(c_), wg(wg_), g(lane >> 2), tq(lane & 3u), tid(128u * wg_ + 32u * wl + lane)
    {
        row0 = (int)(16u * wl + g);
        row_limits(p, c, row0, lim);
        mine = c.xchg + 4u * (64u * wg + (uint32_t)row0);
        other = c.xchg + 4u * (64u * (wg ^ 1u) + (uint32_t)row0);
        /* DS_MLA: kv_scale is folded into score_scale_log2 for the whole
         * product, but the RoPE part is unscaled: divide its share back. */
        rope_factor = FMT == MLA_FMT_FP8_DS_MLA ? __frcp_rn(p.out_scale) : 1.0f;
#pragma unroll
        for (int i = 0; i < 32; i++)
            o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
        sm.init();
    }

    /* The barrier whose completion means the whole tile is ready. */
    MLA_DEV uint32_t last_bar(const PipeState &st) const
    {
        return converted_bar(c.bars, st.stage, kGroups - 1);
    }

    /* Whether tile st is ready, the same answer in both WGs. */
    MLA_DEV bool ready(const PipeState &st) const
    {
        return consumers_test(tid, last_bar(st), st.phase);
    }

    /* Queue S = Q K^T of tile t (stage st), waiting for its data chunk
     * group by chunk group; one commit group. */
    MLA_DEV void scores(int t, const PipeState &st)
    {
        const uint32_t stg = c.stage(st.stage);
        constexpr int NCH = FMT == MLA_FMT_FP8_E4M3 ? 9 : 8;
        if (FMT == MLA_FMT_FP8_DS_MLA) /* the RoPE chunk comes straight from TMA */
            mbar_wait(c.pipe().full_bar(st), st.phase);
        mbar_wait(converted_bar(c.bars, st.stage, 0), st.phase);
        wg_fence();
        if (FMT == MLA_FMT_FP8_DS_MLA)
            qk_chunks<8, 9>(sr, c.sq, stg, wg);
        qk_chunks<0, 3>(s, c.sq, stg, wg);
        mbar_wait(converted_bar(c.bars, st.stage, 1), st.phase);
        qk_chunks<3, 6, 1>(s, c.sq, stg, wg);
        mbar_wait(converted_bar(c.bars, st.stage, 2), st.phase);
        qk_chunks<6, NCH, 1>(s, c.sq, stg, wg);
        wg_commit();
    }

    /* Once the scores of tile t have retired: probabilities and the
     * factor alpha for O, with the row maxima of both WGs. */
    MLA_DEV void softmax(int t)
    {
        wg_hold(s);
        if (FMT == MLA_FMT_FP8_DS_MLA) {
            wg_hold(sr);
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    s[i][e] = fmaf(sr[i][e], rope_factor, s[i][e]);
        }
        float mx[2];
        sm.tile_max<4, true>(s, p.score_scale_log2, t * (int)kBN + 32 * (int)wg + 2 * (int)tq, lim, mx);
        if (tq == 0) {
            sts32(mine, __float_as_uint(mx[0]));
            sts32(mine + 32u, __float_as_uint(mx[1]));
        }
        bar_sync(kNbMax, 256);
        mx[0] = fmaxf(mx[0], lds_f32(other));
        mx[1] = fmaxf(mx[1], lds_f32(other + 32u));
        sm.tile_exp<4>(s, mx, alpha);
    }

    /* After the previous P V retired: rescale O, write this WG's half of
     * P (bf16) into the stage's chunk 8 (rows row0, row0 + 8; keys 32 wg
     * + 8 nt + 2 tq), and wait for the other half. */
    MLA_DEV void publish_p(const PipeState &st)
    {
        if (alpha[0] != 1.0f || alpha[1] != 1.0f)
            scale_rows(o, alpha);
        const uint32_t pb = c.stage(st.stage) + 8u * kChunk + (uint32_t)row0 * 128u + 4u * tq;
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
            const uint32_t gr = sw128_granule(g, 4u * wg + nt); /* g = row0 & 7 */
            sts32(pb + gr, pack_bf16x2(s[nt][0], s[nt][1]));
            sts32(pb + 8u * 128u + gr, pack_bf16x2(s[nt][2], s[nt][3]));
        }
        fence_proxy_async();
        bar_sync(kNbP, 256);
    }

    /* Queue O[:, 256 wg ..] += P V for the tile in stage st; one commit group. */
    MLA_DEV void pv(const PipeState &st) { pv_chunk8(o, c.stage(st.stage), wg); }

    MLA_DEV void release(const PipeState &st) const { release_stage<false>(c, st, tid); }

    MLA_DEV void wait_o()
    {
        wg_wait<0>();
        wg_hold(o);
    }

    MLA_DEV void run()
    {
        mbar_wait(c.bars + kBarQ, 0);
        consume_tiles(*this, c.t0, c.t1);
        /* Each WG summed its own columns; the maxima are shared. */
        finish_wide(p, c, o, sm, row0, wg, tq, tid);
    }
};

} /* namespace hopper */
} /* namespace mla */

#endif /* MLA_HOPPER_WIDE_CUH */
