/*
 * combine.cu - merges the split-KV partial results of the decode kernel:
 * per (request, query token, head) row, the partial outputs weighted by
 * exp2(lse_i - lse) where lse = log2 sum_i exp2(lse_i), written as bf16,
 * and the natural-log LSE.  One warp per row, 16 columns per lane.
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
    uint4 *o16 = (uint4 *)(out + 16u * lane);
    if (mx == ninf) { /* no split saw a key */
        o16[0] = make_uint4(0u, 0u, 0u, 0u);
        o16[1] = make_uint4(0u, 0u, 0u, 0u);
        if (lse && lane == 0)
            lse[lse_i] = __int_as_float(0x7f800000);
        return;
    }
    float sum = exp2f(v0 - mx) + exp2f(v1 - mx); /* exp2(-inf) = 0 */
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        sum += __shfl_xor_sync(0xffffffffu, sum, o);
    const float lse2 = mx + log2f(sum);

    float acc[16];
#pragma unroll
    for (int i = 0; i < 16; i++)
        acc[i] = 0.0f;
    const float *oacc = (const float *)(ws + p.ws_oaccum) + row0 * MLA_D_V + 16u * lane;
    for (int s = 0; s < ns; s++) {
        const float li = __shfl_sync(0xffffffffu, s < 32 ? v0 : v1, s & 31);
        const float wgt = exp2f(li - lse2);
        if (wgt == 0.0f)
            continue; /* also skips splits that saw no key (li = -inf) */
        const float4 *src = (const float4 *)(oacc + (int64_t)s * srow * MLA_D_V);
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const float4 x = src[i];
            acc[4 * i + 0] += wgt * x.x;
            acc[4 * i + 1] += wgt * x.y;
            acc[4 * i + 2] += wgt * x.z;
            acc[4 * i + 3] += wgt * x.w;
        }
    }
    o16[0] = make_uint4(mla::pack_bf16x2(acc[0], acc[1]), mla::pack_bf16x2(acc[2], acc[3]),
                        mla::pack_bf16x2(acc[4], acc[5]), mla::pack_bf16x2(acc[6], acc[7]));
    o16[1] = make_uint4(mla::pack_bf16x2(acc[8], acc[9]), mla::pack_bf16x2(acc[10], acc[11]),
                        mla::pack_bf16x2(acc[12], acc[13]), mla::pack_bf16x2(acc[14], acc[15]));
    if (lse && lane == 0)
        lse[lse_i] = lse2 * 0.69314718055994530942f;
}
