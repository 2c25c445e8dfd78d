/* test_api.c - argument validation, config round trips, plans, status
 * strings and versions, through the public API only.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "api_harness.h"
#include "mla.h"
#include "mla_experimental.h"

/* ---- version and status ------------------------------------------------ */

START_TEST(version_matches)
{
    ck_assert_uint_eq(mla_version_number(), MLA_VERSION_NUMBER);
    ck_assert_str_eq(mla_version_string(), MLA_VERSION_STRING);
    char buf[32];
    snprintf(buf, sizeof(buf), "%d.%d.%d", MLA_VERSION_MAJOR, MLA_VERSION_MINOR,
             MLA_VERSION_PATCH);
    ck_assert_str_eq(mla_version_string(), buf);
    const char *info = mla_build_info();
    ck_assert_ptr_nonnull(info);
    ck_assert_ptr_nonnull(strstr(info, "version=" MLA_VERSION_STRING));
    ck_assert_ptr_nonnull(strstr(info, "archs="));
    ck_assert_ptr_nonnull(strstr(info, "backends=cpu"));
}
END_TEST

START_TEST(status_strings)
{
    const char *seen[16] = {0};
    for (int s = MLA_STATUS_SUCCESS; s <= MLA_STATUS_INTERNAL_ERROR; s++) {
        const char *t = mla_status_string((mla_status_t)s);
        ck_assert_ptr_nonnull(t);
        ck_assert_str_ne(t, "unknown status");
        for (int j = 0; j < s; j++)
            ck_assert_str_ne(t, seen[j]);
        seen[s] = t;
    }
    ck_assert_str_eq(mla_status_string((mla_status_t)-1), "unknown status");
    ck_assert_str_eq(mla_status_string((mla_status_t)12), "unknown status");
    ck_assert_str_eq(mla_status_string((mla_status_t)1000000), "unknown status");
    /* Frozen values. */
    ck_assert_int_eq(MLA_STATUS_SUCCESS, 0);
    ck_assert_int_eq(MLA_STATUS_OUT_OF_BOUNDS, 7);
    ck_assert_int_eq(MLA_STATUS_INTERNAL_ERROR, 11);
    ck_assert_int_eq(MLA_KV_FP8_DS_MLA, 2);
    ck_assert_int_eq(MLA_PARAM_KV_SCALE, 101);
}
END_TEST

/* ---- contexts ------------------------------------------------------------ */

