/* svg.c - mla-bench's --svg file: time against sequence length, one line
 * per series, and a roofline with the read, copy and compute ceilings.
 * SPDX-License-Identifier: MIT */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

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
    snprintf(buf, n, "%s h%d/%d q%d%s b%d P%d%s%s",
             fmt_name(s->format, s->block, f, sizeof(f)), s->h_q, s->h_kv, s->q_len,
             s->causal && s->q_len > 1 ? "c" : "", s->batch, s->page,
             s->lens_dist != PROBLEM_LENS_FIXED ? " " : "",
             s->lens_dist != PROBLEM_LENS_FIXED ? problem_lens_name(s->lens_dist) : "");
}

/* The shapes placed on the plots, by series, and the ranges they span. */
struct plot {
    int *ser; /* series of each shape, -1 if not plotted */
    char (*keys)[96];
    int nser, npts;
    double s_lo, s_hi, t_lo, t_hi, i_lo, i_hi, f_lo, f_hi;
};

static void collect(struct plot *P, const struct shape *sh, int n)
{
    P->ser = problem_xalloc(PROG, sizeof(int) * (size_t)(n ? n : 1));
    P->keys = problem_xalloc(PROG, sizeof(*P->keys) * (size_t)(n ? n : 1));
    P->nser = P->npts = 0;
    P->s_lo = P->t_lo = P->i_lo = P->f_lo = INFINITY;
    P->s_hi = P->t_hi = P->i_hi = P->f_hi = 0;
    for (int i = 0; i < n; i++) {
        const struct result *r = &sh[i].r;
        P->ser[i] = -1;
        if (!r->timed || !(r->med > 0) || !(r->flops > 0) || !(r->s_mean > 0))
            continue; /* nothing to place on log axes */
        char k[96];
        series_key(&sh[i], k, sizeof(k));
        int j = 0;
        while (j < P->nser && strcmp(P->keys[j], k))
            j++;
        if (j == P->nser)
            memcpy(P->keys[P->nser++], k, sizeof(k));
        P->ser[i] = j;
        double in = r->flops / r->bytes, fl = tflops(r);
        P->s_lo = fmin(P->s_lo, r->s_mean);
        P->s_hi = fmax(P->s_hi, r->s_mean);
        P->t_lo = fmin(P->t_lo, r->med);
        P->t_hi = fmax(P->t_hi, r->med);
        P->i_lo = fmin(P->i_lo, in);
        P->i_hi = fmax(P->i_hi, in);
        P->f_lo = fmin(P->f_lo, fl);
        P->f_hi = fmax(P->f_hi, fl);
        P->npts++;
    }
}

static const char *roof_state(const struct roof *r)
{
    return isfinite(r->value) ? (r->measured ? "measured" : "assumed") : "none";
}

static void title(FILE *f, const struct bench *B, double W, double H)
{
    const struct ceilings *c = B->c;
    fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
               "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" "
               "viewBox=\"0 0 %.0f %.0f\" font-family=\"sans-serif\" font-size=\"12\">\n"
               "<rect width=\"100%%\" height=\"100%%\" fill=\"#fafafa\"/>\n",
            W, H, W, H);
    char text[480];
    snprintf(text, sizeof(text), "mla-bench, libmla %s, %s%s, %s", mla_version_string(),
             B->m->gpu ? "" : "CPU backend: ", B->m->device, B->m->date);
    fputs("<text x=\"20\" y=\"24\" font-size=\"15\">", f);
    xml_text(f, text);
    fputs("</text>\n<text x=\"20\" y=\"44\">", f);
    char what[128];
    if (B->o->layers)
        snprintf(what, sizeof(what),
                 "%d steps of mla_schedule and %d mla_decode_scheduled, per layer", B->m->iters,
                 B->o->layers);
    else
        snprintf(what, sizeof(what), "%d calls of mla_decode", B->m->iters);
    snprintf(text, sizeof(text), "time: median of %s; read ceiling %s; copy ceiling %s; MMA "
             "ceiling %s", what, roof_state(&c->read), roof_state(&c->copy), roof_state(&c->mma));
    xml_text(f, text);
    fputs("</text>\n", f);
}

