/*
 * hopper_wide8_base.cuh - what the parts of the wide FP8 consumers
 * (hopper_wide8.cuh, hopper_wide8_softmax.cuh) share: the head's fields
 * and barriers, a consumer thread's place (warpgroup, warp, fragment row
 * and column), the buffers of the layout, and the block scales as the K,
 * P and V sides read them.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_HOPPER_WIDE8_BASE_CUH
#define MLA_HOPPER_WIDE8_BASE_CUH

#include "hopper_layout.cuh"
#include "hopper_consume.cuh"
#include "hopper_load.cuh"

namespace mla {
namespace hopper {

/* The head's fields (c.xchg is the head's base), the P slots' barriers
 * and the end's (in the barrier block's per-layout words: p_full[2] of
 * 128 arrivals, p_free[2] of 256, fin[3] of 256 used once each), and the
 * named barrier of both warpgroups (only before their tile loops: after
 * them the warpgroups have passed different numbers of their own
 * barriers, and racecheck flagged a named barrier of both there in the
 * narrow kernel: doc/performance.md, Measured reasons). */
constexpr uint32_t kW8Ref = offsetof(mla_wide8_head, ref),
                   kW8Alpha = offsetof(mla_wide8_head, alpha),
                   kW8Lim = offsetof(mla_wide8_head, lim),
                   kW8Changed = offsetof(mla_wide8_head, changed);
constexpr uint32_t kBarPFull = kBarWords, kBarPFree = kBarWords + 16u,
                   kBarFin = kBarWords + 32u;
constexpr uint32_t kNbBoth = kNbP;

static_assert(kBarFin + 24u <= kBarWords + sizeof(Bars::words), "P slot and end barriers");
static_assert(32u * kStageRow <= MLA_WIDE8_STAGES * mla_narrow8_stage_bytes(MLA_FMT_FP8_E4M3, 0) &&
                  32u * kStageRow <= sizeof(mla_wide8_head::q),
              "32 output rows are staged in the stages, 32 over the Q tile");

template <int FMT>
MLA_DEV void init_wide8_barriers(const Cta &c)
{
    for (uint32_t s = 0; s < MLA_WIDE8_STAGES; s++) {
        mbar_init(c.bars + kBarLoaded + 8u * s, 1);
        mbar_init(c.bars + kBarFree + 8u * s, 256);
    }
    for (uint32_t k = 0; k < 2; k++) {
        mbar_init(c.bars + kBarPFull + 8u * k, 128);
        mbar_init(c.bars + kBarPFree + 8u * k, 256);
    }
    for (uint32_t k = 0; k < 3; k++)
        mbar_init(c.bars + kBarFin + 8u * k, 256);
    fence_mbar_init();
}

/* SCALED: K and V carry block scales (DS_MLA always; E4M3 with
 * scales_per_row > 0), else E4M3 converts unscaled.  (The E4M3 block sizes
 * as compile-time constants, one instantiation each, made ptxas spill 392
 * bytes in the kernel holding all four.) */
template <int FMT, bool SCALED>
struct Wide8Base {
    static_assert(FMT != MLA_FMT_FP8_DS_MLA || SCALED, "DS_MLA's own scales");
    static constexpr uint32_t RP = kFp8RowPitch<FMT>;
    const mla_decode_params &p;
    const Cta &c;
    uint32_t wg, w, g, t;
    float smul;                /* scores to log2 units */
    float l[2];                /* this warp's part of the row sums of columns
                                * col(2 g) and col(2 g + 1), in the units of the
                                * last tile it took factors of */

    MLA_DEV Wide8Base(const mla_decode_params &p_, const Cta &c_, uint32_t wg_, uint32_t wl,
                      uint32_t lane)
        : p(p_), c(c_), wg(wg_), w(wl), g(lane >> 2), t(lane & 3u)
    {
        l[0] = l[1] = 0.0f;
    }

    /* DS_MLA: kv_scale, folded into the nope K scales (the RoPE is
     * unscaled). */
    MLA_DEV float kmul() const { return FMT == MLA_FMT_FP8_DS_MLA ? p.out_scale : 1.0f; }
    /* Whether K and V carry block scales (else E4M3 converts unscaled). */
    static constexpr bool kScaled = SCALED;

    /* E4M3 block scales a row, and log2 of their block (0: none); from
     * the parameters (constant bank) rather than held: registers */
    MLA_DEV int spr() const { return FMT == MLA_FMT_FP8_E4M3 ? p.scales_per_row : 0; }
    MLA_DEV int gshift() const { return spr() > 0 ? 31 - __clz(p.scale_block) : 0; }

    /* 0..255 over both consumer warpgroups */
    MLA_DEV uint32_t tid() const { return 128u * wg + 32u * w + 4u * g + t; }

    /* The buffers, from the layout's base (c.sq) and constants rather than
     * c's fields: registers, which the tile loop has none to spare of. */
    MLA_DEV uint32_t head() const { return c.sq; }
    MLA_DEV uint32_t cmax() const { return c.sq + (uint32_t)offsetof(mla_wide8_head, cx); }
    MLA_DEV uint32_t stage_bytes() const
    {
        return mla_narrow8_stage_bytes(FMT, FMT == MLA_FMT_FP8_E4M3 ? p.scales_per_row : 0);
    }
    MLA_DEV uint32_t stage(uint32_t s) const
    {
        return c.sq + (uint32_t)sizeof(mla_wide8_head) + s * stage_bytes();
    }
    MLA_DEV uint32_t scales(uint32_t s) const
    {
        return stage(s) + (FMT == MLA_FMT_FP8_DS_MLA ? kDsScaleOffset : kBN * RP);
    }
    MLA_DEV uint32_t bars() const
    {
        return stage(MLA_WIDE8_STAGES) + (uint32_t)offsetof(mla_wide8_tail, bars);
    }
    MLA_DEV Pipe pipe() const { return Pipe{bars() + kBarLoaded, bars() + kBarFree}; }

