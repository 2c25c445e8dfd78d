/*
 * mla_params.h - the contract between the host library (lib/, plain C) and
 * the CUDA kernels (kernels/).  Included by both sides; plain C POD only.
 *
 * Every kernel takes one argument, a `const __grid_constant__` struct
 * passed by value through cuLaunchKernelEx's kernelParams.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_PARAMS_H
#define MLA_PARAMS_H

#include <stdint.h>

#ifdef __CUDACC__
#define MLA_HD __host__ __device__ __forceinline__
/* Constant-evaluable too: kernels/sm90/hopper_layout.cuh checks the layouts at
 * compile time. */
#define MLA_HD_CONSTEXPR __host__ __device__ __forceinline__ constexpr
#else
#define MLA_HD static inline
#define MLA_HD_CONSTEXPR static inline
#endif

/* Format codes: equal to mla_kv_format_t. */
#define MLA_FMT_BF16 0
#define MLA_FMT_FP8_E4M3 1
#define MLA_FMT_FP8_DS_MLA 2

#define MLA_D_QK 576
#define MLA_D_V 512
#define MLA_D_NOPE 512
#define MLA_D_ROPE 64

/* Rows (packed q_len x heads-per-KV-head) per CTA M tile. */
#define MLA_BLOCK_M 64

/* Workspace header: the status word, the schedule's identity and its
 * piece count (struct mla_ws_header), then from byte MLA_WS_FLAGS_OFFSET
 * one byte per block-table-checking CTA of the scheduler (non-zero: it
 * found a bad entry); padded to 256 bytes. */
#define MLA_WS_HEADER_BYTES 256
#define MLA_WS_FLAGS_OFFSET 64
#define MLA_SCHEDULE_MAX_CHECK_CTAS 176 /* flags fit the header: 64 + 176 + 16 */
/* Kernel trace builds (configure --enable-kernel-trace): the first
 * MLA_TRACE_CTAS CTAs of the wide BF16 decode grid stamp clock64 at the
 * steps of their pairs of tiles into the workspace's last
 * MLA_TRACE_BYTES: uint64 [cta][role][pair][step] (kernels/common/trace.cuh
 * names them; bench/trace.py reads them). */
#define MLA_TRACE_CTAS 16
#define MLA_TRACE_ROLES 4
#define MLA_TRACE_PAIRS 256
#define MLA_TRACE_STEPS 16
#define MLA_TRACE_BYTES (MLA_TRACE_CTAS * MLA_TRACE_ROLES * MLA_TRACE_PAIRS * MLA_TRACE_STEPS * 8)
/* "MLAW": a header some decode or schedule call has written. */
#define MLA_WS_MAGIC 0x57414c4du

struct mla_ws_header {
    int32_t status;            /* mla_status_t verdict of the last schedule or decode */
    uint32_t magic;            /* MLA_WS_MAGIC */
    uint32_t plan_tag;         /* mla_decode_params.plan_tag of the plan that wrote it */
    int32_t num_pieces;        /* pieces in ws_pieces */
    uint64_t block_table;      /* the arguments the schedule was made for */
    int64_t num_pages;
    int32_t max_pages_per_seq;
    int32_t num_combine;       /* requests in ws_clist */
    int32_t reused;            /* 1: the last schedule call kept the pieces it found
                                  (schedule.cu, reuse); 0: it cut them */
};

/* Parameters of the scheduler, decode and combine kernels. */
struct mla_decode_params {
    /* Device addresses. */
    uint64_t q;           /* bf16 [batch, q_len, h_q, 576] */
    uint64_t kv;          /* [num_pages, page_size, h_kv, row_bytes] */
    uint64_t scales;      /* fp32 [num_pages, page_size, h_kv, scales_per_row] or 0 */
    uint64_t block_table; /* int32 [batch, max_pages_per_seq] */
    uint64_t seq_lens;    /* int32 [batch]; read by mla_schedule only */
    uint64_t out;         /* bf16 [batch, q_len, h_q, 512] */
    uint64_t lse;         /* fp32 [batch, h_q, q_len] or 0 */
    uint64_t workspace;   /* base of the workspace */
    uint64_t ws_lens, ws_clist, ws_pieces, ws_oaccum, ws_lseaccum; /* byte offsets */
    int64_t num_pages;

