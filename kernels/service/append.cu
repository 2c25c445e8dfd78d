/*
 * append.cu - writes new latent rows into the paged KV cache, quantized
 * with the shared codec (fp8_codec.h) so that the bytes equal the CPU
 * backend's: one CTA per (row, KV head).
 *
 * SPDX-License-Identifier: MIT
 */
#include "mla_params.h"
#include "fp8_codec.h"

#define APPEND_THREADS 64
#define APPEND_PER_THREAD (MLA_D_QK / APPEND_THREADS) /* 9 channels, strided */

extern "C" __global__ void __launch_bounds__(APPEND_THREADS)
    mla_append(const __grid_constant__ mla_append_params p)
{
    /* Block amax as fp32 bits: |x| >= 0 orders like its bit pattern, so
     * an integer max is the exact, order-independent float max. */
    __shared__ uint32_t amax_bits[MLA_D_QK / 32];

    const int64_t i = blockIdx.x;
    const int k = (int)blockIdx.y;
    const int t = (int)threadIdx.x;
    const int64_t slot = ((const int64_t *)p.slots)[i];
    if (slot < 0 || slot >= p.num_pages * p.page_size)
        return; /* padding, or past the cache */
    const int64_t row = slot * p.h_kv + k;
    const uint16_t *x = (const uint16_t *)p.latent + (i * p.h_kv + k) * MLA_D_QK;
    uint8_t *dst = (uint8_t *)p.kv + row * p.row_bytes;

    if (p.kv_format == MLA_FMT_BF16) {
        const uint4 *src = (const uint4 *)x;
        uint4 *d = (uint4 *)dst;
        for (int c = t; c < MLA_D_QK * 2 / 16; c += APPEND_THREADS)
            d[c] = src[c];
        return;
    }

    /* Channel c = t + 64 j: coalesced loads and byte stores. */
    float v[APPEND_PER_THREAD];
#pragma unroll
    for (int j = 0; j < APPEND_PER_THREAD; j++)
        v[j] = mla_bf16_to_float(x[t + APPEND_THREADS * j]);

    const bool ds = p.kv_format == MLA_FMT_FP8_DS_MLA;
    /* Scale block of a channel: DS_MLA nope in 128s (RoPE unscaled), E4M3
     * in scale_block (0: one unit scale for the row). */
    const int g = ds ? 128 : p.scale_block;
    const int nblk = ds ? MLA_D_NOPE / 128 : g ? p.scales_per_row : 0;
    if (nblk) {
        if (t < nblk)
            amax_bits[t] = 0u;
        __syncthreads();
#pragma unroll
        for (int j = 0; j < APPEND_PER_THREAD; j++) {
            const int c = t + APPEND_THREADS * j;
            if (ds && c >= MLA_D_NOPE)
                continue;
            /* |x| as bits, 0 for NaN and Inf (compared as integers, so
             * subnormals count whatever the flush-to-zero mode). */
            const uint32_t a = mla_f32_bits(mla_amax_accum(0.0f, v[j]));
            if (a != 0u)
                atomicMax(&amax_bits[c / g], a);
        }
        __syncthreads();
    }

#pragma unroll
    for (int j = 0; j < APPEND_PER_THREAD; j++) {
        const int c = t + APPEND_THREADS * j;
        if (ds && c >= MLA_D_NOPE) {
            /* RoPE as bf16 after the 512 e4m3 and the 4 scales. */
            ((uint16_t *)(dst + MLA_D_NOPE + 16))[c - MLA_D_NOPE] = x[c];
            continue;
        }
        const float s =
            nblk ? mla_block_scale_pow2(mla_f32_from_bits(amax_bits[c / g]), p.kv_scale) : 1.0f;
        dst[c] = mla_e4m3_quantize(v[j], p.kv_scale, s);
    }
    if (t < nblk) {
        const float s = mla_block_scale_pow2(mla_f32_from_bits(amax_bits[t]), p.kv_scale);
        if (ds)
            ((float *)(dst + MLA_D_NOPE))[t] = s;
        else
            ((float *)p.scales)[row * p.scales_per_row + t] = s;
    }
}
