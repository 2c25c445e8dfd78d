/*
 * decode.cu - the MLA decode kernels: one CTA computes 64 packed query
 * rows of one (request, KV head, piece) over that piece's KV tiles, with
 * a load / convert / MMA pipeline in shared memory.
 *
 * Rows: r = qi * heads_per_kv + hh (query token qi, head hh of the KV
 * head's group); CTA x covers rows [64x, 64x + 64).
 *
 * Warp roles (512 threads, four warpgroups, so setmaxnreg is legal):
 *   warps 0-7   MMA + softmax + epilogue.  Warp w owns rows 16 (w & 3) ..
 *               +15 and O columns 256 (w >> 2) .. +255; both column
 *               halves compute the same S.  Registers raised to 216.
 *   warps 8-11  converter (FP8 formats): FP8 rows -> BF16 rows in place.
 *               Idle for BF16.  Registers lowered to 40.
 *   warp 12     loader: Q once, then per KV tile one bulk copy per valid
 *               row, gathered through the block table (any page size);
 *               E4M3 block scales by 4-byte cp.async into the row's tail.
 *               Registers lowered to 40 (warps 13-15, same warpgroup,
 *               only lower theirs).
 *
 * Shared memory: [0, 1024) mbarriers; the Q tile (64 rows of 1168 bytes);
 * num_stages stages of BN rows of 1168 bytes (see convert.cuh for the row
 * layout: FP8 rows are staged inside the row they convert into).
 *
 * Barriers (per stage s; counts are arrivals per phase):
 *   loaded[s]    count 32: each loader lane arrives once per tile after
 *                its copies are issued and its st.shared writes (zero
 *                rows) are done; with E4M3 block scales that arrival is a
 *                cp.async.mbarrier.arrive.noinc, made when the lane's
 *                scale copies have landed; lane 0 first registers the
 *                tile's bytes (valid rows * row bytes) with expect_tx, so
 *                the phase completes when all rows have landed.
 *   converted[s] count 128: every converter thread arrives after writing
 *                its rows and fence.proxy.async (the next bulk copy into
 *                the stage must follow those generic writes).  FP8 only.
 *   free[s]      count 256: every MMA thread arrives when it no longer
 *                reads the stage (all MMA warps arrive, live or not).
 *   q            count 32, like loaded.
 * The MMA warps wait on converted[s] (FP8) or loaded[s] (BF16); the
 * converter waits on loaded[s]; the loader waits on free[s] with the
 * opposite parity (its first pass does not block).  The loader can only
 * refill a stage after the MMA warps freed it, and they only free it after
 * the converter finished it, so one ring position per role suffices.
 * Every role runs the same number of tiles, and every early exit happens
 * before the barriers are initialized, by the whole CTA.
 *
 * SPDX-License-Identifier: MIT
 */
#include "mla_params.h"
#include "ptx.cuh"
#include "pipeline.cuh"
#include "convert.cuh"
#include "mma.cuh"
#include "softmax.cuh"
#include "schedule.cuh"
#include "epilogue.cuh"

