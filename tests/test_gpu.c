/*
 * test_gpu.c - the CUDA backend against the CPU backend: decode over a grid
 * of shapes, formats and lengths, CUDA-graph replay with changed lengths,
 * device-side validation, and byte-exact KV append.
 *
 * Exits 77 (skip) when no usable GPU, driver or kernel image is present.
 * Runs without fork (CUDA does not survive fork after initialization).
 * Inputs are fresh each run: the seed is printed, MLA_TEST_SEED replays
 * one.  MLA_TEST_QUICK=1 runs a small subset, MLA_TEST_SANITIZE=N only the
 * sanitizer shapes, N calls each (both for compute-sanitizer).
 *
 * SPDX-License-Identifier: MIT
 */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, sigaction */
#include <check.h>
#include <inttypes.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../tools/devmem.h"
#include "fp8_codec.h"
#include "mla.h"
#include "mla_experimental.h"
#include "rng.h"

/* ------------------------------------------------------------------ */
/* Globals, random numbers, bookkeeping */

static mla_context_t *g_gpu, *g_cpu;
static devmem_stream g_stream;
static int g_quick;
static int g_hopper; /* sm_90 device and an sm_90a build: the wgmma kernel exists */
static uint16_t rnd_bf16(double sigma)
{
    return mla_float_to_bf16((float)(rnd_gauss() * sigma));
}

/* Decode inputs as FlashMLA's conformance suite draws them (randn / 10,
 * clamped to [-1, 1]), the data its tolerances were set for: the kernels
 * round P to bf16 before P.V as FlashMLA does, and with much wider inputs
 * (sigma 0.25, short rows) a few elements per million exceed the 8e-4
 * absolute bound. */
static uint16_t rnd_input(void)
{
    return mla_float_to_bf16((float)fmin(1.0, fmax(-1.0, rnd_gauss() / 10.0)));
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Watchdog: check enforces no timeouts without fork, and a kernel that
 * never finishes would hang the stream synchronization; name the test
 * and exit instead.  MLA_TEST_WATCHDOG = seconds per test (0: off). */
static unsigned g_watchdog_s = 300;
static char g_running[160];

static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "\ntest_gpu: WATCHDOG: no progress, giving up in: ";
    ssize_t r = write(2, msg, sizeof(msg) - 1);
    r = write(2, g_running, strlen(g_running));
    r = write(2, "\n", 1);
    (void)r;
    _exit(124);
}

/* Installed per test: srunner_run_all() sets its own SIGALRM handler
 * (meant for fork mode) while the suite runs. */
static void watchdog(const char *what, int index)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_alarm;
    sigaction(SIGALRM, &sa, NULL);
    if (index >= 0)
        snprintf(g_running, sizeof(g_running), "%s #%d", what, index);
    else
        snprintf(g_running, sizeof(g_running), "%s", what);
    alarm(g_watchdog_s);
}

/* Host and device allocations of the running test, freed at its start and
 * end, so a failed test (which leaves through a longjmp in no-fork mode)
 * does not leak into the next one. */
#define MAX_ALLOCS 64
static void *g_host[MAX_ALLOCS];
static devmem_ptr g_dev[MAX_ALLOCS];
static mla_plan_t *g_plans[8];
static mla_config_t *g_cfgs[8];

static void arena_reset(void)
{
    for (int i = 0; i < MAX_ALLOCS; i++) {
        free(g_host[i]);
        g_host[i] = NULL;
        devmem_free(g_dev[i]);
        g_dev[i] = 0;
    }
    for (int i = 0; i < 8; i++) {
        mla_plan_destroy(g_plans[i]);
        g_plans[i] = NULL;
        mla_config_destroy(g_cfgs[i]);
        g_cfgs[i] = NULL;
    }
}

static void *halloc(size_t bytes)
{
    size_t n = (bytes + 255) / 256 * 256;
    void *p = aligned_alloc(256, n ? n : 256);
    ck_assert_msg(p != NULL, "out of host memory (%zu bytes)", bytes);
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (!g_host[i]) {
            g_host[i] = p;
            return p;
        }
    ck_abort_msg("too many host allocations");
    return NULL;
}

static devmem_ptr dalloc(size_t bytes)
{
    devmem_ptr p = 0;
    ck_assert_msg(devmem_alloc(&p, bytes) == 0, "device allocation of %zu bytes: %s", bytes,
                  devmem_last_error());
    for (int i = 0; i < MAX_ALLOCS; i++)
        if (!g_dev[i]) {
            g_dev[i] = p;
            return p;
        }
    ck_abort_msg("too many device allocations");
    return 0;
}

static void keep_plan(mla_plan_t *p)
{
    for (int i = 0; i < 8; i++)
        if (!g_plans[i]) {
            g_plans[i] = p;
            return;
        }
    ck_abort_msg("too many plans");
}

static void keep_cfg(mla_config_t *c)
{
    for (int i = 0; i < 8; i++)
        if (!g_cfgs[i]) {
            g_cfgs[i] = c;
            return;
        }
    ck_abort_msg("too many configs");
}

#define DPTR(d) ((void *)(uintptr_t)(d))

/* ck_assert* is slow per element; test, then abort with a message. */
#define REQUIRE(cond, ...)             \
    do {                               \
        if (!(cond))                   \
            ck_abort_msg(__VA_ARGS__); \
    } while (0)

#define ST_OK(ctx, call)                                                                   \
    do {                                                                                   \
        mla_status_t st_ = (call);                                                         \
        REQUIRE(st_ == MLA_STATUS_SUCCESS, "%s -> %s: %s", #call, mla_status_string(st_),  \
                mla_context_last_error(ctx));                                              \
    } while (0)

#define DM_OK(call) REQUIRE((call) == 0, "%s: %s", #call, devmem_last_error())

/* ------------------------------------------------------------------ */
/* Cases */

struct fmode {
    const char *name;
    int fmt, g;
    double ks;
};

static const struct fmode modes[] = {
    {"bf16", MLA_KV_BF16, 0, 1.0},
    {"e4m3", MLA_KV_FP8_E4M3, 0, 0.0125},
    {"e4m3-g32", MLA_KV_FP8_E4M3, 32, 1.0},
    {"e4m3-g64", MLA_KV_FP8_E4M3, 64, 0.5},
    {"e4m3-g128", MLA_KV_FP8_E4M3, 128, 2.0},
    {"dsmla", MLA_KV_FP8_DS_MLA, 0, 1.0},
};
#define NMODES ((int)(sizeof(modes) / sizeof(modes[0])))
enum { M_BF16, M_E4M3, M_G32, M_G64, M_G128, M_DSMLA };

#define MAX_BATCH 64

struct kcase {
    char name[128];
    int h_q, h_kv, q_len, mode, page, causal, block_n, stages;
    int batch;
    int32_t lens[MAX_BATCH];
    int max_seq_len;       /* plan bound; 0 = the longest length */
    int sample;            /* requests checked on the CPU; 0 = all */
    int no_lse;
    double softmax_scale;  /* 0 = default */
    double q_scale;        /* Q values times this (0 = 1) */
    double kv_mul;         /* latent values times this (0 = 1) ... */
    double kv_tail_mul;    /* ... and from half of each length on, times this too */
    int null_stream;       /* decode on the legacy stream */
    const char *kernel;    /* MLA_XPARAM_KERNEL of the plan, by name; NULL = auto */
    /* With may_nan: request may_nan_req's last key holds NaN in V dim
     * may_nan_dim, and the causal rows that do not see it may have NaN
     * there where the reference is finite (mla.h: kernel-dependent). */
    int may_nan, may_nan_req, may_nan_dim;
};

#define MAX_CASES 320
static struct kcase g_cases[MAX_CASES];
static int g_ncases;

static struct kcase *add_case(int h_q, int h_kv, int q_len, int mode, int page, int causal,
                              int batch, const int32_t *lens)
{
    if (g_ncases >= MAX_CASES) {
        fprintf(stderr, "test_gpu: too many cases\n");
        exit(99);
    }
    struct kcase *c = &g_cases[g_ncases++];
    memset(c, 0, sizeof(*c));
    c->h_q = h_q;
    c->h_kv = h_kv;
    c->q_len = q_len;
    c->mode = mode;
    c->page = page;
    c->causal = causal;
    c->batch = batch;
    for (int i = 0; i < batch; i++)
        c->lens[i] = lens ? lens[i] : 0;
    c->null_stream = (g_ncases % 3) == 0;
    return c;
}

/* Cases with block_n or stages hints run the portable kernel, the only
 * one the hints steer; then each case gets its name. */
static void finish_cases(void)
{
    for (int i = 0; i < g_ncases; i++) {
        struct kcase *c = &g_cases[i];
        if ((c->block_n || c->stages) && !c->kernel)
            c->kernel = "portable";
        int32_t mx = 0;
        for (int b = 0; b < c->batch; b++)
            mx = c->lens[b] > mx ? c->lens[b] : mx;
        snprintf(c->name, sizeof(c->name),
                 "#%d %s h%d/%d n%d%s P%d b%d maxlen %d bn%d%s%s%s%s%s%s%s%s", i,
                 modes[c->mode].name, c->h_q, c->h_kv, c->q_len, c->causal ? " causal" : "",
                 c->page, c->batch, (int)mx, c->block_n, c->stages ? " stages" : "",
                 c->no_lse ? " nolse" : "", c->softmax_scale > 0 ? " sscale" : "",
                 c->q_scale > 0 ? " qscale" : "", c->kv_mul > 0 ? " kvmul" : "",
                 c->null_stream ? " nullstream" : "", c->kernel ? " kernel=" : "",
                 c->kernel ? c->kernel : "");
    }
}

static const int32_t lens_mix7[7] = {0, 1, 20, 63, 64, 65, 140};

