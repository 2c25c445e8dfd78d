/* decode.c - argument validation and dispatch of mla_decode() and
 * mla_workspace_status().
 * SPDX-License-Identifier: MIT */
#include <stdint.h>

#include "internal.h"

#define ALIGNED(p, a) ((((uintptr_t)(p)) & ((uintptr_t)(a) - 1)) == 0)

static mla_status_t check_align(const void *p, unsigned a, const char *name)
{
    if (p && !ALIGNED(p, a))
        return mla__error(MLA_STATUS_MISALIGNED, "%s = %p is not %u-byte aligned", name, p, a);
    return MLA_STATUS_SUCCESS;
}

mla_status_t mla_decode(mla_plan_t *plan, const void *q, const void *kv_cache,
                        const float *kv_block_scales, int64_t num_pages,
                        const int32_t *block_table, int32_t max_pages_per_seq,
                        const int32_t *seq_lens, void *out, float *lse, void *workspace,
                        size_t workspace_size, struct CUstream_st *stream)
{
    mla__enter("mla_decode");
    if (!mla__plan_arg(plan))
        return MLA_STATUS_INVALID_ARGUMENT;
    mla_context_t *ctx = plan->ctx;
    mla_status_t st;

    const struct { const void *p; const char *name; } req[] = {
        {q, "q"}, {kv_cache, "kv_cache"}, {block_table, "block_table"},
        {seq_lens, "seq_lens"}, {out, "out"}, {workspace, "workspace"},
    };
    for (size_t i = 0; i < sizeof(req) / sizeof(req[0]); i++)
        if (!req[i].p)
            return mla__error(MLA_STATUS_INVALID_ARGUMENT, "%s is NULL", req[i].name);
    int need_scales = mla__scales_per_row(&plan->s) > 0;
    if (need_scales && !kv_block_scales)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "kv_block_scales is NULL but the plan's config has block scales "
                          "(MLA_PARAM_SCALE_BLOCK_SIZE = %d)",
                          plan->s.scale_block);
    if (!need_scales && kv_block_scales)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "kv_block_scales is not NULL but the plan's config has no block "
                          "scales");
    if (num_pages < 1)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT, "num_pages = %lld: want at least 1",
                          (long long)num_pages);
    if (max_pages_per_seq < 1)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "max_pages_per_seq = %d: want at least 1", max_pages_per_seq);
    /* The cache must be addressable with 64-bit byte offsets. */
    int64_t rows_per_page = (int64_t)plan->s.page_size * plan->s.num_kv_heads;
    if (num_pages > INT64_MAX / rows_per_page / 1152)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "num_pages = %lld is too large for 64-bit byte offsets",
                          (long long)num_pages);

    if ((st = check_align(q, 16, "q")) || (st = check_align(kv_cache, 16, "kv_cache")) ||
        (st = check_align(out, 16, "out")) || (st = check_align(workspace, 256, "workspace")) ||
        (st = check_align(block_table, 4, "block_table")) ||
        (st = check_align(seq_lens, 4, "seq_lens")) || (st = check_align(lse, 4, "lse")) ||
        (st = check_align(kv_block_scales, 4, "kv_block_scales")))
        return st;
    if (workspace_size < plan->workspace_bytes)
        return mla__error(MLA_STATUS_SIZE_MISMATCH,
                          "workspace_size = %zu: mla_plan_workspace_size() says %zu are needed",
                          workspace_size, plan->workspace_bytes);

    /* Every extent is known: what the call writes must not overlap what
     * it reads (the CPU workers would read request 0's LSE back as request
     * 1's length) or another output. */
    const struct mla_shape *sh = &plan->s;
    const uint64_t b = (uint64_t)plan->batch, rows = b * (uint64_t)sh->q_len * (uint64_t)sh->num_heads;
    const uint64_t cache_rows = (uint64_t)num_pages * (uint64_t)rows_per_page;
    const struct mla_buf outs[] = {
        {out, rows * MLA_D_V_BYTES, "out"},
        {lse, rows * sizeof(float), "lse"},
        {workspace, plan->workspace_bytes, "workspace"},
    };
    const struct mla_buf ins[] = {
        {q, rows * MLA_D_QK_BYTES, "q"},
        {kv_cache, cache_rows * (uint64_t)mla__row_bytes(sh), "kv_cache"},
        {kv_block_scales, cache_rows * (uint64_t)mla__scales_per_row(sh) * sizeof(float),
         "kv_block_scales"},
        {block_table, b * (uint64_t)max_pages_per_seq * sizeof(int32_t), "block_table"},
        {seq_lens, b * sizeof(int32_t), "seq_lens"},
    };
    if ((st = mla__check_buffers(outs, 3, ins, 5)))
        return st;

    struct mla_decode_args a = {
        .q = q, .kv = kv_cache, .scales = kv_block_scales, .num_pages = num_pages,
        .block_table = block_table, .max_pages_per_seq = max_pages_per_seq,
        .seq_lens = seq_lens, .out = out, .lse = lse, .workspace = workspace,
        .workspace_size = workspace_size, .stream = stream,
    };
    if (ctx->backend == MLA_BACKEND_CPU)
        return mla__cpu_decode(plan, &a);
    return mla__gpu_decode(plan, &a);
}

mla_status_t mla_workspace_status(const mla_plan_t *plan, const void *workspace,
                                  mla_status_t *device_status)
{
    mla__enter("mla_workspace_status");
    if (!mla__plan_arg(plan))
        return MLA_STATUS_INVALID_ARGUMENT;
    if (!workspace || !device_status)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT, "%s is NULL",
                          workspace ? "device_status" : "workspace");
    if (!ALIGNED(workspace, 256))
        return mla__error(MLA_STATUS_MISALIGNED, "workspace = %p is not 256-byte aligned",
                          workspace);
    if (plan->ctx->backend == MLA_BACKEND_CPU) {
        int32_t v = *(const int32_t *)workspace;
        *device_status = (mla_status_t)v;
        return MLA_STATUS_SUCCESS;
    }
    return mla__gpu_workspace_status(plan, workspace, device_status);
}
