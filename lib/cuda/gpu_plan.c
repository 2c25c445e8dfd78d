/*
 * gpu_plan.c - size the launches of the decode variant gpu_variants.c
 * selects for one shape on one device, bound the split-KV schedule, and
 * lay out the workspace.
 *
 * SPDX-License-Identifier: MIT
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdlib.h>
#include <string.h>

#include "gpu_internal.h"

#define MLA_MAX_GRID_YZ 65535

static size_t align256(size_t x)
{
    return (x + 255) & ~(size_t)255;
}

static int32_t ceil_div(int64_t a, int64_t b)
{
    return (int32_t)((a + b - 1) / b);
}

/*
 * What a schedule in a workspace depends on, hashed (FNV-1a): plans whose
 * schedules are laid out and cut alike share the tag, so a schedule made
 * with one serves the decodes of the others (layers of one shape), and a
 * decode refuses a schedule made for another layout.  Never 0.
 */
static uint32_t schedule_tag(const struct mla_decode_params *p)
{
    const int64_t v[] = {p->batch, p->q_len, p->h_q, p->max_seq_len, p->page_size, p->block_n, p->parts,
                         p->max_pieces, p->partial_slots, p->piece_cost, p->min_piece_tiles,
                         (int64_t)p->ws_lens, (int64_t)p->ws_clist,
                         (int64_t)p->ws_pieces,
                         (int64_t)p->ws_oaccum, (int64_t)p->ws_lseaccum, p->sched_ctas};
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        for (int k = 0; k < 8; k++) {
            h ^= (uint32_t)((uint64_t)v[i] >> (8 * k)) & 0xffu;
            h *= 16777619u;
        }
    return h ? h : 1u;
}

