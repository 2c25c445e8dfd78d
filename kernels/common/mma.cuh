/*
 * mma.cuh - the two products of one KV tile for one MMA warp, with
 * mma.sync m16n8k16 (bf16 in, fp32 accumulate) and ldmatrix fragment
 * loads from padded BF16 rows (MLA_SMEM_ROW_BF16 bytes apart):
 *   S[16 x BN]  = Q[16 rows x 576] K[BN x 576]^T
 *   O[16 x 256] += P[16 x BN] V[BN x 256]  (V = K[:, col0 .. col0 + 255])
 *
 * Accumulator layout of a 16x8 tile (g = lane / 4, t = lane % 4):
 *   d[0], d[1] = row g, columns 2t, 2t + 1; d[2], d[3] = row g + 8, same
 *   columns.  P's A fragments are built from S's accumulators in
 *   registers (no shared-memory round trip).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_MMA_CUH
#define MLA_MMA_CUH

#include "mla_params.h"
#include "ptx.cuh"

namespace mla {

/* Lane address offsets (bytes) inside a 16-row block, per operand. */

/* A from Q (row-major): lanes 0..15 give rows 0..15 at k 0, lanes 16..31
 * rows 0..15 at k 8 -> a0..a3 in mma order. */
MLA_DEV uint32_t frag_a_offset(uint32_t lane)
{
    return (lane & 15u) * MLA_SMEM_ROW_BF16 + (lane >> 4) * 16u;
}

/* B from K rows (n-major, "col"): matrices (n 0-7, k 0-7), (n 0-7, k 8-15),
 * (n 8-15, k 0-7), (n 8-15, k 8-15) -> b0, b1 of n-tile 0, b0, b1 of
 * n-tile 1. */
MLA_DEV uint32_t frag_bk_offset(uint32_t lane)
{
    return ((lane & 7u) + ((lane >> 4) << 3)) * MLA_SMEM_ROW_BF16 + ((lane >> 3) & 1u) * 16u;
}

/* B from V rows (k-major, "row", loaded transposed): matrices (k 0-7, n
 * 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15) -> b0, b1 of
 * n-tile 0, b0, b1 of n-tile 1. */
MLA_DEV uint32_t frag_bv_offset(uint32_t lane)
{
    return ((lane & 7u) + (((lane >> 3) & 1u) << 3)) * MLA_SMEM_ROW_BF16 + (lane >> 4) * 16u;
}

/* S += Q K^T over dims [16 KS0, 16 KS1). */
template <int NT, int KS0, int KS1>
MLA_DEV void mma_qk_steps(float (&s)[NT][4], uint32_t q, uint32_t k)
{
#pragma unroll 4
    for (int ks = KS0; ks < KS1; ks++) {
        uint32_t a0, a1, a2, a3;
        ldmatrix_x4(q + ks * 32, a0, a1, a2, a3);
#pragma unroll
        for (int np = 0; np < NT / 2; np++) {
            uint32_t b0, b1, b2, b3;
            ldmatrix_x4(k + np * 16 * MLA_SMEM_ROW_BF16 + ks * 32, b0, b1, b2, b3);
            mma_bf16(s[2 * np], a0, a1, a2, a3, b0, b1);
            mma_bf16(s[2 * np + 1], a0, a1, a2, a3, b2, b3);
        }
    }
}

/*
 * S = Q K^T over the 576 dims.  q: shared address of this warp's first Q
 * row plus frag_a_offset(lane); k: the stage's first row plus
 * frag_bk_offset(lane).  With ROPE_SCALED, S = q_nope.k_nope + rope_factor
 * * q_rope.k_rope: the RoPE dims are summed first, scaled in fp32, then
 * the nope dims are accumulated on top.
 */
template <int NT, bool ROPE_SCALED>
MLA_DEV void mma_qk(float (&s)[NT][4], uint32_t q, uint32_t k, float rope_factor)
{
#pragma unroll
    for (int i = 0; i < NT; i++)
        s[i][0] = s[i][1] = s[i][2] = s[i][3] = 0.0f;
    if (ROPE_SCALED) {
        mma_qk_steps<NT, MLA_D_NOPE / 16, MLA_D_QK / 16>(s, q, k);
#pragma unroll
        for (int i = 0; i < NT; i++) {
            s[i][0] *= rope_factor;
            s[i][1] *= rope_factor;
            s[i][2] *= rope_factor;
            s[i][3] *= rope_factor;
        }
        mma_qk_steps<NT, 0, MLA_D_NOPE / 16>(s, q, k);
    } else {
        mma_qk_steps<NT, 0, MLA_D_QK / 16>(s, q, k);
    }
}

/*
 * O += P V.  p: A fragments of P (bf16x2), [k-step][4]; v: the stage's
 * first row plus this warp's column offset (bytes) plus
 * frag_bv_offset(lane).
 */
template <int KS>
MLA_DEV void mma_pv(float (&o)[32][4], const uint32_t (&p)[KS][4], uint32_t v)
{
#pragma unroll
    for (int kk = 0; kk < KS; kk++) {
#pragma unroll
        for (int dp = 0; dp < 16; dp++) {
            uint32_t b0, b1, b2, b3;
            ldmatrix_x4_trans(v + kk * 16 * MLA_SMEM_ROW_BF16 + dp * 32, b0, b1, b2, b3);
            mma_bf16(o[2 * dp], p[kk][0], p[kk][1], p[kk][2], p[kk][3], b0, b1);
            mma_bf16(o[2 * dp + 1], p[kk][0], p[kk][1], p[kk][2], p[kk][3], b2, b3);
        }
    }
}

/* P's A fragments for k-step kk from S n-tiles 2kk, 2kk+1 (probabilities). */
template <int NT>
MLA_DEV void p_to_frags(const float (&s)[NT][4], uint32_t (&p)[NT / 2][4])
{
#pragma unroll
    for (int kk = 0; kk < NT / 2; kk++) {
        p[kk][0] = pack_bf16x2(s[2 * kk][0], s[2 * kk][1]);         /* row g, k 2t..   */
        p[kk][1] = pack_bf16x2(s[2 * kk][2], s[2 * kk][3]);         /* row g+8, k 2t.. */
        p[kk][2] = pack_bf16x2(s[2 * kk + 1][0], s[2 * kk + 1][1]); /* row g, k 2t+8.. */
        p[kk][3] = pack_bf16x2(s[2 * kk + 1][2], s[2 * kk + 1][3]); /* row g+8, k 2t+8 */
    }
}

} /* namespace mla */

#endif /* MLA_MMA_CUH */
