/*
 * hopper_narrow_fp8.cuh - the consumer warpgroups (warps 0-7) of the
 * narrow sm_90a kernels for FP8 caches (E4M3, DS_MLA), at most 16 packed
 * query rows.  There is no BF16 copy of a tile: each consumer warpgroup
 * reads the FP8 stage as it landed, builds its wgmma A fragments in
 * registers (convert.cuh's pair conversions) and runs both MMAs with A
 * from registers, B from shared memory:
 *   S^T[64 keys x 16] = K Q^T       36 k-steps of m64n16k16 (DS_MLA: 32
 *                                   FP8 nope steps, 4 bf16 RoPE steps),
 *                                   f16 where the K bytes need no scale
 *                                   (one cvt per pair; the Q tile is then
 *                                   f16, scaled by a power of two);
 *   O^T[512 dims x 16] += V^T P^T   8 m-tiles x 4 k-steps.
 * So the stages hold FP8 bytes only (five E4M3 tiles or four DS_MLA tiles
 * in flight instead of one) and no warpgroup converts for the others.
 * The two warpgroups take alternate tiles (WG w: tiles t0 + w, t0 + w + 2,
 * ...), each with its own online softmax, P tile and O^T; they meet only
 * at the end, where the two partial results are merged like two splits.
 *
 * A dot product's terms may be summed in any order, so the fragments take
 * the bytes in the order that makes the loads wide:
 *   QK: A = K, M rows = keys 16 w + g and + 8 as stored; fragment columns
 *       2t, 2t + 1 of k-step s in a 64-dim chunk are the chunk's dims 16 t
 *       + 4 s, + 1, columns 2t + 8, 2t + 9 dims 16 t + 4 s + 2, + 3: one
 *       16-byte load per row and chunk gives a thread 4 k-steps.  The Q
 *       tile holds Q with the same permutation (load_q_permuted).
 *   PV: A = V^T, M rows = value dims: m-tiles 2 b and 2 b + 1 hold the
 *       128-dim block b, thread (w, g) its dims 128 b + 32 w + 4 g .. + 3
 *       (v_dim), so one 4-byte load per key and block serves two m-tiles,
 *       and one P tile serves a block's two m-tiles.  Fragment columns 2t,
 *       2t + 1 of k-step ks are keys 16 ks + t, + 4, columns 2t + 8, 2t + 9
 *       keys 16 ks + t + 8, + 12 (a quad's lanes read consecutive rows:
 *       2-way bank conflicts, not 4).  The P tile is written in that key
 *       order, and O^T staged back in dim order.
 *   Block scales of 128 dims (E4M3 /128, DS_MLA) fold into P instead of
 *   V: block b's m-tiles take a P tile of P times the keys' block-b scales,
 *   so V converts unscaled (four P tiles per warpgroup); smaller blocks
 *   scale each V value.  Unscaled V bytes become bf16 times 2^-120 (three
 *   integer instructions a pair, no multiply), and the P tiles carry
 *   2^112 (write_p; O^T is then O / 2^8).
 * The column maxima are lazy (ColumnSoftmax::lazy_exp): a tile's P is
 * taken against the running maxima as they stand, up to 2^8, and the
 * warpgroup exchanges maxima and rescales O^T only when a score passed
 * its column's maximum by more than that: one barrier a tile (the P
 * tile's, which also carries the vote), three on the rare exact step.
 * Keys past the length: their scores are masked (P = 0); the unscaled
 * conversion gives finite values for any byte, and the scaled one has its
 * bytes and scales zeroed, so garbage never reaches O.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_HOPPER_NARROW_FP8_CUH
#define MLA_HOPPER_NARROW_FP8_CUH

#include "hopper_layout.cuh"
#include "hopper_consume.cuh"
#include "wgmma.cuh"
#include "softmax.cuh"
#include "epilogue.cuh"
#include "convert.cuh"

namespace mla {
namespace hopper {

/* Folded scale blocks of K: KF (0: none), 128 dims each (DS_MLA: 4,
 * E4M3 /128: 5, the last one RoPE's 64 dims) or 64 (E4M3 /64: 9, one per
 * chunk: kChunkBlocks). */
constexpr int kChunkBlocks = MLA_SPR_64;
template <int KF>
constexpr int kScaleBlocks = KF > 0 ? KF : 1;
/* Partial S^T accumulators of a tile: one per folded block, but /64 uses
 * five: blocks 0-3 are folded into the scores while chunk 4 runs, and
 * blocks 5-8 reuse accumulators 0-3. */
constexpr int kEarlyBlocks = 4;
template <int KF>
constexpr int kAccBlocks = KF == kChunkBlocks ? 5 : KF > 0 ? KF : 1;

/* K chunk ch's scale block, and its accumulator. */
template <int KF>
MLA_DEV constexpr int chunk_block(uint32_t ch)
{
    return KF == kChunkBlocks ? (int)ch : ((int)(ch >> 1) < KF - 1 ? (int)(ch >> 1) : KF - 1);
}
template <int KF>
MLA_DEV constexpr int block_acc(int b)
{
    return KF == kChunkBlocks && b > kEarlyBlocks ? b - kEarlyBlocks - 1 : b;
}