static void build_cases(void)
{
    static const int32_t two[2] = {65, 140};
    static const int32_t short7[7] = {0, 1, 2, 3, 4, 5, 64};
    static const int32_t ones[1] = {4096};
    struct kcase *c;
    int32_t lens[MAX_BATCH];

    rnd_start(1000);
    if (g_quick) {
        c = add_case(16, 1, 2, M_BF16, 64, 1, 7, lens_mix7);
        c->block_n = 64;
        c = add_case(32, 2, 1, M_G64, 16, 0, 2, two);
        c = add_case(16, 1, 4, M_DSMLA, 64, 1, 7, lens_mix7);
        c->block_n = 32;
        c = add_case(64, 1, 1, M_E4M3, 1, 0, 7, lens_mix7);
        if (g_hopper) {
            c = add_case(64, 1, 1, M_G64, 64, 0, 7, lens_mix7);
            c->kernel = "hopper";
            c = add_case(128, 1, 2, M_DSMLA, 128, 1, 7, lens_mix7);
            c->kernel = "hopper";
            c = add_case(16, 1, 1, M_BF16, 64, 0, 1, ones);
            c->kernel = "hopper";
            c = add_case(16, 1, 1, M_G64, 64, 0, 7, lens_mix7);
            c->kernel = "hopper-narrow";
            c = add_case(8, 1, 2, M_DSMLA, 128, 1, 7, lens_mix7);
            c->kernel = "hopper-narrow";
            c = add_case(32, 2, 1, M_DSMLA, 64, 0, 7, lens_mix7);
            c->kernel = "hopper-narrow";
            c = add_case(16, 1, 1, M_G128, 64, 0, 7, lens_mix7);
            c->kernel = "hopper-narrow";
            c = add_case(16, 1, 1, M_E4M3, 64, 0, 7, lens_mix7);
            c->kernel = "hopper-narrow";
            c = add_case(128, 1, 1, M_E4M3, 64, 0, 7, lens_mix7);
            c->kernel = "hopper-wide8";
            c = add_case(64, 1, 2, M_DSMLA, 64, 1, 7, lens_mix7);
            c->kernel = "hopper-wide8";
            c = add_case(128, 1, 1, M_G128, 64, 0, 7, lens_mix7);
            c->kernel = "hopper-wide8";
        }
        /* The scheduler's warp path at its 32 requests, its block path at 33. */
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < 32 + k; i++)
                lens[i] = i % 5 == 2 ? 0 : 1 + rnd_int(400);
            add_case(16, 1, 1, M_BF16, 64, 0, 32 + k, lens);
        }
        /* The scheduler's warp path at its 32 requests, its block path at 33. */
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < 32 + k; i++)
                lens[i] = i % 5 == 2 ? 0 : 1 + rnd_int(400);
            add_case(16, 1, 1, M_BF16, 64, 0, 32 + k, lens);
        }
        finish_cases();
        return;
    }

    /* Formats x scale blocks x block_n. */
    for (int m = 0; m < NMODES; m++)
        for (int bn = 32; bn <= 64; bn += 32) {
            c = add_case(16, 1, 2, m, 64, 1, 7, lens_mix7);
            c->block_n = bn;
        }

    /* Heads x KV heads. */
    static const int hp[][2] = {{1, 1},  {3, 1},  {3, 3},   {16, 1},  {16, 4}, {32, 1},
                                {32, 2}, {64, 1}, {64, 8},  {128, 1}, {128, 2}};
    for (int i = 0; i < (int)(sizeof(hp) / sizeof(hp[0])); i++)
        add_case(hp[i][0], hp[i][1], 1 + (i % 3 == 2 ? 3 : i % 3), i % NMODES, 16, i % 2, 2, two);

    /* Causal x q_len, with lengths shorter than q_len (rows that see no key). */
    for (int n = 1; n <= 4; n *= 2)
        for (int causal = 0; causal <= 1; causal++)
            add_case(32, 1, n, (n + causal) % NMODES, 16, causal, 7, short7);

    /* Page size x lengths around page boundaries. */
    static const int pages[4] = {1, 16, 64, 128};
    for (int pi = 0; pi < 4; pi++) {
        int P = pages[pi], k = 0;
        const int32_t cand[] = {0, 1, 20, 63, 64, 65, 140, P - 1, P, P + 1, 2 * P - 1, 2 * P,
                                2 * P + 1};
        for (int i = 0; i < (int)(sizeof(cand) / sizeof(cand[0])); i++) {
            int dup = cand[i] < 0;
            for (int j = 0; j < k && !dup; j++)
                dup = lens[j] == cand[i];
            if (!dup)
                lens[k++] = cand[i];
        }
        add_case(16, 1, 1, M_BF16, P, 0, k, lens);
        add_case(16, 1, 2, pi % 2 ? M_G128 : M_DSMLA, P, 1, k, lens);
        add_case(128, 1, 1, pi % 2 ? M_E4M3 : M_G32, P, 0, k, lens);
    }

    /* Batch sizes, long sequences (checked on a sample of requests). */
    add_case(128, 1, 1, M_BF16, 64, 0, 1, ones);
    lens[0] = 4096;
    lens[1] = 3000;
    add_case(64, 1, 2, M_G128, 128, 1, 2, lens);
    for (int i = 0; i < 64; i++)
        lens[i] = i == 0 ? 4096 : rnd_int(4097);
    c = add_case(16, 1, 1, M_BF16, 64, 0, 64, lens);
    c->sample = 6;
    for (int i = 0; i < 64; i++)
        lens[i] = 1 + rnd_int(300);
    c = add_case(128, 1, 4, M_DSMLA, 16, 1, 64, lens);
    c->sample = 4;
    for (int i = 0; i < 64; i++)
        lens[i] = 4096;
    c = add_case(16, 1, 1, M_E4M3, 64, 0, 64, lens);
    c->sample = 3;
    for (int i = 0; i < 7; i++)
        lens[i] = rnd_int(1500);
    add_case(32, 2, 2, M_G64, 64, 1, 7, lens);

    /* Mixes of a few long and many short requests, which the balanced
     * schedule cuts across: 4 of 6000-9000 tokens among 60 of 1-300. */
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 64; i++)
            lens[i] = i % 16 == 0 ? 6000 + rnd_int(3000) : 1 + rnd_int(300);
        static const int mm[4] = {M_BF16, M_G128, M_DSMLA, M_BF16};
        c = add_case(k % 2 ? 128 : 16, 1, 1 + (k == 3), mm[k], 64, k == 3, 64, lens);
        c->sample = 6;
    }

    /* The scheduler's warp path (up to 32 requests) and block path on
     * both sides of the boundary: empty, short and long requests. */
    for (int k = 0; k < 3; k++) {
        const int nb = 31 + k;
        for (int i = 0; i < nb; i++)
            lens[i] = i % 7 == 3 ? 0 : i % 8 == 0 ? 3000 + rnd_int(3000) : 1 + rnd_int(700);
        c = add_case(k == 1 ? 128 : 16, 1, 1 + (k == 2), k == 1 ? M_G128 : M_BF16, 64, k == 2, nb,
                     lens);
        c->sample = 3;
    }

    /* Length 4096 in every format. */
    for (int m = 0; m < NMODES; m++)
        add_case(16, 1, 1, m, 64, 0, 1, ones);
    add_case(128, 1, 4, M_G64, 64, 1, 1, ones);

    /* The sm_90a kernel, required (MLA_XKERNEL_HOPPER: a shape it does not
     * take fails instead of falling back), and every third case again on
     * the portable kernel at the same page size. */
    if (g_hopper) {
        static const int hh[][2] = {{1, 1}, {3, 1}, {16, 1}, {16, 4}, {32, 2}, {64, 1},
                                    {64, 8}, {128, 1}, {128, 2}};
        int k = 0;
        for (int i = 0; i < (int)(sizeof(hh) / sizeof(hh[0])); i++)
            for (int n = 1; n <= 4; n *= 2) {
                int m = k % NMODES;
                if (hh[i][1] > 1 && (m == M_G32 || m == M_G64 || m == M_G128))
                    m = M_E4M3; /* block scales with h_kv > 1: portable only */
                c = add_case(hh[i][0], hh[i][1], n, m, 64 << (k % 3), k % 2, 7, lens_mix7);
                c->kernel = k % 3 == 2 ? "portable" : "hopper";
                k++;
            }
        static const int hpages[3] = {64, 128, 256};
        for (int pi = 0; pi < 3; pi++) {
            const int P = hpages[pi];
            const int32_t pl[7] = {P - 1, P, P + 1, 2 * P - 1, 2 * P + 1, 3 * P + 5, 1};
            for (int m = 0; m < NMODES; m++) {
                c = add_case(m % 2 ? 128 : 16, 1, 1 + (m % 3 == 1), m, P, m % 3 == 1, 7, pl);
                c->kernel = "hopper";
            }
        }
        for (int m = 0; m < NMODES; m++) {
            c = add_case(128, 1, 1, m, 64, 0, 1, ones); /* one request, many splits */
            c->kernel = "hopper";
            c = add_case(16, 1, 1, m, 64, 0, 1, ones); /* the same, narrow */
            c->kernel = "hopper-narrow";
        }
        /* The wide kernels on shapes the narrow one takes by default. */
        for (int m = 0; m < NMODES; m++) {
            c = add_case(m % 2 ? 8 : 16, 1, m % 2 ? 2 : 1, m, 64 << (m % 2), m % 2, 7, lens_mix7);
            c->kernel = m == M_BF16 ? "hopper-wide" : "hopper-wide8";
        }
        for (int m = 0; m < NMODES; m += 2) {
            for (int i = 0; i < 64; i++)
                lens[i] = 1 + rnd_int(3000);
            c = add_case(m ? 64 : 16, 1, 1 + (m == 4), m, 64, m == 4, 64, lens);
            c->kernel = "hopper";
            c->sample = 5;
        }
        /* The narrow FP8 kernels over many tiles per CTA, in every FP8
         * format (one warpgroup per tile, five or four stages in flight). */
        for (int m = 0; m < NMODES; m++) {
            if (m == M_BF16)
                continue;
            for (int i = 0; i < 64; i++)
                lens[i] = 2048 + rnd_int(6000);
            c = add_case(16, 1, 1, m, 64 << (m % 2), 0, 64, lens);
            c->kernel = "hopper-narrow";
            c->sample = 3;
        }
        /* The narrow FP8 kernels with more KV heads: a tile's rows are
         * h_kv rows apart, one copy each. */
        static const int nk[][3] = {
            {32, 2, M_DSMLA}, {32, 4, M_E4M3}, {64, 4, M_DSMLA}, {16, 2, M_E4M3}};
        for (int i = 0; i < 4; i++) {
            c = add_case(nk[i][0], nk[i][1], 1 + i % 2, nk[i][2], 64 << (i % 2), i % 2, 7,
                         lens_mix7);
            c->kernel = "hopper-narrow";
        }
        c = add_case(16, 1, 1, M_G32, 64, 0, 7, lens_mix7);
        c->kernel = "hopper";
        c->no_lse = 1;
        c->softmax_scale = 0.05;
        /* Q far outside f16's range, both ways (the narrow FP8 kernels
         * take the scores in f16, Q scaled by a power of two), with the
         * softmax scale keeping the scores of order one. */
        for (int m = 0; m < NMODES; m++) {
            if (m == M_BF16)
                continue;
            c = add_case(16, 1, 1, m, 64, 0, 7, lens_mix7);
            c->kernel = "hopper-narrow";
            c->q_scale = m % 2 ? 1e6 : 1e-6;
            c->softmax_scale = m % 2 ? 1e-6 : 1e6;
        }
        /* The narrow FP8 kernels' unscaled V (bf16 times 2^-120 against
         * P times 2^120): e4m3 subnormals throughout (tiny values, no
         * block scales), and 128-dim block scales of about 78 in the first
         * half of each request and 3 or 1000 times that in the second,
         * past the 2^7 at which O^T's unit rises (a tile may hold both). */
        static const int32_t lens_long8[8] = {700, 1500, 2048, 64, 130, 2500, 333, 1024};
        c = add_case(16, 1, 1, M_E4M3, 64, 0, 8, lens_long8);
        c->kernel = "hopper-narrow";
        c->kv_mul = 1e-3;
        for (int m = M_G128; m <= M_DSMLA; m++)
            for (int big = 0; big < 2; big++) {
                c = add_case(16, 1, 1, m, 64, 0, 8, lens_long8);
                c->kernel = "hopper-narrow";
                c->kv_mul = 1e5;
                c->kv_tail_mul = big ? 1000 : 3;
                c->softmax_scale = k ? 1e-7 : 2e-5;
            }
        /* Two 16-row M tiles of the narrow FP8 kernels (E4M3 without block
         * scales or with 128-dim ones takes them by default from 16
         * sequences): two MTP tokens at 16 heads (causal), 32 heads. */
        for (int m = 0; m < NMODES; m++) {
            if (m == M_BF16)
                continue;
            for (int i = 0; i < 16; i++)
                lens[i] = 1 + rnd_int(3000);
            c = add_case(16, 1, 2, m, 64, 1, 16, lens);
            c->kernel = "hopper-narrow";
            c->sample = 3;
        }
        c = add_case(32, 1, 1, M_G128, 64, 0, 16, lens);
        c->sample = 3;
        /* The wide FP8 kernel, in every FP8 scale mode: many tiles a CTA
         * at 128 heads (two M tiles), MTP with causal (4, 6 and 8 M tiles
         * per KV head), 48 rows (an M tile with dead rows), two M tiles of
         * 100 rows, pages of 128, lengths off the tile and page edges. */
        for (int m = 0; m < NMODES; m++) {
            if (m == M_BF16)
                continue;
            for (int i = 0; i < 12; i++)
                lens[i] = 1 + rnd_int(5000);
            c = add_case(128, 1, 1, m, 64 << (m % 2), 0, 12, lens);
            c->kernel = "hopper-wide8";
            c->sample = 3;
            c = add_case(128, 1, 1, m, 64, 0, 7, lens_mix7);
            c->kernel = "hopper-wide8";
            c = add_case(64, 1, 2, m, 64, 1, 7, lens_mix7);
            c->kernel = "hopper-wide8";
            c = add_case(128, 1, 2, m, 64, 1, 7, lens_mix7);
            c->kernel = "hopper-wide8";
            c = add_case(128, 1, 4, m, 128, 1, 7, lens_mix7);
            c->kernel = "hopper-wide8";
            c = add_case(16, 1, 3, m, 64, 1, 7, lens_mix7);
            c->kernel = "hopper-wide8";
            c = add_case(100, 1, 1, m, 64, 0, 7, lens_mix7);
            c->kernel = "hopper-wide8";
        }
        c = add_case(128, 1, 3, M_G64, 64, 1, 7, lens_mix7);
        c->kernel = "hopper-wide8";
        /* More KV heads (a copy a row); Q far outside f16's range (E4M3
         * without scales takes the scores in f16); e4m3 subnormals, and
         * block scales past 2^7. */
        c = add_case(64, 2, 1, M_E4M3, 64, 0, 7, lens_mix7);
        c->kernel = "hopper-wide8";
        c = add_case(128, 2, 2, M_DSMLA, 64, 1, 7, lens_mix7);
        c->kernel = "hopper-wide8";
        for (int big = 0; big < 2; big++) {
            c = add_case(64, 1, 1, M_E4M3, 64, 0, 7, lens_mix7);
            c->kernel = "hopper-wide8";
            c->q_scale = big ? 1e6 : 1e-6;
            c->softmax_scale = big ? 1e-6 : 1e6;
        }
        c = add_case(64, 1, 1, M_E4M3, 64, 0, 8, lens_long8);
        c->kernel = "hopper-wide8";
        c->kv_mul = 1e-3;
        for (int m = M_G128; m <= M_DSMLA; m++) {
            c = add_case(128, 1, 1, m, 64, 0, 8, lens_long8);
            c->kernel = "hopper-wide8";
            c->kv_mul = 1e5;
            c->kv_tail_mul = 1000;
            c->softmax_scale = 2e-5;
        }
    }

    /* Odds and ends: no LSE, explicit softmax scale, all lengths 0, a plan
     * bound far above the lengths, explicit stage counts. */
    c = add_case(16, 1, 1, M_BF16, 64, 0, 7, lens_mix7);
    c->no_lse = 1;
    c = add_case(16, 1, 2, M_G32, 16, 1, 7, lens_mix7);
    c->softmax_scale = 0.05;
    memset(lens, 0, sizeof(lens));
    add_case(16, 1, 2, M_E4M3, 16, 1, 3, lens);
    c = add_case(64, 1, 1, M_BF16, 16, 0, 7, lens_mix7);
    c->max_seq_len = 100000;
    c = add_case(16, 1, 1, M_BF16, 64, 0, 7, lens_mix7);
    c->block_n = 32;
    c->stages = 4;
    c = add_case(16, 1, 1, M_G64, 64, 0, 7, lens_mix7);
    c->block_n = 32;
    c->stages = 2;
    c = add_case(16, 1, 2, M_DSMLA, 64, 1, 7, lens_mix7);
    c->block_n = 64;
    c->stages = 1;
    finish_cases();
}

