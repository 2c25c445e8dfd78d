/*
 * hopper_layout.cuh - what the roles of the sm_90a kernels (hopper.cu)
 * agree on: register budgets, the stage ring, the barrier block, named
 * barrier ids, and where each buffer of the shared-memory layouts (wide
 * BF16: 64-row Q tile and BF16 stages; narrow: 16-row Q tile, BF16
 * stages, or FP8 stages read by the consumers themselves; wide FP8: 64-row
 * Q tile and FP8 stages) lives: the offsets of
 * kernels/common/mla_params.h's structs.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_HOPPER_LAYOUT_CUH
#define MLA_HOPPER_LAYOUT_CUH

#include <stddef.h>

#include "mla_params.h"
#include "ptx.cuh"
#include "pipeline.cuh"
#include "schedule.cuh"
#include "wgmma.cuh"

namespace mla {
namespace hopper {

constexpr uint32_t kBN = MLA_HOPPER_BLOCK_N, kStages = MLA_HOPPER_STAGES;
/* A BF16 tile of 64 keys (a stage; the wide Q tile) and one of its
 * 64-column chunks. */
constexpr uint32_t kTile = sizeof(mla_hopper_smem::stages[0]);
constexpr uint32_t kChunk = sizeof(mla_hopper_smem::stages[0][0]);
static_assert(sizeof(mla_hopper_smem::q) == kTile, "the wide Q tile is a tile");
/* The narrow layouts: a chunk of the 16-row Q tile, a P tile (16 rows x
 * 64 keys bf16), narrow FP8's P tiles of a warpgroup. */
constexpr uint32_t kNarrowQChunk = sizeof(mla_narrow_smem::q[0]);
constexpr uint32_t kPTile = sizeof(mla_narrow_smem::p[0]);
constexpr uint32_t kNarrow8PTiles = sizeof(mla_narrow8_head::p[0]);
static_assert(sizeof(mla_narrow8_head::q[0]) == kNarrowQChunk &&
                  sizeof(mla_narrow8_head::p[0][0]) == kPTile,
              "both narrow layouts' Q chunks and P tiles");
/* The barrier block of every layout: 8-byte mbarriers, then flag words. */
struct Bars {
    uint64_t loaded[MLA_NARROW8_STAGES_E4M3_MAX]; /* TMA of a stage */
    uint64_t free[MLA_NARROW8_STAGES_E4M3_MAX];   /* consumers are done with a stage */
    uint64_t q;                                   /* Q is written (converter or consumers) */
    /* Per layout: narrow FP8 keeps two words of the Q tile here (the
     * writers' maxima, 4 words, at qmax; the factor that undoes the f16
     * tile's scaling at qscale), wide FP8 its P slots' and end barriers
     * (hopper_wide8.cuh). */
    uint64_t words[7];
    /* Narrow FP8: the warpgroups' merge steps; wide BF16: the hand-overs
     * to WG 1 and to WG 0, the final sums. */
    uint64_t merge[4];
    /* Narrow FP8: the loaded barriers of consumer warpgroup 1's tiles
     * (loaded: warpgroup 0's).  The warpgroups take alternate tiles, so
     * with an odd stage count a stage's tiles alternate between them; on
     * a barrier the two shared, a warpgroup could reach its tile's phase
     * while the stage's previous phase (the other warpgroup's tile) was
     * still in flight, and try_wait.parity, which tells phases apart by
     * parity alone, would take that phase's predecessor for complete. */
    uint64_t loaded1[MLA_NARROW8_STAGES_E4M3_MAX];
};
static_assert(sizeof(Bars) <= sizeof(mla_hopper_smem::bars) &&
                  sizeof(Bars) <= sizeof(mla_narrow_smem::bars) &&
                  sizeof(Bars) <= sizeof(mla_narrow8_tail::bars),
              "the barrier block fits every layout");
constexpr uint32_t kBarLoaded = offsetof(Bars, loaded), kBarFree = offsetof(Bars, free),
                   kBarQ = offsetof(Bars, q), kBarWords = offsetof(Bars, words),
                   kBarMerge = offsetof(Bars, merge), kBarLoaded1 = offsetof(Bars, loaded1);