/* A bandwidth slope of the roofline and its key at (*kx, 496). */
static void slope(FILE *f, const struct axis *x, const struct axis *y, const struct roof *r,
                  const char *name, const char *dash, double *kx)
{
    if (!isfinite(r->value))
        return;
    fprintf(f, "<line clip-path=\"url(#roof)\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" "
               "stroke=\"#000000\" stroke-width=\"1.5\" stroke-dasharray=\"%s\"/>\n",
            axis_px(x, x->lo), axis_px(y, r->value * x->lo), axis_px(x, x->hi),
            axis_px(y, r->value * x->hi), dash);
    fprintf(f, "<line x1=\"%.0f\" y1=\"496\" x2=\"%.0f\" y2=\"496\" stroke=\"#000000\" "
               "stroke-width=\"1.5\" stroke-dasharray=\"%s\"/><text x=\"%.0f\" y=\"500\">%s "
               "%.4g TB/s (%s)</text>\n",
            *kx, *kx + 24, dash, *kx + 30, name, r->value, roof_state(r));
    *kx += 165;
}

/* The roofline panel's axes and ceilings. */
static void roofline(FILE *f, const struct ceilings *c, struct plot *P, struct axis *x2,
                     struct axis *y2)
{
    /* The highest bandwidth slope sets where the roof bends. */
    double bw = fmax(isfinite(c->read.value) ? c->read.value : 0,
                     isfinite(c->copy.value) ? c->copy.value : 0);
    double ridge = bw > 0 && isfinite(c->mma.value) ? c->mma.value / bw : NAN;
    if (isfinite(ridge)) {
        P->i_lo = fmin(P->i_lo, ridge);
        P->i_hi = fmax(P->i_hi, ridge);
    }
    /* Show the roof above the points: the bandwidth slope at the largest
     * intensity (the ridge point included), capped by the MMA ceiling. */
    if (P->npts && bw > 0)
        P->f_hi = fmax(P->f_hi, isfinite(c->mma.value) ? fmin(bw * P->i_hi, c->mma.value)
                                                        : bw * P->i_hi);
    else if (isfinite(c->mma.value))
        P->f_hi = fmax(P->f_hi, c->mma.value);
    axis_fit(x2, P->i_lo, P->i_hi);
    axis_fit(y2, P->f_lo, P->f_hi);
    svg_axes(f, x2, y2, "roofline", "arithmetic intensity (FLOP/byte)", "TFLOP/s");
    fputs("<defs><clipPath id=\"roof\"><rect x=\"700\" y=\"90\" width=\"470\" "
          "height=\"350\"/></clipPath>"
          "<clipPath id=\"time\"><rect x=\"90\" y=\"90\" width=\"470\" height=\"350\"/>"
          "</clipPath></defs>\n",
          f);
    double kx = 700;
    slope(f, x2, y2, &c->read, "read", "none", &kx);
    slope(f, x2, y2, &c->copy, "copy", "3 3", &kx);
    if (isfinite(c->mma.value)) {
        double py = axis_px(y2, c->mma.value);
        fprintf(f, "<line clip-path=\"url(#roof)\" x1=\"700\" y1=\"%.1f\" x2=\"1170\" "
                   "y2=\"%.1f\" stroke=\"#000000\" stroke-width=\"1.5\" "
                   "stroke-dasharray=\"8 4\"/>\n",
                py, py);
        fprintf(f, "<line x1=\"%.0f\" y1=\"496\" x2=\"%.0f\" y2=\"496\" stroke=\"#000000\" "
                   "stroke-width=\"1.5\" stroke-dasharray=\"8 4\"/><text x=\"%.0f\" "
                   "y=\"500\">MMA %.4g TFLOP/s (%s)</text>\n",
                kx, kx + 24, kx + 30, c->mma.value, roof_state(&c->mma));
    }
}

