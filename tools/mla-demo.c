/* mla-demo.c - run a DeepSeek-V3-shaped MLA decode on the GPU (or the CPU
 * backend), check it against the CPU reference, print a table.
 * SPDX-License-Identifier: MIT */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "devmem.h"
#include "fp8_codec.h"
#include "mla.h"
#include "problem.h"

struct opts {
    int heads, kv_heads, batch, seq_len, varlen, q_len, causal, page_size;
    int format, scale_block, iters, cpu, device, sample;
    uint64_t seed;
    int batch_set, seq_set, scale_set;
};


static void die_status(const char *what, mla_status_t st, const mla_context_t *ctx)
{
    fprintf(stderr, "mla-demo: %s: %s: %s\n", what, mla_status_string(st),
            mla_context_last_error(ctx));
    exit(1);
}

static mla_config_t *make_config(const struct opts *o)
{
    mla_config_t *cfg;
    if (mla_config_create(&cfg))
        exit(1);
    struct { mla_param_t p; int64_t v; } set[] = {
        {MLA_PARAM_NUM_HEADS, o->heads}, {MLA_PARAM_NUM_KV_HEADS, o->kv_heads},
        {MLA_PARAM_Q_LEN, o->q_len}, {MLA_PARAM_CAUSAL, o->causal},
        {MLA_PARAM_PAGE_SIZE, o->page_size}, {MLA_PARAM_KV_FORMAT, o->format},
        {MLA_PARAM_SCALE_BLOCK_SIZE, o->scale_block},
    };
    for (size_t i = 0; i < sizeof(set) / sizeof(set[0]); i++) {
        mla_status_t st = mla_config_set_int(cfg, set[i].p, set[i].v);
        if (st) {
            fprintf(stderr, "mla-demo: %s\n", mla_config_last_error(cfg));
            exit(2);
        }
    }
    return cfg;
}

/* Random lengths, permuted pages, random latent rows written through the
 * CPU backend's append (so the cache is quantized exactly as an engine's
 * would be), NaN in every row no request uses. */
static void make_problem(struct problem *p, const struct opts *o, const mla_config_t *cfg)
{
    int32_t *lens = problem_xalloc("mla-demo", sizeof(int32_t) * o->batch);
    problem_draw_lens(lens, o->batch, o->seq_len,
                      o->varlen ? PROBLEM_LENS_NORMAL : PROBLEM_LENS_FIXED, o->q_len, o->seed);
    long threads = sysconf(_SC_NPROCESSORS_ONLN);
    if (problem_generate(p, cfg, o->batch, lens, o->seed, threads > 0 ? (int)threads : 1) ||
        problem_make_q(p, o->q_len, o->heads, problem_hash(o->seed, 0x51))) {
        fprintf(stderr, "mla-demo: %s\n", problem_last_error());
        exit(1);
    }
    free(lens);
}

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

static const char *format_name(int f)
{
    return f == MLA_KV_BF16 ? "bf16" : f == MLA_KV_FP8_E4M3 ? "fp8" : "fp8-ds-mla";
}

/* A GPU row has every column; a CPU row only its time: the CPU backend is
 * the reference, so it has no error to measure, and it is not built for
 * speed, so its rates would only be noise. */
static void print_row(const char *backend, const struct opts *o, const struct problem *p,
                      double us, double spread, double bytes, double flops, double max_err,
                      const char *verdict)
{
    char fmt[32];
    if (o->format == MLA_KV_FP8_E4M3 && o->scale_block)
        snprintf(fmt, sizeof(fmt), "fp8/g%d", o->scale_block);
    else
        snprintf(fmt, sizeof(fmt), "%s", format_name(o->format));
    printf("%-5s %5d %4d %5d %6d %-10s %4d %10.1f ", backend, p->batch, p->heads, p->q_len,
           o->seq_len, fmt, p->page_size, us);
    if (strcmp(backend, "gpu") == 0)
        printf("%6.1f%% %7.3f %8.1f %10.2e  %s\n", spread, bytes / (us * 1e-6) / 1e12,
               flops / (us * 1e-6) / 1e12, max_err, verdict);
    else
        printf("%7s %7s %8s %10s  %s\n", "-", "-", "-", "-", verdict);
}

static void print_header(void)
{
    printf("%-5s %5s %4s %5s %6s %-10s %4s %10s %7s %7s %8s %10s  %s\n", "back", "batch", "h_q",
           "q_len", "s_k", "format", "page", "time_us", "spread", "TB/s", "TFLOP/s", "max_err",
           "check");
}

