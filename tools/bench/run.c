/* run.c - one shape of mla-bench: its config, the check against the CPU
 * reference, and the run on the CPU backend (run_gpu.c has the GPU's).
 * SPDX-License-Identifier: MIT */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "mla_experimental.h"

mla_config_t *shape_config(const struct shape *sh, int heads, char *err, size_t errlen)
{
    mla_config_t *cfg;
    if (mla_config_create(&cfg)) {
        snprintf(err, errlen, "mla_config_create failed");
        return NULL;
    }
    struct {
        mla_param_t p;
        int64_t v;
        const char *name;
    } set[] = {
        {MLA_PARAM_NUM_HEADS, heads, "heads"},
        {MLA_PARAM_NUM_KV_HEADS, sh->h_kv, "kv heads"},
        {MLA_PARAM_Q_LEN, sh->q_len, "q_len"},
        {MLA_PARAM_CAUSAL, sh->causal, "causal"},
        {MLA_PARAM_PAGE_SIZE, sh->page, "page size"},
        {MLA_PARAM_KV_FORMAT, sh->format, "format"},
        {MLA_PARAM_SCALE_BLOCK_SIZE, sh->block, "scale block"},
        {MLA_XPARAM_KERNEL, bench_kernel, "kernel"},
    };
    for (size_t i = 0; i < sizeof(set) / sizeof(set[0]); i++) {
        if (mla_config_set_int(cfg, set[i].p, set[i].v)) {
            snprintf(err, errlen, "config %s %lld: %s", set[i].name, (long long)set[i].v,
                     mla_config_last_error(cfg));
            mla_config_destroy(cfg);
            return NULL;
        }
    }
    return cfg;
}

/* Random inputs never give an all-zero reference: if they did, the inputs
 * are broken and the comparison would prove nothing. */
static int degenerate(const struct problem *p, const uint16_t *ref, size_t n, const int *reqs,
                      int nreq)
{
    size_t nonzero = 0;
    int64_t keys = 0;
    for (size_t i = 0; i < n; i++)
        nonzero += (ref[i] & 0x7fff) != 0;
    for (int i = 0; i < nreq; i++)
        keys += p->lens[reqs[i]];
    return keys > 0 && nonzero == 0;
}

int check_sampled(struct bench *B, const struct problem *p, const mla_config_t *cfg,
                  uint16_t *out, const float *lse, struct result *r)
{
    double t0 = problem_now_s();
    int nreq = p->batch < B->o->check_requests ? p->batch : B->o->check_requests;
    int *reqs = problem_xalloc(PROG, sizeof(int) * (size_t)nreq);
    for (int i = 0; i < nreq; i++)
        reqs[i] = (int)((int64_t)i * p->batch / nreq);
    size_t orow = (size_t)p->q_len * p->heads * 512, lrow = (size_t)p->heads * p->q_len;
    uint16_t *ref = problem_xalloc(PROG, sizeof(uint16_t) * orow * nreq);
    uint16_t *got = problem_xalloc(PROG, sizeof(uint16_t) * orow * nreq);
    float *lref = problem_xalloc(PROG, sizeof(float) * lrow * nreq), *lgot = problem_xalloc(PROG, sizeof(float) * lrow * nreq);
    int rc = 1;
    if (B->o->corrupt) /* --corrupt-check: show that the guard catches an error */
        out[orow * reqs[nreq - 1]] ^= 0x4000;
    if (problem_cpu_reference(p, B->cpu, cfg, reqs, nreq, ref, lref)) {
        fail_shape(r, "CPU reference: %s", problem_last_error());
        goto done;
    }
    for (int i = 0; i < nreq; i++) {
        memcpy(got + orow * i, out + orow * reqs[i], sizeof(uint16_t) * orow);
        memcpy(lgot + lrow * i, lse + lrow * reqs[i], sizeof(float) * lrow);
    }
    r->nreq = nreq;
    if (degenerate(p, ref, orow * nreq, reqs, nreq)) {
        fail_shape(r, "the CPU reference output is all zero: degenerate inputs");
        goto done;
    }
    r->bad = problem_compare(got, ref, orow * nreq, lgot, lref, lrow * nreq, &r->max_err,
                             &r->cos_diff);
    snprintf(r->check, sizeof(r->check), "%s (%d req)", r->bad ? "FAIL" : "PASS", nreq);
    if (r->bad)
        fail_shape(r, "%ld values outside tolerance (max |d| %.3g, 1-cos %.3g)", r->bad,
                   r->max_err, r->cos_diff);
    rc = r->bad != 0;
done:
    free(reqs);
    free(ref);
    free(got);
    free(lref);
    free(lgot);
    r->check_s = problem_now_s() - t0;
    return rc;
}

/* ---- the CPU backend: one buffer set, host clock ---- */

struct cpu_run {
    mla_plan_t *plan;
    const struct problem *p;
    void *ws;
    size_t ws_bytes;
    uint16_t *out;
    float *lse;
    int layers; /* 0: mla_decode calls; N: steps */
};

