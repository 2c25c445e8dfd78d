/*
 * hopper.cu - the sm_90a MLA decode kernels: TMA loads, an FP8 -> BF16
 * converter warpgroup and wgmma.  One CTA computes 64 packed query rows of
 * one (request, KV head, split) over that split's 64-key tiles; the work
 * split is the scheduler's (schedule.cuh), the output the same as the
 * portable kernels' (epilogue.cuh), so mla_combine serves both.
 *
 * Warp roles (512 threads; setmaxnreg 208 / 56 / 40 (consumers / converter WG / loader WG)):
 *   warps 0-7   two consumer warpgroups.  WG w computes the scores of keys
 *               32 w .. 32 w + 31 of the tile for all 64 rows (wgmma
 *               m64n32k16 over 576 dims, so each score is computed once),
 *               exchanges row maxima with the other WG through shared
 *               memory, writes its half of P (bf16) into the stage's RoPE
 *               chunk (which P V does not read), and after a barrier
 *               accumulates O[:, 256 w .. 256 w + 255] += P V with wgmma
 *               m64n128k16 x 2 (A = P, B = V read N-major from the same
 *               tile).  When tile t + 1 is already in shared memory its
 *               scores are queued ahead of P V of tile t, and its softmax
 *               runs while the tensor cores finish P V.
 *   warps 8-11  converter warpgroup: loads Q once (bf16 global -> the
 *               swizzled tile), converts each landed FP8 tile to BF16 in
 *               place, writing zeros for rows at or past the length.
 *   warp 12     loader (one elected lane): per tile one TMA box per 64
 *               columns through the block table; E4M3 block scales by one
 *               bulk copy; DS_MLA scales and RoPE by their own boxes.
 *
 * Stage layout (73728 bytes, 9 chunks of 64 rows x 128 bytes, the
 * swizzled layout of wgmma.cuh):
 *   BF16:   TMA writes all 9 chunks directly.
 *   E4M3:   TMA lands chunk c's 64 x 64 FP8 bytes at 36864 + 4096 c; the
 *           converter writes BF16 chunk c over [8192 c, 8192 c + 8192).
 *   DS_MLA: nope chunk c lands at 32768 + 4096 c (c < 8), the RoPE (bf16)
 *           is written by TMA straight into chunk 8, the scales into the
 *           stage's scale area.
 *   Writing chunk c overwrites only FP8 chunks <= c, so the converter
 *   writes chunks 0-3 at once and later ones in steps of two: read,
 *   sync, write.
 *
 * Barriers (per stage s; arrivals per phase):
 *   loaded[s]    1: the loader's arrive.expect_tx; completes when every
 *                byte of the tile (and its scales) has landed.
 *   converted[s][g] 128 (FP8): converter threads, after fence.proxy.async,
 *                once chunk group g (chunks 0-2, 3-5, 6-8) is BF16: QK
 *                starts on group 0 while the rest is converted.
 *   free[s]      256: consumer threads, once P V of the tile completed;
 *                before they block on a tile that is not ready yet.
 *   q            128: converter warpgroup threads after writing Q.
 * Named barriers (bar.sync ids): 1 row maxima, 2 P written, 3 BF16 tail
 * zeroed, 5 final sums (the two consumer WGs, 256 threads); 4 the
 * converter (128); 6 and 7 consumer WG 0 / 1 alone (to make a
 * decision uniform over the warpgroup).
 *
 * SPDX-License-Identifier: MIT
 */
#include "mla_params.h"
#include "ptx.cuh"
#include "pipeline.cuh"
#include "convert.cuh"
#include "wgmma.cuh"
#include "softmax.cuh"
#include "schedule.cuh"
#include "epilogue.cuh"

/* Only sm_90a has wgmma; other targets get empty kernels. */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define MLA_HOPPER_BUILD 1
#else
#define MLA_HOPPER_BUILD 0
#endif

