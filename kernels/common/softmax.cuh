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

/* A row's new running maximum from the tile's maximum mx: returns the
 * exponent base (0 while the row has seen no key) and sets alpha, the
 * factor for what was accumulated so far (0 when m was -inf). */
MLA_DEV float new_max(float &m, float mx, float &alpha)
{
    const float mnew = fmaxf(m, mx);
    const float base = mnew == -__int_as_float(0x7f800000) ? 0.0f : mnew;
    alpha = ex2(m - base);
    m = mnew;
    return base;
}

/* O rows *= their factors (f[0] row g, f[1] row g + 8) over a 64 x 256
 * accumulator in the m16n8 layout: what a new running maximum does to
 * what was accumulated. */
MLA_DEV void scale_rows(float (&o)[32][4], const float (&f)[2])
{
#pragma unroll
    for (int i = 0; i < 32; i++) {
        o[i][0] *= f[0];
        o[i][1] *= f[0];
        o[i][2] *= f[1];
        o[i][3] *= f[1];
    }
}

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
     * lim[r]: keys < lim are visible to row r.  SKIP: a tile visible to
     * both rows skips the mask (4 instructions a score instead of 1; the
     * wide FP8 kernel 1.8 % faster at h128), at the cost of registers
     * that the portable kernels do not have (bf16 n64 on sm_100a spills).
     */
    template <int NT, bool SKIP = false>
    MLA_DEV void tile_max(float (&s)[NT][4], float scale_log2, int key0, const int (&lim)[2],
                          float (&mx)[2]) const
    {
        static_assert((NT & (NT - 1)) == 0, "a power of two: the maxima reduce as a tree");
        const float ninf = -__int_as_float(0x7f800000);
        if (SKIP && key0 + 8 * (NT - 1) + 1 < min(lim[0], lim[1])) {
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    s[nt][e] *= scale_log2;
        } else {
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int j = key0 + nt * 8 + (e & 1);
                    s[nt][e] = j < lim[e >> 1] ? s[nt][e] * scale_log2 : ninf;
                }
        }
        /* A tree, not a chain of 2 NT dependent maxima per row. */
#pragma unroll
        for (int r = 0; r < 2; r++) {
            float a[NT];
#pragma unroll
            for (int nt = 0; nt < NT; nt++)
                a[nt] = fmaxf(s[nt][2 * r], s[nt][2 * r + 1]);
#pragma unroll
            for (int w = NT / 2; w >= 1; w /= 2)
#pragma unroll
                for (int i = 0; i < w; i++)
                    a[i] = fmaxf(a[i], a[i + w]);
            mx[r] = a[0];
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
     * rows must be multiplied.  l only sums this thread's columns (two
     * partial sums a row, half the dependent adds).
     */
    template <int NT>
    MLA_DEV void tile_exp(float (&s)[NT][4], const float (&mx)[2], float (&alpha)[2])
    {
        float base[2];
#pragma unroll
        for (int r = 0; r < 2; r++)
            base[r] = new_max(m[r], mx[r], alpha[r]);
        float sum[2][2] = {{0.0f, 0.0f}, {0.0f, 0.0f}};
#pragma unroll
        for (int nt = 0; nt < NT; nt++) {
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = e >> 1;
                s[nt][e] = ex2(s[nt][e] - base[r]); /* 0 for masked scores */
                sum[r][nt & 1] += s[nt][e];
            }
        }
        l[0] = l[0] * alpha[0] + (sum[0][0] + sum[0][1]);
        l[1] = l[1] * alpha[1] + (sum[1][0] + sum[1][1]);
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

/*
 * The same for a transposed score tile S^T (wgmma m64n16 with the keys as
 * M and up to 16 query rows as N): a thread holds 4 query columns, slot r
 * being column 8 (r >> 1) + 2 t + (r & 1), and 2 keys of each (its warp's
 * rows g and g + 8: s[j][e] is slot 2 j + (e & 1), key + 8 (e >> 1)).  A
 * column's 64 keys span the 8 lanes of equal t and the 4 warps of the
 * warpgroup; the cross-warp step is the caller's.
 */
struct ColumnSoftmax {
    float m[4]; /* running max per column (log2 units), -inf if none */
    float l[4]; /* this thread's part of the running sum */

