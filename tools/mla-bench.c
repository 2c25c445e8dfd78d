/* mla-bench.c - benchmark libmla's decode over a grid of shapes: each shape
 * checked against the CPU reference, then the whole mla_decode call timed
 * with CUDA events over buffers rotating past the L2, beside measured
 * ceilings, host enqueue cost and CUDA-graph replay time; table on stdout,
 * JSON, CSV and SVG files on request.  Runs on the CPU backend without a GPU.
 * SPDX-License-Identifier: MIT */
#include <dlfcn.h>
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "devmem.h"
#include "mla.h"
#include "mla_experimental.h"
#include "problem.h"

#define PROG "mla-bench"
#define MAX_LIST 32
#define MAX_FORMATS 16
#define MAX_SHAPES 4096
#define MAX_COPIES 4096
#define DEFAULT_L2_MB 60.0
#define DEFAULT_MMA_TFLOPS 750.0
#define CEIL_GPU_BYTES ((size_t)2 << 30) /* the copy probe's buffer */
#define CEIL_CPU_BYTES ((size_t)128 << 20)

/* ------------------------------------------------------------------ */
/* Options */

struct ilist {
    int n;
    int v[MAX_LIST];
};

struct kvfmt {
    int format, block; /* mla_kv_format_t, scale block (fp8 only) */
};

struct opts {
    const char *preset;
    const char *format_arg; /* NULL: fp8 */
    struct ilist batch, q_len, heads, seq, page, block;
    int kv_heads, causal, varlen;
    int iters, warmup, check_requests, cpu, device, threads, no_ceilings, corrupt;
    double l2_mb, mma_tflops; /* < 0: not given */
    const char *json, *csv, *svg;
    uint64_t seed;
    /* Given on the command line (a preset does not override them). */
    int set_batch, set_q_len, set_heads, set_seq, set_iters, set_warmup;
    struct kvfmt fmts[MAX_FORMATS];
    int nfmt;
};

/* ------------------------------------------------------------------ */
/* Shapes and results */

struct result {
    int timed;        /* timing numbers valid */
    int failed;       /* check failed or the shape could not run */
    int graph_failed; /* capture or replay failed */
    char check[48];
    char note[320];
    double s_mean;
    int s_min, s_max;
    double keys, bytes, flops;
    double med, p10, p90, tmin; /* us */
    double host_med;            /* us */
    double g_med, g_p10, g_p90; /* us, NAN without graphs */
    int copies, copies_wanted;
    double copy_bytes; /* bytes of one rotating buffer set */
    int nreq;
    long bad;
    double max_err, cos_diff;
    double gen_s, check_s; /* host seconds: building the shape, checking it */
};

struct shape {
    int format, block, page, h_kv, h_q, q_len, causal, batch, seq, varlen;
    int group; /* shapes of one group share a generated cache */
    int32_t *lens;
    struct result r;
};

struct ceilings {
    double copy_tbs; /* NAN: none */
    int copy_measured;
    char copy_how[192];
    double mma_tflops; /* NAN: none */
    int mma_measured;
    char mma_how[192];
};

struct meta {
    int gpu;
    char device[160];
    int cc_major, cc_minor, sm_count;
    char driver[32]; /* CUDA version the driver supports, "" if unknown */
    double gpu_mem_gb;
    double l2_mb;
    char l2_how[64];
    char date[32];
    char *cmdline;
    int iters, warmup;
};

struct bench {
    struct opts *o;
    struct meta *m;
    struct ceilings *c;
    mla_context_t *cpu, *gctx;
    devmem_stream stream;
    devmem_event *ev; /* iters + 1 */
};

/* ------------------------------------------------------------------ */
/* Small helpers */

static void *xalloc(size_t bytes)
{
    void *p = aligned_alloc(256, (bytes + 255) / 256 * 256 + 256 * (bytes == 0));
    if (!p) {
        fprintf(stderr, PROG ": out of host memory (%zu bytes)\n", bytes);
        exit(1);
    }
    return p;
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Percentile q of sorted x[n], linear between neighbours. */
static double pct(const double *x, int n, double q)
{
    if (n <= 0)
        return NAN;
    double h = q * (n - 1);
    int i = (int)floor(h);
    if (i >= n - 1)
        return x[n - 1];
    return x[i] + (h - i) * (x[i + 1] - x[i]);
}

static const char *fmt_name(int format, int block, char *buf, size_t n)
{
    if (format == MLA_KV_BF16)
        snprintf(buf, n, "bf16");
    else if (format == MLA_KV_FP8_DS_MLA)
        snprintf(buf, n, "fp8-ds-mla");
    else if (block)
        snprintf(buf, n, "fp8/g%d", block);
    else
        snprintf(buf, n, "fp8");
    return buf;
}

/* --kernel: the MLA_XPARAM_KERNEL of every plan, by name. */
static const char *const kernel_names[] = {
    [MLA_XKERNEL_AUTO] = "auto",
    [MLA_XKERNEL_PORTABLE] = "portable",
    [MLA_XKERNEL_HOPPER] = "hopper",
    [MLA_XKERNEL_HOPPER_WIDE] = "hopper-wide",
    [MLA_XKERNEL_HOPPER_NARROW] = "hopper-narrow",
    [MLA_XKERNEL_HOPPER_PAIR] = "hopper-pair",
};
static int g_kernel = MLA_XKERNEL_AUTO;

static const char *kv_name(int format)
{
    return format == MLA_KV_BF16 ? "bf16" : format == MLA_KV_FP8_E4M3 ? "fp8" : "fp8-ds-mla";
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " [options]\n"
            "grid (comma-separated lists; the grid is their cross product):\n"
            "  --preset NAME      deepseek-v3-tp1 | deepseek-v3-tp8 | kimi | mtp\n"
            "  --format LIST      bf16, fp8, fp8/gN, fp8-ds-mla, all (fp8 = fp8/g128)\n"
            "  --scale-block LIST fp8 block-scale sizes 0|32|64|128 (128)\n"
            "  --batch LIST       requests per call (GPU 64, CPU 2)\n"
            "  --seq-len LIST     cache length, the mean with --varlen (GPU 4096, CPU 512)\n"
            "  --varlen           lengths ~ N(s, s/2) clamped to [1, 2s]\n"
            "  --q-len LIST       query tokens per request, 1..8 (1)\n"
            "  --heads LIST       query heads, 1..128 (128)\n"
            "  --kv-heads N       KV heads, dividing every --heads value (1)\n"
            "  --page-size LIST   tokens per page, powers of two up to 1024 (64)\n"
            "  --causal           causal mask for q_len > 1\n"
            "measurement:\n"
            "  --iters N          timed calls per shape (GPU 50, CPU 3)\n"
            "  --warmup N         untimed calls first (GPU 5, CPU 1)\n"
            "  --check-requests N requests checked against the CPU reference (4)\n"
            "  --l2-mb X          L2 size to rotate past (the driver's, else 60)\n"
            "  --mma-tflops X     compute ceiling, assumed (GPU 750; CPU none)\n"
            "  --no-ceilings      do not measure the copy bandwidth\n"
            "output:\n"
            "  --json FILE, --csv FILE, --svg FILE\n"
            "other:\n"
            "  --cpu              use the CPU backend even if a GPU is present\n"
            "  --device N         CUDA device ordinal (0)\n"
            "  --kernel NAME      auto | portable | hopper | hopper-wide | hopper-narrow |\n"
            "                     hopper-pair (auto; experimental)\n"
            "  --threads N        host threads generating caches (online cores)\n"
            "  --seed N           random seed (time)\n"
            "  --corrupt-check    alter one output before each check (tests the guard)\n"
            "  --help, --version\n");
}

static void bad_arg(const char *name, const char *s, const char *want)
{
    fprintf(stderr, PROG ": --%s %s: want %s\n", name, s, want);
    exit(2);
}

static int parse_int(const char *s, const char *name, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        char want[96];
        snprintf(want, sizeof(want), "an integer in [%ld, %ld]", lo, hi);
        bad_arg(name, s, want);
    }
    return (int)v;
}

static double parse_double(const char *s, const char *name, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        char want[96];
        snprintf(want, sizeof(want), "a number in [%g, %g]", lo, hi);
        bad_arg(name, s, want);
    }
    return v;
}

static void parse_list(struct ilist *l, const char *s, const char *name, long lo, long hi)
{
    char tok[64];
    l->n = 0;
    for (const char *t = s;;) {
        size_t len = strcspn(t, ",");
        if (len == 0 || len >= sizeof(tok))
            bad_arg(name, s, "a comma-separated list of integers");
        if (l->n == MAX_LIST)
            bad_arg(name, s, "at most 32 values");
        memcpy(tok, t, len);
        tok[len] = '\0';
        int v = parse_int(tok, name, lo, hi), dup = 0;
        for (int i = 0; i < l->n; i++)
            dup |= l->v[i] == v;
        if (!dup)
            l->v[l->n++] = v;
        if (t[len] == '\0')
            break;
        t += len + 1;
    }
}

static void set_list(struct ilist *l, int n, const int *v)
{
    l->n = n;
    memcpy(l->v, v, sizeof(int) * (size_t)n);
}

static void add_format(struct opts *o, int format, int block)
{
    for (int i = 0; i < o->nfmt; i++)
        if (o->fmts[i].format == format && o->fmts[i].block == block)
            return;
    if (o->nfmt == MAX_FORMATS) {
        fprintf(stderr, PROG ": too many formats\n");
        exit(2);
    }
    o->fmts[o->nfmt].format = format;
    o->fmts[o->nfmt].block = block;
    o->nfmt++;
}

