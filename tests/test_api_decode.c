/* test_api_decode.c - plans, decodes, schedules and appends through the
 * public API: each invalid argument refused with its status and a message,
 * nothing written, and outputs that overlap inputs or other outputs.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api_harness.h"
#include "mla.h"
#include "mla_experimental.h"

/* ---- plans ---------------------------------------------------------------- */

START_TEST(plan_args)
{
    mla_context_t *ctx = NULL;
    ck_assert_int_eq(mla_context_create(&ctx, MLA_DEVICE_CPU), 0);
    mla_config_t *cfg = new_config();
    mla_plan_t *plan = (mla_plan_t *)0x1;
    size_t ws = 0;

    ck_assert_int_eq(mla_plan_create(NULL, ctx, cfg, 1, 1), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(mla_context_last_error(ctx), "plan is NULL"));
    ck_assert_int_eq(mla_plan_create(&plan, NULL, cfg, 1, 1), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_ptr_null(plan);
    ck_assert_int_eq(mla_plan_create(&plan, ctx, NULL, 1, 1), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_ne(mla_context_last_error(ctx), "");
    ck_assert_int_eq(mla_plan_create(&plan, ctx, cfg, 0, 1), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(mla_plan_create(&plan, ctx, cfg, 65536, 1), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(mla_plan_create(&plan, ctx, cfg, 1, 0), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(mla_plan_create(&plan, ctx, cfg, 1, (1 << 24) + 1), MLA_STATUS_INVALID_ARGUMENT);
    /* Unsupported combinations. */
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_PARAM_NUM_KV_HEADS, 3), 0);
    ck_assert_int_eq(mla_plan_create(&plan, ctx, cfg, 1, 1), MLA_STATUS_NOT_SUPPORTED);
    ck_assert_ptr_nonnull(strstr(mla_context_last_error(ctx), "divide"));
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_PARAM_NUM_KV_HEADS, 2), 0);
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_PARAM_SCALE_BLOCK_SIZE, 64), 0);
    ck_assert_int_eq(mla_plan_create(&plan, ctx, cfg, 1, 1), MLA_STATUS_NOT_SUPPORTED);
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_PARAM_SCALE_BLOCK_SIZE, 0), 0);
    ck_assert_int_eq(mla_config_set_float(cfg, MLA_PARAM_KV_SCALE, 2.0), 0);
    ck_assert_int_eq(mla_plan_create(&plan, ctx, cfg, 1, 1), MLA_STATUS_NOT_SUPPORTED);
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_PARAM_KV_FORMAT, MLA_KV_FP8_E4M3), 0);
    ck_assert_int_eq(mla_plan_create(&plan, ctx, cfg, 7, 4096), MLA_STATUS_SUCCESS);
    ck_assert_ptr_nonnull(plan);
    ck_assert_str_eq(mla_context_last_error(ctx), "");
    ck_assert_int_eq(mla_plan_workspace_size(plan, &ws), MLA_STATUS_SUCCESS);
    ck_assert_uint_ge(ws, 256);
    ck_assert_int_eq(mla_plan_workspace_size(plan, NULL), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(mla_plan_workspace_size(NULL, &ws), MLA_STATUS_INVALID_ARGUMENT);
    /* The plan holds its own copy of the config. */
    mla_config_destroy(cfg);
    mla_plan_destroy(plan);
    mla_plan_destroy(NULL);
    mla_context_destroy(ctx);
}
END_TEST

/* ---- decode and append argument validation -------------------------------- */

static int untouched(const struct fixture *f)
{
    const uint8_t *o = (const uint8_t *)f->out, *l = (const uint8_t *)f->lse;
    for (size_t i = 0; i < FX_BATCH * FX_HEADS * 512 * 2; i++)
        if (o[i] != 0xA5)
            return 0;
    for (size_t i = 0; i < sizeof(f->lse); i++)
        if (l[i] != 0xA5)
            return 0;
    return 1;
}

#define DECODE(f, q, kv, sc, np, tab, mp, lens, out, lse, ws, wss) \
    mla_decode((f)->plan, q, kv, sc, np, tab, mp, lens, out, lse, ws, wss, NULL)

