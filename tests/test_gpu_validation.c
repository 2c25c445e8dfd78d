/* test_gpu_validation.c - what the GPU backend refuses: lengths and
 * block-table entries out of bounds, found on the device (nothing
 * written, the status recorded in the workspace), and kernels asked for
 * shapes they do not take.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "../tools/devmem.h"
#include "gpu_harness.h"
#include "mla.h"
#include "mla_experimental.h"
#include "rng.h"

/* ------------------------------------------------------------------ */
/* Device-side validation */

enum { OOB_LEN_PAGES, OOB_LEN_PLAN, OOB_BT_HIGH, OOB_BT_NEG, OOB_LEN_NEG, OOB_KINDS };
static const char *const oob_names[OOB_KINDS] = {
    "length > max_pages_per_seq * page_size", "length > plan max_seq_len",
    "block-table entry >= num_pages", "negative block-table entry", "negative length"};

START_TEST(device_validation)
{
    /* Three configs: BF16 with short lengths, FP8 with long ones
     * (splits), BF16 with 40 requests (the scheduler's block path; the
     * first two take its warp path); each through mla_decode and through
     * mla_schedule + mla_decode_scheduled. */
    const int scheduled = _i % 2, cfgi = _i / 2 / OOB_KINDS, kind = _i / 2 % OOB_KINDS;
    static struct kcase c;
    struct prob p;
    watchdog("device_validation", _i);
    arena_reset();
    rnd_start(4000 + (uint64_t)_i);
    memset(&c, 0, sizeof(c));
    c.h_q = 16;
    c.h_kv = 1;
    c.q_len = 2;
    c.causal = 1;
    c.mode = cfgi == 1 ? M_G64 : M_BF16;
    c.page = cfgi == 0 ? 16 : 64;
    c.batch = cfgi == 2 ? 40 : 3;
    const int32_t base[3][3] = {{10, 50, 90}, {1000, 2000, 5}, {1000, 2000, 5}};
    const int plan_max = cfgi == 0 ? 100 : 2048;
    memcpy(c.lens, base[cfgi % 3], sizeof(base[0]));
    for (int b = 3; b < c.batch; b++) /* the bad arguments are requests 0-2's */
        c.lens[b] = 1 + rnd_int(2000);
    snprintf(c.name, sizeof(c.name), "validation %s %s: %s", modes[c.mode].name,
             scheduled ? "scheduled" : "decode", oob_names[kind]);
    /* Pages per sequence: one more than the plan bound needs, so that a
     * length just past the bound is still covered by the block table. */
    int mpps = (plan_max + c.page - 1) / c.page + 1;
    build_problem(&p, &c, NULL, mpps);
    mla_plan_t *plan = gpu_plan(&p, plan_max);
    REQUIRE(plan, "plan");
    size_t ws_bytes = 0;
    devmem_ptr ws = gpu_workspace(plan, &ws_bytes);

    int32_t lens[MAX_BATCH];
    memcpy(lens, p.lens, (size_t)c.batch * sizeof(int32_t));
    int32_t *bt = halloc((size_t)c.batch * p.mpps * sizeof(int32_t));
    memcpy(bt, p.bt, (size_t)c.batch * p.mpps * sizeof(int32_t));
    int32_t mpps_call = p.mpps;
    switch (kind) {
    case OOB_LEN_PAGES: /* fewer pages per sequence than request 1 needs */
        mpps_call = (lens[1] - 1) / c.page;
        break;
    case OOB_LEN_PLAN: /* covered by the block table, but past the plan */
        lens[1] = plan_max + 1;
        break;
    case OOB_BT_HIGH: /* the last page request 1 uses */
        bt[1 * p.mpps + (lens[1] - 1) / c.page] = (int32_t)p.num_pages;
        break;
    case OOB_BT_NEG:
        bt[2 * p.mpps + 0] = -1;
        break;
    case OOB_LEN_NEG:
        lens[0] = -1;
        break;
    }
    REQUIRE(kind == OOB_LEN_PAGES || lens[1] <= mpps_call * c.page, "test setup");
    /* A smaller stride re-packs the block table: the first mpps_call
     * entries of each row. */
    int32_t *btc = halloc((size_t)c.batch * p.mpps * sizeof(int32_t));
    for (int b = 0; b < c.batch; b++)
        memcpy(btc + (size_t)b * mpps_call, bt + (size_t)b * p.mpps,
               (size_t)mpps_call * sizeof(int32_t));
    DM_OK(devmem_htod(p.d_bt, btc, (size_t)c.batch * mpps_call * sizeof(int32_t)));
    DM_OK(devmem_htod(p.d_lens, lens, (size_t)c.batch * sizeof(int32_t)));
    DM_OK(devmem_memset8(p.d_out, 0xff, p.out_elems * 2));
    DM_OK(devmem_memset8(p.d_lse, 0xff, p.lse_elems * 4));
    /* A workspace of garbage: the status word must not need zeroing. */
    DM_OK(devmem_memset8(ws, 0x5a, ws_bytes));
    DM_OK(devmem_sync());

    if (scheduled) {
        ST_OK(g_gpu, mla_schedule(plan, p.num_pages, DPTR(p.d_bt), mpps_call, DPTR(p.d_lens),
                                  DPTR(ws), ws_bytes, g_stream));
        ST_OK(g_gpu, mla_decode_scheduled(plan, DPTR(p.d_q), DPTR(p.d_kv),
                                          p.spr ? DPTR(p.d_sc) : NULL, p.num_pages,
                                          DPTR(p.d_bt), mpps_call, DPTR(p.d_out),
                                          DPTR(p.d_lse), DPTR(ws), ws_bytes, g_stream));
    } else {
        ST_OK(g_gpu, mla_decode(plan, DPTR(p.d_q), DPTR(p.d_kv), p.spr ? DPTR(p.d_sc) : NULL,
                                p.num_pages, DPTR(p.d_bt), mpps_call, DPTR(p.d_lens),
                                DPTR(p.d_out), DPTR(p.d_lse), DPTR(ws), ws_bytes, g_stream));
    }
    DM_OK(devmem_stream_sync(g_stream));
    mla_status_t dst = MLA_STATUS_INTERNAL_ERROR;
    ST_OK(g_gpu, mla_workspace_status(plan, DPTR(ws), &dst));
    uint16_t *gout = halloc(p.out_elems * 2);
    float *glse = halloc(p.lse_elems * 4);
    DM_OK(devmem_dtoh(gout, p.d_out, p.out_elems * 2));
    DM_OK(devmem_dtoh(glse, p.d_lse, p.lse_elems * 4));
    int out_clean = all_ff(gout, p.out_elems * 2), lse_clean = all_ff(glse, p.lse_elems * 4);
    printf("%-6s %s: device status %s, out %s, lse %s\n",
           dst == MLA_STATUS_OUT_OF_BOUNDS && out_clean && lse_clean ? "ok" : "FAIL", c.name,
           mla_status_string(dst), out_clean ? "untouched" : "WRITTEN",
           lse_clean ? "untouched" : "WRITTEN");

    /* The CPU backend refuses the same arguments directly. */
    mla_plan_t *cplan = NULL;
    ST_OK(g_cpu, mla_plan_create(&cplan, g_cpu, p.cfg, c.batch, plan_max));
    keep_plan(cplan);
    size_t cws_bytes = 0;
    ST_OK(g_cpu, mla_plan_workspace_size(cplan, &cws_bytes));
    void *cws = halloc(cws_bytes);
    uint16_t *cout = halloc(p.out_elems * 2);
    float *clse = halloc(p.lse_elems * 4);
    mla_status_t cst = scheduled ? mla_schedule(cplan, p.num_pages, btc, mpps_call, lens, cws,
                                                cws_bytes, NULL)
                                 : mla_decode(cplan, p.q, p.kv, p.sc, p.num_pages, btc,
                                              mpps_call, lens, cout, clse, cws, cws_bytes, NULL);

    REQUIRE(dst == MLA_STATUS_OUT_OF_BOUNDS, "%s: device status %s, want out of bounds", c.name,
            mla_status_string(dst));
    REQUIRE(out_clean && lse_clean, "%s: output written despite invalid arguments", c.name);
    REQUIRE(cst == MLA_STATUS_OUT_OF_BOUNDS, "%s: CPU backend returned %s", c.name,
            mla_status_string(cst));

    /* The same workspace then serves a valid call: the status is reset. */
    DM_OK(devmem_htod(p.d_bt, p.bt, (size_t)c.batch * p.mpps * sizeof(int32_t)));
    DM_OK(devmem_htod(p.d_lens, p.lens, (size_t)c.batch * sizeof(int32_t)));
    DM_OK(devmem_memset8(p.d_out, 0xff, p.out_elems * 2));
    DM_OK(devmem_memset8(p.d_lse, 0xff, p.lse_elems * 4));
    DM_OK(devmem_sync());
    ST_OK(g_gpu, prob_decode(plan, &p, ws, ws_bytes, g_stream));
    DM_OK(devmem_stream_sync(g_stream));
    ST_OK(g_gpu, mla_workspace_status(plan, DPTR(ws), &dst));
    REQUIRE(dst == MLA_STATUS_SUCCESS, "%s: status after a valid call: %s", c.name,
            mla_status_string(dst));
    DM_OK(devmem_dtoh(gout, p.d_out, p.out_elems * 2));
    DM_OK(devmem_dtoh(glse, p.d_lse, p.lse_elems * 4));
    char label[192];
    snprintf(label, sizeof(label), "%s, then valid", c.name);
    long fails = check_against_cpu(&p, p.lens, plan_max, gout, glse, label);
    arena_reset();
    REQUIRE(fails == 0, "%s: valid call after an invalid one: %ld mismatches", c.name, fails);
}
END_TEST

