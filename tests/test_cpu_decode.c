/* test_cpu_decode.c - the CPU backend's mla_decode() against the fp64
 * reference of cpu_harness.c: a table of shapes over every dimension,
 * empty rows, thread counts, NaN and Inf inside the lengths, lengths and
 * block-table entries out of bounds, and long shapes.
 * SPDX-License-Identifier: MIT */
#define _POSIX_C_SOURCE 200809L /* clock_gettime */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cpu_harness.h"
#include "mla.h"

/* ------------------------------------------------------------------ */
/* Decode against the reference */

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

void add_decode_cases(Suite *s)
{
    TCase *tc = tcase_create("decode");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, decode_vs_reference, 0, NDCASES);
    tcase_add_loop_test(tc, decode_empty_rows, 0, NFMTS);
    tcase_add_test(tc, decode_thread_invariance);
    tcase_add_loop_test(tc, decode_nonfinite, 0, 2 * NFMTS);
    tcase_add_loop_test(tc, decode_out_of_bounds, 0, NFMTS);
    suite_add_tcase(s, tc);
}

void add_long_cases(Suite *s)
{
    TCase *tc = tcase_create("long");
    tcase_set_timeout(tc, 3600);
    tcase_add_loop_test(tc, decode_long, 0, 4);
    suite_add_tcase(s, tc);
}
