/* csv.c - mla-bench's --csv file: one row per shape, metadata repeated in
 * trailing columns so that any CSV reader gets everything.  Columns added
 * later go at the end, so that older readers still find theirs.
 * SPDX-License-Identifier: MIT */
#include <math.h>
#include <string.h>

#include "bench.h"

static void csv_str(FILE *f, const char *s)
{
    if (!s)
        return;
    if (!strpbrk(s, ",\"\n")) {
        fputs(s, f);
        return;
    }
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', f);
        fputc(*s, f);
    }
    fputc('"', f);
}

static void csv_num(FILE *f, double x)
{
    if (isfinite(x))
        fprintf(f, "%.10g", x);
}

/* Numbers, each followed by a comma. */
static void csv_nums(FILE *f, const double *x, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        csv_num(f, x[k]);
        fputc(',', f);
    }
}

static const char header[] =
    "format,kv_format,scale_block,batch,q_len,causal,h_q,h_kv,page_size,varlen,s_k,"
    "s_k_mean,s_k_min,s_k_max,keys,bytes,flops,check,pass,checked_requests,max_abs_err,"
    "cos_diff,buffer_sets,buffer_sets_wanted,buffer_set_bytes,median_us,p10_us,p90_us,"
    "min_us,spread_pct,tb_per_s,copy_bw_pct,tflop_per_s,mma_pct,host_us_per_call,"
    "graph_median_us,graph_p10_us,graph_p90_us,note,backend,device,sm_count,"
    "driver_cuda_version,libmla_version,build_info,date,iters,warmup,l2_mb,copy_tbs,"
    "copy_measured,mma_tflops,mma_measured,seed,command_line,"
    "lengths,read_bw_pct,read_tbs,read_measured,layers,schedule_us\n";

/* The shape's own columns, up to the note. */
static void shape_columns(FILE *f, const struct shape *s, const struct ceilings *c)
{
    const struct result *r = &s->r;
    char fn[24];
    double t = tbs(r), fl = tflops(r);
    fprintf(f, "%s,%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,", fmt_name(s->format, s->block, fn, 24),
            kv_name(s->format), s->block, s->batch, s->q_len, s->causal, s->h_q, s->h_kv,
            s->page, s->lens_dist != PROBLEM_LENS_FIXED, s->seq);
    double row1[] = {r->s_mean, r->s_min, r->s_max, r->keys, r->bytes, r->flops};
    csv_nums(f, row1, sizeof(row1) / sizeof(row1[0]));
    csv_str(f, r->check[0] ? r->check : "FAIL");
    fprintf(f, ",%d,%d,", !r->failed, r->nreq);
    double row2[] = {r->nreq ? r->max_err : NAN,
                     r->nreq ? r->cos_diff : NAN,
                     r->copies,
                     r->copies_wanted,
                     r->copy_bytes,
                     r->timed ? r->med : NAN,
                     r->timed ? r->p10 : NAN,
                     r->timed ? r->p90 : NAN,
                     r->timed ? r->tmin : NAN,
                     spread(r),
                     t,
                     frac(t, c->copy.value),
                     fl,
                     frac(fl, c->mma.value),
                     r->timed ? r->host_med : NAN,
                     r->timed ? r->g_med : NAN,
                     r->timed ? r->g_p10 : NAN,
                     r->timed ? r->g_p90 : NAN};
    csv_nums(f, row2, sizeof(row2) / sizeof(row2[0]));
    csv_str(f, r->note);
}

/* The run's columns, from the backend to the command line. */
static void run_columns(FILE *f, const struct bench *B)
{
    const struct meta *m = B->m;
    const struct ceilings *c = B->c;
    fprintf(f, ",%s,", m->gpu ? "cuda" : "cpu");
    csv_str(f, m->device);
    fputc(',', f);
    if (m->gpu)
        fprintf(f, "%d", m->sm_count);
    fputc(',', f);
    csv_str(f, m->driver);
    fputc(',', f);
    csv_str(f, mla_version_string());
    fputc(',', f);
    csv_str(f, mla_build_info());
    fprintf(f, ",%s,%d,%d,", m->date, m->iters, m->warmup);
    csv_num(f, m->gpu ? m->l2_mb : NAN);
    fputc(',', f);
    csv_num(f, c->copy.value);
    fprintf(f, ",%d,", c->copy.measured);
    csv_num(f, c->mma.value);
    fprintf(f, ",%d,%llu,", c->mma.measured, (unsigned long long)B->o->seed);
    csv_str(f, m->cmdline);
}

int write_csv(const char *path, const struct bench *B, const struct shape *sh, int n)
{
    FILE *f = open_output(path);
    if (!f)
        return -1;
    const struct ceilings *c = B->c;
    fputs(header, f);
    for (int i = 0; i < n; i++) {
        const struct result *r = &sh[i].r;
        shape_columns(f, &sh[i], c);
        run_columns(f, B);
        fprintf(f, ",%s,", problem_lens_name(sh[i].lens_dist));
        csv_num(f, frac(tbs(r), c->read.value));
        fputc(',', f);
        csv_num(f, c->read.value);
        fprintf(f, ",%d,", c->read.measured);
        if (B->o->layers)
            fprintf(f, "%d", B->o->layers);
        fputc(',', f);
        csv_num(f, r->timed ? r->sched_med : NAN);
        fputc('\n', f);
    }
    return close_output(f, path);
}