    /* Shape. */
    int32_t batch, q_len, h_q, h_kv;
    int32_t heads_per_kv;  /* h_q / h_kv */
    int32_t rows;          /* q_len * heads_per_kv: packed M rows per (b, kv head) */
    int32_t block_m;       /* rows per CTA M tile: MLA_BLOCK_M, or MLA_NARROW_ROWS
                              for the narrow sm_90a kernels */
    int32_t m_blocks;      /* ceil(rows / block_m) */
    int32_t page_size, page_shift; /* page_size == 1 << page_shift */
    int32_t max_pages_per_seq;
    int32_t max_seq_len;   /* plan bound; longer lengths are OUT_OF_BOUNDS */

    /* Format. */
    int32_t kv_format, row_bytes, scale_block, scales_per_row; /* scale_block: 0 or
                           32/64/128 (E4M3 only); scales_per_row = ceil(576 / it) */
    int32_t causal;        /* non-zero: bottom-right causal (a no-op when q_len == 1) */

    /* Tiling and schedule. */
    int32_t block_n;       /* keys per KV tile: 32 or 64 */
    int32_t num_stages;    /* shared-memory stages, 1..MLA_MAX_STAGES */
    int32_t parts;         /* slots: resident groups of m_blocks x h_kv CTAs */
    int32_t max_pieces;    /* decode grid.z: batch + 2 parts (at most 65535) */
    int32_t partial_slots; /* split pieces the partials have room for: 3 parts */
    int32_t piece_cost;    /* fixed cost of a piece, in KV tiles */
    int32_t min_piece_tiles; /* fewest KV tiles a split piece gets (>= 1) */
    uint32_t plan_tag;     /* identifies the schedule layout (mla_ws_header) */
    int32_t sched_ctas;    /* mla_schedule's grid: 1, or 1 + page-checking CTAs */
    int32_t combine_ctas;  /* mla_combine's grid */

    /* Scales. */
    float score_scale_log2; /* softmax_scale * kv_scale * log2(e); DS_MLA RoPE is
                               unscaled, so the kernel divides its part of q.k
                               by out_scale (exact for powers of two) */
    float out_scale;        /* kv_scale (V dequant, applied in fp32); 1 for BF16 */

    /* Kernel trace builds: the byte offset of the step stamps in the
     * workspace (MLA_TRACE_BYTES); else 0.  Last, so that the other
     * fields keep their places. */
    uint64_t ws_trace;
};

/* Parameters of the KV append kernel. */
struct mla_append_params {
    uint64_t kv, scales, latent, slots;
    int64_t num_pages, n;
    int32_t h_kv, page_size, kv_format, row_bytes, scale_block, scales_per_row;
    float kv_scale;
};

