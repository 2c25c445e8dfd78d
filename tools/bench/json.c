/* json.c - mla-bench's --json file: the run's metadata, settings and
 * ceilings, then every shape with its numbers (null where there are none).
 * SPDX-License-Identifier: MIT */
#include <math.h>

#include "bench.h"

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *c = (const unsigned char *)(s ? s : ""); *c; c++) {
        if (*c == '"' || *c == '\\')
            fprintf(f, "\\%c", *c);
        else if (*c == '\n')
            fputs("\\n", f);
        else if (*c < 0x20)
            fprintf(f, "\\u%04x", *c);
        else
            fputc(*c, f);
    }
    fputc('"', f);
}

static void kv_str(FILE *f, const char *k, const char *v, int comma)
{
    fprintf(f, "\"%s\": ", k);
    if (v)
        json_str(f, v);
    else
        fputs("null", f);
    if (comma)
        fputs(", ", f);
}

static void kv_num(FILE *f, const char *k, double v, int comma)
{
    fprintf(f, "\"%s\": ", k);
    if (isfinite(v))
        fprintf(f, "%.10g", v);
    else
        fputs("null", f);
    if (comma)
        fputs(", ", f);
}

static void kv_bool(FILE *f, const char *k, int v)
{
    fprintf(f, "\"%s\": %s, ", k, v ? "true" : "false");
}

static void write_device(FILE *f, const struct meta *m)
{
    char buf[64];
    fputs("\n  \"device\": {", f);
    kv_str(f, "backend", m->gpu ? "cuda" : "cpu", 1);
    kv_str(f, "name", m->device, 1);
    if (m->gpu) {
        snprintf(buf, sizeof(buf), "sm_%d%d", m->cc_major, m->cc_minor);
        kv_str(f, "arch", buf, 1);
        kv_num(f, "sm_count", m->sm_count, 1);
        kv_num(f, "memory_gb", m->gpu_mem_gb > 0 ? m->gpu_mem_gb : NAN, 1);
    }
    kv_str(f, "driver_cuda_version", m->driver[0] ? m->driver : NULL, 0);
    fputs("},", f);
}

static void write_settings(FILE *f, const struct bench *B)
{
    const struct meta *m = B->m;
    const struct opts *o = B->o;
    char buf[64];
    fputs("\n  \"settings\": {", f);
    kv_num(f, "iters", m->iters, 1);
    kv_num(f, "warmup", m->warmup, 1);
    kv_num(f, "check_requests", o->check_requests, 1);
    kv_num(f, "l2_mb", m->gpu ? m->l2_mb : NAN, 1);
    kv_str(f, "l2_source", m->gpu ? m->l2_how : NULL, 1);
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)o->seed);
    kv_str(f, "seed", buf, 1);
    kv_str(f, "preset", o->preset, 1);
    kv_str(f, "timing", o->layers ? "steps" : "calls", 1);
    kv_num(f, "layers", o->layers ? o->layers : NAN, 0);
    fputs("},", f);
}

static void write_ceilings(FILE *f, const struct ceilings *c)
{
    fputs("\n  \"ceilings\": {", f);
    kv_num(f, "copy_tbs", c->copy.value, 1);
    kv_bool(f, "copy_measured", c->copy.measured);
    kv_str(f, "copy_method", c->copy.how, 1);
    fputs("\n    ", f);
    kv_num(f, "read_tbs", c->read.value, 1);
    kv_bool(f, "read_measured", c->read.measured);
    kv_str(f, "read_method", c->read.how, 1);
    fputs("\n    ", f);
    kv_num(f, "mma_tflops", c->mma.value, 1);
    kv_bool(f, "mma_measured", c->mma.measured);
    kv_str(f, "mma_method", c->mma.how, 0);
    fputs("},", f);
}

