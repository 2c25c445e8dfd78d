/* bench.h - the parts of mla-bench: options, shapes and their results,
 * the machine's roofs, and the functions each file of tools/bench/ gives
 * the others.
 * SPDX-License-Identifier: MIT */
#ifndef MLA_BENCH_H
#define MLA_BENCH_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "devmem.h"
#include "mla.h"
#include "problem.h"

#define PROG "mla-bench"
#define MAX_LIST 32
#define MAX_FORMATS 16
#define MAX_SHAPES 4096
#define MAX_COPIES 4096
#define MAX_LAYERS 1024
#define DEFAULT_L2_MB 60.0
#define DEFAULT_MMA_TFLOPS 750.0
#define ROOF_GPU_BYTES ((size_t)2 << 30) /* the bandwidth probes' buffers */
#define ROOF_CPU_BYTES ((size_t)128 << 20)

/* ---- options (options.c) ---- */

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
    struct ilist lens; /* enum problem_lens values */
    int kv_heads, causal;
    int layers; /* 0: time mla_decode calls; N: steps of N mla_decode_scheduled */
    int iters, warmup, check_requests, cpu, device, threads, no_ceilings, corrupt;
    double l2_mb, mma_tflops; /* < 0: not given */
    const char *json, *csv, *svg;
    uint64_t seed;
    /* Given on the command line (a preset does not override them). */
    int set_batch, set_q_len, set_heads, set_seq, set_iters, set_warmup;
    struct kvfmt fmts[MAX_FORMATS];
    int nfmt;
    long cores; /* online host cores */
};

/* Parse the command line into o; exits with status 0 after --help and
 * --version, 2 on a bad command line.  Presets are applied later, by
 * apply_preset(), once the backend is known. */
void parse_options(struct opts *o, int argc, char **argv);
void apply_preset(struct opts *o, int gpu);
/* The command line as a shell would take it back (malloc'ed). */
char *join_args(int argc, char **argv);

/* ---- shapes and results ---- */

struct result {
    int timed;        /* timing numbers valid */
    int failed;       /* check failed or the shape could not run */
    int graph_failed; /* capture or replay failed */
    char check[48];
    char note[320];
    double s_mean;
    int s_min, s_max;
    double keys, bytes, flops;
    double med, p10, p90, tmin; /* us, per layer in steps */
    double host_med;            /* us */
    double g_med, g_p10, g_p90; /* us, NAN without graphs */
    double sched_med;           /* us of one mla_schedule, NAN outside steps */
    int copies, copies_wanted;
    double copy_bytes; /* bytes of one rotating buffer set */
    int nreq;
    long bad;
    double max_err, cos_diff;
    double gen_s, check_s; /* host seconds: building the shape, checking it */
};

struct shape {
    int format, block, page, h_kv, h_q, q_len, causal, batch, seq;
    int lens_dist; /* enum problem_lens */
    int group;     /* shapes of one group share a generated cache */
    int32_t *lens;
    struct result r;
};

/* One measured (or assumed) ceiling. */
struct roof {
    double value; /* TB/s or TFLOP/s; NAN: none */
    int measured;
    char how[192];
};

struct ceilings {
    struct roof copy; /* device copy: bytes read + written */
    struct roof read; /* read-only streaming: the memory roof of decode */
    struct roof mma;
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

/* ---- small helpers (util.c) ---- */

/* Sort us[n] and take its median, p10, p90 and (if tmin) minimum. */
void summarize(double *us, int n, double *med, double *p10, double *p90, double *tmin);
/* Median of x[n] (sorts it). */
double median(double *x, int n);
const char *fmt_name(int format, int block, char *buf, size_t n);
const char *kv_name(int format);
void fail_shape(struct result *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Append "; msg" (or msg) to a result's note. */
void add_note(struct result *r, const char *msg);

/* ---- roofs (roofs.c, read_ptx.c) ---- */

/* L2 size, memory and driver version, from the driver devmem loaded. */
void driver_query(struct meta *m, int device);
/* Measure or assume every ceiling, as the options say. */
void measure_roofs(struct ceilings *c, const struct opts *o, const struct meta *m);
/* The read probe's PTX and its entry point. */
extern const char mla_bench_read_ptx[];
#define MLA_BENCH_READ_ENTRY "mla_bench_read"
#define MLA_BENCH_READ_THREADS 512 /* its .maxntid */

/* ---- the grid and one shape (grid.c, run.c, run_gpu.c) ---- */

int build_grid(const struct opts *o, struct shape **out);
int generate_group(struct bench *B, const struct shape *sh, int n, int first,
                   struct problem *base);
void run_shape(struct bench *B, struct shape *sh, int idx, const struct problem *base);
/* The config of a shape with heads query heads, or NULL with err set. */
mla_config_t *shape_config(const struct shape *sh, int heads, char *err, size_t errlen);
/* Compare sampled requests of a full-batch result with the CPU reference;
 * 0 when they pass. */
int check_sampled(struct bench *B, const struct problem *p, const mla_config_t *cfg,
                  uint16_t *out, const float *lse, struct result *r);
void run_gpu_shape(struct bench *B, const struct problem *p, const mla_config_t *cfg,
                   struct result *r);

/* ---- reports (table.c, json.c, csv.c, svg.c) ---- */

double tbs(const struct result *r);
double tflops(const struct result *r);
double frac(double x, double ceiling);
double spread(const struct result *r);
void print_header(void);
void print_row(const struct shape *sh, const struct ceilings *c);
FILE *open_output(const char *path);
int close_output(FILE *f, const char *path);
int write_json(const char *path, const struct bench *B, const struct shape *sh, int n);
int write_csv(const char *path, const struct bench *B, const struct shape *sh, int n);
int write_svg(const char *path, const struct bench *B, const struct shape *sh, int n);

/* --kernel: the MLA_XPARAM_KERNEL of every plan (mla_experimental.h),
 * and the names it takes, indexed by its values. */
extern int bench_kernel;
extern const char *const bench_kernel_names[];
extern const int bench_kernel_count;

#endif /* MLA_BENCH_H */
