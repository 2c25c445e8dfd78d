/*
 * convert.cuh - FP8 cache rows to BF16 rows in shared memory, in place:
 * e4m3 through cvt.rn.f16x2.e4m3x2 (exact), times the row's block scale
 * in fp32, rounded to bf16 (exact for powers of two); DS_MLA RoPE copied;
 * rows at or past the sequence length written as zeros.  Also the pair
 * conversions the narrow FP8 consumers build wgmma fragments with.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_CONVERT_CUH
#define MLA_CONVERT_CUH

#include "mla_params.h"
#include "ptx.cuh"

/*
 * Layout of one stage row (MLA_SMEM_ROW_BF16 = 1168 bytes):
 *   after conversion (what the MMA warps read): 576 bf16 at [0, 1152),
 *     16 bytes of padding so that the 8 row addresses of an ldmatrix fall
 *     in different banks (1168 / 4 = 292 = 4 mod 32 words);
 *   BF16 cache rows are copied there directly;
 *   FP8 cache rows are staged at MLA_STAGE_FP8_OFFSET (512):
 *     E4M3:   576 e4m3 at [512, 1088), fp32 block scales at [1088, 1160);
 *     DS_MLA: the 656-byte row at [512, 1168) (scales at 1024, RoPE at 1040).
 *   One warp converts a whole row: it reads everything it needs into
 *   registers, syncs, then overwrites the row, so source and result may
 *   overlap.
 */
#define MLA_STAGE_FP8_OFFSET 512
#define MLA_STAGE_SCALE_OFFSET 1088