static mla_status_t cpu_schedule(const struct cpu_run *c)
{
    const struct problem *p = c->p;
    return mla_schedule(c->plan, p->num_pages, p->table, p->max_pages, p->lens, c->ws,
                        c->ws_bytes, NULL);
}

/* One mla_decode call, or one step: mla_schedule and layers decodes. */
static mla_status_t cpu_call(const struct cpu_run *c)
{
    const struct problem *p = c->p;
    if (!c->layers)
        return mla_decode(c->plan, p->q, p->kv, p->scales, p->num_pages, p->table, p->max_pages,
                          p->lens, c->out, c->lse, c->ws, c->ws_bytes, NULL);
    mla_status_t st = cpu_schedule(c);
    for (int l = 0; !st && l < c->layers; l++)
        st = mla_decode_scheduled(c->plan, p->q, p->kv, p->scales, p->num_pages, p->table,
                                  p->max_pages, c->out, c->lse, c->ws, c->ws_bytes, NULL);
    return st;
}

/* Time n calls of call (or of mla_schedule alone) with the host clock. */
static mla_status_t cpu_time(const struct cpu_run *c, int n, double *us, int sched_only)
{
    for (int i = 0; i < n; i++) {
        double t0 = problem_now_s();
        mla_status_t st = sched_only ? cpu_schedule(c) : cpu_call(c);
        us[i] = (problem_now_s() - t0) * 1e6;
        if (st)
            return st;
    }
    return MLA_STATUS_SUCCESS;
}

static void run_cpu_shape(struct bench *B, const struct problem *p, const mla_config_t *cfg,
                          struct result *r)
{
    const struct opts *o = B->o;
    struct cpu_run c = {.p = p, .layers = o->layers};
    double *us = problem_xalloc(PROG, sizeof(double) * (size_t)o->iters), unused;
    mla_status_t st = mla_plan_create(&c.plan, B->cpu, cfg, p->batch, p->max_len);
    if (st) {
        fail_shape(r, "mla_plan_create: %s: %s", mla_status_string(st),
                   mla_context_last_error(B->cpu));
        free(us);
        return;
    }
    mla_plan_workspace_size(c.plan, &c.ws_bytes);
    c.ws = problem_xalloc(PROG, c.ws_bytes);
    c.out = problem_xalloc(PROG, p->out_bytes);
    c.lse = problem_xalloc(PROG, p->lse_bytes);
    memset(c.out, 0xff, p->out_bytes);
    memset(c.lse, 0xff, p->lse_bytes);
    r->copies = r->copies_wanted = 1;
    r->copy_bytes = (double)(p->kv_bytes + p->scale_bytes + p->q_bytes + p->out_bytes);
    struct cpu_run guard = c;
    guard.layers = o->layers ? 1 : 0;
    if ((st = cpu_call(&guard)) || check_sampled(B, p, cfg, c.out, c.lse, r))
        goto out;
    for (int i = 0; !st && i < o->warmup; i++)
        st = cpu_call(&c);
    if (st || (st = cpu_time(&c, o->iters, us, 0)))
        goto out;
    summarize(us, o->iters, &r->med, &r->p10, &r->p90, &r->tmin);
    if (o->layers) {
        r->med /= o->layers;
        r->p10 /= o->layers;
        r->p90 /= o->layers;
        r->tmin /= o->layers;
        if ((st = cpu_time(&c, o->iters, us, 1)))
            goto out;
        summarize(us, o->iters, &r->sched_med, &unused, &unused, NULL);
    }
    r->host_med = r->med; /* the CPU call is synchronous: host time is the time */
    r->timed = 1;
out:
    if (st)
        fail_shape(r, "%s: %s: %s", o->layers ? "mla_schedule/mla_decode_scheduled" : "mla_decode",
                   mla_status_string(st), mla_context_last_error(B->cpu));
    free(us);
    free(c.out);
    free(c.lse);
    free(c.ws);
    mla_plan_destroy(c.plan);
}

void run_shape(struct bench *B, struct shape *sh, int idx, const struct problem *base)
{
    struct result *r = &sh->r;
    struct problem p;
    memset(&p, 0, sizeof(p));
    char err[320];
    double t0 = problem_now_s();
    uint64_t seed = B->o->seed;
    if (problem_subset(&p, base, sh->batch, sh->lens, problem_hash(seed, 2 * (uint64_t)idx + 1)) ||
        problem_make_q(&p, sh->q_len, sh->h_q, problem_hash(seed, 2 * (uint64_t)idx + 2))) {
        fail_shape(r, "host: %s", problem_last_error());
        problem_free(&p);
        return;
    }
    problem_work(&p, sh->causal, &r->bytes, &r->flops, &r->keys);
    r->gen_s = problem_now_s() - t0;
    mla_config_t *cfg = shape_config(sh, sh->h_q, err, sizeof(err));
    if (!cfg) {
        fail_shape(r, "%s", err);
    } else if (B->gctx) {
        run_gpu_shape(B, &p, cfg, r);
    } else {
        run_cpu_shape(B, &p, cfg, r);
    }
    mla_config_destroy(cfg);
    problem_free(&p);
}
