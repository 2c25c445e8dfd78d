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
 * The rule is computed with integers on the bit patterns, so that it is
 * exact (no intermediate rounding, subnormal scales included) and gives
 * the same bytes on the device and on a host whatever its floating-point
 * mode (a process with flush-to-zero / denormals-are-zero set included).
 */

/* Bits needed for v > 0. */
MLA_HD int mla_bitlen64(uint64_t v)
{
#ifdef __CUDA_ARCH__
    return 64 - __clzll((long long)v);
#else
    return 64 - __builtin_clzll(v);
#endif
}

/* A positive finite float's magnitude bits a as m * 2^e, m < 2^24. */
MLA_HD void mla_f32_split(uint32_t a, uint32_t *m, int32_t *e)
{
    uint32_t be = a >> 23;
    *m = be ? (a & 0x7fffffu) | 0x800000u : a;
    *e = be ? (int32_t)be - 150 : -149;
}

/* 2^k as a float, k in [-149, 127] (subnormal below -126). */
MLA_HD float mla_f32_pow2(int32_t k)
{
    return mla_f32_from_bits(k >= -126 ? (uint32_t)(k + 127) << 23 : 1u << (k + 149));
}

MLA_HD int mla_f32_positive_finite(uint32_t u)
{
    return u != 0 && u < 0x7f800000u; /* sign clear, not zero, inf or NaN */
}

/*
 * Block scale: the smallest power of two s that fp32 represents (2^-149
 * to 2^127) with amax <= 448 * kv_scale * s, exactly; 2^127 when none is
 * large enough.  s = 1 when amax is not a positive finite number (a block
 * of zeros, or of NaN and Inf only, which mla_amax_accum() skips).
 */
MLA_HD float mla_block_scale_pow2(float amax, float kv_scale)
{
    const uint32_t ua = mla_f32_bits(amax), uk = mla_f32_bits(kv_scale);
    uint32_t a, k;
    int32_t ea, ek;
    if (!mla_f32_positive_finite(ua) || !mla_f32_positive_finite(uk))
        return 1.0f;
    mla_f32_split(ua, &a, &ea);
    mla_f32_split(uk, &k, &ek);
    /* amax = a 2^ea, 448 kv = b 2^eb with b = 7 k: the ratio lies in
     * (2^(j-1), 2^(j+1)) for j below, so s is 2^j or 2^(j+1). */
    const uint64_t b = 7u * (uint64_t)k;
    const int32_t eb = ek + 6;
    const int32_t la = mla_bitlen64(a), lb = mla_bitlen64(b);
    int32_t j = la - lb + ea - eb;
    /* amax <= 448 kv 2^j  <=>  a 2^(lb - la) <= b (shifts below 27). */
    const int fits = lb >= la ? ((uint64_t)a << (lb - la)) <= b : (uint64_t)a <= (b << (la - lb));
    if (!fits)
        j += 1;
    if (j < -149)
        j = -149;
    if (j > 127)
        j = 127;
    return mla_f32_pow2(j);
}

/* Largest |x| so far over finite values (NaN and Inf are skipped),
 * amax >= 0 finite.  Compared as bits, which order like magnitudes. */
MLA_HD float mla_amax_accum(float amax, float x)
{
    const uint32_t ax = mla_f32_bits(x) & 0x7fffffffu;
    if (ax >= 0x7f800000u)
        return amax;
    return ax > mla_f32_bits(amax) ? mla_f32_from_bits(ax) : amax;
}

/*
 * One quantized value: e4m3(x / (kv_scale * s)), the exact quotient
 * rounded once to nearest even, saturated to +-448 (Inf included), NaN ->
 * 0x7F, zero keeping its sign.  kv_scale and s positive finite (else the
 * quotient is taken in fp32).
 */
MLA_HD uint8_t mla_e4m3_quantize(float x, float kv_scale, float s)
{
    const uint32_t ux = mla_f32_bits(x), ax = ux & 0x7fffffffu;
    const uint32_t uk = mla_f32_bits(kv_scale), us = mla_f32_bits(s);
    const uint8_t sign = (uint8_t)((ux >> 24) & 0x80u);
    if (ax > 0x7f800000u)
        return MLA_E4M3_NAN;
    if (!mla_f32_positive_finite(uk) || !mla_f32_positive_finite(us)) {
#ifdef __CUDA_ARCH__
        return mla_float_to_e4m3(__fdiv_rn(x, __fmul_rn(kv_scale, s)));
#else
        return mla_float_to_e4m3(x / (kv_scale * s));
#endif
    }
    if (ax == 0x7f800000u)
        return (uint8_t)(sign | 0x7eu);
    if (ax == 0)
        return sign;
    uint32_t xm, km, sm;
    int32_t xe, ke, se;
    mla_f32_split(ax, &xm, &xe);
    mla_f32_split(uk, &km, &ke);
    mla_f32_split(us, &sm, &se);
    /* |x| / (kv s) = xm / d * 2^(xe - ke - se), d < 2^48.  Scale so that
     * the integer quotient q has 8 or 9 bits; r keeps what is below it. */
    uint64_t n = xm, d = (uint64_t)km * sm;
    const int32_t t = mla_bitlen64(d) - mla_bitlen64(n) + 8;
    if (t >= 0)
        n <<= t;
    else
        d <<= -t;
    const uint64_t q = n / d, r = n % d;
    const int32_t e = xe - ke - se - t;         /* |x| / (kv s) = (q + r/d) 2^e */
    const int32_t lg = mla_bitlen64(q) - 1 + e; /* floor(log2) of the quotient */
    if (lg > 8)
        return (uint8_t)(sign | 0x7eu); /* 512 or more */
    /* e4m3 steps: 2^(lg-3) in the normal range, 2^-9 below 2^-6. */
    const int32_t sh = (lg < -6 ? -9 : lg - 3) - e; /* at least 4 */
    if (sh > 40)
        return sign; /* far below 2^-10: zero */
    uint64_t m = q >> sh;
    const uint64_t rem = q & ((1ull << sh) - 1u), half = 1ull << (sh - 1);
    if (rem > half || (rem == half && (r != 0 || (m & 1u))))
        m += 1u;
    /* Subnormal codes are m itself (8 is 2^-6, the first normal); a
     * normal m in [8, 16] carries into the exponent at 16. */
    uint32_t code = lg < -6 ? (uint32_t)m : ((uint32_t)(lg + 7) << 3) + (uint32_t)m - 8u;
    if (code > 0x7eu)
        code = 0x7eu; /* past 448; 0x7F would be NaN */
    return (uint8_t)(sign | code);
}

#endif /* MLA_FP8_CODEC_H */