namespace mla {

constexpr int kMmaRegs = 216, kCvtRegs = 40, kLoadRegs = 40; /* 2*216 + 40 + 40 = 4 * 128 */
constexpr uint32_t kRow = MLA_SMEM_ROW_BF16;
constexpr uint32_t kBarLoaded = 0, kBarConverted = 32, kBarFree = 64, kBarQ = 96;

/* What every role of the CTA knows: its work and the shared-memory map. */
struct Cta : CtaWork {
    uint32_t stages;
    uint32_t bars; /* shared address of the barrier block */
    uint32_t sq;   /* Q tile */
    uint32_t skv;  /* stage 0 */
};

template <int BN>
MLA_DEV uint32_t stage_addr(const Cta &c, uint32_t s)
{
    return c.skv + s * (uint32_t)BN * kRow;
}

/* ---- loader (warp 12) ---- */

template <int FMT, int BN>
MLA_DEV void load_role(const mla_decode_params &p, const Cta &c, uint32_t lane)
{
    constexpr uint32_t RB = FMT == MLA_FMT_BF16 ? 1152 : FMT == MLA_FMT_FP8_E4M3 ? 576 : 656;
    constexpr uint32_t DST = FMT == MLA_FMT_BF16 ? 0 : MLA_STAGE_FP8_OFFSET;
    const uint64_t pol_q = policy_evict_normal();
    const uint64_t pol_kv = policy_kv_stream();
    const uint32_t bar_q = c.bars + kBarQ;

    /* Q: rows past `rows` are zeros (their scores are never used, but
     * they must not be NaN garbage inside the MMA). */
    if (lane == 0)
        mbar_expect_tx(bar_q, (uint32_t)c.rows_here * (MLA_D_QK * 2));
    __syncwarp();
    for (int r = (int)lane; r < MLA_BLOCK_M; r += 32) {
        const uint32_t dst = c.sq + (uint32_t)r * kRow;
        if (r < c.rows_here) {
            const int64_t qrow = q_row_index(p, c, r);
            bulk_g2s(dst, (const uint8_t *)p.q + qrow * (MLA_D_QK * 2), MLA_D_QK * 2, bar_q, pol_q);
        } else {
            zero_row_thread(dst);
        }
    }
    mbar_arrive(bar_q);

    const Pipe load = {c.bars + kBarLoaded, c.bars + kBarFree};
    const int32_t *bt = (const int32_t *)p.block_table + (int64_t)c.b * p.max_pages_per_seq;
    const uint8_t *kv = (const uint8_t *)p.kv;
    const float *scales = (const float *)p.scales;
    const int spr = FMT == MLA_FMT_FP8_E4M3 ? p.scales_per_row : 0;
    const int pmask = p.page_size - 1, pshift = p.page_shift;
    PipeState st;
    st.init();
    for (int t = c.t0; t < c.t1; t++) {
        load.producer_acquire(st);
        const uint32_t stage = stage_addr<BN>(c, st.stage);
        const uint32_t bar = load.full_bar(st);
        const int j0 = t * BN;
        const int nvalid = min(BN, c.len - j0); /* >= 1: t < ceil(len / BN) */
        if (lane == 0)
            mbar_expect_tx(bar, (uint32_t)nvalid * RB);
        __syncwarp();
        bool zeroed = false;
#pragma unroll
        for (int i = 0; i < BN / 32; i++) {
            const int r = (int)lane + 32 * i;
            const uint32_t row = stage + (uint32_t)r * kRow;
            if (r < nvalid) {
                const int j = j0 + r;
                const int64_t page = page_at(p, bt, j >> pshift);
                const int64_t idx = ((page << pshift) + (j & pmask)) * p.h_kv + c.kh;
                bulk_g2s(row + DST, kv + idx * RB, RB, bar, pol_kv);
                if (FMT == MLA_FMT_FP8_E4M3 && spr > 0) {
                    /* 20-72 bytes at a 4-byte alignment: not bulk-copyable. */
                    const float *src = scales + idx * spr;
                    for (int k = 0; k < spr; k++)
                        cp_async_4(row + MLA_STAGE_SCALE_OFFSET + 4u * k, src + k);
                }
            } else if (FMT == MLA_FMT_BF16) {
                /* V rows past the length must be zeros: P is 0 there, but
                 * 0 * NaN is not.  (The converter zeroes FP8 rows.) */
                zero_row_thread(row);
                zeroed = true;
            }
        }
        if (FMT == MLA_FMT_BF16 && zeroed)
            fence_proxy_async(); /* a later bulk copy overwrites these rows */
        if (FMT == MLA_FMT_FP8_E4M3 && spr > 0)
            cp_async_mbar_arrive_noinc(bar); /* this lane's arrival, once its scales landed */
        else
            load.producer_commit(st);
        st.advance(c.stages);
    }
}

/* ---- converter (warps 8-11, FP8 formats) ---- */

template <int FMT, int BN>
MLA_DEV void convert_role(const mla_decode_params &p, const Cta &c, uint32_t cw, uint32_t lane)
{
    int gshift = 0;
    if (FMT == MLA_FMT_FP8_E4M3 && p.scales_per_row > 0)
        gshift = 31 - __clz(p.scale_block);
    PipeState st;
    st.init();
    for (int t = c.t0; t < c.t1; t++) {
        mbar_wait(c.bars + kBarLoaded + 8u * st.stage, st.phase);
        const uint32_t stage = stage_addr<BN>(c, st.stage);
        const uint32_t nvalid = (uint32_t)min(BN, c.len - t * BN);
        /* Warp cw converts rows {8q + 2cw, 8q + 2cw + 1}. */
#pragma unroll 1
        for (uint32_t r = 2 * cw; r < (uint32_t)BN; r += 8)
            convert_row_pair<FMT>(stage + r * kRow, r, nvalid, lane, gshift);
        fence_proxy_async(); /* the loader later overwrites these rows by bulk copy */
        mbar_arrive(c.bars + kBarConverted + 8u * st.stage);
        st.advance(c.stages);
    }
}

/* ---- MMA + softmax + epilogue (warps 0-7) ---- */

template <int FMT, int BN>
MLA_DEV void mma_role(const mla_decode_params &p, const Cta &c, uint32_t warp, uint32_t lane)
{
    constexpr int NT = BN / 8; /* n-tiles of S */
    const uint32_t rg = warp & 3u, ch = warp >> 2;
    const uint32_t g = lane >> 2, tq = lane & 3u;
    const bool live = (int)(16u * rg) < c.rows_here; /* warp-uniform */

    int lim[2];
    row_limits(p, c, (int)(16u * rg + g), lim);

    float o[32][4];
#pragma unroll
    for (int i = 0; i < 32; i++)
        o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
    OnlineSoftmax sm;
    sm.init();

    const uint32_t qa = c.sq + 16u * rg * kRow + frag_a_offset(lane);
    const uint32_t kofs = frag_bk_offset(lane);
    const uint32_t vofs = frag_bv_offset(lane) + ch * 512u; /* 256 bf16 columns */
    const uint32_t ready = c.bars + (FMT == MLA_FMT_BF16 ? kBarLoaded : kBarConverted);
    const uint32_t freeb = c.bars + kBarFree;
    /* DS_MLA: kv_scale (out_scale) scales the nope dims only, but it is
     * folded into score_scale_log2 for the whole product, so the RoPE part
     * is divided back out first (no rounding for a power-of-two kv_scale). */
    const float rope_factor = FMT == MLA_FMT_FP8_DS_MLA ? __frcp_rn(p.out_scale) : 1.0f;

    mbar_wait(c.bars + kBarQ, 0);
    PipeState st;
    st.init();
    for (int t = c.t0; t < c.t1; t++) {
        mbar_wait(ready + 8u * st.stage, st.phase);
        if (live) {
            const uint32_t stage = stage_addr<BN>(c, st.stage);
            float s[NT][4];
            mma_qk<NT, FMT == MLA_FMT_FP8_DS_MLA>(s, qa, stage + kofs, rope_factor);
            float alpha[2];
            sm.update<NT>(s, p.score_scale_log2, t * BN + 2 * (int)tq, lim, alpha);
            if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f))
                scale_rows(o, alpha);
            uint32_t pf[NT / 2][4];
            p_to_frags<NT>(s, pf);
            mma_pv<NT / 2>(o, pf, stage + vofs);
        }
        mbar_arrive(freeb + 8u * st.stage);
        st.advance(c.stages);
    }

    /* The combine kernel may start launching; its griddepcontrol.wait
     * still waits for this grid to finish and its writes to be visible. */
    if (warp == 0 && lane == 0)
        griddep_launch_dependents();

    float lsum[2];
    sm.finish(lsum);
    if (!live)
        return;
    write_output(p, c, o, sm.m, lsum, (int)(16u * rg + g), ch, tq);
}