#if MLA_HOPPER_BUILD
namespace mla {
namespace hopper {

constexpr int kConsumerRegs = 208, kCvtRegs = 56, kLoadRegs = 40; /* 2*208+56+40 = 4*128 */
constexpr uint32_t kBN = MLA_HOPPER_BLOCK_N, kStages = MLA_HOPPER_STAGES;
constexpr uint32_t kChunk = 8192, kTile = MLA_HOPPER_TILE_BYTES;
/* Barrier block: loaded[2], free[2], q, converted[2][3]; at 96 one flag
 * word per consumer WG. */
constexpr uint32_t kBarLoaded = 0, kBarFree = 16, kBarQ = 32, kBarConverted = 40;
/* Chunk groups the converter releases one by one (QK starts on the first
 * while the rest is converted): E4M3 chunks {0-2, 3-5, 6-8}, DS_MLA nope
 * chunks {0-2, 3-5, 6-7}. */
constexpr int kGroups = 3;
MLA_DEV uint32_t converted_bar(uint32_t bars, uint32_t stage, int grp)
{
    return bars + kBarConverted + 8u * (kGroups * stage + grp);
}
constexpr uint32_t kNbMax = 1, kNbP = 2, kNbTail = 3, kNbCvt = 4, kNbSum = 5, kNbWg0 = 6;

struct Cta : CtaWork {
    uint32_t sq;     /* Q tile */
    uint32_t skv;    /* stage 0 */
    uint32_t sscl;   /* scale area of stage 0 */
    uint32_t xchg;   /* fp32 [2][64]: per consumer WG, one value per row */
    uint32_t bars;
    MLA_DEV uint32_t stage(uint32_t s) const { return skv + s * kTile; }
    MLA_DEV uint32_t scales(uint32_t s) const { return sscl + s * MLA_HOPPER_SCALE_BYTES; }
};

template <int FMT>
MLA_DEV bool setup(const mla_decode_params &p, Cta &c)
{
    extern __shared__ __align__(1024) uint8_t smem[];
    if (p.kv_format != FMT || p.block_n != (int)kBN || p.num_stages != (int)kStages ||
        p.page_size < (int)kBN)
        return false;
    if (!cta_work(p, kBN, c))
        return false;
    const uint32_t base = (smem_u32(smem) + 1023u) & ~1023u;
    c.sq = base;
    c.skv = base + MLA_HOPPER_OFF_STAGES;
    c.sscl = base + MLA_HOPPER_OFF_SCALES;
    c.xchg = base + MLA_HOPPER_OFF_XCHG;
    c.bars = base + MLA_HOPPER_OFF_BARS;
    return true;
}

/* ---- loader (one lane of warp 12) ---- */

template <int FMT>
MLA_DEV void load_role(const mla_hopper_params &hp, const Cta &c)
{
    const mla_decode_params &p = hp.p;
    const void *map0 = &hp.kv_map[0], *map1 = &hp.kv_map[1], *map2 = &hp.kv_map[2];
    prefetch_tensormap(map0);
    if (FMT == MLA_FMT_FP8_DS_MLA) {
        prefetch_tensormap(map1);
        prefetch_tensormap(map2);
    }
    /* KV read by one CTA only: let it leave L2 first. */
    const uint64_t pol = p.m_blocks == 1 ? policy_evict_first() : policy_evict_normal();
    const int32_t *bt = (const int32_t *)p.block_table + (int64_t)c.b * p.max_pages_per_seq;
    const int spr = FMT == MLA_FMT_FP8_E4M3 ? p.scales_per_row : 0;
    const uint32_t sbytes = kBN * 4u * (uint32_t)spr;
    const uint32_t bytes = FMT == MLA_FMT_BF16       ? kTile
                           : FMT == MLA_FMT_FP8_E4M3 ? kTile / 2 + sbytes
                                                     : 8u * 4096u + kBN * 16u + kChunk;
    const int pshift = p.page_shift, pmask = p.page_size - 1;
    const Pipe pipe = {c.bars + kBarLoaded, c.bars + kBarFree};
    PipeState st;
    st.init();
    int page = c.t0 < c.t1 ? bt[(c.t0 * (int)kBN) >> pshift] : 0;
    for (int t = c.t0; t < c.t1; t++) {
        const int row0 = (page << pshift) + ((t * (int)kBN) & pmask);
        const int next = t + 1 < c.t1 ? bt[((t + 1) * (int)kBN) >> pshift] : 0;
        pipe.producer_acquire(st);
        const uint32_t bar = pipe.full_bar(st), stg = c.stage(st.stage);
        mbar_arrive_expect_tx(bar, bytes);
        if (FMT == MLA_FMT_BF16) {
#pragma unroll
            for (int k = 0; k < 9; k++)
                tma_load_3d(stg + k * kChunk, map0, 64 * k, c.kh, row0, bar, pol);
        } else if (FMT == MLA_FMT_FP8_E4M3) {
#pragma unroll
            for (int k = 0; k < 9; k++)
                tma_load_3d(stg + kTile / 2 + 4096u * k, map0, 64 * k, c.kh, row0, bar, pol);
            if (spr > 0) /* h_kv == 1: the tile's scales are contiguous */
                bulk_g2s(c.scales(st.stage), (const float *)p.scales + (int64_t)row0 * spr,
                         sbytes, bar, pol);
        } else {
#pragma unroll
            for (int k = 0; k < 8; k++)
                tma_load_3d(stg + 4u * kChunk + 4096u * k, map0, 64 * k, c.kh, row0, bar, pol);
            tma_load_3d(c.scales(st.stage), map1, 512, c.kh, row0, bar, pol);
            tma_load_3d(stg + 8u * kChunk, map2, 528, c.kh, row0, bar, pol);
        }
        page = next;
        st.advance(kStages);
    }
}

/* ---- converter (warps 8-11) ---- */

/* Q rows of this M tile into the swizzled Q tile; rows past rows_here
 * are zeros (their scores are never used, but must not be NaN garbage
 * inside the MMA).  64 rows x 72 granules of 16 bytes, 36 per thread. */
MLA_DEV void load_q(const mla_decode_params &p, const Cta &c, uint32_t tid)
{
    const uint8_t *q = (const uint8_t *)p.q;
#pragma unroll
    for (int k0 = 0; k0 < 36; k0 += 6) {
        uint4 v[6];
#pragma unroll
        for (int k = 0; k < 6; k++) {
            const uint32_t i = tid + 128u * (k0 + k);
            const int r = (int)(i / 72u);
            const uint32_t gi = i % 72u;
            v[k] = make_uint4(0u, 0u, 0u, 0u);
            if (r < c.rows_here)
                v[k] = ldg128_nc(q + q_row_index(p, c, r) * (MLA_D_QK * 2) + gi * 16u);
        }
#pragma unroll
        for (int k = 0; k < 6; k++) {
            const uint32_t i = tid + 128u * (k0 + k);
            const uint32_t r = i / 72u, gi = i % 72u;
            const uint32_t dst =
                c.sq + (gi >> 3) * kChunk + r * 128u + (((gi & 7u) ^ (r & 7u)) << 4);
            sts128(dst, v[k].x, v[k].y, v[k].z, v[k].w);
        }
    }
}

/*
 * One FP8 tile to BF16 in place.  Thread tid handles rows ra = tid / 4 and
 * rb = ra + 32, 16 columns (16 qd .. 16 qd + 15, qd = tid % 4) of every
 * chunk: a warp reads 512 contiguous bytes, and the two rows it writes per
 * store have disjoint swizzled granules (no bank conflicts).
 */
struct CvtUnit {
    uint4 a, b;   /* FP8 of rows ra and rb */
    float sa, sb; /* their scales */
};

template <int FMT>
struct Converter {
    static constexpr uint32_t SRC = FMT == MLA_FMT_FP8_E4M3 ? kTile / 2 : 4u * kChunk;
    uint32_t stg, scl, nvalid, qd, ra, rb, sw0, sw1;
    int gshift, spr;

