/* table.c - the numbers derived from a result, and the table mla-bench
 * prints on standard output, one row per shape.
 * SPDX-License-Identifier: MIT */
#include <errno.h>
#include <math.h>
#include <string.h>

#include "bench.h"

double tbs(const struct result *r)
{
    return r->timed ? r->bytes / (r->med * 1e-6) / 1e12 : NAN;
}

double tflops(const struct result *r)
{
    return r->timed ? r->flops / (r->med * 1e-6) / 1e12 : NAN;
}

double frac(double x, double ceiling)
{
    return isfinite(x) && isfinite(ceiling) && ceiling > 0 ? 100.0 * x / ceiling : NAN;
}

double spread(const struct result *r)
{
    return r->timed ? 100.0 * (r->p90 - r->p10) / r->med : NAN;
}

void print_header(void)
{
    printf("%-10s %5s %5s %4s %4s %6s %-8s %4s %10s %7s %6s %6s %6s %8s %6s %8s %9s  %s\n",
           "format", "batch", "q_len", "h_q", "h_kv", "s_k", "lens", "page", "median_us",
           "spread", "TB/s", "%read", "%copy", "TFLOP/s", "%mma", "host_us", "graph_us",
           "check");
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

void print_row(const struct shape *sh, const struct ceilings *c)
{
    const struct result *r = &sh->r;
    char f[24], q[16], a[9][24];
    fmt_name(sh->format, sh->block, f, sizeof(f));
    snprintf(q, sizeof(q), "%d%s", sh->q_len, sh->causal && sh->q_len > 1 ? "c" : "");
    double t = tbs(r), fl = tflops(r);
    printf("%-10s %5d %5s %4d %4d %6.0f %-8s %4d %s %s %s %s %s %s %s %s %s  %s\n", f,
           sh->batch, q, sh->h_q, sh->h_kv, r->s_mean, problem_lens_name(sh->lens_dist),
           sh->page, num(a[0], 24, r->timed ? r->med : NAN, 10, 1, ""),
           num(a[1], 24, spread(r), 7, 1, "%"), num(a[2], 24, t, 6, 3, ""),
           num(a[3], 24, frac(t, c->read.value), 6, 1, "%"),
           num(a[4], 24, frac(t, c->copy.value), 6, 1, "%"), num(a[5], 24, fl, 8, 1, ""),
           num(a[6], 24, frac(fl, c->mma.value), 6, 1, "%"),
           num(a[7], 24, r->timed ? r->host_med : NAN, 8, 1, ""),
           num(a[8], 24, r->timed ? r->g_med : NAN, 9, 1, ""), r->check[0] ? r->check : "FAIL");
    fflush(stdout);
}

/* Output files of --json, --csv and --svg: errors name the file. */
FILE *open_output(const char *path)
{
    FILE *f = fopen(path, "w");
    if (!f)
        fprintf(stderr, PROG ": %s: %s\n", path, strerror(errno));
    return f;
}

int close_output(FILE *f, const char *path)
{
    if (fclose(f)) {
        fprintf(stderr, PROG ": %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}