constexpr uint32_t kQMax = kBarWords, kQScale = kBarWords + 16;
constexpr uint32_t kBarToWg1 = kBarMerge, kBarToWg0 = kBarMerge + 8, kBarSums = kBarMerge + 16;

/* The wide BF16 stages in two parts, each freed by the one consumer
 * warpgroup that still reads it once the tile's scores retired, so that
 * the loader refills that part while the other warpgroup still reads the
 * rest (hopper_seesaw.cuh).  Part w of stage s has the loaded and free
 * barriers 2 s + w (free: 128 arrivals, warpgroup w).  Stage 0 holds the
 * even tile, whose P (P_a) goes to chunk 8 for WG 1: part 0 is chunks
 * 0-3 (V_L), part 1 chunks 4-8.  Stage 1 holds the odd tile, whose P_b
 * goes to chunk 8 for WG 0: part 0 is chunks 0-3 and 8, part 1 chunks
 * 4-7.  Stage s's part s lands first (its scoring warpgroup's own part,
 * freed first in the pair) and is chunks 4 s .. 4 s + 3. */
constexpr uint32_t kParts = 2;
MLA_DEV constexpr uint32_t part_chunks(uint32_t stage, uint32_t part)
{
    return part == 0 ? (stage == 0 ? 0x00fu : 0x10fu) : (stage == 0 ? 0x1f0u : 0x0f0u);
}
MLA_DEV constexpr uint32_t part_bar(uint32_t stage, uint32_t part)
{
    return 8u * (kParts * stage + part);
}
static_assert(kStages * kParts <= sizeof(Bars::loaded) / 8, "a barrier pair per part");
static_assert((part_chunks(0, 0) | part_chunks(0, 1)) == 0x1ffu &&
                  (part_chunks(1, 0) | part_chunks(1, 1)) == 0x1ffu &&
                  (part_chunks(0, 0) & part_chunks(0, 1)) == 0u &&
                  (part_chunks(1, 0) & part_chunks(1, 1)) == 0u &&
                  part_chunks(0, 0) == 0x00fu && part_chunks(1, 1) == 0x0f0u,
              "each stage's parts are its 9 chunks; part s of stage s is chunks 4 s .. 4 s + 3");

/* Named barriers (bar.sync ids): 1 row/partial exchange, 2 P written, 3
 * BF16 tail zeroed, 5 final sums, 8 whether the next tile has landed
 * (consumers_test; the two consumer WGs, 256 threads); 4 the converter
 * warpgroup (128); 6 and 7 consumer WG 0 / 1 alone.  bar.sync is
 * barrier.sync.aligned: the threads that meet at one must all execute the
 * same instruction, so a barrier of both WGs may sit in a branch only if
 * both WGs take it. */
constexpr uint32_t kNbMax = 1, kNbP = 2, kNbTail = 3, kNbCvt = 4, kNbSum = 5, kNbWg0 = 6,
                   kNbReady = 8;

/* The narrow FP8 layout: consumers convert in registers (hopper_narrow_fp8.cuh). */
template <int FMT, bool NARROW>
constexpr bool kFp8Direct = NARROW && FMT != MLA_FMT_BF16;
/* The wide BF16 kernel has no converter warpgroup (its tiles land as
 * wgmma reads them; its consumers load Q) and runs with 384 threads, so
 * that ptxas takes its m64n256 P V wgmmas (mla_params.h); the narrow ones
 * run with 512 (their converter warpgroup writes the Q tile). */
template <int FMT, bool NARROW>
constexpr bool kNoConverter = FMT == MLA_FMT_BF16 && !NARROW;
template <int FMT, bool NARROW>
constexpr uint32_t kThreads =
    kNoConverter<FMT, NARROW> ? MLA_HOPPER_LEAN_THREADS : MLA_DECODE_THREADS;
static_assert(mla_entry_regs(MLA_DECODE_THREADS) == 128 &&
                  mla_entry_regs(MLA_HOPPER_LEAN_THREADS) == 168,
              "entry register counts (mla_params.h)");

