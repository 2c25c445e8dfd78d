/* run_gpu.c - one shape of mla-bench on a GPU: buffer sets rotating past
 * the L2, the guard call and its check, then direct calls and CUDA-graph
 * replays timed with events; calls are mla_decode, or with --layers N
 * steps of one mla_schedule and N mla_decode_scheduled layers.
 * SPDX-License-Identifier: MIT */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* Device buffers of one shape: shared table, lengths and workspace (which
 * holds a step's schedule), and copies rotating sets of cache, scales, Q,
 * output and LSE; a step's layers use consecutive sets, as each layer of
 * a model reads its own cache. */
struct gpu_bufs {
    mla_plan_t *plan;
    mla_context_t *ctx;
    devmem_ptr tab, len, ws;
    size_t ws_bytes;
    size_t off_sc, off_q, off_out, off_lse, set_bytes;
    devmem_ptr *set;
    int nset;
    int layers; /* 0: a call is one mla_decode; N: one step of N layers */
    const struct problem *p;
    devmem_stream s;
};

static size_t align256(size_t x)
{
    return (x + 255) / 256 * 256;
}

/* Times of a step, per layer. */
static void per_layer(double *x, int per)
{
    *x /= per;
}

static void *dptr(devmem_ptr base, size_t off)
{
    return (void *)(uintptr_t)(base + off);
}

static mla_status_t decode_on(const struct gpu_bufs *g, int c)
{
    devmem_ptr b = g->set[c % g->nset];
    const struct problem *p = g->p;
    return mla_decode(g->plan, dptr(b, g->off_q), dptr(b, 0),
                      p->spr ? (const float *)dptr(b, g->off_sc) : NULL, p->num_pages,
                      (const int32_t *)dptr(g->tab, 0), p->max_pages,
                      (const int32_t *)dptr(g->len, 0), dptr(b, g->off_out),
                      (float *)dptr(b, g->off_lse), dptr(g->ws, 0), g->ws_bytes, g->s);
}

static mla_status_t schedule(const struct gpu_bufs *g)
{
    const struct problem *p = g->p;
    return mla_schedule(g->plan, p->num_pages, (const int32_t *)dptr(g->tab, 0), p->max_pages,
                        (const int32_t *)dptr(g->len, 0), dptr(g->ws, 0), g->ws_bytes, g->s);
}

static mla_status_t layer_on(const struct gpu_bufs *g, int c)
{
    devmem_ptr b = g->set[c % g->nset];
    const struct problem *p = g->p;
    return mla_decode_scheduled(g->plan, dptr(b, g->off_q), dptr(b, 0),
                                p->spr ? (const float *)dptr(b, g->off_sc) : NULL,
                                p->num_pages, (const int32_t *)dptr(g->tab, 0), p->max_pages,
                                dptr(b, g->off_out), (float *)dptr(b, g->off_lse),
                                dptr(g->ws, 0), g->ws_bytes, g->s);
}

/* Call c: mla_decode on set c, or step c, whose layers use sets c N ..
 * c N + N - 1. */
static mla_status_t gpu_call(const struct gpu_bufs *g, int c)
{
    if (!g->layers)
        return decode_on(g, c);
    mla_status_t st = schedule(g);
    for (int l = 0; !st && l < g->layers; l++)
        st = layer_on(g, c * g->layers + l);
    return st;
}

/* Events around each of n back-to-back calls; call(i) queues call i. */
static int time_calls(struct bench *B, int n, double *gpu_us, double *host_us,
                      mla_status_t (*call)(void *, int), void *arg, mla_status_t *st)
{
    *st = MLA_STATUS_SUCCESS;
    if (devmem_event_record(B->ev[0], B->stream))
        return -1;
    for (int i = 0; i < n; i++) {
        double t0 = problem_now_s();
        *st = call(arg, i);
        if (host_us)
            host_us[i] = (problem_now_s() - t0) * 1e6;
        if (*st)
            return -1;
        if (devmem_event_record(B->ev[i + 1], B->stream))
            return -1;
    }
    if (devmem_event_sync(B->ev[n]))
        return -1;
    for (int i = 0; i < n; i++) {
        float ms = 0;
        if (devmem_event_elapsed_ms(&ms, B->ev[i], B->ev[i + 1]))
            return -1;
        gpu_us[i] = ms * 1e3;
    }
    return 0;
}

struct call_ctx {
    const struct gpu_bufs *g;
    int first;               /* rotation offset, in calls */
    devmem_graph_exec *exec; /* graphs, or NULL for direct calls */
    int nexec;
};

static mla_status_t direct_call(void *arg, int i)
{
    struct call_ctx *c = arg;
    return gpu_call(c->g, c->first + i);
}

static mla_status_t schedule_call(void *arg, int i)
{
    (void)i;
    return schedule(((struct call_ctx *)arg)->g);
}

static mla_status_t graph_call(void *arg, int i)
{
    struct call_ctx *c = arg;
    return devmem_graph_launch(c->exec[(c->first + i) % c->nexec], c->g->s)
               ? MLA_STATUS_CUDA_ERROR
               : MLA_STATUS_SUCCESS;
}

static int gcd(int a, int b)
{
    while (b) {
        int t = a % b;
        a = b;
        b = t;
    }
    return a;
}

/* Capture graph k of n, holding call first + k; returns what failed, or NULL. */
static const char *capture(struct bench *B, struct gpu_bufs *g, int call, devmem_graph_exec *x,
                           const char **detail)
{
    devmem_graph graph = NULL;
    if (devmem_capture_begin(g->s, DEVMEM_CAPTURE_THREAD_LOCAL))
        return "cuStreamBeginCapture";
    mla_status_t st = gpu_call(g, call);
    int end = devmem_capture_end(g->s, &graph);
    if (st || end) {
        if (st)
            *detail = mla_context_last_error(B->gctx);
        devmem_graph_destroy(graph);
        return st ? (g->layers ? "a step under capture" : "mla_decode under capture")
                  : "cuStreamEndCapture";
    }
    int inst = devmem_graph_instantiate(x, graph);
    devmem_graph_destroy(graph);
    return inst ? "cuGraphInstantiate" : NULL;
}

/* CUDA graphs of one call each, over the buffer sets that come next in
 * the rotation (those touched least recently), as many as it takes for
 * the rotation to come round (at most warmup + iters), replayed warmup +
 * iters times in that order.  Failures are reported, not fatal to the
 * shape. */
static void time_graphs(struct bench *B, struct gpu_bufs *g, int first, struct result *r)
{
    const struct opts *o = B->o;
    int per = g->layers ? g->layers : 1, cycle = g->nset / gcd(g->nset, per);
    int n = cycle < o->warmup + o->iters ? cycle : o->warmup + o->iters;
    devmem_graph_exec *exec = calloc((size_t)n, sizeof(*exec));
    double *us = problem_xalloc(PROG, sizeof(double) * (size_t)o->iters);
    const char *why = exec ? NULL : "out of host memory", *detail = "";
    mla_status_t st = MLA_STATUS_SUCCESS;
    int made = 0;
    for (; !why && made < n; made++)
        if ((why = capture(B, g, first + made, &exec[made], &detail)))
            break;
    if (!why) {
        struct call_ctx c = {.g = g, .exec = exec, .nexec = n};
        for (int i = 0; i < o->warmup && !why; i++)
            if (graph_call(&c, i))
                why = "cuGraphLaunch";
        c.first = o->warmup;
        if (!why && time_calls(B, o->iters, us, NULL, graph_call, &c, &st))
            why = "graph replay";
    }
    if (!why) {
        summarize(us, o->iters, &r->g_med, &r->g_p10, &r->g_p90, NULL);
        per_layer(&r->g_med, per);
        per_layer(&r->g_p10, per);
        per_layer(&r->g_p90, per);
    } else {
        r->graph_failed = 1;
        char msg[160];
        snprintf(msg, sizeof(msg), "graph: %s failed: %s", why,
                 detail[0] ? detail : devmem_last_error());
        fprintf(stderr, PROG ": %s\n", msg);
        add_note(r, msg);
        devmem_stream_sync(g->s);
    }
    for (int i = 0; exec && i < made; i++)
        devmem_graph_exec_destroy(exec[i]);
    free(exec);
    free(us);
}

#define CK(call, what)                                                                 \
    do {                                                                               \
        if ((call) != 0) {                                                             \
            fail_shape(r, "%s: %s", what, devmem_last_error());                        \
            return -1;                                                                 \
        }                                                                              \
    } while (0)

/* Table, lengths, workspace, and enough buffer sets that one pass over
 * them exceeds 3x the L2, filled from the problem, outputs poisoned. */
static int alloc_sets(struct bench *B, struct gpu_bufs *g, struct result *r)
{
    const struct problem *p = g->p;
    mla_plan_workspace_size(g->plan, &g->ws_bytes);
    CK(devmem_alloc(&g->ws, g->ws_bytes), "workspace");
    CK(devmem_alloc(&g->tab, sizeof(int32_t) * (size_t)p->batch * p->max_pages), "block table");
    CK(devmem_alloc(&g->len, sizeof(int32_t) * (size_t)p->batch), "lengths");
    CK(devmem_htod(g->tab, p->table, sizeof(int32_t) * (size_t)p->batch * p->max_pages),
       "block table");
    CK(devmem_htod(g->len, p->lens, sizeof(int32_t) * (size_t)p->batch), "lengths");
    g->off_sc = align256(p->kv_bytes);
    g->off_q = g->off_sc + align256(p->scale_bytes);
    g->off_out = g->off_q + align256(p->q_bytes);
    g->off_lse = g->off_out + align256(p->out_bytes);
    g->set_bytes = g->off_lse + align256(p->lse_bytes);
    double want = ceil(3.0 * B->m->l2_mb * 1e6 / (double)g->set_bytes);
    r->copies_wanted = want < 2 ? 2 : want > MAX_COPIES ? MAX_COPIES : (int)want;
    r->copy_bytes = (double)g->set_bytes;
    g->set = calloc((size_t)r->copies_wanted, sizeof(devmem_ptr));
    if (!g->set) {
        fail_shape(r, "out of host memory");
        return -1;
    }
    while (g->nset < r->copies_wanted && devmem_alloc(&g->set[g->nset], g->set_bytes) == 0)
        g->nset++;
    r->copies = g->nset;
    if (g->nset == 0) {
        fail_shape(r, "no device memory for one buffer set of %.1f MB", g->set_bytes / 1e6);
        return -1;
    }
    if (g->nset < r->copies_wanted) {
        snprintf(r->note, sizeof(r->note),
                 "only %d of %d buffer sets (%.1f of %.1f MB) could be allocated: the timed "
                 "data may partly stay in L2",
                 g->nset, r->copies_wanted, g->nset * g->set_bytes / 1e6,
                 r->copies_wanted * g->set_bytes / 1e6);
        fprintf(stderr, PROG ": %s\n", r->note);
    }
    CK(devmem_htod(g->set[0], p->kv, p->kv_bytes), "upload");
    if (p->spr)
        CK(devmem_htod(g->set[0] + g->off_sc, p->scales, p->scale_bytes), "upload");
    CK(devmem_htod(g->set[0] + g->off_q, p->q, p->q_bytes), "upload");
    for (int c = 1; c < g->nset; c++)
        CK(devmem_dtod(g->set[c], g->set[0], g->off_out), "buffer copy");
    for (int c = 0; c < g->nset; c++)
        CK(devmem_memset8(g->set[c] + g->off_out, 0xff, g->set_bytes - g->off_out), "poison");
    CK(devmem_sync(), "upload");
    return 0;
}

static int device_status_ok(const struct gpu_bufs *g, struct result *r, const char *when)
{
    mla_status_t st, dst;
    if ((st = mla_workspace_status(g->plan, dptr(g->ws, 0), &dst)) || dst) {
        fail_shape(r, "device status%s: %s", when, mla_status_string(st ? st : dst));
        return -1;
    }
    return 0;
}

/* The guard: call 0, its device status, sampled requests; in steps, the
 * last layer's output must equal the first's bit for bit. */
static int guard(struct bench *B, const struct gpu_bufs *g, const mla_config_t *cfg,
                 struct result *r)
{
    const struct problem *p = g->p;
    mla_status_t st;
    if ((st = gpu_call(g, 0))) {
        fail_shape(r, "%s: %s: %s", g->layers ? "mla_schedule/mla_decode_scheduled" : "mla_decode",
                   mla_status_string(st), mla_context_last_error(B->gctx));
        return -1;
    }
    CK(devmem_stream_sync(g->s), g->layers ? "step" : "mla_decode");
    if (device_status_ok(g, r, ""))
        return -1;
    uint16_t *out = problem_xalloc(PROG, p->out_bytes), *last = NULL;
    float *lse = problem_xalloc(PROG, p->lse_bytes);
    int rc = -1, l = (g->layers - 1) % g->nset;
    if (devmem_dtoh(out, g->set[0] + g->off_out, p->out_bytes) ||
        devmem_dtoh(lse, g->set[0] + g->off_lse, p->lse_bytes)) {
        fail_shape(r, "download: %s", devmem_last_error());
    } else if (l > 0 && devmem_dtoh(last = problem_xalloc(PROG, p->out_bytes), g->set[l] + g->off_out,
                                    p->out_bytes)) {
        fail_shape(r, "download: %s", devmem_last_error());
    } else if (last && memcmp(out, last, p->out_bytes)) {
        fail_shape(r, "layer %d of the step differs from layer 0 (same inputs, one schedule)",
                   g->layers - 1);
    } else {
        rc = check_sampled(B, p, cfg, out, lse, r) ? -1 : 0;
    }
    free(out);
    free(last);
    free(lse);
    return rc;
}

/* Direct calls, rotating over the sets so that no call finds its data in
 * the L2 from an earlier one; in steps also mla_schedule alone. */
static int time_direct(struct bench *B, const struct gpu_bufs *g, struct result *r)
{
    const struct opts *o = B->o;
    int per = g->layers ? g->layers : 1, rc = -1;
    double *us = problem_xalloc(PROG, sizeof(double) * (size_t)o->iters);
    double *host = problem_xalloc(PROG, sizeof(double) * (size_t)o->iters), unused;
    mla_status_t st = MLA_STATUS_SUCCESS;
    struct call_ctx c = {.g = g, .first = 1};
    for (int i = 0; !st && i < o->warmup; i++)
        st = direct_call(&c, i);
    c.first = 1 + o->warmup;
    if (!st && time_calls(B, o->iters, us, host, direct_call, &c, &st) == 0) {
        summarize(us, o->iters, &r->med, &r->p10, &r->p90, &r->tmin);
        summarize(host, o->iters, &r->host_med, &unused, &unused, NULL);
        double *v[] = {&r->med, &r->p10, &r->p90, &r->tmin, &r->host_med};
        for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
            per_layer(v[i], per);
        rc = 0;
        if (g->layers) {
            rc = time_calls(B, o->iters, us, NULL, schedule_call, &c, &st);
            if (rc == 0)
                summarize(us, o->iters, &r->sched_med, &unused, &unused, NULL);
        }
    }
    if (rc && st)
        fail_shape(r, "%s: %s: %s", g->layers ? "mla_schedule/mla_decode_scheduled" : "mla_decode",
                   mla_status_string(st), mla_context_last_error(B->gctx));
    else if (rc)
        fail_shape(r, "timing: %s", devmem_last_error());
    free(us);
    free(host);
    return rc;
}

void run_gpu_shape(struct bench *B, const struct problem *p, const mla_config_t *cfg,
                   struct result *r)
{
    const struct opts *o = B->o;
    struct gpu_bufs g = {.p = p, .s = B->stream, .layers = o->layers};
    mla_status_t st = mla_plan_create(&g.plan, B->gctx, cfg, p->batch, p->max_len);
    if (st) {
        fail_shape(r, "mla_plan_create: %s: %s", mla_status_string(st),
                   mla_context_last_error(B->gctx));
    } else if (alloc_sets(B, &g, r) == 0 && guard(B, &g, cfg, r) == 0 &&
               time_direct(B, &g, r) == 0) {
        r->timed = 1;
        time_graphs(B, &g, 1 + o->warmup + o->iters, r);
        /* Every timed call must have passed the device-side checks too. */
        device_status_ok(&g, r, " after timing");
    }
    devmem_stream_sync(B->stream);
    for (int i = 0; g.set && i < g.nset; i++)
        devmem_free(g.set[i]);
    free(g.set);
    devmem_free(g.ws);
    devmem_free(g.tab);
    devmem_free(g.len);
    mla_plan_destroy(g.plan);
}