/* Whether this launch matches the instantiation.  The host launches each
 * kernel only with a plan made for it, so a mismatch is a library bug:
 * the kernel traps rather than hang or overrun shared memory. */
template <int FMT, int BN>
MLA_DEV bool launch_matches(const mla_decode_params &p)
{
    return p.kv_format == FMT && p.block_n == BN && p.num_stages >= 1 &&
           p.num_stages <= MLA_MAX_STAGES;
}

/* What a CTA works on; false if it has nothing to do.  Uniform over the
 * CTA.  The launch matches here (decode traps otherwise); the roles ask
 * again because without the test ptxas allocates their registers
 * differently (the bf16 n64 kernel then spills on sm_100a). */
template <int FMT, int BN>
MLA_DEV bool cta_setup(const mla_decode_params &p, Cta &c)
{
    extern __shared__ __align__(1024) uint8_t smem[];
    if (!launch_matches<FMT, BN>(p))
        return false;
    if (!cta_work(p, BN, c))
        return false;
    c.stages = (uint32_t)p.num_stages;
    c.bars = smem_u32(smem);
    c.sq = c.bars + MLA_DECODE_SMEM_BARRIERS;
    c.skv = c.sq + MLA_BLOCK_M * kRow;
    return true;
}

template <int FMT, int BN>
MLA_DEV void decode(const mla_decode_params &p)
{
    extern __shared__ __align__(1024) uint8_t smem[];

    griddep_wait(); /* the schedule; Q, the cache */
    if (!launch_matches<FMT, BN>(p))
        __trap();
    if (!cta_has_work(p)) {
        if (threadIdx.x == 0)
            report_bad_call(p);
        return;
    }
    if (threadIdx.x == 0) {
        const uint32_t bars = smem_u32(smem);
        for (uint32_t s = 0; s < MLA_MAX_STAGES; s++) {
            mbar_init(bars + kBarLoaded + 8u * s, 32);
            mbar_init(bars + kBarConverted + 8u * s, 128);
            mbar_init(bars + kBarFree + 8u * s, 256);
        }
        mbar_init(bars + kBarQ, 32);
        fence_mbar_init();
    }
    __syncthreads();

    /* Warp index made visibly uniform, so each role is one branch.  The
     * same loads as above decide the same way (nothing writes them while
     * the grid runs). */
    const uint32_t warp = __shfl_sync(0xffffffffu, threadIdx.x >> 5, 0);
    const uint32_t lane = threadIdx.x & 31u;
    Cta c;
    if (warp < 8) {
        setmaxnreg_inc<kMmaRegs>();
        cta_setup<FMT, BN>(p, c);
        mma_role<FMT, BN>(p, c, warp, lane);
    } else if (warp < 12) {
        setmaxnreg_dec<kCvtRegs>();
        if (FMT != MLA_FMT_BF16) {
            cta_setup<FMT, BN>(p, c);
            convert_role<FMT, BN>(p, c, warp - 8, lane);
        }
    } else {
        setmaxnreg_dec<kLoadRegs>();
        if (warp == 12) {
            cta_setup<FMT, BN>(p, c);
            load_role<FMT, BN>(p, c, lane);
        }
    }
}

} /* namespace mla */

#define MLA_DECODE_KERNEL(name, fmt, bn)                                                        \
    extern "C" __global__ void __launch_bounds__(MLA_DECODE_THREADS, 1)                         \
        name(const __grid_constant__ mla_decode_params p)                                       \
    {                                                                                           \
        mla::decode<fmt, bn>(p);                                                                \
    }

MLA_DECODE_KERNEL(mla_decode_bf16_n32, MLA_FMT_BF16, 32)
MLA_DECODE_KERNEL(mla_decode_bf16_n64, MLA_FMT_BF16, 64)
MLA_DECODE_KERNEL(mla_decode_e4m3_n32, MLA_FMT_FP8_E4M3, 32)
MLA_DECODE_KERNEL(mla_decode_e4m3_n64, MLA_FMT_FP8_E4M3, 64)
MLA_DECODE_KERNEL(mla_decode_dsmla_n32, MLA_FMT_FP8_DS_MLA, 32)
MLA_DECODE_KERNEL(mla_decode_dsmla_n64, MLA_FMT_FP8_DS_MLA, 64)