#define CK(call)                                                                   \
    do {                                                                           \
        if ((call) != 0) {                                                         \
            fprintf(stderr, "mla-demo: %s failed: %s\n", #call, devmem_last_error()); \
            exit(1);                                                               \
        }                                                                          \
    } while (0)

static int run_gpu(const struct opts *o, mla_context_t *gctx, mla_context_t *cpu,
                   const mla_config_t *cfg, const struct problem *p)
{
    mla_plan_t *plan;
    size_t ws_bytes;
    mla_status_t st = mla_plan_create(&plan, gctx, cfg, p->batch, p->max_len);
    if (st)
        die_status("mla_plan_create", st, gctx);
    mla_plan_workspace_size(plan, &ws_bytes);

    devmem_ptr d_q, d_kv, d_sc = 0, d_tab, d_len, d_out, d_lse, d_ws;
    CK(devmem_alloc(&d_q, p->q_bytes));
    CK(devmem_alloc(&d_kv, p->kv_bytes));
    if (p->scales)
        CK(devmem_alloc(&d_sc, p->scale_bytes));
    CK(devmem_alloc(&d_tab, sizeof(int32_t) * p->batch * p->max_pages));
    CK(devmem_alloc(&d_len, sizeof(int32_t) * p->batch));
    CK(devmem_alloc(&d_out, p->out_bytes));
    CK(devmem_alloc(&d_lse, p->lse_bytes));
    CK(devmem_alloc(&d_ws, ws_bytes));
    CK(devmem_htod(d_q, p->q, p->q_bytes));
    CK(devmem_htod(d_kv, p->kv, p->kv_bytes));
    if (p->scales)
        CK(devmem_htod(d_sc, p->scales, p->scale_bytes));
    CK(devmem_htod(d_tab, p->table, sizeof(int32_t) * p->batch * p->max_pages));
    CK(devmem_htod(d_len, p->lens, sizeof(int32_t) * p->batch));
    CK(devmem_memset8(d_out, 0xff, p->out_bytes));
    CK(devmem_memset8(d_lse, 0xff, p->lse_bytes));

    devmem_stream s;
    CK(devmem_stream_create(&s));
#define DECODE()                                                                            \
    mla_decode(plan, (void *)d_q, (void *)d_kv, (float *)d_sc, p->num_pages,                 \
               (int32_t *)d_tab, p->max_pages, (int32_t *)d_len, (void *)d_out, (float *)d_lse, \
               (void *)d_ws, ws_bytes, s)
    if ((st = DECODE()))
        die_status("mla_decode", st, gctx);
    CK(devmem_stream_sync(s));
    mla_status_t dst;
    if ((st = mla_workspace_status(plan, (void *)d_ws, &dst)) || dst)
        die_status("device-side check", st ? st : dst, gctx);

    /* Check sampled requests against the CPU reference. */
    uint16_t *out = problem_xalloc("mla-demo", p->out_bytes);
    float *lse = problem_xalloc("mla-demo", p->lse_bytes);
    CK(devmem_dtoh(out, d_out, p->out_bytes));
    CK(devmem_dtoh(lse, d_lse, p->lse_bytes));
    int nreq = p->batch < o->sample ? p->batch : o->sample;
    int *reqs = problem_xalloc("mla-demo", sizeof(int) * nreq);
    for (int i = 0; i < nreq; i++)
        reqs[i] = (int)((int64_t)i * p->batch / nreq);
    size_t orow = (size_t)p->q_len * p->heads * 512, lrow = (size_t)p->heads * p->q_len;
    uint16_t *ref = problem_xalloc("mla-demo", sizeof(uint16_t) * orow * nreq), *got = problem_xalloc("mla-demo", sizeof(uint16_t) * orow * nreq);
    float *lref = problem_xalloc("mla-demo", sizeof(float) * lrow * nreq), *lgot = problem_xalloc("mla-demo", sizeof(float) * lrow * nreq);
    if ((st = problem_cpu_reference(p, cpu, cfg, reqs, nreq, ref, lref))) {
        fprintf(stderr, "mla-demo: %s\n", problem_last_error());
        exit(1);
    }
    for (int i = 0; i < nreq; i++) {
        memcpy(got + orow * i, out + orow * reqs[i], sizeof(uint16_t) * orow);
        memcpy(lgot + lrow * i, lse + lrow * reqs[i], sizeof(float) * lrow);
    }
    double max_err, cos_diff;
    long bad = problem_compare(got, ref, orow * nreq, lgot, lref, lrow * nreq, &max_err, &cos_diff);

    /* Time the full decode call (schedule + decode + combine). */
    devmem_event e0, e1;
    CK(devmem_event_create(&e0));
    CK(devmem_event_create(&e1));
    for (int i = 0; i < 3; i++)
        DECODE();
    float *ms = problem_xalloc("mla-demo", sizeof(float) * o->iters);
    for (int i = 0; i < o->iters; i++) {
        CK(devmem_event_record(e0, s));
        if ((st = DECODE()))
            die_status("mla_decode", st, gctx);
        CK(devmem_event_record(e1, s));
        CK(devmem_event_sync(e1));
        CK(devmem_event_elapsed_ms(&ms[i], e0, e1));
    }
    qsort(ms, o->iters, sizeof(float), cmp_float);
    double med = ms[o->iters / 2] * 1e3;
    double spread = 100.0 * (ms[(o->iters * 9) / 10] - ms[o->iters / 10]) * 1e3 / med;
    double bytes, flops;
    problem_work(p, o->causal, &bytes, &flops, NULL);
    char verdict[64];
    snprintf(verdict, sizeof(verdict), "%s (%d req)", bad ? "FAIL" : "PASS", nreq);
    print_header();
    print_row("gpu", o, p, med, spread, bytes, flops, max_err, verdict);
    if (bad)
        fprintf(stderr, "mla-demo: %ld elements outside tolerance (cosine diff %.3g)\n", bad,
                cos_diff);

    devmem_event_destroy(e0);
    devmem_event_destroy(e1);
    devmem_stream_destroy(s);
    devmem_free(d_q); devmem_free(d_kv); devmem_free(d_sc); devmem_free(d_tab);
    devmem_free(d_len); devmem_free(d_out); devmem_free(d_lse); devmem_free(d_ws);
    free(out); free(lse); free(reqs); free(ref); free(got); free(lref); free(lgot); free(ms);
    mla_plan_destroy(plan);
    return bad ? 1 : 0;
}

static int run_cpu(const struct opts *o, mla_context_t *cpu, const mla_config_t *cfg,
                   const struct problem *p)
{
    uint16_t *out = problem_xalloc("mla-demo", p->out_bytes);
    float *lse = problem_xalloc("mla-demo", p->lse_bytes);
    int *reqs = problem_xalloc("mla-demo", sizeof(int) * p->batch);
    memset(out, 0xff, p->out_bytes);
    for (int i = 0; i < p->batch; i++)
        reqs[i] = i;
    double t0 = problem_now_s();
    if (problem_cpu_reference(p, cpu, cfg, reqs, p->batch, out, lse)) {
        fprintf(stderr, "mla-demo: %s\n", problem_last_error());
        exit(1);
    }
    double us = (problem_now_s() - t0) * 1e6;
    /* The CPU backend is the reference: check that every output was
     * written, finite, and that LSE is +inf exactly where a row saw no key. */
    long bad = 0;
    for (size_t i = 0; i < p->out_bytes / 2; i++)
        bad += !isfinite(mla_bf16_to_float(out[i]));
    for (size_t i = 0; i < p->lse_bytes / 4; i++)
        bad += isnan(lse[i]);
    print_header();
    print_row("cpu", o, p, us, 0.0, 0.0, 0.0, 0.0, bad ? "FAIL (not finite)" : "finite");
    printf("The CPU backend is the reference that GPU results are checked against:\n"
           "this run checked only that its output is finite, and its time is the host's\n"
           "wall clock for one call, not a performance figure.\n");
    free(out);
    free(lse);
    free(reqs);
    return bad ? 1 : 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mla-demo [options]\n"
            "  --heads N        query heads (128)\n"
            "  --kv-heads N     KV heads (1)\n"
            "  --batch N        requests (GPU 64, CPU 2)\n"
            "  --seq-len N      cache length, the mean with --varlen (GPU 4096, CPU 512)\n"
            "  --varlen         lengths ~ N(seq_len, seq_len/2), clamped to [1, 2 seq_len]\n"
            "  --q-len N        query tokens per request (1)\n"
            "  --causal         causal mask for q_len > 1\n"
            "  --page-size N    tokens per page (64)\n"
            "  --format F       bf16 | fp8 | fp8-ds-mla (fp8)\n"
            "  --scale-block N  fp8 block scale size 0|32|64|128 (128 for fp8)\n"
            "  --iters N        timed iterations on the GPU (50)\n"
            "  --sample N       requests checked against the CPU reference (4)\n"
            "  --cpu            use the CPU backend even if a GPU is present\n"
            "  --device N       CUDA device ordinal (0)\n"
            "  --seed N         random seed (time)\n"
            "  --help, --version\n");
}