static void parse_formats(struct opts *o)
{
    const char *s = o->format_arg ? o->format_arg : "fp8";
    char buf[256];
    if (strlen(s) >= sizeof(buf))
        bad_arg("format", s, "a shorter list");
    snprintf(buf, sizeof(buf), "%s", s);
    char *save = NULL;
    o->nfmt = 0;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "all")) {
            add_format(o, MLA_KV_BF16, 0);
            add_format(o, MLA_KV_FP8_E4M3, 128);
            add_format(o, MLA_KV_FP8_DS_MLA, 0);
        } else if (!strcmp(t, "bf16")) {
            add_format(o, MLA_KV_BF16, 0);
        } else if (!strcmp(t, "fp8-ds-mla")) {
            add_format(o, MLA_KV_FP8_DS_MLA, 0);
        } else if (!strcmp(t, "fp8")) {
            for (int i = 0; i < o->block.n; i++)
                add_format(o, MLA_KV_FP8_E4M3, o->block.v[i]);
        } else if (!strncmp(t, "fp8/g", 5)) {
            int g = parse_int(t + 5, "format", 0, 128);
            if (g != 0 && g != 32 && g != 64 && g != 128)
                bad_arg("format", t, "fp8/g0, fp8/g32, fp8/g64 or fp8/g128");
            add_format(o, MLA_KV_FP8_E4M3, g);
        } else {
            bad_arg("format", t, "bf16, fp8, fp8/gN, fp8-ds-mla or all");
        }
    }
    if (o->nfmt == 0)
        bad_arg("format", s, "at least one format");
}

/* Presets: lists for options not given on the command line. */
static void apply_preset(struct opts *o, int gpu)
{
    static const int b_gpu[] = {1, 8, 64, 132}, s_gpu[] = {1024, 4096, 8192};
    static const int b_mtp[] = {1, 64, 132}, s_mtp[] = {4096, 8192};
    static const int b_cpu[] = {1, 3}, s_cpu[] = {128, 512};
    static const int h128[] = {128}, h16[] = {16}, h64[] = {64}, hmtp[] = {16, 128};
    static const int q1[] = {1}, qmtp[] = {2, 4};
    const int *h = NULL, *q = q1, *b = gpu ? b_gpu : b_cpu, *s = gpu ? s_gpu : s_cpu;
    int nh = 1, nq = 1, nb = gpu ? 4 : 2, ns = gpu ? 3 : 2;
    const char *p = o->preset;
    if (!p) {
        static const int b_def_gpu[] = {64}, s_def_gpu[] = {4096};
        static const int b_def_cpu[] = {2}, s_def_cpu[] = {512};
        h = h128;
        b = gpu ? b_def_gpu : b_def_cpu;
        s = gpu ? s_def_gpu : s_def_cpu;
        nb = ns = 1;
    } else if (!strcmp(p, "deepseek-v3-tp1")) {
        h = h128;
    } else if (!strcmp(p, "deepseek-v3-tp8")) {
        h = h16;
    } else if (!strcmp(p, "kimi")) {
        h = h64;
    } else if (!strcmp(p, "mtp")) {
        h = hmtp;
        nh = 2;
        q = qmtp;
        nq = 2;
        o->causal = 1;
        if (gpu) {
            b = b_mtp;
            s = s_mtp;
            nb = 3;
            ns = 2;
        }
    } else {
        bad_arg("preset", p, "deepseek-v3-tp1, deepseek-v3-tp8, kimi or mtp");
    }
    if (!o->set_heads)
        set_list(&o->heads, nh, h);
    if (!o->set_q_len)
        set_list(&o->q_len, nq, q);
    if (!o->set_batch)
        set_list(&o->batch, nb, b);
    if (!o->set_seq)
        set_list(&o->seq, ns, s);
    if (!o->set_iters)
        o->iters = gpu ? 50 : 3;
    if (!o->set_warmup)
        o->warmup = gpu ? 5 : 1;
}

static char *join_args(int argc, char **argv)
{
    size_t n = 1;
    for (int i = 0; i < argc; i++)
        n += 4 * strlen(argv[i]) + 3;
    char *s = xalloc(n), *w = s;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int plain = *a != '\0';
        for (const char *c = a; *c; c++)
            plain &= (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                             "0123456789-_=.,/:+@%", *c) != NULL);
        if (i)
            *w++ = ' ';
        if (plain) {
            w += sprintf(w, "%s", a);
        } else {
            *w++ = '\'';
            for (const char *c = a; *c; c++) {
                if (*c == '\'')
                    w += sprintf(w, "'\\''");
                else
                    *w++ = *c;
            }
            *w++ = '\'';
        }
    }
    *w = '\0';
    return s;
}

/* ------------------------------------------------------------------ */
/* What the driver can tell beyond devmem: L2 size, memory, version.
 * devmem_init has loaded libcuda already; RTLD_NOLOAD only finds it. */

static void driver_query(struct meta *m, int device)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return;
    int (*get_version)(int *) = (int (*)(int *))dlsym(h, "cuDriverGetVersion");
    int (*dev_get)(int *, int) = (int (*)(int *, int))dlsym(h, "cuDeviceGet");
    int (*get_attr)(int *, int, int) = (int (*)(int *, int, int))dlsym(h, "cuDeviceGetAttribute");
    int (*total_mem)(size_t *, int) = (int (*)(size_t *, int))dlsym(h, "cuDeviceTotalMem_v2");
    int v = 0, dev = 0, l2 = 0;
    size_t mem = 0;
    if (get_version && get_version(&v) == 0 && v > 0)
        snprintf(m->driver, sizeof(m->driver), "%d.%d", v / 1000, v % 1000 / 10);
    if (dev_get && dev_get(&dev, device) == 0) {
        /* 38: CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, in bytes. */
        if (m->l2_mb <= 0 && get_attr && get_attr(&l2, 38, dev) == 0 && l2 > 0) {
            m->l2_mb = l2 / 1e6;
            snprintf(m->l2_how, sizeof(m->l2_how), "from the driver");
        }
        if (total_mem && total_mem(&mem, dev) == 0)
            m->gpu_mem_gb = mem / 1e9;
    }
    dlclose(h);
}

/* ------------------------------------------------------------------ */
/* Ceilings */

static void measure_gpu_copy(struct ceilings *c)
{
    devmem_ptr a = 0, b = 0;
    size_t bytes = CEIL_GPU_BYTES;
    for (; bytes >= ((size_t)64 << 20); bytes /= 2) {
        if (devmem_alloc(&a, bytes) == 0) {
            if (devmem_alloc(&b, bytes) == 0)
                break;
            devmem_free(a);
            a = 0;
        }
    }
    if (!b) {
        snprintf(c->copy_how, sizeof(c->copy_how), "not measured: no device memory for the probe");
        return;
    }
    devmem_event e0 = NULL, e1 = NULL;
    enum { REPS = 5 };
    double ms[REPS];
    int ok = devmem_memset8(a, 0x3c, bytes) == 0 && devmem_memset8(b, 0, bytes) == 0 &&
             devmem_event_create(&e0) == 0 && devmem_event_create(&e1) == 0 &&
             devmem_dtod(b, a, bytes) == 0 && devmem_sync() == 0;
    for (int i = 0; ok && i < REPS; i++) {
        float t = 0;
        ok = devmem_event_record(e0, NULL) == 0 && devmem_dtod(b, a, bytes) == 0 &&
             devmem_event_record(e1, NULL) == 0 && devmem_event_sync(e1) == 0 &&
             devmem_event_elapsed_ms(&t, e0, e1) == 0 && t > 0;
        ms[i] = t;
    }
    if (ok) {
        qsort(ms, REPS, sizeof(double), cmp_double);
        c->copy_tbs = 2.0 * bytes / (pct(ms, REPS, 0.5) * 1e-3) / 1e12;
        c->copy_measured = 1;
        snprintf(c->copy_how, sizeof(c->copy_how),
                 "cuMemcpyDtoD of %zu MiB timed with events, bytes read + written, median of %d%s",
                 bytes >> 20, REPS, bytes < CEIL_GPU_BYTES ? " (2 GiB could not be allocated)" : "");
    } else {
        snprintf(c->copy_how, sizeof(c->copy_how), "not measured: the copy probe failed: %s",
                 devmem_last_error());
    }
    devmem_event_destroy(e0);
    devmem_event_destroy(e1);
    devmem_free(a);
    devmem_free(b);
}

static void measure_cpu_copy(struct ceilings *c)
{
    size_t bytes = CEIL_CPU_BYTES;
    char *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b) {
        snprintf(c->copy_how, sizeof(c->copy_how), "not measured: no host memory for the probe");
        free(a);
        free(b);
        return;
    }
    enum { REPS = 5 };
    double t[REPS];
    memset(a, 0x3c, bytes);
    memset(b, 0, bytes);
    memcpy(b, a, bytes);
    for (int i = 0; i < REPS; i++) {
        double t0 = now_s();
        memcpy(b, a, bytes);
        t[i] = now_s() - t0;
        /* Keep the copies from being optimized away. */
        a[(size_t)i * 4096 % bytes] ^= b[(size_t)(i + 1) * 4096 % bytes];
    }
    qsort(t, REPS, sizeof(double), cmp_double);
    c->copy_tbs = 2.0 * bytes / pct(t, REPS, 0.5) / 1e12;
    c->copy_measured = 1;
    snprintf(c->copy_how, sizeof(c->copy_how),
             "host memcpy of %zu MiB, bytes read + written, median of %d", bytes >> 20, REPS);
    free(a);
    free(b);
}

/* ------------------------------------------------------------------ */
/* One shape */

static mla_config_t *shape_config(const struct shape *sh, int heads, char *err, size_t errlen)
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
        {MLA_XPARAM_KERNEL, g_kernel, "kernel"},
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

