/* test_gpu_decode.c - the decode grid: shapes, formats, page sizes,
 * lengths and kernels, each decoded on the GPU (every other case through
 * mla_schedule and two mla_decode_scheduled calls) and checked against the
 * CPU backend.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../tools/devmem.h"
#include "gpu_harness.h"
#include "mla.h"
#include "rng.h"

/* ------------------------------------------------------------------ */
/* Cases */

#define MAX_CASES 320
static struct kcase g_cases[MAX_CASES];
static int g_ncases;

static struct kcase *add_case(int h_q, int h_kv, int q_len, int mode, int page, int causal,
                              int batch, const int32_t *lens)
{
    if (g_ncases >= MAX_CASES) {
        fprintf(stderr, "test_gpu: too many cases\n");
        exit(99);
    }
    struct kcase *c = &g_cases[g_ncases++];
    kcase_shape(c, h_q, h_kv, q_len, mode, page, causal, batch, lens);
    c->null_stream = (g_ncases % 3) == 0;
    return c;
}

/* Cases with block_n or stages hints run the portable kernel, the only
 * one the hints steer; then each case gets its name. */
static void finish_cases(void)
{
    for (int i = 0; i < g_ncases; i++) {
        struct kcase *c = &g_cases[i];
        if ((c->block_n || c->stages) && !c->kernel)
            c->kernel = "portable";
        int32_t mx = 0;
        for (int b = 0; b < c->batch; b++)
            mx = c->lens[b] > mx ? c->lens[b] : mx;
        snprintf(c->name, sizeof(c->name),
                 "#%d %s h%d/%d n%d%s P%d b%d maxlen %d bn%d%s%s%s%s%s%s%s%s", i,
                 modes[c->mode].name, c->h_q, c->h_kv, c->q_len, c->causal ? " causal" : "",
                 c->page, c->batch, (int)mx, c->block_n, c->stages ? " stages" : "",
                 c->no_lse ? " nolse" : "", c->softmax_scale > 0 ? " sscale" : "",
                 c->q_scale > 0 ? " qscale" : "", c->kv_mul > 0 ? " kvmul" : "",
                 c->null_stream ? " nullstream" : "", c->kernel ? " kernel=" : "",
                 c->kernel ? c->kernel : "");
    }
}

static const int32_t lens_mix7[7] = {0, 1, 20, 63, 64, 65, 140};

