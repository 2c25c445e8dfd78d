/* test_api.c - argument validation, config round trips, plans, status
 * strings and versions, through the public API only.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

/* ---- configs ---------------------------------------------------------------- */

static mla_config_t *new_config(void)
{
    mla_config_t *cfg = NULL;
    ck_assert_int_eq(mla_config_create(&cfg), MLA_STATUS_SUCCESS);
    ck_assert_ptr_nonnull(cfg);
    return cfg;
}

static int64_t geti(const mla_config_t *cfg, mla_param_t p)
{
    int64_t v = -12345;
    ck_assert_int_eq(mla_config_get_int(cfg, p, &v), MLA_STATUS_SUCCESS);
    return v;
}

START_TEST(config_defaults)
{
    mla_config_t *cfg = new_config();
    ck_assert_int_eq(geti(cfg, MLA_PARAM_NUM_HEADS), 128);
    ck_assert_int_eq(geti(cfg, MLA_PARAM_NUM_KV_HEADS), 1);
    ck_assert_int_eq(geti(cfg, MLA_PARAM_Q_LEN), 1);
    ck_assert_int_eq(geti(cfg, MLA_PARAM_HEAD_DIM_QK), 576);
    ck_assert_int_eq(geti(cfg, MLA_PARAM_HEAD_DIM_V), 512);
    ck_assert_int_eq(geti(cfg, MLA_PARAM_KV_FORMAT), MLA_KV_BF16);
    ck_assert_int_eq(geti(cfg, MLA_PARAM_PAGE_SIZE), 64);
    ck_assert_int_eq(geti(cfg, MLA_PARAM_SCALE_BLOCK_SIZE), 0);
    ck_assert_int_eq(geti(cfg, MLA_PARAM_CAUSAL), 0);
    ck_assert_int_eq(geti(cfg, MLA_PARAM_NUM_KV_STAGES), 0);
    ck_assert_int_eq(geti(cfg, MLA_PARAM_BLOCK_N), 0);
    ck_assert_int_eq(geti(cfg, MLA_PARAM_KV_ROW_BYTES), 1152);
    ck_assert_int_eq(geti(cfg, MLA_PARAM_SCALES_PER_ROW), 0);
    ck_assert_int_eq(geti(cfg, MLA_XPARAM_KERNEL), MLA_XKERNEL_AUTO);
    ck_assert_int_eq(geti(cfg, MLA_XPARAM_CPU_THREADS), 0);
    double d = 0;
    ck_assert_int_eq(mla_config_get_float(cfg, MLA_PARAM_SOFTMAX_SCALE, &d), MLA_STATUS_SUCCESS);
    ck_assert_double_eq_tol(d, 1.0 / sqrt(576.0), 1e-15);
    ck_assert_int_eq(mla_config_get_float(cfg, MLA_PARAM_KV_SCALE, &d), MLA_STATUS_SUCCESS);
    ck_assert_double_eq(d, 1.0);
    mla_config_destroy(cfg);
}
END_TEST

struct int_case {
    mla_param_t p;
    int64_t value;
    mla_status_t want;
};

