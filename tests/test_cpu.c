/*
 * test_cpu.c - tests of the BF16/FP8 codec and of the CPU backend's
 * mla_kv_append() and mla_decode() against an independent fp64 reference
 * written here, through the public API only.
 *
 * Random inputs come from a splitmix64 generator seeded from the clock,
 * or from MLA_TEST_SEED; the seed is printed so failures reproduce.
 * MLA_TEST_LONG=1 adds large shapes.
 *
 * SPDX-License-Identifier: MIT
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <check.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "mla.h"
#include "mla_experimental.h"
#include "rng.h"
#include "fp8_codec.h"

/* ------------------------------------------------------------------ */
/* Random numbers */

static double rnd_sym(double amp) /* [-amp, amp) */
{
    return amp * (2.0 * rnd_unit() - 1.0);
}

/* ------------------------------------------------------------------ */
/* Independent formulas (no bit tricks shared with the codec) */

static double ref_e4m3(uint8_t c)
{
    int e = (c >> 3) & 15, m = c & 7;
    double v;
    if ((c & 0x7f) == 0x7f)
        return NAN;
    v = e ? ldexp(8 + m, e - 10) : ldexp(m, -9);
    return (c & 0x80) ? -v : v;
}

static double ref_bf16(uint16_t h)
{
    int e = (h >> 7) & 0xff, m = h & 0x7f;
    double v;
    if (e == 0xff)
        v = m ? NAN : INFINITY;
    else
        v = e ? ldexp(128 + m, e - 134) : ldexp(m, -133);
    return (h & 0x8000) ? -v : v;
}

/* Nearest e4m3 code by exhaustive search, ties to the even code,
 * saturating at 448, NaN -> 0x7F. */
static uint8_t ref_e4m3_encode(double x)
{
    uint8_t sign = signbit(x) ? 0x80 : 0, best = 0;
    double ax = fabs(x), bestd = INFINITY;
    int c;
    if (isnan(x))
        return 0x7f;
    if (ax >= 448.0)
        return (uint8_t)(sign | 0x7e);
    for (c = 0; c <= 0x7e; c++) {
        double d = fabs(ref_e4m3((uint8_t)c) - ax);
        if (d < bestd || (d == bestd && (c & 1) == 0)) {
            bestd = d;
            best = (uint8_t)c;
        }
    }
    return (uint8_t)(sign | best);
}

static float f_from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint16_t rd16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static float rdf(const uint8_t *p)
{
    float v;
    memcpy(&v, p, 4);
    return v;
}

static int is_pow2(double s)
{
    int e;
    return s > 0 && frexp(s, &e) == 0.5;
}