static int parse_int(const char *s, const char *name, int lo, int hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) {
        fprintf(stderr, "mla-demo: --%s %s: want an integer in [%d, %d]\n", name, s, lo, hi);
        exit(2);
    }
    return (int)v;
}

int main(int argc, char **argv)
{
    struct opts o = {.heads = 128, .kv_heads = 1, .q_len = 1, .page_size = 64,
                     .format = MLA_KV_FP8_E4M3, .iters = 50, .sample = 4,
                     .seed = (uint64_t)time(NULL)};
    static const struct option lo[] = {
        {"heads", 1, 0, 'h'}, {"kv-heads", 1, 0, 'k'}, {"batch", 1, 0, 'b'},
        {"seq-len", 1, 0, 's'}, {"varlen", 0, 0, 'v'}, {"q-len", 1, 0, 'q'},
        {"causal", 0, 0, 'c'}, {"page-size", 1, 0, 'p'}, {"format", 1, 0, 'f'},
        {"scale-block", 1, 0, 'g'}, {"iters", 1, 0, 'i'}, {"sample", 1, 0, 'S'},
        {"cpu", 0, 0, 'C'}, {"device", 1, 0, 'd'}, {"seed", 1, 0, 'r'},
        {"help", 0, 0, 'H'}, {"version", 0, 0, 'V'}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case 'h': o.heads = parse_int(optarg, "heads", 1, 128); break;
        case 'k': o.kv_heads = parse_int(optarg, "kv-heads", 1, 128); break;
        case 'b': o.batch = parse_int(optarg, "batch", 1, 65535); o.batch_set = 1; break;
        case 's': o.seq_len = parse_int(optarg, "seq-len", 0, 1 << 20); o.seq_set = 1; break;
        case 'v': o.varlen = 1; break;
        case 'q': o.q_len = parse_int(optarg, "q-len", 1, 8); break;
        case 'c': o.causal = 1; break;
        case 'p': o.page_size = parse_int(optarg, "page-size", 1, 1024); break;
        case 'f':
            if (!strcmp(optarg, "bf16")) o.format = MLA_KV_BF16;
            else if (!strcmp(optarg, "fp8")) o.format = MLA_KV_FP8_E4M3;
            else if (!strcmp(optarg, "fp8-ds-mla")) o.format = MLA_KV_FP8_DS_MLA;
            else { fprintf(stderr, "mla-demo: --format %s: want bf16, fp8 or fp8-ds-mla\n", optarg); return 2; }
            break;
        case 'g': o.scale_block = parse_int(optarg, "scale-block", 0, 128); o.scale_set = 1; break;
        case 'i': o.iters = parse_int(optarg, "iters", 1, 100000); break;
        case 'S': o.sample = parse_int(optarg, "sample", 1, 65535); break;
        case 'C': o.cpu = 1; break;
        case 'd': o.device = parse_int(optarg, "device", 0, 1023); break;
        case 'r': o.seed = strtoull(optarg, NULL, 0); break;
        case 'H': usage(stdout); return 0;
        case 'V': printf("mla-demo (libmla) %s\n%s\n", mla_version_string(), mla_build_info()); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        usage(stderr);
        return 2;
    }
    if (!o.scale_set)
        o.scale_block = o.format == MLA_KV_FP8_E4M3 ? 128 : 0;
    problem_inputs_init(o.seed);

    mla_context_t *cpu, *gctx = NULL;
    mla_status_t st = mla_context_create(&cpu, MLA_DEVICE_CPU);
    if (st)
        die_status("mla_context_create (cpu)", st, NULL);
    char why[512] = "asked for with --cpu";
    if (!o.cpu)
        gctx = problem_open_gpu(o.device, why, sizeof(why));
    if (!o.batch_set)
        o.batch = gctx ? 64 : 2;
    if (!o.seq_set)
        o.seq_len = gctx ? 4096 : 512;

    mla_config_t *cfg = make_config(&o);
    printf("libmla %s  %s\nseed %llu\n", mla_version_string(), mla_build_info(),
           (unsigned long long)o.seed);
    if (gctx) {
        char name[128] = "?";
        int maj = 0, min = 0, sms = 0;
        devmem_device_info(name, sizeof(name), &maj, &min, &sms);
        printf("device %d: %s (sm_%d%d, %d SMs)\n", o.device, name, maj, min, sms);
    } else {
        printf("backend: the CPU reference (%s)\n", why);
    }
    struct problem p;
    make_problem(&p, &o, cfg);
    int rc = gctx ? run_gpu(&o, gctx, cpu, cfg, &p) : run_cpu(&o, cpu, cfg, &p);
    problem_free(&p);
    mla_config_destroy(cfg);
    int on_gpu = gctx != NULL;
    mla_context_destroy(gctx);
    mla_context_destroy(cpu);
    if (on_gpu)
        devmem_fini();
    return rc;
}
