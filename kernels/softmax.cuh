/*
 * softmax.cuh - online softmax in the log2 domain for the two rows
 * (g and g + 8) one thread holds in the m16n8 accumulator layout.  Masked
 * scores are replaced by -inf with a select (never by arithmetic on what
 * the cache held), and a row that has seen no key yet keeps m = -inf
 * with exponent base 0, so no inf - inf is ever formed.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_SOFTMAX_CUH
#define MLA_SOFTMAX_CUH

#include "ptx.cuh"

namespace mla {

struct OnlineSoftmax {
    float m[2]; /* running max of scaled scores (log2 units), -inf if none */
    float l[2]; /* this thread's part of the running sum of exp2(s - m) */

    MLA_DEV void init()
    {
        m[0] = m[1] = -__int_as_float(0x7f800000);
        l[0] = l[1] = 0.0f;
    }

    /*
     * Step 1 of a tile: scales and masks the scores in place and returns
     * each row's maximum over this thread's quad (-inf if all masked).
     * key0: the key index of this thread's column 0 (tile start + 2t);
     * lim[r]: keys < lim are visible to row r.
     */
    template <int NT>
    MLA_DEV void tile_max(float (&s)[NT][4], float scale_log2, int key0, const int (&lim)[2],
                          float (&mx)[2]) const
    {
        const float ninf = -__int_as_float(0x7f800000);
        mx[0] = mx[1] = ninf;
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = e >> 1;
                const int j = key0 + nt * 8 + (e & 1);
                s[nt][e] = j < lim[r] ? s[nt][e] * scale_log2 : ninf;
                mx[r] = fmaxf(mx[r], s[nt][e]);
            }
        }
#pragma unroll
        for (int r = 0; r < 2; r++) {
            /* The 4 lanes of a quad hold the same row. */
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 1));
            mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], 2));
        }
    }

    /*
     * Step 2: given the tile's row maxima (over every column of the tile,
     * which may span several warps), turns the scores into probabilities
     * exp2(s - m_new) and returns the factors by which the accumulated O
     * rows must be multiplied.  l only sums this thread's columns.
     */
    template <int NT>
    MLA_DEV void tile_exp(float (&s)[NT][4], const float (&mx)[2], float (&alpha)[2])
    {
        const float ninf = -__int_as_float(0x7f800000);
        float base[2];
#pragma unroll
        for (int r = 0; r < 2; r++) {
            const float mnew = fmaxf(m[r], mx[r]);
            base[r] = mnew == ninf ? 0.0f : mnew;
            alpha[r] = ex2(m[r] - base[r]); /* 0 when m was -inf */
            m[r] = mnew;
        }
        float sum[2] = {0.0f, 0.0f};
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = e >> 1;
                s[nt][e] = ex2(s[nt][e] - base[r]); /* 0 for masked scores */
                sum[r] += s[nt][e];
            }
        }
        l[0] = l[0] * alpha[0] + sum[0];
        l[1] = l[1] * alpha[1] + sum[1];
    }

    /* Both steps, for a tile whose columns this warp holds entirely. */
    template <int NT>
    MLA_DEV void update(float (&s)[NT][4], float scale_log2, int key0, const int (&lim)[2],
                        float (&alpha)[2])
    {
        float mx[2];
        tile_max<NT>(s, scale_log2, key0, lim, mx);
        tile_exp<NT>(s, mx, alpha);
    }

    /* Full row sums (over the quad). */
    MLA_DEV void finish(float (&lsum)[2]) const
    {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float v = l[r];
            v += __shfl_xor_sync(0xffffffffu, v, 1);
            v += __shfl_xor_sync(0xffffffffu, v, 2);
            lsum[r] = v;
        }
    }
};

} /* namespace mla */

#endif /* MLA_SOFTMAX_CUH */