/* Two bytes (LO, HI of {a, b}) as a bf16x2 fragment register: times
 * per-byte scales when SC, else times 2^-120 (only V converts unscaled to
 * bf16, and its P tiles carry 2^120 / vunit: write_p). */
template <bool SC, int LO, int HI>
MLA_DEV uint32_t frag_pair(uint32_t a, uint32_t b, float s_lo, float s_hi)
{
    if (SC)
        return e4m3_pair_bf16x2_scaled<LO, HI>(a, b, s_lo, s_hi);
    return e4m3_pair_bf16x2_raw<LO, HI>(a, b);
}

/* The four A registers of a V^T m-tile (rows: the dims in bytes 0, 1 of
 * each word, or 2, 3 with ODD) from two key pairs: (a0, b0) the keys of k
 * columns 2 t, 2 t + 1, (a1, b1) those of 2 t + 8, 2 t + 9; cv converts
 * bytes LO, HI of pair k (cv.pair<LO, HI>(a, b, k)): the narrow consumer
 * with fp32 scales a key (KeyScales), the wide one with a bf16 factor a
 * key pair (hopper_wide8.cuh). */
template <bool ODD, class CV>
MLA_DEV void v_mtile(uint32_t a0, uint32_t b0, uint32_t a1, uint32_t b1, const CV &cv,
                     uint32_t (&a)[4])
{
    constexpr int L = ODD ? 2 : 0;
    a[0] = cv.template pair<L, L + 4>(a0, b0, 0);
    a[1] = cv.template pair<L + 1, L + 5>(a0, b0, 0);
    a[2] = cv.template pair<L, L + 4>(a1, b1, 1);
    a[3] = cv.template pair<L + 1, L + 5>(a1, b1, 1);
}

/* v_mtile's converter with a scale a key: s[k][0] for a's byte, s[k][1]
 * for b's (frag_pair). */
template <bool SC>
struct KeyScales {
    float s[2][2];
    template <int LO, int HI>
    MLA_DEV uint32_t pair(uint32_t a, uint32_t b, int k) const
    {
        return frag_pair<SC, LO, HI>(a, b, s[k][0], s[k][1]);
    }
};

/* The factor P tiles carry against V converted unscaled (2^-120): 2^112,
 * so that P up to 2^kLazy = 2^8 (the lazy maxima, softmax.cuh) stays
 * finite in bf16; O^T then holds O / 2^8 (vunit).  The factor drops by
 * kPFoldStep when a block scale would overflow bf16. */
constexpr float kPFold = 0x1p112f, kPFoldStep = 0x1p39f;

template <int FMT>
struct NarrowFp8Consumer {
    const mla_decode_params &p;
    const Cta &c;
    uint32_t wg, w, g, t, tid; /* tid: 0..255 over both consumer WGs */
    int lim[4];                /* key limit of each column slot */
    uint32_t pbuf;             /* this WG's P tiles (one per V block when folded) */
    int gshift, spr;           /* E4M3 block scales (0: none) */
    float rope_factor;
    float qscale; /* undoes the f16 Q tile's power-of-two scaling (1: BF16) */
    float pfold;  /* P tiles' factor against unscaled V: 2^120 / vunit */
    float vunit;  /* O^T holds O / vunit (2^8 unless a block scale reached
                   * 2^7, 1 where V converts scaled) */
    float o[8][2][4]; /* O^T, m-tile m row g = dim v_dim(m, 0), row g + 8 v_dim(m, 1) */
    float s[2][4], sr[2][4];
    float alpha[4];
    ColumnSoftmax sm;