START_TEST(decode_args)
{
    struct fixture f;
    fx_init(&f, 0);
    const char *bq = (const char *)f.q;
    /* Each bad argument: its status, a message, nothing written. */
    struct { mla_status_t got, want; } r[] = {
        {DECODE(&f, NULL, f.kv, NULL, 4, f.table, 2, f.lens, f.out, f.lse, f.ws, f.ws_size), MLA_STATUS_INVALID_ARGUMENT},
        {DECODE(&f, f.q, NULL, NULL, 4, f.table, 2, f.lens, f.out, f.lse, f.ws, f.ws_size), MLA_STATUS_INVALID_ARGUMENT},
        {DECODE(&f, f.q, f.kv, NULL, 4, NULL, 2, f.lens, f.out, f.lse, f.ws, f.ws_size), MLA_STATUS_INVALID_ARGUMENT},
        {DECODE(&f, f.q, f.kv, NULL, 4, f.table, 2, NULL, f.out, f.lse, f.ws, f.ws_size), MLA_STATUS_INVALID_ARGUMENT},
        {DECODE(&f, f.q, f.kv, NULL, 4, f.table, 2, f.lens, NULL, f.lse, f.ws, f.ws_size), MLA_STATUS_INVALID_ARGUMENT},
        {DECODE(&f, f.q, f.kv, NULL, 4, f.table, 2, f.lens, f.out, f.lse, NULL, f.ws_size), MLA_STATUS_INVALID_ARGUMENT},
        {DECODE(&f, f.q, f.kv, f.scales, 4, f.table, 2, f.lens, f.out, f.lse, f.ws, f.ws_size), MLA_STATUS_INVALID_ARGUMENT},
        {DECODE(&f, f.q, f.kv, NULL, 0, f.table, 2, f.lens, f.out, f.lse, f.ws, f.ws_size), MLA_STATUS_INVALID_ARGUMENT},
        {DECODE(&f, f.q, f.kv, NULL, -4, f.table, 2, f.lens, f.out, f.lse, f.ws, f.ws_size), MLA_STATUS_INVALID_ARGUMENT},
        {DECODE(&f, f.q, f.kv, NULL, 4, f.table, 0, f.lens, f.out, f.lse, f.ws, f.ws_size), MLA_STATUS_INVALID_ARGUMENT},
        {DECODE(&f, bq + 2, f.kv, NULL, 4, f.table, 2, f.lens, f.out, f.lse, f.ws, f.ws_size), MLA_STATUS_MISALIGNED},
        {DECODE(&f, f.q, f.kv + 8, NULL, 4, f.table, 2, f.lens, f.out, f.lse, f.ws, f.ws_size), MLA_STATUS_MISALIGNED},
        {DECODE(&f, f.q, f.kv, NULL, 4, f.table, 2, f.lens, (char *)f.out + 4, f.lse, f.ws, f.ws_size), MLA_STATUS_MISALIGNED},
        {DECODE(&f, f.q, f.kv, NULL, 4, (int32_t *)((char *)f.table + 1), 2, f.lens, f.out, f.lse, f.ws, f.ws_size), MLA_STATUS_MISALIGNED},
        {DECODE(&f, f.q, f.kv, NULL, 4, f.table, 2, f.lens, f.out, (float *)((char *)f.lse + 2), f.ws, f.ws_size), MLA_STATUS_MISALIGNED},
        {DECODE(&f, f.q, f.kv, NULL, 4, f.table, 2, f.lens, f.out, f.lse, (char *)f.ws + 16, f.ws_size), MLA_STATUS_MISALIGNED},
        {DECODE(&f, f.q, f.kv, NULL, 4, f.table, 2, f.lens, f.out, f.lse, f.ws, f.ws_size - 1), MLA_STATUS_SIZE_MISMATCH},
        {DECODE(&f, f.q, f.kv, NULL, 4, f.table, 2, f.lens, f.out, f.lse, f.ws, 0), MLA_STATUS_SIZE_MISMATCH},
        {mla_decode(NULL, f.q, f.kv, NULL, 4, f.table, 2, f.lens, f.out, f.lse, f.ws, f.ws_size, NULL), MLA_STATUS_INVALID_ARGUMENT},
    };
    for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
        ck_assert_msg(r[i].got == r[i].want, "case %zu: got %s, want %s", i,
                      mla_status_string(r[i].got), mla_status_string(r[i].want));
        ck_assert_msg(untouched(&f), "case %zu wrote output", i);
    }
    /* Each failure leaves a message naming the function (the message is
     * per thread, so each call is checked right after it). */
    static const char *const needles[] = {"q is NULL", "num_pages = 0", "max_pages_per_seq = 0",
                                          "workspace_size = 0", "kv_block_scales"};
    mla_status_t got[5];
    got[0] = DECODE(&f, NULL, f.kv, NULL, 4, f.table, 2, f.lens, f.out, f.lse, f.ws, f.ws_size);
    ck_assert_str_eq(mla_context_last_error(f.ctx), "mla_decode: q is NULL");
    for (int i = 1; i < 5; i++) {
        got[i] = i == 1 ? DECODE(&f, f.q, f.kv, NULL, 0, f.table, 2, f.lens, f.out, f.lse, f.ws, f.ws_size)
               : i == 2 ? DECODE(&f, f.q, f.kv, NULL, 4, f.table, 0, f.lens, f.out, f.lse, f.ws, f.ws_size)
               : i == 3 ? DECODE(&f, f.q, f.kv, NULL, 4, f.table, 2, f.lens, f.out, f.lse, f.ws, 0)
                        : DECODE(&f, f.q, f.kv, f.scales, 4, f.table, 2, f.lens, f.out, f.lse, f.ws, f.ws_size);
        const char *m = mla_context_last_error(f.ctx);
        ck_assert_int_ne(got[i], MLA_STATUS_SUCCESS);
        ck_assert_msg(strncmp(m, "mla_decode: ", 12) == 0 && strstr(m, needles[i]),
                      "case %d: \"%s\" lacks \"mla_decode: ...%s\"", i, m, needles[i]);
    }

    /* Lengths beyond the block table (2 pages of 16) or the plan (32). */
    mla_status_t dst;
    f.lens[0] = 33;
    ck_assert_int_eq(DECODE(&f, f.q, f.kv, NULL, 4, f.table, 2, f.lens, f.out, f.lse, f.ws, f.ws_size), MLA_STATUS_OUT_OF_BOUNDS);
    ck_assert(untouched(&f));
    ck_assert_int_eq(mla_workspace_status(f.plan, f.ws, &dst), 0);
    ck_assert_int_eq(dst, MLA_STATUS_OUT_OF_BOUNDS);
    f.lens[0] = 20;
    ck_assert_int_eq(DECODE(&f, f.q, f.kv, NULL, 4, f.table, 1, f.lens, f.out, f.lse, f.ws, f.ws_size), MLA_STATUS_OUT_OF_BOUNDS);
    ck_assert(untouched(&f));
    f.lens[1] = -1;
    ck_assert_int_eq(DECODE(&f, f.q, f.kv, NULL, 4, f.table, 2, f.lens, f.out, f.lse, f.ws, f.ws_size), MLA_STATUS_OUT_OF_BOUNDS);
    ck_assert(untouched(&f));
    f.lens[1] = 5;
    /* A block-table entry past the cache. */
    f.table[1] = 4;
    ck_assert_int_eq(DECODE(&f, f.q, f.kv, NULL, 4, f.table, 2, f.lens, f.out, f.lse, f.ws, f.ws_size), MLA_STATUS_OUT_OF_BOUNDS);
    ck_assert(untouched(&f));
    f.table[1] = -1;
    ck_assert_int_eq(DECODE(&f, f.q, f.kv, NULL, 4, f.table, 2, f.lens, f.out, f.lse, f.ws, f.ws_size), MLA_STATUS_OUT_OF_BOUNDS);
    ck_assert(untouched(&f));
    ck_assert_ptr_nonnull(strstr(mla_context_last_error(f.ctx), "1"));
    f.table[1] = 1;
    /* An unused entry (request 1 only needs page 0) may hold anything. */
    f.table[3] = 1000;
    ck_assert_int_eq(DECODE(&f, f.q, f.kv, NULL, 4, f.table, 2, f.lens, f.out, f.lse, f.ws, f.ws_size), MLA_STATUS_SUCCESS);
    ck_assert(!untouched(&f));
    ck_assert_int_eq(mla_workspace_status(f.plan, f.ws, &dst), 0);
    ck_assert_int_eq(dst, MLA_STATUS_SUCCESS);
    ck_assert_int_eq(mla_workspace_status(NULL, f.ws, &dst), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(mla_workspace_status(f.plan, NULL, &dst), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(mla_workspace_status(f.plan, f.ws, NULL), MLA_STATUS_INVALID_ARGUMENT);
    fx_fini(&f);
}
END_TEST

/* mla_schedule + mla_decode_scheduled: the same bytes as mla_decode, the
 * schedule's lengths (not seq_lens' later contents), argument checks, and
 * no output without a matching schedule. */
START_TEST(schedule_then_decode)
{
    struct fixture f;
    fx_init(&f, 0);
    mla_status_t dst;
    uint16_t *ref = malloc(FX_BATCH * FX_HEADS * 512 * 2);
    float ref_lse[2 * 16];
    ck_assert_ptr_nonnull(ref);

    /* A workspace no call has used. */
    memset(f.ws, 0, f.ws_size);
    ck_assert_int_eq(mla_workspace_status(f.plan, f.ws, &dst), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(mla_decode_scheduled(f.plan, f.q, f.kv, NULL, 4, f.table, 2, f.out, f.lse,
                                          f.ws, f.ws_size, NULL),
                     MLA_STATUS_INVALID_ARGUMENT);
    ck_assert(untouched(&f));
    ck_assert_str_ne(mla_context_last_error(f.ctx), "");

    ck_assert_int_eq(DECODE(&f, f.q, f.kv, NULL, 4, f.table, 2, f.lens, f.out, f.lse, f.ws,
                            f.ws_size), MLA_STATUS_SUCCESS);
    memcpy(ref, f.out, FX_BATCH * FX_HEADS * 512 * 2);
    memcpy(ref_lse, f.lse, sizeof(ref_lse));

    struct { mla_status_t got, want; } r[] = {
        {mla_schedule(NULL, 4, f.table, 2, f.lens, f.ws, f.ws_size, NULL), MLA_STATUS_INVALID_ARGUMENT},
        {mla_schedule(f.plan, 4, NULL, 2, f.lens, f.ws, f.ws_size, NULL), MLA_STATUS_INVALID_ARGUMENT},
        {mla_schedule(f.plan, 4, f.table, 2, NULL, f.ws, f.ws_size, NULL), MLA_STATUS_INVALID_ARGUMENT},
        {mla_schedule(f.plan, 4, f.table, 2, f.lens, NULL, f.ws_size, NULL), MLA_STATUS_INVALID_ARGUMENT},
        {mla_schedule(f.plan, 0, f.table, 2, f.lens, f.ws, f.ws_size, NULL), MLA_STATUS_INVALID_ARGUMENT},
        {mla_schedule(f.plan, 4, f.table, 0, f.lens, f.ws, f.ws_size, NULL), MLA_STATUS_INVALID_ARGUMENT},
        {mla_schedule(f.plan, 4, f.table, 2, f.lens, (char *)f.ws + 16, f.ws_size, NULL), MLA_STATUS_MISALIGNED},
        {mla_schedule(f.plan, 4, f.table, 2, f.lens, f.ws, f.ws_size - 1, NULL), MLA_STATUS_SIZE_MISMATCH},
        {mla_decode_scheduled(NULL, f.q, f.kv, NULL, 4, f.table, 2, f.out, f.lse, f.ws, f.ws_size, NULL), MLA_STATUS_INVALID_ARGUMENT},
        {mla_decode_scheduled(f.plan, NULL, f.kv, NULL, 4, f.table, 2, f.out, f.lse, f.ws, f.ws_size, NULL), MLA_STATUS_INVALID_ARGUMENT},
        {mla_decode_scheduled(f.plan, f.q, f.kv, NULL, 4, f.table, 2, NULL, f.lse, f.ws, f.ws_size, NULL), MLA_STATUS_INVALID_ARGUMENT},
        {mla_decode_scheduled(f.plan, f.q, f.kv, f.scales, 4, f.table, 2, f.out, f.lse, f.ws, f.ws_size, NULL), MLA_STATUS_INVALID_ARGUMENT},
        {mla_decode_scheduled(f.plan, f.q, f.kv, NULL, 4, f.table, 2, (char *)f.out + 4, f.lse, f.ws, f.ws_size, NULL), MLA_STATUS_MISALIGNED},
        {mla_decode_scheduled(f.plan, f.q, f.kv, NULL, 4, f.table, 2, f.out, f.lse, f.ws, 0, NULL), MLA_STATUS_SIZE_MISMATCH},
    };
    memset(f.out, 0xA5, FX_BATCH * FX_HEADS * 512 * 2);
    memset(f.lse, 0xA5, sizeof(f.lse));
    for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
        ck_assert_msg(r[i].got == r[i].want, "case %zu: got %s, want %s", i,
                      mla_status_string(r[i].got), mla_status_string(r[i].want));
        ck_assert_msg(untouched(&f), "case %zu wrote output", i);
    }

    /* The schedule keeps the lengths it read: seq_lens changed afterwards
     * does not matter; two layers give the same bytes as mla_decode. */
    ck_assert_int_eq(mla_schedule(f.plan, 4, f.table, 2, f.lens, f.ws, f.ws_size, NULL), 0);
    f.lens[0] = 1000;
    for (int layer = 0; layer < 2; layer++) {
        memset(f.out, 0xA5, FX_BATCH * FX_HEADS * 512 * 2);
        ck_assert_int_eq(mla_decode_scheduled(f.plan, f.q, f.kv, NULL, 4, f.table, 2, f.out,
                                              f.lse, f.ws, f.ws_size, NULL),
                         MLA_STATUS_SUCCESS);
        ck_assert(memcmp(ref, f.out, FX_BATCH * FX_HEADS * 512 * 2) == 0);
        ck_assert(memcmp(ref_lse, f.lse, sizeof(ref_lse)) == 0);
    }
    ck_assert_int_eq(mla_workspace_status(f.plan, f.ws, &dst), 0);
    ck_assert_int_eq(dst, MLA_STATUS_SUCCESS);

    /* Another block table than the schedule's: refused, recorded. */
    int32_t table2[4];
    memcpy(table2, f.table, sizeof(table2));
    memset(f.out, 0xA5, FX_BATCH * FX_HEADS * 512 * 2);
    memset(f.lse, 0xA5, sizeof(f.lse));
    ck_assert_int_eq(mla_decode_scheduled(f.plan, f.q, f.kv, NULL, 4, table2, 2, f.out, f.lse,
                                          f.ws, f.ws_size, NULL),
                     MLA_STATUS_INVALID_ARGUMENT);
    ck_assert(untouched(&f));
    ck_assert_int_eq(mla_workspace_status(f.plan, f.ws, &dst), 0);
    ck_assert_int_eq(dst, MLA_STATUS_INVALID_ARGUMENT);

    /* A schedule that found a bad length: the decodes on it write nothing. */
    f.lens[0] = 33;
    ck_assert_int_eq(mla_schedule(f.plan, 4, f.table, 2, f.lens, f.ws, f.ws_size, NULL),
                     MLA_STATUS_OUT_OF_BOUNDS);
    ck_assert_int_eq(mla_decode_scheduled(f.plan, f.q, f.kv, NULL, 4, f.table, 2, f.out, f.lse,
                                          f.ws, f.ws_size, NULL),
                     MLA_STATUS_OUT_OF_BOUNDS);
    ck_assert(untouched(&f));
    ck_assert_int_eq(mla_workspace_status(f.plan, f.ws, &dst), 0);
    ck_assert_int_eq(dst, MLA_STATUS_OUT_OF_BOUNDS);

    /* A plan of another layout (batch 1) does not take this workspace. */
    mla_plan_t *other;
    ck_assert_int_eq(mla_plan_create(&other, f.ctx, f.cfg, 1, 32), 0);
    ck_assert_int_eq(mla_workspace_status(other, f.ws, &dst), MLA_STATUS_INVALID_ARGUMENT);
    mla_plan_destroy(other);
    free(ref);
    fx_fini(&f);
}
END_TEST

/* mla_decode leaves the schedule mla_schedule would have (mla_decode is
 * mla_schedule followed by mla_decode_scheduled): a decode_scheduled
 * after it takes its lengths, not those of an older schedule or of a
 * fresh workspace; a plan of another layout neither takes nor changes the
 * schedule, and a workspace holding none is left as it was. */
START_TEST(decode_leaves_schedule)
{
    struct fixture f;
    fx_init(&f, 0);
    const size_t out_bytes = FX_BATCH * FX_HEADS * 512 * 2;
    uint16_t *ref = malloc(out_bytes);
    uint8_t *ws_copy = malloc(f.ws_size);
    float ref_lse[sizeof f.lse / sizeof f.lse[0]];
    mla_status_t dst;
    ck_assert(ref && ws_copy);
    memset(f.ws, 0, f.ws_size);
    ck_assert_int_eq(DECODE(&f, f.q, f.kv, NULL, 4, f.table, 2, f.lens, f.out, f.lse, f.ws,
                            f.ws_size), MLA_STATUS_SUCCESS);
    memcpy(ref, f.out, out_bytes);
    memcpy(ref_lse, f.lse, sizeof(ref_lse));

    int32_t older[2] = {7, 30};
    for (int round = 0; round < 2; round++) {
        if (round == 1) { /* an older schedule of other lengths, then mla_decode */
            ck_assert_int_eq(mla_schedule(f.plan, 4, f.table, 2, older, f.ws, f.ws_size, NULL), 0);
            ck_assert_int_eq(DECODE(&f, f.q, f.kv, NULL, 4, f.table, 2, f.lens, f.out, f.lse,
                                    f.ws, f.ws_size), MLA_STATUS_SUCCESS);
        }
        memset(f.out, 0xA5, out_bytes);
        memset(f.lse, 0xA5, sizeof(f.lse));
        ck_assert_int_eq(mla_decode_scheduled(f.plan, f.q, f.kv, NULL, 4, f.table, 2, f.out,
                                              f.lse, f.ws, f.ws_size, NULL),
                         MLA_STATUS_SUCCESS);
        ck_assert_msg(memcmp(ref, f.out, out_bytes) == 0, "round %d: output", round);
        ck_assert_msg(memcmp(ref_lse, f.lse, sizeof(ref_lse)) == 0, "round %d: LSE", round);
    }

    /* Another layout's mla_decode_scheduled: refused, the schedule kept. */
    mla_plan_t *other;
    size_t other_ws = 0;
    ck_assert_int_eq(mla_plan_create(&other, f.ctx, f.cfg, 1, 32), 0);
    ck_assert_int_eq(mla_plan_workspace_size(other, &other_ws), 0);
    ck_assert_uint_le(other_ws, f.ws_size);
    memcpy(ws_copy, f.ws, f.ws_size);
    memset(f.out, 0xA5, out_bytes);
    memset(f.lse, 0xA5, sizeof(f.lse));
    ck_assert_int_eq(mla_decode_scheduled(other, f.q, f.kv, NULL, 4, f.table, 2, f.out, f.lse,
                                          f.ws, other_ws, NULL),
                     MLA_STATUS_INVALID_ARGUMENT);
    ck_assert(untouched(&f));
    ck_assert(memcmp(ws_copy, f.ws, f.ws_size) == 0);
    ck_assert_int_eq(mla_workspace_status(f.plan, f.ws, &dst), 0);
    ck_assert_int_eq(dst, MLA_STATUS_SUCCESS);
    mla_plan_destroy(other);

    /* A workspace that holds no schedule: refused, left as it was, and
     * mla_workspace_status still finds none. */
    memset(f.ws, 0x5a, f.ws_size);
    memcpy(ws_copy, f.ws, f.ws_size);
    ck_assert_int_eq(mla_decode_scheduled(f.plan, f.q, f.kv, NULL, 4, f.table, 2, f.out, f.lse,
                                          f.ws, f.ws_size, NULL),
                     MLA_STATUS_INVALID_ARGUMENT);
    ck_assert(untouched(&f));
    ck_assert(memcmp(ws_copy, f.ws, f.ws_size) == 0);
    ck_assert_int_eq(mla_workspace_status(f.plan, f.ws, &dst), MLA_STATUS_INVALID_ARGUMENT);
    free(ws_copy);
    free(ref);
    fx_fini(&f);
}
END_TEST

START_TEST(decode_needs_scales)
{
    struct fixture f;
    fx_init(&f, 1);
    ck_assert_int_eq(DECODE(&f, f.q, f.kv, NULL, 4, f.table, 2, f.lens, f.out, f.lse, f.ws, f.ws_size), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert(untouched(&f));
    ck_assert_int_eq(DECODE(&f, f.q, f.kv, (float *)((char *)f.scales + 2), 4, f.table, 2, f.lens, f.out, f.lse, f.ws, f.ws_size), MLA_STATUS_MISALIGNED);
    ck_assert(untouched(&f));
    ck_assert_int_eq(DECODE(&f, f.q, f.kv, f.scales, 4, f.table, 2, f.lens, f.out, NULL, f.ws, f.ws_size), MLA_STATUS_SUCCESS);
    fx_fini(&f);
}
END_TEST

START_TEST(append_args)
{
    struct fixture f;
    fx_init(&f, 0);
    int64_t slots[2] = {5, 63};
    uint8_t *copy = malloc(FX_PAGES * FX_PAGE * 1152);
    memcpy(copy, f.kv, FX_PAGES * FX_PAGE * 1152);
    const char *lat = (const char *)f.q;
    struct { mla_status_t got, want; } r[] = {
        {mla_kv_append(NULL, f.cfg, f.kv, NULL, 4, f.q, slots, 2, NULL), MLA_STATUS_INVALID_ARGUMENT},
        {mla_kv_append(f.ctx, NULL, f.kv, NULL, 4, f.q, slots, 2, NULL), MLA_STATUS_INVALID_ARGUMENT},
        {mla_kv_append(f.ctx, f.cfg, NULL, NULL, 4, f.q, slots, 2, NULL), MLA_STATUS_INVALID_ARGUMENT},
        {mla_kv_append(f.ctx, f.cfg, f.kv, NULL, 4, NULL, slots, 2, NULL), MLA_STATUS_INVALID_ARGUMENT},
        {mla_kv_append(f.ctx, f.cfg, f.kv, NULL, 4, f.q, NULL, 2, NULL), MLA_STATUS_INVALID_ARGUMENT},
        {mla_kv_append(f.ctx, f.cfg, f.kv, NULL, 4, f.q, slots, -1, NULL), MLA_STATUS_INVALID_ARGUMENT},
        {mla_kv_append(f.ctx, f.cfg, f.kv, NULL, 0, f.q, slots, 2, NULL), MLA_STATUS_INVALID_ARGUMENT},
        {mla_kv_append(f.ctx, f.cfg, f.kv, f.scales, 4, f.q, slots, 2, NULL), MLA_STATUS_INVALID_ARGUMENT},
        {mla_kv_append(f.ctx, f.cfg, f.kv + 4, NULL, 4, f.q, slots, 2, NULL), MLA_STATUS_MISALIGNED},
        {mla_kv_append(f.ctx, f.cfg, f.kv, NULL, 4, lat + 2, slots, 2, NULL), MLA_STATUS_MISALIGNED},
        {mla_kv_append(f.ctx, f.cfg, f.kv, NULL, 4, f.q, (int64_t *)((char *)slots + 4), 2, NULL), MLA_STATUS_MISALIGNED},
        {mla_kv_append(f.ctx, f.cfg, f.kv, NULL, 3, f.q, slots, 2, NULL), MLA_STATUS_OUT_OF_BOUNDS},
    };
    for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
        ck_assert_msg(r[i].got == r[i].want, "case %zu: got %s, want %s", i,
                      mla_status_string(r[i].got), mla_status_string(r[i].want));
        ck_assert_msg(memcmp(copy, f.kv, FX_PAGES * FX_PAGE * 1152) == 0, "case %zu wrote", i);
    }
    ck_assert_int_eq(mla_kv_append(f.ctx, f.cfg, f.kv, NULL, 4, NULL, NULL, 0, NULL), MLA_STATUS_SUCCESS);
    ck_assert_int_eq(mla_kv_append(f.ctx, f.cfg, f.kv, NULL, 4, f.q, slots, 2, NULL), MLA_STATUS_SUCCESS);
    ck_assert_int_eq(memcmp(f.kv + 5 * 1152, f.q, 1152), 0);
    ck_assert_int_eq(memcmp(f.kv + 63 * 1152, (const char *)f.q + 1152, 1152), 0);
    free(copy);
    fx_fini(&f);
}
END_TEST

/* Outputs that overlap inputs.  Request 0's LSE lands on request 1's
 * length: the length re-read after validation would index the block table
 * far out of bounds.  One worker thread, so request 0 runs first. */
START_TEST(decode_lse_over_seq_lens)
{
    struct fixture f;
    fx_init(&f, 0);
    mla_plan_destroy(f.plan);
    ck_assert_int_eq(mla_config_set_int(f.cfg, MLA_XPARAM_CPU_THREADS, 1), 0);
    ck_assert_int_eq(mla_plan_create(&f.plan, f.ctx, f.cfg, FX_BATCH, 32), 0);
    float *buf = aligned_alloc(64, 64 * sizeof(float));
    int32_t *lens = (int32_t *)(buf + 4); /* lse[4], lse[5] of request 0 */
    memset(buf, 0x5a, 64 * sizeof(float));
    lens[0] = 20;
    lens[1] = 5;
    unsigned char before[64 * sizeof(float)];
    memcpy(before, buf, sizeof(before));
    ck_assert_int_eq(DECODE(&f, f.q, f.kv, NULL, 4, f.table, 2, lens, f.out, buf, f.ws, f.ws_size),
                     MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_msg(memcmp(before, buf, sizeof(before)) == 0, "lse written");
    ck_assert(untouched(&f));
    ck_assert_ptr_nonnull(strstr(mla_context_last_error(f.ctx), "lse"));
    ck_assert_ptr_nonnull(strstr(mla_context_last_error(f.ctx), "seq_lens"));
    /* Right after the lengths is fine. */
    ck_assert_int_eq(DECODE(&f, f.q, f.kv, NULL, 4, f.table, 2, lens, f.out, buf + 6, f.ws, f.ws_size),
                     MLA_STATUS_SUCCESS);
    free(buf);
    fx_fini(&f);
}
END_TEST

/* Every output against every input and the other outputs, each placed
 * inside one arena whose bytes must survive a refused call. */
START_TEST(decode_overlaps)
{
    enum { Q, KV, SC, BT, LENS, OUT, LSE, WS, NBUF };
    static const char *const names[NBUF] = {"q", "kv_cache", "kv_block_scales", "block_table",
                                            "seq_lens", "out", "lse", "workspace"};
    struct fixture f;
    fx_init(&f, 1);
    const size_t sz[NBUF] = {FX_BATCH * FX_HEADS * 576 * 2, FX_PAGES * FX_PAGE * 576,
                             FX_PAGES * FX_PAGE * 9 * 4, FX_BATCH * 2 * 4, FX_BATCH * 4,
                             FX_BATCH * FX_HEADS * 512 * 2, FX_BATCH * FX_HEADS * 4, f.ws_size};
    /* Slots of the largest size, so an output moved onto a buffer
     * overlaps that buffer only. */
    size_t slot = 0;
    for (int i = 0; i < NBUF; i++)
        slot = sz[i] > slot ? sz[i] : slot;
    slot = (slot + 255) / 256 * 256;
    const size_t total = slot * NBUF;
    unsigned char *arena = aligned_alloc(256, total), *copy = malloc(total);
    for (int o = OUT; o < NBUF; o++) {
        for (int i = 0; i < NBUF; i++) {
            if (i == o)
                continue;
            /* Lay the buffers out apart, then move output o onto buffer i. */
            void *p[NBUF];
            for (int k = 0; k < NBUF; k++)
                p[k] = arena + slot * (size_t)k;
            p[o] = p[i];
            memset(arena, 0, total);
            memcpy(p[Q], f.q, sz[Q] < 4096 ? sz[Q] : 4096);
            ((int32_t *)p[LENS])[0] = 3, ((int32_t *)p[LENS])[1] = 2;
            for (int k = 0; k < 4; k++)
                ((int32_t *)p[BT])[k] = k;
            if (i == LENS || i == BT) { /* keep the indices valid */
                ((int32_t *)p[LENS])[0] = 1, ((int32_t *)p[LENS])[1] = 1;
                for (int k = 0; k < 4; k++)
                    ((int32_t *)p[BT])[k] = 0;
            }
            memcpy(copy, arena, total);
            mla_status_t st = mla_decode(f.plan, p[Q], p[KV], p[SC], FX_PAGES, p[BT], 2, p[LENS],
                                         p[OUT], p[LSE], p[WS], f.ws_size, NULL);
            ck_assert_msg(st == MLA_STATUS_INVALID_ARGUMENT, "%s over %s: %s", names[o],
                          names[i], mla_status_string(st));
            ck_assert_msg(memcmp(copy, arena, total) == 0, "%s over %s: written", names[o],
                          names[i]);
            ck_assert_msg(strstr(mla_context_last_error(f.ctx), names[o]) &&
                              strstr(mla_context_last_error(f.ctx), names[i]),
                          "%s over %s: message \"%s\"", names[o], names[i],
                          mla_context_last_error(f.ctx));
        }
    }
    free(arena);
    free(copy);
    fx_fini(&f);
}
END_TEST

/* The cache and its block scales are outputs of an append. */
START_TEST(append_overlaps)
{
    struct fixture f;
    fx_init(&f, 1);
    int64_t *slots = aligned_alloc(64, 64);
    slots[0] = 5;
    slots[1] = 7;
    uint8_t *copy = malloc(FX_PAGES * FX_PAGE * 1152);
    memcpy(copy, f.kv, FX_PAGES * FX_PAGE * 1152);
    struct { const void *lat; const int64_t *sl; float *sc; const char *a, *b; } r[] = {
        {f.kv + 576, slots, f.scales, "kv_cache", "latent"},
        {f.q, (const int64_t *)(f.kv + 64), f.scales, "kv_cache", "slots"},
        {f.q, slots, (float *)(f.kv + 1024), "kv_block_scales", "kv_cache"},
        {f.scales, slots, f.scales + 16, "kv_block_scales", "latent"},
    };
    for (size_t i = 0; i < sizeof(r) / sizeof(r[0]); i++) {
        mla_status_t st = mla_kv_append(f.ctx, f.cfg, f.kv, r[i].sc, FX_PAGES, r[i].lat, r[i].sl, 2, NULL);
        ck_assert_msg(st == MLA_STATUS_INVALID_ARGUMENT, "case %zu: %s", i, mla_status_string(st));
        ck_assert_msg(memcmp(copy, f.kv, FX_PAGES * FX_PAGE * 1152) == 0, "case %zu wrote", i);
        ck_assert_msg(strstr(mla_context_last_error(f.ctx), r[i].a) &&
                          strstr(mla_context_last_error(f.ctx), r[i].b),
                      "case %zu: message \"%s\"", i, mla_context_last_error(f.ctx));
    }
    free(slots);
    free(copy);
    fx_fini(&f);
}
END_TEST

void add_decode_tests(TCase *tc)
{
    tcase_add_test(tc, plan_args);
    tcase_add_test(tc, decode_args);
    tcase_add_test(tc, schedule_then_decode);
    tcase_add_test(tc, decode_leaves_schedule);
    tcase_add_test(tc, decode_needs_scales);
    tcase_add_test(tc, append_args);
    tcase_add_test(tc, decode_lse_over_seq_lens);
    tcase_add_test(tc, decode_overlaps);
    tcase_add_test(tc, append_overlaps);
}
