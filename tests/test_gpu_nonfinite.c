/* test_gpu_nonfinite.c - NaN and Inf inside the lengths, one kind per
 * request, in every format and kernel family: the GPU result has them
 * exactly where the CPU backend's fp64 evaluation does.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../tools/devmem.h"
#include "fp8_codec.h"
#include "gpu_harness.h"
#include "mla.h"
#include "rng.h"

/* ------------------------------------------------------------------ */
/* NaN and Inf inside the lengths: the result has them where the CPU
 * backend's fp64 evaluation does, in every format and kernel family */

enum { NF_CLEAN, NF_Q_NAN, NF_NOPE_NAN, NF_V_PINF, NF_V_NINF, NF_ROPE_NAN, NF_ROPE_INF,
       NF_LAST_NAN, NF_LEAD_INF, NF_SCALE_NAN, NF_ALL_INF, NF_ALL_INF_LONG, NF_KINDS };
/* Request b holds kind b.  Long requests spread over splits, so that the
 * combine step meets a NaN or -Inf-weighted partial next to finite ones,
 * or only -Inf-weighted ones; NF_LEAD_INF's infinities fill whole 64-key
 * tiles. */
static const int32_t nf_lens[NF_KINDS] = {70, 70, 1500, 70, 1500, 70, 70, 9, 150, 70, 70, 1500};

struct nf_case {
    int mode, family, q_len;
};
enum { NF_PORTABLE_16, NF_PORTABLE_128, NF_NARROW, NF_WIDE, NF_WIDE8_128, NF_WIDE8, NF_FAMILIES };
static const char *const nf_family_names[NF_FAMILIES] = {
    "portable", "portable", "hopper-narrow", "hopper-wide", "hopper-wide8", "hopper-wide8"};
#define MAX_NF_CASES 80
static struct nf_case g_nf[MAX_NF_CASES];
static int g_nnf;

void build_nf_cases(void)
{
    for (int f = 0; f < NF_FAMILIES; f++) {
        if (f >= NF_NARROW && !g_hopper)
            continue;
        for (int m = 0; m < NMODES; m++) {
            if (f == NF_WIDE && m != M_BF16)
                continue; /* BF16 only */
            if ((f == NF_WIDE8_128 || f == NF_WIDE8) && m == M_BF16)
                continue; /* FP8 only */
            if (g_quick && (f != NF_PORTABLE_16 || m % 2))
                continue;
            for (int n = 1; n <= 2; n++)
                if (g_nnf < MAX_NF_CASES)
                    g_nf[g_nnf++] = (struct nf_case){m, f, n};
        }
    }
}

/* Channel ch of token t of request b (KV head 0) becomes v (NaN or
 * +-Inf) as the format allows: bf16 values directly, the e4m3 NaN byte
 * 0x7f, an infinity through the block scale (E4M3 with block scales,
 * DS_MLA nope channels; the whole block then turns non-finite); E4M3
 * without block scales has no infinity and takes the NaN byte. */
static void nf_poke(struct prob *p, int b, int t, int ch, double v)
{
    const struct kcase *c = p->c;
    const int64_t page = p->bt[(size_t)b * p->mpps + t / c->page];
    const int64_t row = (page * c->page + t % c->page) * c->h_kv;
    uint8_t *r = p->kv + row * p->row_bytes;
    const int fmt = modes[c->mode].fmt;
    const uint16_t h = isnan(v) ? 0x7fc0 : v > 0 ? 0x7f80 : 0xff80;
    const float f = (float)v;
    if (fmt == MLA_KV_BF16)
        memcpy(r + 2 * ch, &h, 2);
    else if (fmt == MLA_KV_FP8_DS_MLA && ch >= MLA_D_NOPE)
        memcpy(r + MLA_D_NOPE + 16 + 2 * (ch - MLA_D_NOPE), &h, 2);
    else if (isnan(v))
        r[ch] = 0x7f;
    else if (fmt == MLA_KV_FP8_DS_MLA)
        memcpy(r + MLA_D_NOPE + 4 * (ch / 128), &f, 4);
    else if (p->spr)
        p->sc[row * p->spr + ch / modes[c->mode].g] = f;
    else
        r[ch] = 0x7f;
}

/* A block scale (E4M3 with scales, DS_MLA) of token t becomes NaN; other
 * formats get the NaN byte. */
static void nf_poke_scale_nan(struct prob *p, int b, int t, int ch)
{
    const struct kcase *c = p->c;
    const int64_t page = p->bt[(size_t)b * p->mpps + t / c->page];
    const int64_t row = (page * c->page + t % c->page) * c->h_kv;
    const float nan = NAN;
    if (modes[c->mode].fmt == MLA_KV_FP8_DS_MLA)
        memcpy(p->kv + row * p->row_bytes + MLA_D_NOPE + 4 * (ch / 128), &nan, 4);
    else if (p->spr)
        p->sc[row * p->spr + ch / modes[c->mode].g] = nan;
    else
        nf_poke(p, b, t, ch, NAN);
}