/* ------------------------------------------------------------------ */
/* Problems: inputs on the host and the device */

struct prob {
    const struct kcase *c;
    mla_config_t *cfg;
    int row_bytes, spr;
    int max_len;
    int32_t mpps; /* max_pages_per_seq */
    int64_t num_pages;
    size_t kv_bytes, sc_bytes, q_elems, out_elems, lse_elems;
    uint8_t *kv;
    float *sc;
    uint16_t *q;
    int32_t *bt;
    int32_t lens[MAX_BATCH];
    devmem_ptr d_kv, d_sc, d_q, d_bt, d_lens, d_out, d_lse;
};

static mla_config_t *make_cfg(int h_q, int h_kv, int q_len, const struct fmode *m, int page,
                              int causal, int block_n, int stages, double softmax_scale)
{
    mla_config_t *cfg = NULL;
    REQUIRE(mla_config_create(&cfg) == MLA_STATUS_SUCCESS, "mla_config_create");
    keep_cfg(cfg);
    const struct {
        mla_param_t p;
        int64_t v;
    } iv[] = {
        {MLA_PARAM_NUM_HEADS, h_q},       {MLA_PARAM_NUM_KV_HEADS, h_kv},
        {MLA_PARAM_Q_LEN, q_len},         {MLA_PARAM_KV_FORMAT, m->fmt},
        {MLA_PARAM_PAGE_SIZE, page},      {MLA_PARAM_SCALE_BLOCK_SIZE, m->g},
        {MLA_PARAM_CAUSAL, causal},       {MLA_PARAM_BLOCK_N, block_n},
        {MLA_PARAM_NUM_KV_STAGES, stages},
    };
    for (size_t i = 0; i < sizeof(iv) / sizeof(iv[0]); i++)
        REQUIRE(mla_config_set_int(cfg, iv[i].p, iv[i].v) == MLA_STATUS_SUCCESS,
                "set param %d = %lld: %s", (int)iv[i].p, (long long)iv[i].v,
                mla_config_last_error(cfg));
    REQUIRE(mla_config_set_float(cfg, MLA_PARAM_KV_SCALE, m->ks) == MLA_STATUS_SUCCESS,
            "kv_scale: %s", mla_config_last_error(cfg));
    REQUIRE(mla_config_set_float(cfg, MLA_PARAM_SOFTMAX_SCALE, softmax_scale) ==
                MLA_STATUS_SUCCESS,
            "softmax_scale: %s", mla_config_last_error(cfg));
    return cfg;
}

static void cfg_geometry(const mla_config_t *cfg, int *row_bytes, int *spr)
{
    int64_t v = 0;
    REQUIRE(mla_config_get_int(cfg, MLA_PARAM_KV_ROW_BYTES, &v) == MLA_STATUS_SUCCESS, "row");
    *row_bytes = (int)v;
    REQUIRE(mla_config_get_int(cfg, MLA_PARAM_SCALES_PER_ROW, &v) == MLA_STATUS_SUCCESS, "spr");
    *spr = (int)v;
}

/*
 * Build a problem: random bf16 queries, a paged cache whose pages are a
 * random permutation of the physical pages, written through the CPU
 * backend's mla_kv_append (so FP8 rows are quantized exactly as the
 * library does), NaN bytes in every row at or past each length and in
 * every unused page.  Unused block-table entries point at NaN pages.
 * fill_len[b] (>= lens[b]) tokens are written for request b.
 */