START_TEST(context_args)
{
    mla_context_t *ctx = (mla_context_t *)0x1;
    ck_assert_int_eq(mla_context_create(NULL, MLA_DEVICE_CPU), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(mla_context_create(&ctx, -2), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_ptr_null(ctx);
    ck_assert_int_eq(mla_context_create(&ctx, MLA_DEVICE_CPU), MLA_STATUS_SUCCESS);
    ck_assert_ptr_nonnull(ctx);
    ck_assert_str_eq(mla_context_last_error(ctx), "");
    ck_assert_str_eq(mla_context_last_error(NULL), "");
    mla_context_destroy(ctx);
    mla_context_destroy(NULL);
}
END_TEST

/* Host-only program: a GPU may or may not be present; either answer is a
 * clean status, never a crash.  A huge ordinal never exists. */
START_TEST(context_no_such_device)
{
    mla_context_t *ctx = (mla_context_t *)0x1;
    mla_status_t st = mla_context_create(&ctx, 4096);
    ck_assert_msg(st == MLA_STATUS_NO_DEVICE || st == MLA_STATUS_NOT_SUPPORTED,
                  "device 4096: %s", mla_status_string(st));
    ck_assert_ptr_null(ctx);
    /* The reason, though no context exists: the loader's or the driver's
     * text without a driver, the device count with one. */
    const char *why = mla_last_error();
    ck_assert_msg(strncmp(why, "mla_context_create: ", 20) == 0 && strlen(why) > 30,
                  "reason: \"%s\"", why);
    if (st == MLA_STATUS_NOT_SUPPORTED)
        ck_assert_ptr_nonnull(strstr(why, "without CUDA"));
    else
        ck_assert_msg(strstr(why, "libcuda.so.1") || strstr(why, "cuInit") ||
                          strstr(why, "device = 4096"),
                      "reason: \"%s\"", why);
}
END_TEST

/* Failures with no handle leave their reason too, per thread. */
START_TEST(last_error_without_handle)
{
    mla_context_t *ctx = NULL;
    ck_assert_int_eq(mla_context_create(&ctx, -2), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_last_error(), "mla_context_create: device = -2: want a CUDA device "
                     "ordinal >= 0 or MLA_DEVICE_CPU (-1)");
    ck_assert_int_eq(mla_context_create(NULL, MLA_DEVICE_CPU), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_last_error(), "mla_context_create: ctx is NULL");
    ck_assert_int_eq(mla_config_create(NULL), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_last_error(), "mla_config_create: cfg is NULL");
    ck_assert_int_eq(mla_config_set_int(NULL, MLA_PARAM_NUM_HEADS, 1), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_last_error(), "mla_config_set_int: cfg is NULL");
    ck_assert_int_eq(mla_decode(NULL, NULL, NULL, NULL, 0, NULL, 0, NULL, NULL, NULL, NULL, 0, NULL),
                     MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_last_error(), "mla_decode: plan is NULL");
    ck_assert_int_eq(mla_plan_workspace_size(NULL, NULL), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_last_error(), "mla_plan_workspace_size: plan is NULL");
    ck_assert_int_eq(mla_workspace_status(NULL, NULL, NULL), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_last_error(), "mla_workspace_status: plan is NULL");
    ck_assert_int_eq(mla_kv_append(NULL, NULL, NULL, NULL, 0, NULL, NULL, 0, NULL),
                     MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_last_error(), "mla_kv_append: ctx is NULL");
    /* A config passed as a context is refused by its magic. */
    mla_config_t *cfg = NULL;
    ck_assert_int_eq(mla_config_create(&cfg), MLA_STATUS_SUCCESS);
    ck_assert_int_eq(mla_kv_append((mla_context_t *)(void *)cfg, cfg, NULL, NULL, 0, NULL, NULL, 0, NULL),
                     MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(mla_last_error(), "mla_kv_append: ctx is not a context"));
    ck_assert_str_eq(mla_config_last_error(cfg), "");
    /* A success clears it; a failure about a config is there too. */
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_PARAM_NUM_HEADS, 8), MLA_STATUS_SUCCESS);
    ck_assert_str_eq(mla_last_error(), "");
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_PARAM_NUM_HEADS, 129), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_last_error(), mla_config_last_error(cfg));
    char kept[256];
    snprintf(kept, sizeof kept, "%s", mla_last_error());
    mla_config_destroy(cfg);
    ck_assert_str_eq(mla_last_error(), kept);
}
END_TEST

/* ---- messages ---------------------------------------------------------------- */

/* Every failure on a handle leaves a message: the function's name, then the
 * parameter by its public name; a success on the handle clears it. */