void build_cases(void)
{
    static const int32_t two[2] = {65, 140};
    static const int32_t short7[7] = {0, 1, 2, 3, 4, 5, 64};
    static const int32_t ones[1] = {4096};
    struct kcase *c;
    int32_t lens[MAX_BATCH];

    rnd_start(1000);
    if (g_quick) {
        c = add_case(16, 1, 2, M_BF16, 64, 1, 7, lens_mix7);
        c->block_n = 64;
        c = add_case(32, 2, 1, M_G64, 16, 0, 2, two);
        c = add_case(16, 1, 4, M_DSMLA, 64, 1, 7, lens_mix7);
        c->block_n = 32;
        c = add_case(64, 1, 1, M_E4M3, 1, 0, 7, lens_mix7);
        if (g_hopper) {
            c = add_case(64, 1, 1, M_G64, 64, 0, 7, lens_mix7);
            c->kernel = "hopper";
            c = add_case(128, 1, 2, M_DSMLA, 128, 1, 7, lens_mix7);
            c->kernel = "hopper";
            c = add_case(16, 1, 1, M_BF16, 64, 0, 1, ones);
            c->kernel = "hopper";
            c = add_case(16, 1, 1, M_G64, 64, 0, 7, lens_mix7);
            c->kernel = "hopper-narrow";
            c = add_case(8, 1, 2, M_DSMLA, 128, 1, 7, lens_mix7);
            c->kernel = "hopper-narrow";
            c = add_case(32, 2, 1, M_DSMLA, 64, 0, 7, lens_mix7);
            c->kernel = "hopper-narrow";
            c = add_case(16, 1, 1, M_G128, 64, 0, 7, lens_mix7);
            c->kernel = "hopper-narrow";
            c = add_case(16, 1, 1, M_E4M3, 64, 0, 7, lens_mix7);
            c->kernel = "hopper-narrow";
            c = add_case(128, 1, 1, M_E4M3, 64, 0, 7, lens_mix7);
            c->kernel = "hopper-wide8";
            c = add_case(64, 1, 2, M_DSMLA, 64, 1, 7, lens_mix7);
            c->kernel = "hopper-wide8";
            c = add_case(128, 1, 1, M_G128, 64, 0, 7, lens_mix7);
            c->kernel = "hopper-wide8";
        }
        /* The scheduler's warp path at its 32 requests, its block path at 33. */
        for (int k = 0; k < 2; k++) {
            for (int i = 0; i < 32 + k; i++)
                lens[i] = i % 5 == 2 ? 0 : 1 + rnd_int(400);
            add_case(16, 1, 1, M_BF16, 64, 0, 32 + k, lens);
        }
        finish_cases();
        return;
    }

    /* Formats x scale blocks x block_n. */
    for (int m = 0; m < NMODES; m++)
        for (int bn = 32; bn <= 64; bn += 32) {
            c = add_case(16, 1, 2, m, 64, 1, 7, lens_mix7);
            c->block_n = bn;
        }

    /* Heads x KV heads. */
    static const int hp[][2] = {{1, 1},  {3, 1},  {3, 3},   {16, 1},  {16, 4}, {32, 1},
                                {32, 2}, {64, 1}, {64, 8},  {128, 1}, {128, 2}};
    for (int i = 0; i < (int)(sizeof(hp) / sizeof(hp[0])); i++)
        add_case(hp[i][0], hp[i][1], 1 + (i % 3 == 2 ? 3 : i % 3), i % NMODES, 16, i % 2, 2, two);

    /* Causal x q_len, with lengths shorter than q_len (rows that see no key). */
    for (int n = 1; n <= 4; n *= 2)
        for (int causal = 0; causal <= 1; causal++)
            add_case(32, 1, n, (n + causal) % NMODES, 16, causal, 7, short7);

    /* Page size x lengths around page boundaries. */
    static const int pages[4] = {1, 16, 64, 128};
    for (int pi = 0; pi < 4; pi++) {
        int P = pages[pi], k = 0;
        const int32_t cand[] = {0, 1, 20, 63, 64, 65, 140, P - 1, P, P + 1, 2 * P - 1, 2 * P,
                                2 * P + 1};
        for (int i = 0; i < (int)(sizeof(cand) / sizeof(cand[0])); i++) {
            int dup = cand[i] < 0;
            for (int j = 0; j < k && !dup; j++)
                dup = lens[j] == cand[i];
            if (!dup)
                lens[k++] = cand[i];
        }
        add_case(16, 1, 1, M_BF16, P, 0, k, lens);
        add_case(16, 1, 2, pi % 2 ? M_G128 : M_DSMLA, P, 1, k, lens);
        add_case(128, 1, 1, pi % 2 ? M_E4M3 : M_G32, P, 0, k, lens);
    }

    /* Batch sizes, long sequences (checked on a sample of requests). */
    add_case(128, 1, 1, M_BF16, 64, 0, 1, ones);
    lens[0] = 4096;
    lens[1] = 3000;
    add_case(64, 1, 2, M_G128, 128, 1, 2, lens);
    for (int i = 0; i < 64; i++)
        lens[i] = i == 0 ? 4096 : rnd_int(4097);
    c = add_case(16, 1, 1, M_BF16, 64, 0, 64, lens);
    c->sample = 6;
    for (int i = 0; i < 64; i++)
        lens[i] = 1 + rnd_int(300);
    c = add_case(128, 1, 4, M_DSMLA, 16, 1, 64, lens);
    c->sample = 4;
    for (int i = 0; i < 64; i++)
        lens[i] = 4096;
    c = add_case(16, 1, 1, M_E4M3, 64, 0, 64, lens);
    c->sample = 3;
    for (int i = 0; i < 7; i++)
        lens[i] = rnd_int(1500);
    add_case(32, 2, 2, M_G64, 64, 1, 7, lens);

    /* Mixes of a few long and many short requests, which the balanced
     * schedule cuts across: 4 of 6000-9000 tokens among 60 of 1-300. */
    for (int k = 0; k < 4; k++) {
        for (int i = 0; i < 64; i++)
            lens[i] = i % 16 == 0 ? 6000 + rnd_int(3000) : 1 + rnd_int(300);
        static const int mm[4] = {M_BF16, M_G128, M_DSMLA, M_BF16};
        c = add_case(k % 2 ? 128 : 16, 1, 1 + (k == 3), mm[k], 64, k == 3, 64, lens);
        c->sample = 6;
    }

    /* The scheduler's warp path (up to 32 requests) and block path on
     * both sides of the boundary: empty, short and long requests. */
    for (int k = 0; k < 3; k++) {
        const int nb = 31 + k;
        for (int i = 0; i < nb; i++)
            lens[i] = i % 7 == 3 ? 0 : i % 8 == 0 ? 3000 + rnd_int(3000) : 1 + rnd_int(700);
        c = add_case(k == 1 ? 128 : 16, 1, 1 + (k == 2), k == 1 ? M_G128 : M_BF16, 64, k == 2, nb,
                     lens);
        c->sample = 3;
    }

    /* Length 4096 in every format. */
    for (int m = 0; m < NMODES; m++)
        add_case(16, 1, 1, m, 64, 0, 1, ones);
    add_case(128, 1, 4, M_G64, 64, 1, 1, ones);

    /* The sm_90a kernel, required (MLA_XKERNEL_HOPPER: a shape it does not
     * take fails instead of falling back), and every third case again on
     * the portable kernel at the same page size. */
    if (g_hopper) {
        static const int hh[][2] = {{1, 1}, {3, 1}, {16, 1}, {16, 4}, {32, 2}, {64, 1},
                                    {64, 8}, {128, 1}, {128, 2}};
        int k = 0;
        for (int i = 0; i < (int)(sizeof(hh) / sizeof(hh[0])); i++)
            for (int n = 1; n <= 4; n *= 2) {
                int m = k % NMODES;
                if (hh[i][1] > 1 && (m == M_G32 || m == M_G64 || m == M_G128))
                    m = M_E4M3; /* block scales with h_kv > 1: portable only */
                c = add_case(hh[i][0], hh[i][1], n, m, 64 << (k % 3), k % 2, 7, lens_mix7);
                c->kernel = k % 3 == 2 ? "portable" : "hopper";
                k++;
            }
        static const int hpages[3] = {64, 128, 256};
        for (int pi = 0; pi < 3; pi++) {
            const int P = hpages[pi];
            const int32_t pl[7] = {P - 1, P, P + 1, 2 * P - 1, 2 * P + 1, 3 * P + 5, 1};
            for (int m = 0; m < NMODES; m++) {
                c = add_case(m % 2 ? 128 : 16, 1, 1 + (m % 3 == 1), m, P, m % 3 == 1, 7, pl);
                c->kernel = "hopper";
            }
        }
        for (int m = 0; m < NMODES; m++) {
            c = add_case(128, 1, 1, m, 64, 0, 1, ones); /* one request, many splits */
            c->kernel = "hopper";
            c = add_case(16, 1, 1, m, 64, 0, 1, ones); /* the same, narrow */
            c->kernel = "hopper-narrow";
        }
        /* The wide kernels on shapes the narrow one takes by default. */
        for (int m = 0; m < NMODES; m++) {
            c = add_case(m % 2 ? 8 : 16, 1, m % 2 ? 2 : 1, m, 64 << (m % 2), m % 2, 7, lens_mix7);
            c->kernel = m == M_BF16 ? "hopper-wide" : "hopper-wide8";
        }
        for (int m = 0; m < NMODES; m += 2) {
            for (int i = 0; i < 64; i++)
                lens[i] = 1 + rnd_int(3000);
            c = add_case(m ? 64 : 16, 1, 1 + (m == 4), m, 64, m == 4, 64, lens);
            c->kernel = "hopper";
            c->sample = 5;
        }
        /* The narrow FP8 kernels over many tiles per CTA, in every FP8
         * format (one warpgroup per tile, five or four stages in flight). */
        for (int m = 0; m < NMODES; m++) {
            if (m == M_BF16)
                continue;
            for (int i = 0; i < 64; i++)
                lens[i] = 2048 + rnd_int(6000);
            c = add_case(16, 1, 1, m, 64 << (m % 2), 0, 64, lens);
            c->kernel = "hopper-narrow";
            c->sample = 3;
        }
        /* The narrow FP8 kernels with more KV heads: a tile's rows are
         * h_kv rows apart, one copy each. */
        static const int nk[][3] = {
            {32, 2, M_DSMLA}, {32, 4, M_E4M3}, {64, 4, M_DSMLA}, {16, 2, M_E4M3}};
        for (int i = 0; i < 4; i++) {
            c = add_case(nk[i][0], nk[i][1], 1 + i % 2, nk[i][2], 64 << (i % 2), i % 2, 7,
                         lens_mix7);
            c->kernel = "hopper-narrow";
        }
        c = add_case(16, 1, 1, M_G32, 64, 0, 7, lens_mix7);
        c->kernel = "hopper";
        c->no_lse = 1;
        c->softmax_scale = 0.05;
        /* Q far outside f16's range, both ways (the narrow FP8 kernels
         * take the scores in f16, Q scaled by a power of two), with the
         * softmax scale keeping the scores of order one. */
        for (int m = 0; m < NMODES; m++) {
            if (m == M_BF16)
                continue;
            c = add_case(16, 1, 1, m, 64, 0, 7, lens_mix7);
            c->kernel = "hopper-narrow";
            c->q_scale = m % 2 ? 1e6 : 1e-6;
            c->softmax_scale = m % 2 ? 1e-6 : 1e6;
        }
        /* The narrow FP8 kernels' unscaled V (bf16 times 2^-120 against
         * P times 2^120): e4m3 subnormals throughout (tiny values, no
         * block scales), and 128-dim block scales of about 78 in the first
         * half of each request and 3 or 1000 times that in the second,
         * past the 2^7 at which O^T's unit rises (a tile may hold both). */
        static const int32_t lens_long8[8] = {700, 1500, 2048, 64, 130, 2500, 333, 1024};
        c = add_case(16, 1, 1, M_E4M3, 64, 0, 8, lens_long8);
        c->kernel = "hopper-narrow";
        c->kv_mul = 1e-3;
        for (int m = M_G128; m <= M_DSMLA; m++)
            for (int big = 0; big < 2; big++) {
                c = add_case(16, 1, 1, m, 64, 0, 8, lens_long8);
                c->kernel = "hopper-narrow";
                c->kv_mul = 1e5;
                c->kv_tail_mul = big ? 1000 : 3;
                c->softmax_scale = big ? 1e-7 : 2e-5;
            }
        /* Two 16-row M tiles of the narrow FP8 kernels (E4M3 without block
         * scales or with 128-dim ones takes them by default from 16
         * sequences): two MTP tokens at 16 heads (causal), 32 heads. */
        for (int m = 0; m < NMODES; m++) {
            if (m == M_BF16)
                continue;
            for (int i = 0; i < 16; i++)
                lens[i] = 1 + rnd_int(3000);
            c = add_case(16, 1, 2, m, 64, 1, 16, lens);
            c->kernel = "hopper-narrow";
            c->sample = 3;
        }
        c = add_case(32, 1, 1, M_G128, 64, 0, 16, lens);
        c->sample = 3;
        /* The wide FP8 kernel, in every FP8 scale mode: many tiles a CTA
         * at 128 heads (two M tiles), MTP with causal (4, 6 and 8 M tiles
         * per KV head), 48 rows (an M tile with dead rows), two M tiles of
         * 100 rows, pages of 128, lengths off the tile and page edges. */
        for (int m = 0; m < NMODES; m++) {
            if (m == M_BF16)
                continue;
            for (int i = 0; i < 12; i++)
                lens[i] = 1 + rnd_int(5000);
            c = add_case(128, 1, 1, m, 64 << (m % 2), 0, 12, lens);
            c->kernel = "hopper-wide8";
            c->sample = 3;
            c = add_case(128, 1, 1, m, 64, 0, 7, lens_mix7);
            c->kernel = "hopper-wide8";
            c = add_case(64, 1, 2, m, 64, 1, 7, lens_mix7);
            c->kernel = "hopper-wide8";
            c = add_case(128, 1, 2, m, 64, 1, 7, lens_mix7);
            c->kernel = "hopper-wide8";
            c = add_case(128, 1, 4, m, 128, 1, 7, lens_mix7);
            c->kernel = "hopper-wide8";
            c = add_case(16, 1, 3, m, 64, 1, 7, lens_mix7);
            c->kernel = "hopper-wide8";
            c = add_case(100, 1, 1, m, 64, 0, 7, lens_mix7);
            c->kernel = "hopper-wide8";
        }
        c = add_case(128, 1, 3, M_G64, 64, 1, 7, lens_mix7);
        c->kernel = "hopper-wide8";
        /* More KV heads (a copy a row); Q far outside f16's range (E4M3
         * without scales takes the scores in f16); e4m3 subnormals, and
         * block scales past 2^7. */
        c = add_case(64, 2, 1, M_E4M3, 64, 0, 7, lens_mix7);
        c->kernel = "hopper-wide8";
        c = add_case(128, 2, 2, M_DSMLA, 64, 1, 7, lens_mix7);
        c->kernel = "hopper-wide8";
        for (int big = 0; big < 2; big++) {
            c = add_case(64, 1, 1, M_E4M3, 64, 0, 7, lens_mix7);
            c->kernel = "hopper-wide8";
            c->q_scale = big ? 1e6 : 1e-6;
            c->softmax_scale = big ? 1e-6 : 1e6;
        }
        c = add_case(64, 1, 1, M_E4M3, 64, 0, 8, lens_long8);
        c->kernel = "hopper-wide8";
        c->kv_mul = 1e-3;
        for (int m = M_G128; m <= M_DSMLA; m++) {
            c = add_case(128, 1, 1, m, 64, 0, 8, lens_long8);
            c->kernel = "hopper-wide8";
            c->kv_mul = 1e5;
            c->kv_tail_mul = 1000;
            c->softmax_scale = 2e-5;
        }
    }

    /* Odds and ends: no LSE, explicit softmax scale, all lengths 0, a plan
     * bound far above the lengths, explicit stage counts. */
    c = add_case(16, 1, 1, M_BF16, 64, 0, 7, lens_mix7);
    c->no_lse = 1;
    c = add_case(16, 1, 2, M_G32, 16, 1, 7, lens_mix7);
    c->softmax_scale = 0.05;
    memset(lens, 0, sizeof(lens));
    add_case(16, 1, 2, M_E4M3, 16, 1, 3, lens);
    c = add_case(64, 1, 1, M_BF16, 16, 0, 7, lens_mix7);
    c->max_seq_len = 100000;
    c = add_case(16, 1, 1, M_BF16, 64, 0, 7, lens_mix7);
    c->block_n = 32;
    c->stages = 4;
    c = add_case(16, 1, 1, M_G64, 64, 0, 7, lens_mix7);
    c->block_n = 32;
    c->stages = 2;
    c = add_case(16, 1, 2, M_DSMLA, 64, 1, 7, lens_mix7);
    c->block_n = 64;
    c->stages = 1;
    finish_cases();
}

