/*
 * gpu_plan.c - choose the decode kernel, its tiling and split-KV bound for
 * one shape on one device, and lay out the workspace.
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

/* Most stages that fit the kernel's dynamic shared memory, capped at
 * MLA_MAX_STAGES; 0 if not even one does. */
static int max_fitting_stages(const struct mla_gpu_kernel *k, int32_t fmt, int32_t bn,
                              int32_t spr)
{
    int best = 0;
    for (int s = 1; s <= MLA_MAX_STAGES; s++)
        if (mla_decode_smem_bytes(fmt, bn, s, spr) <= (uint32_t)k->max_dyn_smem)
            best = s;
    return best;
}

/* Pick (block_n, stages) from the overrides in the shape, or automatically:
 * block_n 64 when it fits, else 32, with the deepest ring that fits the
 * device (on sm_90/sm_100: 2 stages at block_n 64, 4 at 32, see
 * mla_decode_auto_stages()).  NOT_SUPPORTED with a message when nothing
 * fits. */
static mla_status_t choose_tiling(mla_context_t *ctx, const struct mla_shape *s, int32_t spr,
                                  int32_t *bn_out, int32_t *stages_out)
{
    struct mla_gpu_context *g = ctx->gpu;
    const int fi = mla__gpu_fmt_index(s->kv_format);
    static const char *const fnames[] = {"BF16", "FP8_E4M3", "FP8_DS_MLA"};
    if (fi < 0)
        return mla__error(MLA_STATUS_NOT_SUPPORTED, "MLA_PARAM_KV_FORMAT = %d has no kernel",
                          s->kv_format);
    const int32_t fmt = s->kv_format;
    const int lo = 1; /* the kernels accept 1..MLA_MAX_STAGES stages */
    const int32_t cand[2] = {64, 32};

    for (int c = 0; c < 2; c++) {
        const int32_t bn = cand[c];
        if (s->block_n && s->block_n != bn)
            continue;
        const struct mla_gpu_kernel *k = &g->decode[fi][mla__gpu_bn_index(bn)];
        if (!k->fn) {
            if (s->block_n)
                return mla__error(MLA_STATUS_NOT_SUPPORTED,
                                  "MLA_PARAM_BLOCK_N = %d for %s is not in this build", bn,
                                  fnames[fi]);
            continue;
        }
        const int hi = max_fitting_stages(k, fmt, bn, spr);
        if (s->num_kv_stages) {
            const int st = s->num_kv_stages;
            if (st >= lo && st <= MLA_MAX_STAGES &&
                mla_decode_smem_bytes(fmt, bn, st, spr) <= (uint32_t)k->max_dyn_smem) {
                *bn_out = bn;
                *stages_out = st;
                return MLA_STATUS_SUCCESS;
            }
            if (s->block_n || c == 1)
                return mla__error(MLA_STATUS_NOT_SUPPORTED,
                    "MLA_PARAM_NUM_KV_STAGES = %d with MLA_PARAM_BLOCK_N = %d for %s needs %u "
                    "bytes of shared memory; %s allows %d (stages %d..%d accepted)",
                    st, bn, fnames[fi], mla_decode_smem_bytes(fmt, bn, st, spr), g->name,
                    k->max_dyn_smem, lo, MLA_MAX_STAGES);
            continue;
        }
        if (hi >= lo) {
            *bn_out = bn;
            *stages_out = hi;
            return MLA_STATUS_SUCCESS;
        }
        if (s->block_n)
            return mla__error(MLA_STATUS_NOT_SUPPORTED,
                              "MLA_PARAM_BLOCK_N = %d for %s needs %u bytes of shared "
                              "memory for %d stages; %s allows %d",
                                 bn, fnames[fi], mla_decode_smem_bytes(fmt, bn, lo, spr), lo,
                                 g->name, k->max_dyn_smem);
    }
    return mla__error(MLA_STATUS_NOT_SUPPORTED,
                         "no decode kernel for %s fits %s (%d bytes of shared "
                         "memory per block)",
                         fnames[fi], g->name, g->smem_optin);
}

