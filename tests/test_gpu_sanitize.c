/* test_gpu_sanitize.c - the decode shapes run under compute-sanitizer,
 * each decoded several times on a workspace left dirty, every call after
 * the first reproducing it bit for bit.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/devmem.h"
#include "gpu_harness.h"
#include "mla.h"
#include "mla_params.h"
#include "rng.h"

/* ------------------------------------------------------------------ */
/* Sanitizer shapes: decode shapes for compute-sanitizer (memcheck,
 * racecheck, synccheck), beside the quick subset: pages 1 and 1024, odd
 * head counts, every format, q_len > 1, zero-length requests, the
 * scheduler alone (up to 16 requests) and with its block-table CTAs
 * (more), each call on a workspace left dirty.  Every shape is decoded
 * g_san_calls times on the same workspace: first after filling it with
 * random bytes (checked against the CPU reference), then on what the
 * previous call left, then after filling every word with 1 (a plausible
 * split count), and so on; every call after the first must reproduce the
 * first bit for bit (the kernels are deterministic, so a difference is a
 * race or a read of stale workspace).  MLA_TEST_SANITIZE=N runs only
 * these, N calls a shape (at least 3); the full run includes them. */

#define MAX_SAN 16
static struct kcase g_san[MAX_SAN];
static int g_nsan;

static struct kcase *san_case(const char *what, int h_q, int h_kv, int q_len, int mode, int page,
                              int causal, int batch, const int32_t *lens, const char *kernel)
{
    if (g_nsan >= MAX_SAN) {
        fprintf(stderr, "test_gpu: too many sanitizer shapes\n");
        exit(99);
    }
    struct kcase *c = &g_san[g_nsan];
    kcase_shape(c, h_q, h_kv, q_len, mode, page, causal, batch, lens);
    int32_t mx = 0;
    for (int i = 0; i < batch; i++)
        mx = lens[i] > mx ? lens[i] : mx;
    c->null_stream = g_nsan % 3 == 2;
    /* A kernel is required only where the sm_90a kernels exist;
     * elsewhere the shape runs on the portable kernel. */
    c->kernel = g_hopper ? kernel : NULL;
    snprintf(c->name, sizeof(c->name), "san#%d %s h%d/%d n%d%s P%d b%d maxlen %d%s%s: %s", g_nsan,
             modes[mode].name, h_q, h_kv, q_len, causal ? " causal" : "", page, batch, (int)mx,
             c->kernel ? " kernel=" : "", c->kernel ? c->kernel : "", what);
    g_nsan++;
    return c;
}

void build_san_cases(void)
{
    /* BF16 narrow, pages of 1024, half the requests empty (synccheck: the
     * consumer warpgroups' barriers). */
    static const int32_t l3000[6] = {3001, 0, 2944, 0, 3071, 0};
    /* E4M3 wide8, causal MTP (its P slots under racecheck). */
    static const int32_t l700[6] = {700, 0, 655, 1, 0, 731};
    static const int32_t mixa[6] = {513, 0, 1000, 64, 65, 1};
    static const int32_t page1[6] = {0, 1, 2, 5, 300, 77};
    static const int32_t mixb[6] = {0, 129, 700, 0, 64, 1100};
    static const int32_t odd[6] = {0, 1, 17, 255, 0, 1000};
    static const int32_t mixc[6] = {0, 63, 64, 65, 700, 0};
    static const int32_t p1024[6] = {0, 1025, 3000, 0, 1, 2048};
    static const int32_t l8[8] = {1500, 0, 1100, 0, 1, 0, 64, 700};
    int32_t small[MAX_BATCH];

    san_case("narrow BF16, pages of 1024", 16, 1, 1, M_BF16, 1024, 0, 6, l3000, "hopper");
    san_case("E4M3 /128 wide8, MTP", 128, 1, 2, M_G128, 64, 1, 6, l700, "hopper");
    san_case("E4M3 /32 wide8", 128, 1, 1, M_G32, 128, 0, 6, mixa, "hopper");
    san_case("DS_MLA, pages of 1", 16, 1, 4, M_DSMLA, 1, 1, 6, page1, NULL);
    san_case("DS_MLA wide8", 128, 1, 1, M_DSMLA, 128, 0, 6, mixb, "hopper");
    san_case("DS_MLA wide8, MTP", 128, 1, 2, M_DSMLA, 64, 1, 6, l700, "hopper-wide8");
    san_case("BF16, 63 heads a KV head", 126, 2, 3, M_BF16, 16, 1, 6, odd, NULL);
    san_case("E4M3 wide8, 63 heads a KV head", 126, 2, 2, M_E4M3, 64, 0, 6, mixc, "hopper");
    san_case("BF16 wide, 63 heads a KV head", 126, 2, 2, M_BF16, 128, 1, 6, mixb, "hopper");
    san_case("E4M3 narrow, 3 KV heads", 9, 3, 4, M_E4M3, 1024, 1, 6, p1024, "hopper");
    san_case("DS_MLA narrow, two M tiles", 16, 1, 2, M_DSMLA, 1024, 1, 8, l8, "hopper");
    /* The wide FP8 kernel converting in registers: its P slots' protocol
     * at odd and even tile counts, MTP with causal, empty requests. */
    san_case("E4M3 wide8, MTP", 64, 1, 2, M_E4M3, 64, 1, 6, mixc, "hopper-wide8");
    san_case("DS_MLA wide8, 128 heads", 128, 1, 1, M_DSMLA, 128, 0, 6, l700, "hopper-wide8");
    san_case("E4M3 /64 wide8, MTP", 64, 1, 4, M_G64, 64, 1, 6, mixa, "hopper-wide8");
    /* Many CTAs of short requests, the scheduler with its block-table CTAs. */
    rnd_start(4000);
    for (int i = 0; i < 40; i++)
        small[i] = i % 5 == 0 ? 0 : 1 + rnd_int(300);
    san_case("E4M3 /128 wide8, 40 short requests", 128, 1, 2, M_G128, 64, 1, 40, small, "hopper");
    for (int i = 0; i < 48; i++)
        small[i] = i % 4 == 1 ? 0 : 1 + rnd_int(400);
    san_case("narrow BF16, 48 short requests", 16, 1, 1, M_BF16, 64, 0, 48, small, "hopper");
}