static const struct int_case int_cases[] = {
    {MLA_PARAM_NUM_HEADS, 1, MLA_STATUS_SUCCESS},
    {MLA_PARAM_NUM_HEADS, 128, MLA_STATUS_SUCCESS},
    {MLA_PARAM_NUM_HEADS, 0, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_PARAM_NUM_HEADS, 129, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_PARAM_NUM_HEADS, -1, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_PARAM_NUM_KV_HEADS, 8, MLA_STATUS_SUCCESS},
    {MLA_PARAM_NUM_KV_HEADS, 0, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_PARAM_Q_LEN, 8, MLA_STATUS_SUCCESS},
    {MLA_PARAM_Q_LEN, 9, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_PARAM_Q_LEN, 0, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_PARAM_HEAD_DIM_QK, 576, MLA_STATUS_SUCCESS},
    {MLA_PARAM_HEAD_DIM_QK, 512, MLA_STATUS_NOT_SUPPORTED},
    {MLA_PARAM_HEAD_DIM_QK, 0, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_PARAM_HEAD_DIM_V, 512, MLA_STATUS_SUCCESS},
    {MLA_PARAM_HEAD_DIM_V, 128, MLA_STATUS_NOT_SUPPORTED},
    {MLA_PARAM_KV_FORMAT, MLA_KV_FP8_DS_MLA, MLA_STATUS_SUCCESS},
    {MLA_PARAM_KV_FORMAT, 3, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_PARAM_KV_FORMAT, -1, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_PARAM_PAGE_SIZE, 1, MLA_STATUS_SUCCESS},
    {MLA_PARAM_PAGE_SIZE, 1024, MLA_STATUS_SUCCESS},
    {MLA_PARAM_PAGE_SIZE, 2048, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_PARAM_PAGE_SIZE, 48, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_PARAM_PAGE_SIZE, 0, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_PARAM_SCALE_BLOCK_SIZE, 32, MLA_STATUS_SUCCESS},
    {MLA_PARAM_SCALE_BLOCK_SIZE, 16, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_PARAM_CAUSAL, 1, MLA_STATUS_SUCCESS},
    {MLA_PARAM_NUM_KV_STAGES, 4, MLA_STATUS_SUCCESS},
    {MLA_PARAM_NUM_KV_STAGES, 9, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_PARAM_BLOCK_N, 32, MLA_STATUS_SUCCESS},
    {MLA_PARAM_BLOCK_N, 48, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_PARAM_KV_ROW_BYTES, 576, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_PARAM_SCALES_PER_ROW, 5, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_PARAM_SOFTMAX_SCALE, 1, MLA_STATUS_INVALID_ARGUMENT},
    {(mla_param_t)0, 1, MLA_STATUS_INVALID_ARGUMENT},
    {(mla_param_t)99, 1, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_XPARAM_KERNEL, MLA_XKERNEL_HOPPER_WIDE8, MLA_STATUS_SUCCESS},
    {MLA_XPARAM_KERNEL, 6, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_XPARAM_KERNEL, -1, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_XPARAM_CPU_THREADS, 256, MLA_STATUS_SUCCESS},
    {MLA_XPARAM_CPU_THREADS, 257, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_XPARAM_CPU_THREADS, -1, MLA_STATUS_INVALID_ARGUMENT},
    {MLA_PARAM_EXPERIMENTAL_LAST, 0, MLA_STATUS_INVALID_ARGUMENT},
};

START_TEST(config_set_int_cases)
{
    const struct int_case *c = &int_cases[_i];
    mla_config_t *cfg = new_config();
    int64_t before = -1;
    int readable = mla_config_get_int(cfg, c->p, &before) == MLA_STATUS_SUCCESS;
    mla_status_t st = mla_config_set_int(cfg, c->p, c->value);
    ck_assert_msg(st == c->want, "param %d value %lld: got %s, want %s", (int)c->p,
                  (long long)c->value, mla_status_string(st), mla_status_string(c->want));
    if (st == MLA_STATUS_SUCCESS) {
        ck_assert_str_eq(mla_config_last_error(cfg), "");
        int64_t v = geti(cfg, c->p);
        ck_assert_int_eq(v, c->p == MLA_PARAM_CAUSAL ? (c->value != 0) : c->value);
    } else {
        ck_assert_str_ne(mla_config_last_error(cfg), "");
        if (readable) /* unchanged on failure */
            ck_assert_int_eq(geti(cfg, c->p), before);
    }
    mla_config_destroy(cfg);
}
END_TEST

