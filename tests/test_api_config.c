/* test_api_config.c - configs through the public API: defaults, the
 * bounds of every integer and floating-point parameter, copies and NULL
 * arguments, and the experimental parameters.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

#include "api_harness.h"
#include "mla.h"
#include "mla_experimental.h"

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
    ck_assert_ptr_nonnull(strstr(mla_config_last_error(cfg), "dst is NULL"));
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

void add_config_tests(TCase *tc)
{
    tcase_add_test(tc, config_defaults);
    tcase_add_loop_test(tc, config_set_int_cases, 0, (int)(sizeof(int_cases) / sizeof(int_cases[0])));
    tcase_add_test(tc, config_floats);
    tcase_add_test(tc, config_scale_bounds);
    tcase_add_test(tc, config_copy_and_nulls);
    tcase_add_test(tc, config_experimental);
}
