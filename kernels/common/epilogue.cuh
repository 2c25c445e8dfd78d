/*
 * epilogue.cuh - the end of a decode CTA: normalize O and write it to
 * out/lse when the request has a single split, or to the split's fp32
 * partials for mla_combine; from a thread's part of O in the 16x8
 * accumulator layout (write_output) or from rows staged in shared memory
 * (write_staged_rows).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_EPILOGUE_CUH
#define MLA_EPILOGUE_CUH

#include "mla_params.h"
#include "ptx.cuh"
#include "schedule.cuh"

namespace mla {

/* Where the rows of this CTA go: its request's out/lse when its piece is
 * the request's only one, else the piece's slot of the fp32 partials;
 * from the CTA's piece as it was read at its start (no loads at the end). */
struct OutTarget {
    int base; /* the request when final_out, else the partial slot */
    int len;  /* the request's keys */
    bool final_out;

    MLA_DEV explicit OutTarget(const CtaWork &w)
        : base(w.slot < 0 ? w.b : w.slot), len(w.len), final_out(w.slot < 0)
    {
    }

    /* Whether query token qi of a final_out row sees any key: the row
     * then weighed at least one key, and a zero sum means that every
     * score it saw was -inf (mla.h: the row is NaN), not an empty mask.
     * A split piece's rows leave that to mla_combine. */
    MLA_DEV bool sees_keys(const mla_decode_params &p, int qi) const
    {
        return final_out && mla_visible_keys(p.causal, p.q_len, len, qi) > 0;
    }

    /* Row index into out ([b][qi][h]) or the partials ([slot][qi][h]) of
     * packed row `row` (< p.rows). */
    MLA_DEV int64_t index(const mla_decode_params &p, int row, int &qi, int &h) const
    {
        qi = row / p.heads_per_kv;
        h = (int)blockIdx.y * p.heads_per_kv + (row - qi * p.heads_per_kv);
        return ((int64_t)base * p.q_len + qi) * p.h_q + h;
    }

    /* The row's LSE from its log2-domain max m and full sum l (0: no key,
     * or only -inf scores; NaN, from a NaN or infinite score, stays NaN:
     * mla.h). */
    MLA_DEV void write_lse(const mla_decode_params &p, int row, float m, float l) const
    {
        int qi, h;
        const int64_t i = index(p, row, qi, h);
        if (final_out) {
            if (p.lse)
                ((float *)p.lse)[((int64_t)base * p.h_q + h) * p.q_len + qi] =
                    l != 0.0f         ? (m + log2f(l)) * 0.69314718055994530942f
                    : sees_keys(p, qi) ? __int_as_float(0x7fffffff)
                                       : __int_as_float(0x7f800000);
        } else {
            ((float *)((uint8_t *)p.workspace + p.ws_lseaccum))[i] =
                l != 0.0f ? m + log2f(l) : -__int_as_float(0x7f800000);
        }
    }

    MLA_DEV uint16_t *out_row(const mla_decode_params &p, int64_t i) const
    {
        return (uint16_t *)p.out + i * MLA_D_V;
    }
    MLA_DEV float *partial_row(const mla_decode_params &p, int64_t i) const
    {
        return (float *)((uint8_t *)p.workspace + p.ws_oaccum) + i * MLA_D_V;
    }

    /* The factor of packed row `row` for its full softmax sum l: the
     * output scale over l; for l == 0, 0 (no key: zeros) or NaN (only
     * -inf scores, see sees_keys). */
    MLA_DEV float inv_sum(const mla_decode_params &p, int row, float l) const
    {
        return l != 0.0f                                 ? p.out_scale / l
               : sees_keys(p, row / p.heads_per_kv) ? __int_as_float(0x7fffffff)
                                                         : 0.0f;
    }
};

/*
 * o[nt][e]: rows row0 (e 0, 1) and row0 + 8 (e 2, 3) of the M tile,
 * columns 256 ch + 8 nt + 2 tq (+1); m: the rows' running maxima (log2
 * units), l: their full softmax sums.
 */
MLA_DEV void write_output(const mla_decode_params &p, const CtaWork &w, const float (&o)[32][4],
                          const float (&m)[2], const float (&l)[2], int row0, uint32_t ch,
                          uint32_t tq)
{
    const OutTarget out(w);
    const int rowc = (int)blockIdx.x * p.block_m + row0;
#pragma unroll
    for (int r = 0; r < 2; r++) {
        const int row = rowc + 8 * r;
        if (row >= p.rows)
            continue;
        int qi, h;
        const int64_t i = out.index(p, row, qi, h);
        const float inv = out.inv_sum(p, row, l[r]);
        if (out.final_out) {
            uint32_t *dst = (uint32_t *)(out.out_row(p, i) + ch * 256u + 2u * tq);
#pragma unroll
            for (int nt = 0; nt < 32; nt++)
                dst[nt * 4] = pack_bf16x2(o[nt][2 * r] * inv, o[nt][2 * r + 1] * inv);
        } else {
            float2 *dst = (float2 *)(out.partial_row(p, i) + ch * 256u + 2u * tq);
#pragma unroll
            for (int nt = 0; nt < 32; nt++)
                dst[nt * 4] = make_float2(o[nt][2 * r] * inv, o[nt][2 * r + 1] * inv);
        }
        if (ch == 0 && tq == 0)
            out.write_lse(p, row, m[r], l[r]);
    }
}

/*
 * Normalized fp32 rows staged in shared memory (row row0 + n of the M
 * tile at st + n * stride, 512 floats) to out or the partials, by
 * `nthreads` (a multiple of 128) threads with 16-byte reads, each thread
 * the same 16 bytes of every (nthreads / 128)-th row, kUnroll rows'
 * loads in flight; LSE is the caller's (write_lse).  The wide FP8 and
 * narrow BF16 ends roll the loop (kUnroll 1: code run once a CTA is
 * fetched cold, doc/performance.md); the narrow FP8 kernels keep 4.
 */
template <int kUnroll = 4>
MLA_DEV void write_staged_rows(const mla_decode_params &p, const OutTarget &out, uint32_t st,
                               uint32_t stride, int nrows, uint32_t tid, uint32_t nthreads,
                               int row0 = 0)
{
    const int rowc = (int)blockIdx.x * p.block_m + row0;
    const uint32_t c4 = tid & 127u;
    const int step = (int)(nthreads >> 7);
#pragma unroll(kUnroll)
    for (int n = (int)(tid >> 7); n < nrows; n += step) {
        int qi, h;
        const int64_t i = out.index(p, rowc + n, qi, h);
        const uint4 v = lds128(st + (uint32_t)n * stride + 16u * c4);
        if (out.final_out) {
            *(uint2 *)(out.out_row(p, i) + 4u * c4) =
                make_uint2(pack_bf16x2(__uint_as_float(v.x), __uint_as_float(v.y)),
                           pack_bf16x2(__uint_as_float(v.z), __uint_as_float(v.w)));
        } else {
            *(uint4 *)(out.partial_row(p, i) + 4u * c4) = v;
        }
    }
}

} /* namespace mla */

#endif /* MLA_EPILOGUE_CUH */