/*
 * Kernels (extern "C"), one fatbin per source, and how to launch them.
 * Every kernel takes one `const __grid_constant__` struct by value (the
 * decode kernels use dynamic shared memory only; schedule and append have
 * a few bytes of static shared memory).  The schedule, decode and
 * combine kernels start with griddepcontrol.wait, so any of them may be
 * launched with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
 * (PDL) behind the kernel before it; without the attribute the wait is a
 * no-op.  mla_append has no wait: it is launched without PDL.  The
 * kernels that others depend on issue griddepcontrol.launch_dependents;
 * that only lets the dependent grid be scheduled early: its
 * griddepcontrol.wait still waits for this grid to complete and for its
 * memory operations to be visible.
 *
 * mla_schedule_pieces (kernels/service/schedule.cu), struct mla_decode_params
 *   grid (sched_ctas), block MLA_SCHEDULE_THREADS, no dynamic smem.
 *   CTA 0 reads every length once, checks 0 <= len <= min(max_seq_len,
 *   max_pages_per_seq * page_size), keeps the lengths it read (ws_lens;
 *   0 for a bad one) and cuts the step's work into pieces (below), unless
 *   the header already holds a schedule of this plan_tag and every length
 *   is good and equal to its kept one: then the pieces and the combine's
 *   list stay, and only the checks and the header are redone
 *   (header.reused 1; the pieces depend on nothing else); the block-table entries
 *   of the pages [0, ceil(len / page_size)) must lie in [0, num_pages).
 *   With sched_ctas == 1, CTA 0 checks those entries too.  With more CTAs,
 *   CTA i >= 1 checks a share of them and writes its flag byte (1: bad).
 *   CTA 0 writes the header, its status word MLA_STATUS_OUT_OF_BOUNDS for
 *   a bad length or (alone) entry, else 0.  The call's verdict is
 *   OUT_OF_BOUNDS if the status word or any flag of CTAs 1..sched_ctas-1
 *   says so (schedule_clean in schedule.cuh); nothing needs zeroing first.
 *   May be launched with PDL behind the kernel before it (it starts with
 *   griddepcontrol.wait).
 *
 *   The pieces: each non-empty request is cut into equal pieces of about c
 *   KV tiles (never under min_piece_tiles), c being the step's tiles over
 *   1 to 4 waves of `parts` slots (one slot: a resident group of m_blocks
 *   x h_kv CTAs), the one whose estimated greedy schedule, with
 *   piece_cost tiles per piece, is shortest (schedule.cu).  Each piece
 *   (request, KV tiles [t0, t1), partial slot) is one decode grid slice;
 *   pieces are stored largest first, so the hardware's in-order dispatch
 *   packs the small ones last.  At most max_pieces pieces and
 *   partial_slots split pieces.
 *
 * mla_decode_<f>_n<BN> (kernels/portable/decode.cu), struct mla_decode_params
 *   f in {bf16, e4m3, dsmla} (MLA_FMT_*), BN = block_n in {32, 64}.
 *   grid (m_blocks, h_kv, max_pieces); block MLA_DECODE_THREADS (512);
 *   dynamic smem mla_decode_smem_bytes(f, BN, num_stages, spr), with
 *     1 <= num_stages <= MLA_MAX_STAGES (the plan takes the most that
 *     fit the device); the host raises
 *     CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES per kernel;
 *   PDL: may be launched as a programmatic dependent of mla_schedule (or
 *     of any kernel, when the schedule was made by an earlier call);
 *     it issues launch_dependents for mla_combine.
 *   CTA (x, y, z) runs piece z (M tile x, KV head y) unless the header is
 *   not this call's (magic or plan_tag differ: nothing is written;
 *   block_table, num_pages or max_pages_per_seq differ: CTA (0, 0, 0)
 *   records MLA_STATUS_INVALID_ARGUMENT), the status word is not 0, or
 *   z >= num_pieces; such CTAs write nothing else.  A piece with partial slot
 *   -1 writes out and lse, otherwise its slot of ws_oaccum / ws_lseaccum.
 *   Page numbers read from the block table are clamped into the cache, so
 *   entries changed after the schedule checked them cannot move a read
 *   outside it.
 *   Needs kv_format == f, block_n == BN, 16-byte aligned q and kv,
 *   scales != 0 iff scales_per_row > 0 (E4M3 with a scale block).  A
 *   launch with another kv_format, block_n or num_stages traps.
 *
 * mla_combine (kernels/service/combine.cu), struct mla_decode_params
 *   grid (combine_ctas), block 128, no dynamic smem; PDL: launched as a
 *   programmatic dependent of the decode kernel.  Exits if the verdict is
 *   not 0.  Its warps take, grid-stride, the (request, query token, head,
 *   128-column block) rows of the num_combine requests of ws_clist: those
 *   with no piece (length 0: zeros and LSE +inf) and the split ones (their
 *   partial slots merged); the others the decode kernel wrote whole.
 *
 * mla_append (kernels/service/append.cu), struct mla_append_params
 *   grid (n, h_kv), block 64, no dynamic smem; launched without PDL (it
 *   has no griddepcontrol.wait).
 *   Skips rows with slot < 0 or slot >= num_pages * page_size.
 *
 * Workspace (byte offsets in the params, each 256-byte aligned):
 *   [0, 256)    struct mla_ws_header
 *   ws_lens     int32 [batch]: the lengths the schedule read
 *   ws_clist    int4 [batch]: the requests mla_combine writes (piece
 *               count 0 or more than 1), num_combine of them, any order:
 *               (request, piece count, first partial slot or -1, 0), so
 *               that a combine row takes its request's pieces in one read
 *   ws_pieces   int4 [max_pieces]: (request, t0, t1, partial slot or -1)
 *   ws_oaccum   fp32 [partial_slots, q_len, h_q, 512]: a split
 *               piece's O divided by its own softmax sum, times out_scale
 *               (0 when it saw no key); the slots of one request are
 *               consecutive, in key order
 *   ws_lseaccum fp32 [the same slots, q_len, h_q]: the piece's log2-domain
 *               LSE, m + log2(l) over scores times score_scale_log2; -inf
 *               when it saw no key
 */