/* An FP8 tile lands row-major in the stage by bulk copies (one with a
 * single KV head, whose rows are contiguous; else one per row),
 * kFp8RowPitch bytes a row (E4M3's 576, DS_MLA's 656 with the scales at
 * 512 and the bf16 RoPE at 528; mla_row_bytes). */
template <int FMT, bool NARROW>
constexpr bool kBulkTile = kFp8Direct<FMT, NARROW>;
template <int FMT>
constexpr uint32_t kFp8RowPitch = (uint32_t)mla_row_bytes(FMT);
constexpr uint32_t kDsScaleOffset = 512u, kDsRopeOffset = 528u;

/* Narrow FP8: the leading 64-dim chunks of the Q tile held in f16, whose
 * K bytes the consumers convert unscaled with one cvt per pair: the nope
 * chunks of DS_MLA (its RoPE is bf16 in the cache), all of E4M3 unless
 * 32-dim blocks scale each K value in bf16 (0: a BF16 tile).  The
 * consumers branch on the same scale mode (NarrowFp8Consumer::run). */
template <int FMT>
MLA_DEV uint32_t q_f16_chunks(const mla_decode_params &p)
{
    const int32_t mode = mla_scale_mode(FMT, p.scales_per_row);
    return mode == MLA_SCALES_DSMLA ? 8 : mode != MLA_SCALES_32 ? 9 : 0;
}

/* Stages of each layout, at most (narrow E4M3: Cta::nstages follows the
 * scale count). */
template <int FMT, bool NARROW>
constexpr uint32_t kNumStages =
    kFp8Direct<FMT, NARROW>
        ? (FMT == MLA_FMT_FP8_E4M3 ? MLA_NARROW8_STAGES_E4M3_MAX : MLA_NARROW8_STAGES_DSMLA)
        : kStages;

/* Every layout fits the 227 KiB a block may use, with the 1024 bytes that
 * align its base.  Narrow FP8 needs two stages at least (its warpgroups
 * take alternate tiles). */
constexpr bool narrow8_fits(int32_t fmt, int32_t spr)
{
    const uint32_t n = mla_narrow8_stages(fmt, spr);
    return n >= 2 && sizeof(mla_narrow8_head) + n * mla_narrow8_stage_bytes(fmt, spr) +
                             sizeof(mla_narrow8_tail) + 1024u <=
                         mla_narrow_smem_bytes(fmt);
}
static_assert(MLA_HOPPER_SMEM_BYTES <= MLA_SMEM_BUDGET, "the wide layout fits");
static_assert(mla_narrow_smem_bytes(MLA_FMT_BF16) <= MLA_SMEM_BUDGET &&
                  mla_narrow_smem_bytes(MLA_FMT_FP8_E4M3) <= MLA_SMEM_BUDGET &&
                  mla_narrow_smem_bytes(MLA_FMT_FP8_DS_MLA) <= MLA_SMEM_BUDGET,
              "the narrow layouts fit");
static_assert(narrow8_fits(MLA_FMT_FP8_E4M3, 0) && narrow8_fits(MLA_FMT_FP8_E4M3, MLA_SPR_128) &&
                  narrow8_fits(MLA_FMT_FP8_E4M3, MLA_SPR_64) &&
                  narrow8_fits(MLA_FMT_FP8_E4M3, MLA_SPR_32) &&
                  narrow8_fits(MLA_FMT_FP8_DS_MLA, 0),
              "the narrow FP8 stages fit");
static_assert(kNumStages<MLA_FMT_FP8_E4M3, true> <= sizeof(Bars::loaded) / 8 &&
                  kNumStages<MLA_FMT_FP8_DS_MLA, true> <= sizeof(Bars::loaded) / 8,
              "a barrier pair per stage");
/* Swizzled tiles (Q, BF16 stages, P) start 1024-byte aligned; bulk copies
 * and 16-byte accesses need 16. */
static_assert(offsetof(mla_hopper_smem, stages) % 1024 == 0 && kTile % 1024 == 0,
              "wide layout alignment");
static_assert(offsetof(mla_narrow_smem, stages) % 1024 == 0 &&
                  offsetof(mla_narrow_smem, p) % 1024 == 0 &&
                  offsetof(mla_narrow_smem, xchg) % 16 == 0,
              "narrow BF16 layout alignment");