/* One series: its line and points on both panels, and its key. */
static void series(FILE *f, const struct plot *P, int s, const struct shape *sh, int n,
                   const struct axis *x1, const struct axis *y1, const struct axis *x2,
                   const struct axis *y2)
{
    const char *col = palette[s % 10], *dash = dashes[(s / 10) % 3];
    /* Points of the series sorted by s_k (insertion order of the grid
     * already is, but do not rely on it). */
    int *idx = problem_xalloc(PROG, sizeof(int) * (size_t)n), m = 0;
    for (int i = 0; i < n; i++)
        if (P->ser[i] == s)
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
            fprintf(f, "%s%.1f,%.1f", k ? " " : "", axis_px(x1, sh[idx[k]].r.s_mean),
                    axis_px(y1, sh[idx[k]].r.med));
        fputs("\"/>\n", f);
    }
    for (int k = 0; k < m; k++) {
        const struct result *r = &sh[idx[k]].r;
        char tip[200];
        snprintf(tip, sizeof(tip), "%s s%.0f: %.1f us, %.3f TB/s, %.1f TFLOP/s", P->keys[s],
                 r->s_mean, r->med, tbs(r), tflops(r));
        fprintf(f, "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3.5\" fill=\"%s\"><title>",
                axis_px(x1, r->s_mean), axis_px(y1, r->med), col);
        xml_text(f, tip);
        fprintf(f, "</title></circle>\n<circle cx=\"%.1f\" cy=\"%.1f\" r=\"4\" fill=\"%s\" "
                   "fill-opacity=\"0.75\" stroke=\"#333333\" stroke-width=\"0.5\"><title>",
                axis_px(x2, r->flops / r->bytes), axis_px(y2, tflops(r)), col);
        xml_text(f, tip);
        fputs("</title></circle>\n", f);
    }
    double lx = 40 + (s % 3) * 380, ly = 530 + (s / 3) * 18;
    fprintf(f, "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"%s\" "
               "stroke-width=\"2\" stroke-dasharray=\"%s\"/>"
               "<circle cx=\"%.0f\" cy=\"%.0f\" r=\"3.5\" fill=\"%s\"/>"
               "<text x=\"%.0f\" y=\"%.0f\">",
            lx, ly, lx + 24, ly, col, dash, lx + 12, ly, col, lx + 30, ly + 4);
    xml_text(f, P->keys[s]);
    fputs("</text>\n", f);
    free(idx);
}

int write_svg(const char *path, const struct bench *B, const struct shape *sh, int n)
{
    FILE *f = open_output(path);
    if (!f)
        return -1;
    struct plot P;
    collect(&P, sh, n);
    int rows = (P.nser + 2) / 3;
    double H = 580 + rows * 18;
    title(f, B, 1200, H);
    /* Panel 1: time vs s_k. */
    struct axis x1 = {.p0 = 90, .p1 = 560}, y1 = {.p0 = 440, .p1 = 90};
    axis_fit(&x1, P.s_lo, P.s_hi);
    axis_fit(&y1, P.t_lo, P.t_hi);
    svg_axes(f, &x1, &y1, "decode time vs sequence length", "s_k (mean tokens per request)",
             B->o->layers ? "time per layer (us)" : "time per call (us)");
    /* Panel 2: roofline. */
    struct axis x2 = {.p0 = 700, .p1 = 1170}, y2 = {.p0 = 440, .p1 = 90};
    roofline(f, B->c, &P, &x2, &y2);
    for (int s = 0; s < P.nser; s++)
        series(f, &P, s, sh, n, &x1, &y1, &x2, &y2);
    if (P.npts == 0) {
        fputs("<text x=\"325\" y=\"265\" text-anchor=\"middle\">no timed shapes</text>\n"
              "<text x=\"935\" y=\"265\" text-anchor=\"middle\">no timed shapes</text>\n",
              f);
    }
    fprintf(f, "<text x=\"40\" y=\"%.0f\" fill=\"#555555\">series: format, h_q/h_kv, q_len "
               "(c = causal), batch, page size, lengths</text>\n</svg>\n",
            H - 12);
    free(P.ser);
    free(P.keys);
    return close_output(f, path);
}