static void build_problem(struct prob *p, const struct kcase *c, const int32_t *fill_len,
                          int mpps_override)
{
    const struct fmode *m = &modes[c->mode];
    memset(p, 0, sizeof(*p));
    p->c = c;
    p->cfg = make_cfg(c->h_q, c->h_kv, c->q_len, m, c->page, c->causal, c->block_n, c->stages,
                      c->softmax_scale);
    cfg_geometry(p->cfg, &p->row_bytes, &p->spr);
    const int P = c->page, B = c->batch;

    int fmax = 0;
    int64_t used = 0;
    for (int b = 0; b < B; b++) {
        p->lens[b] = c->lens[b];
        int f = fill_len ? fill_len[b] : c->lens[b];
        fmax = f > fmax ? f : fmax;
        p->max_len = c->lens[b] > p->max_len ? c->lens[b] : p->max_len;
        used += (f + P - 1) / P;
    }
    p->mpps = mpps_override ? mpps_override : (fmax + P - 1) / P + 1;
    p->num_pages = used + 2 + rnd_int(3);

    /* Physical pages: a random permutation; the first `used` ones hold
     * data, the rest stay NaN. */
    int64_t *perm = halloc((size_t)p->num_pages * sizeof(int64_t));
    for (int64_t i = 0; i < p->num_pages; i++)
        perm[i] = i;
    for (int64_t i = p->num_pages - 1; i > 0; i--) {
        int64_t j = (int64_t)(rnd_u64() % (uint64_t)(i + 1)), t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    p->bt = halloc((size_t)B * (size_t)p->mpps * sizeof(int32_t));
    int64_t next = 0;
    for (int b = 0; b < B; b++) {
        int f = fill_len ? fill_len[b] : c->lens[b];
        int np = (f + P - 1) / P;
        for (int j = 0; j < p->mpps; j++)
            p->bt[(size_t)b * p->mpps + j] =
                j < np ? (int32_t)perm[next++]
                       : (int32_t)perm[used + rnd_int((int)(p->num_pages - used))];
    }

    const size_t rows_per_page = (size_t)P * (size_t)c->h_kv;
    p->kv_bytes = (size_t)p->num_pages * rows_per_page * (size_t)p->row_bytes;
    p->kv = halloc(p->kv_bytes);
    memset(p->kv, 0xff, p->kv_bytes);
    if (p->spr) {
        p->sc_bytes = (size_t)p->num_pages * rows_per_page * (size_t)p->spr * sizeof(float);
        p->sc = halloc(p->sc_bytes);
        memset(p->sc, 0xff, p->sc_bytes);
    }

    /* Cache rows, one request at a time through the CPU append. */
    const size_t row_elems = (size_t)c->h_kv * MLA_D_QK;
    uint16_t *lat = halloc((size_t)(fmax > 0 ? fmax : 1) * row_elems * 2);
    int64_t *slots = halloc((size_t)(fmax > 0 ? fmax : 1) * sizeof(int64_t));
    for (int b = 0; b < B; b++) {
        int f = fill_len ? fill_len[b] : c->lens[b];
        for (size_t i = 0; i < (size_t)f * row_elems; i++) {
            lat[i] = rnd_input();
            double mul = c->kv_mul > 0 ? c->kv_mul : 1.0;
            if (c->kv_tail_mul > 0 && i / row_elems >= (size_t)f / 2)
                mul *= c->kv_tail_mul;
            if (mul != 1.0)
                lat[i] = mla_float_to_bf16((float)(mla_bf16_to_float(lat[i]) * mul));
        }
        for (int t = 0; t < f; t++)
            slots[t] = (int64_t)p->bt[(size_t)b * p->mpps + t / P] * P + t % P;
        ST_OK(g_cpu, mla_kv_append(g_cpu, p->cfg, p->kv, p->sc, p->num_pages, lat, slots, f,
                                   NULL));
    }

    p->q_elems = (size_t)B * c->q_len * c->h_q * MLA_D_QK;
    p->q = halloc(p->q_elems * 2);
    for (size_t i = 0; i < p->q_elems; i++)
        p->q[i] = c->q_scale > 0 ? mla_float_to_bf16((float)(mla_bf16_to_float(rnd_input()) *
                                                           c->q_scale))
                                 : rnd_input();
    p->out_elems = (size_t)B * c->q_len * c->h_q * MLA_D_V;
    p->lse_elems = (size_t)B * c->h_q * c->q_len;

    /* Device copies. */
    p->d_kv = dalloc(p->kv_bytes);
    DM_OK(devmem_htod(p->d_kv, p->kv, p->kv_bytes));
    if (p->spr) {
        p->d_sc = dalloc(p->sc_bytes);
        DM_OK(devmem_htod(p->d_sc, p->sc, p->sc_bytes));
    }
    p->d_q = dalloc(p->q_elems * 2);
    DM_OK(devmem_htod(p->d_q, p->q, p->q_elems * 2));
    p->d_bt = dalloc((size_t)B * p->mpps * sizeof(int32_t));
    DM_OK(devmem_htod(p->d_bt, p->bt, (size_t)B * p->mpps * sizeof(int32_t)));
    p->d_lens = dalloc((size_t)B * sizeof(int32_t));
    DM_OK(devmem_htod(p->d_lens, p->lens, (size_t)B * sizeof(int32_t)));
    p->d_out = dalloc(p->out_elems * 2);
    p->d_lse = dalloc(p->lse_elems * sizeof(float));
    /* Synchronous copies from pageable memory may return before the DMA
     * lands; the decodes run on a non-blocking stream. */
    DM_OK(devmem_sync());
}

/* ------------------------------------------------------------------ */
/* Reference and comparison */

/*
 * CPU reference for the requests in sel[0..nsel) with lengths lens[]:
 * a sub-problem made of their queries and block-table rows over the same
 * cache.  ref_out: [nsel, n, h_q, 512], ref_lse: [nsel, h_q, n].
 */
static void cpu_reference(const struct prob *p, const int *sel, int nsel, const int32_t *lens,
                          int max_seq_len, uint16_t *ref_out, float *ref_lse)
{
    const struct kcase *c = p->c;
    const size_t qrow = (size_t)c->q_len * c->h_q * MLA_D_QK;
    uint16_t *q = halloc(qrow * nsel * 2);
    int32_t *bt = halloc((size_t)nsel * p->mpps * sizeof(int32_t));
    int32_t *sl = halloc((size_t)nsel * sizeof(int32_t));
    for (int i = 0; i < nsel; i++) {
        memcpy(q + qrow * i, p->q + qrow * sel[i], qrow * 2);
        memcpy(bt + (size_t)i * p->mpps, p->bt + (size_t)sel[i] * p->mpps,
               (size_t)p->mpps * sizeof(int32_t));
        sl[i] = lens[sel[i]];
    }
    mla_plan_t *plan = NULL;
    ST_OK(g_cpu, mla_plan_create(&plan, g_cpu, p->cfg, nsel, max_seq_len));
    keep_plan(plan);
    size_t ws_bytes = 0;
    ST_OK(g_cpu, mla_plan_workspace_size(plan, &ws_bytes));
    void *ws = halloc(ws_bytes);
    ST_OK(g_cpu, mla_decode(plan, q, p->kv, p->sc, p->num_pages, bt, p->mpps, sl, ref_out,
                            ref_lse, ws, ws_bytes, NULL));
}

struct cmp {
    long bad, unwritten, bad_lse;
    double max_abs, max_lse_abs;
    double dot, na, nb;
};

/* An output element against the reference; the absolute bound scales
 * with the case's largest latent values (kv_mul). */
static int out_ok(double g, double r, double kv_mul)
{
    if (isnan(r) || isnan(g))
        return isnan(r) && isnan(g);
    if (isinf(r) || isinf(g))
        return g == r;
    double d = fabs(g - r);
    return d <= 8e-4 * (kv_mul > 0 ? kv_mul : 1.0) || d <= 2.01 / 128 * fabs(r);
}

static int lse_ok(double g, double r)
{
    if (isnan(r) || isnan(g))
        return isnan(r) && isnan(g);
    if (isinf(r) || isinf(g))
        return g == r;
    double d = fabs(g - r);
    return d <= 1e-6 || d <= 8.01 / 65536 * fabs(r);
}

/* Compare one request's output rows [n, h_q, 512] and LSE [h_q, n]. */
static void compare_request(struct cmp *s, const struct kcase *c, int req, const uint16_t *g,
                            const uint16_t *r, const float *gl, const float *rl)
{
    const size_t n = (size_t)c->q_len * c->h_q * MLA_D_V;
    for (size_t i = 0; i < n; i++) {
        double gv = mla_bf16_to_float(g[i]), rv = mla_bf16_to_float(r[i]);
        const size_t token = i / ((size_t)c->h_q * MLA_D_V);
        if (c->may_nan && req == c->may_nan_req && (int)(i % MLA_D_V) == c->may_nan_dim &&
            token + 1 < (size_t)c->q_len && isnan(gv) && isfinite(rv))
            continue;
        if (g[i] == 0xffff && !isnan(rv)) {
            if (s->unwritten++ < 5)
                fprintf(stderr, "  request %d: out[%zu] (token %zu, head %zu, dim %zu) not "
                        "written\n", req, i, i / ((size_t)c->h_q * MLA_D_V),
                        i / MLA_D_V % (size_t)c->h_q, i % MLA_D_V);
            continue;
        }
        if (!out_ok(gv, rv, (c->kv_mul > 0 ? c->kv_mul : 1.0) * fmax(1.0, c->kv_tail_mul))) {
            if (s->bad++ < 8)
                fprintf(stderr, "  request %d: out[%zu] (token %zu, head %zu, dim %zu) = %.7g, "
                        "reference %.7g\n", req, i, i / ((size_t)c->h_q * MLA_D_V),
                        i / MLA_D_V % (size_t)c->h_q, i % MLA_D_V, gv, rv);
            continue;
        }
        if (isfinite(gv) && isfinite(rv)) {
            double d = fabs(gv - rv);
            s->max_abs = d > s->max_abs ? d : s->max_abs;
            s->dot += gv * rv;
            s->na += gv * gv;
            s->nb += rv * rv;
        }
    }
    if (!gl)
        return;
    const size_t nl = (size_t)c->h_q * c->q_len;
    for (size_t i = 0; i < nl; i++) {
        uint32_t bits;
        memcpy(&bits, &gl[i], 4);
        if (bits == 0xffffffffu && !isnan(rl[i])) {
            if (s->unwritten++ < 5)
                fprintf(stderr, "  request %d: lse[%zu] not written\n", req, i);
            continue;
        }
        if (!lse_ok(gl[i], rl[i])) {
            if (s->bad_lse++ < 8)
                fprintf(stderr, "  request %d: lse[head %zu, token %zu] = %.9g, reference %.9g\n",
                        req, i / (size_t)c->q_len, i % (size_t)c->q_len, (double)gl[i],
                        (double)rl[i]);
            continue;
        }
        if (isfinite(gl[i]) && isfinite(rl[i])) {
            double d = fabs((double)gl[i] - (double)rl[i]);
            s->max_lse_abs = d > s->max_lse_abs ? d : s->max_lse_abs;
        }
    }
}

/* 1 - cosine similarity; 0 when either side is all zero. */
static double cos_diff(const struct cmp *s)
{
    if (s->na == 0 || s->nb == 0)
        return s->na == s->nb ? 0 : 1;
    return 1 - s->dot / (sqrt(s->na) * sqrt(s->nb));
}

/* Requests checked on the CPU: all, or a sample holding the longest and
 * shortest ones. */
static int pick_sample(const struct kcase *c, const int32_t *lens, int *sel)
{
    int B = c->batch;
    if (!c->sample || c->sample >= B) {
        for (int i = 0; i < B; i++)
            sel[i] = i;
        return B;
    }
    int k = 0, lo = 0, hi = 0;
    char taken[MAX_BATCH] = {0};
    for (int i = 1; i < B; i++) {
        if (lens[i] > lens[hi])
            hi = i;
        if (lens[i] < lens[lo])
            lo = i;
    }
    taken[hi] = 1;
    taken[lo] = 1;
    while (1) {
        int cnt = 0;
        for (int i = 0; i < B; i++)
            cnt += taken[i];
        if (cnt >= c->sample)
            break;
        taken[rnd_int(B)] = 1;
    }
    for (int i = 0; i < B; i++)
        if (taken[i])
            sel[k++] = i;
    return k;
}

/* Compare the GPU output (whole batch, on the host) with the CPU
 * reference for the sampled requests; returns failures found. */
static long check_against_cpu(const struct prob *p, const int32_t *lens, int max_seq_len,
                              const uint16_t *gout, const float *glse, const char *label)
{
    const struct kcase *c = p->c;
    int sel[MAX_BATCH];
    int nsel = pick_sample(c, lens, sel);
    const size_t orow = (size_t)c->q_len * c->h_q * MLA_D_V;
    const size_t lrow = (size_t)c->q_len * c->h_q;
    uint16_t *rout = halloc(orow * nsel * 2);
    float *rlse = halloc(lrow * nsel * sizeof(float));
    double t0 = now_s();
    cpu_reference(p, sel, nsel, lens, max_seq_len, rout, rlse);
    double t_cpu = now_s() - t0;

    struct cmp s;
    memset(&s, 0, sizeof(s));
    for (int i = 0; i < nsel; i++)
        compare_request(&s, c, sel[i], gout + orow * sel[i], rout + orow * i,
                        glse ? glse + lrow * sel[i] : NULL, rlse + lrow * i);
    double cd = cos_diff(&s);
    long fails = s.bad + s.unwritten + s.bad_lse + (cd > 5e-6);
    printf("%-6s %s: %d/%d requests checked, max |d| %.3g, 1-cos %.3g, max |d lse| %.3g, "
           "bad %ld, bad lse %ld, unwritten %ld (cpu %.2f s)\n",
           fails ? "FAIL" : "ok", label, nsel, c->batch, s.max_abs, cd, s.max_lse_abs, s.bad,
           s.bad_lse, s.unwritten, t_cpu);
    fflush(stdout);
    return fails;
}

/* The MLA_XPARAM_KERNEL value of a kernel's name; NULL is auto. */
static int64_t kernel_value(const char *name)
{
    static const char *const names[] = {MLA_XKERNEL_NAMES};
    if (!name)
        return MLA_XKERNEL_AUTO;
    for (int i = 0; i < (int)(sizeof(names) / sizeof(names[0])); i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    REQUIRE(0, "unknown kernel name %s", name);
    return MLA_XKERNEL_AUTO;
}

/* Plan on the GPU, with the case's kernel; NULL (after a note) when a
 * block_n or stages hint is refused as not supported, which is allowed
 * behaviour. */
static mla_plan_t *gpu_plan(const struct prob *p, int max_seq_len)
{
    const struct kcase *c = p->c;
    mla_plan_t *plan = NULL;
    REQUIRE(mla_config_set_int(p->cfg, MLA_XPARAM_KERNEL, kernel_value(c->kernel)) ==
                MLA_STATUS_SUCCESS,
            "%s: MLA_XPARAM_KERNEL: %s", c->name, mla_config_last_error(p->cfg));
    mla_status_t st = mla_plan_create(&plan, g_gpu, p->cfg, c->batch, max_seq_len);
    if (st == MLA_STATUS_NOT_SUPPORTED && (c->block_n || c->stages)) {
        printf("note   %s: hint refused: %s\n", c->name, mla_context_last_error(g_gpu));
        return NULL;
    }
    REQUIRE(st == MLA_STATUS_SUCCESS, "%s: mla_plan_create -> %s: %s", c->name,
            mla_status_string(st), mla_context_last_error(g_gpu));
    keep_plan(plan);
    return plan;
}

static devmem_ptr gpu_workspace(mla_plan_t *plan, size_t *bytes)
{
    ST_OK(g_gpu, mla_plan_workspace_size(plan, bytes));
    REQUIRE(*bytes > 0, "workspace size 0");
    return dalloc(*bytes);
}

/* ------------------------------------------------------------------ */
/* Decode grid */

START_TEST(decode_grid)
{
    const struct kcase *c = &g_cases[_i];
    struct prob p;
    watchdog(c->name, -1);
    arena_reset();
    rnd_start(2000 + (uint64_t)_i);
    double t0 = now_s();
    build_problem(&p, c, NULL, 0);
    int max_seq_len = c->max_seq_len ? c->max_seq_len : (p.max_len > 0 ? p.max_len : 1);
    mla_plan_t *plan = gpu_plan(&p, max_seq_len);
    if (!plan) {
        arena_reset();
        return;
    }
    size_t ws_bytes = 0;
    devmem_ptr ws = gpu_workspace(plan, &ws_bytes);
    devmem_stream s = c->null_stream ? NULL : g_stream;

    DM_OK(devmem_memset8(p.d_out, 0xff, p.out_elems * 2));
    DM_OK(devmem_memset8(p.d_lse, 0xff, p.lse_elems * 4));
    DM_OK(devmem_memset8(ws, 0xff, ws_bytes));
    DM_OK(devmem_sync());
    /* Odd cases: the schedule once, then two layers' decodes on it; the
     * first layer's output must equal the second's, bit for bit. */
    const int scheduled = _i % 2;
    uint16_t *gout = halloc(p.out_elems * 2);
    float *glse = halloc(p.lse_elems * 4);
    float *const lse_arg = c->no_lse ? NULL : DPTR(p.d_lse);
    if (scheduled) {
        uint16_t *first = halloc(p.out_elems * 2);
        float *first_lse = halloc(p.lse_elems * 4);
        ST_OK(g_gpu, mla_schedule(plan, p.num_pages, DPTR(p.d_bt), p.mpps, DPTR(p.d_lens),
                                  DPTR(ws), ws_bytes, s));
        ST_OK(g_gpu, mla_decode_scheduled(plan, DPTR(p.d_q), DPTR(p.d_kv),
                                          p.spr ? DPTR(p.d_sc) : NULL, p.num_pages,
                                          DPTR(p.d_bt), p.mpps, DPTR(p.d_out), lse_arg,
                                          DPTR(ws), ws_bytes, s));
        DM_OK(devmem_stream_sync(s));
        DM_OK(devmem_dtoh(first, p.d_out, p.out_elems * 2));
        DM_OK(devmem_dtoh(first_lse, p.d_lse, p.lse_elems * 4));
        DM_OK(devmem_memset8(p.d_out, 0xff, p.out_elems * 2));
        DM_OK(devmem_memset8(p.d_lse, 0xff, p.lse_elems * 4));
        DM_OK(devmem_sync());
        ST_OK(g_gpu, mla_decode_scheduled(plan, DPTR(p.d_q), DPTR(p.d_kv),
                                          p.spr ? DPTR(p.d_sc) : NULL, p.num_pages,
                                          DPTR(p.d_bt), p.mpps, DPTR(p.d_out), lse_arg,
                                          DPTR(ws), ws_bytes, s));
        DM_OK(devmem_stream_sync(s));
        DM_OK(devmem_dtoh(gout, p.d_out, p.out_elems * 2));
        DM_OK(devmem_dtoh(glse, p.d_lse, p.lse_elems * 4));
        REQUIRE(memcmp(first, gout, p.out_elems * 2) == 0 &&
                    memcmp(first_lse, glse, p.lse_elems * 4) == 0,
                "%s: two decodes on one schedule differ", c->name);
    } else {
        ST_OK(g_gpu, mla_decode(plan, DPTR(p.d_q), DPTR(p.d_kv), p.spr ? DPTR(p.d_sc) : NULL,
                                p.num_pages, DPTR(p.d_bt), p.mpps, DPTR(p.d_lens),
                                DPTR(p.d_out), lse_arg, DPTR(ws), ws_bytes, s));
        DM_OK(devmem_stream_sync(s));
        DM_OK(devmem_dtoh(gout, p.d_out, p.out_elems * 2));
        DM_OK(devmem_dtoh(glse, p.d_lse, p.lse_elems * 4));
    }
    mla_status_t dst = MLA_STATUS_INTERNAL_ERROR;
    ST_OK(g_gpu, mla_workspace_status(plan, DPTR(ws), &dst));
    REQUIRE(dst == MLA_STATUS_SUCCESS, "%s: device status %s", c->name, mla_status_string(dst));
    if (c->no_lse) {
        for (size_t i = 0; i < p.lse_elems; i++) {
            uint32_t bits;
            memcpy(&bits, &glse[i], 4);
            REQUIRE(bits == 0xffffffffu, "%s: lse written although NULL was passed", c->name);
        }
    }
    long fails = check_against_cpu(&p, p.lens, max_seq_len, gout, c->no_lse ? NULL : glse,
                                   c->name);
    printf("       (%.2f s, workspace %zu bytes%s)\n", now_s() - t0, ws_bytes,
           scheduled ? ", mla_schedule + 2 x mla_decode_scheduled" : "");
    arena_reset();
    REQUIRE(fails == 0, "%s: %ld mismatches (see log)", c->name, fails);
}
END_TEST

/* ------------------------------------------------------------------ */
/* NaN and Inf inside the lengths: the result has them where the CPU
 * backend's fp64 evaluation does, in every format and kernel family */

enum { NF_CLEAN, NF_Q_NAN, NF_NOPE_NAN, NF_V_PINF, NF_V_NINF, NF_ROPE_NAN, NF_ROPE_INF,
       NF_LAST_NAN, NF_LEAD_INF, NF_SCALE_NAN, NF_ALL_INF, NF_ALL_INF_LONG, NF_KINDS };
/* Request b holds kind b.  Long requests spread over splits, so that the
 * combine step meets a NaN or -Inf-weighted partial next to finite ones,
 * or only -Inf-weighted ones; NF_LEAD_INF's infinities fill whole 64-key
 * tiles. */
static const int32_t nf_lens[NF_KINDS] = {70, 70, 1500, 70, 1500, 70, 70, 9, 150, 70, 70, 1500};

struct nf_case {
    int mode, family, q_len;
};
enum { NF_PORTABLE_16, NF_PORTABLE_128, NF_NARROW, NF_WIDE, NF_WIDE8_128, NF_WIDE8, NF_FAMILIES };
static const char *const nf_family_names[NF_FAMILIES] = {
    "portable", "portable", "hopper-narrow", "hopper-wide", "hopper-wide8", "hopper-wide8"};
#define MAX_NF_CASES 80
static struct nf_case g_nf[MAX_NF_CASES];
static int g_nnf;

static void build_nf_cases(void)
{
    for (int f = 0; f < NF_FAMILIES; f++) {
        if (f >= NF_NARROW && !g_hopper)
            continue;
        for (int m = 0; m < NMODES; m++) {
            if (f == NF_WIDE && m != M_BF16)
                continue; /* BF16 only */
            if ((f == NF_WIDE8_128 || f == NF_WIDE8) && m == M_BF16)
                continue; /* FP8 only */
            if (g_quick && (f != NF_PORTABLE_16 || m % 2))
                continue;
            for (int n = 1; n <= 2; n++)
                if (g_nnf < MAX_NF_CASES)
                    g_nf[g_nnf++] = (struct nf_case){m, f, n};
        }
    }
}

/* Channel ch of token t of request b (KV head 0) becomes v (NaN or
 * +-Inf) as the format allows: bf16 values directly, the e4m3 NaN byte
 * 0x7f, an infinity through the block scale (E4M3 with block scales,
 * DS_MLA nope channels; the whole block then turns non-finite); E4M3
 * without block scales has no infinity and takes the NaN byte. */
static void nf_poke(struct prob *p, int b, int t, int ch, double v)
{
    const struct kcase *c = p->c;
    const int64_t page = p->bt[(size_t)b * p->mpps + t / c->page];
    const int64_t row = (page * c->page + t % c->page) * c->h_kv;
    uint8_t *r = p->kv + row * p->row_bytes;
    const int fmt = modes[c->mode].fmt;
    const uint16_t h = isnan(v) ? 0x7fc0 : v > 0 ? 0x7f80 : 0xff80;
    const float f = (float)v;
    if (fmt == MLA_KV_BF16)
        memcpy(r + 2 * ch, &h, 2);
    else if (fmt == MLA_KV_FP8_DS_MLA && ch >= MLA_D_NOPE)
        memcpy(r + MLA_D_NOPE + 16 + 2 * (ch - MLA_D_NOPE), &h, 2);
    else if (isnan(v))
        r[ch] = 0x7f;
    else if (fmt == MLA_KV_FP8_DS_MLA)
        memcpy(r + MLA_D_NOPE + 4 * (ch / 128), &f, 4);
    else if (p->spr)
        p->sc[row * p->spr + ch / modes[c->mode].g] = f;
    else
        r[ch] = 0x7f;
}

/* A block scale (E4M3 with scales, DS_MLA) of token t becomes NaN; other
 * formats get the NaN byte. */
static void nf_poke_scale_nan(struct prob *p, int b, int t, int ch)
{
    const struct kcase *c = p->c;
    const int64_t page = p->bt[(size_t)b * p->mpps + t / c->page];
    const int64_t row = (page * c->page + t % c->page) * c->h_kv;
    const float nan = NAN;
    if (modes[c->mode].fmt == MLA_KV_FP8_DS_MLA)
        memcpy(p->kv + row * p->row_bytes + MLA_D_NOPE + 4 * (ch / 128), &nan, 4);
    else if (p->spr)
        p->sc[row * p->spr + ch / modes[c->mode].g] = nan;
    else
        nf_poke(p, b, t, ch, NAN);
}

START_TEST(decode_nonfinite)
{
    const struct nf_case *k = &g_nf[_i];
    const int fmt = modes[k->mode].fmt;
    static struct kcase c;
    struct prob p;
    watchdog("decode_nonfinite", _i);
    arena_reset();
    rnd_start(7000 + (uint64_t)_i);
    memset(&c, 0, sizeof(c));
    c.h_q = k->family == NF_PORTABLE_128 || k->family == NF_WIDE8_128 ? 128
            : k->family == NF_WIDE || k->family == NF_WIDE8      ? 64
            : k->q_len > 1 && fmt == MLA_KV_BF16                 ? 8 /* narrow BF16: 16 rows */
                                                                 : 16;
    c.h_kv = 1;
    c.q_len = k->q_len;
    c.causal = k->q_len > 1;
    c.mode = k->mode;
    c.page = 64;
    c.batch = NF_KINDS;
    memcpy(c.lens, nf_lens, sizeof(nf_lens));
    c.kernel = nf_family_names[k->family];
    snprintf(c.name, sizeof(c.name), "nonfinite %s %s h%d n%d%s", modes[c.mode].name, c.kernel,
             c.h_q, c.q_len, c.causal ? " causal" : "");
    build_problem(&p, &c, NULL, 0);

    /* One kind of non-finite value per request, inside its length. */
    p.q[(((size_t)NF_Q_NAN * c.q_len + c.q_len - 1) * c.h_q + 3) * MLA_D_QK + 7] = 0x7fc0;
    nf_poke(&p, NF_NOPE_NAN, 1400, 100, NAN); /* in a late split only */
    nf_poke(&p, NF_V_PINF, 7, 200, INFINITY);
    nf_poke(&p, NF_V_NINF, 3, 300, -INFINITY);
    nf_poke(&p, NF_ROPE_NAN, 10, 540, NAN);
    nf_poke(&p, NF_ROPE_INF, 11, 560, INFINITY);
    nf_poke(&p, NF_LAST_NAN, nf_lens[NF_LAST_NAN] - 1, 50, NAN); /* the last causal row only */
    c.may_nan = 1;
    c.may_nan_req = NF_LAST_NAN;
    c.may_nan_dim = 50;
    /* Scores of +Inf for some heads and -Inf for others over the first 70
     * keys, finite keys after them: channel 0 (BF16) or RoPE channel 570
     * (DS_MLA: not part of V); e4m3 has no Inf. */
    if (fmt != MLA_KV_FP8_E4M3)
        for (int t = 0; t < 70; t++)
            nf_poke(&p, NF_LEAD_INF, t, fmt == MLA_KV_BF16 ? 0 : 570, INFINITY);
    nf_poke_scale_nan(&p, NF_SCALE_NAN, 20, 130);
    /* +Inf in RoPE channel 560 of every key: a head whose q is negative
     * there sees only -Inf scores, which makes its rows NaN (mla.h), not
     * the zeros of a row without keys; in one piece and over splits. */
    for (int b = NF_ALL_INF; b <= NF_ALL_INF_LONG; b++)
        for (int t = 0; t < nf_lens[b]; t++)
            nf_poke(&p, b, t, 560, INFINITY);
    DM_OK(devmem_htod(p.d_kv, p.kv, p.kv_bytes));
    if (p.spr)
        DM_OK(devmem_htod(p.d_sc, p.sc, p.sc_bytes));
    DM_OK(devmem_htod(p.d_q, p.q, p.q_elems * 2));

    mla_plan_t *plan = gpu_plan(&p, p.max_len);
    REQUIRE(plan, "%s: plan", c.name);
    size_t ws_bytes = 0;
    devmem_ptr ws = gpu_workspace(plan, &ws_bytes);
    /* A finite poison (bf16 and fp32 0x7b7b...): an element left
     * unwritten cannot pass for an expected NaN. */
    DM_OK(devmem_memset8(p.d_out, 0x7b, p.out_elems * 2));
    DM_OK(devmem_memset8(p.d_lse, 0x7b, p.lse_elems * 4));
    DM_OK(devmem_sync());
    ST_OK(g_gpu, mla_decode(plan, DPTR(p.d_q), DPTR(p.d_kv), p.spr ? DPTR(p.d_sc) : NULL,
                            p.num_pages, DPTR(p.d_bt), p.mpps, DPTR(p.d_lens), DPTR(p.d_out),
                            DPTR(p.d_lse), DPTR(ws), ws_bytes, g_stream));
    DM_OK(devmem_stream_sync(g_stream));
    mla_status_t dst = MLA_STATUS_INTERNAL_ERROR;
    ST_OK(g_gpu, mla_workspace_status(plan, DPTR(ws), &dst));
    REQUIRE(dst == MLA_STATUS_SUCCESS, "%s: device status %s", c.name, mla_status_string(dst));
    uint16_t *gout = halloc(p.out_elems * 2);
    float *glse = halloc(p.lse_elems * 4);
    DM_OK(devmem_dtoh(gout, p.d_out, p.out_elems * 2));
    DM_OK(devmem_dtoh(glse, p.d_lse, p.lse_elems * 4));
    /* NaN where the reference has NaN, Inf of the same sign where it has
     * Inf, the usual bounds elsewhere (out_ok, lse_ok). */
    long fails = check_against_cpu(&p, p.lens, p.max_len, gout, glse, c.name);

    /* The values did reach the result: each poked request has non-finite
     * outputs (E4M3 has no Inf for NF_LEAD_INF to put there). */
    const size_t orow = (size_t)c.q_len * c.h_q * MLA_D_V;
    int missing = 0;
    for (int b = NF_Q_NAN; b < NF_KINDS; b++) {
        size_t bad = 0;
        for (size_t i = 0; i < orow; i++)
            bad += !isfinite(mla_bf16_to_float(gout[(size_t)b * orow + i]));
        if (!bad && !(b == NF_LEAD_INF && fmt == MLA_KV_FP8_E4M3)) {
            printf("FAIL   %s: request %d has no NaN or Inf in its output\n", c.name, b);
            missing++;
        }
    }
    fflush(stdout);
    arena_reset();
    REQUIRE(fails == 0 && missing == 0, "%s: %ld mismatches, %d requests without non-finite "
            "outputs (see log)", c.name, fails, missing);
}
END_TEST

/* ------------------------------------------------------------------ */
/* CUDA graphs: capture once, replay with other lengths */

START_TEST(graph_replay)
{
    static struct kcase c;
    struct prob p;
    static const int32_t lens1[4] = {5, 140, 0, 300};
    static const int32_t lens2[4] = {300, 17, 64, 0};
    static const int32_t fill[4] = {300, 300, 300, 300};
    watchdog("graph_replay", _i);
    arena_reset();
    rnd_start(3000 + (uint64_t)_i);
    memset(&c, 0, sizeof(c));
    c.h_q = 16;
    c.h_kv = 1;
    c.q_len = 2;
    c.causal = 1;
    const int scheduled = _i >= 4; /* mla_schedule + two mla_decode_scheduled */
    c.mode = _i % 2 == 0 ? M_BF16 : M_G64;
    c.page = _i % 4 < 2 ? 16 : 64; /* 64: the sm_90a kernel where there is one */
    c.batch = 4;
    memcpy(c.lens, lens1, sizeof(lens1));
    snprintf(c.name, sizeof(c.name), "graph %s P%d %s", modes[c.mode].name, c.page,
             scheduled ? "scheduled" : "decode");
    build_problem(&p, &c, fill, 0);
    if (_i % 4 >= 2 && g_hopper)
        c.kernel = "hopper";
    mla_plan_t *plan = gpu_plan(&p, 300);
    REQUIRE(plan, "plan");
    size_t ws_bytes = 0;
    devmem_ptr ws = gpu_workspace(plan, &ws_bytes);

    devmem_graph graph = NULL;
    devmem_graph_exec exec = NULL;
    DM_OK(devmem_capture_begin(g_stream, DEVMEM_CAPTURE_THREAD_LOCAL));
    mla_status_t st;
    if (scheduled) {
        st = mla_schedule(plan, p.num_pages, DPTR(p.d_bt), p.mpps, DPTR(p.d_lens), DPTR(ws),
                          ws_bytes, g_stream);
        for (int layer = 0; layer < 2 && st == MLA_STATUS_SUCCESS; layer++)
            st = mla_decode_scheduled(plan, DPTR(p.d_q), DPTR(p.d_kv),
                                      p.spr ? DPTR(p.d_sc) : NULL, p.num_pages, DPTR(p.d_bt),
                                      p.mpps, DPTR(p.d_out), DPTR(p.d_lse), DPTR(ws), ws_bytes,
                                      g_stream);
    } else {
        st = mla_decode(plan, DPTR(p.d_q), DPTR(p.d_kv), p.spr ? DPTR(p.d_sc) : NULL,
                        p.num_pages, DPTR(p.d_bt), p.mpps, DPTR(p.d_lens), DPTR(p.d_out),
                        DPTR(p.d_lse), DPTR(ws), ws_bytes, g_stream);
    }
    int end_rc = devmem_capture_end(g_stream, &graph);
    REQUIRE(st == MLA_STATUS_SUCCESS, "decode under capture -> %s: %s",
            mla_status_string(st), mla_context_last_error(g_gpu));
    REQUIRE(end_rc == 0, "cuStreamEndCapture: %s", devmem_last_error());
    DM_OK(devmem_graph_instantiate(&exec, graph));

    long fails = 0;
    uint16_t *gout = halloc(p.out_elems * 2);
    float *glse = halloc(p.lse_elems * 4);
    for (int rep = 0; rep < 3; rep++) {
        const int32_t *lens = rep == 1 ? lens2 : lens1;
        DM_OK(devmem_htod_async(p.d_lens, lens, sizeof(lens1), g_stream));
        DM_OK(devmem_memset8_async(p.d_out, 0xff, p.out_elems * 2, g_stream));
        DM_OK(devmem_memset8_async(p.d_lse, 0xff, p.lse_elems * 4, g_stream));
        DM_OK(devmem_graph_launch(exec, g_stream));
        DM_OK(devmem_stream_sync(g_stream));
        mla_status_t dst = MLA_STATUS_INTERNAL_ERROR;
        ST_OK(g_gpu, mla_workspace_status(plan, DPTR(ws), &dst));
        REQUIRE(dst == MLA_STATUS_SUCCESS, "replay %d: device status %s", rep,
                mla_status_string(dst));
        DM_OK(devmem_dtoh(gout, p.d_out, p.out_elems * 2));
        DM_OK(devmem_dtoh(glse, p.d_lse, p.lse_elems * 4));
        char label[160];
        snprintf(label, sizeof(label), "%s replay %d (lengths %s)", c.name, rep,
                 rep == 1 ? "300,17,64,0" : "5,140,0,300");
        fails += check_against_cpu(&p, lens, 300, gout, glse, label);
    }
    DM_OK(devmem_graph_exec_destroy(exec));
    DM_OK(devmem_graph_destroy(graph));
    arena_reset();
    REQUIRE(fails == 0, "graph replay: %ld mismatches", fails);
}
END_TEST

/* ------------------------------------------------------------------ */
/* mla_decode_scheduled without a matching schedule */

static int all_ff(const void *buf, size_t n)
{
    const unsigned char *b = buf;
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0xff)
            return 0;
    return 1;
}

/* Whether the output and LSE were written since poison_outputs(). */
static int outputs_untouched(const struct prob *p)
{
    uint16_t *o = halloc(p->out_elems * 2);
    float *l = halloc(p->lse_elems * 4);
    DM_OK(devmem_dtoh(o, p->d_out, p->out_elems * 2));
    DM_OK(devmem_dtoh(l, p->d_lse, p->lse_elems * 4));
    return all_ff(o, p->out_elems * 2) && all_ff(l, p->lse_elems * 4);
}

static void poison_outputs(const struct prob *p)
{
    DM_OK(devmem_memset8(p->d_out, 0xff, p->out_elems * 2));
    DM_OK(devmem_memset8(p->d_lse, 0xff, p->lse_elems * 4));
    DM_OK(devmem_sync());
}

static mla_status_t decode_on(mla_plan_t *plan, const struct prob *p, devmem_ptr bt,
                              devmem_ptr ws, size_t ws_bytes)
{
    return mla_decode_scheduled(plan, DPTR(p->d_q), DPTR(p->d_kv), p->spr ? DPTR(p->d_sc) : NULL,
                                p->num_pages, DPTR(bt), p->mpps, DPTR(p->d_out),
                                DPTR(p->d_lse), DPTR(ws), ws_bytes, g_stream);
}

/* A workspace of garbage (no schedule at all: nothing runs and
 * mla_workspace_status refuses it), a schedule made for another block
 * table (nothing runs, recorded as INVALID_ARGUMENT), another plan of the
 * same layout (shares the schedule, same bits) and a plan of another
 * layout (nothing runs); BF16 narrow, E4M3 wide (hopper-wide8). */
START_TEST(schedule_misuse)
{
    static struct kcase c;
    struct prob p;
    static const int32_t lens[4] = {100, 700, 0, 64};
    watchdog("schedule_misuse", _i);
    arena_reset();
    rnd_start(5000 + (uint64_t)_i);
    memset(&c, 0, sizeof(c));
    c.h_q = _i ? 128 : 16;
    c.h_kv = 1;
    c.q_len = 1;
    c.mode = _i ? M_G128 : M_BF16;
    c.page = 64;
    c.batch = 4;
    memcpy(c.lens, lens, sizeof(lens));
    snprintf(c.name, sizeof(c.name), "schedule misuse %s h%d", modes[c.mode].name, c.h_q);
    build_problem(&p, &c, NULL, 0);
    mla_plan_t *plan = gpu_plan(&p, 1000), *twin = gpu_plan(&p, 1000);
    mla_plan_t *other = NULL;
    ST_OK(g_gpu, mla_plan_create(&other, g_gpu, p.cfg, 3, 1000));
    keep_plan(other);
    size_t ws_bytes = 0;
    devmem_ptr ws = gpu_workspace(plan, &ws_bytes);
    const size_t bt_bytes = (size_t)c.batch * p.mpps * sizeof(int32_t);
    devmem_ptr bt2 = dalloc(bt_bytes);
    DM_OK(devmem_htod(bt2, p.bt, bt_bytes));
    mla_status_t dst = MLA_STATUS_INTERNAL_ERROR;

    /* Garbage: no schedule. */
    DM_OK(devmem_memset8(ws, 0x5a, ws_bytes));
    poison_outputs(&p);
    ST_OK(g_gpu, decode_on(plan, &p, p.d_bt, ws, ws_bytes));
    DM_OK(devmem_stream_sync(g_stream));
    REQUIRE(outputs_untouched(&p), "%s: decode on a garbage workspace wrote output", c.name);
    REQUIRE(mla_workspace_status(plan, DPTR(ws), &dst) == MLA_STATUS_INVALID_ARGUMENT,
            "%s: mla_workspace_status accepted a workspace no call used", c.name);

    /* Another block table pointer than the schedule's. */
    ST_OK(g_gpu, mla_schedule(plan, p.num_pages, DPTR(p.d_bt), p.mpps, DPTR(p.d_lens),
                              DPTR(ws), ws_bytes, g_stream));
    ST_OK(g_gpu, decode_on(plan, &p, bt2, ws, ws_bytes));
    DM_OK(devmem_stream_sync(g_stream));
    REQUIRE(outputs_untouched(&p), "%s: decode with another block table wrote output", c.name);
    ST_OK(g_gpu, mla_workspace_status(plan, DPTR(ws), &dst));
    REQUIRE(dst == MLA_STATUS_INVALID_ARGUMENT, "%s: status %s after a mismatched decode",
            c.name, mla_status_string(dst));

    /* Scheduled again: the right table works, on the plan and its twin. */
    uint16_t *a = halloc(p.out_elems * 2), *b = halloc(p.out_elems * 2);
    ST_OK(g_gpu, mla_schedule(plan, p.num_pages, DPTR(p.d_bt), p.mpps, DPTR(p.d_lens),
                              DPTR(ws), ws_bytes, g_stream));
    ST_OK(g_gpu, decode_on(plan, &p, p.d_bt, ws, ws_bytes));
    DM_OK(devmem_stream_sync(g_stream));
    DM_OK(devmem_dtoh(a, p.d_out, p.out_elems * 2));
    poison_outputs(&p);
    ST_OK(g_gpu, decode_on(twin, &p, p.d_bt, ws, ws_bytes));
    DM_OK(devmem_stream_sync(g_stream));
    DM_OK(devmem_dtoh(b, p.d_out, p.out_elems * 2));
    REQUIRE(memcmp(a, b, p.out_elems * 2) == 0, "%s: the twin plan's decode differs", c.name);
    float *glse = halloc(p.lse_elems * 4);
    DM_OK(devmem_dtoh(glse, p.d_lse, p.lse_elems * 4));
    long fails = check_against_cpu(&p, p.lens, 1000, b, glse, c.name);

    /* A plan of another layout (batch 3) finds no schedule of its own. */
    poison_outputs(&p);
    ST_OK(g_gpu, decode_on(other, &p, p.d_bt, ws, ws_bytes));
    DM_OK(devmem_stream_sync(g_stream));
    REQUIRE(outputs_untouched(&p), "%s: a plan of another layout used the schedule", c.name);
    REQUIRE(mla_workspace_status(other, DPTR(ws), &dst) == MLA_STATUS_INVALID_ARGUMENT,
            "%s: mla_workspace_status accepted another layout's workspace", c.name);
    ST_OK(g_gpu, mla_workspace_status(plan, DPTR(ws), &dst));
    REQUIRE(dst == MLA_STATUS_SUCCESS, "%s: status %s", c.name, mla_status_string(dst));
    printf("%-6s %s: garbage, other table, twin plan, other layout\n", fails ? "FAIL" : "ok",
           c.name);
    arena_reset();
    REQUIRE(fails == 0, "%s: %ld mismatches", c.name, fails);
}
END_TEST

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
    ST_OK(g_gpu, mla_decode(plan, DPTR(p.d_q), DPTR(p.d_kv), p.spr ? DPTR(p.d_sc) : NULL,
                            p.num_pages, DPTR(p.d_bt), p.mpps, DPTR(p.d_lens), DPTR(p.d_out),
                            DPTR(p.d_lse), DPTR(ws), ws_bytes, g_stream));
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
/* KV append: GPU bytes == CPU bytes */

static const struct fmode append_modes[] = {
    {"bf16", MLA_KV_BF16, 0, 1.0},          {"e4m3", MLA_KV_FP8_E4M3, 0, 1.0},
    {"e4m3-ks", MLA_KV_FP8_E4M3, 0, 0.0125}, {"e4m3-g32", MLA_KV_FP8_E4M3, 32, 1.0},
    {"e4m3-g64", MLA_KV_FP8_E4M3, 64, 0.5},  {"e4m3-g128", MLA_KV_FP8_E4M3, 128, 2.0},
    {"dsmla", MLA_KV_FP8_DS_MLA, 0, 1.0},
};
#define NAPPEND ((int)(sizeof(append_modes) / sizeof(append_modes[0])))

/* A latent row with a character: ordinary, wide dynamic range, zero, one
 * NaN, an infinity, huge, tiny (bf16 subnormals). */
static void fill_latent_row(uint16_t *x, int kind)
{
    double sigma = 0.25;
    switch (kind % 8) {
    case 1: sigma = 1e-3; break;
    case 2: sigma = 300.0; break;
    case 3: sigma = 1e4; break;
    case 4: sigma = 1e-38; break;
    default: break;
    }
    for (int i = 0; i < MLA_D_QK; i++)
        x[i] = rnd_bf16(sigma);
    if (kind % 8 == 5)
        memset(x, 0, MLA_D_QK * 2);
    if (kind % 8 == 6)
        x[rnd_int(MLA_D_QK)] = 0x7fc0; /* NaN */
    if (kind % 8 == 7)
        x[rnd_int(MLA_D_QK)] = rnd_int(2) ? 0x7f80 : 0xff80; /* +-inf */
    if (kind % 16 == 9) /* one channel far above the rest of its block */
        x[rnd_int(MLA_D_QK)] = mla_float_to_bf16(1e6f);
}

static long first_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return (long)i;
    return -1;
}

