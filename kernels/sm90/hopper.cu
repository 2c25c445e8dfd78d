/*
 * hopper.cu - the sm_90a MLA decode kernels: TMA loads or bulk copies,
 * FP8 -> BF16 / f16 conversion in registers and wgmma, in three layouts.
 * One CTA computes the packed query rows of one (request, KV head, piece)
 * over that piece's 64-key tiles; the work split is the scheduler's
 * (schedule.cuh), the output the same as the portable kernels'
 * (epilogue.cuh), so mla_combine serves all.
 *
 *   mla_hopper_decode_bf16 wide BF16: 64 rows per CTA M tile, any row
 *                          count, two 72-KB stages beside a 72-KB Q tile,
 *                          the warpgroups on alternate tiles
 *                          (hopper_seesaw.cuh);
 *   mla_hopper_narrow_bf16 narrow: at most 16 rows, transposed MMAs
 *                          (hopper_narrow.cuh; a 18-KB Q tile);
 *   mla_hopper_narrow_<f8> narrow FP8: the same MMAs with A built in
 *                          registers from the FP8 stage by the consumers
 *                          (hopper_narrow_fp8.cuh; 4-5 FP8 stages);
 *   mla_hopper_wide8_<f8>  wide FP8 the same way, 64 rows as N, any row
 *                          count, the warpgroups on alternate tiles'
 *                          scores and each on half of O^T
 *                          (hopper_wide8.cuh; 3 FP8 stages, 384 threads:
 *                          decode_wide8).
 *
 * Warp roles of the narrow kernels (512 threads; setmaxnreg budgets
 * below):
 *   warps 0-7   two consumer warpgroups;
 *   warps 8-11  converter warpgroup: the Q tile (hopper_convert.cuh);
 *   warp 12     loader, one elected lane (hopper_load.cuh).
 * The wide kernels have 384 threads and no converter
 * (MLA_HOPPER_LEAN_THREADS; the P V wgmmas of mla_hopper_decode_bf16 are
 * m64n256, which need more than the 128 registers a thread of 512 starts
 * with):
 *   warps 0-7   two consumer warpgroups, which also load Q;
 *   warp 8      loader, one elected lane; warps 9-11 only complete its
 *               warpgroup.
 *
 * BF16 stage (73728 bytes, 9 chunks of 64 rows x 128 bytes, the swizzled
 * layout of wgmma.cuh): TMA writes all 9 chunks directly (the wide
 * kernel's in two parts, chunks 0-3 and 4-7 a copy each:
 * hopper_load.cuh).  FP8 stage: the
 * tile's 64 rows row-major, as bulk copies (one; one a row with more KV
 * heads): E4M3's 576 bytes a row, then the block scales; DS_MLA's 656
 * (nope, scales at 512, RoPE at 528).
 *
 * Barriers (per stage s; arrivals per phase):
 *   loaded[s]    1: the loader's arrive.expect_tx; completes when every
 *                byte of the tile (and its scales) has landed.  Narrow
 *                FP8: of consumer warpgroup 0's tiles; loaded1[s] of
 *                warpgroup 1's (each waits on every phase of its own).
 *                Wide BF16: loaded[2 s + w] of part w of the stage
 *                (part_chunks, hopper_layout.cuh).
 *   free[s]      256: consumer threads, once P V of the tile completed
 *                (narrow FP8: 128, the one warpgroup that took the tile;
 *                wide BF16: free[2 s + w], 128, warpgroup w done with
 *                part w).
 *   q            128: converter warpgroup threads after writing Q
 *                (mla_hopper_decode_bf16: 256, the consumer threads);
 *                the BF16 loader waits on it before its second tile.
 *   to_wg1/to_wg0 128 (wide BF16): one consumer warpgroup handing its
 *                running maximum (and P) to the other, once per tile pair.
 *   sums         256 (wide BF16): the consumers' row sums exchanged, used
 *                once.
 *   p_full/p_free (wide FP8, in the per-layout words) 128 / 256: a
 *                warpgroup published P in its slot / both warpgroups' P V
 *                of it retired (hopper_wide8.cuh); fin[3] 256, used once.
 *
 * SPDX-License-Identifier: MIT
 */
#include "mla_params.h"
#include "ptx.cuh"

/* Only sm_90a has wgmma: the other images of this file hold no kernel
 * (the host looks these up on compute capability 9.0 only). */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#include "hopper_layout.cuh"
#include "hopper_load.cuh"
#include "hopper_convert.cuh"
#include "hopper_seesaw.cuh"
#include "hopper_narrow.cuh"
#include "hopper_narrow_fp8.cuh"
#include "hopper_wide8.cuh"