static void fail_shape(struct result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void fail_shape(struct result *r, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(r->note, sizeof(r->note), fmt, ap);
    va_end(ap);
    r->failed = 1;
    r->timed = 0;
    if (!r->check[0])
        snprintf(r->check, sizeof(r->check), "FAIL (error)");
}

/* Compare the sampled requests of a full-batch result with the CPU
 * reference.  Returns 0 when they pass. */
static int check_sampled(struct bench *B, const struct problem *p, const mla_config_t *cfg,
                         uint16_t *out, const float *lse, struct result *r)
{
    double t0 = now_s();
    int nreq = p->batch < B->o->check_requests ? p->batch : B->o->check_requests;
    int *reqs = xalloc(sizeof(int) * (size_t)nreq);
    for (int i = 0; i < nreq; i++)
        reqs[i] = (int)((int64_t)i * p->batch / nreq);
    size_t orow = (size_t)p->q_len * p->heads * 512, lrow = (size_t)p->heads * p->q_len;
    uint16_t *ref = xalloc(sizeof(uint16_t) * orow * nreq);
    uint16_t *got = xalloc(sizeof(uint16_t) * orow * nreq);
    float *lref = xalloc(sizeof(float) * lrow * nreq), *lgot = xalloc(sizeof(float) * lrow * nreq);
    int rc = 0;
    if (B->o->corrupt) /* --corrupt-check: show that the guard catches an error */
        out[orow * reqs[nreq - 1]] ^= 0x4000;
    if (problem_cpu_reference(p, B->cpu, cfg, reqs, nreq, ref, lref)) {
        fail_shape(r, "CPU reference: %s", problem_last_error());
        rc = 1;
    } else {
        for (int i = 0; i < nreq; i++) {
            memcpy(got + orow * i, out + orow * reqs[i], sizeof(uint16_t) * orow);
            memcpy(lgot + lrow * i, lse + lrow * reqs[i], sizeof(float) * lrow);
        }
        /* Random inputs never give an all-zero reference: if they did, the
         * inputs are broken and the comparison would prove nothing. */
        size_t nonzero = 0;
        int64_t keys = 0;
        for (size_t i = 0; i < orow * nreq; i++)
            nonzero += (ref[i] & 0x7fff) != 0;
        for (int i = 0; i < nreq; i++)
            keys += p->lens[reqs[i]];
        r->nreq = nreq;
        if (keys > 0 && nonzero == 0) {
            fail_shape(r, "the CPU reference output is all zero: degenerate inputs");
            rc = 1;
            goto done;
        }
        r->bad = problem_compare(got, ref, orow * nreq, lgot, lref, lrow * nreq, &r->max_err,
                                 &r->cos_diff);
        snprintf(r->check, sizeof(r->check), "%s (%d req)", r->bad ? "FAIL" : "PASS", nreq);
        if (r->bad) {
            fail_shape(r, "%ld values outside tolerance (max |d| %.3g, 1-cos %.3g)", r->bad,
                       r->max_err, r->cos_diff);
            rc = 1;
        }
    }
done:
    free(reqs);
    free(ref);
    free(got);
    free(lref);
    free(lgot);
    r->check_s = now_s() - t0;
    return rc;
}

static void summarize(double *us, int n, double *med, double *p10, double *p90, double *tmin)
{
    qsort(us, (size_t)n, sizeof(double), cmp_double);
    *med = pct(us, n, 0.5);
    *p10 = pct(us, n, 0.1);
    *p90 = pct(us, n, 0.9);
    if (tmin)
        *tmin = us[0];
}

static void run_cpu_shape(struct bench *B, const struct problem *p, const mla_config_t *cfg,
                          struct result *r)
{
    const struct opts *o = B->o;
    mla_plan_t *plan = NULL;
    size_t ws_bytes = 0;
    mla_status_t st = mla_plan_create(&plan, B->cpu, cfg, p->batch, p->max_len);
    if (st) {
        fail_shape(r, "mla_plan_create: %s: %s", mla_status_string(st),
                   mla_context_last_error(B->cpu));
        return;
    }
    mla_plan_workspace_size(plan, &ws_bytes);
    void *ws = xalloc(ws_bytes);
    uint16_t *out = xalloc(p->out_bytes);
    float *lse = xalloc(p->lse_bytes);
    double *us = xalloc(sizeof(double) * (size_t)o->iters);
    memset(out, 0xff, p->out_bytes);
    memset(lse, 0xff, p->lse_bytes);
#define CPU_DECODE()                                                                         \
    mla_decode(plan, p->q, p->kv, p->scales, p->num_pages, p->table, p->max_pages, p->lens,    \
               out, lse, ws, ws_bytes, NULL)
    r->copies = r->copies_wanted = 1;
    r->copy_bytes = (double)(p->kv_bytes + p->scale_bytes + p->q_bytes + p->out_bytes);
    if ((st = CPU_DECODE())) {
        fail_shape(r, "mla_decode: %s: %s", mla_status_string(st), mla_context_last_error(B->cpu));
        goto out;
    }
    if (check_sampled(B, p, cfg, out, lse, r))
        goto out;
    for (int i = 0; i < o->warmup; i++)
        CPU_DECODE();
    for (int i = 0; i < o->iters; i++) {
        double t0 = now_s();
        st = CPU_DECODE();
        us[i] = (now_s() - t0) * 1e6;
        if (st) {
            fail_shape(r, "mla_decode: %s: %s", mla_status_string(st),
                       mla_context_last_error(B->cpu));
            goto out;
        }
    }
#undef CPU_DECODE
    summarize(us, o->iters, &r->med, &r->p10, &r->p90, &r->tmin);
    r->host_med = r->med; /* the CPU call is synchronous: host time is the time */
    r->timed = 1;
out:
    free(us);
    free(out);
    free(lse);
    free(ws);
    mla_plan_destroy(plan);
}

/* Device buffers of one shape: shared table, lengths and workspace, and
 * copies rotating sets of cache, scales, Q, output and LSE. */
struct gpu_bufs {
    mla_plan_t *plan;
    devmem_ptr tab, len, ws;
    size_t ws_bytes;
    size_t off_sc, off_q, off_out, off_lse, set_bytes;
    devmem_ptr *set;
    int nset;
    const struct problem *p;
    devmem_stream s;
};

static size_t align256(size_t x)
{
    return (x + 255) / 256 * 256;
}

static void *dptr(devmem_ptr base, size_t off)
{
    return (void *)(uintptr_t)(base + off);
}

static mla_status_t gpu_decode(const struct gpu_bufs *g, int c)
{
    devmem_ptr b = g->set[c % g->nset];
    const struct problem *p = g->p;
    return mla_decode(g->plan, dptr(b, g->off_q), dptr(b, 0),
                      p->spr ? (const float *)dptr(b, g->off_sc) : NULL, p->num_pages,
                      (const int32_t *)dptr(g->tab, 0), p->max_pages,
                      (const int32_t *)dptr(g->len, 0), dptr(b, g->off_out),
                      (float *)dptr(b, g->off_lse), dptr(g->ws, 0), g->ws_bytes, g->s);
}

/* Events around each of n back-to-back calls; call(i) queues call i. */
static int time_calls(struct bench *B, int n, double *gpu_us, double *host_us,
                      mla_status_t (*call)(void *, int), void *arg, mla_status_t *st)
{
    *st = MLA_STATUS_SUCCESS;
    if (devmem_event_record(B->ev[0], B->stream))
        return -1;
    for (int i = 0; i < n; i++) {
        double t0 = now_s();
        *st = call(arg, i);
        if (host_us)
            host_us[i] = (now_s() - t0) * 1e6;
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
    int first;                /* rotation offset */
    devmem_graph_exec *exec;  /* graphs, or NULL for direct calls */
    int nexec;
};

static mla_status_t direct_call(void *arg, int i)
{
    struct call_ctx *c = arg;
    return gpu_decode(c->g, c->first + i);
}

static mla_status_t graph_call(void *arg, int i)
{
    struct call_ctx *c = arg;
    return devmem_graph_launch(c->exec[(c->first + i) % c->nexec], c->g->s)
               ? MLA_STATUS_CUDA_ERROR
               : MLA_STATUS_SUCCESS;
}

#define CK(call, what)                                                                 \
    do {                                                                               \
        if ((call) != 0) {                                                             \
            fail_shape(r, "%s: %s", what, devmem_last_error());                        \
            goto out;                                                                  \
        }                                                                              \
    } while (0)

/* CUDA graphs of one mla_decode each, over the buffer sets that come
 * next in the rotation (first, first + 1, ...: those touched least
 * recently), replayed warmup + iters times in that order.  Failures are
 * reported, not fatal to the shape. */
static void time_graphs(struct bench *B, struct gpu_bufs *g, int first, struct result *r)
{
    const struct opts *o = B->o;
    int n = g->nset < o->warmup + o->iters ? g->nset : o->warmup + o->iters;
    devmem_graph_exec *exec = calloc((size_t)n, sizeof(*exec));
    double *us = xalloc(sizeof(double) * (size_t)o->iters);
    const char *why = NULL, *detail = "";
    mla_status_t st = MLA_STATUS_SUCCESS;
    int made = 0;
    for (; exec && made < n; made++) {
        devmem_graph graph = NULL;
        if (devmem_capture_begin(g->s, DEVMEM_CAPTURE_THREAD_LOCAL)) {
            why = "cuStreamBeginCapture";
            break;
        }
        st = gpu_decode(g, first + made);
        int end = devmem_capture_end(g->s, &graph);
        if (st || end) {
            why = st ? "mla_decode under capture" : "cuStreamEndCapture";
            if (st)
                detail = mla_context_last_error(B->gctx);
            devmem_graph_destroy(graph);
            break;
        }
        int inst = devmem_graph_instantiate(&exec[made], graph);
        devmem_graph_destroy(graph);
        if (inst) {
            why = "cuGraphInstantiate";
            break;
        }
    }
    if (!exec)
        why = "out of host memory";
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
    } else {
        r->graph_failed = 1;
        char msg[160];
        snprintf(msg, sizeof(msg), "graph: %s failed: %s", why,
                 detail[0] ? detail : devmem_last_error());
        fprintf(stderr, PROG ": %s\n", msg);
        size_t l = strlen(r->note);
        snprintf(r->note + l, sizeof(r->note) - l, "%s%s", l ? "; " : "", msg);
        devmem_stream_sync(g->s);
    }
    for (int i = 0; exec && i < made; i++)
        devmem_graph_exec_destroy(exec[i]);
    free(exec);
    free(us);
}

static void run_gpu_shape(struct bench *B, const struct problem *p, const mla_config_t *cfg,
                          struct result *r)
{
    const struct opts *o = B->o;
    struct gpu_bufs g = {.p = p, .s = B->stream};
    uint16_t *out = NULL;
    float *lse = NULL;
    double *us = xalloc(sizeof(double) * (size_t)o->iters);
    double *host = xalloc(sizeof(double) * (size_t)o->iters);
    mla_status_t st = mla_plan_create(&g.plan, B->gctx, cfg, p->batch, p->max_len), dst;
    if (st) {
        fail_shape(r, "mla_plan_create: %s: %s", mla_status_string(st),
                   mla_context_last_error(B->gctx));
        goto out;
    }
    mla_plan_workspace_size(g.plan, &g.ws_bytes);
    CK(devmem_alloc(&g.ws, g.ws_bytes), "workspace");
    CK(devmem_alloc(&g.tab, sizeof(int32_t) * (size_t)p->batch * p->max_pages), "block table");
    CK(devmem_alloc(&g.len, sizeof(int32_t) * (size_t)p->batch), "lengths");
    CK(devmem_htod(g.tab, p->table, sizeof(int32_t) * (size_t)p->batch * p->max_pages),
       "block table");
    CK(devmem_htod(g.len, p->lens, sizeof(int32_t) * (size_t)p->batch), "lengths");

    /* Enough buffer sets that one pass over them exceeds 3x the L2. */
    g.off_sc = align256(p->kv_bytes);
    g.off_q = g.off_sc + align256(p->scale_bytes);
    g.off_out = g.off_q + align256(p->q_bytes);
    g.off_lse = g.off_out + align256(p->out_bytes);
    g.set_bytes = g.off_lse + align256(p->lse_bytes);
    double want = ceil(3.0 * B->m->l2_mb * 1e6 / (double)g.set_bytes);
    r->copies_wanted = want < 2 ? 2 : want > MAX_COPIES ? MAX_COPIES : (int)want;
    r->copy_bytes = (double)g.set_bytes;
    g.set = calloc((size_t)r->copies_wanted, sizeof(devmem_ptr));
    if (!g.set) {
        fail_shape(r, "out of host memory");
        goto out;
    }
    while (g.nset < r->copies_wanted && devmem_alloc(&g.set[g.nset], g.set_bytes) == 0)
        g.nset++;
    r->copies = g.nset;
    if (g.nset == 0) {
        fail_shape(r, "no device memory for one buffer set of %.1f MB", g.set_bytes / 1e6);
        goto out;
    }
    if (g.nset < r->copies_wanted) {
        snprintf(r->note, sizeof(r->note),
                 "only %d of %d buffer sets (%.1f of %.1f MB) could be allocated: the timed "
                 "data may partly stay in L2",
                 g.nset, r->copies_wanted, g.nset * g.set_bytes / 1e6,
                 r->copies_wanted * g.set_bytes / 1e6);
        fprintf(stderr, PROG ": %s\n", r->note);
    }
    CK(devmem_htod(g.set[0], p->kv, p->kv_bytes), "upload");
    if (p->spr)
        CK(devmem_htod(g.set[0] + g.off_sc, p->scales, p->scale_bytes), "upload");
    CK(devmem_htod(g.set[0] + g.off_q, p->q, p->q_bytes), "upload");
    for (int c = 1; c < g.nset; c++)
        CK(devmem_dtod(g.set[c], g.set[0], g.off_out), "buffer copy");
    for (int c = 0; c < g.nset; c++)
        CK(devmem_memset8(g.set[c] + g.off_out, 0xff, g.set_bytes - g.off_out), "poison");
    CK(devmem_sync(), "upload");

    /* The guard: one call, its device status, sampled requests. */
    if ((st = gpu_decode(&g, 0))) {
        fail_shape(r, "mla_decode: %s: %s", mla_status_string(st), mla_context_last_error(B->gctx));
        goto out;
    }
    CK(devmem_stream_sync(g.s), "mla_decode");
    if ((st = mla_workspace_status(g.plan, dptr(g.ws, 0), &dst)) || dst) {
        fail_shape(r, "device status: %s", mla_status_string(st ? st : dst));
        goto out;
    }
    out = xalloc(p->out_bytes);
    lse = xalloc(p->lse_bytes);
    CK(devmem_dtoh(out, g.set[0] + g.off_out, p->out_bytes), "download");
    CK(devmem_dtoh(lse, g.set[0] + g.off_lse, p->lse_bytes), "download");
    if (check_sampled(B, p, cfg, out, lse, r))
        goto out;

    /* Direct calls, rotating over the sets so that no call finds its data
     * in the L2 from an earlier one. */
    struct call_ctx c = {.g = &g, .first = 1};
    for (int i = 0; i < o->warmup; i++)
        if ((st = direct_call(&c, i)))
            break;
    c.first = 1 + o->warmup;
    if (st || time_calls(B, o->iters, us, host, direct_call, &c, &st)) {
        if (st)
            fail_shape(r, "mla_decode: %s: %s", mla_status_string(st),
                       mla_context_last_error(B->gctx));
        else
            fail_shape(r, "timing: %s", devmem_last_error());
        goto out;
    }
    summarize(us, o->iters, &r->med, &r->p10, &r->p90, &r->tmin);
    double unused;
    summarize(host, o->iters, &r->host_med, &unused, &unused, NULL);
    r->timed = 1;

    time_graphs(B, &g, 1 + o->warmup + o->iters, r);

    /* Every timed call must have passed the device-side checks too. */
    if ((st = mla_workspace_status(g.plan, dptr(g.ws, 0), &dst)) || dst)
        fail_shape(r, "device status after timing: %s", mla_status_string(st ? st : dst));
out:
    devmem_stream_sync(B->stream);
    for (int i = 0; g.set && i < g.nset; i++)
        devmem_free(g.set[i]);
    free(g.set);
    devmem_free(g.ws);
    devmem_free(g.tab);
    devmem_free(g.len);
    mla_plan_destroy(g.plan);
    free(out);
    free(lse);
    free(us);
    free(host);
}

static void run_shape(struct bench *B, struct shape *sh, int idx, const struct problem *base)
{
    struct result *r = &sh->r;
    struct problem p;
    memset(&p, 0, sizeof(p));
    char err[320];
    double t0 = now_s();
    uint64_t seed = B->o->seed;
    if (problem_subset(&p, base, sh->batch, sh->lens, problem_hash(seed, 2 * (uint64_t)idx + 1)) ||
        problem_make_q(&p, sh->q_len, sh->h_q, problem_hash(seed, 2 * (uint64_t)idx + 2))) {
        fail_shape(r, "host: %s", problem_last_error());
        problem_free(&p);
        return;
    }
    problem_work(&p, sh->causal, &r->bytes, &r->flops, &r->keys);
    r->gen_s = now_s() - t0;
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

/* ------------------------------------------------------------------ */
/* Derived numbers */

static double tbs(const struct result *r)
{
    return r->timed ? r->bytes / (r->med * 1e-6) / 1e12 : NAN;
}

static double tflops(const struct result *r)
{
    return r->timed ? r->flops / (r->med * 1e-6) / 1e12 : NAN;
}

static double frac(double x, double ceiling)
{
    return isfinite(x) && isfinite(ceiling) && ceiling > 0 ? 100.0 * x / ceiling : NAN;
}

static double spread(const struct result *r)
{
    return r->timed ? 100.0 * (r->p90 - r->p10) / r->med : NAN;
}

/* ------------------------------------------------------------------ */
/* Table */

static void print_header(void)
{
    printf("%-10s %5s %5s %4s %4s %6s %4s %10s %7s %6s %6s %8s %6s %8s %9s  %s\n", "format",
           "batch", "q_len", "h_q", "h_kv", "s_k", "page", "median_us", "spread", "TB/s", "%copy",
           "TFLOP/s", "%mma", "host_us", "graph_us", "check");
}

/* "%*.*f" of x, or "-" when it is not a number. */
static const char *num(char *buf, size_t n, double x, int width, int prec, const char *suffix)
{
    if (isfinite(x) && x != 0 && fabs(x) < 0.05) /* CPU-backend rates */
        snprintf(buf, n, "%*.1e%s", width - (int)strlen(suffix), x, suffix);
    else if (isfinite(x))
        snprintf(buf, n, "%*.*f%s", width - (int)strlen(suffix), prec, x, suffix);
    else
        snprintf(buf, n, "%*s", width, "-");
    return buf;
}

static void print_row(const struct shape *sh, const struct ceilings *c)
{
    const struct result *r = &sh->r;
    char f[24], q[16], a[8][24];
    fmt_name(sh->format, sh->block, f, sizeof(f));
    snprintf(q, sizeof(q), "%d%s", sh->q_len, sh->causal && sh->q_len > 1 ? "c" : "");
    double t = tbs(r), fl = tflops(r);
    printf("%-10s %5d %5s %4d %4d %6.0f %4d %s %s %s %s %s %s %s %s  %s\n", f, sh->batch, q,
           sh->h_q, sh->h_kv, r->s_mean, sh->page,
           num(a[0], 24, r->timed ? r->med : NAN, 10, 1, ""),
           num(a[1], 24, spread(r), 7, 1, "%"), num(a[2], 24, t, 6, 3, ""),
           num(a[3], 24, frac(t, c->copy_tbs), 6, 1, "%"), num(a[4], 24, fl, 8, 1, ""),
           num(a[5], 24, frac(fl, c->mma_tflops), 6, 1, "%"),
           num(a[6], 24, r->timed ? r->host_med : NAN, 8, 1, ""),
           num(a[7], 24, r->timed ? r->g_med : NAN, 9, 1, ""),
           r->check[0] ? r->check : "FAIL");
    fflush(stdout);
}

/* ------------------------------------------------------------------ */
/* JSON */

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

static void json_num(FILE *f, double x)
{
    if (isfinite(x))
        fprintf(f, "%.10g", x);
    else
        fputs("null", f);
}

static void json_kv_str(FILE *f, const char *k, const char *v, int comma)
{
    fprintf(f, "\"%s\": ", k);
    if (v)
        json_str(f, v);
    else
        fputs("null", f);
    if (comma)
        fputs(", ", f);
}

static void json_kv_num(FILE *f, const char *k, double v, int comma)
{
    fprintf(f, "\"%s\": ", k);
    json_num(f, v);
    if (comma)
        fputs(", ", f);
}

/* Output files of --json, --csv and --svg: errors name the file. */
static FILE *open_output(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, PROG ": %s: %s\n", path, strerror(errno));
    return f;
}

static int close_output(FILE *f, const char *path)
{
    if (fclose(f)) {
        fprintf(stderr, PROG ": %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

static int write_json(const char *path, const struct bench *B, const struct shape *sh, int n)
{
    FILE *f = open_output(path);
    if (!f)
        return -1;
    const struct meta *m = B->m;
    const struct ceilings *c = B->c;
    char buf[64];
    fputs("{\n  ", f);
    json_kv_str(f, "tool", PROG, 1);
    json_kv_str(f, "libmla_version", mla_version_string(), 1);
    json_kv_str(f, "header_version", MLA_VERSION_STRING, 1);
    fputs("\n  ", f);
    json_kv_str(f, "build_info", mla_build_info(), 1);
    fputs("\n  ", f);
    json_kv_str(f, "date", m->date, 1);
    json_kv_str(f, "command_line", m->cmdline, 1);
    fputs("\n  \"device\": {", f);
    json_kv_str(f, "backend", m->gpu ? "cuda" : "cpu", 1);
    json_kv_str(f, "name", m->device, 1);
    if (m->gpu) {
        snprintf(buf, sizeof(buf), "sm_%d%d", m->cc_major, m->cc_minor);
        json_kv_str(f, "arch", buf, 1);
        json_kv_num(f, "sm_count", m->sm_count, 1);
        json_kv_num(f, "memory_gb", m->gpu_mem_gb > 0 ? m->gpu_mem_gb : NAN, 1);
    }
    json_kv_str(f, "driver_cuda_version", m->driver[0] ? m->driver : NULL, 0);
    fputs("},\n  \"settings\": {", f);
    json_kv_num(f, "iters", m->iters, 1);
    json_kv_num(f, "warmup", m->warmup, 1);
    json_kv_num(f, "check_requests", B->o->check_requests, 1);
    json_kv_num(f, "l2_mb", m->gpu ? m->l2_mb : NAN, 1);
    json_kv_str(f, "l2_source", m->gpu ? m->l2_how : NULL, 1);
    snprintf(buf, sizeof(buf), "%llu", (unsigned long long)B->o->seed);
    json_kv_str(f, "seed", buf, 1);
    json_kv_str(f, "preset", B->o->preset, 0);
    fputs("},\n  \"ceilings\": {", f);
    json_kv_num(f, "copy_tbs", c->copy_tbs, 1);
    fprintf(f, "\"copy_measured\": %s, ", c->copy_measured ? "true" : "false");
    json_kv_str(f, "copy_method", c->copy_how, 1);
    fputs("\n    ", f);
    json_kv_num(f, "mma_tflops", c->mma_tflops, 1);
    fprintf(f, "\"mma_measured\": %s, ", c->mma_measured ? "true" : "false");
    json_kv_str(f, "mma_method", c->mma_how, 0);
    fputs("},\n  \"shapes\": [", f);
    for (int i = 0; i < n; i++) {
        const struct shape *s = &sh[i];
        const struct result *r = &s->r;
        char fn[24];
        fputs(i ? ",\n    {" : "\n    {", f);
        json_kv_str(f, "format", fmt_name(s->format, s->block, fn, sizeof(fn)), 1);
        json_kv_str(f, "kv_format", kv_name(s->format), 1);
        json_kv_num(f, "scale_block", s->block, 1);
        json_kv_num(f, "batch", s->batch, 1);
        json_kv_num(f, "q_len", s->q_len, 1);
        fprintf(f, "\"causal\": %s, ", s->causal ? "true" : "false");
        json_kv_num(f, "h_q", s->h_q, 1);
        json_kv_num(f, "h_kv", s->h_kv, 1);
        json_kv_num(f, "page_size", s->page, 1);
        fprintf(f, "\"varlen\": %s,\n     ", s->varlen ? "true" : "false");
        json_kv_num(f, "s_k", s->seq, 1);
        json_kv_num(f, "s_k_mean", r->s_mean, 1);
        json_kv_num(f, "s_k_min", r->s_min, 1);
        json_kv_num(f, "s_k_max", r->s_max, 1);
        json_kv_num(f, "keys", r->keys, 1);
        json_kv_num(f, "bytes", r->bytes, 1);
        json_kv_num(f, "flops", r->flops, 1);
        fputs("\n     ", f);
        json_kv_str(f, "check", r->check[0] ? r->check : "FAIL", 1);
        fprintf(f, "\"pass\": %s, ", r->failed ? "false" : "true");
        json_kv_num(f, "checked_requests", r->nreq, 1);
        json_kv_num(f, "bad_values", r->nreq ? (double)r->bad : NAN, 1);
        json_kv_num(f, "max_abs_err", r->nreq ? r->max_err : NAN, 1);
        json_kv_num(f, "cos_diff", r->nreq ? r->cos_diff : NAN, 1);
        json_kv_str(f, "note", r->note[0] ? r->note : NULL, 1);
        fputs("\n     ", f);
        json_kv_num(f, "buffer_sets", r->copies, 1);
        json_kv_num(f, "buffer_sets_wanted", r->copies_wanted, 1);
        json_kv_num(f, "buffer_set_bytes", r->copy_bytes, 1);
        fputs("\n     ", f);
        json_kv_num(f, "median_us", r->timed ? r->med : NAN, 1);
        json_kv_num(f, "p10_us", r->timed ? r->p10 : NAN, 1);
        json_kv_num(f, "p90_us", r->timed ? r->p90 : NAN, 1);
        json_kv_num(f, "min_us", r->timed ? r->tmin : NAN, 1);
        json_kv_num(f, "spread_pct", spread(r), 1);
        fputs("\n     ", f);
        json_kv_num(f, "tb_per_s", tbs(r), 1);
        json_kv_num(f, "copy_bw_pct", frac(tbs(r), c->copy_tbs), 1);
        json_kv_num(f, "tflop_per_s", tflops(r), 1);
        json_kv_num(f, "mma_pct", frac(tflops(r), c->mma_tflops), 1);
        fputs("\n     ", f);
        json_kv_num(f, "host_us_per_call", r->timed ? r->host_med : NAN, 1);
        json_kv_num(f, "graph_median_us", r->timed ? r->g_med : NAN, 1);
        json_kv_num(f, "graph_p10_us", r->timed ? r->g_p10 : NAN, 1);
        json_kv_num(f, "graph_p90_us", r->timed ? r->g_p90 : NAN, 1);
        fprintf(f, "\"graph_failed\": %s, ", r->graph_failed ? "true" : "false");
        json_kv_num(f, "host_build_s", r->gen_s, 1);
        json_kv_num(f, "check_s", r->check_s, 0);
        fputs("}", f);
    }
    fputs("\n  ]\n}\n", f);
    return close_output(f, path);
}

/* ------------------------------------------------------------------ */
/* CSV: one row per shape, metadata repeated in trailing columns so that
 * any CSV reader gets everything. */

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

static int write_csv(const char *path, const struct bench *B, const struct shape *sh, int n)
{
    FILE *f = open_output(path);
    if (!f)
        return -1;
    const struct meta *m = B->m;
    const struct ceilings *c = B->c;
    fputs("format,kv_format,scale_block,batch,q_len,causal,h_q,h_kv,page_size,varlen,s_k,"
          "s_k_mean,s_k_min,s_k_max,keys,bytes,flops,check,pass,checked_requests,max_abs_err,"
          "cos_diff,buffer_sets,buffer_sets_wanted,buffer_set_bytes,median_us,p10_us,p90_us,"
          "min_us,spread_pct,tb_per_s,copy_bw_pct,tflop_per_s,mma_pct,host_us_per_call,"
          "graph_median_us,graph_p10_us,graph_p90_us,note,backend,device,sm_count,"
          "driver_cuda_version,libmla_version,build_info,date,iters,warmup,l2_mb,copy_tbs,"
          "copy_measured,mma_tflops,mma_measured,seed,command_line\n",
          f);
    for (int i = 0; i < n; i++) {
        const struct shape *s = &sh[i];
        const struct result *r = &s->r;
        char fn[24];
        double t = tbs(r), fl = tflops(r);
        fprintf(f, "%s,%s,%d,%d,%d,%d,%d,%d,%d,%d,%d,", fmt_name(s->format, s->block, fn, 24),
                kv_name(s->format), s->block, s->batch, s->q_len, s->causal, s->h_q, s->h_kv,
                s->page, s->varlen, s->seq);
        double row1[] = {r->s_mean, r->s_min, r->s_max, r->keys, r->bytes, r->flops};
        for (size_t k = 0; k < sizeof(row1) / sizeof(row1[0]); k++) {
            csv_num(f, row1[k]);
            fputc(',', f);
        }
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
                         frac(t, c->copy_tbs),
                         fl,
                         frac(fl, c->mma_tflops),
                         r->timed ? r->host_med : NAN,
                         r->timed ? r->g_med : NAN,
                         r->timed ? r->g_p10 : NAN,
                         r->timed ? r->g_p90 : NAN};
        for (size_t k = 0; k < sizeof(row2) / sizeof(row2[0]); k++) {
            csv_num(f, row2[k]);
            fputc(',', f);
        }
        csv_str(f, r->note);
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
        csv_num(f, c->copy_tbs);
        fprintf(f, ",%d,", c->copy_measured);
        csv_num(f, c->mma_tflops);
        fprintf(f, ",%d,%llu,", c->mma_measured, (unsigned long long)B->o->seed);
        csv_str(f, m->cmdline);
        fputc('\n', f);
    }
    return close_output(f, path);
}

/* ------------------------------------------------------------------ */
/* SVG: time vs sequence length per series, and a roofline. */

static void xml_text(FILE *f, const char *s)
{
    for (; *s; s++) {
        switch (*s) {
        case '&': fputs("&amp;", f); break;
        case '<': fputs("&lt;", f); break;
        case '>': fputs("&gt;", f); break;
        case '"': fputs("&quot;", f); break;
        default: fputc(*s, f);
        }
    }
}

struct axis {
    double lo, hi; /* data range, log scale */
    double p0, p1; /* pixel range */
};

static void axis_fit(struct axis *a, double lo, double hi)
{
    if (!(lo > 0) || !(hi > 0)) {
        lo = 1;
        hi = 10;
    }
    if (hi / lo < 4) { /* widen a narrow range around its middle */
        double mid = sqrt(lo * hi);
        lo = mid / 2;
        hi = mid * 2;
    } else {
        lo /= 1.25;
        hi *= 1.25;
    }
    a->lo = lo;
    a->hi = hi;
}

static double axis_px(const struct axis *a, double v)
{
    return a->p0 + (a->p1 - a->p0) * (log10(v) - log10(a->lo)) / (log10(a->hi) - log10(a->lo));
}

/* Ticks at 1, 2, 5 x 10^k within the range; 1..9 x 10^k when that gives
 * fewer than three, only 10^k when it gives more than ten. */
static int axis_ticks(const struct axis *a, double *t, int max)
{
    static const int m19[] = {1, 2, 3, 4, 5, 6, 7, 8, 9}, m125[] = {1, 2, 5}, m1[] = {1};
    const int *mults[3] = {m125, m19, m1};
    const int counts[3] = {3, 9, 1};
    int n = 0;
    for (int pass = 0; pass < 3; pass++) {
        n = 0;
        for (int k = (int)floor(log10(a->lo)); k <= (int)ceil(log10(a->hi)); k++)
            for (int j = 0; j < counts[pass]; j++) {
                double v = mults[pass][j] * pow(10, k);
                if (v >= a->lo && v <= a->hi && n < max)
                    t[n++] = v;
            }
        if (pass == 0 && n < 3)
            continue; /* try 1..9 */
        if (pass <= 1 && n > 10) {
            pass = 1; /* next: powers of ten only */
            continue;
        }
        break;
    }
    return n;
}

static void svg_axes(FILE *f, const struct axis *x, const struct axis *y, const char *title,
                     const char *xl, const char *yl)
{
    double t[64];
    int n;
    fprintf(f, "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"#ffffff\" "
               "stroke=\"#444444\"/>\n",
            x->p0, y->p1, x->p1 - x->p0, y->p0 - y->p1);
    n = axis_ticks(x, t, 64);
    for (int i = 0; i < n; i++) {
        double px = axis_px(x, t[i]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n",
                px, y->p0, px, y->p1);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%g</text>\n", px,
                y->p0 + 16, t[i]);
    }
    n = axis_ticks(y, t, 64);
    for (int i = 0; i < n; i++) {
        double py = axis_px(y, t[i]);
        fprintf(f, "<line x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"#dddddd\"/>\n",
                x->p0, py, x->p1, py);
        fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"end\">%g</text>\n", x->p0 - 5,
                py + 4, t[i]);
    }
    fprintf(f, "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\" font-size=\"14\" "
               "font-weight=\"bold\">",
            (x->p0 + x->p1) / 2, y->p1 - 10);
    xml_text(f, title);
    fprintf(f, "</text>\n<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">", (x->p0 + x->p1) / 2,
            y->p0 + 36);
    xml_text(f, xl);
    fprintf(f, "</text>\n<text transform=\"translate(%.1f %.1f) rotate(-90)\" "
               "text-anchor=\"middle\">",
            x->p0 - 52, (y->p0 + y->p1) / 2);
    xml_text(f, yl);
    fputs("</text>\n", f);
}

static const char *const palette[10] = {"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd",
                                        "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"};
static const char *const dashes[3] = {"none", "6 3", "2 2"};

/* Series: every shape field but the sequence length. */
static void series_key(const struct shape *s, char *buf, size_t n)
{
    char f[24];
    snprintf(buf, n, "%s h%d/%d q%d%s b%d P%d%s", fmt_name(s->format, s->block, f, sizeof(f)),
             s->h_q, s->h_kv, s->q_len, s->causal && s->q_len > 1 ? "c" : "", s->batch, s->page,
             s->varlen ? " varlen" : "");
}

static int write_svg(const char *path, const struct bench *B, const struct shape *sh, int n)
{
    FILE *f = open_output(path);
    if (!f)
        return -1;
    const struct ceilings *c = B->c;
    int *ser = xalloc(sizeof(int) * (size_t)(n ? n : 1)); /* series of each shape */
    char (*keys)[96] = xalloc(sizeof(*keys) * (size_t)(n ? n : 1));
    int nser = 0, npts = 0;
    double s_lo = INFINITY, s_hi = 0, t_lo = INFINITY, t_hi = 0;
    double i_lo = INFINITY, i_hi = 0, f_lo = INFINITY, f_hi = 0;
    for (int i = 0; i < n; i++) {
        ser[i] = -1;
        if (!sh[i].r.timed || !(sh[i].r.med > 0) || !(sh[i].r.flops > 0) ||
            !(sh[i].r.s_mean > 0))
            continue; /* nothing to place on log axes */
        char k[96];
        series_key(&sh[i], k, sizeof(k));
        int j = 0;
        while (j < nser && strcmp(keys[j], k))
            j++;
        if (j == nser)
            memcpy(keys[nser++], k, sizeof(k));
        ser[i] = j;
        const struct result *r = &sh[i].r;
        double in = r->flops / r->bytes, fl = tflops(r);
        s_lo = fmin(s_lo, r->s_mean);
        s_hi = fmax(s_hi, r->s_mean);
        t_lo = fmin(t_lo, r->med);
        t_hi = fmax(t_hi, r->med);
        i_lo = fmin(i_lo, in);
        i_hi = fmax(i_hi, in);
        f_lo = fmin(f_lo, fl);
        f_hi = fmax(f_hi, fl);
        npts++;
    }
    int cols = 3, rows = (nser + cols - 1) / cols;
    double W = 1200, H = 580 + rows * 18;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"#fafafa\"/>\n",
            W, H, W, H);
    char title[400];
    snprintf(title, sizeof(title), "mla-bench, libmla %s, %s%s, %s", mla_version_string(),
             B->m->gpu ? "" : "CPU backend: ", B->m->device, B->m->date);
    fputs("<text x=\"20\" y=\"24\" font-size=\"15\">", f);
    xml_text(f, title);
    fputs("</text>\n<text x=\"20\" y=\"44\">", f);
    char sub[480];
    snprintf(sub, sizeof(sub),
             "time: median of %d calls of mla_decode; copy ceiling %s; MMA ceiling %s",
             B->m->iters,
             isfinite(c->copy_tbs) ? (c->copy_measured ? "measured" : "assumed") : "none",
             isfinite(c->mma_tflops) ? (c->mma_measured ? "measured" : "assumed") : "none");
    xml_text(f, sub);
    fputs("</text>\n", f);

    /* Panel 1: time vs s_k. */
    struct axis x1 = {.p0 = 90, .p1 = 560}, y1 = {.p0 = 440, .p1 = 90};
    axis_fit(&x1, s_lo, s_hi);
    axis_fit(&y1, t_lo, t_hi);
    svg_axes(f, &x1, &y1, "decode time vs sequence length", "s_k (mean tokens per request)",
             "time per call (us)");
    /* Panel 2: roofline. */
    struct axis x2 = {.p0 = 700, .p1 = 1170}, y2 = {.p0 = 440, .p1 = 90};
    double ridge = isfinite(c->copy_tbs) && isfinite(c->mma_tflops) ? c->mma_tflops / c->copy_tbs
                                                                    : NAN;
    if (isfinite(ridge)) {
        i_lo = fmin(i_lo, ridge);
        i_hi = fmax(i_hi, ridge);
    }
    /* Show the roof above the points: the bandwidth slope at the largest
     * intensity (the ridge point included), capped by the MMA ceiling. */
    if (npts && isfinite(c->copy_tbs))
        f_hi = fmax(f_hi, isfinite(c->mma_tflops) ? fmin(c->copy_tbs * i_hi, c->mma_tflops)
                                                  : c->copy_tbs * i_hi);
    else if (isfinite(c->mma_tflops))
        f_hi = fmax(f_hi, c->mma_tflops);
    axis_fit(&x2, i_lo, i_hi);
    axis_fit(&y2, f_lo, f_hi);
    svg_axes(f, &x2, &y2, "roofline", "arithmetic intensity (FLOP/byte)", "TFLOP/s");
    fputs("<defs><clipPath id=\"roof\"><rect x=\"700\" y=\"90\" width=\"470\" "
          "height=\"350\"/></clipPath>"
          "<clipPath id=\"time\"><rect x=\"90\" y=\"90\" width=\"470\" height=\"350\"/>"
          "</clipPath></defs>\n",
          f);
    /* Ceiling lines, with their key under the panel. */
    double kx = 700;
    if (isfinite(c->copy_tbs)) {
        double xa = x2.lo, xb = x2.hi;
        fprintf(f, "<line clip-path=\"url(#roof)\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" "
                   "y2=\"%.1f\" stroke=\"#000000\" stroke-width=\"1.5\"/>\n",
                axis_px(&x2, xa), axis_px(&y2, c->copy_tbs * xa), axis_px(&x2, xb),
                axis_px(&y2, c->copy_tbs * xb));
        fprintf(f, "<line x1=\"%.0f\" y1=\"496\" x2=\"%.0f\" y2=\"496\" stroke=\"#000000\" "
                   "stroke-width=\"1.5\"/><text x=\"%.0f\" y=\"500\">copy %.4g TB/s "
                   "(%s)</text>\n",
                kx, kx + 24, kx + 30, c->copy_tbs, c->copy_measured ? "measured" : "assumed");
        kx += 260;
    }
    if (isfinite(c->mma_tflops)) {
        double py = axis_px(&y2, c->mma_tflops);
        fprintf(f, "<line clip-path=\"url(#roof)\" x1=\"700\" y1=\"%.1f\" x2=\"1170\" "
                   "y2=\"%.1f\" stroke=\"#000000\" stroke-width=\"1.5\" "
                   "stroke-dasharray=\"8 4\"/>\n",
                py, py);
        fprintf(f, "<line x1=\"%.0f\" y1=\"496\" x2=\"%.0f\" y2=\"496\" stroke=\"#000000\" "
                   "stroke-width=\"1.5\" stroke-dasharray=\"8 4\"/><text x=\"%.0f\" "
                   "y=\"500\">MMA %.4g TFLOP/s (%s)</text>\n",
                kx, kx + 24, kx + 30, c->mma_tflops, c->mma_measured ? "measured" : "assumed");
    }
    for (int s = 0; s < nser; s++) {
        const char *col = palette[s % 10], *dash = dashes[(s / 10) % 3];
        /* Points of the series sorted by s_k (insertion order of the grid
         * already is, but do not rely on it). */
        int idx[MAX_SHAPES], m = 0;
        for (int i = 0; i < n; i++)
            if (ser[i] == s)
                idx[m++] = i;
        for (int a = 1; a < m; a++)
            for (int b = a; b > 0 && sh[idx[b]].r.s_mean < sh[idx[b - 1]].r.s_mean; b--) {
                int t = idx[b];
                idx[b] = idx[b - 1];
                idx[b - 1] = t;
            }
        if (m > 1) {
            fprintf(f, "<polyline clip-path=\"url(#time)\" fill=\"none\" stroke=\"%s\" "
                       "stroke-width=\"1.5\" stroke-dasharray=\"%s\" points=\"",
                    col, dash);
            for (int k = 0; k < m; k++)
                fprintf(f, "%s%.1f,%.1f", k ? " " : "", axis_px(&x1, sh[idx[k]].r.s_mean),
                        axis_px(&y1, sh[idx[k]].r.med));
            fputs("\"/>\n", f);
        }
        for (int k = 0; k < m; k++) {
            const struct result *r = &sh[idx[k]].r;
            char tip[200];
            snprintf(tip, sizeof(tip), "%s s%.0f: %.1f us, %.3f TB/s, %.1f TFLOP/s", keys[s],
                     r->s_mean, r->med, tbs(r), tflops(r));
            fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"><title>",
                    axis_px(&x1, r->s_mean), axis_px(&y1, r->med), col);
            xml_text(f, tip);
            fprintf(f, "</title></circle>\n<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" "
                       "fill-opacity=\"0.75\" stroke=\"#333333\" stroke-width=\"0.5\"><title>",
                    axis_px(&x2, r->flops / r->bytes), axis_px(&y2, tflops(r)), col);
            xml_text(f, tip);
            fputs("</title></circle>\n", f);
        }
        double lx = 40 + (s % cols) * 380, ly = 530 + (s / cols) * 18;
        fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
                   "stroke-width=\"2\" stroke-dasharray=\"%s\"/>"
                   "<circle cx=\"%.0f\" cy=\"%.0f\" r=\"3.5\" fill=\"%s\"/>"
                   "<text x=\"%.0f\" y=\"%.0f\">",
                lx, ly, lx + 24, ly, col, dash, lx + 12, ly, col, lx + 30, ly + 4);
        xml_text(f, keys[s]);
        fputs("</text>\n", f);
    }
    if (npts == 0) {
        fputs("<text x=\"325\" y=\"265\" text-anchor=\"middle\">no timed shapes</text>\n"
              "<text x=\"935\" y=\"265\" text-anchor=\"middle\">no timed shapes</text>\n",
              f);
    }
    fprintf(f, "<text x=\"40\" y=\"%.0f\" fill=\"#555555\">series: format, h_q/h_kv, q_len "
               "(c = causal), batch, page size</text>\n</svg>\n",
            H - 12);
    free(ser);
    free(keys);
    return close_output(f, path);
}

