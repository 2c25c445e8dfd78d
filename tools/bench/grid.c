/* grid.c - mla-bench's grid of shapes, and the caches they share.
 * SPDX-License-Identifier: MIT */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

/* Fill in one shape's lengths and their statistics. */
static void draw_shape_lens(struct shape *s, uint64_t seed)
{
    s->lens = problem_xalloc(PROG, sizeof(int32_t) * (size_t)s->batch);
    problem_draw_lens(s->lens, s->batch, s->seq, s->lens_dist, s->q_len, seed);
    double sum = 0;
    s->r.s_min = INT32_MAX;
    for (int b = 0; b < s->batch; b++) {
        sum += s->lens[b];
        s->r.s_min = s->lens[b] < s->r.s_min ? s->lens[b] : s->r.s_min;
        s->r.s_max = s->lens[b] > s->r.s_max ? s->lens[b] : s->r.s_max;
    }
    s->r.s_mean = sum / s->batch;
    s->r.g_med = s->r.g_p10 = s->r.g_p90 = NAN;
    s->r.sched_med = NAN;
}

int build_grid(const struct opts *o, struct shape **out)
{
    long n = (long)o->nfmt * o->page.n * o->heads.n * o->q_len.n * o->batch.n * o->lens.n *
             o->seq.n;
    if (n > MAX_SHAPES) {
        fprintf(stderr, PROG ": the grid has %ld shapes, more than %d\n", n, MAX_SHAPES);
        exit(2);
    }
    struct shape *sh = calloc((size_t)n, sizeof(*sh));
    if (!sh) {
        fprintf(stderr, PROG ": out of host memory\n");
        exit(1);
    }
    int k = 0, group = 0;
    /* Shapes that share format and page size share one generated cache;
     * they come together so that only one cache is held at a time. */
    for (int fi = 0; fi < o->nfmt; fi++)
        for (int pi = 0; pi < o->page.n; pi++, group++)
            for (int hi = 0; hi < o->heads.n; hi++)
                for (int qi = 0; qi < o->q_len.n; qi++)
                    for (int bi = 0; bi < o->batch.n; bi++)
                        for (int li = 0; li < o->lens.n; li++)
                            for (int si = 0; si < o->seq.n; si++) {
                                struct shape *s = &sh[k++];
                                s->format = o->fmts[fi].format;
                                s->block = o->fmts[fi].block;
                                s->page = o->page.v[pi];
                                s->h_kv = o->kv_heads;
                                s->h_q = o->heads.v[hi];
                                s->q_len = o->q_len.v[qi];
                                s->causal = o->causal;
                                s->batch = o->batch.v[bi];
                                s->lens_dist = o->lens.v[li];
                                s->seq = o->seq.v[si];
                                s->group = group;
                                draw_shape_lens(s, o->seed);
                            }
    *out = sh;
    return (int)n;
}

/* Generate the cache of a group: each request as long as the longest use
 * any shape of the group makes of it. */
int generate_group(struct bench *B, const struct shape *sh, int n, int first,
                   struct problem *base)
{
    int maxb = 0;
    for (int i = first; i < n && sh[i].group == sh[first].group; i++)
        maxb = sh[i].batch > maxb ? sh[i].batch : maxb;
    int32_t *fill = problem_xalloc(PROG, sizeof(int32_t) * (size_t)maxb);
    memset(fill, 0, sizeof(int32_t) * (size_t)maxb);
    for (int i = first; i < n && sh[i].group == sh[first].group; i++)
        for (int b = 0; b < sh[i].batch; b++)
            fill[b] = sh[i].lens[b] > fill[b] ? sh[i].lens[b] : fill[b];
    char err[320], fn[24];
    /* Append needs only format, page size and KV heads: h_q = h_kv. */
    mla_config_t *cfg = shape_config(&sh[first], sh[first].h_kv, err, sizeof(err));
    int rc = -1;
    double t0 = problem_now_s();
    if (!cfg) {
        fprintf(stderr, PROG ": %s\n", err);
    } else if (problem_generate(base, cfg, maxb, fill, problem_hash(B->o->seed, 0xcac4e),
                                B->o->threads)) {
        fprintf(stderr, PROG ": generating the cache: %s\n", problem_last_error());
    } else {
        double rows = 0;
        for (int b = 0; b < maxb; b++)
            rows += fill[b];
        fprintf(stderr,
                PROG ": cache %s P%d h_kv %d: %d requests, %.0f rows, %.1f MB, generated "
                     "in %.1f s\n",
                fmt_name(sh[first].format, sh[first].block, fn, sizeof(fn)), sh[first].page,
                sh[first].h_kv, maxb, rows * sh[first].h_kv,
                (base->kv_bytes + base->scale_bytes) / 1e6, problem_now_s() - t0);
        rc = 0;
    }
    mla_config_destroy(cfg);
    free(fill);
    return rc;
}
