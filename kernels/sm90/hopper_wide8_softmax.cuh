/*
 * hopper_wide8_softmax.cuh - the tile's P in the wide FP8 consumers
 * (hopper_wide8.cuh): the warpgroup that took a tile's scores turns them
 * into P against the lazy reference maxima, publishes P with the
 * reference, the factors for O and V's factors in its P slot, and keeps
 * its part of the row sums (publish, and what it calls).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_HOPPER_WIDE8_SOFTMAX_CUH
#define MLA_HOPPER_WIDE8_SOFTMAX_CUH

#include "hopper_wide8_base.cuh"
#include "softmax.cuh"
#include "convert.cuh"

namespace mla {
namespace hopper {

template <int FMT, bool SCALED>
struct Wide8Softmax : Wide8Base<FMT, SCALED> {
    using B = Wide8Base<FMT, SCALED>;
    using B::p, B::c, B::wg, B::w, B::g, B::t, B::smul, B::l, B::kScaled;
    using B::head, B::cmax, B::col, B::pfull, B::pfree, B::pslot, B::v_scale, B::vshift,
        B::vf_word;
    using B::B;

    /* The row sums take the factors of the tile in P slot `slot` (the
     * other warpgroup's, published), if its reference changed. */
    MLA_DEV void take_factors(uint32_t slot)
    {
        if (lds32(head() + kW8Changed + 4u * slot) != 0u)
            scale_sums(slot);
    }

    /* l times the factors in P slot `slot`. */
    MLA_DEV void scale_sums(uint32_t slot)
    {
#pragma unroll
        for (int i = 0; i < 2; i++)
            l[i] *= lds_f32(head() + kW8Alpha + 256u * slot + 4u * col(2 * (int)g + i));
    }

    /* The tile's sums lt over the warp's 16 keys, reduced and scattered
     * over the 8 lanes of equal t: lane g adds those of slots 2 g and
     * 2 g + 1 to l (three halving exchanges, 14 shuffles). */
    MLA_DEV void add_sums(const float (&lt)[16])
    {
        float h8[8], h4[4];
        const bool b2 = g & 4u, b1 = g & 2u, b0 = g & 1u;
#pragma unroll
        for (int i = 0; i < 8; i++)
            h8[i] = (b2 ? lt[i + 8] : lt[i]) + __shfl_xor_sync(0xffffffffu, b2 ? lt[i] : lt[i + 8], 16);
#pragma unroll
        for (int i = 0; i < 4; i++)
            h4[i] = (b1 ? h8[i + 4] : h8[i]) + __shfl_xor_sync(0xffffffffu, b1 ? h8[i] : h8[i + 4], 8);
#pragma unroll
        for (int i = 0; i < 2; i++)
            l[i] += (b0 ? h4[i + 2] : h4[i]) + __shfl_xor_sync(0xffffffffu, b0 ? h4[i] : h4[i + 2], 4);
    }

    /* The reference at r for this thread's 16 columns (none: -inf, no
     * reference yet), all loaded before P's stores: ptxas does not move a
     * shared load above a store it cannot tell apart from it (the P tile's
     * addresses are swizzled), so loads between the stores would make P a
     * chain of load, exp2, store a column. */
    MLA_DEV void load_ref(uint32_t r, bool none, float (&ref)[16]) const
    {
        const float ninf = -__int_as_float(0x7f800000);
#pragma unroll
        for (int j = 0; j < 16; j += 2) {
            const uint2 v = none ? make_uint2(0u, 0u) : lds64(r + 4u * col(j)); /* col(j), + 1 */
            ref[j] = none ? ninf : __uint_as_float(v.x);
            ref[j + 1] = none ? ninf : __uint_as_float(v.y);
        }
    }

    /* P of the scores s against the reference ref into P slot `slot`
     * (f16), one 32-bit store a column: the thread's keys 16 w + g and + 8
     * are P's key positions 16 w + 2 g and + 1 (v_frags puts keys t and
     * t + 8 in one k-column pair); lt takes the tile's sums, each P times
     * iv[h] (with block scales the scores carry V's power of two of the
     * key, which the sums leave out: publish). */
    template <bool SC>
    MLA_DEV void write_p(const float (&s)[8][4], const float (&ref)[16], uint32_t slot,
                         const float (&iv)[2], float (&lt)[16]) const
    {
        const float ninf = -__int_as_float(0x7f800000);
        const uint32_t pt = pslot(slot);
#pragma unroll
        for (int j = 0; j < 16; j++) {
            const float base = ref[j] == ninf ? 0.0f : ref[j];
            const float p0 = ex2(s[j >> 1][j & 1] - base), p1 = ex2(s[j >> 1][(j & 1) + 2] - base);
            lt[j] = SC ? p0 * iv[0] + p1 * iv[1] : p0 + p1;
            sts32(p_tile_addr(pt, col(j), 16u * w + 2u * g), pack_f16x2(p0, p1));
        }
    }

    /* Whether a score of s passes the reference ref (-inf: any live
     * score) by more than 2^8, over the warpgroup (its named barrier). */
    MLA_DEV bool jumps(const float (&s)[8][4], const float (&ref)[16]) const
    {
        bool jump = false;
#pragma unroll
        for (int j = 0; j < 16; j++)
            jump |= fmaxf(s[j >> 1][j & 1], s[j >> 1][(j & 1) + 2]) > ref[j] + ColumnSoftmax::kLazy;
        return bar_red_or(kNbWg0 + wg, 128, jump);
    }

    /* P slot `slot` complete: its changed flag, then the P V may read it. */
    MLA_DEV void post_p(uint32_t slot, bool changed, const float (&lt)[16])
    {
        if (w == 0 && g == 0 && t == 0)
            sts32(head() + kW8Changed + 4u * slot, changed ? 1u : 0u);
        fence_proxy_async(); /* P is read by the wgmmas (async proxy) */
        mbar_arrive(pfull(slot));
        add_sums(lt);
    }

    /*
     * Tile k of the piece (this warpgroup's), scores in s: scaled and
     * masked, P against the reference after tile k - 1 (published by the
     * other warpgroup), new maxima where a score passed it by more than
     * 2^8, then P, the reference and the factors into this warpgroup's P
     * slot.  The row sums take tile k - 1's factors (the other
     * warpgroup's: this one's were taken when it published), then this
     * tile's and its P.
     *
     * From the third tile on, P is first computed against this
     * warpgroup's own reference, that after tile k - 2 (still in its slot),
     * before the wait for tile k - 1: the reference rarely changes, and
     * when neither tile k - 1 nor this tile changed it, that P is the
     * tile's and the slot already holds the tile's reference, so the two
     * warpgroups' softmax runs side by side rather than one after the
     * other.  Otherwise P is computed again against tile k - 1's.
     */
    template <bool SC>
    MLA_DEV void publish(int k, float (&s)[8][4], uint32_t scl, const float (&ku)[2])
    {
        const float ninf = -__int_as_float(0x7f800000);
        const uint32_t slot = wg, head = this->head();
        const int tile = c.t0 + k;
        const int key0 = tile * (int)kBN + 16 * (int)w + (int)g;
        /* keys every row sees: the length, less the later tokens' */
        const bool mask = (tile + 1) * (int)kBN > (p.causal ? c.len - p.q_len + 1 : c.len);
        /* kf: the keys' powers of two of K, which qk divided out (f16
         * path).  V converts to f16, with block scales times its factors
         * (put_vf), which divide out each key's power of two of V, vu =
         * 2^ev (E4M3's is K's, DS_MLA's leaves out kv_scale): the key's
         * scores take ev (log2 units), so that P, against references over
         * the scores so shifted, carries vu and stays within f16 (up to
         * 2^kLazy), and the row sums take P / vu (iv).  A key past the
         * length takes 1 (its scales may be anything, its P is 0). */
        float kf[2] = {1.0f, 1.0f}, ev[2] = {0.0f, 0.0f}, iv[2] = {1.0f, 1.0f},
              vd[2] = {0.0f, 0.0f};
        bool live[2] = {false, false};
        if (SC) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const uint32_t r = 16u * w + g + 8u * (uint32_t)h;
                /* qk's units (ku) are K's: E4M3's are V's too; DS_MLA's
                 * take kv_scale, V's not */
                float vu = ku[h];
                if (FMT == MLA_FMT_FP8_DS_MLA)
                    vd[h] = this->template key_unit<false>(scl, r, vu);
                else
                    vd[h] = this->inv_unit(vu);
                kf[h] = ku[h];
                live[h] = key0 + 8 * h < c.len;
                /* vu is a power of two (Inf: 128, its scores are NaN) */
                ev[h] = live[h] ? (float)((int)(__float_as_uint(vu) >> 23) - 127) : 0.0f;
                iv[h] = live[h] ? vd[h] : 1.0f;
            }
        }
        /* slot j: s[j / 2][(j & 1) + 2 h], keys key0 + 8 h.  kf is a
         * power of two, so smul * kf[h] * v rounds as v * smul * kf[h].
         * The rows' limits only where a key may pass one (a branch the
         * warpgroup takes alike). */
        const float sk[2] = {smul * kf[0], smul * kf[1]};
        if (mask) {
#pragma unroll
            for (int j = 0; j < 16; j++) {
                const int lim = (int)lds32(head + kW8Lim + 4u * col(j));
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    float &v = s[j >> 1][(j & 1) + 2 * h];
                    v = key0 + 8 * h < lim ? (SC ? fmaf(v, sk[h], ev[h]) : v * sk[h]) : ninf;
                }
            }
        } else {
#pragma unroll
            for (int j = 0; j < 16; j++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    float &v = s[j >> 1][(j & 1) + 2 * h];
                    v = SC ? fmaf(v, sk[h], ev[h]) : v * sk[h];
                }
        }
        /* rprev: the other warpgroup's slot, the reference after tile
         * k - 1 once it is published (-inf before the first tile); rown:
         * this one's, the reference after tile k - 2 until this tile's is
         * written. */
        const uint32_t rprev = head + kW8Ref + 256u * (slot ^ 1u), rown = head + kW8Ref + 256u * slot;
        /* This slot's P (tile k - 2) has left both warpgroups' P V.  (The
         * other warpgroup's reads of this slot's reference and factors, in
         * its publish of tile k - 1, come before its arrival on
         * pfull(slot ^ 1), which this warpgroup waits for before it writes
         * them.) */
        if (k >= 2)
            mbar_wait(pfree(slot), (uint32_t)((k >> 1) - 1) & 1u);
        if (SC)
            put_vf(slot, scl, vd, live);
        float lt[16], ref[16];
        if (k >= 2) { /* against this slot's reference: that after tile k - 2 */
            load_ref(rown, false, ref);
            if (!jumps(s, ref)) {
                write_p<SC>(s, ref, slot, iv, lt);
                mbar_wait(pfull(slot ^ 1u), (uint32_t)((k - 1) >> 1) & 1u);
                /* tile k - 1 kept the reference: so does this tile, whose P
                 * stands (the slot already holds the reference) */
                if (lds32(head + kW8Changed + 4u * (slot ^ 1u)) == 0u) {
                    post_p(slot, false, lt);
                    return;
                }
            }
        }
        if (k > 0) {
            mbar_wait(pfull(slot ^ 1u), (uint32_t)((k - 1) >> 1) & 1u);
            take_factors(slot ^ 1u);
        }
        load_ref(rprev, k == 0, ref);
        const bool changed = jumps(s, ref);
        if (changed) {
            /* The tile's column maxima over the warpgroup; the new
             * reference, the factors for O and the sums. */
            const uint32_t cx = cmax() + 1024u * wg;
#pragma unroll
            for (int j = 0; j < 16; j++) {
                float mx = fmaxf(s[j >> 1][j & 1], s[j >> 1][(j & 1) + 2]);
#pragma unroll
                for (int x = 4; x < 32; x <<= 1)
                    mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, x));
                if (g == 0)
                    sts32(cx + 256u * w + 4u * col(j), __float_as_uint(mx));
            }
            bar_sync(kNbWg0 + wg, 128);