/* ------------------------------------------------------------------ */
/* Kernel choice */

/* A plan created with MLA_XPARAM_KERNEL set to kernel: its status must be
 * want. */
struct kernel_case {
    int kernel, h_q, mode, batch, max_len;
    mla_status_t want;
};

static void check_plan_kernel(const char *test, const struct kernel_case *k, int n, int h_kv)
{
    for (int i = 0; i < n; i++) {
        mla_config_t *cfg = make_cfg(k[i].h_q, h_kv, 1, &modes[k[i].mode], 64, 0, 0, 0, 0.0);
        mla_plan_t *plan = NULL;
        REQUIRE(mla_config_set_int(cfg, MLA_XPARAM_KERNEL, k[i].kernel) == MLA_STATUS_SUCCESS,
                "MLA_XPARAM_KERNEL = %d: %s", k[i].kernel, mla_config_last_error(cfg));
        const mla_status_t st = mla_plan_create(&plan, g_gpu, cfg, k[i].batch, k[i].max_len);
        mla_plan_destroy(plan);
        printf("%-6s %s kernel %d h%d/%d %s b%d s%d: %s\n", st == k[i].want ? "ok" : "FAIL", test,
               k[i].kernel, k[i].h_q, h_kv, modes[k[i].mode].name, k[i].batch, k[i].max_len,
               mla_status_string(st));
        REQUIRE(st == k[i].want, "kernel %d h%d/%d %s b%d s%d: %s, want %s", k[i].kernel,
                k[i].h_q, h_kv, modes[k[i].mode].name, k[i].batch, k[i].max_len,
                mla_status_string(st), mla_status_string(k[i].want));
        REQUIRE(plan == NULL || st == MLA_STATUS_SUCCESS, "a refused plan was returned");
        arena_reset(); /* frees the config: a table may list more than 8 */
    }
}