/* ------------------------------------------------------------------ */
/* The grid */

static int build_grid(const struct opts *o, struct shape **out)
{
    long n = (long)o->nfmt * o->page.n * o->heads.n * o->q_len.n * o->batch.n * o->seq.n;
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
                            s->seq = o->seq.v[si];
                            s->varlen = o->varlen;
                            s->group = group;
                            s->lens = xalloc(sizeof(int32_t) * (size_t)s->batch);
                            problem_draw_lens(s->lens, s->batch, s->seq, s->varlen, o->seed);
                            double sum = 0;
                            s->r.s_min = INT32_MAX;
                            for (int b = 0; b < s->batch; b++) {
                                sum += s->lens[b];
                                s->r.s_min = s->lens[b] < s->r.s_min ? s->lens[b] : s->r.s_min;
                                s->r.s_max = s->lens[b] > s->r.s_max ? s->lens[b] : s->r.s_max;
                            }
                            s->r.s_mean = sum / s->batch;
                            s->r.g_med = s->r.g_p10 = s->r.g_p90 = NAN;
                        }
    *out = sh;
    return (int)n;
}

/* Generate the cache of a group: each request as long as the longest use
 * any shape of the group makes of it. */
static int generate_group(struct bench *B, const struct shape *sh, int n, int first,
                          struct problem *base)
{
    int maxb = 0;
    for (int i = first; i < n && sh[i].group == sh[first].group; i++)
        maxb = sh[i].batch > maxb ? sh[i].batch : maxb;
    int32_t *fill = xalloc(sizeof(int32_t) * (size_t)maxb);
    memset(fill, 0, sizeof(int32_t) * (size_t)maxb);
    for (int i = first; i < n && sh[i].group == sh[first].group; i++)
        for (int b = 0; b < sh[i].batch; b++)
            fill[b] = sh[i].lens[b] > fill[b] ? sh[i].lens[b] : fill[b];
    char err[320], fn[24];
    /* Append needs only format, page size and KV heads: h_q = h_kv. */
    mla_config_t *cfg = shape_config(&sh[first], sh[first].h_kv, err, sizeof(err));
    int rc = -1;
    double t0 = now_s();
    if (!cfg) {
        fprintf(stderr, PROG ": %s\n", err);
    } else if (problem_generate(base, cfg, maxb, fill, problem_hash(B->o->seed, 0xcac4e),
                                B->o->threads)) {
        fprintf(stderr, PROG ": generating the cache: %s\n", problem_last_error());
    } else {
        double rows = 0;
        for (int b = 0; b < maxb; b++)
            rows += fill[b];
        fprintf(stderr, PROG ": cache %s P%d h_kv %d: %d requests, %.0f rows, %.1f MB, generated "
                        "in %.1f s\n",
                fmt_name(sh[first].format, sh[first].block, fn, sizeof(fn)), sh[first].page,
                sh[first].h_kv, maxb, rows * sh[first].h_kv, (base->kv_bytes + base->scale_bytes) / 1e6,
                now_s() - t0);
        rc = 0;
    }
    mla_config_destroy(cfg);
    free(fill);
    return rc;
}

