/* mla-bench.c - benchmark libmla's decode over a grid of shapes: each shape
 * checked against the CPU reference, then the whole mla_decode call (or a
 * step of one mla_schedule and N mla_decode_scheduled layers) timed with
 * CUDA events over buffers rotating past the L2, beside measured ceilings,
 * host enqueue cost and CUDA-graph replay time; table on stdout, JSON, CSV
 * and SVG files on request.  Runs on the CPU backend without a GPU.
 *
 * This file holds the run from start to end; tools/bench/ the parts:
 * options.c (command line, presets), roofs.c and read_ptx.c (ceilings),
 * grid.c (shapes, caches), run.c and run_gpu.c (one shape on each
 * backend), table.c, json.c, csv.c and svg.c (reports), util.c.
 * SPDX-License-Identifier: MIT */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench.h"

/* The backend (a GPU unless --cpu or none is usable) and what is known of
 * it; returns the GPU context or NULL. */
static mla_context_t *open_backend(struct opts *o, struct meta *m, int argc, char **argv)
{
    mla_context_t *gctx = NULL;
    memset(m, 0, sizeof(*m));
    if (!o->cpu) {
        char why[512];
        gctx = problem_open_gpu(o->device, why, sizeof(why));
        if (!gctx)
            fprintf(stderr, PROG ": %s; using the CPU backend\n", why);
    }
    m->gpu = gctx != NULL;
    apply_preset(o, m->gpu);
    m->iters = o->iters;
    m->warmup = o->warmup;
    m->cmdline = join_args(argc, argv);
    time_t now = time(NULL);
    struct tm tmv;
    strftime(m->date, sizeof(m->date), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tmv));
    if (!m->gpu) {
        snprintf(m->device, sizeof(m->device), "CPU (%ld cores)", o->cores);
        return NULL;
    }
    snprintf(m->device, sizeof(m->device), "?");
    devmem_device_info(m->device, sizeof(m->device), &m->cc_major, &m->cc_minor, &m->sm_count);
    if (o->l2_mb > 0) {
        m->l2_mb = o->l2_mb;
        snprintf(m->l2_how, sizeof(m->l2_how), "given (--l2-mb)");
    }
    driver_query(m, o->device);
    if (m->l2_mb <= 0) {
        m->l2_mb = DEFAULT_L2_MB;
        snprintf(m->l2_how, sizeof(m->l2_how), "assumed");
    }
    return gctx;
}

/* A ceiling's line: its value (in TFLOP/s when tflops, else TB/s) and how
 * it was found. */
static void print_roof(const char *name, const struct roof *r, int tflops)
{
    char v[48];
    if (!isfinite(r->value)) {
        printf("# %s ceiling: %s\n", name, r->how);
        return;
    }
    if (tflops)
        snprintf(v, sizeof(v), "%.4g TFLOP/s", r->value);
    else
        snprintf(v, sizeof(v), "%.3f TB/s", r->value);
    printf("# %s ceiling %s, %s%s\n", name, v, r->measured ? "measured: " : "", r->how);
}

static void print_time_line(const struct opts *o, const struct meta *m)
{
    const char *what = m->gpu ? "CUDA events around each of" : "host clock around each of";
    if (o->layers)
        printf("# time: %s %d steps (one mla_schedule, then %d mla_decode_scheduled layers, "
               "each on the next buffer set) after %d warm-up steps; times per layer (a step's "
               "/ %d)",
               what, o->iters, o->layers, o->warmup, o->layers);
    else if (m->gpu)
        printf("# time: %s %d back-to-back mla_decode calls after %d warm-up calls", what,
               o->iters, o->warmup);
    else
        printf("# time: %s %d mla_decode calls after %d warm-up calls", what, o->iters,
               o->warmup);
    if (m->gpu)
        printf(", rotating over buffer sets >= 3x the L2 (%.1f MB, %s)", m->l2_mb, m->l2_how);
    printf("\n");
}