START_TEST(decode_nonfinite)
{
    const struct nf_case *k = &g_nf[_i];
    const int fmt = modes[k->mode].fmt;
    static struct kcase c;
    struct prob p;
    watchdog("decode_nonfinite", _i);
    arena_reset();
    rnd_start(7000 + (uint64_t)_i);
    const int h_q = k->family == NF_PORTABLE_128 || k->family == NF_WIDE8_128 ? 128
                    : k->family == NF_WIDE || k->family == NF_WIDE8      ? 64
                    : k->q_len > 1 && fmt == MLA_KV_BF16 ? 8 /* narrow BF16: 16 rows */
                                                         : 16;
    kcase_shape(&c, h_q, 1, k->q_len, k->mode, 64, k->q_len > 1, NF_KINDS, nf_lens);
    c.kernel = nf_family_names[k->family];
    snprintf(c.name, sizeof(c.name), "nonfinite %s %s h%d n%d%s", modes[c.mode].name, c.kernel,
             c.h_q, c.q_len, c.causal ? " causal" : "");
    build_problem(&p, &c, NULL, 0);

    /* One kind of non-finite value per request, inside its length. */
    p.q[(((size_t)NF_Q_NAN * c.q_len + c.q_len - 1) * c.h_q + 3) * MLA_D_QK + 7] = 0x7fc0;
    nf_poke(&p, NF_NOPE_NAN, 1400, 100, NAN); /* in a late split only */
    nf_poke(&p, NF_V_PINF, 7, 200, INFINITY);
    nf_poke(&p, NF_V_NINF, 3, 300, -INFINITY);
    nf_poke(&p, NF_ROPE_NAN, 10, 540, NAN);
    nf_poke(&p, NF_ROPE_INF, 11, 560, INFINITY);
    nf_poke(&p, NF_LAST_NAN, nf_lens[NF_LAST_NAN] - 1, 50, NAN); /* the last causal row only */
    c.may_nan = 1;
    c.may_nan_req = NF_LAST_NAN;
    c.may_nan_dim = 50;
    /* Scores of +Inf for some heads and -Inf for others over the first 70
     * keys, finite keys after them: channel 0 (BF16) or RoPE channel 570
     * (DS_MLA: not part of V); e4m3 has no Inf. */
    if (fmt != MLA_KV_FP8_E4M3)
        for (int t = 0; t < 70; t++)
            nf_poke(&p, NF_LEAD_INF, t, fmt == MLA_KV_BF16 ? 0 : 570, INFINITY);
    nf_poke_scale_nan(&p, NF_SCALE_NAN, 20, 130);
    /* +Inf in RoPE channel 560 of every key: a head whose q is negative
     * there sees only -Inf scores, which makes its rows NaN (mla.h), not
     * the zeros of a row without keys; in one piece and over splits. */
    for (int b = NF_ALL_INF; b <= NF_ALL_INF_LONG; b++)
        for (int t = 0; t < nf_lens[b]; t++)
            nf_poke(&p, b, t, 560, INFINITY);
    DM_OK(devmem_htod(p.d_kv, p.kv, p.kv_bytes));
    if (p.spr)
        DM_OK(devmem_htod(p.d_sc, p.sc, p.sc_bytes));
    DM_OK(devmem_htod(p.d_q, p.q, p.q_elems * 2));

    mla_plan_t *plan = gpu_plan(&p, p.max_len);
    REQUIRE(plan, "%s: plan", c.name);
    size_t ws_bytes = 0;
    devmem_ptr ws = gpu_workspace(plan, &ws_bytes);
    /* A finite poison (bf16 and fp32 0x7b7b...): an element left
     * unwritten cannot pass for an expected NaN. */
    DM_OK(devmem_memset8(p.d_out, 0x7b, p.out_elems * 2));
    DM_OK(devmem_memset8(p.d_lse, 0x7b, p.lse_elems * 4));
    DM_OK(devmem_sync());
    ST_OK(g_gpu, prob_decode(plan, &p, ws, ws_bytes, g_stream));
    DM_OK(devmem_stream_sync(g_stream));
    mla_status_t dst = MLA_STATUS_INTERNAL_ERROR;
    ST_OK(g_gpu, mla_workspace_status(plan, DPTR(ws), &dst));
    REQUIRE(dst == MLA_STATUS_SUCCESS, "%s: device status %s", c.name, mla_status_string(dst));
    uint16_t *gout = halloc(p.out_elems * 2);
    float *glse = halloc(p.lse_elems * 4);
    DM_OK(devmem_dtoh(gout, p.d_out, p.out_elems * 2));
    DM_OK(devmem_dtoh(glse, p.d_lse, p.lse_elems * 4));
    /* NaN where the reference has NaN, Inf of the same sign where it has
     * Inf, the usual bounds elsewhere (out_ok, lse_ok). */
    long fails = check_against_cpu(&p, p.lens, p.max_len, gout, glse, c.name);

    /* The values did reach the result: each poked request has non-finite
     * outputs (E4M3 has no Inf for NF_LEAD_INF to put there). */
    const size_t orow = (size_t)c.q_len * c.h_q * MLA_D_V;
    int missing = 0;
    for (int b = NF_Q_NAN; b < NF_KINDS; b++) {
        size_t bad = 0;
        for (size_t i = 0; i < orow; i++)
            bad += !isfinite(mla_bf16_to_float(gout[(size_t)b * orow + i]));
        if (!bad && !(b == NF_LEAD_INF && fmt == MLA_KV_FP8_E4M3)) {
            printf("FAIL   %s: request %d has no NaN or Inf in its output\n", c.name, b);
            missing++;
        }
    }
    fflush(stdout);
    arena_reset();
    REQUIRE(fails == 0 && missing == 0, "%s: %ld mismatches, %d requests without non-finite "
            "outputs (see log)", c.name, fails, missing);
}
END_TEST

void add_nonfinite_cases(Suite *s)
{
    TCase *tc = tcase_create("nonfinite");
    tcase_set_timeout(tc, 1200);
    tcase_add_loop_test(tc, decode_nonfinite, 0, g_nnf);
    suite_add_tcase(s, tc);
}
