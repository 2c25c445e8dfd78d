/* util.c - mla-bench's small helpers: percentiles, names,
 * failure notes.
 * SPDX-License-Identifier: MIT */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

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

void summarize(double *us, int n, double *med, double *p10, double *p90, double *tmin)
{
    qsort(us, (size_t)n, sizeof(double), cmp_double);
    *med = pct(us, n, 0.5);
    *p10 = pct(us, n, 0.1);
    *p90 = pct(us, n, 0.9);
    if (tmin)
        *tmin = us[0];
}

double median(double *x, int n)
{
    qsort(x, (size_t)n, sizeof(double), cmp_double);
    return pct(x, n, 0.5);
}

const char *fmt_name(int format, int block, char *buf, size_t n)
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

const char *kv_name(int format)
{
    return format == MLA_KV_BF16 ? "bf16" : format == MLA_KV_FP8_E4M3 ? "fp8" : "fp8-ds-mla";
}

void fail_shape(struct result *r, const char *fmt, ...)
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

void add_note(struct result *r, const char *msg)
{
    size_t l = strlen(r->note);
    snprintf(r->note + l, sizeof(r->note) - l, "%s%s", l ? "; " : "", msg);
}