static_assert(offsetof(mla_narrow8_head, p) % 1024 == 0 && sizeof(mla_narrow8_head) % 1024 == 0 &&
                  mla_narrow8_stage_bytes(MLA_FMT_FP8_E4M3, 1) % 16 == 0 &&
                  mla_narrow8_stage_bytes(MLA_FMT_FP8_DS_MLA, 0) % 16 == 0,
              "narrow FP8 layout alignment");

struct Cta : CtaWork {
    int page0;        /* the page of tile t0 (CtaStart) */
    uint32_t sq;      /* Q tile */
    uint32_t qchunk;  /* bytes per 64-column chunk of the Q tile */
    uint32_t skv;     /* stage 0 */
    uint32_t sstride; /* bytes from one stage to the next */
    uint32_t sscl;    /* block scales of stage 0 */
    uint32_t scl_stride;
    uint32_t nstages; /* stages in the ring */
    uint32_t pbuf;    /* narrow: P tile(s) of consumer WG 0 (WG 1's follow) */
    uint32_t xchg;    /* consumers' exchange area (not narrow FP8) */
    uint32_t cmax;    /* narrow: column exchange */
    uint32_t bars;
    MLA_DEV uint32_t stage(uint32_t s) const { return skv + s * sstride; }
    MLA_DEV uint32_t scales(uint32_t s) const { return sscl + s * scl_stride; }
    /* loaded (full) and free (empty) barriers of the stage ring */
    MLA_DEV Pipe pipe() const { return Pipe{bars + kBarLoaded, bars + kBarFree}; }
};

/* Whether this launch matches the instantiation.  The host launches each
 * kernel only with a plan made for it, so a mismatch is a library bug:
 * the kernel traps rather than hang or overrun shared memory. */
template <int FMT, bool NARROW>
MLA_DEV bool launch_matches(const mla_decode_params &p)
{
    return p.kv_format == FMT && p.block_n == (int)kBN && p.num_stages == (int)kStages &&
           p.page_size >= (int)kBN && p.block_m == (NARROW ? MLA_NARROW_ROWS : MLA_BLOCK_M);
}

/* The buffers of the layout (every field but the CtaWork ones). */
template <int FMT, bool NARROW>
MLA_DEV void layout(const mla_decode_params &p, Cta &c)
{
    static_assert(NARROW || FMT == MLA_FMT_BF16, "the wide FP8 layout is wide8_layout's");
    extern __shared__ __align__(1024) uint8_t smem[];
    const uint32_t base = (smem_u32(smem) + 1023u) & ~1023u;
    c.sq = base;
    c.sstride = kTile;
    c.scl_stride = sizeof(mla_hopper_smem::scales[0]);
    static_assert(sizeof(mla_narrow_smem::stages[0]) == kTile, "narrow BF16 stages are tiles");
    c.nstages = kStages;
    if (kFp8Direct<FMT, NARROW>) {
        using L = mla_narrow8_head;
        const int spr = p.scales_per_row; /* ignored but for E4M3 */
        c.qchunk = kNarrowQChunk;
        c.skv = base + (uint32_t)sizeof(L);
        c.sstride = c.scl_stride = mla_narrow8_stage_bytes(FMT, spr);
        c.nstages = mla_narrow8_stages(FMT, spr);
        /* DS_MLA's scales are inside each row, E4M3's follow the rows. */
        c.sscl = c.skv + (FMT == MLA_FMT_FP8_DS_MLA ? kDsScaleOffset : kBN * kFp8RowPitch<FMT>);
        c.pbuf = base + (uint32_t)offsetof(L, p);
        c.xchg = 0;
        c.cmax = c.skv + c.nstages * c.sstride; /* mla_narrow8_tail */
        c.bars = c.cmax + (uint32_t)offsetof(mla_narrow8_tail, bars);
    } else if (NARROW) {
        using L = mla_narrow_smem;
        c.qchunk = kNarrowQChunk;
        c.skv = base + (uint32_t)offsetof(L, stages);
        c.sscl = 0;
        c.pbuf = base + (uint32_t)offsetof(L, p);
        c.xchg = base + (uint32_t)offsetof(L, xchg);
        c.cmax = base + (uint32_t)offsetof(L, cmax);
        c.bars = base + (uint32_t)offsetof(L, bars);
    } else {
        using L = mla_hopper_smem;
        c.qchunk = kChunk;
        c.skv = base + (uint32_t)offsetof(L, stages);
        c.sscl = base + (uint32_t)offsetof(L, scales);
        c.pbuf = c.cmax = 0;
        c.xchg = base + (uint32_t)offsetof(L, xchg);
        c.bars = base + (uint32_t)offsetof(L, bars);
    }
}

