/* test_select.c - the decode variant table and its selector
 * (lib/cuda/gpu_variants.c), without a GPU: the variant each shape gets on
 * modelled devices, automatically and with MLA_XPARAM_KERNEL, and what
 * holds for every shape of a grid.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "gpu_variants.h"
#include "mla_experimental.h"
#include "mla_params.h"

/* Devices: dynamic shared memory a block may use, and which images. */
enum { D_H200, D_SM100, D_163K, D_99K, D_H200_NO_NARROW, D_H200_NO_N64, NUM_DEVICES };
static const char *const device_names[NUM_DEVICES] = {
    "H200", "sm_100", "163 KiB device", "99 KiB device", "H200 without narrow kernels",
    "H200 without portable n64 kernels"};

static void device(struct mla_select_in *in, int d)
{
    static const int32_t optin[NUM_DEVICES] = {232448, 232448, 166912, 101376, 232448, 232448};
    in->device = device_names[d];
    in->smem_optin = optin[d];
    for (int v = 0; v < MLA_NUM_VARIANTS; v++) {
        const struct mla_variant *var = &mla__variants[v];
        const int sm90a = d == D_H200 || d == D_H200_NO_NARROW || d == D_H200_NO_N64;
        int present = var->arch == MLA_ARCH_ANY || sm90a;
        if (d == D_H200_NO_NARROW && var->layout == MLA_LAYOUT_NARROW)
            present = 0;
        if (d == D_H200_NO_N64 && var->layout == MLA_LAYOUT_PORTABLE && var->block_n == 64)
            present = 0;
        in->smem_limit[v] = present ? optin[d] : -1;
    }
}

/* g: MLA_PARAM_SCALE_BLOCK_SIZE (E4M3). */
static struct mla_select_in shape(int d, int fmt, int g, int h_q, int h_kv, int q_len, int page,
                                  int batch, int kernel, int block_n, int stages)
{
    struct mla_select_in in;
    memset(&in, 0, sizeof(in));
    in.kv_format = fmt;
    in.scales_per_row = fmt == MLA_FMT_FP8_E4M3 && g ? (MLA_D_QK + g - 1) / g : 0;
    in.scale_mode = mla_scale_mode(fmt, in.scales_per_row);
    in.num_heads = h_q;
    in.num_kv_heads = h_kv;
    in.q_len = q_len;
    in.page_size = page;
    in.batch = batch;
    in.kernel = kernel;
    in.block_n = block_n;
    in.num_kv_stages = stages;
    device(&in, d);
    return in;
}

enum { BF16 = MLA_FMT_BF16, E4M3 = MLA_FMT_FP8_E4M3, DSMLA = MLA_FMT_FP8_DS_MLA };
enum {
    AUTO = MLA_XKERNEL_AUTO,
    PORTABLE = MLA_XKERNEL_PORTABLE,
    HOPPER = MLA_XKERNEL_HOPPER,
    WIDE = MLA_XKERNEL_HOPPER_WIDE,
    NARROW = MLA_XKERNEL_HOPPER_NARROW,
    WIDE8 = MLA_XKERNEL_HOPPER_WIDE8
};

struct sel_case {
    int dev, fmt, g, h_q, h_kv, q_len, page, batch, kernel, block_n, stages;
    const char *want; /* the variant's name; NULL: NOT_SUPPORTED */
    int want_stages;
};