#define MLA_DECODE_THREADS 512 /* warps 0-7 MMA, 8-11 convert (sm_90a: Q), 12 load, 13-15 idle */
/* The sm_90a kernels without a converter warpgroup, mla_hopper_decode_bf16
 * and mla_hopper_wide8_<f>: warps 0-7 MMA, 8 load, 9-11 idle.  BF16 tiles
 * need no converter and the wide FP8 kernel converts in its consumers
 * (which load Q), and at 384 threads a thread starts with 168 registers
 * instead of 128: ptxas checks each wgmma against that entry count, and
 * P V over a warpgroup's 256 columns in one m64n256k16 (128 accumulators)
 * does not fit 128. */
#define MLA_HOPPER_LEAN_THREADS 384
/* Registers a thread holds at the entry of a kernel of `threads` threads,
 * one block an SM (the 64 K register file, in units of 8): what ptxas
 * checks each instruction against, what the setmaxnreg budgets of an
 * sm_90a block's warpgroups add up to, and what the context requires such
 * a kernel to have been compiled with. */
MLA_HD_CONSTEXPR int32_t mla_entry_regs(int32_t threads)
{
    return (65536 / threads) & ~7;
}
/* 256: the cutting CTA's steps are scans and barriers over its warps;
 * at 512 threads the scheduler took 1.4-1.6 us longer (H200, h128 b1 to
 * b132; 128 threads: as fast at small batches, slower at b132). */
#define MLA_SCHEDULE_THREADS 256
/* Defaults of the schedule's tuning: the fixed cost of a piece (Q load,
 * pipeline fill, partial write and combine) in KV tiles, and the fewest
 * tiles of a split piece. */
#define MLA_PIECE_COST 2
#define MLA_MIN_PIECE_TILES 2
#define MLA_MAX_STAGES 4
#define MLA_COMBINE_COL_BLOCKS 4 /* mla_combine's grid.z: 128 columns each */

/* Shared memory of one padded BF16 row (576 bf16 + 16 bytes of padding). */
#define MLA_SMEM_ROW_BF16 (MLA_D_QK * 2 + 16)

/* Dynamic shared memory one CTA may use on sm_90 and sm_100 (227 KiB). */
#define MLA_SMEM_BUDGET 232448u

/* Decode shared memory: mbarriers (1024 bytes), the Q tile (64 padded
 * rows), then num_stages stages of block_n padded rows. */
#define MLA_DECODE_SMEM_BARRIERS 1024u

MLA_HD_CONSTEXPR int32_t mla_row_bytes(int32_t fmt)
{
    return fmt == MLA_FMT_BF16 ? 1152 : fmt == MLA_FMT_FP8_E4M3 ? 576 : 656;
}

/* Scale modes: how a cache's values are scaled, from its format and
 * scales_per_row (E4M3: ceil(576 / scale_block), MLA_SPR_<block>).  The
 * narrow FP8 kernels fold 128- and 64-dim block scales (and DS_MLA's)
 * into the scores, so that K converts unscaled, and scale each K value
 * with 32-dim ones. */
#define MLA_SCALES_NONE 0  /* BF16, E4M3 without block scales */
#define MLA_SCALES_128 1   /* E4M3, blocks of 128 dims */
#define MLA_SCALES_64 2    /* E4M3, blocks of 64 dims */
#define MLA_SCALES_32 3    /* E4M3, blocks of 32 dims */
#define MLA_SCALES_DSMLA 4 /* DS_MLA: 4 scales of 128 nope dims, inside the row */
#define MLA_NUM_SCALE_MODES 5
#define MLA_SPR_128 ((MLA_D_QK + 127) / 128) /* 5 */
#define MLA_SPR_64 ((MLA_D_QK + 63) / 64)    /* 9 */
#define MLA_SPR_32 ((MLA_D_QK + 31) / 32)    /* 18 */