namespace mla {

/* 8 e4m3 (little-endian in v) times s -> 8 bf16 as 4 words. */
MLA_DEV uint4 e4m3x8_to_bf16x8(uint2 v, float s)
{
    uint32_t h0 = e4m3x2_to_f16x2((uint16_t)(v.x & 0xffffu));
    uint32_t h1 = e4m3x2_to_f16x2((uint16_t)(v.x >> 16));
    uint32_t h2 = e4m3x2_to_f16x2((uint16_t)(v.y & 0xffffu));
    uint32_t h3 = e4m3x2_to_f16x2((uint16_t)(v.y >> 16));
    uint4 r;
    r.x = pack_bf16x2(__fmul_rn(f16lo_to_f32(h0), s), __fmul_rn(f16hi_to_f32(h0), s));
    r.y = pack_bf16x2(__fmul_rn(f16lo_to_f32(h1), s), __fmul_rn(f16hi_to_f32(h1), s));
    r.z = pack_bf16x2(__fmul_rn(f16lo_to_f32(h2), s), __fmul_rn(f16hi_to_f32(h2), s));
    r.w = pack_bf16x2(__fmul_rn(f16lo_to_f32(h3), s), __fmul_rn(f16hi_to_f32(h3), s));
    return r;
}

/* Byte permute: byte k of the result is byte sel[4k + 2 .. 4k] of {b, a}
 * (0-3 from a, 4-7 from b), or with bit 4k + 3 set that byte's sign bit
 * replicated over 8 bits. */
MLA_DEV uint32_t prmt(uint32_t a, uint32_t b, uint32_t sel)
{
    uint32_t d;
    asm("prmt.b32 %0, %1, %2, %3;" : "=r"(d) : "r"(a), "r"(b), "r"(sel));
    return d;
}

/*
 * Bytes LO and HI of {a, b} (e4m3) as one bf16x2 (LO in bits 0..15)
 * times 2^-120, exact, for wgmma A fragments built in registers.  The bit
 * pattern s eeee mmm becomes bf16 s 0000eeee mmm0000: the exponent biases
 * differ by 120, and e4m3 subnormals land on bf16 subnormals.  prmt puts
 * each byte over its sign-replicated copy, so one shift and one mask
 * place sign, exponent and mantissa.  The caller folds 2^120 into the
 * other MMA operand (the narrow FP8 kernel's P tiles), which saves the
 * bf16x2 multiply a pair would otherwise need.  The e4m3 NaN (s 1111 111)
 * reads as +-480 x 2^-120: finite, like every result here, so a row past
 * the length (garbage) times P = 0 gives 0.
 */
template <int LO, int HI>
MLA_DEV uint32_t e4m3_pair_bf16x2_raw(uint32_t a, uint32_t b)
{
    constexpr uint32_t sel = ((8u | HI) << 12) | ((uint32_t)HI << 8) | ((8u | LO) << 4) | LO;
    return (prmt(a, b, sel) << 4) & 0x87f087f0u;
}

/* Bytes L and L + 1 of a and of b (e4m3) as two f16x2, exact: lo = {a's
 * byte L, b's byte L}, hi = {a's byte L + 1, b's byte L + 1}; one byte
 * permute and two cvt for two pairs (e4m3_pair_bf16x2_raw: three
 * instructions a pair).  The e4m3 NaN stays NaN. */
template <int L>
MLA_DEV void e4m3_pairs_f16x2(uint32_t a, uint32_t b, uint32_t &lo, uint32_t &hi)
{
    constexpr uint32_t sel = ((uint32_t)(L + 5) << 12) | ((uint32_t)(L + 1) << 8) |
                             ((uint32_t)(L + 4) << 4) | (uint32_t)L;
    const uint32_t x = prmt(a, b, sel);
    asm("{\n\t.reg .b16 l, h;\n\tmov.b32 {l, h}, %2;\n\t"
        "cvt.rn.f16x2.e4m3x2 %0, l;\n\tcvt.rn.f16x2.e4m3x2 %1, h;\n\t}"
        : "=r"(lo), "=r"(hi)
        : "r"(x));
}

/* Bytes 0, 1 (LO) or 2, 3 (HI) of w (e4m3) as one f16x2, exact: one
 * cvt each, no byte permute, for K fragments taken against an f16 Q tile
 * (the QK MMAs of the narrow FP8 kernel).  The e4m3 NaN stays NaN. */
MLA_DEV uint32_t e4m3_lo_f16x2(uint32_t w)
{
    uint32_t d;
    asm("{\n\t.reg .b16 lo, hi;\n\tmov.b32 {lo, hi}, %1;\n\t"
        "cvt.rn.f16x2.e4m3x2 %0, lo;\n\t}"
        : "=r"(d)
        : "r"(w));
    return d;
}

MLA_DEV uint32_t e4m3_hi_f16x2(uint32_t w)
{
    uint32_t d;
    asm("{\n\t.reg .b16 lo, hi;\n\tmov.b32 {lo, hi}, %1;\n\t"
        "cvt.rn.f16x2.e4m3x2 %0, hi;\n\t}"
        : "=r"(d)
        : "r"(w));
    return d;
}

/* The same times fp32 scales (one per byte), rounded to bf16 as
 * e4m3x8_to_bf16x8 does (exact for powers of two). */
template <int LO, int HI>
MLA_DEV uint32_t e4m3_pair_bf16x2_scaled(uint32_t a, uint32_t b, float s_lo, float s_hi)
{
    const uint32_t h = e4m3x2_to_f16x2((uint16_t)prmt(a, b, ((uint32_t)HI << 4) | LO));
    return pack_bf16x2(__fmul_rn(f16lo_to_f32(h), s_lo), __fmul_rn(f16hi_to_f32(h), s_hi));
}

/* What one lane reads of one FP8 row: channel groups of 8, g0 = lane,
 * g1 = lane + 32, g2 = lane + 64 (lanes 0..7 only). */
struct Fp8RowRegs {
    uint2 a0, a1, a2; /* e4m3 of g0, g1 and (E4M3) g2 */
    uint4 rope;       /* DS_MLA: bf16 RoPE of g2 */
    float s0, s1, s2; /* scales of g0, g1, g2 */
};

/*
 * Load phase for the row at shared address `row`.  gshift = log2 of the
 * E4M3 scale block (0: no block scales).
 */
template <int FMT>
MLA_DEV void fp8_row_load(uint32_t row, uint32_t lane, int gshift, Fp8RowRegs &r)
{
    const uint32_t src = row + MLA_STAGE_FP8_OFFSET;
    r.a0 = lds64(src + 8u * lane);
    r.a1 = lds64(src + 256u + 8u * lane);
    if (FMT == MLA_FMT_FP8_DS_MLA) {
        /* Scale c/128: groups 0..15 -> 0, 16..31 -> 1, 32..47 -> 2, 48..63 -> 3. */
        r.s0 = lds_f32(src + 512u + 4u * (lane >> 4));
        r.s1 = lds_f32(src + 512u + 4u * (2u + (lane >> 4)));
        r.s2 = 1.0f;
        if (lane < 8)
            r.rope = lds128(src + 528u + 16u * lane);
    } else {
        if (lane < 8)
            r.a2 = lds64(src + 512u + 8u * lane);
        if (gshift) {
            const uint32_t sc = row + MLA_STAGE_SCALE_OFFSET;
            r.s0 = lds_f32(sc + 4u * ((8u * lane) >> gshift));
            r.s1 = lds_f32(sc + 4u * ((256u + 8u * lane) >> gshift));
            r.s2 = lane < 8 ? lds_f32(sc + 4u * ((512u + 8u * lane) >> gshift)) : 1.0f;
        } else {
            r.s0 = r.s1 = r.s2 = 1.0f;
        }
    }
}

/* Store phase: the BF16 row over [0, 1152). */
template <int FMT>
MLA_DEV void fp8_row_store(uint32_t row, uint32_t lane, const Fp8RowRegs &r)
{
    uint4 v = e4m3x8_to_bf16x8(r.a0, r.s0);
    sts128(row + 16u * lane, v.x, v.y, v.z, v.w);
    v = e4m3x8_to_bf16x8(r.a1, r.s1);
    sts128(row + 512u + 16u * lane, v.x, v.y, v.z, v.w);
    if (lane < 8) {
        if (FMT == MLA_FMT_FP8_DS_MLA)
            v = r.rope;
        else
            v = e4m3x8_to_bf16x8(r.a2, r.s2);
        sts128(row + 1024u + 16u * lane, v.x, v.y, v.z, v.w);
    }
}

/* Zeros over the BF16 part of a row, by one warp. */
MLA_DEV void zero_row_warp(uint32_t row, uint32_t lane)
{
    sts128(row + 16u * lane, 0u, 0u, 0u, 0u);
    sts128(row + 512u + 16u * lane, 0u, 0u, 0u, 0u);
    if (lane < 8)
        sts128(row + 1024u + 16u * lane, 0u, 0u, 0u, 0u);
}

/* Zeros over the BF16 part of a row, by one thread (72 x 16 bytes). */
MLA_DEV void zero_row_thread(uint32_t row)
{
#pragma unroll 8
    for (uint32_t c = 0; c < MLA_D_QK * 2; c += 16)
        sts128(row + c, 0u, 0u, 0u, 0u);
}

/*
 * One warp converts rows r0 and r0 + 1 of a stage (row_stride bytes
 * apart); rows at or past nvalid become zeros and their FP8 bytes (stale
 * or never loaded) are not read.
 */
template <int FMT>
MLA_DEV void convert_row_pair(uint32_t row0, uint32_t r0, uint32_t nvalid, uint32_t lane,
                              int gshift)
{
    const uint32_t row1 = row0 + MLA_SMEM_ROW_BF16;
    const bool v0 = r0 < nvalid, v1 = r0 + 1 < nvalid;
    Fp8RowRegs x0, x1;
    if (v0)
        fp8_row_load<FMT>(row0, lane, gshift, x0);
    if (v1)
        fp8_row_load<FMT>(row1, lane, gshift, x1);
    __syncwarp(); /* every lane has read both rows before any lane writes */
    if (v0)
        fp8_row_store<FMT>(row0, lane, x0);
    else
        zero_row_warp(row0, lane);
    if (v1)
        fp8_row_store<FMT>(row1, lane, x1);
    else
        zero_row_warp(row1, lane);
}

} /* namespace mla */

#endif /* MLA_CONVERT_CUH */