/* ------------------------------------------------------------------ */
/* Decode grid */

START_TEST(decode_grid)
{
    const struct kcase *c = &g_cases[_i];
    struct prob p;
    watchdog(c->name, -1);
    arena_reset();
    rnd_start(2000 + (uint64_t)_i);
    double t0 = now_s();
    build_problem(&p, c, NULL, 0);
    int max_seq_len = c->max_seq_len ? c->max_seq_len : (p.max_len > 0 ? p.max_len : 1);
    mla_plan_t *plan = gpu_plan(&p, max_seq_len);
    if (!plan) {
        arena_reset();
        return;
    }
    size_t ws_bytes = 0;
    devmem_ptr ws = gpu_workspace(plan, &ws_bytes);
    devmem_stream s = c->null_stream ? NULL : g_stream;

    DM_OK(devmem_memset8(p.d_out, 0xff, p.out_elems * 2));
    DM_OK(devmem_memset8(p.d_lse, 0xff, p.lse_elems * 4));
    DM_OK(devmem_memset8(ws, 0xff, ws_bytes));
    DM_OK(devmem_sync());
    /* Odd cases: the schedule once, then two layers' decodes on it; the
     * first layer's output must equal the second's, bit for bit. */
    const int scheduled = _i % 2;
    uint16_t *gout = halloc(p.out_elems * 2);
    float *glse = halloc(p.lse_elems * 4);
    if (scheduled) {
        uint16_t *first = halloc(p.out_elems * 2);
        float *first_lse = halloc(p.lse_elems * 4);
        ST_OK(g_gpu, mla_schedule(plan, p.num_pages, DPTR(p.d_bt), p.mpps, DPTR(p.d_lens),
                                  DPTR(ws), ws_bytes, s));
        ST_OK(g_gpu, prob_decode_scheduled(plan, &p, p.d_bt, ws, ws_bytes, s));
        DM_OK(devmem_stream_sync(s));
        DM_OK(devmem_dtoh(first, p.d_out, p.out_elems * 2));
        DM_OK(devmem_dtoh(first_lse, p.d_lse, p.lse_elems * 4));
        DM_OK(devmem_memset8(p.d_out, 0xff, p.out_elems * 2));
        DM_OK(devmem_memset8(p.d_lse, 0xff, p.lse_elems * 4));
        DM_OK(devmem_sync());
        ST_OK(g_gpu, prob_decode_scheduled(plan, &p, p.d_bt, ws, ws_bytes, s));
        DM_OK(devmem_stream_sync(s));
        DM_OK(devmem_dtoh(gout, p.d_out, p.out_elems * 2));
        DM_OK(devmem_dtoh(glse, p.d_lse, p.lse_elems * 4));
        REQUIRE(memcmp(first, gout, p.out_elems * 2) == 0 &&
                    memcmp(first_lse, glse, p.lse_elems * 4) == 0,
                "%s: two decodes on one schedule differ", c->name);
    } else {
        ST_OK(g_gpu, prob_decode(plan, &p, ws, ws_bytes, s));
        DM_OK(devmem_stream_sync(s));
        DM_OK(devmem_dtoh(gout, p.d_out, p.out_elems * 2));
        DM_OK(devmem_dtoh(glse, p.d_lse, p.lse_elems * 4));
    }
    mla_status_t dst = MLA_STATUS_INTERNAL_ERROR;
    ST_OK(g_gpu, mla_workspace_status(plan, DPTR(ws), &dst));
    REQUIRE(dst == MLA_STATUS_SUCCESS, "%s: device status %s", c->name, mla_status_string(dst));
    if (c->no_lse) {
        for (size_t i = 0; i < p.lse_elems; i++) {
            uint32_t bits;
            memcpy(&bits, &glse[i], 4);
            REQUIRE(bits == 0xffffffffu, "%s: lse written although NULL was passed", c->name);
        }
    }
    long fails = check_against_cpu(&p, p.lens, max_seq_len, gout, c->no_lse ? NULL : glse,
                                   c->name);
    printf("       (%.2f s, workspace %zu bytes%s)\n", now_s() - t0, ws_bytes,
           scheduled ? ", mla_schedule + 2 x mla_decode_scheduled" : "");
    arena_reset();
    REQUIRE(fails == 0, "%s: %ld mismatches (see log)", c->name, fails);
}
END_TEST

void add_decode_cases(Suite *s)
{
    TCase *tc = tcase_create("decode");
    tcase_set_timeout(tc, 3600);
    tcase_add_loop_test(tc, decode_grid, 0, g_ncases);
    suite_add_tcase(s, tc);
}
