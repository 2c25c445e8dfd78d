/* test_cpu_append.c - the CPU backend's mla_kv_append(): every format's
 * bytes and block scales against the quantization rule, saturation,
 * non-finite and subnormal blocks, the caller's floating-point mode, and
 * slots past the cache.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_harness.h"
#include "mla.h"
#include "rng.h"
#include "fp8_codec.h"

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

void add_append_cases(Suite *s)
{
    TCase *tc = tcase_create("append");
    tcase_set_timeout(tc, 300);
    tcase_add_loop_test(tc, append_roundtrip, 0, NFMTS);
    tcase_add_test(tc, append_saturation);
    tcase_add_loop_test(tc, append_edge_blocks, 0, 3);
#if defined(__x86_64__) || defined(__i386__)
    tcase_add_test(tc, append_ftz_daz);
#endif
    tcase_add_loop_test(tc, append_out_of_bounds, 0, NFMTS);
    suite_add_tcase(s, tc);
}
