/* decode.c - argument validation and dispatch of mla_decode(),
 * mla_schedule(), mla_decode_scheduled() and mla_workspace_status().
 * SPDX-License-Identifier: MIT */
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "internal.h"
#include "mla_params.h"

#define ALIGNED(p, a) ((((uintptr_t)(p)) & ((uintptr_t)(a) - 1)) == 0)

/* The kernels read the header as 16-byte vectors (kernels/common/schedule.cuh). */
_Static_assert(offsetof(struct mla_ws_header, magic) == 4 &&
                   offsetof(struct mla_ws_header, plan_tag) == 8 &&
                   offsetof(struct mla_ws_header, num_pieces) == 12 &&
                   offsetof(struct mla_ws_header, block_table) == 16 &&
                   offsetof(struct mla_ws_header, num_pages) == 24 &&
                   offsetof(struct mla_ws_header, max_pages_per_seq) == 32 &&
                   offsetof(struct mla_ws_header, num_combine) == 36 &&
                   offsetof(struct mla_ws_header, reused) == 40 &&
                   sizeof(struct mla_ws_header) <= MLA_WS_FLAGS_OFFSET &&
                   MLA_WS_FLAGS_OFFSET + 1 + MLA_SCHEDULE_MAX_CHECK_CTAS <= MLA_WS_HEADER_BYTES,
               "workspace header layout");

static mla_status_t check_align(const void *p, unsigned a, const char *name)
{
    if (p && !ALIGNED(p, a))
        return mla__error(MLA_STATUS_MISALIGNED, "%s = %p is not %u-byte aligned", name, p, a);
    return MLA_STATUS_SUCCESS;
}

/* What every entry point takes: the block table, the cache's page count,
 * the workspace, and (need_lens) the lengths. */
static mla_status_t check_schedule_args(const mla_plan_t *plan, const struct mla_decode_args *a,
                                        int need_lens)
{
    mla_status_t st;
    if (!a->block_table)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT, "block_table is NULL");
    if (need_lens && !a->seq_lens)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT, "seq_lens is NULL");
    if (!a->workspace)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT, "workspace is NULL");
    if (a->num_pages < 1)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT, "num_pages = %lld: want at least 1",
                          (long long)a->num_pages);
    if (a->max_pages_per_seq < 1)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "max_pages_per_seq = %d: want at least 1", a->max_pages_per_seq);
    /* The cache must be addressable with 64-bit byte offsets. */
    int64_t rows_per_page = (int64_t)plan->s.page_size * plan->s.num_kv_heads;
    if (a->num_pages > INT64_MAX / rows_per_page / 1152)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "num_pages = %lld is too large for 64-bit byte offsets",
                          (long long)a->num_pages);
    if ((st = check_align(a->workspace, 256, "workspace")) ||
        (st = check_align(a->block_table, 4, "block_table")) ||
        (st = check_align(a->seq_lens, 4, "seq_lens")))
        return st;
    if (a->workspace_size < plan->workspace_bytes)
        return mla__error(MLA_STATUS_SIZE_MISMATCH,
                          "workspace_size = %zu: mla_plan_workspace_size() says %zu are needed",
                          a->workspace_size, plan->workspace_bytes);
    return MLA_STATUS_SUCCESS;
}

/* The tensors a decode reads and writes. */
static mla_status_t check_tensors(const mla_plan_t *plan, const struct mla_decode_args *a)
{
    mla_status_t st;
    const struct { const void *p; const char *name; } req[] = {
        {a->q, "q"}, {a->kv, "kv_cache"}, {a->out, "out"},
    };
    for (size_t i = 0; i < sizeof(req) / sizeof(req[0]); i++)
        if (!req[i].p)
            return mla__error(MLA_STATUS_INVALID_ARGUMENT, "%s is NULL", req[i].name);
    int need_scales = mla__scales_per_row(&plan->s) > 0;
    if (need_scales && !a->scales)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "kv_block_scales is NULL but the plan's config has block scales "
                          "(MLA_PARAM_SCALE_BLOCK_SIZE = %d)",
                          plan->s.scale_block);
    if (!need_scales && a->scales)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "kv_block_scales is not NULL but the plan's config has no block "
                          "scales");
    if ((st = check_align(a->q, 16, "q")) || (st = check_align(a->kv, 16, "kv_cache")) ||
        (st = check_align(a->out, 16, "out")) || (st = check_align(a->lse, 4, "lse")) ||
        (st = check_align(a->scales, 4, "kv_block_scales")))
        return st;
    return MLA_STATUS_SUCCESS;
}

/* Every extent is known: what the call writes must not overlap what it
 * reads (the CPU workers would read request 0's LSE back as request 1's
 * length) or another output.  A schedule writes only the workspace. */
