/*
 * epilogue.cuh - the end of a decode CTA: normalize one thread's part of
 * O (two rows, 32 column pairs of a 256-column half, in the 16x8
 * accumulator layout) and write it to out/lse when the request has a
 * single split, or to the split's fp32 partials for mla_combine.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_EPILOGUE_CUH
#define MLA_EPILOGUE_CUH

#include "mla_params.h"
#include "ptx.cuh"

namespace mla {

/*
 * o[nt][e]: rows row0 (e 0, 1) and row0 + 8 (e 2, 3) of the M tile,
 * columns 256 ch + 8 nt + 2 tq (+1); m: the rows' running maxima (log2
 * units), l: their full softmax sums.  Recomputes its indices from the
 * grid rather than keeping them live across the main loop (registers).
 */
MLA_DEV void write_output(const mla_decode_params &p, const float (&o)[32][4],
                          const float (&m)[2], const float (&l)[2], int row0, uint32_t ch,
                          uint32_t tq)
{
    const int b = (int)blockIdx.z / p.max_splits;
    const int split = (int)blockIdx.z - b * p.max_splits;
    const int kh = (int)blockIdx.y;
    const int rowc = (int)blockIdx.x * MLA_BLOCK_M + row0;
    const bool final_out =
        ((const int32_t *)((const uint8_t *)p.workspace + p.ws_splits))[b] == 1;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = rowc + 8 * r;
        if (row >= p.rows)
            continue;
        const int qi = row / p.heads_per_kv;
        const int h = kh * p.heads_per_kv + (row - qi * p.heads_per_kv);
        const float inv = l[r] > 0.0f ? p.out_scale / l[r] : 0.0f;
        const int64_t orow = ((int64_t)b * p.q_len + qi) * p.h_q + h;
        if (final_out) {
            uint32_t *dst = (uint32_t *)((uint16_t *)p.out + orow * MLA_D_V + ch * 256u + 2u * tq);
#pragma unroll
            for (int nt = 0; nt < 32; nt++)
                dst[nt * 4] = pack_bf16x2(o[nt][2 * r] * inv, o[nt][2 * r + 1] * inv);
            if (p.lse && ch == 0 && tq == 0) {
                float *lse = (float *)p.lse;
                lse[((int64_t)b * p.h_q + h) * p.q_len + qi] =
                    l[r] > 0.0f ? (m[r] + log2f(l[r])) * 0.69314718055994530942f
                                : __int_as_float(0x7f800000);
            }
        } else {
            const int64_t prow =
                (((int64_t)b * p.max_splits + split) * p.q_len + qi) * p.h_q + h;
            float2 *dst = (float2 *)((float *)((uint8_t *)p.workspace + p.ws_oaccum) +
                                     prow * MLA_D_V + ch * 256u + 2u * tq);
#pragma unroll
            for (int nt = 0; nt < 32; nt++)
                dst[nt * 4] = make_float2(o[nt][2 * r] * inv, o[nt][2 * r + 1] * inv);
            if (ch == 0 && tq == 0) {
                float *lacc = (float *)((uint8_t *)p.workspace + p.ws_lseaccum);
                lacc[prow] = l[r] > 0.0f ? m[r] + log2f(l[r]) : -__int_as_float(0x7f800000);
            }
        }
    }
}

} /* namespace mla */

#endif /* MLA_EPILOGUE_CUH */