START_TEST(append_bytes)
{
    static const int quick_modes[3] = {0, 4, 6}; /* bf16, e4m3-g64, dsmla */
    const int mi = g_quick ? quick_modes[_i / 2] : _i / 2, h_kv = _i % 2 ? 2 : 1;
    const struct fmode *m = &append_modes[mi];
    watchdog("append_bytes", _i);
    arena_reset();
    rnd_start(5000 + (uint64_t)_i);
    const int P = 16, num_pages = 9, n = g_quick ? 40 : 300;
    mla_config_t *cfg = make_cfg(16 * h_kv, h_kv, 1, m, P, 0, 0, 0, 0);
    int row_bytes, spr;
    cfg_geometry(cfg, &row_bytes, &spr);
    const int64_t nslots = (int64_t)num_pages * P;

    /* Distinct slots, ~10% padding (-1), plus one slot just past the end. */
    int64_t *slots = halloc((size_t)n * sizeof(int64_t));
    int64_t *slots_cpu = halloc((size_t)n * sizeof(int64_t));
    char *used = halloc((size_t)nslots);
    memset(used, 0, (size_t)nslots);
    int oob_row = rnd_int(n);
    for (int i = 0; i < n; i++) {
        if (i == oob_row) {
            slots[i] = nslots + rnd_int(3);
            slots_cpu[i] = -1;
            continue;
        }
        if (rnd_int(10) == 0) {
            slots[i] = slots_cpu[i] = -1 - rnd_int(3);
            continue;
        }
        int64_t s;
        int tries = 0;
        do
            s = (int64_t)(rnd_u64() % (uint64_t)nslots);
        while (used[s] && ++tries < 1000);
        if (used[s]) {
            slots[i] = slots_cpu[i] = -1;
            continue;
        }
        used[s] = 1;
        slots[i] = slots_cpu[i] = s;
    }
    const size_t lat_elems = (size_t)n * h_kv * MLA_D_QK;
    uint16_t *lat = halloc(lat_elems * 2);
    for (int i = 0; i < n * h_kv; i++)
        fill_latent_row(lat + (size_t)i * MLA_D_QK, rnd_int(16));

    const size_t kv_bytes = (size_t)nslots * h_kv * row_bytes;
    const size_t sc_bytes = (size_t)nslots * h_kv * spr * sizeof(float);
    uint8_t *kv_cpu = halloc(kv_bytes), *kv_gpu = halloc(kv_bytes);
    float *sc_cpu = spr ? halloc(sc_bytes) : NULL, *sc_gpu = spr ? halloc(sc_bytes) : NULL;
    for (size_t i = 0; i < kv_bytes; i++)
        kv_cpu[i] = (uint8_t)rnd_u64();
    for (size_t i = 0; i < sc_bytes; i++)
        ((uint8_t *)sc_cpu)[i] = (uint8_t)rnd_u64();

    devmem_ptr d_kv = dalloc(kv_bytes), d_sc = spr ? dalloc(sc_bytes) : 0;
    devmem_ptr d_lat = dalloc(lat_elems * 2), d_slots = dalloc((size_t)n * sizeof(int64_t));
    DM_OK(devmem_htod(d_kv, kv_cpu, kv_bytes));
    if (spr)
        DM_OK(devmem_htod(d_sc, sc_cpu, sc_bytes));
    DM_OK(devmem_htod(d_lat, lat, lat_elems * 2));
    DM_OK(devmem_htod(d_slots, slots, (size_t)n * sizeof(int64_t)));
    DM_OK(devmem_sync());

    ST_OK(g_gpu, mla_kv_append(g_gpu, cfg, DPTR(d_kv), spr ? DPTR(d_sc) : NULL, num_pages,
                               DPTR(d_lat), DPTR(d_slots), n, g_stream));
    /* n == 0 queues nothing and succeeds. */
    ST_OK(g_gpu, mla_kv_append(g_gpu, cfg, DPTR(d_kv), spr ? DPTR(d_sc) : NULL, num_pages,
                               DPTR(d_lat), DPTR(d_slots), 0, g_stream));
    DM_OK(devmem_stream_sync(g_stream));
    ST_OK(g_cpu, mla_kv_append(g_cpu, cfg, kv_cpu, sc_cpu, num_pages, lat,
                               slots_cpu, n, NULL));
    DM_OK(devmem_dtoh(kv_gpu, d_kv, kv_bytes));
    if (spr)
        DM_OK(devmem_dtoh(sc_gpu, d_sc, sc_bytes));

    long d = first_diff(kv_gpu, kv_cpu, kv_bytes);
    long ds = spr ? first_diff((const uint8_t *)sc_gpu, (const uint8_t *)sc_cpu, sc_bytes) : -1;
    printf("%-6s append %s h_kv %d: %d rows, cache %s, scales %s\n",
           d < 0 && ds < 0 ? "ok" : "FAIL", m->name, h_kv, n,
           d < 0 ? "identical" : "DIFFER", spr ? (ds < 0 ? "identical" : "DIFFER") : "none");
    if (d >= 0) {
        long row = d / row_bytes;
        fprintf(stderr, "  cache byte %ld (slot %ld, head %ld, byte %ld): gpu 0x%02x cpu 0x%02x\n",
                d, row / h_kv, row % h_kv, d % row_bytes, kv_gpu[d], kv_cpu[d]);
    }
    if (ds >= 0) {
        long row = ds / (long)(spr * sizeof(float));
        fprintf(stderr, "  scale %ld (slot %ld, head %ld): gpu %a cpu %a\n", ds / 4, row / h_kv,
                row % h_kv, (double)sc_gpu[ds / 4], (double)sc_cpu[ds / 4]);
    }
    arena_reset();
    REQUIRE(d < 0 && ds < 0, "append %s h_kv %d: GPU and CPU bytes differ", m->name, h_kv);
}
END_TEST

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