/* Fill the workspace (junk: a host buffer of its size): kind 0 random
 * bytes, 1 nothing (what the last call left), 2 every 32-bit word 1. */
static void san_dirty(devmem_ptr ws, uint32_t *junk, size_t bytes, int kind)
{
    if (kind == 1)
        return;
    for (size_t i = 0; i < bytes / 4; i++)
        junk[i] = kind == 0 ? (uint32_t)rnd_u64() : 1u;
    DM_OK(devmem_htod(ws, junk, bytes / 4 * 4));
}

START_TEST(sanitize_shapes)
{
    const struct kcase *c = &g_san[_i];
    struct prob p;
    watchdog(c->name, -1);
    arena_reset();
    rnd_start(5000 + (uint64_t)_i);
    double t0 = now_s();
    build_problem(&p, c, NULL, 0);
    const int max_seq_len = p.max_len > 0 ? p.max_len : 1;
    mla_plan_t *plan = gpu_plan(&p, max_seq_len);
    REQUIRE(plan != NULL, "%s: no plan", c->name);
    size_t ws_bytes = 0;
    devmem_ptr ws = gpu_workspace(plan, &ws_bytes);
    devmem_stream s = c->null_stream ? NULL : g_stream;
    uint16_t *gout = halloc(p.out_elems * 2), *first = halloc(p.out_elems * 2);
    float *glse = halloc(p.lse_elems * 4), *first_lse = halloc(p.lse_elems * 4);
    uint32_t *junk = halloc(ws_bytes);
    long fails = 0;
    for (int call = 0; call < g_san_calls; call++) {
        san_dirty(ws, junk, ws_bytes, call % 3);
        DM_OK(devmem_memset8(p.d_out, 0xff, p.out_elems * 2));
        DM_OK(devmem_memset8(p.d_lse, 0xff, p.lse_elems * 4));
        DM_OK(devmem_sync());
        ST_OK(g_gpu, prob_decode(plan, &p, ws, ws_bytes, s));
        DM_OK(devmem_stream_sync(s));
        mla_status_t dst = MLA_STATUS_INTERNAL_ERROR;
        ST_OK(g_gpu, mla_workspace_status(plan, DPTR(ws), &dst));
        REQUIRE(dst == MLA_STATUS_SUCCESS, "%s: call %d: device status %s", c->name, call,
                mla_status_string(dst));
        DM_OK(devmem_dtoh(gout, p.d_out, p.out_elems * 2));
        DM_OK(devmem_dtoh(glse, p.d_lse, p.lse_elems * 4));
        if (call == 0) {
            fails += check_against_cpu(&p, p.lens, max_seq_len, gout, glse, c->name);
            memcpy(first, gout, p.out_elems * 2);
            memcpy(first_lse, glse, p.lse_elems * 4);
            continue;
        }
        size_t nd = 0, at = 0;
        for (size_t i = 0; i < p.out_elems; i++)
            if (gout[i] != first[i] && nd++ == 0)
                at = i;
        size_t nl = 0;
        for (size_t i = 0; i < p.lse_elems; i++)
            nl += memcmp(&glse[i], &first_lse[i], 4) != 0;
        if (nd || nl) {
            printf("FAIL   %s: call %d (workspace %s) differs from call 0: %zu outputs (first: "
                   "request %zu, token %zu, head %zu, dim %zu), %zu LSE\n",
                   c->name, call, call % 3 == 1 ? "as left" : "refilled", nd,
                   at / ((size_t)c->q_len * c->h_q * MLA_D_V),
                   at / ((size_t)c->h_q * MLA_D_V) % (size_t)c->q_len,
                   at / MLA_D_V % (size_t)c->h_q, at % MLA_D_V, nl);
            fails++;
        }
    }
    printf("       (%.2f s, %d calls, workspace %zu bytes)\n", now_s() - t0, g_san_calls,
           ws_bytes);
    fflush(stdout);
    arena_reset();
    REQUIRE(fails == 0, "%s: %ld failures (see log)", c->name, fails);
}
END_TEST

void add_sanitize_cases(Suite *s)
{
    TCase *tc = tcase_create("sanitize");
    tcase_set_timeout(tc, 3600);
    tcase_add_loop_test(tc, sanitize_shapes, 0, g_nsan);
    suite_add_tcase(s, tc);
}