START_TEST(messages)
{
    mla_config_t *cfg = new_config();
    mla_context_t *ctx = NULL;
    mla_plan_t *plan = NULL;
    int64_t v;
    double d;
    ck_assert_int_eq(mla_context_create(&ctx, MLA_DEVICE_CPU), 0);

    ck_assert_int_eq(mla_config_set_int(cfg, MLA_PARAM_PAGE_SIZE, 48), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_config_last_error(cfg),
                     "mla_config_set_int: MLA_PARAM_PAGE_SIZE = 48: want a power of two in [1, 1024]");
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_PARAM_PAGE_SIZE, 64), 0);
    ck_assert_str_eq(mla_config_last_error(cfg), "");
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_PARAM_NUM_HEADS, 0), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_config_last_error(cfg),
                     "mla_config_set_int: MLA_PARAM_NUM_HEADS = 0: want a value in [1, 128]");
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_PARAM_KV_ROW_BYTES, 1), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_config_last_error(cfg), "mla_config_set_int: MLA_PARAM_KV_ROW_BYTES is read-only");
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_PARAM_SOFTMAX_SCALE, 1), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_config_last_error(cfg), "mla_config_set_int: MLA_PARAM_SOFTMAX_SCALE is "
                     "floating-point: use mla_config_set_float");
    ck_assert_int_eq(mla_config_set_int(cfg, (mla_param_t)99, 1), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_config_last_error(cfg), "mla_config_set_int: param = 99 is not an mla_param_t");
    /* The getters. */
    ck_assert_int_eq(mla_config_get_int(cfg, MLA_PARAM_NUM_HEADS, NULL), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_config_last_error(cfg), "mla_config_get_int: value is NULL");
    ck_assert_int_eq(mla_config_get_int(cfg, (mla_param_t)77, &v), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_config_last_error(cfg), "mla_config_get_int: param = 77 is not an mla_param_t");
    ck_assert_int_eq(mla_config_get_float(cfg, MLA_PARAM_NUM_HEADS, &d), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_config_last_error(cfg), "mla_config_get_float: MLA_PARAM_NUM_HEADS is an "
                     "integer parameter: use mla_config_get_int");
    ck_assert_int_eq(mla_config_set_float(cfg, MLA_PARAM_Q_LEN, 1), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_config_last_error(cfg), "mla_config_set_float: MLA_PARAM_Q_LEN is an "
                     "integer parameter: use mla_config_set_int");
    ck_assert_int_eq(mla_config_get_float(cfg, MLA_PARAM_KV_SCALE, NULL), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_config_last_error(cfg), "mla_config_get_float: value is NULL");

    /* Plans. */
    ck_assert_int_eq(mla_plan_create(&plan, ctx, cfg, 0, 1), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_context_last_error(ctx), "mla_plan_create: batch = 0: want a value in [1, 65535]");
    ck_assert_int_eq(mla_plan_create(&plan, ctx, NULL, 1, 1), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_context_last_error(ctx), "mla_plan_create: cfg is NULL");
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_PARAM_NUM_KV_HEADS, 3), 0);
    ck_assert_int_eq(mla_plan_create(&plan, ctx, cfg, 1, 1), MLA_STATUS_NOT_SUPPORTED);
    ck_assert_str_eq(mla_context_last_error(ctx), "mla_plan_create: MLA_PARAM_NUM_KV_HEADS = 3 does "
                     "not divide MLA_PARAM_NUM_HEADS = 128");
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_PARAM_NUM_KV_HEADS, 1), 0);
    ck_assert_int_eq(mla_plan_create(&plan, ctx, cfg, 1, 16), 0);
    ck_assert_str_eq(mla_context_last_error(ctx), "");
    ck_assert_int_eq(mla_plan_workspace_size(plan, NULL), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_context_last_error(ctx), "mla_plan_workspace_size: bytes is NULL");
    void *ws = aligned_alloc(256, 256);
    mla_status_t dst;
    ck_assert_int_eq(mla_workspace_status(plan, ws, NULL), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_context_last_error(ctx), "mla_workspace_status: device_status is NULL");
    ck_assert_int_eq(mla_workspace_status(plan, (char *)ws + 4, &dst), MLA_STATUS_MISALIGNED);
    ck_assert_ptr_nonnull(strstr(mla_context_last_error(ctx), "mla_workspace_status: workspace = "));
    /* Appends. */
    ck_assert_int_eq(mla_kv_append(ctx, cfg, ws, NULL, 1, NULL, NULL, -1, NULL), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_context_last_error(ctx), "mla_kv_append: n = -1: want at least 0");
    ck_assert_int_eq(mla_kv_append(ctx, NULL, ws, NULL, 1, NULL, NULL, 0, NULL), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_context_last_error(ctx), "mla_kv_append: cfg is NULL");
    free(ws);
    mla_plan_destroy(plan);
    mla_config_destroy(cfg);
    mla_context_destroy(ctx);
}
END_TEST

static Suite *api_suite(void)
{
    Suite *s = suite_create("api");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, version_matches);
    tcase_add_test(tc, status_strings);
    tcase_add_test(tc, context_args);
    tcase_add_test(tc, context_no_such_device);
    tcase_add_test(tc, last_error_without_handle);
    add_config_tests(tc);
    add_decode_tests(tc);
    tcase_add_test(tc, messages);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(api_suite());
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