    MLA_DEV Converter(uint32_t stg_, uint32_t scl_, uint32_t nvalid_, uint32_t tid, int gshift_,
                      int spr_)
        : stg(stg_), scl(scl_), nvalid(nvalid_), qd(tid & 3u), ra(tid >> 2), rb((tid >> 2) + 32u),
          gshift(gshift_), spr(spr_)
    {
        sw0 = ((2u * qd) ^ (ra & 7u)) << 4;
        sw1 = ((2u * qd + 1u) ^ (ra & 7u)) << 4;
    }

    MLA_DEV CvtUnit load(int ch) const
    {
        CvtUnit u;
        const uint32_t src = stg + SRC + 4096u * ch + 16u * (4u * ra + qd);
        u.a = lds128(src);
        u.b = lds128(src + 2048u);
        u.sa = u.sb = 1.0f;
        if (FMT == MLA_FMT_FP8_DS_MLA) {
            u.sa = lds_f32(scl + ra * 16u + 4u * (ch >> 1));
            u.sb = lds_f32(scl + rb * 16u + 4u * (ch >> 1));
        } else if (gshift) {
            const uint32_t k = (64u * ch + 16u * qd) >> gshift;
            u.sa = lds_f32(scl + 4u * (ra * spr + k));
            u.sb = lds_f32(scl + 4u * (rb * spr + k));
        }
        return u;
    }