namespace mla {
namespace hopper {

/* Registers per thread of each role.  They add up to the block's entry
 * allocation, which setmaxnreg.inc waits for (asking more would never
 * return): 512 threads, 2 x consumers + converter + loader = 4 x 128; the
 * converter warpgroup writes Q, with 56 registers for BF16 (narrow BF16)
 * and 40 for the permuted FP8 tile (narrow FP8, whose consumers convert
 * in registers and get the rest).  384 threads (no converter), 2 x
 * consumers + loader = 3 x 168: the loader's warpgroup keeps the 40 its
 * code runs in in the other kernels, the consumers get the rest. */
template <int FMT, bool NARROW>
struct RegsT {
    static constexpr bool kCvtLight = kFp8Direct<FMT, NARROW>;
    static constexpr bool kNoCvt = kNoConverter<FMT, NARROW>;
    static constexpr int kConsumer = kNoCvt ? 232 : kCvtLight ? 216 : 208;
    static constexpr int kCvt = kNoCvt ? 0 : kCvtLight ? 40 : 56;
    static constexpr int kLoad = 40;
    static constexpr uint32_t kBlock = kThreads<FMT, NARROW>;
    static_assert(kBlock == (kNoCvt ? 3u : 4u) * 128u,
                  "warpgroups: two consumers, the converter, the loader's");
    static_assert(2 * kConsumer + kCvt + kLoad == (int)kBlock / 128 * mla_entry_regs(kBlock),
                  "register budget");
};

template <int FMT, bool NARROW>
MLA_DEV void init_barriers(const Cta &c)
{
    if (!NARROW) {
        /* Wide BF16: a barrier pair per part of a stage, each part freed
         * by one warpgroup (part_chunks). */
        for (uint32_t i = 0; i < kStages * kParts; i++) {
            mbar_init(c.bars + kBarLoaded + 8u * i, 1);
            mbar_init(c.bars + kBarFree + 8u * i, 128);
        }
    } else {
        /* Narrow FP8: one warpgroup consumes each tile. */
        const uint32_t consumers = kFp8Direct<FMT, NARROW> ? 128u : 256u;
        for (uint32_t s = 0; s < kNumStages<FMT, NARROW>; s++) {
            mbar_init(c.bars + kBarLoaded + 8u * s, 1);
            mbar_init(c.bars + kBarFree + 8u * s, consumers);
        }
    }
    if (kFp8Direct<FMT, NARROW>) {
        for (uint32_t s = 0; s < kNumStages<FMT, NARROW>; s++)
            mbar_init(c.bars + kBarLoaded1 + 8u * s, 1);
        for (uint32_t k = 0; k < 4; k++)
            mbar_init(c.bars + kBarMerge + 8u * k, 256);
    }
    if (!NARROW) {
        mbar_init(c.bars + kBarSums, 256);
        mbar_init(c.bars + kBarToWg1, 128);
        mbar_init(c.bars + kBarToWg0, 128);
    }
    /* q: the converter warpgroup, or both consumer warpgroups without it. */
    mbar_init(c.bars + kBarQ, kNoConverter<FMT, NARROW> ? 256u : 128u);
    fence_mbar_init();
}

/* The narrow kernels and the wide BF16 one. */
template <int FMT, bool NARROW>
MLA_DEV void decode(const mla_hopper_params &hp)
{
    static_assert(NARROW || FMT == MLA_FMT_BF16, "the wide FP8 kernels are decode_wide8's");
    using R = RegsT<FMT, NARROW>;
    const mla_decode_params &p = hp.p;
    griddep_wait(); /* the schedule; Q, the cache */
    if (!launch_matches<FMT, NARROW>(p))
        __trap();
    const CtaStart start = cta_start(p, kBN);
    if (!start.work) {
        if (threadIdx.x == 0)
            report_bad_call(p);
        return;
    }
    Cta c0;
    layout<FMT, NARROW>(p, c0);
    if (threadIdx.x == 0)
        init_barriers<FMT, NARROW>(c0);
    __syncthreads();

    /* Warp index made visibly uniform, so each role is one branch. */
    const uint32_t warp = __shfl_sync(0xffffffffu, threadIdx.x >> 5, 0);
    const uint32_t lane = threadIdx.x & 31u;
    Cta c;
    if (warp < 8) {
        setmaxnreg_inc<R::kConsumer>();
        setup<FMT, NARROW>(p, start, c);
        if constexpr (kFp8Direct<FMT, NARROW>) {
            NarrowFp8Consumer<FMT> cons(p, c, warp >> 2, warp & 3u, lane);
            cons.run();
        } else if constexpr (NARROW) {
            NarrowConsumer cons(p, c, warp >> 2, warp & 3u, lane);
            cons.run();
        } else {
            if (threadIdx.x == 0)
                trace_cta(p, false, c.t0, c.t1, c.b, c.kh);
            SeesawConsumer cons(p, c, warp >> 2, warp & 3u, lane);
            cons.run();
            if (threadIdx.x == 0)
                trace_cta(p, true, c.t0, c.t1, c.b, c.kh);
        }
    } else if constexpr (kNoConverter<FMT, NARROW>) {
        /* Warps 8-11 (the setmaxnreg of a warpgroup is executed by all
         * four warps): warp 8 loads. */
        setmaxnreg_dec<R::kLoad>();
        if (warp == 8 && elect_one()) {
            setup<FMT, NARROW>(p, start, c);
            load_role<FMT, NARROW, kFp8Direct<FMT, NARROW>>(hp, c);
        }
    } else if (warp < 12) {
        setmaxnreg_dec<R::kCvt>();
        setup<FMT, NARROW>(p, start, c);
        convert_role<FMT, NARROW>(p, c, threadIdx.x - 256u);
    } else {
        setmaxnreg_dec<R::kLoad>();
        if (warp == 12 && elect_one()) {
            setup<FMT, NARROW>(p, start, c);
            load_role<FMT, NARROW, kFp8Direct<FMT, NARROW>>(hp, c);
        }
    }
}

/* The wide FP8 kernels (hopper_wide8.cuh): warps 0-7 consumers, warp 8
 * the loader (the narrow FP8 kernels' bulk copies), 9-11 idle; the
 * consumers load the Q tile themselves.  setmaxnreg moves registers
 * within the block's launch allocation: 3 warpgroups x 168. */
constexpr int kWide8Consumer = 240, kWide8Load = 24;
static_assert(MLA_HOPPER_LEAN_THREADS == 3 * 128 &&
                  2 * kWide8Consumer + kWide8Load == 3 * mla_entry_regs(MLA_HOPPER_LEAN_THREADS),
              "register budget: three warpgroups");

/* SCALED: block scales (DS_MLA; E4M3 with scales_per_row > 0).  The two
 * E4M3 consumers are two kernels: in one, ptxas spilled 116-192 bytes
 * that neither spills alone. */
template <int FMT, bool SCALED>
MLA_DEV void decode_wide8(const mla_hopper_params &hp)
{
    const mla_decode_params &p = hp.p;
    griddep_wait(); /* the schedule; Q, the cache */
    if (!wide8_launch_matches<FMT>(p) ||
        (FMT == MLA_FMT_FP8_DS_MLA || p.scales_per_row > 0) != SCALED)
        __trap();
    const CtaStart start = cta_start(p, kBN);
    if (!start.work) {
        if (threadIdx.x == 0)
            report_bad_call(p);
        return;
    }
    Cta c0;
    wide8_layout<FMT>(p, c0);
    if (threadIdx.x == 0)
        init_wide8_barriers<FMT>(c0);
    __syncthreads();
    const uint32_t warp = __shfl_sync(0xffffffffu, threadIdx.x >> 5, 0);
    const uint32_t lane = threadIdx.x & 31u;
    Cta c;
    if (warp < 8) {
        setmaxnreg_inc<kWide8Consumer>();
        wide8_layout<FMT>(p, c);
        take_work(p, start, c);
        Wide8Consumer<FMT, SCALED> cons(p, c, warp >> 2, warp & 3u, lane);
        cons.run();
    } else {
        setmaxnreg_dec<kWide8Load>();
        if (warp == 8 && elect_one()) {
            wide8_layout<FMT>(p, c);
            take_work(p, start, c);
            load_role<FMT, true>(hp, c);
        }
    }
}

} /* namespace hopper */
} /* namespace mla */

