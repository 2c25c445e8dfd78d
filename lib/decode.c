/* decode.c - argument validation and dispatch of mla_decode(),
 * mla_schedule(), mla_decode_scheduled() and mla_workspace_status().
 * SPDX-License-Identifier: MIT */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"
#include "mla_params.h"

#define ALIGNED(p, a) ((((uintptr_t)(p)) & ((uintptr_t)(a) - 1)) == 0)

/* The kernels read the header as 16-byte vectors (kernels/schedule.cuh). */
_Static_assert(offsetof(struct mla_ws_header, magic) == 4 &&
                   offsetof(struct mla_ws_header, plan_tag) == 8 &&
                   offsetof(struct mla_ws_header, num_pieces) == 12 &&
                   offsetof(struct mla_ws_header, block_table) == 16 &&
                   offsetof(struct mla_ws_header, num_pages) == 24 &&
                   offsetof(struct mla_ws_header, max_pages_per_seq) == 32 &&
                   offsetof(struct mla_ws_header, num_combine) == 36 &&
                   sizeof(struct mla_ws_header) <= MLA_WS_FLAGS_OFFSET &&
                   MLA_WS_FLAGS_OFFSET + 1 + MLA_SCHEDULE_MAX_CHECK_CTAS <= MLA_WS_HEADER_BYTES,
               "workspace header layout");

static int valid_plan(const mla_plan_t *plan)
{
    return plan && plan->magic == MLA_MAGIC_PLAN && plan->ctx &&
           plan->ctx->magic == MLA_MAGIC_CONTEXT;
}

static mla_status_t check_align(char *err, const char *fn, const void *p, unsigned a,
                                const char *name)
{
    if (p && !ALIGNED(p, a))
        return mla__fail(err, MLA_STATUS_MISALIGNED, "%s: %s is not %u-byte aligned", fn, name,
                         a);
    return MLA_STATUS_SUCCESS;
}

/* What every entry point takes: the block table and the cache's page
 * count (the decodes' cache itself is checked by check_tensors()), and the
 * workspace. */
static mla_status_t check_schedule_args(const mla_plan_t *plan, const char *fn,
                                        const struct mla_decode_args *a, int need_lens)
{
    char *err = plan->ctx->err;
    mla_status_t st;
    if (!a->block_table)
        return mla__fail(err, MLA_STATUS_INVALID_ARGUMENT, "%s: block_table is NULL", fn);
    if (need_lens && !a->seq_lens)
        return mla__fail(err, MLA_STATUS_INVALID_ARGUMENT, "%s: seq_lens is NULL", fn);
    if (!a->workspace)
        return mla__fail(err, MLA_STATUS_INVALID_ARGUMENT, "%s: workspace is NULL", fn);
    if (a->num_pages < 1)
        return mla__fail(err, MLA_STATUS_INVALID_ARGUMENT, "%s: num_pages %lld < 1", fn,
                         (long long)a->num_pages);
    if (a->max_pages_per_seq < 1)
        return mla__fail(err, MLA_STATUS_INVALID_ARGUMENT, "%s: max_pages_per_seq %d < 1", fn,
                         a->max_pages_per_seq);
    /* The cache must be addressable with 64-bit byte offsets. */
    int64_t rows_per_page = (int64_t)plan->s.page_size * plan->s.num_kv_heads;
    if (a->num_pages > INT64_MAX / rows_per_page / 1152)
        return mla__fail(err, MLA_STATUS_INVALID_ARGUMENT, "%s: num_pages %lld is too large",
                         fn, (long long)a->num_pages);
    if ((st = check_align(err, fn, a->workspace, 256, "workspace")) ||
        (st = check_align(err, fn, a->block_table, 4, "block_table")) ||
        (st = check_align(err, fn, a->seq_lens, 4, "seq_lens")))
        return st;
    if (a->workspace_size < plan->workspace_bytes)
        return mla__fail(err, MLA_STATUS_SIZE_MISMATCH,
                         "%s: workspace_size %zu < %zu needed (mla_plan_workspace_size)", fn,
                         a->workspace_size, plan->workspace_bytes);
    return MLA_STATUS_SUCCESS;
}

