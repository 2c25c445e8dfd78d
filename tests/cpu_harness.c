/* cpu_harness.c - test_cpu's shared pieces: the fp64 formulas the codec
 * and the backend are held to, CPU configs and contexts, and decode
 * problems (paged caches with NaN wherever no valid row is) with an fp64
 * attention written here and doc/ABI.md's tolerances.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_harness.h"
#include "mla.h"
#include "mla_experimental.h"
#include "rng.h"
#include "fp8_codec.h"

/* ------------------------------------------------------------------ */
/* Random numbers */

double rnd_sym(double amp) /* [-amp, amp) */
{
    return amp * (2.0 * rnd_unit() - 1.0);
}

/* ------------------------------------------------------------------ */
/* Independent formulas (no bit tricks shared with the codec) */

double ref_e4m3(uint8_t c)
{
    int e = (c >> 3) & 15, m = c & 7;
    double v;
    if ((c & 0x7f) == 0x7f)
        return NAN;
    v = e ? ldexp(8 + m, e - 10) : ldexp(m, -9);
    return (c & 0x80) ? -v : v;
}

double ref_bf16(uint16_t h)
{
    int e = (h >> 7) & 0xff, m = h & 0x7f;
    double v;
    if (e == 0xff)
        v = m ? NAN : INFINITY;
    else
        v = e ? ldexp(128 + m, e - 134) : ldexp(m, -133);
    return (h & 0x8000) ? -v : v;
}