static const struct sel_case cases[] = {
    /* H200, automatic: narrow up to 16 rows (BF16), or 32 (DS_MLA, E4M3
     * without block scales or with 128-channel ones) from 8 requests x
     * KV heads; else wide (FP8: hopper-wide8, E4M3 block scales on their
     * own kernel); the portable kernel below 64-token pages and for E4M3
     * block scales with several KV heads. */
    {D_H200, BF16, 0, 16, 1, 1, 64, 1, AUTO, 0, 0, "hopper-narrow-bf16", 2},
    {D_H200, BF16, 0, 8, 1, 2, 64, 1, AUTO, 0, 0, "hopper-narrow-bf16", 2},
    {D_H200, BF16, 0, 32, 1, 1, 64, 64, AUTO, 0, 0, "hopper-wide-bf16", 2},
    {D_H200, BF16, 0, 128, 1, 1, 64, 64, AUTO, 0, 0, "hopper-wide-bf16", 2},
    {D_H200, BF16, 0, 16, 1, 1, 16, 1, AUTO, 0, 0, "portable-bf16-n64", 2},
    {D_H200, BF16, 0, 16, 1, 1, 32, 64, AUTO, 0, 0, "portable-bf16-n64", 2},
    {D_H200, E4M3, 0, 16, 1, 1, 64, 8, AUTO, 0, 0, "hopper-narrow-e4m3", 2},
    {D_H200, E4M3, 0, 16, 1, 1, 64, 7, AUTO, 0, 0, "hopper-wide8-e4m3", 2},
    {D_H200, E4M3, 0, 32, 2, 1, 64, 4, AUTO, 0, 0, "hopper-narrow-e4m3", 2},
    {D_H200, E4M3, 128, 16, 1, 2, 64, 8, AUTO, 0, 0, "hopper-narrow-e4m3", 2},
    {D_H200, E4M3, 128, 32, 1, 1, 64, 8, AUTO, 0, 0, "hopper-narrow-e4m3", 2},
    {D_H200, E4M3, 64, 16, 1, 2, 64, 8, AUTO, 0, 0, "hopper-wide8-e4m3b", 2},
    {D_H200, E4M3, 64, 16, 1, 1, 64, 8, AUTO, 0, 0, "hopper-narrow-e4m3", 2},
    {D_H200, E4M3, 32, 16, 1, 2, 64, 64, AUTO, 0, 0, "hopper-wide8-e4m3b", 2},
    {D_H200, E4M3, 32, 32, 2, 1, 64, 64, AUTO, 0, 0, "portable-e4m3-n64", 2},
    {D_H200, E4M3, 128, 128, 2, 1, 64, 64, AUTO, 0, 0, "portable-e4m3-n64", 2},
    {D_H200, E4M3, 128, 128, 1, 1, 64, 64, AUTO, 0, 0, "hopper-wide8-e4m3b", 2},
    {D_H200, E4M3, 0, 128, 1, 4, 128, 1, AUTO, 0, 0, "hopper-wide8-e4m3", 2},
    {D_H200, E4M3, 0, 128, 2, 1, 64, 64, AUTO, 0, 0, "hopper-wide8-e4m3", 2},
    {D_H200, E4M3, 128, 64, 1, 2, 64, 64, AUTO, 0, 0, "hopper-wide8-e4m3b", 2},
    {D_H200, E4M3, 64, 128, 1, 1, 64, 1, AUTO, 0, 0, "hopper-wide8-e4m3b", 2},
    {D_H200, E4M3, 32, 64, 1, 1, 1024, 132, AUTO, 0, 0, "hopper-wide8-e4m3b", 2},
    {D_H200, E4M3, 0, 126, 2, 2, 64, 6, AUTO, 0, 0, "hopper-wide8-e4m3", 2},
    {D_H200, E4M3, 0, 128, 1, 1, 32, 64, AUTO, 0, 0, "portable-e4m3-n64", 2},
    {D_H200, DSMLA, 0, 16, 1, 2, 64, 8, AUTO, 0, 0, "hopper-narrow-dsmla", 2},
    {D_H200, DSMLA, 0, 16, 1, 2, 64, 4, AUTO, 0, 0, "hopper-wide8-dsmla", 2},
    {D_H200, DSMLA, 0, 64, 1, 1, 64, 64, AUTO, 0, 0, "hopper-wide8-dsmla", 2},
    {D_H200, DSMLA, 0, 128, 1, 1, 64, 64, AUTO, 0, 0, "hopper-wide8-dsmla", 2},
    {D_H200, DSMLA, 0, 128, 2, 1, 128, 1, AUTO, 0, 0, "hopper-wide8-dsmla", 2},
    {D_H200, DSMLA, 0, 128, 8, 1, 1, 64, AUTO, 0, 0, "portable-dsmla-n64", 2},
    /* Forced. */
    {D_H200, BF16, 0, 16, 1, 1, 64, 1, PORTABLE, 0, 0, "portable-bf16-n64", 2},
    {D_H200, E4M3, 0, 16, 1, 1, 64, 2, HOPPER, 0, 0, "hopper-wide8-e4m3", 2},
    {D_H200, E4M3, 0, 16, 1, 1, 64, 8, HOPPER, 0, 0, "hopper-narrow-e4m3", 2},
    {D_H200, BF16, 0, 16, 1, 1, 16, 1, HOPPER, 0, 0, NULL, 0},
    {D_H200, BF16, 0, 16, 1, 1, 64, 64, WIDE, 0, 0, "hopper-wide-bf16", 2},
    {D_H200, E4M3, 0, 16, 1, 1, 64, 64, WIDE, 0, 0, NULL, 0},
    {D_H200, E4M3, 128, 128, 1, 1, 64, 64, WIDE, 0, 0, NULL, 0},
    {D_H200, DSMLA, 0, 128, 1, 1, 64, 64, WIDE, 0, 0, NULL, 0},
    {D_H200, E4M3, 64, 16, 1, 2, 64, 1, NARROW, 0, 0, "hopper-narrow-e4m3", 2},
    {D_H200, E4M3, 32, 32, 1, 1, 64, 1, NARROW, 0, 0, "hopper-narrow-e4m3", 2},
    {D_H200, BF16, 0, 32, 1, 1, 64, 8, NARROW, 0, 0, NULL, 0},
    {D_H200, E4M3, 0, 128, 1, 1, 64, 8, NARROW, 0, 0, NULL, 0},
    {D_H200, DSMLA, 0, 64, 1, 1, 64, 8, NARROW, 0, 0, NULL, 0},
    {D_H200, E4M3, 32, 128, 1, 1, 64, 1, WIDE8, 0, 0, "hopper-wide8-e4m3b", 2},
    {D_H200, E4M3, 0, 64, 1, 1, 64, 64, WIDE8, 0, 0, "hopper-wide8-e4m3", 2},
    {D_H200, DSMLA, 0, 128, 1, 1, 64, 64, WIDE8, 0, 0, "hopper-wide8-dsmla", 2},
    {D_H200, E4M3, 0, 128, 1, 1, 64, 64, WIDE8, 0, 0, "hopper-wide8-e4m3", 2},
    {D_H200, E4M3, 128, 64, 1, 4, 64, 1, WIDE8, 0, 0, "hopper-wide8-e4m3b", 2},
    {D_H200, E4M3, 32, 16, 1, 1, 64, 8, WIDE8, 0, 0, "hopper-wide8-e4m3b", 2},
    {D_H200, E4M3, 0, 128, 2, 1, 64, 64, WIDE8, 0, 0, "hopper-wide8-e4m3", 2},
    {D_H200, E4M3, 128, 128, 2, 1, 64, 64, WIDE8, 0, 0, NULL, 0},
    {D_H200, DSMLA, 0, 128, 1, 2, 64, 64, WIDE8, 0, 0, "hopper-wide8-dsmla", 2},
    {D_H200, DSMLA, 0, 64, 1, 1, 32, 64, WIDE8, 0, 0, NULL, 0},
    {D_H200, BF16, 0, 128, 1, 1, 64, 64, WIDE8, 0, 0, NULL, 0},
    /* Hints steer the portable kernel and never turn the others off. */
    {D_H200, BF16, 0, 64, 1, 1, 64, 8, AUTO, 32, 4, "hopper-wide-bf16", 2},
    {D_H200, BF16, 0, 64, 1, 1, 64, 8, HOPPER, 64, 4, "hopper-wide-bf16", 2},
    {D_H200, E4M3, 0, 16, 1, 1, 64, 8, AUTO, 32, 0, "hopper-narrow-e4m3", 2},
    {D_H200, BF16, 0, 64, 1, 1, 16, 8, AUTO, 32, 4, "portable-bf16-n32", 4},
    {D_H200, BF16, 0, 64, 1, 1, 16, 8, AUTO, 32, 0, "portable-bf16-n32", 4},
    {D_H200, BF16, 0, 64, 1, 1, 16, 8, AUTO, 64, 1, "portable-bf16-n64", 1},
    {D_H200, BF16, 0, 64, 1, 1, 16, 8, AUTO, 0, 3, "portable-bf16-n32", 3},
    {D_H200, BF16, 0, 64, 1, 1, 16, 8, AUTO, 64, 4, NULL, 0},
    {D_H200, BF16, 0, 64, 1, 1, 64, 8, PORTABLE, 64, 3, NULL, 0},
    /* Devices without the sm_90a kernels. */
    {D_SM100, BF16, 0, 16, 1, 1, 64, 1, AUTO, 0, 0, "portable-bf16-n64", 2},
    {D_SM100, E4M3, 128, 128, 1, 1, 64, 64, AUTO, 0, 0, "portable-e4m3-n64", 2},
    {D_SM100, BF16, 0, 16, 1, 1, 64, 1, HOPPER, 0, 0, NULL, 0},
    {D_SM100, DSMLA, 0, 16, 1, 1, 64, 8, NARROW, 0, 0, NULL, 0},
    {D_163K, BF16, 0, 16, 1, 1, 64, 1, AUTO, 0, 0, "portable-bf16-n64", 1},
    {D_163K, BF16, 0, 16, 1, 1, 64, 1, AUTO, 32, 0, "portable-bf16-n32", 2},
    {D_163K, BF16, 0, 16, 1, 1, 64, 1, AUTO, 0, 2, "portable-bf16-n32", 2},
    {D_163K, BF16, 0, 16, 1, 1, 64, 1, AUTO, 0, 3, NULL, 0},
    {D_99K, DSMLA, 0, 16, 1, 1, 64, 1, AUTO, 0, 0, NULL, 0},
    /* Images without some variants. */
    {D_H200_NO_NARROW, BF16, 0, 16, 1, 1, 64, 1, AUTO, 0, 0, "hopper-wide-bf16", 2},
    {D_H200_NO_NARROW, E4M3, 0, 16, 1, 1, 64, 8, NARROW, 0, 0, NULL, 0},
    {D_H200_NO_N64, BF16, 0, 64, 1, 1, 64, 8, AUTO, 0, 0, "portable-bf16-n32", 4},
    {D_H200_NO_N64, BF16, 0, 64, 1, 1, 64, 8, WIDE, 0, 0, NULL, 0},
};