/* The tensors a decode reads and writes. */
static mla_status_t check_tensors(const mla_plan_t *plan, const char *fn,
                                  const struct mla_decode_args *a)
{
    char *err = plan->ctx->err;
    mla_status_t st;
    const struct { const void *p; const char *name; } req[] = {
        {a->q, "q"}, {a->kv, "kv_cache"}, {a->out, "out"},
    };
    for (size_t i = 0; i < sizeof(req) / sizeof(req[0]); i++)
        if (!req[i].p)
            return mla__fail(err, MLA_STATUS_INVALID_ARGUMENT, "%s: %s is NULL", fn,
                             req[i].name);
    int need_scales = mla__scales_per_row(&plan->s) > 0;
    if (need_scales && !a->scales)
        return mla__fail(err, MLA_STATUS_INVALID_ARGUMENT,
                         "%s: kv_block_scales is NULL but the config has block scales "
                         "(MLA_PARAM_SCALE_BLOCK_SIZE = %d)",
                         fn, plan->s.scale_block);
    if (!need_scales && a->scales)
        return mla__fail(err, MLA_STATUS_INVALID_ARGUMENT,
                         "%s: kv_block_scales given but the config has no block scales", fn);
    if ((st = check_align(err, fn, a->q, 16, "q")) ||
        (st = check_align(err, fn, a->kv, 16, "kv_cache")) ||
        (st = check_align(err, fn, a->out, 16, "out")) ||
        (st = check_align(err, fn, a->lse, 4, "lse")) ||
        (st = check_align(err, fn, a->scales, 4, "kv_block_scales")))
        return st;
    return MLA_STATUS_SUCCESS;
}

mla_status_t mla_decode(mla_plan_t *plan, const void *q, const void *kv_cache,
                        const float *kv_block_scales, int64_t num_pages,
                        const int32_t *block_table, int32_t max_pages_per_seq,
                        const int32_t *seq_lens, void *out, float *lse, void *workspace,
                        size_t workspace_size, struct CUstream_st *stream)
{
    if (!valid_plan(plan))
        return MLA_STATUS_INVALID_ARGUMENT;
    mla_context_t *ctx = plan->ctx;
    mla_status_t st;
    mla__clear(ctx->err);
    const struct mla_decode_args a = {
        .q = q, .kv = kv_cache, .scales = kv_block_scales, .num_pages = num_pages,
        .block_table = block_table, .max_pages_per_seq = max_pages_per_seq,
        .seq_lens = seq_lens, .out = out, .lse = lse, .workspace = workspace,
        .workspace_size = workspace_size, .stream = stream,
    };
    if ((st = check_tensors(plan, "mla_decode", &a)) ||
        (st = check_schedule_args(plan, "mla_decode", &a, 1)))
        return st;
    if (ctx->backend == MLA_BACKEND_CPU)
        return mla__cpu_decode(plan, &a, ctx->err);
    return mla__gpu_decode(plan, &a, MLA_GPU_STEP_SCHEDULE | MLA_GPU_STEP_DECODE);
}

mla_status_t mla_schedule(mla_plan_t *plan, int64_t num_pages, const int32_t *block_table,
                          int32_t max_pages_per_seq, const int32_t *seq_lens, void *workspace,
                          size_t workspace_size, struct CUstream_st *stream)
{
    if (!valid_plan(plan))
        return MLA_STATUS_INVALID_ARGUMENT;
    mla_context_t *ctx = plan->ctx;
    mla_status_t st;
    mla__clear(ctx->err);
    const struct mla_decode_args a = {
        .num_pages = num_pages, .block_table = block_table,
        .max_pages_per_seq = max_pages_per_seq, .seq_lens = seq_lens,
        .workspace = workspace, .workspace_size = workspace_size, .stream = stream,
    };
    if ((st = check_schedule_args(plan, "mla_schedule", &a, 1)))
        return st;
    if (ctx->backend == MLA_BACKEND_CPU)
        return mla__cpu_schedule(plan, &a, ctx->err);
    return mla__gpu_decode(plan, &a, MLA_GPU_STEP_SCHEDULE);
}