/* ------------------------------------------------------------------ */

int main(int argc, char **argv)
{
    struct opts o = {.kv_heads = 1, .check_requests = 4, .l2_mb = -1, .mma_tflops = -1,
                     .seed = (uint64_t)time(NULL)};
    static const int page_def[] = {64}, block_def[] = {128};
    set_list(&o.page, 1, page_def);
    set_list(&o.block, 1, block_def);
    long cores = sysconf(_SC_NPROCESSORS_ONLN);
    o.threads = cores > 0 ? (cores > 64 ? 64 : (int)cores) : 1;
    enum {
        O_PRESET = 256, O_FORMAT, O_BLOCK, O_BATCH, O_SEQ, O_VARLEN, O_QLEN, O_HEADS, O_KVH,
        O_PAGE, O_CAUSAL, O_ITERS, O_WARMUP, O_CHECK, O_L2, O_MMA, O_NOCEIL, O_JSON, O_CSV,
        O_SVG, O_CPU, O_DEVICE, O_THREADS, O_SEED, O_CORRUPT, O_HELP, O_VERSION, O_KERNEL
    };
    static const struct option lo[] = {
        {"preset", 1, 0, O_PRESET}, {"format", 1, 0, O_FORMAT}, {"scale-block", 1, 0, O_BLOCK},
        {"batch", 1, 0, O_BATCH}, {"seq-len", 1, 0, O_SEQ}, {"varlen", 0, 0, O_VARLEN},
        {"q-len", 1, 0, O_QLEN}, {"heads", 1, 0, O_HEADS}, {"kv-heads", 1, 0, O_KVH},
        {"page-size", 1, 0, O_PAGE}, {"causal", 0, 0, O_CAUSAL}, {"iters", 1, 0, O_ITERS},
        {"warmup", 1, 0, O_WARMUP}, {"check-requests", 1, 0, O_CHECK}, {"l2-mb", 1, 0, O_L2},
        {"mma-tflops", 1, 0, O_MMA}, {"no-ceilings", 0, 0, O_NOCEIL}, {"json", 1, 0, O_JSON},
        {"csv", 1, 0, O_CSV}, {"svg", 1, 0, O_SVG}, {"cpu", 0, 0, O_CPU},
        {"device", 1, 0, O_DEVICE}, {"threads", 1, 0, O_THREADS}, {"seed", 1, 0, O_SEED},
        {"corrupt-check", 0, 0, O_CORRUPT}, {"help", 0, 0, O_HELP},
        {"version", 0, 0, O_VERSION}, {"kernel", 1, 0, O_KERNEL}, {0, 0, 0, 0}};
    int c;
    while ((c = getopt_long(argc, argv, "", lo, NULL)) != -1) {
        switch (c) {
        case O_PRESET: o.preset = optarg; break;
        case O_FORMAT: o.format_arg = optarg; break;
        case O_BLOCK: parse_list(&o.block, optarg, "scale-block", 0, 128); break;
        case O_BATCH: parse_list(&o.batch, optarg, "batch", 1, 65535); o.set_batch = 1; break;
        case O_SEQ: parse_list(&o.seq, optarg, "seq-len", 1, 1 << 23); o.set_seq = 1; break;
        case O_VARLEN: o.varlen = 1; break;
        case O_QLEN: parse_list(&o.q_len, optarg, "q-len", 1, 8); o.set_q_len = 1; break;
        case O_HEADS: parse_list(&o.heads, optarg, "heads", 1, 128); o.set_heads = 1; break;
        case O_KVH: o.kv_heads = parse_int(optarg, "kv-heads", 1, 128); break;
        case O_PAGE: parse_list(&o.page, optarg, "page-size", 1, 1024); break;
        case O_CAUSAL: o.causal = 1; break;
        case O_ITERS: o.iters = parse_int(optarg, "iters", 1, 100000); o.set_iters = 1; break;
        case O_WARMUP: o.warmup = parse_int(optarg, "warmup", 0, 100000); o.set_warmup = 1; break;
        case O_CHECK: o.check_requests = parse_int(optarg, "check-requests", 1, 65535); break;
        case O_L2: o.l2_mb = parse_double(optarg, "l2-mb", 0.001, 1e6); break;
        case O_MMA: o.mma_tflops = parse_double(optarg, "mma-tflops", 1e-6, 1e6); break;
        case O_NOCEIL: o.no_ceilings = 1; break;
        case O_JSON: o.json = optarg; break;
        case O_CSV: o.csv = optarg; break;
        case O_SVG: o.svg = optarg; break;
        case O_CPU: o.cpu = 1; break;
        case O_CORRUPT: o.corrupt = 1; break;
        case O_DEVICE: o.device = parse_int(optarg, "device", 0, 1023); break;
        case O_THREADS: o.threads = parse_int(optarg, "threads", 1, 1024); break;
        case O_KERNEL:
            g_kernel = -1;
            for (int k = 0; k < (int)(sizeof(kernel_names) / sizeof(kernel_names[0])); k++)
                if (strcmp(optarg, kernel_names[k]) == 0)
                    g_kernel = k;
            if (g_kernel < 0)
                bad_arg("kernel", optarg,
                        "auto, portable, hopper, hopper-wide, hopper-narrow or hopper-pair");
            break;
        case O_SEED: {
            char *end;
            errno = 0;
            o.seed = strtoull(optarg, &end, 0);
            if (errno || end == optarg || *end)
                bad_arg("seed", optarg, "an unsigned integer");
            break;
        }
        case O_HELP: usage(stdout); return 0;
        case O_VERSION:
            printf(PROG " (libmla) %s\n%s\n", mla_version_string(), mla_build_info());
            return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        return 2;
    }
    for (int i = 0; i < o.block.n; i++)
        if (o.block.v[i] != 0 && o.block.v[i] != 32 && o.block.v[i] != 64 && o.block.v[i] != 128)
            bad_arg("scale-block", "list", "values among 0, 32, 64, 128");
    for (int i = 0; i < o.page.n; i++)
        if (o.page.v[i] & (o.page.v[i] - 1))
            bad_arg("page-size", "list", "powers of two");
    parse_formats(&o);
    if (o.preset && strcmp(o.preset, "deepseek-v3-tp1") && strcmp(o.preset, "deepseek-v3-tp8") &&
        strcmp(o.preset, "kimi") && strcmp(o.preset, "mtp"))
        bad_arg("preset", o.preset, "deepseek-v3-tp1, deepseek-v3-tp8, kimi or mtp");
    problem_inputs_init(o.seed);

    /* Backend. */
    struct meta m;
    memset(&m, 0, sizeof(m));
    mla_context_t *cpu = NULL, *gctx = NULL;
    mla_status_t st = mla_context_create(&cpu, MLA_DEVICE_CPU);
    if (st) {
        fprintf(stderr, PROG ": mla_context_create (cpu): %s\n", mla_status_string(st));
        return 1;
    }
    if (!o.cpu) {
        char why[512];
        gctx = problem_open_gpu(o.device, why, sizeof(why));
        if (!gctx)
            fprintf(stderr, PROG ": %s; using the CPU backend\n", why);
    }
    m.gpu = gctx != NULL;
    apply_preset(&o, m.gpu);
    for (int i = 0; i < o.heads.n; i++)
        if (o.heads.v[i] % o.kv_heads) {
            fprintf(stderr, PROG ": --kv-heads %d does not divide --heads %d\n", o.kv_heads,
                    o.heads.v[i]);
            return 2;
        }
    m.iters = o.iters;
    m.warmup = o.warmup;
    m.cmdline = join_args(argc, argv);
    time_t now = time(NULL);
    struct tm tmv;
    strftime(m.date, sizeof(m.date), "%Y-%m-%dT%H:%M:%SZ", gmtime_r(&now, &tmv));
    if (m.gpu) {
        snprintf(m.device, sizeof(m.device), "?");
        devmem_device_info(m.device, sizeof(m.device), &m.cc_major, &m.cc_minor, &m.sm_count);
        if (o.l2_mb > 0) {
            m.l2_mb = o.l2_mb;
            snprintf(m.l2_how, sizeof(m.l2_how), "given (--l2-mb)");
        }
        driver_query(&m, o.device);
        if (m.l2_mb <= 0) {
            m.l2_mb = DEFAULT_L2_MB;
            snprintf(m.l2_how, sizeof(m.l2_how), "assumed");
        }
    } else {
        snprintf(m.device, sizeof(m.device), "CPU (%ld cores)", cores);
    }

    /* Ceilings. */
    struct ceilings ceil_ = {.copy_tbs = NAN, .mma_tflops = NAN};
    if (o.no_ceilings)
        snprintf(ceil_.copy_how, sizeof(ceil_.copy_how), "not measured (--no-ceilings)");
    else if (m.gpu)
        measure_gpu_copy(&ceil_);
    else
        measure_cpu_copy(&ceil_);
    if (o.mma_tflops > 0 || m.gpu) {
        ceil_.mma_tflops = o.mma_tflops > 0 ? o.mma_tflops : DEFAULT_MMA_TFLOPS;
        snprintf(ceil_.mma_how, sizeof(ceil_.mma_how),
                 "assumed, not measured: --mma-tflops%s (mla-bench has no MMA probe)",
                 o.mma_tflops > 0 ? "" : " default, the H200 dense BF16 figure of DESIGN.md");
    } else {
        snprintf(ceil_.mma_how, sizeof(ceil_.mma_how), "none on the CPU backend (--mma-tflops)");
    }

    struct shape *sh;
    int n = build_grid(&o, &sh);
    struct bench B = {.o = &o, .m = &m, .c = &ceil_, .cpu = cpu, .gctx = gctx};
    int ok = 1;
    if (m.gpu) {
        B.ev = calloc((size_t)o.iters + 1, sizeof(*B.ev));
        ok = B.ev && devmem_stream_create(&B.stream) == 0;
        for (int i = 0; ok && i <= o.iters; i++)
            ok = devmem_event_create(&B.ev[i]) == 0;
        if (!ok) {
            fprintf(stderr, PROG ": cannot create the stream and events: %s\n",
                    devmem_last_error());
        }
    }

    /* Header. */
    printf("# " PROG " (libmla %s) %s\n", mla_version_string(), mla_build_info());
    if (m.gpu) {
        char mem[32] = "";
        if (m.gpu_mem_gb > 0)
            snprintf(mem, sizeof(mem), ", %.1f GB", m.gpu_mem_gb);
        printf("# device %d: %s (sm_%d%d, %d SMs%s%s%s)\n", o.device, m.device, m.cc_major,
               m.cc_minor, m.sm_count, mem, m.driver[0] ? ", driver supports CUDA " : "",
               m.driver);
    } else {
        printf("# backend: the CPU reference, %s, host clock timing\n", m.device);
    }
    if (isfinite(ceil_.copy_tbs))
        printf("# copy ceiling %.3f TB/s, measured: %s\n", ceil_.copy_tbs, ceil_.copy_how);
    else
        printf("# copy ceiling: %s\n", ceil_.copy_how);
    if (isfinite(ceil_.mma_tflops))
        printf("# MMA ceiling %.4g TFLOP/s, %s\n", ceil_.mma_tflops, ceil_.mma_how);
    else
        printf("# MMA ceiling: %s\n", ceil_.mma_how);
    if (m.gpu)
        printf("# kernel family: --kernel %s\n", kernel_names[g_kernel]);
    if (m.gpu)
        printf("# time: CUDA events around each of %d back-to-back mla_decode calls after %d "
               "warm-up calls, rotating over buffer sets >= 3x the L2 (%.1f MB, %s)\n",
               o.iters, o.warmup, m.l2_mb, m.l2_how);
    else
        printf("# time: host clock around each of %d mla_decode calls after %d warm-up calls\n",
               o.iters, o.warmup);
    printf("# seed %llu; %d shapes\n", (unsigned long long)o.seed, n);
    print_header();
    fflush(stdout);

    /* Run. */
    int failed = 0;
    struct problem base;
    memset(&base, 0, sizeof(base));
    int have_base = 0;
    for (int i = 0; i < n && ok; i++) {
        struct shape *s = &sh[i];
        char fn[24];
        fprintf(stderr, "[%d/%d] shape %s b%d q%d%s h%d/%d s%d%s P%d\n", i + 1, n,
                fmt_name(s->format, s->block, fn, sizeof(fn)), s->batch, s->q_len,
                s->causal && s->q_len > 1 ? " causal" : "", s->h_q, s->h_kv, s->seq,
                s->varlen ? " varlen" : "", s->page);
        if (i == 0 || s->group != sh[i - 1].group) {
            problem_free(&base);
            have_base = generate_group(&B, sh, n, i, &base) == 0;
        }
        if (!have_base)
            fail_shape(&s->r, "no cache for this shape (generation failed)");
        else
            run_shape(&B, s, i, &base);
        if (s->r.failed) {
            failed = 1;
            fprintf(stderr, PROG ": FAIL %s b%d q%d h%d/%d s%d P%d: %s\n", fn, s->batch,
                    s->q_len, s->h_q, s->h_kv, s->seq, s->page, s->r.note);
        }
        if (s->r.graph_failed)
            failed = 1;
        print_row(s, &ceil_);
    }
    problem_free(&base);
    if (!ok)
        failed = 1;

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