    MLA_DEV void store(int ch, const CvtUnit &u) const
    {
        uint4 a0 = make_uint4(0u, 0u, 0u, 0u), a1 = a0, b0 = a0, b1 = a0;
        if (ra < nvalid) {
            a0 = e4m3x8_to_bf16x8(make_uint2(u.a.x, u.a.y), u.sa);
            a1 = e4m3x8_to_bf16x8(make_uint2(u.a.z, u.a.w), u.sa);
        }
        if (rb < nvalid) {
            b0 = e4m3x8_to_bf16x8(make_uint2(u.b.x, u.b.y), u.sb);
            b1 = e4m3x8_to_bf16x8(make_uint2(u.b.z, u.b.w), u.sb);
        }
        const uint32_t da = stg + kChunk * ch + ra * 128u, db = da + 32u * 128u;
        sts128(da + sw0, a0.x, a0.y, a0.z, a0.w);
        sts128(da + sw1, a1.x, a1.y, a1.z, a1.w);
        sts128(db + sw0, b0.x, b0.y, b0.z, b0.w);
        sts128(db + sw1, b1.x, b1.y, b1.z, b1.w);
    }
};

/* Chunks of a group are visible to wgmma: release the group. */
MLA_DEV void release_group(const Cta &c, uint32_t stage, int grp)
{
    fence_proxy_async();
    mbar_arrive(converted_bar(c.bars, stage, grp));
}

/*
 * BF16 chunk c overwrites FP8 chunks 2c - 9 and 2c - 8 (E4M3; DS_MLA 2c -
 * 8 and 2c - 7), so chunks 0-3 convert freely and later ones in steps
 * {4, 5}, {6, 7}, {8}: read the step's chunks, sync the converter, write.
 */
template <int FMT>
MLA_DEV void convert_tile(const Cta &c, uint32_t stage, uint32_t nvalid, uint32_t tid, int gshift,
                          int spr)
{
    const Converter<FMT> cv(c.stage(stage), c.scales(stage), nvalid, tid, gshift, spr);
#pragma unroll
    for (int ch = 0; ch < 4; ch++) {
        cv.store(ch, cv.load(ch));
        if (ch == 2)
            release_group(c, stage, 0);
    }
#pragma unroll
    for (int ch = 4; ch < 8; ch += 2) {
        const CvtUnit u0 = cv.load(ch), u1 = cv.load(ch + 1);
        bar_sync(kNbCvt, 128); /* every FP8 chunk these two overwrite is read */
        cv.store(ch, u0);
        cv.store(ch + 1, u1);
        if (ch == 4)
            release_group(c, stage, 1);
    }
    if (FMT == MLA_FMT_FP8_E4M3) {
        const CvtUnit u = cv.load(8);
        bar_sync(kNbCvt, 128);
        cv.store(8, u);
    }
    release_group(c, stage, 2);
}

template <int FMT>
MLA_DEV void convert_role(const mla_decode_params &p, const Cta &c, uint32_t tid)
{
    load_q(p, c, tid);
    fence_proxy_async(); /* wgmma reads the tile through the async proxy */
    mbar_arrive(c.bars + kBarQ);
    if (FMT == MLA_FMT_BF16)
        return;
    int gshift = 0;
    if (FMT == MLA_FMT_FP8_E4M3 && p.scales_per_row > 0)
        gshift = 31 - __clz(p.scale_block);
    PipeState st;
    st.init();
    for (int t = c.t0; t < c.t1; t++) {
        mbar_wait(c.bars + kBarLoaded + 8u * st.stage, st.phase);
        const uint32_t nvalid = (uint32_t)min((int)kBN, c.len - t * (int)kBN);
        convert_tile<FMT>(c, st.stage, nvalid, tid, gshift, p.scales_per_row);
        st.advance(kStages);
    }
}

/* ---- consumers (warps 0-7) ---- */

/* BF16 cache: rows at or past the length hold whatever the page's tail
 * holds; zero them (all 9 chunks) before any MMA reads the tile. */
MLA_DEV void zero_tail(uint32_t stg, uint32_t nvalid, uint32_t tid)
{
    const uint32_t n = (kBN - nvalid) * 72u;
    for (uint32_t i = tid; i < n; i += 256u) {
        const uint32_t r = nvalid + i / 72u, gi = i % 72u;
        sts128(stg + (gi >> 3) * kChunk + r * 128u + (gi & 7u) * 16u, 0u, 0u, 0u, 0u);
    }
    fence_proxy_async();
    bar_sync(kNbTail, 256);
}

/* S[64 x 32] (+)= Q K^T over 64-column chunks [C0, C1), K rows 32 wg ..
 * +31; ACC 0 starts from zero. */
template <int C0, int C1, int ACC = 0>
MLA_DEV void qk_chunks(float (&s)[4][4], uint32_t sq, uint32_t stg, uint32_t wg)
{
#pragma unroll
    for (int ch = C0; ch < C1; ch++) {
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            const uint64_t da = wg_desc(sq + ch * kChunk + 32u * ks, 16u, 1024u);
            const uint64_t db = wg_desc(stg + ch * kChunk + wg * 4096u + 32u * ks, 16u, 1024u);
            wgmma_m64n32_ss(s, da, db, (ACC || ch != C0 || ks != 0) ? 1u : 0u);
        }
    }
}

/* One consumer thread's state and the steps of a tile. */
template <int FMT>
struct Consumer {
    const mla_decode_params &p;
    const Cta &c;
    uint32_t wg, g, tq, tid;
    int row0;
    int lim[2];
    uint32_t mine, other; /* this row's slot in the exchange, and the other WG's */
    float rope_factor;
    float o[32][4];
    float s[4][4], sr[4][4]; /* scores of the tile in flight (sr: DS_MLA RoPE part) */
    float alpha[2];
    OnlineSoftmax sm;

