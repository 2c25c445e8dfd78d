/* append.c - argument validation and dispatch of mla_kv_append().
 * SPDX-License-Identifier: MIT */
#include <stdint.h>

#include "internal.h"

#define ALIGNED(p, a) ((((uintptr_t)(p)) & ((uintptr_t)(a) - 1)) == 0)

mla_status_t mla_kv_append(mla_context_t *ctx, const mla_config_t *cfg, void *kv_cache,
                           float *kv_block_scales, int64_t num_pages, const void *latent,
                           const int64_t *slots, int64_t n, struct CUstream_st *stream)
{
    mla__enter("mla_kv_append");
    if (!mla__context_arg(ctx, "ctx"))
        return MLA_STATUS_INVALID_ARGUMENT;
    if (!mla__config_valid(cfg, "cfg"))
        return MLA_STATUS_INVALID_ARGUMENT;
    mla_status_t st = mla__shape_validate(&cfg->s);
    if (st != MLA_STATUS_SUCCESS)
        return st;
    if (n < 0)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT, "n = %lld: want at least 0",
                          (long long)n);
    if (num_pages < 1)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT, "num_pages = %lld: want at least 1",
                          (long long)num_pages);
    int64_t rows_per_page = (int64_t)cfg->s.page_size * cfg->s.num_kv_heads;
    if (num_pages > INT64_MAX / rows_per_page / 1152)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "num_pages = %lld is too large for 64-bit byte offsets",
                          (long long)num_pages);
    if (!kv_cache)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT, "kv_cache is NULL");
    if (n > 0 && (!latent || !slots))
        return mla__error(MLA_STATUS_INVALID_ARGUMENT, "%s is NULL with n = %lld",
                          latent ? "slots" : "latent", (long long)n);
    int need_scales = mla__scales_per_row(&cfg->s) > 0;
    if (need_scales && !kv_block_scales)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "kv_block_scales is NULL but cfg has block scales "
                          "(MLA_PARAM_SCALE_BLOCK_SIZE = %d)",
                          cfg->s.scale_block);
    if (!need_scales && kv_block_scales)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "kv_block_scales is not NULL but cfg has no block scales");
    if (!ALIGNED(kv_cache, 16) || (latent && !ALIGNED(latent, 16)) ||
        (slots && !ALIGNED(slots, 8)) || (kv_block_scales && !ALIGNED(kv_block_scales, 4)))
        return mla__error(MLA_STATUS_MISALIGNED,
                          "kv_cache and latent need 16-byte, slots 8-byte, kv_block_scales "
                          "4-byte alignment (kv_cache %p, latent %p, slots %p, "
                          "kv_block_scales %p)",
                          kv_cache, latent, (const void *)slots, (void *)kv_block_scales);
    if (n == 0)
        return MLA_STATUS_SUCCESS;
    /* The cache and its scales are written: no input may share them. */
    const uint64_t cache_rows = (uint64_t)num_pages * (uint64_t)rows_per_page;
    const uint64_t un = (uint64_t)n;
    if (un > UINT64_MAX / ((uint64_t)cfg->s.num_kv_heads * MLA_D_QK_BYTES))
        return mla__error(MLA_STATUS_INVALID_ARGUMENT, "n = %lld is too large", (long long)n);
    const struct mla_buf outs[] = {
        {kv_cache, cache_rows * (uint64_t)mla__row_bytes(&cfg->s), "kv_cache"},
        {kv_block_scales,
         cache_rows * (uint64_t)mla__scales_per_row(&cfg->s) * sizeof(float), "kv_block_scales"},
    };
    const struct mla_buf ins[] = {
        {latent, un * (uint64_t)cfg->s.num_kv_heads * MLA_D_QK_BYTES, "latent"},
        {slots, un * sizeof(int64_t), "slots"},
    };
    if ((st = mla__check_buffers(outs, 2, ins, 2)))
        return st;

    struct mla_append_args a = {
        .kv = kv_cache, .scales = kv_block_scales, .num_pages = num_pages,
        .latent = latent, .slots = slots, .n = n, .stream = stream,
    };
    if (ctx->backend == MLA_BACKEND_CPU)
        return mla__cpu_append(&cfg->s, ctx->cpu_threads, &a);
    return mla__gpu_append(ctx, &cfg->s, &a);
}
