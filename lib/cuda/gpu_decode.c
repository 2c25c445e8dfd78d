/*
 * gpu_decode.c - queue a decode (schedule, decode, combine) or a KV append
 * on the caller's stream, and read a workspace's device-side status.
 * Nothing here allocates or synchronizes, except mla__gpu_workspace_status.
 *
 * SPDX-License-Identifier: MIT
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <string.h>

#include "gpu_internal.h"

/* Programmatic dependent launch (PDL) of the decode kernel behind
 * mla_schedule (or, with a schedule made earlier, behind whatever kernel
 * precedes the call), of mla_combine behind the decode kernel, and of
 * mla_schedule behind what precedes it: every kernel starts with
 * griddepcontrol.wait (kernels/common/mla_params.h), so the overlap only hides
 * launch latency. */
#define MLA_GPU_PDL_DECODE 1

#define MLA_APPEND_MAX_GRID_X 0x7fffffffLL

static CUresult launch(const struct mla_cuda_api *cu, CUfunction fn, const unsigned grid[3],
                       unsigned threads, unsigned smem, CUstream stream, int pdl, void *params)
{
    CUlaunchAttribute attr[1];
    CUlaunchConfig cfg;
    memset(&cfg, 0, sizeof(cfg));
    memset(attr, 0, sizeof(attr));
    cfg.gridDimX = grid[0];
    cfg.gridDimY = grid[1];
    cfg.gridDimZ = grid[2];
    cfg.blockDimX = threads;
    cfg.blockDimY = 1;
    cfg.blockDimZ = 1;
    cfg.sharedMemBytes = smem;
    cfg.hStream = stream;
    if (pdl) {
        attr[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
        attr[0].value.programmaticStreamSerializationAllowed = 1;
        cfg.attrs = attr;
        cfg.numAttrs = 1;
    }
    void *args[1] = {params};
    return cu->p_cuLaunchKernelEx(&cfg, fn, args, NULL);
}

static uint64_t dptr(const void *p)
{
    return (uint64_t)(uintptr_t)p;
}

_Static_assert(sizeof(CUtensorMap) == sizeof(struct mla_tensor_map),
               "struct mla_tensor_map must hold a CUtensorMap");

/* A BF16 view of the cache at kv, in the wgmma layout (SWIZZLE_128B),
 * every element stride 1.  L2 promotion to 128 bytes, one box row: with
 * 256 a 16-head BF16 decode streamed the cache 7 % slower (h16 b132
 * s8192 309 against 332 us, doc/performance.md). */
static CUresult encode_kv_map(const struct mla_cuda_api *cu, struct mla_tensor_map *map,
                              cuuint32_t rank, uint64_t kv, const cuuint64_t *dims,
                              const cuuint64_t *strides, const cuuint32_t *box)
{
    const cuuint32_t estr[4] = {1, 1, 1, 1};
    return cu->p_cuTensorMapEncodeTiled(
        (CUtensorMap *)(void *)map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, rank, (void *)(uintptr_t)kv,
        dims, strides, box, estr, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_128B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
}

/*
 * The launch parameters of an sm_90a variant for this call's buffers: the
 * BF16 kernels' tensor maps of the cache (the view and box
 * kernels/common/mla_params.h describes; the FP8 kernels copy their tiles
 * without one).  Returns 1 with hp's maps filled, 0 if this call's buffers
 * do not suit the sm_90a kernels (the portable kernel runs), or -1 with
 * *err set if the driver refused the encoding.  mla_decode() has checked
 * that num_pages >= 1 and that the cache is 16-byte aligned; the block
 * scales need only be 4-byte aligned there (the kernels copy a tile's as
 * one bulk copy, 16-byte aligned), and the kernels' row index is 32-bit.
 * Host-only work (no device call, about a microsecond).
 */
static int hopper_maps(const struct mla_cuda_api *cu, const struct mla_decode_params *p,
                       struct mla_hopper_params *hp, CUresult *err)
{
    const uint64_t rows = (uint64_t)p->num_pages * (uint64_t)p->page_size;
    if (rows > 0x7fffffffu)
        return 0;
    if (p->scales_per_row > 0 && (p->scales & 15u))
        return 0;
    memset(&hp->kv_map, 0, sizeof(hp->kv_map));
    memset(&hp->kv_map4, 0, sizeof(hp->kv_map4));
    if (p->kv_format != MLA_FMT_BF16)
        return 1;
    const uint64_t rb = (uint64_t)p->row_bytes;
    const cuuint64_t dims[3] = {(cuuint64_t)MLA_D_QK, (cuuint64_t)p->h_kv, rows};
    const cuuint64_t strides[2] = {rb, rb * (uint64_t)p->h_kv};
    const cuuint32_t box[3] = {64, 1, MLA_HOPPER_BLOCK_N};
    const cuuint64_t dims4[4] = {64, rows, (cuuint64_t)MLA_D_QK / 64, (cuuint64_t)p->h_kv};
    const cuuint64_t strides4[3] = {rb * (uint64_t)p->h_kv, 128, rb};
    const cuuint32_t box4[4] = {64, MLA_HOPPER_BLOCK_N, 4, 1};
    CUresult r = encode_kv_map(cu, &hp->kv_map, 3, p->kv, dims, strides, box);
    if (r == CUDA_SUCCESS)
        r = encode_kv_map(cu, &hp->kv_map4, 4, p->kv, dims4, strides4, box4);
    if (r != CUDA_SUCCESS) {
        *err = r;
        return -1;
    }
    return 1;
}

/* The launch parameters of one call: the plan's, with this call's
 * pointers. */
static struct mla_decode_params call_params(const struct mla_gpu_plan *gp,
                                            const struct mla_decode_args *a)
{
    struct mla_decode_params p = gp->p;
    p.q = dptr(a->q);
    p.kv = dptr(a->kv);
    p.scales = dptr(a->scales);
    p.block_table = dptr(a->block_table);
    p.seq_lens = dptr(a->seq_lens);
    p.out = dptr(a->out);
    p.lse = dptr(a->lse);
    p.workspace = dptr(a->workspace);
    p.num_pages = a->num_pages;
    p.max_pages_per_seq = a->max_pages_per_seq;
    return p;
}

/* mla_schedule's launch, behind whatever kernel precedes it (PDL: its
 * griddepcontrol.wait orders the lengths and block table the caller
 * wrote).  Context pushed by the caller. */
static CUresult queue_schedule(const struct mla_gpu_context *g, const struct mla_decode_params *p,
                               CUstream stream, const char **what)
{
    const unsigned grid[3] = {(unsigned)p->sched_ctas, 1, 1};
    *what = "cuLaunchKernelEx(mla_schedule_pieces)";
    return launch(g->cu, g->schedule.fn, grid, MLA_SCHEDULE_THREADS, 0, stream, 1, (void *)p);
}

/* The decode kernel and mla_combine, both behind what precedes them with
 * PDL: the plan's variant with its parameters in hp, or the portable
 * kernel when hp is NULL.  Context pushed by the caller. */
static CUresult queue_decode(mla_context_t *ctx, const struct mla_gpu_plan *gp,
                             const struct mla_decode_params *p,
                             const struct mla_hopper_params *hp, CUstream stream,
                             const char **what)
{
    struct mla_gpu_context *g = ctx->gpu;
    const struct mla_cuda_api *cu = g->cu;
    const struct mla_gpu_launch *l = hp ? &gp->run : &gp->portable;
    *what = hp ? "cuLaunchKernelEx(mla_hopper_decode)" : "cuLaunchKernelEx(mla_decode)";
    CUresult r = launch(cu, l->fn, gp->decode_grid, (unsigned)l->v->threads, l->smem, stream,
                        MLA_GPU_PDL_DECODE, hp ? (void *)hp : (void *)p);
    if (r == CUDA_SUCCESS) {
        *what = "cuLaunchKernelEx(mla_combine)";
        r = launch(cu, g->combine.fn, gp->combine_grid, MLA_COMBINE_THREADS, 0, stream, 1,
                   (void *)p);
    }
    return r;
}

mla_status_t mla__gpu_decode(mla_plan_t *plan, const struct mla_decode_args *a, int steps)
{
    mla_context_t *ctx = plan->ctx;
    struct mla_gpu_context *g = ctx->gpu;
    const struct mla_gpu_plan *gp = plan->gpu;
    if (!g || !gp)
        return mla__error(MLA_STATUS_INTERNAL_ERROR, "plan not initialized");
    const struct mla_decode_params p = call_params(gp, a);
    /* An sm_90a variant's parameters (BF16: the tensor map, encoded once),
     * before anything is queued; where the call's buffers do not suit it,
     * the call runs the portable kernel, unless MLA_XPARAM_KERNEL requires
     * the variant. */
    struct mla_hopper_params hp; /* 64-byte aligned: the tensor map inside must be */
    int use_maps = 0;
    if ((steps & MLA_GPU_STEP_DECODE) && gp->run.v->layout != MLA_LAYOUT_PORTABLE) {
        CUresult er = CUDA_SUCCESS;
        use_maps = hopper_maps(g->cu, &p, &hp, &er);
        if (use_maps < 0)
            return mla__cu_fail(MLA_STATUS_CUDA_ERROR, er, "cuTensorMapEncodeTiled");
        if (!use_maps && gp->required)
            return mla__error(MLA_STATUS_NOT_SUPPORTED,
                              "MLA_XPARAM_KERNEL requires %s, but this call needs the portable "
                              "kernel (kv_block_scales not 16-byte aligned, or num_pages * "
                              "page_size >= 2^31)",
                              gp->run.v->name);
        hp.p = p;
    }
    CUstream stream = (CUstream)a->stream;
    mla_status_t st = mla__gpu_push(ctx);
    if (st != MLA_STATUS_SUCCESS)
        return st;
    const char *what = "";
    CUresult r = CUDA_SUCCESS;
    if (steps & MLA_GPU_STEP_SCHEDULE)
        r = queue_schedule(g, &p, stream, &what);
    if (r == CUDA_SUCCESS && (steps & MLA_GPU_STEP_DECODE))
        r = queue_decode(ctx, gp, &p, use_maps ? &hp : NULL, stream, &what);
    mla__gpu_pop(ctx);
    if (r != CUDA_SUCCESS)
        return mla__cu_fail(MLA_STATUS_CUDA_ERROR, r, what);
    return MLA_STATUS_SUCCESS;
}

mla_status_t mla__gpu_append(mla_context_t *ctx, const struct mla_shape *s,
                             const struct mla_append_args *a)
{
    struct mla_gpu_context *g = ctx->gpu;
    if (!g)
        return mla__error(MLA_STATUS_INTERNAL_ERROR, "no CUDA context");
    if (a->n <= 0)
        return MLA_STATUS_SUCCESS;
    const struct mla_cuda_api *cu = g->cu;

    struct mla_append_params p;
    memset(&p, 0, sizeof(p));
    p.kv = dptr(a->kv);
    p.scales = dptr(a->scales);
    p.num_pages = a->num_pages;
    p.h_kv = s->num_kv_heads;
    p.page_size = s->page_size;
    p.kv_format = s->kv_format;
    p.row_bytes = mla__row_bytes(s);
    p.scale_block = s->kv_format == MLA_FMT_FP8_E4M3 ? s->scale_block : 0;
    p.scales_per_row = mla__scales_per_row(s);
    p.kv_scale = s->kv_format == MLA_FMT_BF16 ? 1.0f : (float)s->kv_scale;

    CUstream stream = (CUstream)a->stream;
    mla_status_t st = mla__gpu_push(ctx);
    if (st != MLA_STATUS_SUCCESS)
        return st;
    /* One launch per 2^31 - 1 rows (the grid's x limit). */
    const size_t latent_row = (size_t)s->num_kv_heads * MLA_D_QK * 2;
    CUresult r = CUDA_SUCCESS;
    for (int64_t done = 0; done < a->n && r == CUDA_SUCCESS;) {
        int64_t chunk = a->n - done;
        if (chunk > MLA_APPEND_MAX_GRID_X)
            chunk = MLA_APPEND_MAX_GRID_X;
        p.latent = dptr(a->latent) + (uint64_t)done * latent_row;
        p.slots = dptr(a->slots) + (uint64_t)done * sizeof(int64_t);
        p.n = chunk;
        const unsigned grid[3] = {(unsigned)chunk, (unsigned)s->num_kv_heads, 1};
        r = launch(cu, g->append.fn, grid, MLA_APPEND_THREADS, 0, stream, 0, &p);
        done += chunk;
    }
    mla__gpu_pop(ctx);
    if (r != CUDA_SUCCESS)
        return mla__cu_fail(MLA_STATUS_CUDA_ERROR, r, "cuLaunchKernelEx(mla_append)");
    return MLA_STATUS_SUCCESS;
}

/*
 * Synchronous: waits for all work queued in the context (cuCtxSynchronize,
 * so decodes on non-blocking streams are covered too), then copies the
 * workspace header (and the scheduler's flag bytes) back.  For tests and error paths, not per step; must
 * not be called while a stream of this context is being captured.
 */
mla_status_t mla__gpu_read_header(const mla_plan_t *plan, const void *workspace, void *buf)
{
    mla_context_t *ctx = plan->ctx;
    struct mla_gpu_context *g = ctx->gpu;
    if (!g)
        return mla__error(MLA_STATUS_INTERNAL_ERROR,
                             "no CUDA context");
    const struct mla_cuda_api *cu = g->cu;
    mla_status_t st = mla__gpu_push(ctx);
    if (st != MLA_STATUS_SUCCESS)
        return st;
    const char *what = "cuCtxSynchronize";
    CUresult r = cu->p_cuCtxSynchronize();
    if (r == CUDA_SUCCESS) {
        what = "cuMemcpyDtoH(workspace header)";
        r = cu->p_cuMemcpyDtoH(buf, (CUdeviceptr)(uintptr_t)workspace, MLA_WS_HEADER_BYTES);
    }
    mla__gpu_pop(ctx);
    if (r != CUDA_SUCCESS)
        return mla__cu_fail(MLA_STATUS_CUDA_ERROR, r, what);
    return MLA_STATUS_SUCCESS;
}