    MLA_DEV Consumer(const mla_decode_params &p_, const Cta &c_, uint32_t wg_, uint32_t wl,
                     uint32_t lane)
        : p(p_), c(c_), wg(wg_), g(lane >> 2), tq(lane & 3u), tid(128u * wg_ + 32u * wl + lane)
    {
        row0 = (int)(16u * wl + g);
        row_limits(p, c, row0, lim);
        mine = c.xchg + 4u * (64u * wg + (uint32_t)row0);
        other = c.xchg + 4u * (64u * (wg ^ 1u) + (uint32_t)row0);
        /* DS_MLA: kv_scale is folded into score_scale_log2 for the whole
         * product, but the RoPE part is unscaled: divide its share back. */
        rope_factor = FMT == MLA_FMT_FP8_DS_MLA ? __frcp_rn(p.out_scale) : 1.0f;
#pragma unroll
        for (int i = 0; i < 32; i++)
            o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.0f;
        sm.init();
    }

    /* The barrier whose completion means the whole tile is ready. */
    MLA_DEV uint32_t last_bar(const PipeState &st) const
    {
        return FMT == MLA_FMT_BF16 ? c.bars + kBarLoaded + 8u * st.stage
                                   : converted_bar(c.bars, st.stage, kGroups - 1);
    }

    /* Same answer in every thread of the warpgroup (the wgmma sequence
     * that follows must be), from one thread's non-blocking test. */
    MLA_DEV bool wg_ready(const PipeState &st) const
    {
        const uint32_t flag = c.bars + 96u + 4u * wg;
        if ((tid & 127u) == 0)
            sts32(flag, mbar_test(last_bar(st), st.phase) ? 1u : 0u);
        bar_sync(kNbWg0 + wg, 128);
        return lds32(flag) != 0u;
    }