START_TEST(selection)
{
    const struct sel_case *c = &cases[_i];
    struct mla_select_in in = shape(c->dev, c->fmt, c->g, c->h_q, c->h_kv, c->q_len, c->page,
                                    c->batch, c->kernel, c->block_n, c->stages);
    struct mla_selection sel;
    char msg[512];
    const mla_status_t st = mla__select_variant(&in, &sel, msg, sizeof(msg));
    const char *got = st == MLA_STATUS_SUCCESS ? mla__variants[sel.variant].name : NULL;
    ck_assert_msg(got == c->want || (got && c->want && strcmp(got, c->want) == 0),
                  "case %d (%s, format %d /%d, h%d/%d n%d P%d b%d, kernel %d, hints %d/%d): "
                  "got %s (%s), want %s",
                  _i, device_names[c->dev], c->fmt, c->g, c->h_q, c->h_kv, c->q_len, c->page,
                  c->batch, c->kernel, c->block_n, c->stages, got ? got : "NOT_SUPPORTED", msg,
                  c->want ? c->want : "NOT_SUPPORTED");
    if (!got) {
        ck_assert_int_eq(st, MLA_STATUS_NOT_SUPPORTED);
        ck_assert_msg(msg[0], "case %d: no message", _i);
        return;
    }
    ck_assert_int_eq(sel.stages, c->want_stages);
    ck_assert_int_eq(sel.required, c->kernel != AUTO && c->kernel != PORTABLE);
}
END_TEST