MLA_HD int32_t mla_scale_mode(int32_t fmt, int32_t scales_per_row)
{
    if (fmt == MLA_FMT_FP8_DS_MLA)
        return MLA_SCALES_DSMLA;
    if (fmt != MLA_FMT_FP8_E4M3 || scales_per_row == 0)
        return MLA_SCALES_NONE;
    return scales_per_row == MLA_SPR_128  ? MLA_SCALES_128
           : scales_per_row == MLA_SPR_64 ? MLA_SCALES_64
                                          : MLA_SCALES_32;
}

/* Keys visible to query token qi (0 .. q_len - 1) of a request of len
 * keys: all of them, or with the causal mask (bottom-right aligned) the
 * first len - q_len + 1 + qi, at least 0.  The one statement of the mask
 * for the CPU backend, the decode kernels and mla_combine. */
MLA_HD int32_t mla_visible_keys(int32_t causal, int32_t q_len, int32_t len, int32_t qi)
{
    const int64_t v = causal && q_len > 1 ? (int64_t)len - q_len + 1 + qi : (int64_t)len;
    return v < 0 ? 0 : (int32_t)v;
}

/* Dynamic shared memory of a decode kernel.  FP8 rows are staged inside
 * the stage's own BF16 rows and converted in place, and E4M3 block scales
 * ride in the same rows (kernels/common/convert.cuh), so the size is the same
 * for every format; fmt and scales_per_row are kept for the contract. */
MLA_HD uint32_t mla_decode_smem_bytes(int32_t fmt, int32_t block_n, int32_t stages,
                                      int32_t scales_per_row)
{
    (void)fmt;
    (void)scales_per_row;
    return MLA_DECODE_SMEM_BARRIERS + (uint32_t)MLA_BLOCK_M * MLA_SMEM_ROW_BF16 +
           (uint32_t)stages * (uint32_t)block_n * MLA_SMEM_ROW_BF16;
}

/*
 * Hopper decode (kernels/sm90/hopper.cu, sm_90a only): the wide BF16
 * kernel mla_hopper_decode_bf16, struct mla_hopper_params.
 *   Same grid, PDL behaviour and workspace contract as mla_decode_bf16_n64,
 *   with block_n 64 and num_stages 2 (the scheduler's tiles are the same),
 *   block MLA_HOPPER_LEAN_THREADS (384); dynamic smem
 *   MLA_HOPPER_SMEM_BYTES.  Needs page_size >= 64 (a KV tile is 64
 *   consecutive rows of one page, one TMA box per 64 columns) and
 *   num_pages * page_size < 2^31.  A launch with another kv_format,
 *   block_n, num_stages or block_m, or pages of fewer than 64 rows traps.
 *   kv_map is a CUtensorMap over the cache viewed as [rows = num_pages *
 *   page_size][h_kv][576 bf16], box 64 columns x 1 head x 64 rows,
 *   SWIZZLE_128B (the wgmma layout).  kv_map4 views the same cache as
 *   [h_kv][9 chunks][rows][64 bf16] (strides: a row, 128 bytes, a head),
 *   box 64 columns x 64 rows x 4 chunks x 1 head: four chunks of a tile
 *   in one copy, landing chunk after chunk as kv_map's boxes do.
 * These kernels exist in the sm_90a image only; the host looks them up
 * on compute capability 9.0 only.
 */
#ifdef __cplusplus
#define MLA_ALIGN64 alignas(64)
#else
#define MLA_ALIGN64 _Alignas(64)
#endif
struct mla_tensor_map {
    MLA_ALIGN64 uint64_t opaque[16]; /* a CUtensorMap */
};
struct mla_hopper_params {
    struct mla_tensor_map kv_map;  /* BF16 caches; unused with FP8 ones */
    struct mla_tensor_map kv_map4; /* the same, four chunks a box */
    struct mla_decode_params p;
};

#define MLA_HOPPER_BLOCK_N 64
#define MLA_HOPPER_STAGES 2