uint16_t rd16(const uint8_t *p)
{
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

float rdf(const uint8_t *p)
{
    float v;
    memcpy(&v, p, 4);
    return v;
}

int is_pow2(double s)
{
    int e;
    return s > 0 && frexp(s, &e) == 0.5;
}

void *xalloc(size_t bytes)
{
    size_t n = (bytes + 255) / 256 * 256;
    void *p = aligned_alloc(256, n ? n : 256);
    ck_assert_ptr_nonnull(p);
    return p;
}

/* ------------------------------------------------------------------ */
/* Shared setup */

const struct fmt_case FMTS[NFMTS] = {
    {MLA_KV_BF16, 0},      {MLA_KV_FP8_E4M3, 0},  {MLA_KV_FP8_E4M3, 32},
    {MLA_KV_FP8_E4M3, 64}, {MLA_KV_FP8_E4M3, 128}, {MLA_KV_FP8_DS_MLA, 0},
};

const char *fmt_name(int fmt)
{
    return fmt == MLA_KV_BF16 ? "bf16" : fmt == MLA_KV_FP8_E4M3 ? "e4m3" : "ds_mla";
}

int row_bytes_of(int fmt)
{
    return fmt == MLA_KV_BF16 ? 1152 : fmt == MLA_KV_FP8_E4M3 ? 576 : 656;
}

int spr_of(int fmt, int g)
{
    return fmt == MLA_KV_FP8_E4M3 && g ? (576 + g - 1) / g : 0;
}

mla_config_t *make_config(int h_q, int h_kv, int q_len, int fmt, int g, int ps, int causal,
                          double kv_scale, double softmax_scale)
{
    mla_config_t *cfg;
    int64_t v;
    ST_OK(mla_config_create(&cfg));
    ST_OK(mla_config_set_int(cfg, MLA_PARAM_NUM_HEADS, h_q));
    ST_OK(mla_config_set_int(cfg, MLA_PARAM_NUM_KV_HEADS, h_kv));
    ST_OK(mla_config_set_int(cfg, MLA_PARAM_Q_LEN, q_len));
    ST_OK(mla_config_set_int(cfg, MLA_PARAM_KV_FORMAT, fmt));
    ST_OK(mla_config_set_int(cfg, MLA_PARAM_PAGE_SIZE, ps));
    ST_OK(mla_config_set_int(cfg, MLA_PARAM_SCALE_BLOCK_SIZE, g));
    ST_OK(mla_config_set_int(cfg, MLA_PARAM_CAUSAL, causal));
    ST_OK(mla_config_set_float(cfg, MLA_PARAM_KV_SCALE, kv_scale));
    ST_OK(mla_config_set_float(cfg, MLA_PARAM_SOFTMAX_SCALE, softmax_scale));
    ST_OK(mla_config_get_int(cfg, MLA_PARAM_KV_ROW_BYTES, &v));
    ck_assert_int_eq(v, row_bytes_of(fmt));
    ST_OK(mla_config_get_int(cfg, MLA_PARAM_SCALES_PER_ROW, &v));
    ck_assert_int_eq(v, spr_of(fmt, g));
    return cfg;
}

mla_context_t *make_cpu_context(void)
{
    mla_context_t *ctx;
    ST_OK(mla_context_create(&ctx, MLA_DEVICE_CPU));
    return ctx;
}

/* ------------------------------------------------------------------ */
/* Decode: setup, independent reference, comparison */

static void fill_row(struct dsetup *d, uint8_t *p, float *bs)
{
    const struct dcase *c = &d->c;
    float kv = (float)d->kv_scale;
    double amp = rnd_int(10) == 0 ? 6.0 : 1.0; /* a few rows with large scores */
    int ch, j;
    if (c->fmt == MLA_KV_BF16) {
        for (ch = 0; ch < 576; ch++) {
            uint16_t h = mla_float_to_bf16((float)rnd_sym(amp));
            memcpy(p + 2 * ch, &h, 2);
        }
        return;
    }
    if (c->fmt == MLA_KV_FP8_E4M3) {
        int g = c->g ? c->g : 576;
        for (j = 0; j * g < 576; j++) {
            /* Powers of two and arbitrary fp32 scales alike. */
            float s = c->g ? (rnd_int(2) ? (float)ldexp(1.0, -rnd_int(6) - 3)
                                         : (float)(0.002 + 0.03 * rnd_unit()))
                           : 1.0f;
            if (c->g)
                bs[j] = s;
            for (ch = j * g; ch < (j + 1) * g && ch < 576; ch++)
                p[ch] = mla_e4m3_quantize((float)rnd_sym(amp), kv, s);
        }
        return;
    }
    for (j = 0; j < 4; j++) { /* DS_MLA */
        float s = rnd_int(2) ? (float)ldexp(1.0, -rnd_int(6) - 3) : (float)(0.002 + 0.03 * rnd_unit());
        memcpy(p + 512 + 4 * j, &s, 4);
        for (ch = j * 128; ch < (j + 1) * 128; ch++)
            p[ch] = mla_e4m3_quantize((float)rnd_sym(amp), kv, s);
    }
    for (ch = 0; ch < 64; ch++) {
        uint16_t h = mla_float_to_bf16((float)rnd_sym(amp));
        memcpy(p + 528 + 2 * ch, &h, 2);
    }
}

/* Build a decode problem: lengths drawn to hit 0, 1, q_len-1 and page
 * boundaries; physical pages a random permutation with unused pages;
 * NaN in every cache byte not part of a valid row; garbage in block-table
 * entries no length uses.  lens, if not NULL, gives the lengths. */
void setup_build(struct dsetup *d, const struct dcase *c, int threads, uint64_t salt,
                 const int32_t *lens)
{
    int64_t used = 0, p, i;
    int32_t b, t, maxlen = 0;
    int64_t *perm;
    double kvd, sm;
    memset(d, 0, sizeof *d);
    d->c = *c;
    rnd_start(salt);

    d->lens = xalloc(sizeof(int32_t) * (size_t)c->batch);
    for (b = 0; b < c->batch; b++) {
        const int32_t cand[] = {0, 1, c->q_len - 1, c->q_len, c->ps - 1, c->ps, c->ps + 1,
                                2 * c->ps, 2 * c->ps + 1, 3 * c->ps - 1,
                                1 + rnd_int(c->len_cap), 1 + rnd_int(c->len_cap)};
        const int ncand = (int)(sizeof cand / sizeof cand[0]);
        int32_t len = cand[salt % (uint64_t)ncand]; /* the case's own first pick */
        while (b > 0 || len < 0 || len > c->len_cap)
            if ((len = cand[rnd_int(ncand)]) >= 0 && len <= c->len_cap)
                break;
        if (lens)
            len = lens[b];
        d->lens[b] = len;
        if (len > maxlen)
            maxlen = len;
    }
    d->max_seq_len = maxlen + rnd_int(3);
    if (d->max_seq_len < 1)
        d->max_seq_len = 1;
    d->mpps = (maxlen + c->ps - 1) / c->ps + rnd_int(2);
    if (d->mpps < 1)
        d->mpps = 1;
    for (b = 0; b < c->batch; b++)
        used += (d->lens[b] + c->ps - 1) / c->ps;
    d->num_pages = used + 1 + rnd_int(2);

    /* kv_scale exists for E4M3 only; generally not an fp32 value. */
    kvd = c->fmt == MLA_KV_FP8_E4M3 ? 0.6 + rnd_unit() : 1.0;
    d->kv_scale = (double)(float)kvd;
    sm = rnd_int(3) == 0 ? 0.0 : 0.01 + 0.1 * rnd_unit();
    d->sm_scale = sm > 0 ? sm : 1.0 / sqrt(576.0);

    d->ctx = make_cpu_context();
    d->cfg = make_config(c->h_q, c->h_kv, c->q_len, c->fmt, c->g, c->ps, c->causal, kvd, sm);
    ST_OK(mla_config_set_int(d->cfg, MLA_XPARAM_CPU_THREADS, threads));
    ST_OK(mla_plan_create(&d->plan, d->ctx, d->cfg, c->batch, d->max_seq_len));
    ST_OK(mla_plan_workspace_size(d->plan, &d->ws_bytes));
    d->ws = xalloc(d->ws_bytes);
    memset(d->ws, 0x5a, d->ws_bytes);

    d->rb = row_bytes_of(c->fmt);
    d->spr = spr_of(c->fmt, c->g);
    d->kv_bytes = (size_t)d->num_pages * (size_t)c->ps * (size_t)c->h_kv * (size_t)d->rb;
    d->kv = xalloc(d->kv_bytes);
    memset(d->kv, 0xff, d->kv_bytes); /* NaN in every format */
    if (d->spr) {
        d->scales_count = (size_t)d->num_pages * (size_t)c->ps * (size_t)c->h_kv * (size_t)d->spr;
        d->scales = xalloc(d->scales_count * 4);
        memset(d->scales, 0xff, d->scales_count * 4);
    }

    /* Physical pages: a random permutation of all of them. */
    perm = malloc(sizeof(int64_t) * (size_t)d->num_pages);
    for (p = 0; p < d->num_pages; p++)
        perm[p] = p;
    for (p = d->num_pages - 1; p > 0; p--) {
        int64_t j = rnd_int((int)p + 1), tmp = perm[p];
        perm[p] = perm[j];
        perm[j] = tmp;
    }
    d->bt = xalloc(sizeof(int32_t) * (size_t)c->batch * (size_t)d->mpps);
    used = 0;
    for (b = 0; b < c->batch; b++) {
        int32_t pages = (d->lens[b] + c->ps - 1) / c->ps;
        for (p = 0; p < d->mpps; p++) {
            const int32_t junk[] = {-1, INT32_MIN, INT32_MAX, (int32_t)d->num_pages};
            d->bt[b * d->mpps + p] = p < pages ? (int32_t)perm[used++] : junk[rnd_int(4)];
        }
        for (t = 0; t < d->lens[b]; t++) {
            int64_t page = d->bt[b * d->mpps + t / c->ps];
            int k;
            for (k = 0; k < c->h_kv; k++) {
                int64_t row = (page * c->ps + t % c->ps) * c->h_kv + k;
                fill_row(d, d->kv + row * d->rb, d->spr ? d->scales + row * d->spr : NULL);
            }
        }
    }
    free(perm);

    i = (int64_t)c->batch * c->q_len * c->h_q * 576;
    d->q = xalloc((size_t)i * 2);
    for (p = 0; p < i; p++)
        d->q[p] = mla_float_to_bf16((float)rnd_sym(p % 7 == 0 ? 3.0 : 1.0));
    d->out_bytes = (size_t)c->batch * c->q_len * c->h_q * 512 * 2;
    d->lse_bytes = (size_t)c->batch * c->h_q * c->q_len * 4;
    d->out = xalloc(d->out_bytes);
    d->lse = xalloc(d->lse_bytes);
    memset(d->out, 0xff, d->out_bytes); /* poison: bf16 NaN */
    memset(d->lse, 0xff, d->lse_bytes);
}

void setup_free(struct dsetup *d)
{
    mla_plan_destroy(d->plan);
    mla_config_destroy(d->cfg);
    mla_context_destroy(d->ctx);
    free(d->lens), free(d->bt), free(d->kv), free(d->scales), free(d->q), free(d->out);
    free(d->lse), free(d->ws);
}

mla_status_t run_decode(struct dsetup *d, int with_lse)
{
    return mla_decode(d->plan, d->q, d->kv, d->scales, d->num_pages, d->bt, d->mpps, d->lens,
                      d->out, with_lse ? d->lse : NULL, d->ws, d->ws_bytes, NULL);
}

/* Dequantize one cache row exactly (a separate implementation). */
static void ref_dequant(const struct dsetup *d, int32_t b, int32_t t, int k, double *dst)
{
    const struct dcase *c = &d->c;
    int64_t page = d->bt[b * d->mpps + t / c->ps];
    int64_t row = (page * c->ps + t % c->ps) * c->h_kv + k;
    const uint8_t *p = d->kv + row * d->rb;
    int ch;
    for (ch = 0; ch < 576; ch++) {
        if (c->fmt == MLA_KV_BF16)
            dst[ch] = ref_bf16(rd16(p + 2 * ch));
        else if (c->fmt == MLA_KV_FP8_E4M3)
            dst[ch] = ref_e4m3(p[ch]) * d->kv_scale *
                      (c->g ? (double)d->scales[row * d->spr + ch / c->g] : 1.0);
        else if (ch < 512)
            dst[ch] = ref_e4m3(p[ch]) * d->kv_scale * (double)rdf(p + 512 + 4 * (ch / 128));
        else
            dst[ch] = ref_bf16(rd16(p + 528 + 2 * (ch - 512)));
    }
}

/* fp64 attention, the textbook way: scores, max, exp, sum, weighted V. */
void ref_decode(const struct dsetup *d, double *ref_out, double *ref_lse)
{
    const struct dcase *c = &d->c;
    int hpk = c->h_q / c->h_kv;
    int32_t b, t;
    for (b = 0; b < c->batch; b++) {
        int32_t len = d->lens[b];
        double *K = malloc(sizeof(double) * 576 * (size_t)(len ? len : 1));
        double *sc = malloc(sizeof(double) * (size_t)(len ? len : 1));
        int k, h, i, ch;
        for (k = 0; k < c->h_kv; k++) {
            for (t = 0; t < len; t++)
                ref_dequant(d, b, t, k, K + (size_t)t * 576);
            for (h = k * hpk; h < (k + 1) * hpk; h++) {
                for (i = 0; i < c->q_len; i++) {
                    const uint16_t *q = d->q + (((size_t)b * c->q_len + i) * c->h_q + h) * 576;
                    double *o = ref_out + (((size_t)b * c->q_len + i) * c->h_q + h) * 512;
                    double *lse = ref_lse + ((size_t)b * c->h_q + h) * c->q_len + i;
                    int32_t vis = len;
                    double mx = -INFINITY, l = 0, qd[576];
                    if (c->causal && c->q_len > 1) {
                        vis = len - c->q_len + 1 + i;
                        if (vis < 0)
                            vis = 0;
                    }
                    for (ch = 0; ch < 512; ch++)
                        o[ch] = 0;
                    if (vis == 0) {
                        *lse = INFINITY;
                        continue;
                    }
                    for (ch = 0; ch < 576; ch++)
                        qd[ch] = ref_bf16(q[ch]);
                    for (t = 0; t < vis; t++) {
                        double s = 0;
                        for (ch = 0; ch < 576; ch++)
                            s += qd[ch] * K[(size_t)t * 576 + ch];
                        sc[t] = d->sm_scale * s;
                        if (sc[t] > mx)
                            mx = sc[t];
                    }
                    for (t = 0; t < vis; t++) {
                        double w = exp(sc[t] - mx);
                        l += w;
                        for (ch = 0; ch < 512; ch++)
                            o[ch] += w * K[(size_t)t * 576 + ch];
                    }
                    for (ch = 0; ch < 512; ch++)
                        o[ch] /= l;
                    *lse = mx + log(l);
                }
            }
        }
        free(K);
        free(sc);
    }
}

static void describe(const struct dsetup *d, char *buf, size_t n)
{
    const struct dcase *c = &d->c;
    int off, b;
    off = snprintf(buf, n,
                   "h_q %d h_kv %d q_len %d batch %d page %d %s g %d causal %d kv %.9g sm %.9g "
                   "pages %lld lens",
                   c->h_q, c->h_kv, c->q_len, c->batch, c->ps, fmt_name(c->fmt), c->g, c->causal,
                   d->kv_scale, d->sm_scale, (long long)d->num_pages);
    for (b = 0; b < c->batch && off > 0 && (size_t)off < n; b++)
        off += snprintf(buf + off, n - (size_t)off, " %d", d->lens[b]);
}

/* doc/ABI.md's tolerances, plus the tighter bound an fp64 oracle must meet
 * (the bf16 / fp32 rounding of the exact value). */
void compare(const struct dsetup *d, int with_lse)
{
    const struct dcase *c = &d->c;
    size_t nout = d->out_bytes / 2, nlse = d->lse_bytes / 4, e;
    double *ref_out = malloc(sizeof(double) * nout), *ref_lse = malloc(sizeof(double) * nlse);
    double dot = 0, n_o = 0, n_r = 0;
    char desc[512];
    describe(d, desc, sizeof desc);
    ref_decode(d, ref_out, ref_lse);

    for (e = 0; e < nout; e++) {
        double o = ref_bf16(d->out[e]), r = ref_out[e], diff = fabs(o - r);
        size_t row = e / 512;
        int32_t b = (int32_t)(row / ((size_t)c->q_len * c->h_q));
        int i = (int)(row / (size_t)c->h_q % (size_t)c->q_len), h = (int)(row % (size_t)c->h_q);
        /* Non-finite values where the fp64 evaluation has them, and only
         * there (the poison of the non-finite tests is finite). */
        if (isnan(r) || isinf(r)) {
            REQUIRE(isnan(r) ? isnan(o) : o == r, "%s: out[b %d, i %d, h %d, %d] = %g, ref %g",
                    desc, b, i, h, (int)(e % 512), o, r);
            continue;
        }
        REQUIRE(d->out[e] != 0xffff, "%s: out[b %d, i %d, h %d, %d] not written", desc, b, i,
                      h, (int)(e % 512));
        REQUIRE(diff <= 8e-4 || diff <= 2.01 / 128 * fabs(r),
                      "%s: out[b %d, i %d, h %d, %d] = %.9g, ref %.9g", desc, b, i, h,
                      (int)(e % 512), o, r);
        REQUIRE(diff <= 0x1p-8 * fabs(r) + 1e-13,
                      "%s: out[b %d, i %d, h %d, %d] = %.9g, ref %.9g: not the rounded exact value",
                      desc, b, i, h, (int)(e % 512), o, r);
        if (isinf(ref_lse[((size_t)b * c->h_q + h) * c->q_len + i]))
            REQUIRE(d->out[e] == 0, "%s: row without keys must be +0", desc);
        dot += o * r, n_o += o * o, n_r += r * r;
    }
    if (n_o > 0 || n_r > 0)
        REQUIRE(1 - dot / sqrt(n_o * n_r) <= 5e-6, "%s: cosine difference %g", desc,
                      1 - dot / sqrt(n_o * n_r));

    for (e = 0; e < nlse; e++) {
        uint32_t poison = 0xffffffffu;
        double l = d->lse[e], r = ref_lse[e], diff = fabs(l - r);
        if (!with_lse) {
            REQUIRE(memcmp(&d->lse[e], &poison, 4) == 0, "%s: lse written when NULL", desc);
            continue;
        }
        if (isnan(r)) {
            REQUIRE(isnan(l), "%s: lse[%zu] = %g, want NaN", desc, e, l);
            continue;
        }
        REQUIRE(!isnan(l), "%s: lse[%zu] = NaN, ref %g (or not written)", desc, e, r);
        if (isinf(r)) {
            REQUIRE(isinf(l) && l > 0, "%s: lse[%zu] = %g, want +inf", desc, e, l);
            continue;
        }
        REQUIRE(diff <= 1e-6 || diff <= 8.01 / 65536 * fabs(r), "%s: lse[%zu] = %.9g, ref %.9g",
                      desc, e, l, r);
        REQUIRE(diff <= 0x1p-23 * fabs(r) + 1e-12, "%s: lse[%zu] = %.9g, ref %.9g: loose",
                      desc, e, l, r);
    }
    free(ref_out);
    free(ref_lse);
}