/* The lines starting with '#' above the table, and its header. */
static void print_preamble(const struct opts *o, const struct meta *m, const struct ceilings *c,
                           int n)
{
    printf("# " PROG " (libmla %s) %s\n", mla_version_string(), mla_build_info());
    if (m->gpu) {
        char mem[32] = "";
        if (m->gpu_mem_gb > 0)
            snprintf(mem, sizeof(mem), ", %.1f GB", m->gpu_mem_gb);
        printf("# device %d: %s (sm_%d%d, %d SMs%s%s%s)\n", o->device, m->device, m->cc_major,
               m->cc_minor, m->sm_count, mem, m->driver[0] ? ", driver supports CUDA " : "",
               m->driver);
    } else {
        printf("# backend: the CPU reference, %s, host clock timing\n", m->device);
    }
    print_roof("read", &c->read, 0);
    print_roof("copy", &c->copy, 0);
    print_roof("MMA", &c->mma, 1);
    printf("# %%read: TB/s over the read ceiling (decode reads far more than it writes); "
           "%%copy: over the copy ceiling (bytes read + written); %%mma: TFLOP/s over the MMA "
           "ceiling\n");
    if (m->gpu) {
        printf("# kernel family: --kernel %s\n", bench_kernel_names[bench_kernel]);
    }
    print_time_line(o, m);
    printf("# seed %llu; %d shapes\n", (unsigned long long)o->seed, n);
    print_header();
    fflush(stdout);
}

/* Stream and events for the GPU's timing; 0 when ready. */
static int open_timing(struct bench *B)
{
    B->ev = calloc((size_t)B->o->iters + 1, sizeof(*B->ev));
    int ok = B->ev && devmem_stream_create(&B->stream) == 0;
    for (int i = 0; ok && i <= B->o->iters; i++)
        ok = devmem_event_create(&B->ev[i]) == 0;
    if (!ok)
        fprintf(stderr, PROG ": cannot create the stream and events: %s\n", devmem_last_error());
    return ok ? 0 : -1;
}

/* Every shape in turn, a cache generated for each group; 1 if any failed. */
static int run_grid(struct bench *B, struct shape *sh, int n)
{
    int failed = 0, have_base = 0;
    struct problem base;
    memset(&base, 0, sizeof(base));
    for (int i = 0; i < n; i++) {
        struct shape *s = &sh[i];
        char fn[24];
        fprintf(stderr, "[%d/%d] shape %s b%d q%d%s h%d/%d s%d%s%s P%d\n", i + 1, n,
                fmt_name(s->format, s->block, fn, sizeof(fn)), s->batch, s->q_len,
                s->causal && s->q_len > 1 ? " causal" : "", s->h_q, s->h_kv, s->seq,
                s->lens_dist != PROBLEM_LENS_FIXED ? " " : "",
                s->lens_dist != PROBLEM_LENS_FIXED ? problem_lens_name(s->lens_dist) : "",
                s->page);
        if (i == 0 || s->group != sh[i - 1].group) {
            problem_free(&base);
            have_base = generate_group(B, sh, n, i, &base) == 0;
        }
        if (!have_base)
            fail_shape(&s->r, "no cache for this shape (generation failed)");
        else
            run_shape(B, s, i, &base);
        if (s->r.failed) {
            failed = 1;
            fprintf(stderr, PROG ": FAIL %s b%d q%d h%d/%d s%d P%d: %s\n", fn, s->batch,
                    s->q_len, s->h_q, s->h_kv, s->seq, s->page, s->r.note);
        }
        if (s->r.graph_failed)
            failed = 1;
        print_row(s, B->c);
    }
    problem_free(&base);
    return failed;
}

int main(int argc, char **argv)
{
    struct opts o;
    parse_options(&o, argc, argv);
    problem_inputs_init(o.seed);
    mla_context_t *cpu = NULL;
    mla_status_t st = mla_context_create(&cpu, MLA_DEVICE_CPU);
    if (st) {
        fprintf(stderr, PROG ": mla_context_create (cpu): %s\n", mla_status_string(st));
        return 1;
    }
    struct meta m;
    mla_context_t *gctx = open_backend(&o, &m, argc, argv);
    struct ceilings ceil_;
    measure_roofs(&ceil_, &o, &m);
    struct shape *sh;
    int n = build_grid(&o, &sh);
    struct bench B = {.o = &o, .m = &m, .c = &ceil_, .cpu = cpu, .gctx = gctx};
    int ok = !m.gpu || open_timing(&B) == 0;
    print_preamble(&o, &m, &ceil_, n);
    int failed = ok ? run_grid(&B, sh, n) : 1;
    if (o.json && write_json(o.json, &B, sh, n))
        failed = 1;
    if (o.csv && write_csv(o.csv, &B, sh, n))
        failed = 1;
    if (o.svg && write_svg(o.svg, &B, sh, n))
        failed = 1;

    for (int i = 0; i < n; i++)
        free(sh[i].lens);
    free(sh);
    if (B.ev)
        for (int i = 0; i <= o.iters; i++)
            devmem_event_destroy(B.ev[i]);
    free(B.ev);
    devmem_stream_destroy(B.stream);
    free(m.cmdline);
    mla_context_destroy(gctx);
    mla_context_destroy(cpu);
    if (m.gpu)
        devmem_fini();
    return failed;
}