/* Every shape of a grid on every device: a forced family gives that
 * family or NOT_SUPPORTED; the automatic choice of an sm_90a variant is
 * narrow, or wide (hopper-wide8 for FP8 caches), and is what forcing its
 * family or MLA_XKERNEL_HOPPER gives; hints never change which sm_90a
 * variant runs; the portable variant matches the tiling. */
START_TEST(grid_invariants)
{
    static const int fmts[][2] = {{BF16, 0}, {E4M3, 0}, {E4M3, 32}, {E4M3, 64}, {E4M3, 128},
                                  {DSMLA, 0}};
    static const int heads[] = {1, 3, 8, 16, 32, 64, 128};
    static const int kvh[] = {1, 2, 8};
    static const int pages[] = {1, 32, 64, 1024};
    static const int batches[] = {1, 7, 8, 64};
    static const int hints[][2] = {{0, 0}, {32, 4}, {64, 1}, {64, 4}, {0, 3}};
    const int d = _i;
    long n = 0;
    char msg[512];
    for (size_t f = 0; f < sizeof(fmts) / sizeof(fmts[0]); f++)
        for (size_t h = 0; h < sizeof(heads) / sizeof(heads[0]); h++)
            for (size_t kv = 0; kv < sizeof(kvh) / sizeof(kvh[0]); kv++)
                for (int q = 1; q <= 8; q *= 2)
                    for (size_t p = 0; p < sizeof(pages) / sizeof(pages[0]); p++)
                        for (size_t b = 0; b < sizeof(batches) / sizeof(batches[0]); b++) {
                            if (heads[h] % kvh[kv])
                                continue;
                            struct mla_selection ref, sel;
                            struct mla_select_in in =
                                shape(d, fmts[f][0], fmts[f][1], heads[h], kvh[kv], q, pages[p],
                                      batches[b], AUTO, 0, 0);
                            const mla_status_t ref_st =
                                mla__select_variant(&in, &ref, msg, sizeof(msg));
                            const int ref_sm90 =
                                ref_st == MLA_STATUS_SUCCESS &&
                                mla__variants[ref.variant].layout != MLA_LAYOUT_PORTABLE;
                            /* The wide shapes: hopper-wide8 for FP8 caches. */
                            if (ref_sm90)
                                ck_assert_int_eq(mla__variants[ref.variant].family,
                                                 mla__variants[ref.variant].layout ==
                                                         MLA_LAYOUT_NARROW
                                                     ? NARROW
                                                 : fmts[f][0] == BF16 ? WIDE
                                                                      : WIDE8);
                            for (int k = AUTO; k <= WIDE8; k++)
                                for (size_t hi = 0; hi < sizeof(hints) / sizeof(hints[0]); hi++) {
                                    in = shape(d, fmts[f][0], fmts[f][1], heads[h], kvh[kv], q,
                                               pages[p], batches[b], k, hints[hi][0],
                                               hints[hi][1]);
                                    const mla_status_t st =
                                        mla__select_variant(&in, &sel, msg, sizeof(msg));
                                    n++;
                                    if (st != MLA_STATUS_SUCCESS) {
                                        ck_assert_int_eq(st, MLA_STATUS_NOT_SUPPORTED);
                                        ck_assert(k != AUTO || !ref_sm90);
                                        ck_assert(!(ref_sm90 && k == HOPPER));
                                        continue;
                                    }
                                    const struct mla_variant *v = &mla__variants[sel.variant];
                                    const struct mla_variant *pv = &mla__variants[sel.portable];
                                    ck_assert_int_eq(v->format, fmts[f][0]);
                                    ck_assert_int_eq(pv->layout, MLA_LAYOUT_PORTABLE);
                                    ck_assert_int_eq(pv->format, v->format);
                                    ck_assert_int_eq(pv->block_n, sel.block_n);
                                    ck_assert_int_eq(v->block_n, sel.block_n);
                                    ck_assert(sel.stages >= 1 && sel.stages <= MLA_MAX_STAGES);
                                    ck_assert(sel.portable_smem <=
                                              (uint32_t)in.smem_limit[sel.portable]);
                                    ck_assert(sel.smem <= (uint32_t)in.smem_limit[sel.variant]);
                                    if (k == PORTABLE)
                                        ck_assert_int_eq(v->layout, MLA_LAYOUT_PORTABLE);
                                    else if (k != AUTO && k != HOPPER)
                                        ck_assert_int_eq(v->family, k);
                                    if (ref_sm90 && (k == AUTO || k == HOPPER ||
                                                     k == mla__variants[ref.variant].family))
                                        ck_assert_str_eq(v->name, mla__variants[ref.variant].name);
                                    if (k == HOPPER)
                                        ck_assert(ref_sm90);
                                }
                        }
    ck_assert_int_gt(n, 10000);
}
END_TEST