    /* Queue S = Q K^T of tile t (stage st), waiting for its data chunk
     * group by chunk group; one commit group. */
    MLA_DEV void scores(int t, const PipeState &st)
    {
        const uint32_t stg = c.stage(st.stage);
        const uint32_t loaded = c.bars + kBarLoaded + 8u * st.stage;
        if (FMT == MLA_FMT_BF16) {
            mbar_wait(loaded, st.phase);
            const uint32_t nvalid = (uint32_t)min((int)kBN, c.len - t * (int)kBN);
            if (nvalid < kBN)
                zero_tail(stg, nvalid, tid);
            wg_fence();
            qk_chunks<0, 9>(s, c.sq, stg, wg);
        } else {
            constexpr int NCH = FMT == MLA_FMT_FP8_E4M3 ? 9 : 8;
            if (FMT == MLA_FMT_FP8_DS_MLA) /* the RoPE chunk comes straight from TMA */
                mbar_wait(loaded, st.phase);
            mbar_wait(converted_bar(c.bars, st.stage, 0), st.phase);
            wg_fence();
            if (FMT == MLA_FMT_FP8_DS_MLA)
                qk_chunks<8, 9>(sr, c.sq, stg, wg);
            qk_chunks<0, 3>(s, c.sq, stg, wg);
            mbar_wait(converted_bar(c.bars, st.stage, 1), st.phase);
            qk_chunks<3, 6, 1>(s, c.sq, stg, wg);
            mbar_wait(converted_bar(c.bars, st.stage, 2), st.phase);
            qk_chunks<6, NCH, 1>(s, c.sq, stg, wg);
        }
        wg_commit();
    }

