/* gpu_harness.c - test_gpu's shared pieces: the watchdog, the arena that
 * frees a test's allocations even after a failure, configs, problems (a
 * paged cache written through the CPU backend, NaN wherever no valid row
 * is, copied to the device) and the check of GPU outputs against the CPU
 * backend within doc/ABI.md's tolerances.
 * SPDX-License-Identifier: MIT */
#define _POSIX_C_SOURCE 200809L /* clock_gettime, sigaction */
#include <check.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../tools/devmem.h"
#include "fp8_codec.h"
#include "gpu_harness.h"
#include "mla.h"
#include "mla_experimental.h"
#include "rng.h"

/* ------------------------------------------------------------------ */
/* Globals, random numbers, bookkeeping */

mla_context_t *g_gpu, *g_cpu;
devmem_stream g_stream;
int g_quick;
int g_hopper;
int g_san_calls = 3;

/* Decode inputs as FlashMLA's conformance suite draws them (randn / 10,
 * clamped to [-1, 1]), the data its tolerances were set for: the kernels
 * round P to bf16 before P.V as FlashMLA does, and with much wider inputs
 * (sigma 0.25, short rows) a few elements per million exceed the 8e-4
 * absolute bound. */
static uint16_t rnd_input(void)
{
    return mla_float_to_bf16((float)fmin(1.0, fmax(-1.0, rnd_gauss() / 10.0)));
}

double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Watchdog: check enforces no timeouts without fork, and a kernel that
 * never finishes would hang the stream synchronization; name the test
 * and exit instead.  MLA_TEST_WATCHDOG = seconds per test (0: off). */
unsigned g_watchdog_s = 300;
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
void watchdog(const char *what, int index)
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

void arena_reset(void)
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

void *halloc(size_t bytes)
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

devmem_ptr dalloc(size_t bytes)
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

void keep_plan(mla_plan_t *p)
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

/* ------------------------------------------------------------------ */
/* Formats */

const struct fmode modes[NMODES] = {
    {"bf16", MLA_KV_BF16, 0, 1.0},
    {"e4m3", MLA_KV_FP8_E4M3, 0, 0.0125},
    {"e4m3-g32", MLA_KV_FP8_E4M3, 32, 1.0},
    {"e4m3-g64", MLA_KV_FP8_E4M3, 64, 0.5},
    {"e4m3-g128", MLA_KV_FP8_E4M3, 128, 2.0},
    {"dsmla", MLA_KV_FP8_DS_MLA, 0, 1.0},
};

/* ------------------------------------------------------------------ */
/* Problems: inputs on the host and the device */

mla_config_t *make_cfg(int h_q, int h_kv, int q_len, const struct fmode *m, int page,
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

void cfg_geometry(const mla_config_t *cfg, int *row_bytes, int *spr)
{
    int64_t v = 0;
    REQUIRE(mla_config_get_int(cfg, MLA_PARAM_KV_ROW_BYTES, &v) == MLA_STATUS_SUCCESS, "row");
    *row_bytes = (int)v;
    REQUIRE(mla_config_get_int(cfg, MLA_PARAM_SCALES_PER_ROW, &v) == MLA_STATUS_SUCCESS, "spr");
    *spr = (int)v;
}

void kcase_shape(struct kcase *c, int h_q, int h_kv, int q_len, int mode, int page, int causal,
                 int batch, const int32_t *lens)
{
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
}

/*
 * Build a problem: random bf16 queries, a paged cache whose pages are a
 * random permutation of the physical pages, written through the CPU
 * backend's mla_kv_append (so FP8 rows are quantized exactly as the
 * library does), NaN bytes in every row at or past each length and in
 * every unused page.  Unused block-table entries point at NaN pages.
 * fill_len[b] (>= lens[b]) tokens are written for request b.
 */
void build_problem(struct prob *p, const struct kcase *c, const int32_t *fill_len,
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
long check_against_cpu(const struct prob *p, const int32_t *lens, int max_seq_len,
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

mla_status_t prob_decode(mla_plan_t *plan, const struct prob *p, devmem_ptr ws, size_t ws_bytes,
                         devmem_stream stream)
{
    return mla_decode(plan, DPTR(p->d_q), DPTR(p->d_kv), p->spr ? DPTR(p->d_sc) : NULL,
                      p->num_pages, DPTR(p->d_bt), p->mpps, DPTR(p->d_lens), DPTR(p->d_out),
                      p->c->no_lse ? NULL : DPTR(p->d_lse), DPTR(ws), ws_bytes, stream);
}

mla_status_t prob_decode_scheduled(mla_plan_t *plan, const struct prob *p, devmem_ptr bt,
                                   devmem_ptr ws, size_t ws_bytes, devmem_stream stream)
{
    return mla_decode_scheduled(plan, DPTR(p->d_q), DPTR(p->d_kv),
                                p->spr ? DPTR(p->d_sc) : NULL, p->num_pages, DPTR(bt), p->mpps,
                                DPTR(p->d_out), p->c->no_lse ? NULL : DPTR(p->d_lse), DPTR(ws),
                                ws_bytes, stream);
}

/* Plan on the GPU, with the case's kernel; NULL (after a note) when a
 * block_n or stages hint is refused as not supported, which is allowed
 * behaviour. */
mla_plan_t *gpu_plan(const struct prob *p, int max_seq_len)
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

devmem_ptr gpu_workspace(mla_plan_t *plan, size_t *bytes)
{
    ST_OK(g_gpu, mla_plan_workspace_size(plan, bytes));
    REQUIRE(*bytes > 0, "workspace size 0");
    return dalloc(*bytes);
}

/* Whether every byte is 0xff, the poison of outputs that must stay unwritten. */
int all_ff(const void *buf, size_t n)
{
    const unsigned char *b = buf;
    for (size_t i = 0; i < n; i++)
        if (b[i] != 0xff)
            return 0;
    return 1;
}