    MLA_DEV void init()
    {
        for (int r = 0; r < 4; r++) {
            m[r] = -__int_as_float(0x7f800000);
            l[r] = 0.0f;
        }
    }

    /* Scales and masks s in place (key0: key index of this thread's row
     * g; lim[r]: keys < lim visible to slot r): log2 units, -inf where
     * masked. */
    MLA_DEV static void scale_mask(float (&s)[2][4], float scale_log2, int key0,
                                   const int (&lim)[4])
    {
        const float ninf = -__int_as_float(0x7f800000);
#pragma unroll
        for (int j = 0; j < 2; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = 2 * j + (e & 1);
                s[j][e] = key0 + 8 * (e >> 1) < lim[r] ? s[j][e] * scale_log2 : ninf;
            }
    }

    /* Each column's maximum of scaled scores over the warp's 16 keys. */
    MLA_DEV static void warp_max(const float (&s)[2][4], float (&mx)[4])
    {
#pragma unroll
        for (int r = 0; r < 4; r++)
            mx[r] = fmaxf(s[r >> 1][r & 1], s[r >> 1][(r & 1) + 2]);
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int x = 4; x < 32; x <<= 1)
                mx[r] = fmaxf(mx[r], __shfl_xor_sync(0xffffffffu, mx[r], x));
    }

    /* Both: scales and masks s, and returns each column's maximum over
     * the warp's 16 keys. */
    MLA_DEV void tile_max(float (&s)[2][4], float scale_log2, int key0, const int (&lim)[4],
                          float (&mx)[4]) const
    {
        scale_mask(s, scale_log2, key0, lim);
        warp_max(s, mx);
    }

    /*
     * The lazy step, for scaled scores: probabilities against the running
     * maxima as they stand, P = 2^(s - m) in pr, this thread's sums in lt,
     * and whether some score passed its column's maximum by more than
     * 2^kLazy (or the column has none yet): then the caller must agree on
     * new maxima (tile_exp on s, which this leaves as it was).  Otherwise
     * P stays at most 2^kLazy and commit_lazy adds lt: the maxima rise
     * only when a score would leave that range, so most tiles need no
     * exchange of maxima between the warps and no rescale of O.
     */
    static constexpr float kLazy = 8.0f, kLazyMax = 0x1p8f; /* 2^kLazy */
    MLA_DEV bool lazy_exp(const float (&s)[2][4], float (&pr)[2][4], float (&lt)[4]) const
    {
        const float ninf = -__int_as_float(0x7f800000);
        bool jump = false;
#pragma unroll
        for (int r = 0; r < 4; r++)
            lt[r] = 0.0f;
#pragma unroll
        for (int j = 0; j < 2; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = 2 * j + (e & 1);
                /* m = -inf: a live score jumps; masked ones give 0. */
                jump |= s[j][e] > m[r] + kLazy;
                pr[j][e] = ex2(s[j][e] - (m[r] == ninf ? 0.0f : m[r]));
                lt[r] += pr[j][e];
            }
        return jump;
    }
    MLA_DEV void commit_lazy(const float (&lt)[4])
    {
#pragma unroll
        for (int r = 0; r < 4; r++)
            l[r] += lt[r];
    }

    /* Given the columns' maxima over the whole tile: probabilities in
     * place and the factors for O. */
    MLA_DEV void tile_exp(float (&s)[2][4], const float (&mx)[4], float (&alpha)[4])
    {
        float base[4];
#pragma unroll
        for (int r = 0; r < 4; r++)
            base[r] = new_max(m[r], mx[r], alpha[r]);
#pragma unroll
        for (int r = 0; r < 4; r++)
            l[r] *= alpha[r];
#pragma unroll
        for (int j = 0; j < 2; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) {
                const int r = 2 * j + (e & 1);
                s[j][e] = ex2(s[j][e] - base[r]);
                l[r] += s[j][e];
            }
    }

    /* Column sums over the warp's 16 keys. */
    MLA_DEV void finish(float (&lsum)[4]) const
    {
#pragma unroll
        for (int r = 0; r < 4; r++) {
            float v = l[r];
#pragma unroll
            for (int x = 4; x < 32; x <<= 1)
                v += __shfl_xor_sync(0xffffffffu, v, x);
            lsum[r] = v;
        }
    }
};

} /* namespace mla */

#endif /* MLA_SOFTMAX_CUH */