#define MLA_HOPPER_KERNEL(name, fmt, narrow)                                                    \
    extern "C" __global__ void __launch_bounds__(mla::hopper::kThreads<fmt, narrow>, 1)         \
        name(const __grid_constant__ mla_hopper_params hp)                                      \
    {                                                                                           \
        mla::hopper::decode<fmt, narrow>(hp);                                                   \
    }

MLA_HOPPER_KERNEL(mla_hopper_decode_bf16, MLA_FMT_BF16, false)
MLA_HOPPER_KERNEL(mla_hopper_narrow_bf16, MLA_FMT_BF16, true)
MLA_HOPPER_KERNEL(mla_hopper_narrow_e4m3, MLA_FMT_FP8_E4M3, true)
MLA_HOPPER_KERNEL(mla_hopper_narrow_dsmla, MLA_FMT_FP8_DS_MLA, true)

#define MLA_WIDE8_KERNEL(name, fmt, scaled)                                                     \
    extern "C" __global__ void __launch_bounds__(MLA_HOPPER_LEAN_THREADS, 1)                    \
        name(const __grid_constant__ mla_hopper_params hp)                                      \
    {                                                                                           \
        mla::hopper::decode_wide8<fmt, scaled>(hp);                                             \
    }

MLA_WIDE8_KERNEL(mla_hopper_wide8_e4m3, MLA_FMT_FP8_E4M3, false)
MLA_WIDE8_KERNEL(mla_hopper_wide8_e4m3b, MLA_FMT_FP8_E4M3, true)
MLA_WIDE8_KERNEL(mla_hopper_wide8_dsmla, MLA_FMT_FP8_DS_MLA, true)

#endif /* __CUDA_ARCH_FEAT_SM90_ALL */