static int g_sanitize, g_san_calls = 3;
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
    memset(c, 0, sizeof(*c));
    c->h_q = h_q;
    c->h_kv = h_kv;
    c->q_len = q_len;
    c->mode = mode;
    c->page = page;
    c->causal = causal;
    c->batch = batch;
    int32_t mx = 0;
    for (int i = 0; i < batch; i++) {
        c->lens[i] = lens[i];
        mx = lens[i] > mx ? lens[i] : mx;
    }
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

static void build_san_cases(void)
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
        ST_OK(g_gpu, mla_decode(plan, DPTR(p.d_q), DPTR(p.d_kv), p.spr ? DPTR(p.d_sc) : NULL,
                                p.num_pages, DPTR(p.d_bt), p.mpps, DPTR(p.d_lens),
                                DPTR(p.d_out), DPTR(p.d_lse), DPTR(ws), ws_bytes, s));
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

/* ------------------------------------------------------------------ */

static Suite *gpu_suite(void)
{
    Suite *s = suite_create("gpu");
    TCase *tc;
    if (g_sanitize || !g_quick) {
        tc = tcase_create("sanitize");
        tcase_set_timeout(tc, 3600);
        tcase_add_loop_test(tc, sanitize_shapes, 0, g_nsan);
        suite_add_tcase(s, tc);
        if (g_sanitize)
            return s;
    }
    tc = tcase_create("decode");
    tcase_set_timeout(tc, 3600);
    tcase_add_loop_test(tc, decode_grid, 0, g_ncases);
    suite_add_tcase(s, tc);

    tc = tcase_create("nonfinite");
    tcase_set_timeout(tc, 1200);
    tcase_add_loop_test(tc, decode_nonfinite, 0, g_nnf);
    suite_add_tcase(s, tc);

    tc = tcase_create("graph");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, graph_replay, 0, 8);
    suite_add_tcase(s, tc);

    tc = tcase_create("schedule misuse");
    tcase_add_loop_test(tc, schedule_misuse, 0, 2);
    suite_add_tcase(s, tc);

    tc = tcase_create("validation");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, device_validation, 0, g_quick ? 2 * OOB_KINDS : 6 * OOB_KINDS);
    suite_add_tcase(s, tc);

    tc = tcase_create("kernel choice");
    tcase_add_test(tc, kernel_choice);
    suite_add_tcase(s, tc);

    tc = tcase_create("append");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, append_bytes, 0, g_quick ? 6 : 2 * NAPPEND);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    const char *seed = getenv("MLA_TEST_SEED");
    const char *quick = getenv("MLA_TEST_QUICK");
    g_seed = seed && *seed ? strtoull(seed, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    g_quick = quick && atoi(quick) > 0;
    const char *san = getenv("MLA_TEST_SANITIZE");
    g_sanitize = san && atoi(san) > 0;
    if (g_sanitize && atoi(san) > g_san_calls)
        g_san_calls = atoi(san);
    const char *wd = getenv("MLA_TEST_WATCHDOG");
    if (wd && *wd)
        g_watchdog_s = (unsigned)strtoul(wd, NULL, 10);

    mla_status_t st = mla_context_create(&g_gpu, 0);
    if (st == MLA_STATUS_NO_DEVICE || st == MLA_STATUS_NOT_SUPPORTED ||
        st == MLA_STATUS_NO_KERNEL_IMAGE) {
        printf("SKIP: no usable GPU: mla_context_create(0) -> %s: %s (build: %s)\n",
               mla_status_string(st), mla_last_error(), mla_build_info());
        return 77;
    }
    if (st != MLA_STATUS_SUCCESS) {
        printf("mla_context_create(0) -> %s: %s\n", mla_status_string(st), mla_last_error());
        return 1;
    }
    char why[256] = "";
    int rc = devmem_init(0, why, sizeof(why));
    if (rc != 0) {
        printf("devmem_init(0) failed although libmla found the device: %s\n",
               why[0] ? why : devmem_last_error());
        return 1;
    }
    if (mla_context_create(&g_cpu, MLA_DEVICE_CPU) != MLA_STATUS_SUCCESS ||
        devmem_stream_create(&g_stream) != 0) {
        printf("setup failed\n");
        return 1;
    }
    char name[128] = "";
    int ccmaj = 0, ccmin = 0, sms = 0;
    devmem_device_info(name, sizeof(name), &ccmaj, &ccmin, &sms);
    printf("test_gpu: seed %" PRIu64 " (MLA_TEST_SEED=%" PRIu64 " replays it)%s\n", g_seed,
           g_seed, g_sanitize ? ", sanitizer shapes" : g_quick ? ", quick subset" : "");
    printf("device 0: %s, sm_%d%d, %d SMs; %s\n", name, ccmaj, ccmin, sms, mla_build_info());
    fflush(stdout);

    g_hopper = ccmaj == 9 && ccmin == 0 && strstr(mla_build_info(), "sm_90a") != NULL;
    printf("sm_90a kernel: %s\n", g_hopper ? "tested (cases marked kernel=hopper require it)"
                                             : "not available on this device/build");
    build_cases();
    build_san_cases();
    build_nf_cases();
    SRunner *sr = srunner_create(gpu_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    alarm(0);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);

    arena_reset();
    devmem_stream_destroy(g_stream);
    mla_context_destroy(g_cpu);
    mla_context_destroy(g_gpu);
    devmem_fini();
    printf("test_gpu: seed %" PRIu64 ", %d failed\n", g_seed, failed);
    return failed ? 1 : 0;
}