#pragma unroll
            for (int j = 0; j < 16; j++) {
                float m = lds_f32(cx + 4u * col(j));
#pragma unroll
                for (uint32_t x = 1; x < 4; x++)
                    m = fmaxf(m, lds_f32(cx + 256u * x + 4u * col(j)));
                const float nr = fmaxf(ref[j], m);
                const float alpha = ref[j] == ninf ? 0.0f : ex2(ref[j] - nr);
                ref[j] = nr;
                if (w == 0 && g == 0) {
                    sts32(rown + 4u * col(j), __float_as_uint(nr));
                    sts32(head + kW8Alpha + 256u * slot + 4u * col(j), __float_as_uint(alpha));
                }
            }
            bar_sync(kNbWg0 + wg, 128); /* the factors, for every thread */
            scale_sums(slot);
        } else {
            /* The reference after k - 1 is k's: into this slot (this
             * warpgroup read the old one before the barrier of jumps, the
             * other before its arrival on pfull for tile k - 1). */
            if (w == 0 && g == 0) {
#pragma unroll
                for (int j = 0; j < 16; j++)
                    sts32(rown + 4u * col(j), __float_as_uint(ref[j]));
            }
        }
        write_p<SC>(s, ref, slot, iv, lt);
        post_p(slot, changed, lt);
    }

    /* V's factors of this warpgroup's tile, by the thread that holds its
     * keys 16 w + g and + 8 (k-step w, pair g): block scale times the
     * key's 2^-e (vd), in f16 (below 2 in magnitude; a block below 2^-14
     * of its key's largest loses bits, as K's do), 0 past the length;
     * v_frags multiplies V in f16 by them (a multiply a pair). */
    MLA_DEV void put_vf(uint32_t slot, uint32_t scl, const float (&vd)[2], const bool (&live)[2]) const
    {
        const uint32_t vs = vshift(), r0 = 16u * w + g;
        for (uint32_t b = t; b < (512u >> vs); b += 4u) {
            const float f0 = live[0] ? v_scale(scl, r0, b << vs) * vd[0] : 0.0f;
            const float f1 = live[1] ? v_scale(scl, r0 + 8u, b << vs) * vd[1] : 0.0f;
            sts32(vf_word(slot, b, w, g), pack_f16x2(f0, f1));
        }
    }
};

} /* namespace hopper */
} /* namespace mla */

#endif /* MLA_HOPPER_WIDE8_SOFTMAX_CUH */