static mla_status_t check_overlaps(const mla_plan_t *plan, const struct mla_decode_args *a)
{
    const struct mla_shape *sh = &plan->s;
    const uint64_t b = (uint64_t)plan->batch, rows = b * (uint64_t)sh->q_len * (uint64_t)sh->num_heads;
    const uint64_t cache_rows =
        (uint64_t)a->num_pages * (uint64_t)sh->page_size * (uint64_t)sh->num_kv_heads;
    const struct mla_buf outs[] = {
        {a->out, rows * MLA_D_V_BYTES, "out"},
        {a->lse, rows * sizeof(float), "lse"},
        {a->workspace, plan->workspace_bytes, "workspace"},
    };
    const struct mla_buf ins[] = {
        {a->q, rows * MLA_D_QK_BYTES, "q"},
        {a->kv, cache_rows * (uint64_t)mla__row_bytes(sh), "kv_cache"},
        {a->scales, cache_rows * (uint64_t)mla__scales_per_row(sh) * sizeof(float),
         "kv_block_scales"},
        {a->block_table, b * (uint64_t)a->max_pages_per_seq * sizeof(int32_t), "block_table"},
        {a->seq_lens, b * sizeof(int32_t), "seq_lens"},
    };
    return mla__check_buffers(outs, 3, ins, 5);
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
    mla_status_t st;
    const struct mla_decode_args a = {
        .q = q, .kv = kv_cache, .scales = kv_block_scales, .num_pages = num_pages,
        .block_table = block_table, .max_pages_per_seq = max_pages_per_seq,
        .seq_lens = seq_lens, .out = out, .lse = lse, .workspace = workspace,
        .workspace_size = workspace_size, .stream = stream,
    };
    if ((st = check_tensors(plan, &a)) || (st = check_schedule_args(plan, &a, 1)) ||
        (st = check_overlaps(plan, &a)))
        return st;
    if (plan->ctx->backend == MLA_BACKEND_CPU)
        return mla__cpu_decode(plan, &a);
    return mla__gpu_decode(plan, &a, MLA_GPU_STEP_SCHEDULE | MLA_GPU_STEP_DECODE);
}

mla_status_t mla_schedule(mla_plan_t *plan, int64_t num_pages, const int32_t *block_table,
                          int32_t max_pages_per_seq, const int32_t *seq_lens, void *workspace,
                          size_t workspace_size, struct CUstream_st *stream)
{
    mla__enter("mla_schedule");
    if (!mla__plan_arg(plan))
        return MLA_STATUS_INVALID_ARGUMENT;
    mla_status_t st;
    const struct mla_decode_args a = {
        .num_pages = num_pages, .block_table = block_table,
        .max_pages_per_seq = max_pages_per_seq, .seq_lens = seq_lens,
        .workspace = workspace, .workspace_size = workspace_size, .stream = stream,
    };
    if ((st = check_schedule_args(plan, &a, 1)) || (st = check_overlaps(plan, &a)))
        return st;
    if (plan->ctx->backend == MLA_BACKEND_CPU)
        return mla__cpu_schedule(plan, &a);
    return mla__gpu_decode(plan, &a, MLA_GPU_STEP_SCHEDULE);
}

mla_status_t mla_decode_scheduled(mla_plan_t *plan, const void *q, const void *kv_cache,
                                  const float *kv_block_scales, int64_t num_pages,
                                  const int32_t *block_table, int32_t max_pages_per_seq,
                                  void *out, float *lse, void *workspace, size_t workspace_size,
                                  struct CUstream_st *stream)
{
    mla__enter("mla_decode_scheduled");
    if (!mla__plan_arg(plan))
        return MLA_STATUS_INVALID_ARGUMENT;
    mla_status_t st;
    const struct mla_decode_args a = {
        .q = q, .kv = kv_cache, .scales = kv_block_scales, .num_pages = num_pages,
        .block_table = block_table, .max_pages_per_seq = max_pages_per_seq,
        .out = out, .lse = lse, .workspace = workspace,
        .workspace_size = workspace_size, .stream = stream,
    };
    if ((st = check_tensors(plan, &a)) || (st = check_schedule_args(plan, &a, 0)) ||
        (st = check_overlaps(plan, &a)))
        return st;
    if (plan->ctx->backend == MLA_BACKEND_CPU)
        return mla__cpu_decode_scheduled(plan, &a);
    return mla__gpu_decode(plan, &a, MLA_GPU_STEP_DECODE);
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
    uint8_t buf[MLA_WS_HEADER_BYTES];
    struct mla_ws_header h;
    mla_status_t st = MLA_STATUS_SUCCESS;
    if (plan->ctx->backend == MLA_BACKEND_CPU)
        memcpy(buf, workspace, sizeof(h));
    else
        st = mla__gpu_read_header(plan, workspace, buf);
    if (st != MLA_STATUS_SUCCESS)
        return st;
    memcpy(&h, buf, sizeof(h));
    if (h.magic != MLA_WS_MAGIC || h.plan_tag != plan->sched_tag)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "workspace = %p: no mla_decode, mla_schedule or mla_decode_scheduled "
                          "of a plan of this layout has used it",
                          workspace);
    if (h.status < 0 || h.status > (int32_t)MLA_STATUS_INTERNAL_ERROR)
        return mla__error(MLA_STATUS_INTERNAL_ERROR, "the status word holds %d", (int)h.status);
    /* The scheduler's block-table CTAs report in flag bytes (kernels/common/mla_params.h). */
    int flagged = 0;
    for (int i = 1; i < plan->sched_ctas; i++)
        flagged |= buf[MLA_WS_FLAGS_OFFSET + i];
    *device_status = h.status == 0 && flagged ? MLA_STATUS_OUT_OF_BOUNDS : (mla_status_t)h.status;
    return MLA_STATUS_SUCCESS;
}