static void *xalloc(size_t bytes)
{
    size_t n = (bytes + 255) / 256 * 256;
    void *p = aligned_alloc(256, n ? n : 256);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* ck_assert* record a checkpoint even when they pass (a write to a pipe
 * in fork mode), too slow for per-element checks: test, then abort. */
#define REQUIRE(cond, ...)                  \
    do {                                    \
        if (!(cond))                        \
            ck_abort_msg(__VA_ARGS__);      \
    } while (0)

#define ST_OK(call)                                                                     \
    do {                                                                                \
        mla_status_t st_ = (call);                                                      \
        REQUIRE(st_ == MLA_STATUS_SUCCESS, "%s -> %s", #call, mla_status_string(st_));  \
    } while (0)

/* ------------------------------------------------------------------ */
/* Codec */

START_TEST(e4m3_decode_all)
{
    int c;
    for (c = 0; c < 256; c++) {
        float f = mla_e4m3_to_float((uint8_t)c);
        double r = ref_e4m3((uint8_t)c);
        if (isnan(r)) {
            REQUIRE(isnan(f), "code 0x%02x should be NaN", c);
        } else {
            REQUIRE((double)f == r && !signbit(f) == !signbit(r),
                          "code 0x%02x: %a, want %a", c, (double)f, r);
        }
    }
    ck_assert(mla_e4m3_to_float(0x7e) == 448.0f);
    ck_assert(mla_e4m3_to_float(0x01) == 0x1p-9f);
    ck_assert(mla_e4m3_to_float(0x08) == 0x1p-6f);
    ck_assert(isnan(mla_e4m3_to_float(0x7f)) && isnan(mla_e4m3_to_float(0xff)));
}
END_TEST

START_TEST(e4m3_encode_roundtrip)
{
    int c;
    for (c = 0; c < 256; c++) {
        if ((c & 0x7f) == 0x7f)
            continue;
        REQUIRE(mla_float_to_e4m3(mla_e4m3_to_float((uint8_t)c)) == c,
                      "code 0x%02x does not round trip", c);
    }
    ck_assert_uint_eq(mla_float_to_e4m3(0.0f), 0x00);
    ck_assert_uint_eq(mla_float_to_e4m3(-0.0f), 0x80);
}
END_TEST

START_TEST(e4m3_ties)
{
    int c, neg;
    /* Midpoints of neighbouring codes (exact in fp32: 5 significant bits). */
    for (neg = 0; neg < 2; neg++) {
        for (c = 0; c < 0x7e; c++) {
            float lo = mla_e4m3_to_float((uint8_t)c), hi = mla_e4m3_to_float((uint8_t)(c + 1));
            float mid = (lo + hi) / 2, sg = neg ? -1.0f : 1.0f;
            uint8_t s = neg ? 0x80 : 0;
            int even = (c & 1) ? c + 1 : c;
            REQUIRE((double)mid == ((double)lo + (double)hi) / 2, "midpoint not exact");
            REQUIRE(mla_float_to_e4m3(sg * mid) == (s | even),
                          "tie %a -> 0x%02x, want 0x%02x", (double)(sg * mid),
                          mla_float_to_e4m3(sg * mid), s | even);
            ck_assert_uint_eq(mla_float_to_e4m3(sg * nextafterf(mid, INFINITY)), s | (c + 1));
            ck_assert_uint_eq(mla_float_to_e4m3(sg * nextafterf(mid, 0.0f)), s | c);
        }
    }
}
END_TEST

START_TEST(e4m3_saturation_nan)
{
    const float big[] = {448.0f, 448.5f, 449.0f, 463.9f, 464.0f, 480.0f, 500.0f,
                         1e30f,  FLT_MAX, INFINITY};
    size_t i;
    for (i = 0; i < sizeof big / sizeof big[0]; i++) {
        REQUIRE(mla_float_to_e4m3(big[i]) == 0x7e, "%g", (double)big[i]);
        REQUIRE(mla_float_to_e4m3(-big[i]) == 0xfe, "-%g", (double)big[i]);
    }
    ck_assert_uint_eq(mla_float_to_e4m3(nextafterf(448.0f, 0.0f)), 0x7e); /* rounds to 448 */
    ck_assert_uint_eq(mla_float_to_e4m3(432.0f), 0x7e);                  /* 416|448 tie: even */
    ck_assert_uint_eq(mla_float_to_e4m3(nextafterf(432.0f, 0.0f)), 0x7d);
    ck_assert_uint_eq(mla_float_to_e4m3(NAN), 0x7f);
    ck_assert_uint_eq(mla_float_to_e4m3(-NAN), 0x7f);
    ck_assert_uint_eq(mla_float_to_e4m3(f_from_bits(0x7f800001u)), 0x7f); /* signalling */
    ck_assert(isnan(mla_e4m3_to_float(mla_float_to_e4m3(NAN))));
    ck_assert_uint_eq(mla_e4m3_quantize(NAN, 1.0f, 1.0f), 0x7f);
    ck_assert_uint_eq(mla_e4m3_quantize(1000.0f, 0.5f, 1.0f), 0x7e);
}
END_TEST

START_TEST(e4m3_subnormals)
{
    ck_assert_uint_eq(mla_float_to_e4m3(0x1p-10f), 0x00);                      /* tie 0|1 */
    ck_assert_uint_eq(mla_float_to_e4m3(nextafterf(0x1p-10f, 1.0f)), 0x01);
    ck_assert_uint_eq(mla_float_to_e4m3(nextafterf(0x1p-10f, 0.0f)), 0x00);
    ck_assert_uint_eq(mla_float_to_e4m3(-0x1p-10f), 0x80);
    ck_assert_uint_eq(mla_float_to_e4m3(3 * 0x1p-10f), 0x02);                  /* tie 1|2 */
    ck_assert_uint_eq(mla_float_to_e4m3(5 * 0x1p-10f), 0x02);                  /* tie 2|3 */
    ck_assert_uint_eq(mla_float_to_e4m3(15 * 0x1p-10f), 0x08);                 /* tie 7|2^-6 */
    ck_assert_uint_eq(mla_float_to_e4m3(nextafterf(15 * 0x1p-10f, 0.0f)), 0x07);
    ck_assert_uint_eq(mla_float_to_e4m3(0x1p-6f), 0x08);
    ck_assert_uint_eq(mla_float_to_e4m3(nextafterf(0x1p-6f, 0.0f)), 0x08);
    ck_assert_uint_eq(mla_float_to_e4m3(0x1p-11f), 0x00);
    ck_assert_uint_eq(mla_float_to_e4m3(f_from_bits(1)), 0x00);           /* fp32 subnormal */
    ck_assert_uint_eq(mla_float_to_e4m3(-f_from_bits(0x007fffffu)), 0x80);
    ck_assert_uint_eq(mla_float_to_e4m3(FLT_MIN), 0x00);
}
END_TEST

START_TEST(e4m3_random_vs_search)
{
    int i;
    rnd_start(11);
    for (i = 0; i < 20000; i++) {
        /* Magnitudes from 2^-12 to 2^10 with random mantissas. */
        double x = ldexp(1.0 + rnd_unit(), rnd_int(23) - 12) * (rnd_int(2) ? -1 : 1);
        float f = (float)x;
        uint8_t got = mla_float_to_e4m3(f), want = ref_e4m3_encode((double)f);
        REQUIRE(got == want, "e4m3(%a) = 0x%02x, want 0x%02x", (double)f, got, want);
    }
}
END_TEST

START_TEST(bf16_codec)
{
    uint32_t h;
    int i;
    for (h = 0; h < 65536; h++) {
        float f = mla_bf16_to_float((uint16_t)h);
        double r = ref_bf16((uint16_t)h);
        if (isnan(r)) {
            uint16_t back = mla_float_to_bf16(f);
            REQUIRE(isnan(f), "0x%04x", h);
            REQUIRE((back & 0x7f80) == 0x7f80 && (back & 0x0040),
                          "NaN 0x%04x -> 0x%04x is not a quiet NaN", h, back);
            continue;
        }
        REQUIRE((double)f == r && !signbit(f) == !signbit(r), "bf16 0x%04x", h);
        REQUIRE(mla_float_to_bf16(f) == h, "bf16 0x%04x does not round trip", h);
    }
    /* Ties to even, and just off the tie. */
    ck_assert_uint_eq(mla_float_to_bf16(f_from_bits(0x3f808000u)), 0x3f80);
    ck_assert_uint_eq(mla_float_to_bf16(f_from_bits(0x3f818000u)), 0x3f82);
    ck_assert_uint_eq(mla_float_to_bf16(f_from_bits(0x3f808001u)), 0x3f81);
    ck_assert_uint_eq(mla_float_to_bf16(f_from_bits(0x3f807fffu)), 0x3f80);
    ck_assert_uint_eq(mla_float_to_bf16(f_from_bits(0xbf818000u)), 0xbf82);
    ck_assert_uint_eq(mla_float_to_bf16(f_from_bits(0x7f7f8000u)), 0x7f80); /* to inf */
    ck_assert_uint_eq(mla_float_to_bf16(f_from_bits(0x7f7f7fffu)), 0x7f7f);
    ck_assert_uint_eq(mla_float_to_bf16(f_from_bits(0x00008000u)), 0x0000);
    ck_assert_uint_eq(mla_float_to_bf16(f_from_bits(0x00018000u)), 0x0002);
    ck_assert_uint_eq(mla_float_to_bf16(INFINITY), 0x7f80);
    ck_assert_uint_eq(mla_float_to_bf16(-INFINITY), 0xff80);
    /* NaN payload only in the low half must stay NaN, not become inf. */
    ck_assert(isnan(mla_bf16_to_float(mla_float_to_bf16(f_from_bits(0x7f800001u)))));
    ck_assert(isnan(mla_bf16_to_float(mla_float_to_bf16(f_from_bits(0xff800001u)))));
    /* Random floats against the nearest of the two neighbours. */
    rnd_start(12);
    for (i = 0; i < 100000; i++) {
        uint32_t u = (uint32_t)rnd_u64();
        float f = f_from_bits(u);
        uint16_t got, lo = (uint16_t)(u >> 16);
        double dlo, dhi, x = (double)f;
        if (isnan(f) || isinf(f))
            continue;
        got = mla_float_to_bf16(f);
        dlo = fabs(ref_bf16(lo) - x);
        /* Past the largest finite value the next one up counts as 2^128,
         * so that IEEE overflow to inf is the nearest result there. */
        dhi = ((lo + 1) & 0x7fff) == 0x7f80 ? fabs(copysign(0x1p128, x) - x)
                                              : fabs(ref_bf16((uint16_t)(lo + 1)) - x);
        if (dlo < dhi || (dlo == dhi && !(lo & 1)))
            REQUIRE(got == lo, "bf16(%a)", x);
        else
            REQUIRE(got == (uint16_t)(lo + 1), "bf16(%a)", x);
    }
}
END_TEST

START_TEST(block_scale)
{
    int i;
    ck_assert(mla_block_scale_pow2(448.0f, 1.0f) == 1.0f);
    ck_assert(mla_block_scale_pow2(896.0f, 1.0f) == 2.0f);
    ck_assert(mla_block_scale_pow2(224.0f, 1.0f) == 0.5f);
    ck_assert(mla_block_scale_pow2(225.0f, 1.0f) == 1.0f);
    ck_assert(mla_block_scale_pow2(nextafterf(448.0f, INFINITY), 1.0f) == 2.0f);
    ck_assert(mla_block_scale_pow2(nextafterf(448.0f, 0.0f), 1.0f) == 1.0f);
    ck_assert(mla_block_scale_pow2(7.0f, 1.0f) == 0x1p-6f);  /* 7/448 = 2^-6 */
    ck_assert(mla_block_scale_pow2(7.5f, 1.0f) == 0x1p-5f);
    ck_assert(mla_block_scale_pow2(448.0f, 0.5f) == 2.0f);
    ck_assert(mla_block_scale_pow2(448.0f, 4.0f) == 0.25f);
    ck_assert(mla_block_scale_pow2(1.0f, 1.0f) == 0x1p-8f); /* 1/448 in (2^-9, 2^-8] */
    ck_assert(mla_block_scale_pow2(0.0f, 1.0f) == 1.0f);
    ck_assert(mla_block_scale_pow2(0.0f, 0.001f) == 1.0f);
    ck_assert(mla_block_scale_pow2(NAN, 1.0f) == 1.0f);
    ck_assert(mla_block_scale_pow2(INFINITY, 1.0f) == 1.0f);
    ck_assert(mla_block_scale_pow2(-3.0f, 1.0f) == 1.0f);
    /* bf16 subnormals get the exact power of two, subnormal itself:
     * 1e-40 / 448 lies in (2^-142, 2^-141]. */
    ck_assert(mla_block_scale_pow2(1e-40f, 1.0f) == 0x1p-141f);
    ck_assert(mla_block_scale_pow2(f_from_bits(1), 1.0f) == 0x1p-149f);  /* 2^-149 / 448 */
    ck_assert(mla_block_scale_pow2(f_from_bits(1), 1e30f) == 0x1p-149f); /* none smaller */
    ck_assert(mla_block_scale_pow2(448 * 0x1p-140f, 1.0f) == 0x1p-140f);
    ck_assert(mla_block_scale_pow2(nextafterf(448 * 0x1p-140f, 1), 1.0f) == 0x1p-139f);
    ck_assert(mla_block_scale_pow2(FLT_MAX, 1.0f) == 0x1p120f);
    ck_assert(mla_block_scale_pow2(FLT_MAX, 1e-30f) == 0x1p127f); /* none large enough */
    /* t = 1.5 * 2^127 / 0.875 is finite but rounds up past 2^127: clamped. */
    ck_assert(mla_block_scale_pow2(0x1.8p127f, 0x1p-9f) == 0x1p127f);
    /* Random: the smallest power of two s with amax <= 448 kv s, checked
     * exactly (448 kv s is exact in double here; a float quotient
     * amax / (448 kv) can round onto the power of two just below s). */
    rnd_start(13);
    for (i = 0; i < 20000; i++) {
        float amax = (float)ldexp(1.0 + rnd_unit(), rnd_int(40) - 20);
        float kv = (float)ldexp(1.0 + rnd_unit(), rnd_int(16) - 8);
        float s = mla_block_scale_pow2(amax, kv);
        REQUIRE(is_pow2(s), "%a", (double)s);
        REQUIRE((double)amax <= 448.0 * kv * s && (double)amax > 448.0 * kv * (s / 2),
                "amax %a kv %a: s %a", (double)amax, (double)kv, (double)s);
        /* The rule it stands for: amax / (kv * s) <= 448 up to rounding. */
        REQUIRE((double)amax / ((double)kv * s) <= 448.0 * (1 + 0x1p-22), "%a", (double)amax);
    }
}
END_TEST

START_TEST(amax_accum)
{
    ck_assert(mla_amax_accum(0.0f, -3.0f) == 3.0f);
    ck_assert(mla_amax_accum(4.0f, -3.0f) == 4.0f);
    ck_assert(mla_amax_accum(1.0f, NAN) == 1.0f);
    /* Infinities are skipped like NaN: the scale follows the finite values. */
    ck_assert(mla_amax_accum(1.0f, -INFINITY) == 1.0f);
    ck_assert(mla_amax_accum(0.0f, INFINITY) == 0.0f);
    ck_assert(mla_amax_accum(0.0f, -f_from_bits(5)) == f_from_bits(5));
    ck_assert(mla_amax_accum(f_from_bits(5), f_from_bits(4)) == f_from_bits(5));
}
END_TEST

/* The block scale against its definition, in long double (exact here):
 * the smallest fp32 power of two s with amax <= 448 kv s. */
START_TEST(block_scale_exact)
{
    int i;
    rnd_start(14);
    for (i = 0; i < 200000; i++) {
        /* amax anywhere from fp32 subnormals up; kv in [1e-30, 1e30]. */
        float amax = i % 3 ? (float)ldexp(1.0 + rnd_unit(), rnd_int(300) - 170)
                           : f_from_bits(1 + (uint32_t)rnd_int(0x7fffff));
        float kv = (float)ldexp(1.0 + rnd_unit(), rnd_int(199) - 99);
        float s = mla_block_scale_pow2(amax, kv);
        long double lim = 448.0L * kv;
        if (amax == 0 || isinf(amax))
            continue;
        REQUIRE(is_pow2(s), "amax %a kv %a: %a", (double)amax, (double)kv, (double)s);
        if (s == 0x1p127f && amax > lim * s)
            continue; /* no power of two is large enough */
        REQUIRE(amax <= lim * s, "amax %a kv %a: s %a too small", (double)amax, (double)kv,
                (double)s);
        REQUIRE(s == 0x1p-149f || amax > lim * (s / 2), "amax %a kv %a: s %a not the smallest",
                (double)amax, (double)kv, (double)s);
    }
}
END_TEST

/* One quantized value against the nearest code of the exact quotient
 * (double holds kv * s exactly; the quotient's rounding to 53 bits cannot
 * move it across an e4m3 midpoint here), subnormal scales included. */
START_TEST(quantize_exact)
{
    int i;
    rnd_start(15);
    for (i = 0; i < 200000; i++) {
        /* x: a bf16 value, subnormals included; s: a power of two from
         * 2^-149 or an arbitrary fp32 scale; kv in [1e-30, 1e30]. */
        uint16_t h = (uint16_t)rnd_u64();
        float x = mla_bf16_to_float(h);
        float kv = i % 2 ? 1.0f : (float)ldexp(1.0 + rnd_unit(), rnd_int(41) - 20);
        float s = i % 4 < 3 ? (float)ldexp(1.0, rnd_int(277) - 149)
                            : (float)ldexp(1.0 + rnd_unit(), rnd_int(60) - 30);
        uint8_t got, want;
        if (isnan(x)) {
            REQUIRE(mla_e4m3_quantize(x, kv, s) == 0x7f, "NaN");
            continue;
        }
        got = mla_e4m3_quantize(x, kv, s);
        want = ref_e4m3_encode((double)x / ((double)kv * (double)s));
        REQUIRE(got == want, "e4m3(%a / (%a * %a)) = 0x%02x, want 0x%02x", (double)x, (double)kv,
                (double)s, got, want);
    }
    ck_assert_uint_eq(mla_e4m3_quantize(INFINITY, 0.5f, 0x1p-149f), 0x7e);
    ck_assert_uint_eq(mla_e4m3_quantize(-INFINITY, 1.0f, 1.0f), 0xfe);
    ck_assert_uint_eq(mla_e4m3_quantize(-0.0f, 1.0f, 0x1p-140f), 0x80);
    ck_assert_uint_eq(mla_e4m3_quantize(f_from_bits(1), 1.0f, 0x1p-149f), 0x38); /* 1.0 */
    /* 0x1p-130 / 2^-141 = 2^11: saturates; tie 464 -> 448 (even). */
    ck_assert_uint_eq(mla_e4m3_quantize(0x1p-130f, 1.0f, 0x1p-141f), 0x7e);
    ck_assert_uint_eq(mla_e4m3_quantize(464.0f * 0x1p-141f, 1.0f, 0x1p-141f), 0x7e);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Shared setup */

struct fmt_case {
    int fmt, g;
};

static const struct fmt_case FMTS[] = {
    {MLA_KV_BF16, 0},      {MLA_KV_FP8_E4M3, 0},  {MLA_KV_FP8_E4M3, 32},
    {MLA_KV_FP8_E4M3, 64}, {MLA_KV_FP8_E4M3, 128}, {MLA_KV_FP8_DS_MLA, 0},
};
#define NFMTS ((int)(sizeof FMTS / sizeof FMTS[0]))

static const char *fmt_name(int fmt)
{
    return fmt == MLA_KV_BF16 ? "bf16" : fmt == MLA_KV_FP8_E4M3 ? "e4m3" : "ds_mla";
}

static int row_bytes_of(int fmt)
{
    return fmt == MLA_KV_BF16 ? 1152 : fmt == MLA_KV_FP8_E4M3 ? 576 : 656;
}

static int spr_of(int fmt, int g)
{
    return fmt == MLA_KV_FP8_E4M3 && g ? (576 + g - 1) / g : 0;
}

static mla_config_t *make_config(int h_q, int h_kv, int q_len, int fmt, int g, int ps, int causal,
                                 double kv_scale, double softmax_scale)
{
    mla_config_t *cfg;
    int64_t v;
    ST_OK(mla_config_create(&cfg));
    ST_OK(mla_config_set_int(cfg, MLA_PARAM_NUM_HEADS, h_q));
    ST_OK(mla_config_set_int(cfg, MLA_PARAM_NUM_KV_HEADS, h_kv));
    ST_OK(mla_config_set_int(cfg, MLA_PARAM_Q_LEN, q_len));
    ST_OK(mla_config_set_int(cfg, MLA_PARAM_KV_FORMAT, fmt));
    ST_OK(mla_config_set_int(cfg, MLA_PARAM_PAGE_SIZE, ps));
    ST_OK(mla_config_set_int(cfg, MLA_PARAM_SCALE_BLOCK_SIZE, g));
    ST_OK(mla_config_set_int(cfg, MLA_PARAM_CAUSAL, causal));
    ST_OK(mla_config_set_float(cfg, MLA_PARAM_KV_SCALE, kv_scale));
    ST_OK(mla_config_set_float(cfg, MLA_PARAM_SOFTMAX_SCALE, softmax_scale));
    ST_OK(mla_config_get_int(cfg, MLA_PARAM_KV_ROW_BYTES, &v));
    ck_assert_int_eq(v, row_bytes_of(fmt));
    ST_OK(mla_config_get_int(cfg, MLA_PARAM_SCALES_PER_ROW, &v));
    ck_assert_int_eq(v, spr_of(fmt, g));
    return cfg;
}

static mla_context_t *make_cpu_context(void)
{
    mla_context_t *ctx;
    ST_OK(mla_context_create(&ctx, MLA_DEVICE_CPU));
    return ctx;
}

/* ------------------------------------------------------------------ */
/* Append */

/* One append round trip per format: every written row decodes within the
 * e4m3 error bound, scales follow the rule, padding and other rows are
 * untouched. */
START_TEST(append_roundtrip)
{
    const struct fmt_case fc = FMTS[_i];
    const int ps = 16, h_kv = 1 + _i % 2, num_pages = 5, n = 23;
    const int rb = row_bytes_of(fc.fmt), spr = spr_of(fc.fmt, fc.g);
    const int64_t nrows = (int64_t)num_pages * ps * h_kv;
    double kvd = fc.fmt == MLA_KV_FP8_E4M3 ? 0.37 + _i * 0.11 : 1.0; /* E4M3 only */
    float kv = (float)kvd; /* the library applies kv_scale in fp32 */
    mla_context_t *ctx = make_cpu_context();
    mla_config_t *cfg = make_config(16, h_kv, 1, fc.fmt, fc.g, ps, 0, kvd, 0);
    uint8_t *cache = xalloc((size_t)nrows * rb), *before = xalloc((size_t)nrows * rb);
    float *scales = spr ? xalloc((size_t)nrows * spr * 4) : NULL;
    float *sbefore = spr ? xalloc((size_t)nrows * spr * 4) : NULL;
    uint16_t *lat = xalloc((size_t)n * h_kv * 576 * 2);
    int64_t *slots = xalloc((size_t)n * 8);
    int *perm = malloc(sizeof(int) * num_pages * ps);
    char *written = calloc((size_t)nrows, 1);
    int64_t i, r;
    int k, c;

    rnd_start(100 + (uint64_t)_i);
    for (i = 0; i < (int64_t)nrows * rb; i++)
        cache[i] = (uint8_t)rnd_u64();
    memcpy(before, cache, (size_t)nrows * rb);
    if (spr) {
        for (i = 0; i < nrows * spr; i++)
            scales[i] = (float)rnd_sym(10);
        memcpy(sbefore, scales, (size_t)nrows * spr * 4);
    }
    /* Distinct random slots, every fourth one padding. */
    for (i = 0; i < num_pages * ps; i++)
        perm[i] = (int)i;
    for (i = num_pages * ps - 1; i > 0; i--) {
        int j = rnd_int((int)i + 1), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    for (i = 0; i < n; i++)
        slots[i] = i % 4 == 3 ? -1 - rnd_int(1000) : perm[i];
    /* Values: magnitudes varying by channel group, some all-zero groups,
     * one NaN; FP8 without block scales stays below saturation. */
    for (i = 0; i < n * h_kv; i++) {
        for (c = 0; c < 576; c++) {
            int grp = c / 32;
            double amp = fc.fmt == MLA_KV_FP8_E4M3 && fc.g == 0
                             ? 400.0 * kv * ldexp(1.0, -(int)((i + grp) % 12))
                             : ldexp(1.0, (int)((i * 7 + grp * 3) % 25) - 12);
            if ((i + grp) % 9 == 4)
                amp = 0; /* zero blocks: scale 1 */
            lat[i * 576 + c] = mla_float_to_bf16((float)rnd_sym(amp));
        }
    }
    /* Put each block's maximum on its first or last channel, twice any
     * other value, so that the scale depends on the block's edges. */
    if (spr || fc.fmt == MLA_KV_FP8_DS_MLA) {
        int blen = fc.fmt == MLA_KV_FP8_DS_MLA ? 128 : fc.g;
        int nblk = fc.fmt == MLA_KV_FP8_DS_MLA ? 4 : spr;
        for (i = 0; i < n * h_kv; i++) {
            int blk;
            for (blk = 0; blk < nblk; blk++) {
                int c0 = blk * blen, c1 = c0 + blen < 576 ? c0 + blen : 576;
                float amax = 0;
                for (c = c0; c < c1; c++)
                    amax = fmaxf(amax, fabsf(mla_bf16_to_float(lat[i * 576 + c])));
                if (amax > 0)
                    lat[i * 576 + (i % 2 ? c1 - 1 : c0)] = mla_float_to_bf16(-2 * amax);
            }
        }
    }
    lat[5 * 576 + 77] = 0x7fc0; /* NaN */

    ST_OK(mla_kv_append(ctx, cfg, cache, scales, num_pages, lat, slots, n, NULL));

    for (i = 0; i < n; i++) {
        if (slots[i] < 0)
            continue;
        for (k = 0; k < h_kv; k++) {
            const uint16_t *x = lat + (i * h_kv + k) * 576;
            int64_t row = slots[i] * h_kv + k;
            const uint8_t *p = cache + row * rb;
            written[row] = 1;
            for (c = 0; c < 576; c++) {
                double xv = ref_bf16(x[c]), deq, s = 1.0, bound;
                int blk = -1;
                if (fc.fmt == MLA_KV_BF16) {
                    REQUIRE(rd16(p + 2 * c) == x[c], "bf16 row %lld ch %d", (long long)row, c);
                    continue;
                }
                if (fc.fmt == MLA_KV_FP8_DS_MLA && c >= 512) {
                    REQUIRE(rd16(p + 528 + 2 * (c - 512)) == x[c], "rope %d", c);
                    continue;
                }
                if (fc.fmt == MLA_KV_FP8_DS_MLA)
                    blk = c / 128, s = rdf(p + 512 + 4 * blk);
                else if (fc.g)
                    blk = c / fc.g, s = scales[row * spr + blk];
                if (blk >= 0) {
                    /* The block's scale follows the rule (amax over the
                     * block, computed here independently). */
                    int blen = fc.fmt == MLA_KV_FP8_DS_MLA ? 128 : fc.g;
                    int c0 = blk * blen, c1 = c0 + blen < 576 ? c0 + blen : 576, cc;
                    double amax = 0;
                    for (cc = c0; cc < c1; cc++)
                        if (!isnan(ref_bf16(x[cc])) && fabs(ref_bf16(x[cc])) > amax)
                            amax = fabs(ref_bf16(x[cc]));
                    REQUIRE(is_pow2(s), "scale %g of block %d not a power of two", s, blk);
                    REQUIRE((float)s == mla_block_scale_pow2((float)amax, kv), "scale %g", s);
                    if (amax == 0)
                        REQUIRE(s == 1.0, "scale %g of a zero block", s);
                    else
                        REQUIRE(amax <= 448.0 * kv * s && amax > 448.0 * kv * (s / 2),
                                      "scale %g is not the smallest for amax %g", s, amax);
                }
                /* The exact rule, as the GPU applies it. */
                REQUIRE(p[c] == mla_e4m3_quantize((float)xv, kv, (float)s),
                              "row %lld ch %d: code 0x%02x", (long long)row, c, p[c]);
                deq = ref_e4m3(p[c]) * kv * s;
                if (isnan(xv)) {
                    REQUIRE((p[c] & 0x7f) == 0x7f, "NaN -> 0x%02x", p[c]);
                    continue;
                }
                bound = 0x1p-4 * fabs(xv) + 0x1p-10 * kv * s + 1e-6 * fabs(xv);
                REQUIRE(fabs(deq - xv) <= bound, "row %lld ch %d: %g -> %g", (long long)row,
                              c, xv, deq);
            }
        }
    }
    /* Rows not written (padding slots, unused slots) are byte-identical. */
    for (r = 0; r < nrows; r++) {
        if (written[r])
            continue;
        REQUIRE(memcmp(cache + r * rb, before + r * rb, (size_t)rb) == 0,
                      "row %lld changed", (long long)r);
        if (spr)
            ck_assert(memcmp(scales + r * spr, sbefore + r * spr, (size_t)spr * 4) == 0);
    }

    mla_config_destroy(cfg);
    mla_context_destroy(ctx);
    free(cache), free(before), free(scales), free(sbefore), free(lat), free(slots);
    free(perm), free(written);
}
END_TEST

/* Without block scales, values past 448 * kv_scale saturate. */
START_TEST(append_saturation)
{
    mla_context_t *ctx = make_cpu_context();
    mla_config_t *cfg = make_config(1, 1, 1, MLA_KV_FP8_E4M3, 0, 1, 0, 0.5, 0);
    uint8_t *cache = xalloc(576);
    uint16_t *lat = xalloc(576 * 2);
    int64_t slot = 0;
    int c;
    for (c = 0; c < 576; c++)
        lat[c] = mla_float_to_bf16(c % 2 ? 230.0f : -1e6f); /* 230/0.5 = 460 > 448 */
    lat[3] = 0x7f80; /* +inf */
    ST_OK(mla_kv_append(ctx, cfg, cache, NULL, 1, lat, &slot, 1, NULL));
    for (c = 0; c < 576; c++)
        ck_assert_uint_eq(cache[c], c % 2 ? 0x7e : 0xfe);
    mla_config_destroy(cfg);
    mla_context_destroy(ctx);
    free(cache), free(lat);
}
END_TEST

/* Blocks of bf16 subnormals take the exact (subnormal) power-of-two
 * scale, not a clamped one; a block's Inf values do not set its scale
 * (they saturate to +-448 * kv * s) and neither do NaNs (stored as 0x7f);
 * a block of only NaN, Inf and zeros has scale 1. */
static void append_edge_rows(uint16_t *lat)
{
    int c;
    for (c = 0; c < 576; c++) {
        /* Row 0: subnormal bf16 values, some blocks smaller than others. */
        lat[c] = (uint16_t)((c % 2 ? 0x8000 : 0) | (1 + (c * 37 + c / 128 * 11) % (c < 256 ? 0x7f : 0x0f)));
        /* Row 1: ordinary values with one +Inf and one -Inf per 128. */
        lat[576 + c] = mla_float_to_bf16((float)(0.01 * ((c * 13) % 97 - 48)));
        if (c % 128 == 5)
            lat[576 + c] = 0x7f80;
        if (c % 128 == 77)
            lat[576 + c] = 0xff80;
        /* Row 2: NaN, Inf and zeros only. */
        lat[2 * 576 + c] = c % 3 == 0 ? 0x7fc0 : c % 3 == 1 ? 0xff80 : 0x0000;
    }
}

static void check_edge_rows(const uint16_t *lat, const uint8_t *cache, const float *scales, int fmt,
                            int g, float kv)
{
    int r, c;
    for (r = 0; r < 3; r++) {
        const uint16_t *x = lat + r * 576;
        const uint8_t *p = cache + r * row_bytes_of(fmt);
        int blen = fmt == MLA_KV_FP8_DS_MLA ? 128 : g;
        for (c = 0; c < (fmt == MLA_KV_FP8_DS_MLA ? 512 : 576); c++) {
            int blk = c / blen, c0 = blk * blen, c1 = c0 + blen < 576 ? c0 + blen : 576, cc;
            double s = fmt == MLA_KV_FP8_DS_MLA ? rdf(p + 512 + 4 * blk)
                                                 : scales[r * spr_of(fmt, g) + blk];
            double amax = 0, xv = ref_bf16(x[c]);
            for (cc = c0; cc < c1; cc++)
                if (isfinite(ref_bf16(x[cc])) && fabs(ref_bf16(x[cc])) > amax)
                    amax = fabs(ref_bf16(x[cc]));
            if (amax == 0) {
                REQUIRE(s == 1.0, "row %d block %d: scale %a, want 1", r, blk, s);
            } else {
                REQUIRE(is_pow2(s) && amax <= 448.0 * kv * s &&
                            (s == 0x1p-149 || amax > 448.0 * kv * (s / 2)),
                        "row %d block %d: scale %a for amax %a", r, blk, s, amax);
            }
            if (isnan(xv)) {
                REQUIRE(p[c] == 0x7f, "row %d ch %d: NaN -> 0x%02x", r, c, p[c]);
            } else if (isinf(xv)) {
                REQUIRE(p[c] == (xv > 0 ? 0x7e : 0xfe), "row %d ch %d: Inf -> 0x%02x", r, c, p[c]);
            } else {
                /* Full e4m3 precision, subnormal blocks included. */
                double deq = ref_e4m3(p[c]) * kv * s;
                REQUIRE(fabs(deq - xv) <= 0x1p-4 * fabs(xv) + 0x1p-10 * kv * s,
                        "row %d ch %d: %a -> %a (scale %a)", r, c, xv, deq, s);
            }
        }
    }
}

START_TEST(append_edge_blocks)
{
    static const struct fmt_case fcs[] = {{MLA_KV_FP8_E4M3, 32}, {MLA_KV_FP8_E4M3, 128},
                                          {MLA_KV_FP8_DS_MLA, 0}};
    const struct fmt_case fc = fcs[_i];
    const float kv = fc.fmt == MLA_KV_FP8_E4M3 ? 0.375f : 1.0f;
    mla_context_t *ctx = make_cpu_context();
    mla_config_t *cfg = make_config(1, 1, 1, fc.fmt, fc.g, 4, 0, kv, 0);
    uint8_t *cache = xalloc(4 * (size_t)row_bytes_of(fc.fmt));
    float *scales = fc.g ? xalloc(4 * (size_t)spr_of(fc.fmt, fc.g) * 4) : NULL;
    uint16_t *lat = xalloc(3 * 576 * 2);
    int64_t slots[3] = {0, 1, 2};
    append_edge_rows(lat);
    ST_OK(mla_kv_append(ctx, cfg, cache, scales, 1, lat, slots, 3, NULL));
    check_edge_rows(lat, cache, scales, fc.fmt, fc.g, kv);
    mla_config_destroy(cfg);
    mla_context_destroy(ctx);
    free(cache), free(scales), free(lat);
}
END_TEST

#if defined(__x86_64__) || defined(__i386__)
#include <xmmintrin.h>
/* The caller's floating-point mode does not change the bytes: the same
 * rows appended with flush-to-zero and denormals-are-zero set (as code
 * built with -ffast-math runs) as without. */
START_TEST(append_ftz_daz)
{
    mla_context_t *ctx = make_cpu_context();
    mla_config_t *cfg = make_config(1, 1, 1, MLA_KV_FP8_E4M3, 32, 4, 0, 0.375, 0);
    uint8_t *a = xalloc(4 * 576), *b = xalloc(4 * 576);
    float *sa = xalloc(4 * 18 * 4), *sb = xalloc(4 * 18 * 4);
    uint16_t *lat = xalloc(3 * 576 * 2);
    int64_t slots[3] = {0, 1, 2};
    unsigned csr = _mm_getcsr();
    append_edge_rows(lat);
    memset(a, 0, 4 * 576), memset(b, 0, 4 * 576), memset(sa, 0, 4 * 18 * 4), memset(sb, 0, 4 * 18 * 4);
    ST_OK(mla_kv_append(ctx, cfg, a, sa, 1, lat, slots, 3, NULL));
    _mm_setcsr(csr | 0x8040); /* FTZ | DAZ */
    ST_OK(mla_kv_append(ctx, cfg, b, sb, 1, lat, slots, 3, NULL));
    _mm_setcsr(csr);
    ck_assert(memcmp(a, b, 4 * 576) == 0);
    ck_assert(memcmp(sa, sb, 4 * 18 * 4) == 0);
    mla_config_destroy(cfg);
    mla_context_destroy(ctx);
    free(a), free(b), free(sa), free(sb), free(lat);
}
END_TEST
#endif

/* A slot past the cache fails the whole call, writing nothing, even after
 * valid rows. */
START_TEST(append_out_of_bounds)
{
    const struct fmt_case fc = FMTS[_i];
    const int ps = 4, num_pages = 3, rb = row_bytes_of(fc.fmt), spr = spr_of(fc.fmt, fc.g);
    const int64_t nrows = num_pages * ps;
    mla_context_t *ctx = make_cpu_context();
    mla_config_t *cfg =
        make_config(2, 1, 1, fc.fmt, fc.g, ps, 0, fc.fmt == MLA_KV_FP8_E4M3 ? 0.5 : 1.0, 0);
    uint8_t *cache = xalloc((size_t)nrows * rb), *before = xalloc((size_t)nrows * rb);
    float *scales = spr ? xalloc((size_t)nrows * spr * 4) : NULL;
    float *sbefore = spr ? xalloc((size_t)nrows * spr * 4) : NULL;
    uint16_t *lat = xalloc(3 * 576 * 2);
    int64_t slots[3] = {0, -1, nrows};
    int c;
    rnd_start(200 + (uint64_t)_i);
    for (c = 0; c < nrows * rb; c++)
        cache[c] = (uint8_t)rnd_u64();
    memcpy(before, cache, (size_t)nrows * rb);
    if (spr) {
        for (c = 0; c < nrows * spr; c++)
            scales[c] = (float)c;
        memcpy(sbefore, scales, (size_t)nrows * spr * 4);
    }
    for (c = 0; c < 3 * 576; c++)
        lat[c] = mla_float_to_bf16((float)rnd_sym(1));

    ck_assert_int_eq(mla_kv_append(ctx, cfg, cache, scales, num_pages, lat, slots, 3, NULL),
                     MLA_STATUS_OUT_OF_BOUNDS);
    REQUIRE(strstr(mla_context_last_error(ctx), "slots[2]") != NULL, "message: %s",
                  mla_context_last_error(ctx));
    ck_assert(memcmp(cache, before, (size_t)nrows * rb) == 0);
    if (spr)
        ck_assert(memcmp(scales, sbefore, (size_t)nrows * spr * 4) == 0);

    slots[2] = INT64_MAX;
    ck_assert_int_eq(mla_kv_append(ctx, cfg, cache, scales, num_pages, lat, slots, 3, NULL),
                     MLA_STATUS_OUT_OF_BOUNDS);
    ck_assert(memcmp(cache, before, (size_t)nrows * rb) == 0);

    /* The last slot is fine; a padding-only call writes nothing. */
    slots[2] = nrows - 1;
    ST_OK(mla_kv_append(ctx, cfg, cache, scales, num_pages, lat, slots, 3, NULL));
    ck_assert(memcmp(cache + rb, before + rb, (size_t)(nrows - 2) * rb) == 0);
    memcpy(before, cache, (size_t)nrows * rb);
    slots[0] = -5, slots[2] = -1;
    ST_OK(mla_kv_append(ctx, cfg, cache, scales, num_pages, lat, slots, 3, NULL));
    ck_assert(memcmp(cache, before, (size_t)nrows * rb) == 0);

    mla_config_destroy(cfg);
    mla_context_destroy(ctx);
    free(cache), free(before), free(scales), free(sbefore), free(lat);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Decode: setup, independent reference, comparison */

struct dcase {
    int h_q, h_kv, q_len, batch, ps, fmt, g, causal;
    int len_cap; /* longest length drawn */
};

struct dsetup {
    struct dcase c;
    mla_context_t *ctx;
    mla_config_t *cfg;
    mla_plan_t *plan;
    int32_t max_seq_len, mpps;
    int64_t num_pages;
    int32_t *lens, *bt;
    uint8_t *kv;
    size_t kv_bytes;
    float *scales;
    size_t scales_count;
    uint16_t *q, *out;
    float *lse;
    size_t out_bytes, lse_bytes;
    void *ws;
    size_t ws_bytes;
    double kv_scale; /* as the library applies it: rounded to fp32 */
    double sm_scale;
    int rb, spr;
};

static void fill_row(struct dsetup *d, uint8_t *p, float *bs)
{
    const struct dcase *c = &d->c;
    float kv = (float)d->kv_scale;
    double amp = rnd_int(10) == 0 ? 6.0 : 1.0; /* a few rows with large scores */
    int ch, j;
    if (c->fmt == MLA_KV_BF16) {
        for (ch = 0; ch < 576; ch++) {
            uint16_t h = mla_float_to_bf16((float)rnd_sym(amp));
            memcpy(p + 2 * ch, &h, 2);
        }
        return;
    }
    if (c->fmt == MLA_KV_FP8_E4M3) {
        int g = c->g ? c->g : 576;
        for (j = 0; j * g < 576; j++) {
            /* Powers of two and arbitrary fp32 scales alike. */
            float s = c->g ? (rnd_int(2) ? (float)ldexp(1.0, -rnd_int(6) - 3)
                                         : (float)(0.002 + 0.03 * rnd_unit()))
                           : 1.0f;
            if (c->g)
                bs[j] = s;
            for (ch = j * g; ch < (j + 1) * g && ch < 576; ch++)
                p[ch] = mla_e4m3_quantize((float)rnd_sym(amp), kv, s);
        }
        return;
    }
    for (j = 0; j < 4; j++) { /* DS_MLA */
        float s = rnd_int(2) ? (float)ldexp(1.0, -rnd_int(6) - 3) : (float)(0.002 + 0.03 * rnd_unit());
        memcpy(p + 512 + 4 * j, &s, 4);
        for (ch = j * 128; ch < (j + 1) * 128; ch++)
            p[ch] = mla_e4m3_quantize((float)rnd_sym(amp), kv, s);
    }
    for (ch = 0; ch < 64; ch++) {
        uint16_t h = mla_float_to_bf16((float)rnd_sym(amp));
        memcpy(p + 528 + 2 * ch, &h, 2);
    }
}

/* Build a decode problem: lengths drawn to hit 0, 1, q_len-1 and page
 * boundaries; physical pages a random permutation with unused pages;
 * NaN in every cache byte not part of a valid row; garbage in block-table
 * entries no length uses.  lens, if not NULL, gives the lengths. */
static void setup_build(struct dsetup *d, const struct dcase *c, int threads, uint64_t salt,
                        const int32_t *lens)
{
    int64_t used = 0, p, i;
    int32_t b, t, maxlen = 0;
    int64_t *perm;
    double kvd, sm;
    memset(d, 0, sizeof *d);
    d->c = *c;
    rnd_start(salt);

    d->lens = xalloc(sizeof(int32_t) * (size_t)c->batch);
    for (b = 0; b < c->batch; b++) {
        const int32_t cand[] = {0, 1, c->q_len - 1, c->q_len, c->ps - 1, c->ps, c->ps + 1,
                                2 * c->ps, 2 * c->ps + 1, 3 * c->ps - 1,
                                1 + rnd_int(c->len_cap), 1 + rnd_int(c->len_cap)};
        const int ncand = (int)(sizeof cand / sizeof cand[0]);
        int32_t len = cand[salt % (uint64_t)ncand]; /* the case's own first pick */
        while (b > 0 || len < 0 || len > c->len_cap)
            if ((len = cand[rnd_int(ncand)]) >= 0 && len <= c->len_cap)
                break;
        if (lens)
            len = lens[b];
        d->lens[b] = len;
        if (len > maxlen)
            maxlen = len;
    }
    d->max_seq_len = maxlen + rnd_int(3);
    if (d->max_seq_len < 1)
        d->max_seq_len = 1;
    d->mpps = (maxlen + c->ps - 1) / c->ps + rnd_int(2);
    if (d->mpps < 1)
        d->mpps = 1;
    for (b = 0; b < c->batch; b++)
        used += (d->lens[b] + c->ps - 1) / c->ps;
    d->num_pages = used + 1 + rnd_int(2);

    /* kv_scale exists for E4M3 only; generally not an fp32 value. */
    kvd = c->fmt == MLA_KV_FP8_E4M3 ? 0.6 + rnd_unit() : 1.0;
    d->kv_scale = (double)(float)kvd;
    sm = rnd_int(3) == 0 ? 0.0 : 0.01 + 0.1 * rnd_unit();
    d->sm_scale = sm > 0 ? sm : 1.0 / sqrt(576.0);

    d->ctx = make_cpu_context();
    d->cfg = make_config(c->h_q, c->h_kv, c->q_len, c->fmt, c->g, c->ps, c->causal, kvd, sm);
    ST_OK(mla_config_set_int(d->cfg, MLA_XPARAM_CPU_THREADS, threads));
    ST_OK(mla_plan_create(&d->plan, d->ctx, d->cfg, c->batch, d->max_seq_len));
    ST_OK(mla_plan_workspace_size(d->plan, &d->ws_bytes));
    d->ws = xalloc(d->ws_bytes);
    memset(d->ws, 0x5a, d->ws_bytes);

    d->rb = row_bytes_of(c->fmt);
    d->spr = spr_of(c->fmt, c->g);
    d->kv_bytes = (size_t)d->num_pages * (size_t)c->ps * (size_t)c->h_kv * (size_t)d->rb;
    d->kv = xalloc(d->kv_bytes);
    memset(d->kv, 0xff, d->kv_bytes); /* NaN in every format */
    if (d->spr) {
        d->scales_count = (size_t)d->num_pages * (size_t)c->ps * (size_t)c->h_kv * (size_t)d->spr;
        d->scales = xalloc(d->scales_count * 4);
        memset(d->scales, 0xff, d->scales_count * 4);
    }

    /* Physical pages: a random permutation of all of them. */
    perm = malloc(sizeof(int64_t) * (size_t)d->num_pages);
    for (p = 0; p < d->num_pages; p++)
        perm[p] = p;
    for (p = d->num_pages - 1; p > 0; p--) {
        int64_t j = rnd_int((int)p + 1), tmp = perm[p];
        perm[p] = perm[j];
        perm[j] = tmp;
    }
    d->bt = xalloc(sizeof(int32_t) * (size_t)c->batch * (size_t)d->mpps);
    used = 0;
    for (b = 0; b < c->batch; b++) {
        int32_t pages = (d->lens[b] + c->ps - 1) / c->ps;
        for (p = 0; p < d->mpps; p++) {
            const int32_t junk[] = {-1, INT32_MIN, INT32_MAX, (int32_t)d->num_pages};
            d->bt[b * d->mpps + p] = p < pages ? (int32_t)perm[used++] : junk[rnd_int(4)];
        }
        for (t = 0; t < d->lens[b]; t++) {
            int64_t page = d->bt[b * d->mpps + t / c->ps];
            int k;
            for (k = 0; k < c->h_kv; k++) {
                int64_t row = (page * c->ps + t % c->ps) * c->h_kv + k;
                fill_row(d, d->kv + row * d->rb, d->spr ? d->scales + row * d->spr : NULL);
            }
        }
    }
    free(perm);

    i = (int64_t)c->batch * c->q_len * c->h_q * 576;
    d->q = xalloc((size_t)i * 2);
    for (p = 0; p < i; p++)
        d->q[p] = mla_float_to_bf16((float)rnd_sym(p % 7 == 0 ? 3.0 : 1.0));
    d->out_bytes = (size_t)c->batch * c->q_len * c->h_q * 512 * 2;
    d->lse_bytes = (size_t)c->batch * c->h_q * c->q_len * 4;
    d->out = xalloc(d->out_bytes);
    d->lse = xalloc(d->lse_bytes);
    memset(d->out, 0xff, d->out_bytes); /* poison: bf16 NaN */
    memset(d->lse, 0xff, d->lse_bytes);
}

static void setup_free(struct dsetup *d)
{
    mla_plan_destroy(d->plan);
    mla_config_destroy(d->cfg);
    mla_context_destroy(d->ctx);
    free(d->lens), free(d->bt), free(d->kv), free(d->scales), free(d->q), free(d->out);
    free(d->lse), free(d->ws);
}

static mla_status_t run_decode(struct dsetup *d, int with_lse)
{
    return mla_decode(d->plan, d->q, d->kv, d->scales, d->num_pages, d->bt, d->mpps, d->lens,
                      d->out, with_lse ? d->lse : NULL, d->ws, d->ws_bytes, NULL);
}

/* Dequantize one cache row exactly (a separate implementation). */
static void ref_dequant(const struct dsetup *d, int32_t b, int32_t t, int k, double *dst)
{
    const struct dcase *c = &d->c;
    int64_t page = d->bt[b * d->mpps + t / c->ps];
    int64_t row = (page * c->ps + t % c->ps) * c->h_kv + k;
    const uint8_t *p = d->kv + row * d->rb;
    int ch;
    for (ch = 0; ch < 576; ch++) {
        if (c->fmt == MLA_KV_BF16)
            dst[ch] = ref_bf16(rd16(p + 2 * ch));
        else if (c->fmt == MLA_KV_FP8_E4M3)
            dst[ch] = ref_e4m3(p[ch]) * d->kv_scale *
                      (c->g ? (double)d->scales[row * d->spr + ch / c->g] : 1.0);
        else if (ch < 512)
            dst[ch] = ref_e4m3(p[ch]) * d->kv_scale * (double)rdf(p + 512 + 4 * (ch / 128));
        else
            dst[ch] = ref_bf16(rd16(p + 528 + 2 * (ch - 512)));
    }
}

/* fp64 attention, the textbook way: scores, max, exp, sum, weighted V. */
static void ref_decode(const struct dsetup *d, double *ref_out, double *ref_lse)
{
    const struct dcase *c = &d->c;
    int hpk = c->h_q / c->h_kv;
    int32_t b, t;
    for (b = 0; b < c->batch; b++) {
        int32_t len = d->lens[b];
        double *K = malloc(sizeof(double) * 576 * (size_t)(len ? len : 1));
        double *sc = malloc(sizeof(double) * (size_t)(len ? len : 1));
        int k, h, i, ch;
        for (k = 0; k < c->h_kv; k++) {
            for (t = 0; t < len; t++)
                ref_dequant(d, b, t, k, K + (size_t)t * 576);
            for (h = k * hpk; h < (k + 1) * hpk; h++) {
                for (i = 0; i < c->q_len; i++) {
                    const uint16_t *q = d->q + (((size_t)b * c->q_len + i) * c->h_q + h) * 576;
                    double *o = ref_out + (((size_t)b * c->q_len + i) * c->h_q + h) * 512;
                    double *lse = ref_lse + ((size_t)b * c->h_q + h) * c->q_len + i;
                    int32_t vis = len;
                    double mx = -INFINITY, l = 0, qd[576];
                    if (c->causal && c->q_len > 1) {
                        vis = len - c->q_len + 1 + i;
                        if (vis < 0)
                            vis = 0;
                    }
                    for (ch = 0; ch < 512; ch++)
                        o[ch] = 0;
                    if (vis == 0) {
                        *lse = INFINITY;
                        continue;
                    }
                    for (ch = 0; ch < 576; ch++)
                        qd[ch] = ref_bf16(q[ch]);
                    for (t = 0; t < vis; t++) {
                        double s = 0;
                        for (ch = 0; ch < 576; ch++)
                            s += qd[ch] * K[(size_t)t * 576 + ch];
                        sc[t] = d->sm_scale * s;
                        if (sc[t] > mx)
                            mx = sc[t];
                    }
                    for (t = 0; t < vis; t++) {
                        double w = exp(sc[t] - mx);
                        l += w;
                        for (ch = 0; ch < 512; ch++)
                            o[ch] += w * K[(size_t)t * 576 + ch];
                    }
                    for (ch = 0; ch < 512; ch++)
                        o[ch] /= l;
                    *lse = mx + log(l);
                }
            }
        }
        free(K);
        free(sc);
    }
}

static void describe(const struct dsetup *d, char *buf, size_t n)
{
    const struct dcase *c = &d->c;
    int off, b;
    off = snprintf(buf, n,
                   "h_q %d h_kv %d q_len %d batch %d page %d %s g %d causal %d kv %.9g sm %.9g "
                   "pages %lld lens",
                   c->h_q, c->h_kv, c->q_len, c->batch, c->ps, fmt_name(c->fmt), c->g, c->causal,
                   d->kv_scale, d->sm_scale, (long long)d->num_pages);
    for (b = 0; b < c->batch && off > 0 && (size_t)off < n; b++)
        off += snprintf(buf + off, n - (size_t)off, " %d", d->lens[b]);
}

/* doc/ABI.md's tolerances, plus the tighter bound an fp64 oracle must meet
 * (the bf16 / fp32 rounding of the exact value). */
static void compare(const struct dsetup *d, int with_lse)
{
    const struct dcase *c = &d->c;
    size_t nout = d->out_bytes / 2, nlse = d->lse_bytes / 4, e;
    double *ref_out = malloc(sizeof(double) * nout), *ref_lse = malloc(sizeof(double) * nlse);
    double dot = 0, n_o = 0, n_r = 0;
    char desc[512];
    describe(d, desc, sizeof desc);
    ref_decode(d, ref_out, ref_lse);

    for (e = 0; e < nout; e++) {
        double o = ref_bf16(d->out[e]), r = ref_out[e], diff = fabs(o - r);
        size_t row = e / 512;
        int32_t b = (int32_t)(row / ((size_t)c->q_len * c->h_q));
        int i = (int)(row / (size_t)c->h_q % (size_t)c->q_len), h = (int)(row % (size_t)c->h_q);
        /* Non-finite values where the fp64 evaluation has them, and only
         * there (the poison of the non-finite tests is finite). */
        if (isnan(r) || isinf(r)) {
            REQUIRE(isnan(r) ? isnan(o) : o == r, "%s: out[b %d, i %d, h %d, %d] = %g, ref %g",
                    desc, b, i, h, (int)(e % 512), o, r);
            continue;
        }
        REQUIRE(d->out[e] != 0xffff, "%s: out[b %d, i %d, h %d, %d] not written", desc, b, i,
                      h, (int)(e % 512));
        REQUIRE(diff <= 8e-4 || diff <= 2.01 / 128 * fabs(r),
                      "%s: out[b %d, i %d, h %d, %d] = %.9g, ref %.9g", desc, b, i, h,
                      (int)(e % 512), o, r);
        REQUIRE(diff <= 0x1p-8 * fabs(r) + 1e-13,
                      "%s: out[b %d, i %d, h %d, %d] = %.9g, ref %.9g: not the rounded exact value",
                      desc, b, i, h, (int)(e % 512), o, r);
        if (isinf(ref_lse[((size_t)b * c->h_q + h) * c->q_len + i]))
            REQUIRE(d->out[e] == 0, "%s: row without keys must be +0", desc);
        dot += o * r, n_o += o * o, n_r += r * r;
    }
    if (n_o > 0 || n_r > 0)
        REQUIRE(1 - dot / sqrt(n_o * n_r) <= 5e-6, "%s: cosine difference %g", desc,
                      1 - dot / sqrt(n_o * n_r));

    for (e = 0; e < nlse; e++) {
        uint32_t poison = 0xffffffffu;
        double l = d->lse[e], r = ref_lse[e], diff = fabs(l - r);
        if (!with_lse) {
            REQUIRE(memcmp(&d->lse[e], &poison, 4) == 0, "%s: lse written when NULL", desc);
            continue;
        }
        if (isnan(r)) {
            REQUIRE(isnan(l), "%s: lse[%zu] = %g, want NaN", desc, e, l);
            continue;
        }
        REQUIRE(!isnan(l), "%s: lse[%zu] = NaN, ref %g (or not written)", desc, e, r);
        if (isinf(r)) {
            REQUIRE(isinf(l) && l > 0, "%s: lse[%zu] = %g, want +inf", desc, e, l);
            continue;
        }
        REQUIRE(diff <= 1e-6 || diff <= 8.01 / 65536 * fabs(r), "%s: lse[%zu] = %.9g, ref %.9g",
                      desc, e, l, r);
        REQUIRE(diff <= 0x1p-23 * fabs(r) + 1e-12, "%s: lse[%zu] = %.9g, ref %.9g: loose",
                      desc, e, l, r);
    }
    free(ref_out);
    free(ref_lse);
}

/* The case table: every value of every dimension appears, in varied
 * combinations.  len_cap keeps the default run short under valgrind. */
static const struct dcase DCASES[] = {
    /* h_q h_kv q_len batch page fmt g causal len_cap */
    {1, 1, 1, 1, 1, MLA_KV_BF16, 0, 0, 9},
    {1, 1, 2, 3, 16, MLA_KV_FP8_E4M3, 0, 1, 40},
    {1, 1, 8, 7, 64, MLA_KV_FP8_E4M3, 32, 1, 140},
    {1, 1, 4, 3, 1024, MLA_KV_FP8_DS_MLA, 0, 0, 1100},
    {3, 1, 1, 7, 16, MLA_KV_FP8_E4M3, 64, 0, 50},
    {3, 1, 4, 3, 1, MLA_KV_FP8_E4M3, 128, 1, 12},
    {3, 3, 2, 7, 64, MLA_KV_BF16, 0, 1, 130},
    {1, 1, 8, 1, 1024, MLA_KV_FP8_E4M3, 0, 1, 1030},
    {3, 1, 2, 3, 1024, MLA_KV_BF16, 0, 0, 1100},
    {16, 1, 1, 3, 64, MLA_KV_FP8_DS_MLA, 0, 0, 130},
    {16, 2, 2, 7, 16, MLA_KV_FP8_E4M3, 32, 1, 33},
    {16, 4, 4, 3, 1, MLA_KV_FP8_DS_MLA, 0, 1, 9},
    {16, 16, 8, 3, 16, MLA_KV_FP8_E4M3, 64, 1, 20},
    {16, 8, 1, 7, 64, MLA_KV_FP8_E4M3, 128, 0, 70},
    {16, 1, 8, 1, 64, MLA_KV_BF16, 0, 1, 66},
    {16, 2, 4, 1, 1024, MLA_KV_FP8_E4M3, 128, 1, 40},
    {128, 1, 1, 3, 16, MLA_KV_FP8_E4M3, 0, 0, 34},
    {128, 1, 2, 1, 64, MLA_KV_FP8_DS_MLA, 0, 1, 66},
    {128, 8, 4, 1, 1, MLA_KV_BF16, 0, 1, 6},
    {128, 2, 8, 1, 16, MLA_KV_FP8_E4M3, 32, 1, 18},
    {128, 128, 2, 3, 16, MLA_KV_FP8_E4M3, 64, 0, 17},
    {128, 4, 1, 7, 1, MLA_KV_FP8_E4M3, 128, 0, 5},
    {16, 1, 8, 3, 16, MLA_KV_FP8_E4M3, 0, 0, 33},
    {3, 3, 4, 7, 16, MLA_KV_FP8_DS_MLA, 0, 1, 34},
};
#define NDCASES ((int)(sizeof DCASES / sizeof DCASES[0]))

START_TEST(decode_vs_reference)
{
    struct dsetup d;
    int with_lse = _i % 5 != 4;
    setup_build(&d, &DCASES[_i], 1 + _i % 4, 1000 + (uint64_t)_i, NULL);
    ST_OK(run_decode(&d, with_lse));
    {
        mla_status_t ws;
        ST_OK(mla_workspace_status(d.plan, d.ws, &ws));
        ck_assert_int_eq(ws, MLA_STATUS_SUCCESS);
    }
    compare(&d, with_lse);
    setup_free(&d);
}
END_TEST

/* Every format with a zero-length and a causal-shorter-than-q_len
 * request next to normal ones. */
START_TEST(decode_empty_rows)
{
    struct dcase c = {16, 2, 8, 3, 16, FMTS[_i].fmt, FMTS[_i].g, 1, 20};
    static const int32_t lens[] = {0, 3, 17};
    struct dsetup d;
    setup_build(&d, &c, 2, 2000 + (uint64_t)_i, lens);
    ST_OK(run_decode(&d, 1));
    compare(&d, 1);
    setup_free(&d);
}
END_TEST

/* The result does not depend on the number of threads. */
START_TEST(decode_thread_invariance)
{
    struct dcase c = {16, 4, 2, 7, 16, MLA_KV_FP8_E4M3, 64, 1, 60};
    struct dsetup d1, d3;
    setup_build(&d1, &c, 1, 3000, NULL);
    setup_build(&d3, &c, 3, 3000, NULL);
    ST_OK(run_decode(&d1, 1));
    ST_OK(run_decode(&d3, 1));
    ck_assert(memcmp(d1.out, d3.out, d1.out_bytes) == 0);
    ck_assert(memcmp(d1.lse, d3.lse, d1.lse_bytes) == 0);
    setup_free(&d1);
    setup_free(&d3);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Decode: NaN and Inf inside the lengths */

enum { NF_CLEAN, NF_Q_NAN, NF_NOPE_NAN, NF_NOPE_PINF, NF_V_NINF, NF_ROPE_NAN, NF_ROPE_INF,
       NF_LAST_NAN, NF_FIRST_INFS, NF_ALL_INF, NF_KINDS };

/* Byte offset of channel ch of token t, KV head k, of request b. */
static uint8_t *cache_row(struct dsetup *d, int32_t b, int32_t t, int k)
{
    int64_t page = d->bt[b * d->mpps + t / d->c.ps];
    return d->kv + ((page * d->c.ps + t % d->c.ps) * d->c.h_kv + k) * d->rb;
}

/* Make channel ch of (b, t, k) the value v (NaN or +-Inf) as the format
 * allows: bf16 values directly, the e4m3 NaN byte 0x7f, and through the
 * block scale (E4M3 with block scales, DS_MLA nope) for infinities,
 * where the whole block then turns non-finite. */
static void poke(struct dsetup *d, int32_t b, int32_t t, int k, int ch, double v)
{
    uint8_t *p = cache_row(d, b, t, k);
    uint16_t h = isnan(v) ? 0x7fc0 : v > 0 ? 0x7f80 : 0xff80;
    float f = (float)v;
    if (d->c.fmt == MLA_KV_BF16) {
        memcpy(p + 2 * ch, &h, 2);
    } else if (d->c.fmt == MLA_KV_FP8_DS_MLA && ch >= 512) {
        memcpy(p + 528 + 2 * (ch - 512), &h, 2);
    } else if (isnan(v)) {
        p[ch] = 0x7f;
    } else if (d->c.fmt == MLA_KV_FP8_DS_MLA) {
        memcpy(p + 512 + 4 * (ch / 128), &f, 4);
    } else if (d->spr) {
        int64_t row = (int64_t)(p - d->kv) / d->rb;
        d->scales[row * d->spr + ch / d->c.g] = f;
    } else {
        p[ch] = 0x7f; /* no infinity in e4m3 and no scale to carry one */
    }
}

/*
 * Every request of the batch holds one kind of non-finite value inside its
 * length (request b has kind b % NF_KINDS); the result must have NaN and
 * Inf exactly where the fp64 evaluation has them, and be finite and within
 * the bounds elsewhere: a row that merely met a NaN is not a row without
 * keys.  Page tails and rows past the lengths stay NaN throughout.
 */
START_TEST(decode_nonfinite)
{
    const struct fmt_case fc = FMTS[_i % NFMTS];
    const int q_len = _i < NFMTS ? 1 : 2;
    struct dcase c = {16, 2, q_len, NF_KINDS, 16, fc.fmt, fc.g, q_len > 1, 100};
    static const int32_t lens[NF_KINDS] = {20, 20, 33, 17, 40, 20, 21, 9, 90, 70};
    struct dsetup d;
    double *ref_out, *ref_lse;
    int32_t b;
    int k, hits = 0;

    setup_build(&d, &c, 1 + _i % 3, 6000 + (uint64_t)_i, lens);
    for (k = 0; k < c.h_kv; k++) {
        poke(&d, NF_NOPE_NAN, 5, k, 100, NAN);
        poke(&d, NF_NOPE_PINF, 7, k, 200, INFINITY);
        poke(&d, NF_V_NINF, 3, k, 300, -INFINITY);
        poke(&d, NF_ROPE_NAN, 10, k, 540, NAN);
        poke(&d, NF_ROPE_INF, 11, k, 560, INFINITY);
        poke(&d, NF_LAST_NAN, lens[NF_LAST_NAN] - 1, k, 50, NAN); /* causal: last row only */
    }
    /* +Inf in RoPE channel 560 of every key: heads with a negative q
     * there see only -inf scores, and their rows are NaN, not the zeros
     * of a row without keys. */
    {
        int32_t t;
        for (t = 0; t < lens[NF_ALL_INF]; t++)
            for (k = 0; k < c.h_kv; k++)
                poke(&d, NF_ALL_INF, t, k, 560, INFINITY);
    }
    /* NaN in q: one head of the last query token. */
    d.q[(((size_t)NF_Q_NAN * q_len + q_len - 1) * c.h_q + 3) * 576 + 7] = 0x7fc0;
    /* Whole chunks (the CPU backend takes 64 keys at a time) whose scores
     * are -inf for some heads and +inf for others: +Inf in channel 0 (or
     * RoPE channel 570 for DS_MLA, which is not part of V) of the first 70
     * tokens; finite keys follow.  BF16 and DS_MLA only: e4m3 has no Inf. */
    if (fc.fmt != MLA_KV_FP8_E4M3) {
        int32_t t;
        for (t = 0; t < 70; t++)
            for (k = 0; k < c.h_kv; k++)
                poke(&d, NF_FIRST_INFS, t, k, fc.fmt == MLA_KV_BF16 ? 0 : 570, INFINITY);
    }
    /* Finite poison: a row left unwritten cannot pass for a NaN. */
    memset(d.out, 0x7b, d.out_bytes);
    memset(d.lse, 0x7b, d.lse_bytes);

    ST_OK(run_decode(&d, 1));
    compare(&d, 1);

    /* The cases did reach the result: every poked request but the clean
     * one has non-finite values in its reference. */
    ref_out = malloc(d.out_bytes / 2 * sizeof(double));
    ref_lse = malloc(d.lse_bytes / 4 * sizeof(double));
    ref_decode(&d, ref_out, ref_lse);
    for (b = NF_Q_NAN; b < NF_KINDS; b++) {
        size_t n = (size_t)q_len * c.h_q * 512, e, bad = 0;
        for (e = 0; e < n; e++)
            bad += !isfinite(ref_out[(size_t)b * n + e]);
        if (b == NF_FIRST_INFS && fc.fmt != MLA_KV_BF16) {
            REQUIRE(fc.fmt == MLA_KV_FP8_E4M3 || bad > 0, "request %d: no NaN", (int)b);
            continue;
        }
        REQUIRE(bad > 0, "%s request %d: no non-finite output", fmt_name(fc.fmt), (int)b);
        hits++;
    }
    ck_assert_int_ge(hits, NF_KINDS - 2);
    free(ref_out);
    free(ref_lse);
    setup_free(&d);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Decode: out-of-bounds lengths and block-table entries */

static void expect_oob(struct dsetup *d, const char *what, const char *needle,
                       const char *needle2)
{
    uint8_t *out0 = malloc(d->out_bytes), *lse0 = malloc(d->lse_bytes);
    mla_status_t st, ws;
    memcpy(out0, d->out, d->out_bytes);
    memcpy(lse0, d->lse, d->lse_bytes);
    st = run_decode(d, 1);
    REQUIRE(st == MLA_STATUS_OUT_OF_BOUNDS, "%s: got %s", what, mla_status_string(st));
    REQUIRE(strstr(mla_context_last_error(d->ctx), needle) != NULL,
                  "%s: message \"%s\" lacks \"%s\"", what, mla_context_last_error(d->ctx), needle);
    REQUIRE(strstr(mla_context_last_error(d->ctx), needle2) != NULL,
                  "%s: message \"%s\" lacks \"%s\"", what, mla_context_last_error(d->ctx), needle2);
    REQUIRE(memcmp(out0, d->out, d->out_bytes) == 0, "%s: out written", what);
    REQUIRE(memcmp(lse0, d->lse, d->lse_bytes) == 0, "%s: lse written", what);
    ST_OK(mla_workspace_status(d->plan, d->ws, &ws));
    ck_assert_int_eq(ws, MLA_STATUS_OUT_OF_BOUNDS);
    free(out0);
    free(lse0);
}

START_TEST(decode_out_of_bounds)
{
    static const int32_t lens[] = {5, 33, 16}; /* 1, 3 and 1 pages of 16 */
    struct dcase c = {3, 1, 2, 3, 16, FMTS[_i].fmt, FMTS[_i].g, 1, 40};
    struct dsetup d;
    mla_plan_t *tight, *roomy;
    int32_t e, cap;
    mla_status_t ws;
    setup_build(&d, &c, 2, 4000 + (uint64_t)_i, lens);
    cap = d.mpps * 16; /* 48 or 64 */
    ST_OK(run_decode(&d, 1));
    compare(&d, 1);
    memset(d.out, 0xff, d.out_bytes);
    memset(d.lse, 0xff, d.lse_bytes);

    /* A plan that allows more than the block table does. */
    ST_OK(mla_plan_create(&roomy, d.ctx, d.cfg, 3, cap + 100));
    tight = d.plan;
    d.plan = roomy;
    d.lens[1] = cap + 1;
    expect_oob(&d, "length past the block table", "seq_lens[1]", "max_pages_per_seq");
    d.plan = tight;
    d.lens[1] = d.max_seq_len + 1; /* within the block table */
    ck_assert_int_le(d.lens[1], cap);
    expect_oob(&d, "length past max_seq_len", "seq_lens[1]", "max_seq_len");
    d.lens[1] = -1;
    expect_oob(&d, "negative length", "seq_lens[1]", "-1");
    d.lens[1] = lens[1];

    e = d.bt[d.mpps + 2];
    d.bt[d.mpps + 2] = (int32_t)d.num_pages; /* last page request 1 uses */
    expect_oob(&d, "entry == num_pages", "block_table[1][2]", "num_pages");
    d.bt[d.mpps + 2] = -1;
    expect_oob(&d, "negative entry", "block_table[1][2]", "-1");
    d.bt[d.mpps + 2] = INT32_MIN;
    expect_oob(&d, "INT32_MIN entry", "block_table[1][2]", "num_pages");
    d.bt[d.mpps + 2] = e;
    e = d.bt[2 * d.mpps];
    d.bt[2 * d.mpps] = INT32_MAX;
    expect_oob(&d, "huge entry", "block_table[2][0]", "num_pages");
    d.bt[2 * d.mpps] = e;

    /* A bad entry past the length is never looked at, and the workspace
     * status returns to success. */
    d.bt[2 * d.mpps + 1] = INT32_MAX;
    d.bt[1] = INT32_MIN;
    ST_OK(run_decode(&d, 1));
    ST_OK(mla_workspace_status(d.plan, d.ws, &ws));
    ck_assert_int_eq(ws, MLA_STATUS_SUCCESS);
    compare(&d, 1);
    mla_plan_destroy(roomy);
    setup_free(&d);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Long shapes (MLA_TEST_LONG=1) */

START_TEST(decode_long)
{
    static const struct dcase LONG[] = {
        {128, 1, 2, 8, 64, MLA_KV_FP8_E4M3, 128, 1, 4096},
        {16, 1, 4, 16, 64, MLA_KV_FP8_DS_MLA, 0, 1, 8192},
        {128, 1, 1, 4, 1024, MLA_KV_BF16, 0, 0, 5000},
        {64, 4, 8, 5, 16, MLA_KV_FP8_E4M3, 32, 1, 3000},
    };
    struct dsetup d;
    struct timespec t0, t1;
    int32_t lens[16], b;
    for (b = 0; b < LONG[_i].batch; b++) /* mostly long requests */
        lens[b] = b % 4 == 3 ? 1 + b * 37 : LONG[_i].len_cap - b * 13;
    setup_build(&d, &LONG[_i], 2, 5000 + (uint64_t)_i, lens);
    clock_gettime(CLOCK_MONOTONIC, &t0);
    ST_OK(run_decode(&d, 1));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("decode_long %d: %.3f s\n", _i,
           (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
    compare(&d, 1);
    setup_free(&d);
}
END_TEST

/* ------------------------------------------------------------------ */

static Suite *cpu_suite(int longrun)
{
    Suite *s = suite_create("cpu");
    TCase *tc;

    tc = tcase_create("codec");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, e4m3_decode_all);
    tcase_add_test(tc, e4m3_encode_roundtrip);
    tcase_add_test(tc, e4m3_ties);
    tcase_add_test(tc, e4m3_saturation_nan);
    tcase_add_test(tc, e4m3_subnormals);
    tcase_add_test(tc, e4m3_random_vs_search);
    tcase_add_test(tc, bf16_codec);
    tcase_add_test(tc, block_scale);
    tcase_add_test(tc, amax_accum);
    tcase_add_test(tc, block_scale_exact);
    tcase_add_test(tc, quantize_exact);
    suite_add_tcase(s, tc);

    tc = tcase_create("append");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, append_roundtrip, 0, NFMTS);
    tcase_add_test(tc, append_saturation);
    tcase_add_loop_test(tc, append_edge_blocks, 0, 3);
#if defined(__x86_64__) || defined(__i386__)
    tcase_add_test(tc, append_ftz_daz);
#endif
    tcase_add_loop_test(tc, append_out_of_bounds, 0, NFMTS);
    suite_add_tcase(s, tc);

    tc = tcase_create("decode");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, decode_vs_reference, 0, NDCASES);
    tcase_add_loop_test(tc, decode_empty_rows, 0, NFMTS);
    tcase_add_test(tc, decode_thread_invariance);
    tcase_add_loop_test(tc, decode_nonfinite, 0, 2 * NFMTS);
    tcase_add_loop_test(tc, decode_out_of_bounds, 0, NFMTS);
    suite_add_tcase(s, tc);

    if (longrun) {
        tc = tcase_create("long");
        tcase_set_timeout(tc, 3600);
        tcase_add_loop_test(tc, decode_long, 0, 4);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    const char *env = getenv("MLA_TEST_SEED");
    const char *lng = getenv("MLA_TEST_LONG");
    SRunner *sr;
    int failed;

    g_seed = env && *env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    printf("test_cpu: MLA_TEST_SEED=%" PRIu64 "\n", g_seed);
    fflush(stdout);

    sr = srunner_create(cpu_suite(lng && atoi(lng) > 0));
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
