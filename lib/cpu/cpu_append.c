/*
 * cpu_append.c - the CPU backend of mla_kv_append(): writes new latent
 * rows into the paged cache, quantized with the codec the GPU kernel uses
 * (kernels/common/fp8_codec.h), so both backends produce identical bytes.
 *
 * SPDX-License-Identifier: MIT
 */
#include <string.h>

#include "internal.h"
#include "fp8_codec.h"
#include "mla_params.h"

/*
 * Quantize channels [c0, c1) of one row to e4m3 at dst[c0..c1), sharing
 * one power-of-two block scale, which is returned (1 is used, and
 * returned, when with_block_scale is 0).
 */
static float quantize_block(const uint16_t *x, int c0, int c1, float kv_scale,
                            int with_block_scale, uint8_t *dst)
{
    float s = 1.0f;
    int c;
    if (with_block_scale) {
        float amax = 0.0f;
        for (c = c0; c < c1; c++)
            amax = mla_amax_accum(amax, mla_bf16_to_float(x[c]));
        s = mla_block_scale_pow2(amax, kv_scale);
    }
    for (c = c0; c < c1; c++)
        dst[c] = mla_e4m3_quantize(mla_bf16_to_float(x[c]), kv_scale, s);
    return s;
}

/* One row (576 bf16) into cache row `row` (slot * h_kv + kv head). */
static void write_row(const struct mla_shape *s, const struct mla_append_args *a, float kv_scale,
                      const uint16_t *x, int64_t row)
{
    int32_t fmt = s->kv_format;
    uint8_t *dst = (uint8_t *)a->kv + row * mla_row_bytes(fmt);
    int c0;

    if (fmt == MLA_FMT_BF16) {
        memcpy(dst, x, MLA_D_QK * sizeof(uint16_t));
    } else if (fmt == MLA_FMT_FP8_E4M3) {
        int32_t g = s->scale_block;
        if (g == 0) {
            quantize_block(x, 0, MLA_D_QK, kv_scale, 0, dst);
        } else {
            int32_t spr = (MLA_D_QK + g - 1) / g;
            float *bs = a->scales + row * spr;
            for (c0 = 0; c0 < MLA_D_QK; c0 += g) {
                int c1 = c0 + g < MLA_D_QK ? c0 + g : MLA_D_QK; /* last block may be short */
                bs[c0 / g] = quantize_block(x, c0, c1, kv_scale, 1, dst);
            }
        }
    } else { /* MLA_FMT_FP8_DS_MLA: 512 e4m3 | 4 fp32 scales | 64 bf16 RoPE */
        float bs[4];
        for (c0 = 0; c0 < MLA_D_NOPE; c0 += 128)
            bs[c0 / 128] = quantize_block(x, c0, c0 + 128, kv_scale, 1, dst);
        memcpy(dst + MLA_D_NOPE, bs, sizeof bs);
        memcpy(dst + MLA_D_NOPE + sizeof bs, x + MLA_D_NOPE, MLA_D_ROPE * sizeof(uint16_t));
    }
}

/* Whether a (non-padding) slot lies past the cache. */
static int past_cache(const struct mla_shape *s, const struct mla_append_args *a, int64_t slot)
{
    return slot / s->page_size >= a->num_pages;
}

mla_status_t mla__cpu_append(const struct mla_shape *s, int threads,
                             const struct mla_append_args *a)
{
    const uint16_t *latent = (const uint16_t *)a->latent;
    int32_t h_kv = s->num_kv_heads;
    float kv_scale = s->kv_format == MLA_FMT_BF16 ? 1.0f : (float)s->kv_scale;
    int64_t i;
    int32_t k;

    (void)threads; /* appends are a few rows per step: one thread is plenty */

    if (s->kv_format == MLA_FMT_FP8_E4M3 && s->scale_block && !a->scales)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                         "kv_block_scales is NULL but MLA_PARAM_SCALE_BLOCK_SIZE = %d",
                         (int)s->scale_block);
    /* All slots first, so that a bad one leaves the cache untouched. */
    for (i = 0; i < a->n; i++) {
        int64_t slot = a->slots[i];
        if (slot >= 0 && past_cache(s, a, slot))
            return mla__error(MLA_STATUS_OUT_OF_BOUNDS,
                             "slots[%lld] = %lld is past the cache (num_pages %lld * "
                             "MLA_PARAM_PAGE_SIZE %d = %lld slots)",
                             (long long)i, (long long)slot, (long long)a->num_pages,
                             (int)s->page_size, (long long)(a->num_pages * s->page_size));
    }

    for (i = 0; i < a->n; i++) {
        const int64_t slot = *(const volatile int64_t *)&a->slots[i]; /* one read */
        if (slot < 0)
            continue; /* padding */
        if (past_cache(s, a, slot))
            continue; /* changed since checked, by a thread racing this call: no write
                         outside the cache */
        for (k = 0; k < h_kv; k++)
            write_row(s, a, kv_scale, latent + (i * h_kv + k) * MLA_D_QK, slot * h_kv + k);
    }
    return MLA_STATUS_SUCCESS;
}
