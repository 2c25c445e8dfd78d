/*
 * combine.cu - merges the split-KV partial results of the decode kernel:
 * per (request, query token, head) row, the partial outputs weighted by
 * exp2(lse_i - lse) where lse = log2 sum_i exp2(lse_i), written as bf16,
 * and the natural-log LSE; and the rows of empty requests (zeros, LSE
 * +inf), which no decode CTA covers, and of rows whose every score was
 * -inf (NaN).  Only the requests the schedule
 * listed (ws_clist) are visited: a grid over every request's rows cost
 * 10-17 us on the H200 (h128 b132) when no request was split.  Each warp
 * takes one row and 128-column block at a time, grid-stride, 4 columns a
 * lane: a warp per whole row left most SMs idle while each warp walked its
 * splits one DRAM round trip at a time; the splits are read 8 at a time.
 *
 * SPDX-License-Identifier: MIT
 */
#include "mla_params.h"
#include "ptx.cuh"
#include "schedule.cuh"

#define COMBINE_THREADS 128
#define COMBINE_WARPS (COMBINE_THREADS / 32)

namespace mla {

/* Row (b, qi, h), columns [128 cb, 128 cb + 128), of listed request
 * req = (b, piece count, first partial slot, 0). */
MLA_DEV void combine_row(const mla_decode_params &p, const uint8_t *ws, const int4 &req, int qi,
                         int h, uint32_t cb, uint32_t lane)
{
    const int b = req.x, ns = req.y;
    const float ninf = -__int_as_float(0x7f800000);
    uint16_t *out = (uint16_t *)p.out + ((((int64_t)b * p.q_len + qi) * p.h_q + h) * MLA_D_V);
    float *lse = (float *)p.lse;
    const int64_t lse_i = ((int64_t)b * p.h_q + h) * p.q_len + qi;
    const uint32_t col = 128u * cb + 4u * lane;
    uint2 *o4 = (uint2 *)(out + col);

    /* Log2-domain LSEs of the request's split pieces, rows `srow` apart:
     * the maximum, then the sum, 32 splits at a time.  NaN is kept (a
     * piece that saw a NaN score poisons the row, as it would unsplit). */
    const float *lacc = (const float *)(ws + p.ws_lseaccum);
    const int64_t srow = (int64_t)p.q_len * p.h_q;
    const int64_t row0 = ((int64_t)req.z * p.q_len + qi) * p.h_q + h; /* first slot */
    /* Pieces that saw no key hold zeros (weight 0 too), so every one is
     * read, 8 loads in flight a lane; the first 8 go out beside the LSEs'
     * loads, not after their reductions. */
    const float *oacc = (const float *)(ws + p.ws_oaccum) + row0 * MLA_D_V + col;
    float4 x[8];
    auto load8 = [&](int s0) {
#pragma unroll
        for (int k = 0; k < 8; k++)
            x[k] = s0 + k < ns ? *(const float4 *)(oacc + (int64_t)(s0 + k) * srow * MLA_D_V)
                               : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    };
    load8(0);
    float mx = ninf;
    bool nan = false;
    for (int s = (int)lane; s < ns; s += 32) {
        const float v = lacc[row0 + s * srow];
        nan |= v != v;
        mx = fmaxf(mx, v);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
    nan = __any_sync(0xffffffffu, nan);
    if (ns == 0 || (mx == ninf && !nan)) {
        /* No piece weighed a key: zeros and LSE +inf where the mask left
         * the row none; where it saw keys, all their scores were -inf,
         * and the row is NaN (mla.h). */
        const int len = ((const int32_t *)(ws + p.ws_lens))[b];
        const bool sees = ns != 0 && mla_visible_keys(p.causal, p.q_len, len, qi) > 0;
        *o4 = sees ? make_uint2(0x7fc07fc0u, 0x7fc07fc0u) : make_uint2(0u, 0u);
        if (lse && lane == 0 && cb == 0)
            lse[lse_i] = __int_as_float(sees ? 0x7fffffff : 0x7f800000);
        return;
    }
    if (nan)
        mx = __int_as_float(0x7fffffff);
    float sum = 0.0f;
    for (int s = (int)lane; s < ns; s += 32)
        sum += exp2f(lacc[row0 + s * srow] - mx); /* exp2(-inf) = 0 */
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
    const float lse2 = mx + log2f(sum);

    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    for (int s0 = 0; s0 < ns; s0 += 8) {
        if (s0)
            load8(s0);
        float wgt[8];
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int s = s0 + k;
            wgt[k] = s < ns ? exp2f(lacc[row0 + s * srow] - lse2) : 0.0f;
        }
#pragma unroll
        for (int k = 0; k < 8; k++) {
            acc.x = fmaf(wgt[k], x[k].x, acc.x);
            acc.y = fmaf(wgt[k], x[k].y, acc.y);
            acc.z = fmaf(wgt[k], x[k].z, acc.z);
            acc.w = fmaf(wgt[k], x[k].w, acc.w);
        }
    }
    *o4 = make_uint2(pack_bf16x2(acc.x, acc.y), pack_bf16x2(acc.z, acc.w));
    if (lse && lane == 0 && cb == 0)
        lse[lse_i] = lse2 * 0.69314718055994530942f;
}

} /* namespace mla */

extern "C" __global__ void __launch_bounds__(COMBINE_THREADS)
    mla_combine(const __grid_constant__ mla_decode_params p)
{
    /* Launched behind the decode kernel with PDL: wait until it has
     * finished and its partials are visible. */
    mla::griddep_wait();
    const uint8_t *ws = (const uint8_t *)p.workspace;
    /* Not this layout's schedule, or bad input (a decode handed other
     * block-table arguments than its schedule's recorded that as well):
     * the decode kernel ran nothing either.  The header, its flags and
     * the list's length together (the flags and the length are used only
     * if the head is this layout's; one round trip up to 120 requests,
     * whose flags are one 16-byte load), then the list: the chain before
     * a row's first partial is read is three round trips. */
    const int4 head = mla::header_head(p);
    const bool flags = mla::flagged(p);
    const int ncomb = mla::ld_volatile_s32(&mla::ws_header(p)->num_combine);
    if (!mla::layout_matches(p, head) || !mla::schedule_clean(head, flags))
        return;
    const int4 *clist = (const int4 *)(ws + p.ws_clist);
    const uint32_t lane = threadIdx.x & 31u;
    /* Rows of a listed request: q_len x h_q x MLA_COMBINE_COL_BLOCKS. */
    const long long per_req = (long long)p.q_len * p.h_q * MLA_COMBINE_COL_BLOCKS;
    const long long rows = per_req * ncomb;
    for (long long r = (long long)blockIdx.x * COMBINE_WARPS + (threadIdx.x >> 5); r < rows;
         r += (long long)gridDim.x * COMBINE_WARPS) {
        const int i = (int)(r / per_req);
        const int rest = (int)(r - (long long)i * per_req);
        const uint32_t cb = (uint32_t)rest % MLA_COMBINE_COL_BLOCKS;
        const int qh = rest / MLA_COMBINE_COL_BLOCKS;
        mla::combine_row(p, ws, clist[i], qh / p.h_q, qh % p.h_q, cb, lane);
    }
}