START_TEST(config_floats)
{
    mla_config_t *cfg = new_config();
    double d = 0;
    ck_assert_int_eq(mla_config_set_float(cfg, MLA_PARAM_SOFTMAX_SCALE, 0.125), MLA_STATUS_SUCCESS);
    ck_assert_int_eq(mla_config_get_float(cfg, MLA_PARAM_SOFTMAX_SCALE, &d), MLA_STATUS_SUCCESS);
    ck_assert_double_eq(d, 0.125);
    ck_assert_int_eq(mla_config_set_float(cfg, MLA_PARAM_SOFTMAX_SCALE, -1), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(mla_config_set_float(cfg, MLA_PARAM_SOFTMAX_SCALE, NAN), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(mla_config_set_float(cfg, MLA_PARAM_SOFTMAX_SCALE, INFINITY), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(mla_config_get_float(cfg, MLA_PARAM_SOFTMAX_SCALE, &d), MLA_STATUS_SUCCESS);
    ck_assert_double_eq(d, 0.125);
    ck_assert_int_eq(mla_config_set_float(cfg, MLA_PARAM_SOFTMAX_SCALE, 0), MLA_STATUS_SUCCESS);
    ck_assert_int_eq(mla_config_get_float(cfg, MLA_PARAM_SOFTMAX_SCALE, &d), MLA_STATUS_SUCCESS);
    ck_assert_double_eq_tol(d, 1.0 / 24.0, 1e-15);
    ck_assert_int_eq(mla_config_set_float(cfg, MLA_PARAM_KV_SCALE, 0.5), MLA_STATUS_SUCCESS);
    ck_assert_int_eq(mla_config_set_float(cfg, MLA_PARAM_KV_SCALE, 0), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(mla_config_set_float(cfg, MLA_PARAM_KV_SCALE, -2), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(mla_config_get_float(cfg, MLA_PARAM_KV_SCALE, &d), MLA_STATUS_SUCCESS);
    ck_assert_double_eq(d, 0.5);
    ck_assert_int_eq(mla_config_set_float(cfg, MLA_PARAM_NUM_HEADS, 1), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(mla_config_get_float(cfg, MLA_PARAM_NUM_HEADS, &d), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(mla_config_get_float(cfg, MLA_PARAM_KV_SCALE, NULL), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(mla_config_set_float(NULL, MLA_PARAM_KV_SCALE, 1), MLA_STATUS_INVALID_ARGUMENT);
    mla_config_destroy(cfg);
}
END_TEST

/* The bounds of the scales are the ones documented, and the message says
 * which condition failed. */
START_TEST(config_scale_bounds)
{
    mla_config_t *cfg = new_config();
    mla_context_t *ctx = NULL;
    mla_plan_t *plan = NULL;
    double d;
    ck_assert_int_eq(mla_context_create(&ctx, MLA_DEVICE_CPU), 0);
    static const struct { mla_param_t p; double v; mla_status_t want; } k[] = {
        {MLA_PARAM_SOFTMAX_SCALE, 1e30, MLA_STATUS_SUCCESS},
        {MLA_PARAM_SOFTMAX_SCALE, 1e-30, MLA_STATUS_SUCCESS},
        {MLA_PARAM_SOFTMAX_SCALE, 0.0, MLA_STATUS_SUCCESS},
        {MLA_PARAM_SOFTMAX_SCALE, 1e31, MLA_STATUS_INVALID_ARGUMENT},
        {MLA_PARAM_SOFTMAX_SCALE, 1e-31, MLA_STATUS_INVALID_ARGUMENT},
        {MLA_PARAM_SOFTMAX_SCALE, 1e-300, MLA_STATUS_INVALID_ARGUMENT},
        {MLA_PARAM_SOFTMAX_SCALE, -1e-30, MLA_STATUS_INVALID_ARGUMENT},
        {MLA_PARAM_KV_SCALE, 1e30, MLA_STATUS_SUCCESS},
        {MLA_PARAM_KV_SCALE, 1e-30, MLA_STATUS_SUCCESS},
        {MLA_PARAM_KV_SCALE, 1e31, MLA_STATUS_INVALID_ARGUMENT},
        {MLA_PARAM_KV_SCALE, 1e-31, MLA_STATUS_INVALID_ARGUMENT},
        {MLA_PARAM_KV_SCALE, NAN, MLA_STATUS_INVALID_ARGUMENT},
        {MLA_PARAM_KV_SCALE, -INFINITY, MLA_STATUS_INVALID_ARGUMENT},
    };
    for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
        mla_status_t st = mla_config_set_float(cfg, k[i].p, k[i].v);
        ck_assert_msg(st == k[i].want, "param %d = %g: %s", (int)k[i].p, k[i].v,
                      mla_status_string(st));
        if (st != MLA_STATUS_SUCCESS)
            ck_assert_msg(strstr(mla_config_last_error(cfg), "[1e-30, 1e+30]"),
                          "param %d = %g: \"%s\"", (int)k[i].p, k[i].v,
                          mla_config_last_error(cfg));
    }
    ck_assert_str_eq(mla_config_last_error(cfg), "mla_config_set_float: MLA_PARAM_KV_SCALE = -inf: "
                     "want a value in [1e-30, 1e+30]");
    /* Each in range, the product not: refused at plan creation. */
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_PARAM_KV_FORMAT, MLA_KV_FP8_E4M3), 0);
    ck_assert_int_eq(mla_config_set_float(cfg, MLA_PARAM_KV_SCALE, 1e30), 0);
    ck_assert_int_eq(mla_config_set_float(cfg, MLA_PARAM_SOFTMAX_SCALE, 1e10), 0);
    ck_assert_int_eq(mla_plan_create(&plan, ctx, cfg, 1, 16), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(mla_context_last_error(ctx), "MLA_PARAM_SOFTMAX_SCALE * MLA_PARAM_KV_SCALE"));
    ck_assert_int_eq(mla_config_set_float(cfg, MLA_PARAM_SOFTMAX_SCALE, 0), 0); /* 1/24 */
    ck_assert_int_eq(mla_config_get_float(cfg, MLA_PARAM_SOFTMAX_SCALE, &d), 0);
    ck_assert_int_eq(mla_plan_create(&plan, ctx, cfg, 1, 16), MLA_STATUS_SUCCESS);
    mla_plan_destroy(plan);
    ck_assert_int_eq(mla_config_set_float(cfg, MLA_PARAM_KV_SCALE, 1e-30), 0);
    ck_assert_int_eq(mla_plan_create(&plan, ctx, cfg, 1, 16), MLA_STATUS_INVALID_ARGUMENT);
    mla_config_destroy(cfg);
    mla_context_destroy(ctx);
}
END_TEST

START_TEST(config_copy_and_nulls)
{
    mla_config_t *cfg = new_config(), *cp = (mla_config_t *)0x1;
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_PARAM_KV_FORMAT, MLA_KV_FP8_E4M3), 0);
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_PARAM_SCALE_BLOCK_SIZE, 128), 0);
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_PARAM_NUM_HEADS, 16), 0);
    ck_assert_int_eq(mla_config_copy(&cp, cfg), MLA_STATUS_SUCCESS);
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_PARAM_NUM_HEADS, 32), 0);
    ck_assert_int_eq(geti(cp, MLA_PARAM_NUM_HEADS), 16);
    ck_assert_int_eq(geti(cp, MLA_PARAM_KV_ROW_BYTES), 576);
    ck_assert_int_eq(geti(cp, MLA_PARAM_SCALES_PER_ROW), 5);
    ck_assert_int_eq(mla_config_set_int(cp, MLA_PARAM_SCALE_BLOCK_SIZE, 32), 0);
    ck_assert_int_eq(geti(cp, MLA_PARAM_SCALES_PER_ROW), 18);
    ck_assert_int_eq(mla_config_set_int(cp, MLA_PARAM_KV_FORMAT, MLA_KV_FP8_DS_MLA), 0);
    ck_assert_int_eq(geti(cp, MLA_PARAM_KV_ROW_BYTES), 656);
    ck_assert_int_eq(geti(cp, MLA_PARAM_SCALES_PER_ROW), 0);
    mla_config_destroy(cp);

    int64_t v;
    ck_assert_int_eq(mla_config_create(NULL), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(mla_config_copy(NULL, cfg), MLA_STATUS_INVALID_ARGUMENT);
    cp = (mla_config_t *)0x1;
    ck_assert_int_eq(mla_config_copy(&cp, NULL), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_ptr_null(cp);
    ck_assert_int_eq(mla_config_set_int(NULL, MLA_PARAM_NUM_HEADS, 1), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(mla_config_get_int(NULL, MLA_PARAM_NUM_HEADS, &v), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(mla_config_get_int(cfg, MLA_PARAM_NUM_HEADS, NULL), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(mla_config_get_int(cfg, (mla_param_t)77, &v), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_config_last_error(NULL), "");
    mla_config_destroy(NULL);
    mla_config_destroy(cfg);
}
END_TEST

/* ---- plans ---------------------------------------------------------------- */

START_TEST(plan_args)
{
    mla_context_t *ctx = NULL;
    ck_assert_int_eq(mla_context_create(&ctx, MLA_DEVICE_CPU), 0);
    mla_config_t *cfg = new_config();
    mla_plan_t *plan = (mla_plan_t *)0x1;
    size_t ws = 0;

    ck_assert_int_eq(mla_plan_create(NULL, ctx, cfg, 1, 1), MLA_STATUS_INVALID_ARGUMENT);
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

/* A small valid CPU problem whose buffers the tests break one at a time. */
struct fixture {
    mla_context_t *ctx;
    mla_config_t *cfg;
    mla_plan_t *plan;
    uint16_t *q;
    uint8_t *kv;
    float *scales;
    int32_t table[4];
    int32_t lens[2];
    uint16_t *out;
    float lse[2 * 16];
    void *ws;
    size_t ws_size;
};

enum { FX_HEADS = 16, FX_BATCH = 2, FX_PAGES = 4, FX_PAGE = 16 };

static void fx_init(struct fixture *f, int fp8_blockwise)
{
    memset(f, 0, sizeof(*f));
    ck_assert_int_eq(mla_context_create(&f->ctx, MLA_DEVICE_CPU), 0);
    f->cfg = new_config();
    ck_assert_int_eq(mla_config_set_int(f->cfg, MLA_PARAM_NUM_HEADS, FX_HEADS), 0);
    ck_assert_int_eq(mla_config_set_int(f->cfg, MLA_PARAM_PAGE_SIZE, FX_PAGE), 0);
    if (fp8_blockwise) {
        ck_assert_int_eq(mla_config_set_int(f->cfg, MLA_PARAM_KV_FORMAT, MLA_KV_FP8_E4M3), 0);
        ck_assert_int_eq(mla_config_set_int(f->cfg, MLA_PARAM_SCALE_BLOCK_SIZE, 64), 0);
    }
    ck_assert_int_eq(mla_plan_create(&f->plan, f->ctx, f->cfg, FX_BATCH, 32), 0);
    ck_assert_int_eq(mla_plan_workspace_size(f->plan, &f->ws_size), 0);
    f->q = aligned_alloc(64, FX_BATCH * FX_HEADS * 576 * 2);
    f->kv = aligned_alloc(64, FX_PAGES * FX_PAGE * 1152);
    f->scales = aligned_alloc(64, FX_PAGES * FX_PAGE * 9 * sizeof(float));
    f->out = aligned_alloc(64, FX_BATCH * FX_HEADS * 512 * 2);
    f->ws = aligned_alloc(256, (f->ws_size + 255) / 256 * 256);
    ck_assert(f->q && f->kv && f->scales && f->out && f->ws);
    for (int i = 0; i < FX_BATCH * FX_HEADS * 576; i++)
        f->q[i] = 0x3c00; /* bf16 0.0078125 */
    memset(f->kv, 0x3c, FX_PAGES * FX_PAGE * 1152);
    for (int i = 0; i < FX_PAGES * FX_PAGE * 9; i++)
        f->scales[i] = 1.0f;
    f->table[0] = 3; f->table[1] = 1; f->table[2] = 0; f->table[3] = 2;
    f->lens[0] = 20; f->lens[1] = 5;
    memset(f->out, 0xA5, FX_BATCH * FX_HEADS * 512 * 2);
    memset(f->lse, 0xA5, sizeof(f->lse));
}

static void fx_fini(struct fixture *f)
{
    mla_plan_destroy(f->plan);
    mla_config_destroy(f->cfg);
    mla_context_destroy(f->ctx);
    free(f->q); free(f->kv); free(f->scales); free(f->out); free(f->ws);
}

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

/* The experimental parameters (mla_experimental.h): every value they take
 * reads back, others are refused with a message that names them, they
 * are integers, copies and plans carry them, and the CPU backend runs
 * with any of them. */
START_TEST(config_experimental)
{
    mla_config_t *cfg = new_config(), *cp = NULL;
    mla_context_t *ctx = NULL;
    mla_plan_t *plan = NULL;
    double d;
    for (int64_t k = MLA_XKERNEL_AUTO; k <= MLA_XKERNEL_HOPPER_WIDE8; k++) {
        ck_assert_int_eq(mla_config_set_int(cfg, MLA_XPARAM_KERNEL, k), 0);
        ck_assert_int_eq(geti(cfg, MLA_XPARAM_KERNEL), k);
    }
    for (int64_t t = 0; t <= 256; t += 37) {
        ck_assert_int_eq(mla_config_set_int(cfg, MLA_XPARAM_CPU_THREADS, t), 0);
        ck_assert_int_eq(geti(cfg, MLA_XPARAM_CPU_THREADS), t);
    }
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_XPARAM_KERNEL, 6), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_config_last_error(cfg),
                     "mla_config_set_int: MLA_XPARAM_KERNEL = 6: want MLA_XKERNEL_AUTO (0), "
                     "MLA_XKERNEL_PORTABLE (1), MLA_XKERNEL_HOPPER (2), MLA_XKERNEL_HOPPER_WIDE (3), "
                     "MLA_XKERNEL_HOPPER_NARROW (4) or MLA_XKERNEL_HOPPER_WIDE8 (5)");
    ck_assert_int_eq(geti(cfg, MLA_XPARAM_KERNEL), MLA_XKERNEL_HOPPER_WIDE8);
    /* The names, by value. */
    static const char *const knames[] = {MLA_XKERNEL_NAMES};
    ck_assert_int_eq(sizeof(knames) / sizeof(knames[0]), MLA_XKERNEL_HOPPER_WIDE8 + 1);
    ck_assert_str_eq(knames[MLA_XKERNEL_HOPPER_NARROW], "hopper-narrow");
    ck_assert_str_eq(knames[MLA_XKERNEL_HOPPER_WIDE8], "hopper-wide8");
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_XPARAM_CPU_THREADS, 257),
                     MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_config_last_error(cfg), "mla_config_set_int: MLA_XPARAM_CPU_THREADS = 257: "
                     "want 0 (automatic) or a value in [1, 256]");
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_XPARAM_CPU_THREADS, -3),
                     MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_int_eq(geti(cfg, MLA_XPARAM_CPU_THREADS), 222);
    ck_assert_int_eq(mla_config_set_float(cfg, MLA_XPARAM_CPU_THREADS, 1),
                     MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_config_last_error(cfg), "mla_config_set_float: MLA_XPARAM_CPU_THREADS is an "
                     "integer parameter: use mla_config_set_int");
    ck_assert_int_eq(mla_config_get_float(cfg, MLA_XPARAM_KERNEL, &d), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_config_last_error(cfg), "mla_config_get_float: MLA_XPARAM_KERNEL is an "
                     "integer parameter: use mla_config_get_int");
    /* A value of the range that names no parameter. */
    const mla_param_t unused = (mla_param_t)(MLA_PARAM_EXPERIMENTAL_FIRST + 0x100);
    ck_assert_int_eq(mla_config_set_int(cfg, unused, 0), MLA_STATUS_INVALID_ARGUMENT);
    ck_assert_str_eq(mla_config_last_error(cfg),
                     "mla_config_set_int: param = 65792 is not an mla_param_t");
    ck_assert_int_eq(mla_config_copy(&cp, cfg), 0);
    ck_assert_int_eq(geti(cp, MLA_XPARAM_KERNEL), MLA_XKERNEL_HOPPER_WIDE8);
    ck_assert_int_eq(geti(cp, MLA_XPARAM_CPU_THREADS), 222);
    mla_config_destroy(cp);

    /* The CPU backend ignores the kernel and runs with 1, 3 or the
     * automatic number of threads alike. */
    ck_assert_int_eq(mla_context_create(&ctx, MLA_DEVICE_CPU), 0);
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_PARAM_NUM_HEADS, FX_HEADS), 0);
    ck_assert_int_eq(mla_config_set_int(cfg, MLA_PARAM_PAGE_SIZE, FX_PAGE), 0);
    static const int threads[] = {1, 3, 0};
    uint16_t out[3][FX_BATCH * FX_HEADS * 512];
    for (int i = 0; i < 3; i++) {
        struct fixture f;
        fx_init(&f, 0);
        ck_assert_int_eq(mla_config_set_int(cfg, MLA_XPARAM_CPU_THREADS, threads[i]), 0);
        ck_assert_int_eq(mla_plan_create(&plan, ctx, cfg, FX_BATCH, 32), 0);
        ck_assert_int_eq(mla_decode(plan, f.q, f.kv, NULL, FX_PAGES, f.table, 2, f.lens, f.out,
                                    NULL, f.ws, f.ws_size, NULL),
                         MLA_STATUS_SUCCESS);
        memcpy(out[i], f.out, sizeof(out[i]));
        mla_plan_destroy(plan);
        fx_fini(&f);
    }
    ck_assert_mem_eq(out[0], out[1], sizeof(out[0]));
    ck_assert_mem_eq(out[0], out[2], sizeof(out[0]));
    mla_config_destroy(cfg);
    mla_context_destroy(ctx);
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
    tcase_add_test(tc, config_defaults);
    tcase_add_loop_test(tc, config_set_int_cases, 0, (int)(sizeof(int_cases) / sizeof(int_cases[0])));
    tcase_add_test(tc, config_floats);
    tcase_add_test(tc, config_scale_bounds);
    tcase_add_test(tc, config_copy_and_nulls);
    tcase_add_test(tc, config_experimental);
    tcase_add_test(tc, plan_args);
    tcase_add_test(tc, decode_args);
    tcase_add_test(tc, schedule_then_decode);
    tcase_add_test(tc, decode_needs_scales);
    tcase_add_test(tc, append_args);
    tcase_add_test(tc, decode_lse_over_seq_lens);
    tcase_add_test(tc, decode_overlaps);
    tcase_add_test(tc, append_overlaps);
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