/*
 * Whether the sm_90a kernel serves this shape: it needs pages of at least 64
 * rows (a tile is one TMA box per 64 columns), one KV head when E4M3 has
 * block scales (the tile's scales are then one contiguous copy), and the
 * portable n64 kernel with 2 stages as the fallback for calls whose
 * pointers it cannot take.  The block_n and stages hints play no part.
 * Returns why not, or NULL.
 */
static const char *hopper_refusal(const struct mla_gpu_context *g, const struct mla_shape *s,
                                  int32_t spr)
{
    const int fi = mla__gpu_fmt_index(s->kv_format);
    if (fi < 0 || !g->hopper[fi].fn)
        return "the device is not sm_90a or the build has no sm_90a kernel";
    if (s->page_size < MLA_HOPPER_BLOCK_N)
        return "pages of fewer than 64 rows";
    if (s->kv_format == MLA_FMT_FP8_E4M3 && spr > 0 && s->num_kv_heads != 1)
        return "E4M3 block scales with more than one KV head";
    const struct mla_gpu_kernel *v1 = &g->decode[fi][mla__gpu_bn_index(MLA_HOPPER_BLOCK_N)];
    if (!v1->fn || mla_decode_smem_bytes(s->kv_format, MLA_HOPPER_BLOCK_N, MLA_HOPPER_STAGES,
                                         spr) > (uint32_t)v1->max_dyn_smem)
        return "no portable block_n 64 kernel to fall back on";
    return NULL;
}

/* Requests x KV heads from which the narrow FP8 kernel is taken by
 * default: it streams tiles faster than the wide one but a CTA with few
 * tiles finishes later (H200, h16 s4096, E4M3 /128 and DS_MLA: wide 1.10x
 * faster at 1 request and 1.03x at 4, narrow 1.04x faster at 8, 1.2x at
 * 12 and 16; bench/NOTES.md). */
#define MLA_NARROW8_MIN_SEQS 8

/*
 * The sm_90a kernel for this shape, if any: the narrow one when the packed
 * rows per KV head (q_len x heads per KV head) fit its M tiles of 16 rows
 * (one; two for DS_MLA, and for E4M3 without block scales or with 128-dim
 * ones), the image has it for this format and (FP8) the batch has at
 * least MLA_NARROW8_MIN_SEQS sequences of KV heads, else the wide one,
 * for E4M3 with a multiple of 128 rows per KV head in its 2-CTA pair
 * form (*pair set), which converts each tile once for two 64-row M tiles
 * and feeds the seesaw consumers (H200, h128 b132 s8192: /128 808
 * against 844 us, unscaled 778 against 834; b64 s4096 223 against 233).
 * DS_MLA pairs (with the lockstep consumers) measured 4 % slower: only
 * with MLA_XKERNEL_HOPPER_PAIR.
 */