/*
 * The narrow sm_90a kernels, mla_hopper_narrow_<f>, f in {bf16, e4m3,
 * dsmla}: the same contract as mla_hopper_decode_bf16, block
 * MLA_DECODE_THREADS, with M tiles of MLA_NARROW_ROWS packed rows
 * (block_m; BF16 takes at most one, FP8 two: the 32 rows of two MTP
 * tokens at 16 heads).  They compute
 * S^T = K Q^T and O^T = V^T P^T (keys and value dims as the wgmma M, the
 * query rows as N = 16), so the Q tile holds only 16 rows.  Dynamic smem
 * mla_narrow_smem_bytes(f).  BF16 reads kv_map.  FP8 (E4M3, DS_MLA):
 * the tiles land by bulk copies (no tensor map; E4M3 with block scales
 * needs h_kv == 1 and 16-byte aligned scales, one bulk copy of the tile's
 * 64 rows of scales), and the consumers read the FP8 tile itself and
 * convert it in registers (kernels/sm90/hopper_narrow_fp8.cuh), so the
 * stages hold FP8 as it lands and more tiles are in flight: E4M3 takes
 * five stages where they fit in the 227 KB the launch asks for (spr <=
 * 9), else four; DS_MLA four.
 */
#define MLA_NARROW_ROWS 16
#define MLA_NARROW8_STAGES_E4M3_MAX 5u
#define MLA_NARROW8_STAGES_DSMLA 4u

/*
 * Shared memory of the sm_90a kernels, one struct per layout (only their
 * sizes are taken here; kernels/sm90/hopper_layout.cuh places the buffers at
 * their offsets and checks the budget), from a base the kernel aligns to
 * 1024 bytes: the launch asks for 1024 bytes more than the struct.  A
 * BF16 tile (the Q tile, a stage) is 9 chunks of 64 bf16 columns, its
 * rows 128 bytes each, 128B-swizzled (kernels/common/wgmma.cuh).
 */
#define MLA_HOPPER_CHUNKS (MLA_D_QK / 64)

/* Wide BF16: the 64-row Q tile; the stages; the scale area (the
 * warpgroups' running maxima, kernels/sm90/hopper_seesaw.cuh); the
 * consumers' row exchange (2 warpgroups x 64 rows); the mbarriers. */
struct mla_hopper_smem {
    uint8_t q[MLA_HOPPER_CHUNKS][MLA_BLOCK_M][128];
    uint8_t stages[MLA_HOPPER_STAGES][MLA_HOPPER_CHUNKS][MLA_HOPPER_BLOCK_N][128];
    float scales[MLA_HOPPER_STAGES][MLA_HOPPER_BLOCK_N][MLA_SPR_32];
    float xchg[2][MLA_BLOCK_M];
    uint64_t bars[32];
};
#define MLA_HOPPER_SMEM_BYTES ((uint32_t)sizeof(struct mla_hopper_smem) + 1024u)

/* Narrow BF16: the 16-row Q tile; the BF16 stages; per consumer
 * warpgroup a P tile (16 rows x 64 keys bf16); the partial S^T exchange
 * (tile parity x warpgroup x two planes of 128 threads x 4 fp32); the
 * column exchange (warpgroup x warp x 16 columns); the mbarriers. */
struct mla_narrow_smem {
    uint8_t q[MLA_HOPPER_CHUNKS][MLA_NARROW_ROWS][128];
    uint8_t stages[MLA_HOPPER_STAGES][MLA_HOPPER_CHUNKS][MLA_HOPPER_BLOCK_N][128];
    uint8_t p[2][MLA_NARROW_ROWS][128];
    float xchg[2][2][2][128][4];
    float cmax[2][4][MLA_NARROW_ROWS];
    uint64_t bars[32];
};

/* Narrow FP8: this head (the Q tile, its dims permuted to match the
 * register fragments; per consumer warpgroup four P tiles, one per
 * 128-dim block of V with the block's scales folded in, the first also
 * the warpgroup's (max, sum) for the merge), then mla_narrow8_stages()
 * stages of mla_narrow8_stage_bytes(), then the tail: the column exchange
 * and the mbarriers. */
struct mla_narrow8_head {
    uint8_t q[MLA_HOPPER_CHUNKS][MLA_NARROW_ROWS][128];
    uint8_t p[2][4][MLA_NARROW_ROWS][128];
};
struct mla_narrow8_tail {
    float cmax[2][4][MLA_NARROW_ROWS];
    uint64_t bars[32];
};

/* A narrow FP8 stage: a tile's 64 rows as they land (E4M3's 576 bytes,
 * DS_MLA's 656), then E4M3's block scales (64 x spr fp32). */