static void write_shape(FILE *f, const struct shape *s, const struct ceilings *c)
{
    const struct result *r = &s->r;
    char fn[24];
    kv_str(f, "format", fmt_name(s->format, s->block, fn, sizeof(fn)), 1);
    kv_str(f, "kv_format", kv_name(s->format), 1);
    kv_num(f, "scale_block", s->block, 1);
    kv_num(f, "batch", s->batch, 1);
    kv_num(f, "q_len", s->q_len, 1);
    kv_bool(f, "causal", s->causal);
    kv_num(f, "h_q", s->h_q, 1);
    kv_num(f, "h_kv", s->h_kv, 1);
    kv_num(f, "page_size", s->page, 1);
    kv_bool(f, "varlen", s->lens_dist != PROBLEM_LENS_FIXED);
    kv_str(f, "lengths", problem_lens_name(s->lens_dist), 1);
    fputs("\n     ", f);
    kv_num(f, "s_k", s->seq, 1);
    kv_num(f, "s_k_mean", r->s_mean, 1);
    kv_num(f, "s_k_min", r->s_min, 1);
    kv_num(f, "s_k_max", r->s_max, 1);
    kv_num(f, "keys", r->keys, 1);
    kv_num(f, "bytes", r->bytes, 1);
    kv_num(f, "flops", r->flops, 1);
    fputs("\n     ", f);
    kv_str(f, "check", r->check[0] ? r->check : "FAIL", 1);
    kv_bool(f, "pass", !r->failed);
    kv_num(f, "checked_requests", r->nreq, 1);
    kv_num(f, "bad_values", r->nreq ? (double)r->bad : NAN, 1);
    kv_num(f, "max_abs_err", r->nreq ? r->max_err : NAN, 1);
    kv_num(f, "cos_diff", r->nreq ? r->cos_diff : NAN, 1);
    kv_str(f, "note", r->note[0] ? r->note : NULL, 1);
    fputs("\n     ", f);
    kv_num(f, "buffer_sets", r->copies, 1);
    kv_num(f, "buffer_sets_wanted", r->copies_wanted, 1);
    kv_num(f, "buffer_set_bytes", r->copy_bytes, 1);
    fputs("\n     ", f);
    kv_num(f, "median_us", r->timed ? r->med : NAN, 1);
    kv_num(f, "p10_us", r->timed ? r->p10 : NAN, 1);
    kv_num(f, "p90_us", r->timed ? r->p90 : NAN, 1);
    kv_num(f, "min_us", r->timed ? r->tmin : NAN, 1);
    kv_num(f, "spread_pct", spread(r), 1);
    kv_num(f, "schedule_us", r->timed ? r->sched_med : NAN, 1);
    fputs("\n     ", f);
    kv_num(f, "tb_per_s", tbs(r), 1);
    kv_num(f, "read_bw_pct", frac(tbs(r), c->read.value), 1);
    kv_num(f, "copy_bw_pct", frac(tbs(r), c->copy.value), 1);
    kv_num(f, "tflop_per_s", tflops(r), 1);
    kv_num(f, "mma_pct", frac(tflops(r), c->mma.value), 1);
    fputs("\n     ", f);
    kv_num(f, "host_us_per_call", r->timed ? r->host_med : NAN, 1);
    kv_num(f, "graph_median_us", r->timed ? r->g_med : NAN, 1);
    kv_num(f, "graph_p10_us", r->timed ? r->g_p10 : NAN, 1);
    kv_num(f, "graph_p90_us", r->timed ? r->g_p90 : NAN, 1);
    kv_bool(f, "graph_failed", r->graph_failed);
    kv_num(f, "host_build_s", r->gen_s, 1);
    kv_num(f, "check_s", r->check_s, 0);
}

int write_json(const char *path, const struct bench *B, const struct shape *sh, int n)
{
    FILE *f = open_output(path);
    if (!f)
        return -1;
    const struct meta *m = B->m;
    fputs("{\n  ", f);
    kv_str(f, "tool", PROG, 1);
    kv_str(f, "libmla_version", mla_version_string(), 1);
    kv_str(f, "header_version", MLA_VERSION_STRING, 1);
    fputs("\n  ", f);
    kv_str(f, "build_info", mla_build_info(), 1);
    fputs("\n  ", f);
    kv_str(f, "date", m->date, 1);
    kv_str(f, "command_line", m->cmdline, 0);
    fputs(",", f);
    write_device(f, m);
    write_settings(f, B);
    write_ceilings(f, B->c);
    fputs("\n  \"shapes\": [", f);
    for (int i = 0; i < n; i++) {
        fputs(i ? ",\n    {" : "\n    {", f);
        write_shape(f, &sh[i], B->c);
        fputs("}", f);
    }
    fputs("\n  ]\n}\n", f);
    return close_output(f, path);
}