mla_status_t mla__gpu_plan_init(mla_plan_t *plan)
{
    mla_context_t *ctx = plan->ctx;
    struct mla_gpu_context *g = ctx->gpu;
    const struct mla_shape *s = &plan->s;
    mla_status_t st;

    if (!g)
        return mla__error(MLA_STATUS_INTERNAL_ERROR, "CUDA context not initialized");
    if (s->head_dim_qk != MLA_D_QK || s->head_dim_v != MLA_D_V)
        return mla__error(MLA_STATUS_NOT_SUPPORTED,
                          "MLA_PARAM_HEAD_DIM_QK = %d, MLA_PARAM_HEAD_DIM_V = %d: only %d "
                          "and %d are supported",
                          s->head_dim_qk, s->head_dim_v, MLA_D_QK, MLA_D_V);
    if (s->page_size < 1 || (s->page_size & (s->page_size - 1)))
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "MLA_PARAM_PAGE_SIZE = %d is not a power of two", s->page_size);

    /* The variant: every loaded one with the dynamic shared memory it may
     * use. */
    struct mla_select_in in = {
        .kv_format = s->kv_format,
        .scale_mode = mla_scale_mode(s->kv_format, mla__scales_per_row(s)),
        .scales_per_row = mla__scales_per_row(s),
        .num_heads = s->num_heads,
        .num_kv_heads = s->num_kv_heads,
        .q_len = s->q_len,
        .page_size = s->page_size,
        .block_n = s->block_n,
        .num_kv_stages = s->num_kv_stages,
        .kernel = s->kernel,
        .batch = plan->batch,
        .device = g->name,
        .smem_optin = g->smem_optin,
    };
    for (int v = 0; v < MLA_NUM_VARIANTS; v++)
        in.smem_limit[v] = g->decode[v].fn ? g->decode[v].max_dyn_smem : -1;
    struct mla_selection sel;
    char why[MLA_ERRMSG_LEN];
    if ((st = mla__select_variant(&in, &sel, why, sizeof(why))) != MLA_STATUS_SUCCESS)
        return mla__error(st, "%s", why);
    const struct mla_variant *var = &mla__variants[sel.variant];
    const struct mla_gpu_kernel *k = &g->decode[sel.variant];

    const int32_t batch = plan->batch;
    const int32_t heads_per_kv = s->num_heads / s->num_kv_heads;
    const int32_t rows = s->q_len * heads_per_kv;
    const int32_t m_blocks = ceil_div(rows, var->block_m);

    /* Thread blocks resident at once, for the scheduler's split choice. */
    int occ = 1;
    if ((st = mla__gpu_push(ctx)) != MLA_STATUS_SUCCESS)
        return st;
    CUresult r = g->cu->p_cuOccupancyMaxActiveBlocksPerMultiprocessor(&occ, k->fn, var->threads,
                                                                      sel.smem);
    mla__gpu_pop(ctx);
    if (r != CUDA_SUCCESS)
        return mla__cu_fail(MLA_STATUS_CUDA_ERROR, r,
                            "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    if (occ < 1)
        return mla__error(MLA_STATUS_NOT_SUPPORTED,
                          "the decode kernel %s (block_n %d, %d stages, %u bytes of shared "
                          "memory) cannot be resident on %s",
                          var->name, sel.block_n, sel.stages, sel.smem, g->name);

    /* The schedule (kernels/service/schedule.cu): pieces for greedy dispatch on
     * `parts` slots (groups of m_blocks x h_kv CTAs resident at once), at
     * most 2 waves' worth past one piece per request (gridDim.z <=
     * 65535), and room for 3 waves' worth of split pieces' partials. */
    const int64_t ctas_per_piece = (int64_t)m_blocks * s->num_kv_heads;
    int64_t parts = (int64_t)g->sm_count * occ / ctas_per_piece;
    if (parts > MLA_MAX_GRID_YZ - batch)
        parts = MLA_MAX_GRID_YZ - batch;
    if (parts < 1)
        parts = 1;
    int64_t max_pieces = batch + 2 * parts;
    if (max_pieces > MLA_MAX_GRID_YZ)
        max_pieces = MLA_MAX_GRID_YZ;
    const int64_t slots = 3 * parts;

    struct mla_gpu_plan *gp = calloc(1, sizeof(*gp));
    if (!gp)
        return mla__error(MLA_STATUS_OUT_OF_MEMORY, "out of memory");

    /* Workspace (kernels/common/mla_params.h): header, kept lengths, the
     * combine's list, the pieces, then the split pieces' partials (fp32 O
     * and log2-domain LSE). */
    const size_t prow = (size_t)slots * (size_t)s->q_len * (size_t)s->num_heads;
    size_t off = MLA_WS_HEADER_BYTES;
    const size_t ws_lens = off;
    off = align256(off + (size_t)batch * sizeof(int32_t));
    const size_t ws_clist = off;
    off = align256(off + (size_t)batch * 4 * sizeof(int32_t));
    const size_t ws_pieces = off;
    off = align256(off + (size_t)max_pieces * 4 * sizeof(int32_t));
    const size_t ws_oaccum = off;
    off = align256(off + prow * MLA_D_V * sizeof(float));
    const size_t ws_lseaccum = off;
    off = align256(off + prow * sizeof(float));
#ifdef MLA_KERNEL_TRACE
    const size_t ws_trace = off;
    off += MLA_TRACE_BYTES;
#else
    const size_t ws_trace = 0;
#endif

    struct mla_decode_params *p = &gp->p;
    memset(p, 0, sizeof(*p));
    p->ws_lens = ws_lens;
    p->ws_clist = ws_clist;
    p->ws_pieces = ws_pieces;
    p->ws_oaccum = ws_oaccum;
    p->ws_lseaccum = ws_lseaccum;
    p->ws_trace = ws_trace;
    p->batch = batch;
    p->q_len = s->q_len;
    p->h_q = s->num_heads;
    p->h_kv = s->num_kv_heads;
    p->heads_per_kv = heads_per_kv;
    p->rows = rows;
    p->block_m = var->block_m;
    p->m_blocks = m_blocks;
    p->page_size = s->page_size;
    int shift = 0;
    while ((1 << shift) < s->page_size)
        shift++;
    p->page_shift = shift;
    p->max_seq_len = plan->max_seq_len;
    p->kv_format = s->kv_format;
    p->row_bytes = mla__row_bytes(s);
    p->scale_block = s->kv_format == MLA_FMT_FP8_E4M3 ? s->scale_block : 0;
    p->scales_per_row = in.scales_per_row;
    p->causal = s->causal && s->q_len > 1;
    p->block_n = sel.block_n;
    p->num_stages = sel.stages;
    p->parts = (int32_t)parts;
    p->max_pieces = (int32_t)max_pieces;
    p->partial_slots = (int32_t)slots;
    p->piece_cost = MLA_PIECE_COST;
    p->min_piece_tiles = MLA_MIN_PIECE_TILES;
    /* The cutting CTA checks the block table of a small batch itself; more
     * CTAs a large one, a warp per request. */
    p->sched_ctas = batch <= MLA_SCHEDULE_THREADS / 32
                        ? 1
                        : 1 + ceil_div(batch, MLA_SCHEDULE_THREADS / 32);
    if (p->sched_ctas > 1 + MLA_SCHEDULE_MAX_CHECK_CTAS)
        p->sched_ctas = 1 + MLA_SCHEDULE_MAX_CHECK_CTAS;
    /* The combine's warps walk its rows grid-stride: as many CTAs as the
     * rows of every request need (4 warps a CTA), at most 8 an SM. */
    const int64_t crows = (int64_t)batch * s->q_len * s->num_heads * MLA_COMBINE_COL_BLOCKS;
    int64_t cctas = (crows + MLA_COMBINE_WARPS - 1) / MLA_COMBINE_WARPS;
    if (cctas > 8 * (int64_t)g->sm_count)
        cctas = 8 * (int64_t)g->sm_count;
    p->combine_ctas = (int32_t)(cctas > 0 ? cctas : 1);
    const double kv_scale = s->kv_format == MLA_FMT_BF16 ? 1.0 : s->kv_scale;
    p->score_scale_log2 = (float)(mla__softmax_scale(s) * kv_scale * 1.4426950408889634);
    p->out_scale = (float)kv_scale;
    p->plan_tag = schedule_tag(p);

    gp->run = (struct mla_gpu_launch){var, k->fn, sel.smem};
    gp->portable = (struct mla_gpu_launch){&mla__variants[sel.portable],
                                           g->decode[sel.portable].fn, sel.portable_smem};
    gp->required = sel.required;
    gp->decode_grid[0] = (unsigned)m_blocks;
    gp->decode_grid[1] = (unsigned)s->num_kv_heads;
    gp->decode_grid[2] = (unsigned)max_pieces;
    gp->combine_grid[0] = (unsigned)p->combine_ctas;
    gp->combine_grid[1] = 1;
    gp->combine_grid[2] = 1;

    plan->gpu = gp;
    plan->workspace_bytes = off;
    plan->sched_tag = p->plan_tag;
    plan->sched_ctas = p->sched_ctas;
    return MLA_STATUS_SUCCESS;
}

void mla__gpu_plan_fini(mla_plan_t *plan)
{
    free(plan->gpu);
    plan->gpu = NULL;
}