/* The wide FP8 layout (mla_wide8_head, the FP8 stages as the narrow FP8
 * kernels land them, mla_wide8_tail): its launch check and buffers. */
template <int FMT>
MLA_DEV bool wide8_launch_matches(const mla_decode_params &p)
{
    return FMT != MLA_FMT_BF16 && p.kv_format == FMT && p.block_n == (int)kBN &&
           p.num_stages == (int)kStages && p.page_size >= (int)kBN && p.block_m == MLA_BLOCK_M;
}

template <int FMT>
MLA_DEV void wide8_layout(const mla_decode_params &p, Cta &c)
{
    extern __shared__ __align__(1024) uint8_t smem[];
    using L = mla_wide8_head;
    const uint32_t base = (smem_u32(smem) + 1023u) & ~1023u;
    c.sq = base;
    c.qchunk = kChunk;
    c.pbuf = base + (uint32_t)offsetof(L, p);
    c.xchg = base; /* the head: hopper_wide8.cuh takes its fields by offsetof */
    c.cmax = base + (uint32_t)offsetof(L, cx);
    c.skv = base + (uint32_t)sizeof(L);
    c.sstride = c.scl_stride = mla_narrow8_stage_bytes(FMT, p.scales_per_row);
    c.nstages = MLA_WIDE8_STAGES;
    c.sscl = c.skv + (FMT == MLA_FMT_FP8_DS_MLA ? kDsScaleOffset : kBN * kFp8RowPitch<FMT>);
    c.bars = c.skv + c.nstages * c.sstride + (uint32_t)offsetof(mla_wide8_tail, bars);
}

constexpr bool wide8_fits(int32_t fmt, int32_t spr)
{
    return mla_wide8_smem_bytes(fmt, spr) <= MLA_SMEM_BUDGET;
}
static_assert(wide8_fits(MLA_FMT_FP8_E4M3, 0) && wide8_fits(MLA_FMT_FP8_E4M3, MLA_SPR_128) &&
                  wide8_fits(MLA_FMT_FP8_E4M3, MLA_SPR_64) &&
                  wide8_fits(MLA_FMT_FP8_E4M3, MLA_SPR_32) &&
                  wide8_fits(MLA_FMT_FP8_DS_MLA, 0),
              "the wide FP8 layout fits");
static_assert(offsetof(mla_wide8_head, p) % 1024 == 0 && sizeof(mla_wide8_head) % 16 == 0 &&
                  MLA_WIDE8_STAGES <= sizeof(Bars::loaded) / 8 &&
                  sizeof(Bars) <= sizeof(mla_wide8_tail::bars),
              "wide FP8 layout alignment and barrier block");

/* The CTA's work from what it read before its roles split (cta_start). */
MLA_DEV void take_work(const mla_decode_params &p, const CtaStart &start, Cta &c)
{
    fill_work(p, kBN, start.piece, start.len, c);
    c.page0 = start.page0;
}

/* The work of this CTA (take_work) and its buffers; false only if the launch does not match.
 * NARROW picks the layout.  The launch matches here (decode traps
 * otherwise); the roles ask again to keep their code as measured
 * (without the test ptxas allocates their registers differently). */
template <int FMT, bool NARROW>
MLA_DEV bool setup(const mla_decode_params &p, const CtaStart &start, Cta &c)
{
    if (!launch_matches<FMT, NARROW>(p))
        return false;
    layout<FMT, NARROW>(p, c);
    take_work(p, start, c);
    return true;
}

} /* namespace hopper */
} /* namespace mla */

#endif /* MLA_HOPPER_LAYOUT_CUH */