static mla_status_t choose_hopper(mla_context_t *ctx, const struct mla_shape *s, int32_t spr,
                                  int32_t batch, const struct mla_gpu_kernel **out,
                                  unsigned *smem, int *pair)
{
    struct mla_gpu_context *g = ctx->gpu;
    const int32_t choice = s->kernel;
    *out = NULL;
    *smem = 0;
    *pair = 0;
    if (choice == MLA_XKERNEL_PORTABLE)
        return MLA_STATUS_SUCCESS;
    const char *why = hopper_refusal(g, s, spr);
    const int32_t rows = s->q_len * (s->num_heads / s->num_kv_heads);
    const struct mla_gpu_kernel *narrow = &g->hopper_narrow[s->kv_format];
    /* The narrow kernels take M tiles of 16 rows: BF16 one, FP8 up to two
     * (two MTP tokens at 16 heads, or 32 heads).  By default a second tile
     * only where each tile costs less than half the wide kernel's time at
     * 32 rows: E4M3 without block scales or with 128-dim ones, and DS_MLA
     * (H200, b132 s8192: /128 352 us narrow against 429 wide, none 341
     * against 427, DS_MLA 351 against 415); the 32/64-dim ones take
     * 1.3-1.7x the /128 time a tile (bench/NOTES.md). */
    const int32_t narrow_rows = s->kv_format == MLA_FMT_BF16 ? MLA_NARROW_ROWS : 2 * MLA_NARROW_ROWS;
    const int two_tiles = s->kv_format == MLA_FMT_FP8_DS_MLA ||
                          (s->kv_format == MLA_FMT_FP8_E4M3 && (spr == 0 || spr == 5));
    const int32_t auto_rows = two_tiles ? narrow_rows : MLA_NARROW_ROWS;
    if (!why && choice == MLA_XKERNEL_HOPPER_NARROW && rows > narrow_rows)
        why = s->kv_format == MLA_FMT_BF16 ? "more than 16 query rows per KV head"
                                           : "more than 32 query rows per KV head";
    if (!why && choice == MLA_XKERNEL_HOPPER_NARROW && !narrow->fn)
        why = "no narrow kernel for this format in the image";
    const int heads_per_kv = s->num_heads / s->num_kv_heads;
    const int pair_fits = g->hopper_pair[s->kv_format].fn && heads_per_kv % (2 * MLA_BLOCK_M) == 0;
    if (!why && choice == MLA_XKERNEL_HOPPER_PAIR && !pair_fits)
        why = s->kv_format == MLA_FMT_BF16 ? "the pair kernels take FP8 caches only"
                                           : "query heads per KV head not a multiple of 128";
    if (why && choice != MLA_XKERNEL_AUTO)
        return mla__error(MLA_STATUS_NOT_SUPPORTED,
                          "MLA_XPARAM_KERNEL = %d, but the sm_90a kernel does not serve this "
                          "shape: %s",
                          choice, why);
    if (why)
        return MLA_STATUS_SUCCESS;
    int take_narrow =
        narrow->fn && rows <= (choice == MLA_XKERNEL_HOPPER_NARROW ? narrow_rows : auto_rows);
    if (choice == MLA_XKERNEL_HOPPER_WIDE || choice == MLA_XKERNEL_HOPPER_PAIR)
        take_narrow = 0;
    else if (choice != MLA_XKERNEL_HOPPER_NARROW && s->kv_format != MLA_FMT_BF16 &&
             (int64_t)batch * s->num_kv_heads < MLA_NARROW8_MIN_SEQS)
        take_narrow = 0;
    if (take_narrow) {
        *out = narrow;
        *smem = mla_narrow_smem_bytes(s->kv_format);
    } else if (choice == MLA_XKERNEL_HOPPER_PAIR ||
               (pair_fits && choice != MLA_XKERNEL_HOPPER_WIDE &&
                s->kv_format == MLA_FMT_FP8_E4M3)) {
        *out = &g->hopper_pair[s->kv_format];
        *smem = MLA_HOPPER_SMEM_BYTES;
        *pair = 1;
    } else {
        *out = &g->hopper[s->kv_format];
        *smem = MLA_HOPPER_SMEM_BYTES;
    }
    return MLA_STATUS_SUCCESS;
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
                         (int64_t)p->ws_lens, (int64_t)p->ws_reqs, (int64_t)p->ws_clist,
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

    const int32_t spr = mla__scales_per_row(s);
    int32_t bn = MLA_HOPPER_BLOCK_N, stages = MLA_HOPPER_STAGES;
    const struct mla_gpu_kernel *hopper = NULL;
    unsigned hopper_smem = 0;
    int pair = 0;
    if ((st = choose_hopper(ctx, s, spr, plan->batch, &hopper, &hopper_smem, &pair)) !=
        MLA_STATUS_SUCCESS)
        return st;
    /* The block_n and stages hints steer the portable kernel only. */
    if (!hopper && (st = choose_tiling(ctx, s, spr, &bn, &stages)) != MLA_STATUS_SUCCESS)
        return st;
    const struct mla_gpu_kernel *k = &g->decode[s->kv_format][mla__gpu_bn_index(bn)];
    const uint32_t smem = mla_decode_smem_bytes(s->kv_format, bn, stages, spr);

    const int32_t batch = plan->batch;
    const int32_t heads_per_kv = s->num_heads / s->num_kv_heads;
    const int32_t rows = s->q_len * heads_per_kv;
    const int32_t block_m =
        hopper == &g->hopper_narrow[s->kv_format] ? MLA_NARROW_ROWS : MLA_BLOCK_M;
    const int32_t m_blocks = ceil_div(rows, block_m);

    /* CTAs resident at once, for the scheduler's split choice. */
    int occ = 1;
    if ((st = mla__gpu_push(ctx)) != MLA_STATUS_SUCCESS)
        return st;
    const char *what = "cuOccupancyMaxActiveBlocksPerMultiprocessor";
    CUresult r = g->cu->p_cuOccupancyMaxActiveBlocksPerMultiprocessor(
        &occ, hopper ? hopper->fn : k->fn, MLA_DECODE_THREADS,
        hopper ? hopper_smem : smem);
    /* Pairs: the two CTAs of a cluster sit in one GPC, so fewer may be
     * resident than SMs x occupancy. */
    int target = g->sm_count * occ;
    if (r == CUDA_SUCCESS && pair) {
        CUlaunchConfig cfg;
        int clusters = 0;
        memset(&cfg, 0, sizeof(cfg));
        cfg.gridDimX = 2;
        cfg.gridDimY = cfg.gridDimZ = 1;
        cfg.blockDimX = MLA_DECODE_THREADS;
        cfg.blockDimY = cfg.blockDimZ = 1;
        cfg.sharedMemBytes = hopper_smem;
        what = "cuOccupancyMaxActiveClusters";
        r = g->cu->p_cuOccupancyMaxActiveClusters(&clusters, hopper->fn, &cfg);
        if (r == CUDA_SUCCESS && clusters > 0 && 2 * clusters < target)
            target = 2 * clusters;
    }
    mla__gpu_pop(ctx);
    if (r != CUDA_SUCCESS)
        return mla__cu_fail(MLA_STATUS_CUDA_ERROR, r, what);
    if (occ < 1)
        return mla__error(MLA_STATUS_NOT_SUPPORTED,
                             "the decode kernel (MLA_PARAM_BLOCK_N %d, %d stages, %u bytes "
                             "of shared memory) cannot be resident on %s",
                             bn, stages, smem, g->name);

    /* The schedule (kernels/schedule.cu): pieces for greedy dispatch on
     * `parts` slots (groups of m_blocks x h_kv CTAs resident at once), at
     * most 2 waves' worth past one piece per request (gridDim.z <=
     * 65535), and room for 3 waves' worth of split pieces' partials. */
    const int64_t ctas_per_piece = (int64_t)m_blocks * s->num_kv_heads;
    int64_t parts = target / ctas_per_piece;
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

    /* Workspace (kernels/mla_params.h): header, kept lengths, per-request
     * piece counts, the pieces, then the split pieces' partials (fp32 O
     * and log2-domain LSE). */
    const size_t prow = (size_t)slots * (size_t)s->q_len * (size_t)s->num_heads;
    size_t off = MLA_WS_HEADER_BYTES;
    const size_t ws_lens = off;
    off = align256(off + (size_t)batch * sizeof(int32_t));
    const size_t ws_reqs = off;
    off = align256(off + (size_t)batch * 2 * sizeof(int32_t));
    const size_t ws_clist = off;
    off = align256(off + (size_t)batch * sizeof(int32_t));
    const size_t ws_pieces = off;
    off = align256(off + (size_t)max_pieces * 4 * sizeof(int32_t));
    const size_t ws_oaccum = off;
    off = align256(off + prow * MLA_D_V * sizeof(float));
    const size_t ws_lseaccum = off;
    off = align256(off + prow * sizeof(float));

    struct mla_decode_params *p = &gp->p;
    memset(p, 0, sizeof(*p));
    p->ws_lens = ws_lens;
    p->ws_reqs = ws_reqs;
    p->ws_clist = ws_clist;
    p->ws_pieces = ws_pieces;
    p->ws_oaccum = ws_oaccum;
    p->ws_lseaccum = ws_lseaccum;
    p->batch = batch;
    p->q_len = s->q_len;
    p->h_q = s->num_heads;
    p->h_kv = s->num_kv_heads;
    p->heads_per_kv = heads_per_kv;
    p->rows = rows;
    p->block_m = block_m;
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
    p->scales_per_row = spr;
    p->causal = s->causal && s->q_len > 1;
    p->block_n = bn;
    p->num_stages = stages;
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

    gp->decode = k;
    gp->decode_smem = smem;
    gp->hopper = hopper;
    gp->hopper_smem = hopper_smem;
    gp->hopper_pair = pair;
    gp->hopper_required = s->kernel != MLA_XKERNEL_AUTO && s->kernel != MLA_XKERNEL_PORTABLE;
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
