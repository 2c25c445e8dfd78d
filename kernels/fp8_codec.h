/*
 * fp8_codec.h - bit-exact BF16 and FP8 (e4m3fn) conversions and the KV
 * quantization rule, shared by the host library and the CUDA kernels so
 * that both produce identical bytes.
 *
 * Everything here is integer manipulation of IEEE-754 bit patterns plus at
 * most one correctly rounded fp32 multiply and divide, so the result does
 * not depend on the compiler, the host, or the device.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_FP8_CODEC_H
#define MLA_FP8_CODEC_H

#include <stdint.h>
#include <string.h> /* memcpy: host-side bit casts (nvcc's host pass too) */

#include "mla_params.h"

/* e4m3fn: 1 sign, 4 exponent bits (bias 7), 3 mantissa bits, no infinity,
 * S.1111.111 is NaN, largest finite 0x7E = 448, subnormals m * 2^-9. */
#define MLA_E4M3_MAX 448.0f
#define MLA_E4M3_NAN 0x7F

/* ---- raw float bits ---- */

MLA_HD uint32_t mla_f32_bits(float f)
{
#ifdef __CUDA_ARCH__
    return __float_as_uint(f);
#else
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
#endif
}

MLA_HD float mla_f32_from_bits(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
#endif
}

/* ---- bf16 ---- */

MLA_HD float mla_bf16_to_float(uint16_t h)
{
    return mla_f32_from_bits((uint32_t)h << 16);
}

/* Round to nearest, ties to even; NaN becomes a quiet NaN of the same
 * sign (a NaN whose payload sits in the low half must not become inf). */
MLA_HD uint16_t mla_float_to_bf16(float f)
{
    uint32_t u = mla_f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x0040u);
    /* Adding 0x7fff plus the lsb of the kept half rounds half to even;
     * a carry into the exponent is the correct result (up to inf). */
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

/* ---- e4m3fn ---- */

MLA_HD float mla_e4m3_to_float(uint8_t c)
{
    uint32_t sign = (uint32_t)(c & 0x80u) << 24;
    uint32_t e = (c >> 3) & 0xfu;
    uint32_t m = c & 0x7u;
    uint32_t mag;
    if (e == 0xfu && m == 0x7u)
        return mla_f32_from_bits(sign | 0x7fc00000u);
    if (e != 0) {
        /* (1 + m/8) * 2^(e-7): rebias the exponent from 7 to 127. */
        mag = ((e + 120u) << 23) | (m << 20);
    } else if (m != 0) {
        /* m * 2^-9 with m in 1..7: normalize so the top set bit of m is
         * the implicit one.  m = 1 -> 2^-9, 2..3 -> 2^-8, 4..7 -> 2^-7. */
        uint32_t p = m >= 4 ? 2u : m >= 2 ? 1u : 0u;   /* floor(log2 m) */
        uint32_t frac = (m << (23u - p)) & 0x7fffffu;  /* drop the leading 1 */
        mag = ((127u - 9u + p) << 23) | frac;
    } else {
        mag = 0; /* +-0 */
    }
    return mla_f32_from_bits(sign | mag);
}

/* Round to nearest, ties to even, saturating to +-448 (inf included);
 * NaN -> 0x7F.  Values below half the smallest subnormal (2^-10) become
 * a zero of the input's sign. */
MLA_HD uint8_t mla_float_to_e4m3(float f)
{
    uint32_t u = mla_f32_bits(f);
    uint32_t sign = (u >> 24) & 0x80u;
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u)
        return MLA_E4M3_NAN;
    if (a >= 0x43e00000u) /* >= 448.0f, inf included */
        return (uint8_t)(sign | 0x7eu);

    int32_t exp = (int32_t)(a >> 23) - 127; /* unbiased; -127 for fp32 0/subnormal */
    uint32_t sig = (a & 0x7fffffu) | 0x800000u;
    uint32_t code, rem, half;
    if (exp >= -6) {
        /* e4m3 normal: keep 3 of the 23 mantissa bits.  A rounding carry
         * out of the mantissa bumps the exponent field, which is exactly
         * the next binade; below 448 it cannot reach the NaN code. */
        code = ((uint32_t)(exp + 7) << 3) | ((a >> 20) & 0x7u);
        rem = a & 0xfffffu;
        half = 0x80000u;
    } else {
        /* e4m3 subnormal: value / 2^-9 = sig * 2^(exp - 14).  exp <= -7
         * gives a shift of at least 21; at 25 or more the value is below
         * 2^-10 and rounds to zero (fp32 subnormals included). */
        uint32_t shift = (uint32_t)(14 - exp);
        if (shift >= 25u)
            return (uint8_t)sign;
        code = sig >> shift;
        rem = sig & ((1u << shift) - 1u);
        half = 1u << (shift - 1u);
    }
    if (rem > half || (rem == half && (code & 1u)))
        code += 1u; /* 7 -> 8 turns the largest subnormal into 2^-6 */
    return (uint8_t)(sign | code);
}

/* ---- quantization rule of mla_kv_append() ---- */

/*
 * Block scale: s = 2^ceil(log2(t)) for t = amax / (448 * kv_scale) in
 * fp32, i.e. the smallest power of two with t <= s.  s = 1 when t is not
 * a positive finite number (amax == 0, NaN, inf).  The exponent is
 * clamped to the normal fp32 range [2^-126, 2^127].
 */
MLA_HD float mla_block_scale_pow2(float amax, float kv_scale)
{
#ifdef __CUDA_ARCH__
    float t = __fdiv_rn(amax, __fmul_rn(MLA_E4M3_MAX, kv_scale));
#else
    float t = amax / (MLA_E4M3_MAX * kv_scale);
#endif
    uint32_t u = mla_f32_bits(t);
    if ((u & 0x80000000u) || u == 0 || u >= 0x7f800000u)
        return 1.0f;
    int32_t bexp = (int32_t)(u >> 23); /* biased; 0 for subnormal t */
    if (bexp == 0)
        return mla_f32_from_bits(1u << 23); /* 2^-126, the clamp */
    if (u & 0x7fffffu)
        bexp += 1; /* not a power of two: round up to the next one */
    if (bexp > 254)
        bexp = 254; /* 2^127 */
    return mla_f32_from_bits((uint32_t)bexp << 23);
}

/* Largest |x| seen so far; NaN inputs are ignored.  Exact. */
MLA_HD float mla_amax_accum(float amax, float x)
{
    float ax = mla_f32_from_bits(mla_f32_bits(x) & 0x7fffffffu);
    return ax > amax ? ax : amax; /* false for NaN */
}

/*
 * One quantized value: e4m3(x / (kv_scale * s)), the product and the
 * quotient each one correctly rounded fp32 operation (explicit intrinsics
 * on the device so that fast-math options cannot change the bytes).
 * s = 1 without block scales.
 */
MLA_HD uint8_t mla_e4m3_quantize(float x, float kv_scale, float s)
{
#ifdef __CUDA_ARCH__
    return mla_float_to_e4m3(__fdiv_rn(x, __fmul_rn(kv_scale, s)));
#else
    float d = kv_scale * s;
    return mla_float_to_e4m3(x / d);
#endif
}

#endif /* MLA_FP8_CODEC_H */