    /* Once the scores of tile t have retired: probabilities and the
     * factor alpha for O, with the row maxima of both WGs. */
    MLA_DEV void softmax(int t)
    {
        wg_hold(s);
        if (FMT == MLA_FMT_FP8_DS_MLA) {
            wg_hold(sr);
#pragma unroll
            for (int i = 0; i < 4; i++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    s[i][e] = fmaf(sr[i][e], rope_factor, s[i][e]);
        }
        float mx[2];
        sm.tile_max<4>(s, p.score_scale_log2, t * (int)kBN + 32 * (int)wg + 2 * (int)tq, lim, mx);
        if (tq == 0) {
            sts32(mine, __float_as_uint(mx[0]));
            sts32(mine + 32u, __float_as_uint(mx[1]));
        }
        bar_sync(kNbMax, 256);
        mx[0] = fmaxf(mx[0], lds_f32(other));
        mx[1] = fmaxf(mx[1], lds_f32(other + 32u));
        sm.tile_exp<4>(s, mx, alpha);
    }

    /* After the previous P V retired: rescale O, write this WG's half of
     * P (bf16) into the stage's chunk 8 (rows row0, row0 + 8; keys 32 wg
     * + 8 nt + 2 tq), and wait for the other half. */
    MLA_DEV void publish_p(const PipeState &st)
    {
        if (alpha[0] != 1.0f || alpha[1] != 1.0f) {
#pragma unroll
            for (int i = 0; i < 32; i++) {
                o[i][0] *= alpha[0];
                o[i][1] *= alpha[0];
                o[i][2] *= alpha[1];
                o[i][3] *= alpha[1];
            }
        }
        const uint32_t pb = c.stage(st.stage) + 8u * kChunk + (uint32_t)row0 * 128u + 4u * tq;
#pragma unroll
        for (int nt = 0; nt < 4; nt++) {
            const uint32_t gr = ((4u * wg + nt) ^ g) << 4;
            sts32(pb + gr, pack_bf16x2(s[nt][0], s[nt][1]));
            sts32(pb + 8u * 128u + gr, pack_bf16x2(s[nt][2], s[nt][3]));
        }
        fence_proxy_async();
        bar_sync(kNbP, 256);
    }

    /* Queue O[:, 256 wg ..] += P V for the tile in stage st; one commit group. */
    MLA_DEV void pv(const PipeState &st)
    {
        const uint32_t stg = c.stage(st.stage);
        wg_fence();
#pragma unroll
        for (int ks = 0; ks < 4; ks++) {
            const uint64_t da = wg_desc(stg + 8u * kChunk + 32u * ks, 16u, 1024u);
            const uint32_t vb = stg + wg * 4u * kChunk + 2048u * ks;
            wgmma_m64n128_ss_tb<0>(o, da, wg_desc(vb, kChunk, 1024u), 1u);
            wgmma_m64n128_ss_tb<16>(o, da, wg_desc(vb + 2u * kChunk, kChunk, 1024u), 1u);
        }
        wg_commit();
        wg_hold(o); /* o stays in these registers until the wait */
    }

    MLA_DEV void release(const PipeState &st) const
    {
        mbar_arrive(c.bars + kBarFree + 8u * st.stage);
    }

    /*
     * The tile loop.  Scores of tile t + 1 are queued ahead of P V of tile
     * t when t + 1 is already in shared memory, so its softmax runs while
     * the tensor cores do P V; otherwise P V goes first and the stage is
     * freed before blocking on the load (holding it would serialize load
     * and compute).
     */
    MLA_DEV void run()
    {
        mbar_wait(c.bars + kBarQ, 0);
        PipeState st;
        st.init();
        if (c.t0 < c.t1) {
            scores(c.t0, st);
            wg_wait<0>();
            softmax(c.t0);
            publish_p(st);
        }
        for (int t = c.t0; t < c.t1; t++) {
            PipeState nx = st;
            nx.advance(kStages);
            const bool next = t + 1 < c.t1;
            if (next && wg_ready(nx)) {
                scores(t + 1, nx);
                pv(st);
                wg_wait<1>(); /* groups retire in order: the scores are done */
                softmax(t + 1);
                wg_wait<0>();
                wg_hold(o);
                release(st);
            } else {
                pv(st);
                wg_wait<0>();
                wg_hold(o);
                release(st);
                if (next) {
                    scores(t + 1, nx);
                    wg_wait<0>();
                    softmax(t + 1);
                }
            }
            if (next)
                publish_p(nx);
            st = nx;
        }

        /* The combine kernel may start launching; its griddepcontrol.wait
         * still waits for this grid to finish and its writes to be
         * visible. */
        if (tid == 0)
            griddep_launch_dependents();

        /* Each WG summed its own columns; the maxima are shared, so the
         * row sums add. */
        float lsum[2];
        sm.finish(lsum);
        if (tq == 0) {
            sts32(mine, __float_as_uint(lsum[0]));
            sts32(mine + 32u, __float_as_uint(lsum[1]));
        }
        bar_sync(kNbSum, 256);
        lsum[0] += lds_f32(other);
        lsum[1] += lds_f32(other + 32u);
        write_output(p, o, sm.m, lsum, row0, wg, tq);
    }
};

template <int FMT>
MLA_DEV void decode(const mla_hopper_params &hp)
{
    const mla_decode_params &p = hp.p;
    griddep_wait(); /* the scheduler's status, splits and tiles */
    Cta c0;
    if (!setup<FMT>(p, c0))
        return;
    if (threadIdx.x == 0) {
        for (uint32_t s = 0; s < kStages; s++) {
            mbar_init(c0.bars + kBarLoaded + 8u * s, 1);
            for (int grp = 0; grp < kGroups; grp++)
                mbar_init(converted_bar(c0.bars, s, grp), 128);
            mbar_init(c0.bars + kBarFree + 8u * s, 256);
        }
        mbar_init(c0.bars + kBarQ, 128);
        fence_mbar_init();
    }
    __syncthreads();

    /* Warp index made visibly uniform, so each role is one branch. */
    const uint32_t warp = __shfl_sync(0xffffffffu, threadIdx.x >> 5, 0);
    const uint32_t lane = threadIdx.x & 31u;
    Cta c;
    if (warp < 8) {
        setmaxnreg_inc<kConsumerRegs>();
        setup<FMT>(p, c);
        Consumer<FMT> cons(p, c, warp >> 2, warp & 3u, lane);
        cons.run();
    } else if (warp < 12) {
        setmaxnreg_dec<kCvtRegs>();
        setup<FMT>(p, c);
        convert_role<FMT>(p, c, threadIdx.x - 256u);
    } else {
        setmaxnreg_dec<kLoadRegs>();
        if (warp == 12 && elect_one()) {
            setup<FMT>(p, c);
            load_role<FMT>(hp, c);
        }
    }
}

} /* namespace hopper */
} /* namespace mla */
#define MLA_HOPPER_BODY(fmt) mla::hopper::decode<fmt>(hp)
#else
#define MLA_HOPPER_BODY(fmt) (void)hp
#endif

#define MLA_HOPPER_KERNEL(name, fmt)                                                            \
    extern "C" __global__ void __launch_bounds__(MLA_DECODE_THREADS, 1)                         \
        name(const __grid_constant__ mla_hopper_params hp)                                      \
    {                                                                                           \
        MLA_HOPPER_BODY(fmt);                                                                   \
    }

MLA_HOPPER_KERNEL(mla_hopper_decode_bf16, MLA_FMT_BF16)
MLA_HOPPER_KERNEL(mla_hopper_decode_e4m3, MLA_FMT_FP8_E4M3)
MLA_HOPPER_KERNEL(mla_hopper_decode_dsmla, MLA_FMT_FP8_DS_MLA)