MLA_HD_CONSTEXPR uint32_t mla_narrow8_stage_bytes(int32_t fmt, int32_t spr)
{
    return fmt == MLA_FMT_FP8_E4M3
               ? MLA_HOPPER_BLOCK_N * ((uint32_t)mla_row_bytes(fmt) + 4u * (uint32_t)spr)
               : MLA_HOPPER_BLOCK_N * (uint32_t)mla_row_bytes(fmt);
}

MLA_HD_CONSTEXPR uint32_t mla_narrow8_stages(int32_t fmt, int32_t spr)
{
    if (fmt != MLA_FMT_FP8_E4M3)
        return MLA_NARROW8_STAGES_DSMLA;
    const uint32_t n = (MLA_SMEM_BUDGET - 1024u - (uint32_t)sizeof(struct mla_narrow8_head) -
                        (uint32_t)sizeof(struct mla_narrow8_tail)) /
                       mla_narrow8_stage_bytes(fmt, spr);
    return n < MLA_NARROW8_STAGES_E4M3_MAX ? n : MLA_NARROW8_STAGES_E4M3_MAX;
}

MLA_HD_CONSTEXPR uint32_t mla_narrow_smem_bytes(int32_t fmt)
{
    if (fmt == MLA_FMT_BF16)
        return (uint32_t)sizeof(struct mla_narrow_smem) + 1024u;
    if (fmt == MLA_FMT_FP8_E4M3)
        return MLA_SMEM_BUDGET; /* the stage count follows spr */
    return (uint32_t)sizeof(struct mla_narrow8_head) +
           MLA_NARROW8_STAGES_DSMLA * mla_narrow8_stage_bytes(fmt, 0) +
           (uint32_t)sizeof(struct mla_narrow8_tail) + 1024u;
}

/*
 * The wide FP8 sm_90a kernels, mla_hopper_wide8_<f>, f in {e4m3 (no block
 * scales), e4m3b (block scales), dsmla}: the contract and grid of
 * mla_hopper_decode_bf16 (64-row M tiles, any number),
 * MLA_HOPPER_LEAN_THREADS threads, the narrow FP8 kernels' bulk copies
 * (no tensor map; E4M3 block scales need h_kv == 1 and 16-byte aligned
 * scales).  Like the narrow FP8 kernels they compute S^T = K Q^T and
 * O^T = V^T P^T with K and V^T built in registers from the FP8 stage as
 * it landed, here with the 64 query rows as N: the two consumer
 * warpgroups take the scores of alternate tiles and each multiplies every
 * tile's P into its half of O^T's 512 rows (kernels/sm90/hopper_wide8.cuh).
 * Dynamic smem mla_wide8_smem_bytes().
 */
#define MLA_WIDE8_STAGES 3u

/* Head: the Q tile (its dims permuted as the narrow FP8 kernel's); the P
 * tile of each warpgroup's tiles (64 rows x 64 keys), with the reference
 * maxima and the factors for O that came with it; the key limits of the
 * rows; the column exchange (warpgroup x warp x 64 columns); with block
 * scales, V's factors of the P tile's keys (bf16 pairs, up to 16 scale
 * blocks of 32 key pairs: kernels/sm90/hopper_wide8.cuh, vf_word).  Then
 * MLA_WIDE8_STAGES stages of mla_narrow8_stage_bytes(), then the tail:
 * the mbarriers. */
struct mla_wide8_head {
    uint8_t q[MLA_HOPPER_CHUNKS][MLA_BLOCK_M][128];
    uint8_t p[2][MLA_BLOCK_M][128];
    float ref[2][MLA_BLOCK_M];
    float alpha[2][MLA_BLOCK_M];
    int32_t lim[MLA_BLOCK_M];
    float cx[2][4][MLA_BLOCK_M];
    uint32_t changed[2];
    uint32_t pad[2];
    uint32_t vf[2][16][32];
};
struct mla_wide8_tail {
    uint64_t bars[32];
};

MLA_HD_CONSTEXPR uint32_t mla_wide8_smem_bytes(int32_t fmt, int32_t spr)
{
    return (uint32_t)sizeof(struct mla_wide8_head) +
           MLA_WIDE8_STAGES * mla_narrow8_stage_bytes(fmt, spr) +
           (uint32_t)sizeof(struct mla_wide8_tail) + 1024u;
}

#endif /* MLA_PARAMS_H */
