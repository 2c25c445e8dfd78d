/*
 * hopper_convert.cuh - the converter warpgroup of the sm_90a kernels
 * (warps 8-11): it writes the Q tile, then turns each landed FP8 tile into
 * the 128B-swizzled BF16 tile wgmma reads, with rows at or past the length
 * written as zeros, in place: the FP8 bytes sit in the upper half of the
 * stage they become BF16 in (wide layout only; the narrow FP8 consumers
 * convert in registers, hopper_narrow_fp8.cuh).  In the 2-CTA pair
 * kernels each CTA converts half the rows of every tile, for both.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_HOPPER_CONVERT_CUH
#define MLA_HOPPER_CONVERT_CUH

#include "hopper_layout.cuh"
#include "hopper_load.cuh"
#include "convert.cuh"

namespace mla {
namespace hopper {

MLA_DEV uint32_t converted_bar(uint32_t bars, uint32_t stage, int grp)
{
    return bars + kBarConverted + 8u * (kGroups * stage + grp);
}

/* E4M3 pairs: the barrier on which the other CTA reports that this CTA's
 * half of the tile in `stage` has landed there (hopper_seesaw.cuh). */
MLA_DEV uint32_t sent_bar(uint32_t bars, uint32_t stage)
{
    return bars + kBarSent + 8u * stage;
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

/* The scale of tile row `row` at columns 16 qd .. of chunk ch: DS_MLA's
 * per-128-column one, E4M3's block scale (blocks of 1 << gshift columns,
 * spr a row), or 1 without block scales.  scl: the tile's scales. */
template <int FMT>
MLA_DEV float row_scale(uint32_t scl, uint32_t row, uint32_t ch, uint32_t qd, int gshift, int spr)
{
    if (FMT == MLA_FMT_FP8_DS_MLA)
        return lds_f32(scl + row * 16u + 4u * (ch >> 1));
    if (gshift)
        return lds_f32(scl + 4u * (row * spr + ((64u * ch + 16u * qd) >> gshift)));
    return 1.0f;
}

/* 16 FP8 values of one row times s, as BF16 (lo: the first 8), or zeros
 * for a row at or past the length. */
MLA_DEV void row_to_bf16(uint4 x, float s, bool valid, uint4 &lo, uint4 &hi)
{
    lo = hi = make_uint4(0u, 0u, 0u, 0u);
    if (valid) {
        lo = e4m3x8_to_bf16x8(make_uint2(x.x, x.y), s);
        hi = e4m3x8_to_bf16x8(make_uint2(x.z, x.w), s);
    }
}

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
        sw0 = sw128_granule(ra, 2u * qd);
        sw1 = sw128_granule(ra, 2u * qd + 1u);
    }

    MLA_DEV CvtUnit load(int ch) const
    {
        CvtUnit u;
        const uint32_t a = src + 4096u * ch + 16u * (4u * ra + qd);
        u.a = lds128(a);
        u.b = lds128(a + 2048u);
        u.sa = row_scale<FMT>(scl, ra, (uint32_t)ch, qd, gshift, spr);
        u.sb = row_scale<FMT>(scl, rb, (uint32_t)ch, qd, gshift, spr);
        return u;
    }

    MLA_DEV void store(int ch, const CvtUnit &u) const
    {
        uint4 a0, a1, b0, b1;
        row_to_bf16(u.a, u.sa, ra < nvalid, a0, a1);
        row_to_bf16(u.b, u.sb, rb < nvalid, b0, b1);
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

/*
 * The 2-CTA pair kernel: this CTA's rows 32 rank .. + 31 of one E4M3 tile
 * to BF16, from the pieces pair_piece() places (hopper_layout.cuh), into
 * this CTA's halves of the chunks and, by bulk copies, the other CTA's.
 * Thread tid takes 16 bytes (columns 16 qd ..) of row 32 rank + tid / 4
 * of each piece; warp w's 8 rows of a chunk are 1024 contiguous bytes,
 * which its lane 0 sends once the warp has written them.
 */
struct CvtRow {
    uint4 x; /* FP8 of the thread's row */
    float s; /* its scale */
};

struct PairConverter {
    uint32_t stg, scl, row, nvalid, qd, sw0, sw1, rank, peer_stg;
    int gshift, spr;

    MLA_DEV PairConverter(const Cta &c, uint32_t stage, uint32_t nvalid_, uint32_t tid,
                          int gshift_, int spr_)
        : stg(c.stage(stage)), scl(c.scales(stage)), row(32u * c.rank + (tid >> 2)),
          nvalid(nvalid_), qd(tid & 3u), rank(c.rank), gshift(gshift_), spr(spr_)
    {
        sw0 = sw128_granule(row, 2u * qd);
        sw1 = sw128_granule(row, 2u * qd + 1u);
        peer_stg = peer_addr(stg, rank ^ 1u);
    }

    MLA_DEV CvtRow load(uint32_t ch) const
    {
        CvtRow u;
        u.x = lds128(pair_piece(stg, rank, ch) + 16u * (4u * (row & 31u) + qd));
        u.s = row_scale<MLA_FMT_FP8_E4M3>(scl, row, ch, qd, gshift, spr);
        return u;
    }

    MLA_DEV void store(uint32_t ch, const CvtRow &u) const
    {
        uint4 a0, a1;
        row_to_bf16(u.x, u.s, row < nvalid, a0, a1);
        const uint32_t d = stg + kChunk * ch + row * 128u;
        sts128(d + sw0, a0.x, a0.y, a0.z, a0.w);
        sts128(d + sw1, a1.x, a1.y, a1.z, a1.w);
    }

    /* Chunks [c0, c1) of this CTA's half are written: release them to the
     * local consumers (group grp's barrier, which also waits for the
     * other CTA's half: 4096 bytes a chunk) and send this warp's rows of
     * them to the other CTA, completing on its barrier of the group.  The
     * copies read this CTA's half after the local arrival: nothing local
     * says when they are done reading it, so the consumers must not write
     * into these chunks before the other CTA reports the tile landed
     * (chunk 8 holds P later: sent_bar). */
    MLA_DEV void publish(const Cta &c, uint32_t stage, uint32_t c0, uint32_t c1, int grp,
                         uint32_t tid) const
    {
        const uint32_t bar = converted_bar(c.bars, stage, grp);
        fence_proxy_async();
        if (tid == 0)
            mbar_arrive_expect_tx(bar, 4096u * (c1 - c0));
        else
            mbar_arrive(bar);
        __syncwarp();
        if ((tid & 31u) == 0) {
            const uint32_t peer_bar = peer_addr(bar, rank ^ 1u);
            const uint32_t off = (32u * rank + 8u * (tid >> 5)) * 128u;
#ifdef MLA_PAIR_SEND_DELAY_NS
            /* Fault injection for tests, off unless defined: rank 0 sends
             * its last chunk group late, long after its own consumers
             * could have taken the tile (they must wait for sent_bar). */
            if (rank == 0 && grp == kGroups - 1)
                __nanosleep(MLA_PAIR_SEND_DELAY_NS);
#endif
            for (uint32_t ch = c0; ch < c1; ch++)
                bulk_s2peer(peer_stg + kChunk * ch + off, stg + kChunk * ch + off, 1024u,
                            peer_bar);
        }
    }
};

/*
 * One tile, in steps that read every piece before its place is written
 * (named barrier kNbCvt between): pieces 0-3 (halves 5-6) give chunks
 * 0-3, which overwrite none; pieces 4, 5 and 8 are read, then chunks 4
 * and 5 overwrite halves 4 and 5; pieces 6 and 7 are read, chunks 6 and 7
 * overwrite halves 6 and 7 (pieces 2-5, read before the first barrier),
 * and after a second barrier chunk 8 overwrites half 8 (pieces 6, 7).
 * Chunk groups {0-2}, {3-5}, {6-8} are released as in convert_in_place.
 */
MLA_DEV void convert_pair(const Cta &c, const PipeState &st, uint32_t nvalid, uint32_t tid,
                          int gshift, int spr)
{
    const uint32_t stage = st.stage;
    const PairConverter cv(c, stage, nvalid, tid, gshift, spr);
    {
        const CvtRow u0 = cv.load(0), u1 = cv.load(1), u2 = cv.load(2), u3 = cv.load(3);
        cv.store(0, u0);
        cv.store(1, u1);
        cv.store(2, u2);
        cv.publish(c, stage, 0, 3, 0, tid);
        cv.store(3, u3);
    }
    const CvtRow u4 = cv.load(4), u5 = cv.load(5), u8 = cv.load(8);
    bar_sync(kNbCvt, 128);
    cv.store(4, u4);
    cv.store(5, u5);
    cv.publish(c, stage, 3, 6, 1, tid);
    const CvtRow u6 = cv.load(6), u7 = cv.load(7);
    cv.store(6, u6);
    cv.store(7, u7);
    bar_sync(kNbCvt, 128);
    cv.store(8, u8);
    cv.publish(c, stage, 6, 9, 2, tid);
}

template <int FMT, bool NARROW, bool PAIR>
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
    for (int t = c.t0; t < c.t1; t++) {
        const uint32_t nvalid = (uint32_t)min((int)kBN, c.len - t * (int)kBN);
        pipe.consumer_wait(st);
        if (PAIR)
            convert_pair(c, st, nvalid, tid, gshift, p.scales_per_row);
        else
            convert_in_place<FMT>(c, st.stage, nvalid, tid, gshift, p.scales_per_row);
        st.advance(kStages);
    }
}

} /* namespace hopper */
} /* namespace mla */

#endif /* MLA_HOPPER_CONVERT_CUH */