    MLA_DEV NarrowFp8Consumer(const mla_decode_params &p_, const Cta &c_, uint32_t wg_,
                              uint32_t wl, uint32_t lane)
        : p(p_), c(c_), wg(wg_), w(wl), g(lane >> 2), t(lane & 3u),
          tid(128u * wg_ + 32u * wl + lane)
    {
#pragma unroll
        for (int r = 0; r < 4; r++)
            lim[r] = row_limit(p, c, narrow_column(r, t));
        pbuf = c.pbuf + kNarrow8PTiles * wg;
        spr = FMT == MLA_FMT_FP8_E4M3 ? p.scales_per_row : 0;
        gshift = spr > 0 ? 31 - __clz(p.scale_block) : 0;
        rope_factor = FMT == MLA_FMT_FP8_DS_MLA ? __frcp_rn(p.out_scale) : 1.0f;
        pfold = kPFold;
        vunit = 0x1p120f / kPFold;
        const float zero[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        scale_columns(o, zero);
        sm.init();
    }

    static constexpr uint32_t RP = kFp8RowPitch<FMT>;

    /* Scale of key row r over this thread's 16 dims of chunk ch (QK). */
    MLA_DEV float k_scale(uint32_t scl, uint32_t r, uint32_t ch) const
    {
        if (FMT == MLA_FMT_FP8_DS_MLA)
            return lds_f32(scl + RP * r + 4u * (ch >> 1));
        return lds_f32(scl + 4u * (r * (uint32_t)spr + ((64u * ch + 16u * t) >> gshift)));
    }

    /* Value dim of O^T m-tile m, row g (h 0) or g + 8 (h 1). */
    MLA_DEV uint32_t v_dim(int m, int h) const
    {
        return 128u * (uint32_t)(m >> 1) + 32u * w + 4u * g + 2u * (uint32_t)(m & 1) + (uint32_t)h;
    }

    /* Scale of key row r over this thread's 4 value dims from d (PV). */
    MLA_DEV float v_scale(uint32_t scl, uint32_t r, uint32_t d) const
    {
        if (FMT == MLA_FMT_FP8_DS_MLA)
            return lds_f32(scl + RP * r + 4u * (d >> 7));
        return lds_f32(scl + 4u * (r * (uint32_t)spr + (d >> gshift)));
    }

    /* The raw bytes of chunk ch for rows 16 w + g and + 8 (x, y); DS_MLA
     * chunk 8 is the bf16 RoPE, two 16-byte granules per row. */
    struct KRaw {
        uint4 x, y, x2, y2;
        float sx, sy;
    };

    template <bool SC>
    MLA_DEV KRaw k_load(uint32_t stg, uint32_t scl, uint32_t ch) const
    {
        const uint32_t r0 = 16u * w + g, r1 = r0 + 8u;
        KRaw k;
        if (FMT == MLA_FMT_FP8_DS_MLA && ch == 8) {
            const uint32_t a = stg + kDsRopeOffset + 32u * t;
            k.x = lds128(a + RP * r0);
            k.x2 = lds128(a + 16u + RP * r0);
            k.y = lds128(a + RP * r1);
            k.y2 = lds128(a + 16u + RP * r1);
            k.sx = k.sy = 1.0f;
            return k;
        }
        const uint32_t a = stg + 64u * ch + 16u * t;
        k.x = lds128(a + RP * r0);
        k.y = lds128(a + RP * r1);
        k.x2 = k.y2 = make_uint4(0u, 0u, 0u, 0u);
        k.sx = k.sy = 1.0f;
        if (SC) {
            k.sx = k_scale(scl, r0, ch);
            k.sy = k_scale(scl, r1, ch);
        }
        return k;
    }

    /* Fragments of the chunk's 4 k-steps: a[s] = {row g cols 2t.., row
     * g + 8, row g cols 2t + 8.., row g + 8}. */
    template <bool SC, bool F16>
    MLA_DEV void k_frags(const KRaw &k, uint32_t ch, uint32_t (&a)[4][4]) const
    {
        const uint32_t xw[4] = {k.x.x, k.x.y, k.x.z, k.x.w}, yw[4] = {k.y.x, k.y.y, k.y.z, k.y.w};
        if (FMT == MLA_FMT_FP8_DS_MLA && ch == 8) {
            const uint32_t x8[8] = {k.x.x, k.x.y, k.x.z, k.x.w, k.x2.x, k.x2.y, k.x2.z, k.x2.w};
            const uint32_t y8[8] = {k.y.x, k.y.y, k.y.z, k.y.w, k.y2.x, k.y2.y, k.y2.z, k.y2.w};
#pragma unroll
            for (int st = 0; st < 4; st++) {
                a[st][0] = x8[2 * st];
                a[st][1] = y8[2 * st];
                a[st][2] = x8[2 * st + 1];
                a[st][3] = y8[2 * st + 1];
            }
            return;
        }
#pragma unroll
        for (int st = 0; st < 4; st++) {
            if constexpr (F16) {
                a[st][0] = e4m3_lo_f16x2(xw[st]);
                a[st][1] = e4m3_lo_f16x2(yw[st]);
                a[st][2] = e4m3_hi_f16x2(xw[st]);
                a[st][3] = e4m3_hi_f16x2(yw[st]);
            } else {
                a[st][0] = frag_pair<SC, 0, 1>(xw[st], 0u, k.sx, k.sx);
                a[st][1] = frag_pair<SC, 0, 1>(yw[st], 0u, k.sy, k.sy);
                a[st][2] = frag_pair<SC, 2, 3>(xw[st], 0u, k.sx, k.sx);
                a[st][3] = frag_pair<SC, 2, 3>(yw[st], 0u, k.sy, k.sy);
            }
        }
    }

    /* S^T of the tile in stage stg: chunk by chunk, the fragments of chunk
     * ch + 1 built while the tensor cores run chunk ch (two buffers; one
     * commit group per chunk).  DS_MLA's RoPE steps go to sr.  With KF
     * scale blocks folded (DS_MLA, E4M3 /128 and /64), the K bytes are
     * converted unscaled and block b's part of S^T goes to its own
     * accumulator (else all of it to kacc[0]): the row scales are applied
     * to the partial scores, 10-18 products a thread instead of 288
     * scaled conversions (/64 folds blocks 0-3 here, sx and sy holding
     * their scales).
     * Unscaled K bytes become f16 (one cvt per pair) against the f16 Q
     * tile; scaled ones bf16 against a BF16 tile (q_f16_chunks). */
    template <bool SC, int KF>
    MLA_DEV void qk(uint32_t stg, uint32_t scl, float (&kacc)[kAccBlocks<KF>][2][4],
                    const float (&sx)[kScaleBlocks<KF>], const float (&sy)[kScaleBlocks<KF>])
    {
        constexpr bool kScaledK = SC && KF == 0;
        constexpr bool kF16 = !kScaledK;
        /* Two fragment buffers: a third (conversion two chunks ahead of
         * the MMAs) measured no faster (doc/performance.md, Measured reasons). */
        constexpr uint32_t NB = 2;
        uint32_t a[NB][4][4];
        k_frags<kScaledK, kF16>(k_load<kScaledK>(stg, scl, 0), 0, a[0]);
        const uint64_t q0 = wg_desc(c.sq, 16u, 1024u);
        /* The previous tile's P V retires first: with its groups still in
         * flight here, ptxas serializes every wgmma of the loop (C7514). */
        wg_wait<0>();
#pragma unroll
        for (uint32_t ch = 0; ch < 9; ch++) {
            wg_fence();
#pragma unroll
            for (uint32_t st = 0; st < 4; st++) {
                const uint64_t db = wg_desc_add(q0, ch * kNarrowQChunk + 32u * st);
                if (FMT == MLA_FMT_FP8_DS_MLA && ch == 8) {
                    wgmma_m64n16_rs(sr, a[ch % NB][st], db, st != 0 ? 1u : 0u);
                } else if (KF > 0) {
                    const int b = chunk_block<KF>(ch);
                    const bool first = KF == kChunkBlocks || ch == 2u * (uint32_t)b;
                    wgmma_m64n16_rs<kF16>(kacc[block_acc<KF>(b)], a[ch % NB][st], db,
                                          first && st == 0 ? 0u : 1u);
                } else {
                    wgmma_m64n16_rs<kF16>(kacc[0], a[ch % NB][st], db,
                                          (ch | st) != 0 ? 1u : 0u);
                }
            }
            wg_commit();
            if (ch + 1 < 9) {
                const KRaw k = k_load<kScaledK>(stg, scl, ch + 1);
                wg_wait<NB - 1>(); /* chunk ch + 1 - NB retired: its buffer is free */
                if (KF == kChunkBlocks && ch == kEarlyBlocks)
                    fold_blocks<KF, 0, kEarlyBlocks>(kacc, sx, sy, false);
                k_frags<kScaledK, kF16>(k, ch + 1, a[(ch + 1) % NB]);
            }
        }
    }

    /* Scale of key row r over block b (folded formats). */
    MLA_DEV float block_scale(uint32_t scl, uint32_t r, uint32_t b) const
    {
        if (FMT == MLA_FMT_FP8_DS_MLA)
            return lds_f32(scl + RP * r + 4u * b);
        return lds_f32(scl + 4u * (r * (uint32_t)spr + b));
    }

    /* The block scales of this thread's key rows 16 w + g (sx) and + 8
     * (sy); rows past the length get 0, so that P stays 0 in every P tile
     * whatever bytes the scales hold. */
    template <int KF, int B0, int B1>
    MLA_DEV void row_scales(uint32_t scl, uint32_t nvalid, float (&sx)[kScaleBlocks<KF>],
                            float (&sy)[kScaleBlocks<KF>]) const
    {
        const uint32_t r0 = 16u * w + g, r1 = r0 + 8u;
        const float nan = __int_as_float(0x7fffffff);
#pragma unroll
        for (int b = B0; b < B1; b++) {
            /* A scale that is not finite makes the key's score NaN: applied
             * to each value, as the definition does, an infinite scale
             * gives NaN (0 * Inf, or infinities of both signs summed),
             * not the +-Inf that one product with the block's sum gives. */
            const float x = r0 < nvalid ? block_scale(scl, r0, (uint32_t)b) : 0.0f;
            const float y = r1 < nvalid ? block_scale(scl, r1, (uint32_t)b) : 0.0f;
            sx[b] = fabsf(x) < __int_as_float(0x7f800000) ? x : nan;
            sy[b] = fabsf(y) < __int_as_float(0x7f800000) ? y : nan;
        }
    }

    /* Once blocks B0 .. B1 - 1 have retired: s (+)= sum of scale x
     * partial over them. */
    template <int KF, int B0, int B1>
    MLA_DEV void fold_blocks(float (&kacc)[kAccBlocks<KF>][2][4],
                             const float (&sx)[kScaleBlocks<KF>],
                             const float (&sy)[kScaleBlocks<KF>], bool add)
    {
#pragma unroll
        for (int b = B0; b < B1; b++)
            wg_hold(kacc[block_acc<KF>(b)]);
#pragma unroll
        for (int j = 0; j < 2; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                float v = add ? s[j][e] : 0.0f;
#pragma unroll
                for (int b = B0; b < B1; b++)
                    v = fmaf(e < 2 ? sx[b] : sy[b], kacc[block_acc<KF>(b)][j][e], v);
                s[j][e] = v;
            }
    }

    /* Once kacc has retired: s = sum over blocks of scale x partial,
     * times qscale (/64: blocks 0-3 were summed during the MMAs). */
    template <int KF>
    MLA_DEV void fold_scores(float (&kacc)[kAccBlocks<KF>][2][4],
                             const float (&sx)[kScaleBlocks<KF>],
                             const float (&sy)[kScaleBlocks<KF>])
    {
        constexpr bool kEarly = KF == kChunkBlocks;
        fold_blocks<KF, kEarly ? kEarlyBlocks : 0, KF>(kacc, sx, sy, kEarly);
#pragma unroll
        for (int j = 0; j < 2; j++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                s[j][e] *= qscale;
    }

    /* Once S^T has retired: the scores in log2 units, masked. */
    MLA_DEV void prepare_scores(int tt)
    {
        wg_hold(s);
        if (FMT == MLA_FMT_FP8_DS_MLA) {
            wg_hold(sr);
#pragma unroll
            for (int j = 0; j < 2; j++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    s[j][e] = fmaf(sr[j][e], rope_factor, s[j][e]);
        }
        sm.scale_mask(s, p.score_scale_log2, tt * (int)kBN + 16 * (int)w + (int)g, lim);
    }

    /* The exact step: the tile's column maxima over the warpgroup, then
     * probabilities in s and O^T factors in alpha; returns whether `flag`
     * held in any thread of the warpgroup. */
    MLA_DEV bool softmax(bool flag)
    {
        float mx[4];
        sm.warp_max(s, mx);
        const bool any = column_reduce<true>(c, wg, w, g, t, mx, true, flag);
        sm.tile_exp(s, mx, alpha);
        return any;
    }

    /* Rescale O^T and write P into this WG's P tile (NT = 4: block b's
     * tile holds P times the keys' block-b scales fx[b] (row g) and fy[b]
     * (row g + 8)), times pfold when V converts unscaled (RAW), keys in
     * the PV fragment order (key 16 ks + t + 4 i at column 16 ks + 2 t +
     * i, or 2 t + 6 + i for i >= 2).  The previous P V has retired. */
    template <int NT, bool RAW, int NB>
    MLA_DEV void publish_p(const float (&fx)[NB], const float (&fy)[NB])
    {
        if (alpha[0] != 1.0f || alpha[1] != 1.0f || alpha[2] != 1.0f || alpha[3] != 1.0f)
            scale_columns<false>(o, alpha);
        write_p<NT, RAW>(s, fx, fy);
        bar_sync(kNbWg0 + wg, 128);
    }

    /* publish_p's P tiles from pr, fenced for the MMAs; no barrier. */
    template <int NT, bool RAW, int NB>
    MLA_DEV void write_p(const float (&pr)[2][4], const float (&fx)[NB], const float (&fy)[NB])
    {
        static_assert(NT == 1 || NB >= NT, "a scale per block");
        float fxp[NT], fyp[NT];
#pragma unroll
        for (int b = 0; b < NT; b++) {
            fxp[b] = (NT > 1 ? fx[b] : 1.0f) * (RAW ? pfold : 1.0f);
            fyp[b] = (NT > 1 ? fy[b] : 1.0f) * (RAW ? pfold : 1.0f);
        }
#pragma unroll
        for (int nt = 0; nt < 2; nt++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const uint32_t q = (uint32_t)narrow_column(2 * nt + (e & 1), t);
                const uint32_t key = 16u * w + g + 8u * (uint32_t)(e >> 1);
                const uint32_t k = key & 15u, i = k >> 2;
                const uint32_t pos = (key & ~15u) + 2u * (k & 3u) + (i < 2u ? i : i + 6u);
#pragma unroll
                for (int b = 0; b < NT; b++) {
                    const float v = pr[nt][e] * (e < 2 ? fxp[b] : fyp[b]);
                    sts16(p_tile_addr(pbuf + kPTile * (uint32_t)b, q, pos),
                          (uint16_t)(pack_bf16x2(v, 0.0f) & 0xffffu));
                }
            }
        fence_proxy_async();
    }

    /* The lazy path (ColumnSoftmax::lazy_exp): P against the running
     * maxima into the P tiles, and one warpgroup barrier that also tells
     * whether any thread needs new maxima (or a larger vunit: `over`);
     * returns true when none does, the tile then ready for P V. */
    template <int NT, bool RAW, int NB>
    MLA_DEV bool publish_lazy(const float (&fx)[NB], const float (&fy)[NB], bool over)
    {
        float pr[2][4], lt[4];
        const bool jump = sm.lazy_exp(s, pr, lt) || over;
        write_p<NT, RAW>(pr, fx, fy);
        if (bar_red_or(kNbWg0 + wg, 128, jump))
            return false;
        sm.commit_lazy(lt);
        return true;
    }

    /* Whether a block scale this thread folds into P (largest: smax)
     * would overflow bf16 there: P x scale x pfold with P <= 2^kLazy. */
    MLA_DEV bool p_overflows(float smax) const
    {
        return smax * pfold >= 0x1p127f / ColumnSoftmax::kLazyMax;
    }

    /* O^T is kept in units 2^39 larger (exactly: powers of two; the
     * factor rides on alpha, which publish_p applies), so P tiles carry
     * 2^39 less. */
    MLA_DEV void raise_vunit()
    {
#pragma unroll
        for (int r = 0; r < 4; r++)
            alpha[r] *= 1.0f / kPFoldStep;
        vunit *= kPFoldStep;
        pfold *= 1.0f / kPFoldStep;
    }

    /* V bytes of unit u (k-step u / 2, m-tiles 4 (u % 2) .., blocks b0 =
     * 2 (u % 2) and b0 + 1): v[i] = this thread's 4 dims of blocks b0 (x)
     * and b0 + 1 (y) of key 16 (u / 2) + t + 4 i; with SC their scales. */
    struct VRaw {
        uint2 v[4];
        float sc[4][2];
    };

    template <bool SC>
    MLA_DEV VRaw v_load(uint32_t stg, uint32_t scl, uint32_t nvalid, uint32_t u) const
    {
        const uint32_t b0 = 2u * (u & 1u), d0 = 128u * b0 + 32u * w + 4u * g;
        const uint32_t base = stg + d0;
        VRaw r;
#pragma unroll
        for (uint32_t i = 0; i < 4; i++) {
            const uint32_t key = 16u * (u >> 1) + t + 4u * i;
            r.v[i].x = lds32(base + RP * key);
            r.v[i].y = lds32(base + 128u + RP * key);
            r.sc[i][0] = r.sc[i][1] = 1.0f;
            if (SC) {
                r.sc[i][0] = v_scale(scl, key, d0);
                r.sc[i][1] = v_scale(scl, key, d0 + 128u);
                if (key >= nvalid) { /* garbage bytes or scales could be NaN */
                    r.v[i] = make_uint2(0u, 0u);
                    r.sc[i][0] = r.sc[i][1] = 0.0f;
                }
            }
        }
        return r;
    }

    /* Fragments of m-tiles 4 (u % 2) + mm, mm = 0..3 (block b0 + mm / 2,
     * its dims 2 (mm % 2) and + 1 as rows g and g + 8). */
    template <bool SC>
    MLA_DEV void v_frags(const VRaw &r, uint32_t (&a)[4][4]) const
    {
#pragma unroll
        for (int mm = 0; mm < 4; mm++) {
            const int x = mm >> 1;
            const uint32_t w0 = x ? r.v[0].y : r.v[0].x, w1 = x ? r.v[1].y : r.v[1].x;
            const uint32_t w2 = x ? r.v[2].y : r.v[2].x, w3 = x ? r.v[3].y : r.v[3].x;
            const KeyScales<SC> cv{{{r.sc[0][x], r.sc[1][x]}, {r.sc[2][x], r.sc[3][x]}}};
            if (mm & 1)
                v_mtile<true>(w0, w1, w2, w3, cv, a[mm]);
            else
                v_mtile<false>(w0, w1, w2, w3, cv, a[mm]);
        }
    }

    /* O^T += V^T P^T for the tile in stage stg, in 8 units (4 m-tiles of
     * one k-step each, one commit group); the stage is released once the
     * last unit's bytes are in registers.  NT = 4: block b's m-tiles take
     * P tile b. */
    template <bool SC, int NT>
    MLA_DEV void pv(uint32_t stg, uint32_t scl, uint32_t nvalid, uint32_t empty)
    {
        constexpr uint32_t NB = 2; /* as in qk */
        uint32_t a[NB][4][4];
        v_frags<SC>(v_load<SC>(stg, scl, nvalid, 0), a[0]);
        const uint64_t p0 = wg_desc(pbuf, 16u, 1024u);
#pragma unroll
        for (uint32_t u = 0; u < 8; u++) {
            wg_fence();
            const uint32_t pt = 32u * (u >> 1) + (NT > 1 ? 2u * kPTile * (u & 1u) : 0u);
            const uint64_t db0 = wg_desc_add(p0, pt);
            const uint64_t db1 = wg_desc_add(p0, pt + (NT > 1 ? kPTile : 0u));
#pragma unroll
            for (uint32_t mm = 0; mm < 4; mm++)
                wgmma_m64n16_rs(o[4u * (u & 1u) + mm], a[u % NB][mm], mm < 2 ? db0 : db1, 1u);
            wg_commit();
            if (u + 1 < 8) {
                const VRaw r = v_load<SC>(stg, scl, nvalid, u + 1);
                wg_wait<NB - 1>();
                v_frags<SC>(r, a[(u + 1) % NB]);
                if (u + 1 == 7)
                    mbar_arrive(empty);
            }
        }
    }

    /* The tile loop of scale mode MODE (mla_params.h): SC whether K or V
     * have scales, KF the scale blocks folded into the scores (128 dims
     * each, the last one RoPE's 64 with E4M3; or 64 dims) or 0. */
    template <int MODE>
    MLA_DEV void tiles()
    {
        constexpr bool SC = MODE != MLA_SCALES_NONE;
        constexpr int KF = MODE == MLA_SCALES_DSMLA ? 4
                           : MODE == MLA_SCALES_128 ? MLA_SPR_128
                           : MODE == MLA_SCALES_64  ? MLA_SPR_64
                                                    : 0;
        const Pipe pipe = c.pipe();
        PipeState st; /* the ring's position: stage, and the free barriers */
        st.stage = wg;
        st.phase = 0;
        /* This warpgroup's loaded barriers (Bars::loaded1 for WG 1) and
         * the parity of each one's next phase, a bit a stage: it waits on
         * every phase of its own, whichever stages its tiles take. */
        const uint32_t full = c.bars + (wg ? kBarLoaded1 : kBarLoaded);
        uint32_t par = 0u;
        float kacc[kAccBlocks<KF>][2][4];
        /* 128-dim scales folded into the scores fold into P too (their
         * first four blocks are V's); 64-dim ones scale each V value. */
        constexpr bool kFoldV = MODE == MLA_SCALES_DSMLA || MODE == MLA_SCALES_128;
        constexpr int NT = kFoldV ? 4 : 1;
        constexpr bool kScaledV = SC && !kFoldV;
        if (kScaledV)
            vunit = 1.0f; /* P carries no factor */
        float sx[kScaleBlocks<KF>], sy[kScaleBlocks<KF>];
        for (int tt = c.t0 + (int)wg; tt < c.t1; tt += 2) {
            const uint32_t stg = c.stage(st.stage), scl = c.scales(st.stage);
            const uint32_t nvalid = (uint32_t)min((int)kBN, c.len - tt * (int)kBN);
            mbar_wait(full + 8u * st.stage, (par >> st.stage) & 1u);
            par ^= 1u << st.stage;
            /* Scales after the MMAs are issued, but /64's blocks 0-3,
             * folded during them. */
            constexpr int kEarly = KF == kChunkBlocks ? kEarlyBlocks : 0;
            if (kEarly > 0)
                row_scales<KF, 0, kEarly>(scl, nvalid, sx, sy);
            qk<SC, KF>(stg, scl, kacc, sx, sy);
            if (KF > 0) {
                row_scales<KF, kEarly, KF>(scl, nvalid, sx, sy);
                wg_wait<0>();
                fold_scores<KF>(kacc, sx, sy);
            } else {
                /* S^T accumulates apart from s, which softmax overwrites
                 * with P: an accumulator written by other instructions
                 * while MMAs are in flight makes ptxas serialize them. */
                wg_wait<0>();
                wg_hold(kacc[0]);
#pragma unroll
                for (int j = 0; j < 2; j++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        s[j][e] = kacc[0][j][e] * qscale;
            }
            /* V converts unscaled (times 2^-120) unless 32/64-dim scales
             * apply to each value; then P (at most 2^8) carries 2^120 /
             * vunit, and with 128-dim scales folded in, a scale of vunit /
             * 2 or more (2^7 at first; rare: 57344 / 448 for E4M3) would
             * overflow bf16 in P.  The check rides on the P tile's barrier
             * and the exact step's; vunit rises by 2^39 until no thread
             * overflows, at most three times (to 2^125: scales up to
             * 2^124). */
            float smax = 0.0f;
#pragma unroll
            for (int b = 0; b < (kFoldV ? NT : 0); b++)
                smax = fmaxf(smax, fmaxf(sx[b], sy[b]));
            const bool over0 = kFoldV && p_overflows(smax);
            prepare_scores(tt);
            /* Most tiles: P against the maxima as they stand, one barrier.
             * Else the exact step, which also raises vunit as needed. */
            if (!publish_lazy<NT, !kScaledV>(sx, sy, over0)) {
                bool over = softmax(over0);
                for (int i = 0; kFoldV && over && i < 3; i++) {
                    raise_vunit();
                    over = bar_red_or(kNbWg0 + wg, 128, p_overflows(smax));
                }
                publish_p<NT, !kScaledV>(sx, sy);
            }
            pv<kScaledV, NT>(stg, scl, nvalid, pipe.empty_bar(st));
            st.advance(c.nstages);
            st.advance(c.nstages);
        }
        wg_wait<0>();
#pragma unroll
        for (int m = 0; m < 8; m++)
            wg_hold(o[m]);
    }

    MLA_DEV void run()
    {
        mbar_wait(c.bars + kBarQ, 0);
        qscale = lds_f32(c.bars + kQScale);
        /* Block scales fold into the scores (DS_MLA: the 4 nope blocks;
         * E4M3: 5 blocks of 128 or 9 of 64); 32-dim E4M3 blocks scale each
         * converted K value.  The branches are mla_scale_mode's, as in
         * q_f16_chunks (the Q tile is f16 exactly where K is converted
         * unscaled), taken on spr itself so that each keeps spr a
         * constant for the scale addressing. */
        if (FMT == MLA_FMT_FP8_DS_MLA)
            tiles<MLA_SCALES_DSMLA>();
        else if (spr == 0)
            tiles<MLA_SCALES_NONE>();
        else if (spr == MLA_SPR_128)
            tiles<MLA_SCALES_128>();
        else if (spr == MLA_SPR_64)
            tiles<MLA_SCALES_64>();
        else
            tiles<MLA_SCALES_32>();
        if (tid == 0)
            griddep_launch_dependents();
        merge_and_write();
    }

    /* Both warpgroups at merge step k: an mbarrier of 256 arrivals, used
     * once (racecheck flagged the same order through a 256-thread named
     * barrier when the warpgroups had passed different numbers of
     * barriers before; doc/performance.md, Measured reasons). */
    MLA_DEV void merge_sync(uint32_t k) const
    {
        mbar_arrive(c.bars + kBarMerge + 8u * k);
        mbar_wait(c.bars + kBarMerge + 8u * k, 0);
    }

    /*
     * The two warpgroups' results are two softmax partials over disjoint
     * keys: per column, the larger max M, each WG's factor exp2(m - M), the
     * total sum L, by one lane of warp 0 a column (in a branch: this code
     * runs once a CTA, so its instructions are fetched cold; unrolled over
     * a thread's four columns it was four copies).  WG 1 stages its
     * scaled O^T in stage 0 (every tile has been consumed), WG 0 adds its
     * own, both write the rows out.
     */
    MLA_DEV void merge_and_write()
    {
        float lsum[4];
        sm.finish(lsum);
        column_reduce(c, wg, w, g, t, lsum, false);
        /* [16 columns] x (m, l) in each warpgroup's first P tile: its
         * last P V has retired. */
        if (w == 0 && g == 0) {
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const uint32_t a = pbuf + 8u * (uint32_t)narrow_column(r, t);
                sts32(a, __float_as_uint(sm.m[r]));
                sts32(a + 4u, __float_as_uint(lsum[r]));
            }
        }
        merge_sync(0);
        const OutTarget out(c);
        /* The two warpgroups' factors, [wg][16 columns], past the (m, l)
         * pairs in WG 0's first P tile; without vunit, which is each
         * warpgroup's own (raise_vunit).  Both warpgroups divide by the
         * same total sum (each computed its own before, equal up to the
         * rounding of a fused product). */
        const uint32_t fac = c.pbuf + 128u;
        if (tid < 16u) {
            const uint32_t a0 = c.pbuf + 8u * tid, a1 = a0 + kNarrow8PTiles;
            const float m0 = lds_f32(a0), l0 = lds_f32(a0 + 4u);
            const float m1 = lds_f32(a1), l1 = lds_f32(a1 + 4u);
            const float ninf = -__int_as_float(0x7f800000), mx = fmaxf(m0, m1);
            const float f0 = mx == ninf ? 0.0f : ex2(m0 - mx);
            const float f1 = mx == ninf ? 0.0f : ex2(m1 - mx);
            const float lt = l0 * f0 + l1 * f1;
            const float inv = out.inv_sum(p, c.m_base + (int)tid, lt);
            sts32(fac + 4u * tid, __float_as_uint(f0 * inv));
            sts32(fac + 64u + 4u * tid, __float_as_uint(f1 * inv));
            if ((int)tid < c.rows_here)
                out.write_lse(p, c.m_base + (int)tid, mx, lt);
        }
        static_assert(256u <= kPTile, "the pairs and the factors fit a P tile");
        merge_sync(3);
        float f[4];
#pragma unroll
        for (int r = 0; r < 4; r++)
            f[r] = lds_f32(fac + 64u * wg + 4u * (uint32_t)narrow_column(r, t)) * vunit;
        scale_columns(o, f);

        const uint32_t stg0 = c.stage(0);
#pragma unroll
        for (int pass = 1; pass >= 0; pass--) {
            if (wg == (uint32_t)pass) {
#pragma unroll
                for (int nt = 0; nt < 2; nt++)
#pragma unroll
                    for (int e = 0; e < 4; e++) {
                        const uint32_t col = (uint32_t)narrow_column(2 * nt + (e & 1), t);
                        const uint32_t row = stg0 + col * kStageRow;
#pragma unroll
                        for (int m = 0; m < 8; m++) {
                            const uint32_t dim = v_dim(m, e >> 1);
                            float v = o[m][nt][e];
                            if (pass == 0)
                                v += lds_f32(row + 4u * dim);
                            sts32(row + 4u * dim, __float_as_uint(v));
                        }
                    }
            }
            merge_sync(2u - (uint32_t)pass);
        }
        write_staged_rows(p, out, stg0, kStageRow, c.rows_here, tid, 256u);
    }
};

} /* namespace hopper */
} /* namespace mla */

#endif /* MLA_HOPPER_NARROW_FP8_CUH */