/* The table itself: names unique, symbols in the image of their role,
 * every sm_90a variant with a portable fallback at its tiling, the wide
 * family for BF16 only and hopper-wide8 for FP8 only, every scale mode
 * taken by the portable kernel. */
START_TEST(table)
{
    for (int a = 0; a < MLA_NUM_VARIANTS; a++) {
        const struct mla_variant *v = &mla__variants[a];
        ck_assert_ptr_nonnull(v->name);
        for (int b = a + 1; b < MLA_NUM_VARIANTS; b++) {
            ck_assert_str_ne(v->name, mla__variants[b].name);
            ck_assert_str_ne(v->symbol, mla__variants[b].symbol);
        }
        /* The wide BF16 kernel and the wide FP8 one have no converter
         * warpgroup. */
        ck_assert_int_eq(v->threads, a == MLA_V_WIDE_BF16                     ? MLA_HOPPER_LEAN_THREADS
                                     : v->family == MLA_XKERNEL_HOPPER_WIDE8 ? MLA_HOPPER_LEAN_THREADS
                                                                              : MLA_DECODE_THREADS);
        ck_assert(v->block_m >= 1);
        if (v->layout == MLA_LAYOUT_PORTABLE) {
            ck_assert_int_eq(strncmp(v->symbol, "mla_decode_", 11), 0);
            ck_assert_int_eq(v->family, MLA_XKERNEL_PORTABLE);
            ck_assert_int_eq(v->arch, MLA_ARCH_ANY);
            ck_assert_int_eq(v->stages, 0);
            continue;
        }
        ck_assert_int_eq(strncmp(v->symbol, "mla_hopper_", 11), 0);
        ck_assert_int_eq(v->arch, MLA_ARCH_SM90A);
        ck_assert(v->family == MLA_XKERNEL_HOPPER_WIDE || v->family == MLA_XKERNEL_HOPPER_NARROW ||
                  v->family == MLA_XKERNEL_HOPPER_WIDE8);
        ck_assert(v->family != MLA_XKERNEL_HOPPER_WIDE8 || v->format != MLA_FMT_BF16);
        ck_assert(v->family != MLA_XKERNEL_HOPPER_WIDE || v->format == MLA_FMT_BF16);
        int fallback = 0;
        for (int b = 0; b < MLA_NUM_VARIANTS; b++)
            fallback |= mla__variants[b].layout == MLA_LAYOUT_PORTABLE &&
                        mla__variants[b].format == v->format &&
                        mla__variants[b].block_n == v->block_n &&
                        (mla__variants[b].scale_modes & v->scale_modes) == v->scale_modes;
        ck_assert_msg(fallback, "%s has no portable fallback", v->name);
    }
    for (int m = 0; m < MLA_NUM_SCALE_MODES; m++) {
        int covered = 0;
        for (int v = 0; v < MLA_NUM_VARIANTS; v++)
            covered += mla__variants[v].layout == MLA_LAYOUT_PORTABLE &&
                       (mla__variants[v].scale_modes & MLA_SM(m));
        ck_assert_int_ge(covered, 2); /* block_n 64 and 32 */
    }
    ck_assert_int_eq(mla_scale_mode(MLA_FMT_BF16, 0), MLA_SCALES_NONE);
    ck_assert_int_eq(mla_scale_mode(MLA_FMT_FP8_E4M3, 0), MLA_SCALES_NONE);
    ck_assert_int_eq(mla_scale_mode(MLA_FMT_FP8_E4M3, MLA_SPR_128), MLA_SCALES_128);
    ck_assert_int_eq(mla_scale_mode(MLA_FMT_FP8_E4M3, MLA_SPR_64), MLA_SCALES_64);
    ck_assert_int_eq(mla_scale_mode(MLA_FMT_FP8_E4M3, MLA_SPR_32), MLA_SCALES_32);
    ck_assert_int_eq(mla_scale_mode(MLA_FMT_FP8_DS_MLA, 0), MLA_SCALES_DSMLA);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("select");
    TCase *tc = tcase_create("select");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, table);
    tcase_add_loop_test(tc, selection, 0, (int)(sizeof(cases) / sizeof(cases[0])));
    tcase_add_loop_test(tc, grid_invariants, 0, NUM_DEVICES);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