/* MLA_XKERNEL_HOPPER_NARROW: plans the narrow kernel takes succeed (FP8 at
 * a batch the default choice gives the wide kernel), more than 16 rows per
 * KV head (BF16) or 32 (FP8) are refused with NOT_SUPPORTED; the wide
 * family takes BF16 only, hopper-wide8 FP8 only. */
START_TEST(kernel_choice)
{
    if (!g_hopper) {
        printf("skip   kernel_choice: no sm_90a kernel on this device\n");
        return;
    }
    enum {
        NARROW = MLA_XKERNEL_HOPPER_NARROW,
        WIDE = MLA_XKERNEL_HOPPER_WIDE,
        WIDE8 = MLA_XKERNEL_HOPPER_WIDE8
    };
    static const struct kernel_case k[] = {
        {NARROW, 16, M_G128, 2, 4096, MLA_STATUS_SUCCESS},
        {NARROW, 16, M_DSMLA, 2, 4096, MLA_STATUS_SUCCESS},
        {NARROW, 32, M_BF16, 2, 4096, MLA_STATUS_NOT_SUPPORTED},
        {NARROW, 32, M_G128, 2, 4096, MLA_STATUS_SUCCESS},
        {NARROW, 64, M_DSMLA, 2, 4096, MLA_STATUS_NOT_SUPPORTED},
        {NARROW, 128, M_E4M3, 2, 4096, MLA_STATUS_NOT_SUPPORTED},
        {WIDE, 128, M_BF16, 64, 4096, MLA_STATUS_SUCCESS},
        {WIDE, 128, M_G128, 64, 4096, MLA_STATUS_NOT_SUPPORTED},
        {WIDE, 16, M_DSMLA, 2, 4096, MLA_STATUS_NOT_SUPPORTED},
        {WIDE8, 128, M_G128, 64, 4096, MLA_STATUS_SUCCESS},
        {WIDE8, 16, M_DSMLA, 2, 4096, MLA_STATUS_SUCCESS},
        {WIDE8, 64, M_E4M3, 64, 4096, MLA_STATUS_SUCCESS},
        {WIDE8, 128, M_BF16, 64, 4096, MLA_STATUS_NOT_SUPPORTED},
    };
    check_plan_kernel("kernel_choice", k, (int)(sizeof(k) / sizeof(k[0])), 1);
    /* Two KV heads, 16 rows each: every narrow kernel takes them (FP8 with
     * one copy per row). */
    static const struct kernel_case k2[] = {
        {NARROW, 32, M_E4M3, 2, 4096, MLA_STATUS_SUCCESS},
        {NARROW, 32, M_DSMLA, 2, 4096, MLA_STATUS_SUCCESS},
        {NARROW, 32, M_BF16, 2, 4096, MLA_STATUS_SUCCESS},
        {MLA_XKERNEL_HOPPER, 32, M_E4M3, 64, 4096, MLA_STATUS_SUCCESS},
        {MLA_XKERNEL_HOPPER, 32, M_DSMLA, 64, 4096, MLA_STATUS_SUCCESS},
    };
    check_plan_kernel("kernel_choice", k2, (int)(sizeof(k2) / sizeof(k2[0])), 2);
    /* The block_n and stages hints never turn the sm_90a kernel off, even
     * values the portable kernel cannot run. */
    static const int hints[][2] = {{32, 4}, {64, 1}, {64, 4}};
    for (int i = 0; i < 3; i++) {
        mla_config_t *cfg =
            make_cfg(64, 1, 1, &modes[M_E4M3], 64, 0, hints[i][0], hints[i][1], 0.0);
        mla_plan_t *plan = NULL;
        REQUIRE(mla_config_set_int(cfg, MLA_XPARAM_KERNEL, MLA_XKERNEL_HOPPER) == 0, "kernel");
        const mla_status_t st = mla_plan_create(&plan, g_gpu, cfg, 2, 4096);
        mla_plan_destroy(plan);
        REQUIRE(st == MLA_STATUS_SUCCESS, "hints block_n %d stages %d: %s", hints[i][0],
                hints[i][1], mla_context_last_error(g_gpu));
        arena_reset();
    }
}
END_TEST

void add_validation_cases(Suite *s)
{
    TCase *tc = tcase_create("validation");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, device_validation, 0, g_quick ? 2 * OOB_KINDS : 6 * OOB_KINDS);
    suite_add_tcase(s, tc);

    tc = tcase_create("kernel choice");
    tcase_add_test(tc, kernel_choice);
    suite_add_tcase(s, tc);
}