    /* Query column (packed row of the M tile) of register slot j: slot j
     * is s[j / 2][(j & 1) + 2h] of an S^T fragment, h the key half. */
    MLA_DEV uint32_t col(int j) const { return 8u * (uint32_t)(j >> 1) + 2u * t + (uint32_t)(j & 1); }

    MLA_DEV uint32_t pfull(uint32_t slot) const { return bars() + kBarPFull + 8u * slot; }
    MLA_DEV uint32_t pfree(uint32_t slot) const { return bars() + kBarPFree + 8u * slot; }
    MLA_DEV uint32_t pslot(uint32_t slot) const
    {
        return c.sq + (uint32_t)offsetof(mla_wide8_head, p) + kPTile8 * slot;
    }
    static constexpr uint32_t kPTile8 = sizeof(mla_wide8_head::p[0]);

    /* Scale of key row r over this thread's 16 dims of chunk ch. */
    MLA_DEV float k_scale(uint32_t scl, uint32_t r, uint32_t ch) const
    {
        if (FMT == MLA_FMT_FP8_DS_MLA)
            return lds_f32(scl + RP * r + 4u * (ch >> 1)) * kmul();
        return lds_f32(scl + 4u * (r * (uint32_t)spr() + ((64u * ch + 16u * t) >> gshift())));
    }

    /* Of key row r: 2^e for the largest of its block scales (K's: times
     * DS_MLA's kv_scale; V's: without), clamped so that 2^e and 2^-e are
     * normal, 1 for none or all zero; returns 2^-e, sets up = 2^e.  NaN
     * scales are passed over (the scaled values stay NaN), an infinite one
     * makes 2^-e 0 (and its values NaN). */
    template <bool KMUL = true>
    MLA_DEV float key_unit(uint32_t scl, uint32_t r, float &up) const
    {
        float m = 0.0f;
        if (FMT == MLA_FMT_FP8_DS_MLA) {
#pragma unroll
            for (uint32_t b = 0; b < 4; b++)
                m = fmaxf(m, fabsf(lds_f32(scl + RP * r + 4u * b)) * (KMUL ? kmul() : 1.0f));
        } else {
            for (int b = 0; b < spr(); b++)
                m = fmaxf(m, fabsf(lds_f32(scl + 4u * (r * (uint32_t)spr() + (uint32_t)b))));
        }
        if (!(m < __int_as_float(0x7f800000))) { /* Inf */
            up = m;
            return 0.0f;
        }
        const int e = m > 0.0f ? max(-100, min(100, (int)(__float_as_uint(m) >> 23) - 127)) : 0;
        up = __int_as_float((127 + e) << 23);
        return __int_as_float((127 - e) << 23);
    }

    /* key_unit's 2^-e from its 2^e (exact; Inf: 0) */
    MLA_DEV static float inv_unit(float up)
    {
        return up < __int_as_float(0x7f800000) ? __int_as_float(0x7f000000 - __float_as_int(up)) : 0.0f;
    }

    MLA_DEV static uint32_t hmul2(uint32_t a, uint32_t b)
    {
        uint32_t d;
        asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
        return d;
    }
    MLA_DEV static uint32_t bmul2(uint32_t a, uint32_t b)
    {
        uint32_t d;
        asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
        return d;
    }
    /* bf16x2 of (v, v), v a power of two (exact) */
    MLA_DEV static uint32_t bf16x2_of_pow2(float v)
    {
        const uint32_t h = __float_as_uint(v) >> 16;
        return h | (h << 16);
    }

    /* Scale of key row r over this thread's 4 value dims from d. */
    MLA_DEV float v_scale(uint32_t scl, uint32_t r, uint32_t d) const
    {
        if (FMT == MLA_FMT_FP8_DS_MLA)
            return lds_f32(scl + RP * r + 4u * (d >> 7));
        return lds_f32(scl + 4u * (r * (uint32_t)spr() + (d >> gshift())));
    }

    /* log2 of V's scale block (DS_MLA: 128 channels) */
    MLA_DEV uint32_t vshift() const { return FMT == MLA_FMT_FP8_DS_MLA ? 7u : (uint32_t)gshift(); }

    /* The word of V's factors in P slot `slot` for scale block b and the
     * keys 16 ks + j and + 8 (a bf16 pair): pairs j and j + 4 side by side
     * (one 8-byte load in v_load). */
    MLA_DEV uint32_t vf_word(uint32_t slot, uint32_t b, uint32_t ks, uint32_t j) const
    {
        return head() + (uint32_t)offsetof(mla_wide8_head, vf) +
               4u * (512u * slot + 32u * b + 8u * ks + 2u * (j & 3u) + (j >> 2));
    }
};

} /* namespace hopper */
} /* namespace mla */

#endif /* MLA_HOPPER_WIDE8_BASE_CUH */
