/*
 * combine.cu - merges the split-KV partial results of the decode kernel:
 * per (request, query token, head) row, the partial outputs weighted by
 * exp2(lse_i - lse) where lse = log2 sum_i exp2(lse_i), written as bf16,
 * and the natural-log LSE.  One warp per row and 128-column block
 * (blockIdx.z), 4 columns per lane: small batches have few rows, and a
 * warp per whole row left most SMs idle while each warp walked its splits
 * one DRAM round trip at a time; the splits are now read 8 at a time.
 *
 * SPDX-License-Identifier: MIT
 */
#include "mla_params.h"
#include "ptx.cuh"

#define COMBINE_THREADS 128
#define COMBINE_HEADS (COMBINE_THREADS / 32)

extern "C" __global__ void __launch_bounds__(COMBINE_THREADS)
    mla_combine(const __grid_constant__ mla_decode_params p)
{
    /* Launched behind the decode kernel with PDL: wait until it has
     * finished and its partials are visible. */
    mla::griddep_wait();
    const uint8_t *ws = (const uint8_t *)p.workspace;
    if (*(const int32_t *)ws != 0)
        return;
    const int b = (int)blockIdx.x / p.q_len;
    const int qi = (int)blockIdx.x - b * p.q_len;
    const int h = (int)blockIdx.y * COMBINE_HEADS + (int)(threadIdx.x >> 5);
    const uint32_t lane = threadIdx.x & 31u;
    if (h >= p.h_q)
        return;
    const int ns = ((const int32_t *)(ws + p.ws_splits))[b];
    if (ns <= 1)
        return; /* the decode kernel wrote the final result */

    const float ninf = -__int_as_float(0x7f800000);
    const float *lacc = (const float *)(ws + p.ws_lseaccum);
    const int64_t srow = (int64_t)p.q_len * p.h_q;              /* rows per split */
    const int64_t row0 = ((int64_t)b * p.max_splits * p.q_len + qi) * p.h_q + h; /* split 0 */
    /* ns <= MLA_MAX_SPLITS = 64: two per lane. */
    const float v0 = (int)lane < ns ? lacc[row0 + lane * srow] : ninf;
    const float v1 = (int)lane + 32 < ns ? lacc[row0 + (lane + 32) * srow] : ninf;
    float mx = fmaxf(v0, v1);
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));

    uint16_t *out = (uint16_t *)p.out + ((((int64_t)b * p.q_len + qi) * p.h_q + h) * MLA_D_V);
    float *lse = (float *)p.lse;
    const int64_t lse_i = ((int64_t)b * p.h_q + h) * p.q_len + qi;
    const uint32_t col = 128u * blockIdx.z + 4u * lane;
    uint2 *o4 = (uint2 *)(out + col);
    if (mx == ninf) { /* no split saw a key */
        *o4 = make_uint2(0u, 0u);
        if (lse && lane == 0 && blockIdx.z == 0)
            lse[lse_i] = __int_as_float(0x7f800000);
        return;
    }
    float sum = exp2f(v0 - mx) + exp2f(v1 - mx); /* exp2(-inf) = 0 */
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
    const float lse2 = mx + log2f(sum);

    /* Splits that saw no key hold zeros (weight 0 too), so every split
     * below ns is read: 8 loads in flight per lane. */
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    const float *oacc = (const float *)(ws + p.ws_oaccum) + row0 * MLA_D_V + col;
    for (int s0 = 0; s0 < ns; s0 += 8) {
        float4 x[8];
        float wgt[8];
#pragma unroll
        for (int k = 0; k < 8; k++) {
            const int s = s0 + k;
            const float li = __shfl_sync(0xffffffffu, s < 32 ? v0 : v1, s & 31);
            wgt[k] = s < ns ? exp2f(li - lse2) : 0.0f;
            x[k] = s < ns ? *(const float4 *)(oacc + (int64_t)s * srow * MLA_D_V)
                          : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int k = 0; k < 8; k++) {
            acc.x = fmaf(wgt[k], x[k].x, acc.x);
            acc.y = fmaf(wgt[k], x[k].y, acc.y);
            acc.z = fmaf(wgt[k], x[k].z, acc.z);
            acc.w = fmaf(wgt[k], x[k].w, acc.w);
        }
    }
    *o4 = make_uint2(mla::pack_bf16x2(acc.x, acc.y), mla::pack_bf16x2(acc.z, acc.w));
    if (blockIdx.z != 0)
        return;
    if (lse && lane == 0)
        lse[lse_i] = lse2 * 0.69314718055994530942f;
}
