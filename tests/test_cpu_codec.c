/* test_cpu_codec.c - the BF16 and e4m3 conversions, block scales and
 * quantization of fp8_codec.h against exhaustive searches and the fp64
 * formulas of cpu_harness.c.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "cpu_harness.h"
#include "mla.h"
#include "rng.h"
#include "fp8_codec.h"

/* ------------------------------------------------------------------ */
/* Independent formulas (no bit tricks shared with the codec) */

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

void add_codec_cases(Suite *s)
{
    TCase *tc = tcase_create("codec");
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
}