mla_status_t mla_decode_scheduled(mla_plan_t *plan, const void *q, const void *kv_cache,
                                  const float *kv_block_scales, int64_t num_pages,
                                  const int32_t *block_table, int32_t max_pages_per_seq,
                                  void *out, float *lse, void *workspace, size_t workspace_size,
                                  struct CUstream_st *stream)
{
    if (!valid_plan(plan))
        return MLA_STATUS_INVALID_ARGUMENT;
    mla_context_t *ctx = plan->ctx;
    mla_status_t st;
    mla__clear(ctx->err);
    const struct mla_decode_args a = {
        .q = q, .kv = kv_cache, .scales = kv_block_scales, .num_pages = num_pages,
        .block_table = block_table, .max_pages_per_seq = max_pages_per_seq,
        .out = out, .lse = lse, .workspace = workspace,
        .workspace_size = workspace_size, .stream = stream,
    };
    if ((st = check_tensors(plan, "mla_decode_scheduled", &a)) ||
        (st = check_schedule_args(plan, "mla_decode_scheduled", &a, 0)))
        return st;
    if (ctx->backend == MLA_BACKEND_CPU)
        return mla__cpu_decode_scheduled(plan, &a, ctx->err);
    return mla__gpu_decode(plan, &a, MLA_GPU_STEP_DECODE);
}

mla_status_t mla_workspace_status(const mla_plan_t *plan, const void *workspace,
                                  mla_status_t *device_status)
{
    if (!valid_plan(plan))
        return MLA_STATUS_INVALID_ARGUMENT;
    mla_context_t *ctx = plan->ctx;
    mla__clear(ctx->err);
    if (!workspace || !device_status)
        return mla__ctx_fail(ctx, MLA_STATUS_INVALID_ARGUMENT,
                             "mla_workspace_status: %s is NULL",
                             workspace ? "device_status" : "workspace");
    if (!ALIGNED(workspace, 256))
        return mla__ctx_fail(ctx, MLA_STATUS_MISALIGNED,
                             "mla_workspace_status: workspace is not 256-byte aligned");
    uint8_t buf[MLA_WS_HEADER_BYTES];
    struct mla_ws_header h;
    mla_status_t st = MLA_STATUS_SUCCESS;
    if (ctx->backend == MLA_BACKEND_CPU)
        memcpy(buf, workspace, sizeof(h));
    else
        st = mla__gpu_read_header(plan, workspace, buf);
    if (st != MLA_STATUS_SUCCESS)
        return st;
    memcpy(&h, buf, sizeof(h));
    if (h.magic != MLA_WS_MAGIC || h.plan_tag != plan->sched_tag)
        return mla__ctx_fail(ctx, MLA_STATUS_INVALID_ARGUMENT,
                             "mla_workspace_status: no mla_decode, mla_schedule or "
                             "mla_decode_scheduled of a plan of this layout has used this "
                             "workspace");
    if (h.status < 0 || h.status > (int32_t)MLA_STATUS_INTERNAL_ERROR)
        return mla__ctx_fail(ctx, MLA_STATUS_INTERNAL_ERROR,
                             "mla_workspace_status: status word holds %d", (int)h.status);
    /* The scheduler's block-table CTAs report in flag bytes (kernels/mla_params.h). */
    int flagged = 0;
    for (int i = 1; i < plan->sched_ctas; i++)
        flagged |= buf[MLA_WS_FLAGS_OFFSET + i];
    *device_status = h.status == 0 && flagged ? MLA_STATUS_OUT_OF_BOUNDS : (mla_status_t)h.status;
    return MLA_STATUS_SUCCESS;
}
