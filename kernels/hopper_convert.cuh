/*
 * hopper_convert.cuh - the converter warpgroup of the sm_90a kernels
 * (warps 8-11): it writes the Q tile, then turns each landed FP8 tile into
 * the 128B-swizzled BF16 tile wgmma reads, with rows at or past the length
 * written as zeros, in place: the FP8 bytes sit in the upper half of the
 * stage they become BF16 in (wide layout only; the narrow FP8 consumers
 * convert in registers, hopper_narrow_fp8.cuh).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_HOPPER_CONVERT_CUH
#define MLA_HOPPER_CONVERT_CUH

#include "hopper_layout.cuh"
#include "trace.cuh"
#include "hopper_load.cuh"
#include "convert.cuh"

namespace mla {
namespace hopper {

MLA_DEV uint32_t converted_bar(uint32_t bars, uint32_t stage, int grp)
{
    return bars + kBarConverted + 8u * (kGroups * stage + grp);
}

/*
 * Thread tid handles rows ra = tid / 4 and rb = ra + 32, 16 columns (16 qd
 * .. 16 qd + 15, qd = tid % 4) of every chunk: a warp reads 512 contiguous
 * bytes, and the two rows it writes per store have disjoint swizzled
 * granules (no bank conflicts).
 */
struct CvtUnit {
    uint4 a, b;   /* FP8 of rows ra and rb */
    float sa, sb; /* their scales */
};

template <int FMT>
struct Converter {
    uint32_t dst, src, scl, nvalid, qd, ra, rb, sw0, sw1;
    int gshift, spr;

    /* dst: the BF16 stage; src: FP8 chunk 0 (chunk c at src + 4096 c);
     * scl: the tile's scales. */
    MLA_DEV Converter(uint32_t dst_, uint32_t src_, uint32_t scl_, uint32_t nvalid_,
                      uint32_t tid, int gshift_, int spr_)
        : dst(dst_), src(src_), scl(scl_), nvalid(nvalid_), qd(tid & 3u), ra(tid >> 2),
          rb((tid >> 2) + 32u), gshift(gshift_), spr(spr_)
    {
        sw0 = ((2u * qd) ^ (ra & 7u)) << 4;
        sw1 = ((2u * qd + 1u) ^ (ra & 7u)) << 4;
    }

    MLA_DEV CvtUnit load(int ch) const
    {
        CvtUnit u;
        const uint32_t a = src + 4096u * ch + 16u * (4u * ra + qd);
        u.a = lds128(a);
        u.b = lds128(a + 2048u);
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
        const uint32_t da = dst + kChunk * ch + ra * 128u, db = da + 32u * 128u;
        sts128(da + sw0, a0.x, a0.y, a0.z, a0.w);
        sts128(da + sw1, a1.x, a1.y, a1.z, a1.w);
        sts128(db + sw0, b0.x, b0.y, b0.z, b0.w);
        sts128(db + sw1, b1.x, b1.y, b1.z, b1.w);
    }
};

/* Chunks written by this thread are visible to wgmma: arrive on `bar`. */
MLA_DEV void release_to_mma(uint32_t bar)
{
    fence_proxy_async();
    mbar_arrive(bar);
}

/*
 * Wide layout: one FP8 tile to BF16 in place.  BF16 chunk c overwrites
 * FP8 chunks 2c - 9 and 2c - 8 (E4M3; DS_MLA 2c - 8 and 2c - 7), so chunks
 * 0-3 convert freely and later ones in steps {4, 5}, {6, 7}, {8}: read the
 * step's chunks, sync the converter, write.
 */
template <int FMT>
MLA_DEV void convert_in_place(const Cta &c, uint32_t stage, uint32_t nvalid, uint32_t tid,
                              int gshift, int spr)
{
    const uint32_t stg = c.stage(stage);
    const Converter<FMT> cv(stg, stg + (FMT == MLA_FMT_FP8_E4M3 ? kTile / 2 : 4u * kChunk),
                            c.scales(stage), nvalid, tid, gshift, spr);
#pragma unroll
    for (int ch = 0; ch < 4; ch++) {
        cv.store(ch, cv.load(ch));
        if (ch == 2)
            release_to_mma(converted_bar(c.bars, stage, 0));
    }
#pragma unroll
    for (int ch = 4; ch < 8; ch += 2) {
        const CvtUnit u0 = cv.load(ch), u1 = cv.load(ch + 1);
        bar_sync(kNbCvt, 128); /* every FP8 chunk these two overwrite is read */
        cv.store(ch, u0);
        cv.store(ch + 1, u1);
        if (ch == 4)
            release_to_mma(converted_bar(c.bars, stage, 1));
    }
    if (FMT == MLA_FMT_FP8_E4M3) {
        const CvtUnit u = cv.load(8);
        bar_sync(kNbCvt, 128);
        cv.store(8, u);
    }
    release_to_mma(converted_bar(c.bars, stage, 2));
}

template <int FMT, bool NARROW>
MLA_DEV void convert_role(const mla_decode_params &p, const Cta &c, uint32_t tid)
{
    if (kFp8Direct<FMT, NARROW>) {
        const uint32_t nf16 = q_f16_chunks<FMT>(p);
        float undo = 1.0f;
        if (nf16)
            undo = load_q_permuted_f16(p, c, tid, nf16, c.bars + kQMax);
        else
            load_q_permuted(p, c, tid);
        if (tid == 0)
            sts32(c.bars + kQScale, __float_as_uint(undo));
    } else {
        load_q(p, c, tid, NARROW ? MLA_NARROW_ROWS : MLA_BLOCK_M);
    }
    cp_async_wait_all();
    if (tid == 0)
        MLA_STAMP(4); /* Q landed */
    fence_proxy_async(); /* wgmma reads the tile through the async proxy */
    mbar_arrive(c.bars + kBarQ);
    /* BF16 needs no conversion; narrow FP8 tiles are converted by the
     * consumers, in registers. */
    if (FMT == MLA_FMT_BF16 || NARROW)
        return;
    int gshift = 0;
    if (FMT == MLA_FMT_FP8_E4M3 && p.scales_per_row > 0)
        gshift = 31 - __clz(p.scale_block);
    const Pipe pipe = c.pipe();
    PipeState st;
    st.init();
    MLA_LAP_START(lap); /* trace builds: phases 12 (waiting for a tile), 13 */
    for (int t = c.t0; t < c.t1; t++) {
        const uint32_t nvalid = (uint32_t)min((int)kBN, c.len - t * (int)kBN);
        pipe.consumer_wait(st);
        MLA_LAP(tid == 0, lap, 12u);
        convert_in_place<FMT>(c, st.stage, nvalid, tid, gshift, p.scales_per_row);
        MLA_LAP(tid == 0, lap, 13u);
        st.advance(kStages);
    }
}

} /* namespace hopper */
} /* namespace mla */

#endif /* MLA_HOPPER_CONVERT_CUH */
