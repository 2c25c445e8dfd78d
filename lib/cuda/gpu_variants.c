/*
 * gpu_variants.c - the table of decode kernel variants and the selector
 * that picks one for a plan (gpu_variants.h).  The whole choice is here:
 * the plan (gpu_plan.c) sizes the launch from the selection, the context
 * (gpu_context.c) loads the table's symbols, a call (gpu_decode.c) falls
 * back to the selection's portable variant only where the sm_90a variant
 * cannot take its buffers.
 *
 * SPDX-License-Identifier: MIT
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>

#include "gpu_variants.h"
#include "mla_experimental.h"
#include "mla_params.h"

#define E4M3_MODES                                                                        \
    (MLA_SM(MLA_SCALES_NONE) | MLA_SM(MLA_SCALES_128) | MLA_SM(MLA_SCALES_64) |        \
     MLA_SM(MLA_SCALES_32))
/* E4M3 block scales in their own array: a tile's scales are one contiguous
 * copy only with one KV head. */
#define E4M3_BLOCK_SCALED (MLA_SM(MLA_SCALES_128) | MLA_SM(MLA_SCALES_64) | MLA_SM(MLA_SCALES_32))
#define BF16_MODES MLA_SM(MLA_SCALES_NONE)
#define DSMLA_MODES MLA_SM(MLA_SCALES_DSMLA)

/* Requests x KV heads from which the narrow FP8 kernels are taken by
 * default: they stream tiles faster than a wide kernel but a thread block
 * with few tiles finishes later (H200, h16 s4096, E4M3 /128 and DS_MLA,
 * against the wide kernel with a converter warpgroup that hopper-wide8
 * replaces: wide 1.10x faster at 1 request and 1.03x at 4, narrow 1.04x
 * faster at 8, 1.2x at 12 and 16; doc/performance.md, Measured reasons;
 * not yet measured against hopper-wide8). */
#define MLA_NARROW8_MIN_SEQS 8

/* The portable kernels (kernels/portable/decode.cu): any shape, every device the build
 * has kernels for (sm_90 and later). */
#define PORTABLE(fmt, sfx, modes, bn)                                                       \
    {.name = "portable-" sfx "-n" #bn, .symbol = "mla_decode_" sfx "_n" #bn,               \
     .family = MLA_XKERNEL_PORTABLE, .format = (fmt), .scale_modes = (modes),              \
     .arch = MLA_ARCH_ANY, .min_page = 1, .threads = MLA_DECODE_THREADS,                   \
     .layout = MLA_LAYOUT_PORTABLE, .block_m = MLA_BLOCK_M, .block_n = (bn)}

/* The sm_90a kernels (kernels/sm90/hopper.cu): a tile is 64 consecutive rows of
 * one page (BF16: one tensor-map box per 64 columns; FP8: bulk copies), so
 * pages of at least 64; their tiling is the portable n64 kernel's with 2
 * stages, which serves the calls whose buffers they cannot take
 * (gpu_decode.c). */
#define HOPPER(fmt, fam, sfx, modes)                                                        \
    .name = "hopper-" #fam "-" sfx, .format = (fmt), .scale_modes = (modes),                \
    .one_kv_head_modes = (fmt) == MLA_FMT_FP8_E4M3 ? E4M3_BLOCK_SCALED : 0u,               \
    .arch = MLA_ARCH_SM90A, .min_page = MLA_HOPPER_BLOCK_N, .block_n = MLA_HOPPER_BLOCK_N,  \
    .stages = MLA_HOPPER_STAGES

const struct mla_variant mla__variants[MLA_NUM_VARIANTS] = {
    /* Narrow: M tiles of 16 query rows, BF16 one, FP8 up to two (two MTP
     * tokens at 16 heads, or 32 heads).  By default a second tile only
     * where each tile costs less than half a wide kernel's time at 32
     * rows: E4M3 without block scales or with 128-channel ones, and DS_MLA
     * (H200, b132 s8192, against the converter-warpgroup wide kernel that
     * hopper-wide8 replaces: /128 352 us narrow against 429 wide, none 341
     * against 427, DS_MLA 351 against 415); 32- and 64-channel blocks take
     * 1.3-1.7x the /128 time a tile (doc/performance.md, Measured reasons). */
    [MLA_V_NARROW_BF16] = {HOPPER(MLA_FMT_BF16, narrow, "bf16", BF16_MODES),
                           .symbol = "mla_hopper_narrow_bf16",
                           .family = MLA_XKERNEL_HOPPER_NARROW, .layout = MLA_LAYOUT_NARROW,
                           .threads = MLA_DECODE_THREADS, .block_m = MLA_NARROW_ROWS,
                           .max_rows = MLA_NARROW_ROWS, .auto_full_rows_modes = BF16_MODES},
    [MLA_V_NARROW_E4M3] = {HOPPER(MLA_FMT_FP8_E4M3, narrow, "e4m3", E4M3_MODES),
                           .symbol = "mla_hopper_narrow_e4m3",
                           .family = MLA_XKERNEL_HOPPER_NARROW, .layout = MLA_LAYOUT_NARROW,
                           .threads = MLA_DECODE_THREADS, .block_m = MLA_NARROW_ROWS,
                           .max_rows = 2 * MLA_NARROW_ROWS,
                           .auto_full_rows_modes =
                               MLA_SM(MLA_SCALES_NONE) | MLA_SM(MLA_SCALES_128),
                           .auto_min_seqs = MLA_NARROW8_MIN_SEQS},
    [MLA_V_NARROW_DSMLA] = {HOPPER(MLA_FMT_FP8_DS_MLA, narrow, "dsmla", DSMLA_MODES),
                            .symbol = "mla_hopper_narrow_dsmla",
                            .family = MLA_XKERNEL_HOPPER_NARROW, .layout = MLA_LAYOUT_NARROW,
                            .threads = MLA_DECODE_THREADS, .block_m = MLA_NARROW_ROWS,
                            .max_rows = 2 * MLA_NARROW_ROWS, .auto_full_rows_modes = DSMLA_MODES,
                            .auto_min_seqs = MLA_NARROW8_MIN_SEQS},
    /* Wide FP8 converting in registers (kernels/sm90/hopper_wide8.cuh): M
     * tiles of 64 rows, any number, three FP8 stages; E4M3 without and
     * with block scales are two kernels.  The FP8 shapes the narrow
     * kernels do not take. */
    [MLA_V_WIDE8_E4M3] = {HOPPER(MLA_FMT_FP8_E4M3, wide8, "e4m3", MLA_SM(MLA_SCALES_NONE)),
                          .symbol = "mla_hopper_wide8_e4m3", .family = MLA_XKERNEL_HOPPER_WIDE8,
                          .layout = MLA_LAYOUT_WIDE8, .threads = MLA_HOPPER_LEAN_THREADS,
                          .block_m = MLA_BLOCK_M},
    [MLA_V_WIDE8_E4M3B] = {HOPPER(MLA_FMT_FP8_E4M3, wide8, "e4m3b", E4M3_BLOCK_SCALED),
                           .symbol = "mla_hopper_wide8_e4m3b", .family = MLA_XKERNEL_HOPPER_WIDE8,
                           .layout = MLA_LAYOUT_WIDE8, .threads = MLA_HOPPER_LEAN_THREADS,
                           .block_m = MLA_BLOCK_M},
    [MLA_V_WIDE8_DSMLA] = {HOPPER(MLA_FMT_FP8_DS_MLA, wide8, "dsmla", DSMLA_MODES),
                           .symbol = "mla_hopper_wide8_dsmla", .family = MLA_XKERNEL_HOPPER_WIDE8,
                           .layout = MLA_LAYOUT_WIDE8, .threads = MLA_HOPPER_LEAN_THREADS,
                           .block_m = MLA_BLOCK_M},
    /* Wide BF16: M tiles of 64 rows, any number, without the converter
     * warpgroup (mla_params.h, MLA_HOPPER_LEAN_THREADS). */
    [MLA_V_WIDE_BF16] = {HOPPER(MLA_FMT_BF16, wide, "bf16", BF16_MODES),
                         .symbol = "mla_hopper_decode_bf16", .family = MLA_XKERNEL_HOPPER_WIDE,
                         .layout = MLA_LAYOUT_WIDE, .threads = MLA_HOPPER_LEAN_THREADS,
                         .block_m = MLA_BLOCK_M},
    /* Portable: 64-key tiles where they fit, else 32. */
    [MLA_V_PORTABLE_BF16_N64] = PORTABLE(MLA_FMT_BF16, "bf16", BF16_MODES, 64),
    [MLA_V_PORTABLE_BF16_N32] = PORTABLE(MLA_FMT_BF16, "bf16", BF16_MODES, 32),
    [MLA_V_PORTABLE_E4M3_N64] = PORTABLE(MLA_FMT_FP8_E4M3, "e4m3", E4M3_MODES, 64),
    [MLA_V_PORTABLE_E4M3_N32] = PORTABLE(MLA_FMT_FP8_E4M3, "e4m3", E4M3_MODES, 32),
    [MLA_V_PORTABLE_DSMLA_N64] = PORTABLE(MLA_FMT_FP8_DS_MLA, "dsmla", DSMLA_MODES, 64),
    [MLA_V_PORTABLE_DSMLA_N32] = PORTABLE(MLA_FMT_FP8_DS_MLA, "dsmla", DSMLA_MODES, 32),
};

int mla__arch_runs_on(int arch, int cc_major, int cc_minor)
{
    return arch == MLA_ARCH_ANY || (cc_major == 9 && cc_minor == 0);
}

uint32_t mla__variant_smem(const struct mla_variant *v, int32_t stages, int32_t scales_per_row)
{
    switch (v->layout) {
    case MLA_LAYOUT_PORTABLE:
        return mla_decode_smem_bytes(v->format, v->block_n, stages, scales_per_row);
    case MLA_LAYOUT_WIDE:
        return MLA_HOPPER_SMEM_BYTES;
    case MLA_LAYOUT_WIDE8:
        return mla_wide8_smem_bytes(v->format, scales_per_row);
    default:
        return mla_narrow_smem_bytes(v->format);
    }
}

static const char *format_name(int32_t fmt)
{
    return fmt == MLA_FMT_BF16 ? "BF16" : fmt == MLA_FMT_FP8_E4M3 ? "FP8_E4M3" : "FP8_DS_MLA";
}

static const char *kernel_name(int32_t kernel)
{
    static const char *const names[] = {
        [MLA_XKERNEL_AUTO] = "MLA_XKERNEL_AUTO",
        [MLA_XKERNEL_PORTABLE] = "MLA_XKERNEL_PORTABLE",
        [MLA_XKERNEL_HOPPER] = "MLA_XKERNEL_HOPPER",
        [MLA_XKERNEL_HOPPER_WIDE] = "MLA_XKERNEL_HOPPER_WIDE",
        [MLA_XKERNEL_HOPPER_NARROW] = "MLA_XKERNEL_HOPPER_NARROW",
        [MLA_XKERNEL_HOPPER_WIDE8] = "MLA_XKERNEL_HOPPER_WIDE8",
    };
    return kernel >= 0 && kernel < (int32_t)(sizeof(names) / sizeof(names[0])) && names[kernel]
               ? names[kernel]
               : "?";
}

static int loaded(const struct mla_select_in *in, int id)
{
    return in->smem_limit[id] >= 0;
}

/* The portable variant of a format with a tile width, or -1. */
static int portable_variant(int32_t fmt, int32_t block_n)
{
    for (int id = 0; id < MLA_NUM_VARIANTS; id++) {
        const struct mla_variant *v = &mla__variants[id];
        if (v->layout == MLA_LAYOUT_PORTABLE && v->format == fmt && v->block_n == block_n)
            return id;
    }
    return -1;
}

/* Whether the portable kernel at an sm_90a variant's tiling is loaded and
 * fits, for the calls whose buffers the variant cannot take. */
static int fallback_fits(const struct mla_select_in *in, const struct mla_variant *v)
{
    const int fb = portable_variant(v->format, v->block_n);
    return fb >= 0 && loaded(in, fb) &&
           mla__variant_smem(&mla__variants[fb], v->stages, in->scales_per_row) <=
               (uint32_t)in->smem_limit[fb];
}

/* Whether variant id serves the shape on the device: NULL, or why not in
 * buf. */
static const char *serves(const struct mla_select_in *in, int id, char *buf, size_t len)
{
    const struct mla_variant *v = &mla__variants[id];
    const int32_t rows = in->q_len * (in->num_heads / in->num_kv_heads);
    if (!loaded(in, id))
        snprintf(buf, len, "%s is not in the image for this device", v->name);
    else if (v->layout != MLA_LAYOUT_PORTABLE &&
             mla__variant_smem(v, v->stages, in->scales_per_row) > (uint32_t)in->smem_limit[id])
        snprintf(buf, len, "%s needs more shared memory than %s allows", v->name, in->device);
    else if (!(v->scale_modes & MLA_SM(in->scale_mode)))
        snprintf(buf, len, "%s does not take this scale block size", v->name);
    else if (in->page_size < v->min_page)
        snprintf(buf, len, "pages of fewer than %d rows", v->min_page);
    else if ((v->one_kv_head_modes & MLA_SM(in->scale_mode)) && in->num_kv_heads != 1)
        snprintf(buf, len, "E4M3 block scales with more than one KV head");
    else if (v->max_rows && rows > v->max_rows)
        snprintf(buf, len, "more than %d query rows per KV head", v->max_rows);
    else if (v->layout != MLA_LAYOUT_PORTABLE && !fallback_fits(in, v))
        snprintf(buf, len, "no portable block_n %d kernel to fall back on", v->block_n);
    else
        return NULL;
    return buf;
}

/* Whether the automatic choice takes variant v where it serves. */
static int auto_takes(const struct mla_select_in *in, const struct mla_variant *v)
{
    const int32_t rows = in->q_len * (in->num_heads / in->num_kv_heads);
    if (v->max_rows &&
        rows > ((v->auto_full_rows_modes & MLA_SM(in->scale_mode)) ? v->max_rows : v->block_m))
        return 0;
    return (int64_t)in->batch * in->num_kv_heads >= v->auto_min_seqs;
}

/* The most stages (at most MLA_MAX_STAGES) of portable variant id that fit
 * the device; 0 if not even one. */
static int32_t max_fitting_stages(const struct mla_select_in *in, int id)
{
    int32_t best = 0;
    for (int32_t s = 1; s <= MLA_MAX_STAGES; s++)
        if (mla__variant_smem(&mla__variants[id], s, in->scales_per_row) <=
            (uint32_t)in->smem_limit[id])
            best = s;
    return best;
}

static void choose(const struct mla_select_in *in, struct mla_selection *out, int id,
                   int portable, int32_t stages)
{
    out->variant = id;
    out->portable = portable;
    out->block_n = mla__variants[id].block_n;
    out->stages = stages;
    out->smem = mla__variant_smem(&mla__variants[id], stages, in->scales_per_row);
    out->portable_smem = mla__variant_smem(&mla__variants[portable], stages, in->scales_per_row);
    out->required = in->kernel != MLA_XKERNEL_AUTO && in->kernel != MLA_XKERNEL_PORTABLE;
}

/* The portable kernel: block_n 64 when it fits, else 32, with the deepest
 * ring that fits the device (on sm_90 and sm_100: 2 stages at block_n 64,
 * 4 at 32), unless the hints say otherwise. */
static mla_status_t choose_portable(const struct mla_select_in *in, struct mla_selection *out,
                                    char *msg, size_t len)
{
    const char *fname = format_name(in->kv_format);
    const int lo = 1; /* the kernels accept 1..MLA_MAX_STAGES stages */
    int last = -1;
    for (int id = 0; id < MLA_NUM_VARIANTS; id++)
        if (mla__variants[id].layout == MLA_LAYOUT_PORTABLE &&
            mla__variants[id].format == in->kv_format)
            last = id;
    for (int id = 0; id <= last; id++) {
        const struct mla_variant *v = &mla__variants[id];
        const int32_t bn = v->block_n;
        if (v->layout != MLA_LAYOUT_PORTABLE || v->format != in->kv_format ||
            (in->block_n && in->block_n != bn))
            continue;
        if (!loaded(in, id)) {
            if (in->block_n) {
                snprintf(msg, len, "MLA_PARAM_BLOCK_N = %d for %s is not in this build", bn,
                         fname);
                return MLA_STATUS_NOT_SUPPORTED;
            }
            continue;
        }
        const int32_t st = in->num_kv_stages;
        if (st) {
            if (st >= lo && st <= MLA_MAX_STAGES &&
                mla__variant_smem(v, st, in->scales_per_row) <= (uint32_t)in->smem_limit[id]) {
                choose(in, out, id, id, st);
                return MLA_STATUS_SUCCESS;
            }
            if (in->block_n || id == last) {
                snprintf(msg, len,
                         "MLA_PARAM_NUM_KV_STAGES = %d with MLA_PARAM_BLOCK_N = %d for %s needs "
                         "%u bytes of shared memory; %s allows %d (stages %d..%d accepted)",
                         st, bn, fname, mla__variant_smem(v, st, in->scales_per_row),
                         in->device, in->smem_limit[id], lo, MLA_MAX_STAGES);
                return MLA_STATUS_NOT_SUPPORTED;
            }
            continue;
        }
        const int32_t hi = max_fitting_stages(in, id);
        if (hi >= lo) {
            choose(in, out, id, id, hi);
            return MLA_STATUS_SUCCESS;
        }
        if (in->block_n) {
            snprintf(msg, len,
                     "MLA_PARAM_BLOCK_N = %d for %s needs %u bytes of shared memory for %d "
                     "stages; %s allows %d",
                     bn, fname, mla__variant_smem(v, lo, in->scales_per_row), lo, in->device,
                     in->smem_limit[id]);
            return MLA_STATUS_NOT_SUPPORTED;
        }
    }
    snprintf(msg, len, "no decode kernel for %s fits %s (%d bytes of shared memory per block)",
             fname, in->device, in->smem_optin);
    return MLA_STATUS_NOT_SUPPORTED;
}

mla_status_t mla__select_variant(const struct mla_select_in *in, struct mla_selection *out,
                                 char *msg, size_t len)
{
    const int32_t k = in->kernel;
    msg[0] = '\0';
    if (k != MLA_XKERNEL_PORTABLE) {
        char why[160] = "";
        const char *last_why = NULL; /* why the last variant refused */
        int declined = 0;            /* one served, but the automatic choice skipped it */
        for (int id = 0; id < MLA_NUM_VARIANTS; id++) {
            const struct mla_variant *v = &mla__variants[id];
            if (v->layout == MLA_LAYOUT_PORTABLE || v->format != in->kv_format)
                continue;
            if (k != MLA_XKERNEL_AUTO && k != MLA_XKERNEL_HOPPER && v->family != k)
                continue;
            const char *w = serves(in, id, why, sizeof(why));
            if (w) {
                last_why = w;
                continue;
            }
            if ((k == MLA_XKERNEL_AUTO || k == MLA_XKERNEL_HOPPER) && !auto_takes(in, v)) {
                declined = 1;
                continue;
            }
            choose(in, out, id, portable_variant(v->format, v->block_n), v->stages);
            return MLA_STATUS_SUCCESS;
        }
        if (k != MLA_XKERNEL_AUTO) {
            if (last_why)
                snprintf(msg, len, "MLA_XPARAM_KERNEL = %s does not serve this shape: %s",
                         kernel_name(k), last_why);
            else if (declined)
                snprintf(msg, len,
                         "MLA_XPARAM_KERNEL = %s: the automatic choice takes none of its "
                         "kernels for this shape",
                         kernel_name(k));
            else
                snprintf(msg, len, "MLA_XPARAM_KERNEL = %s has no kernel for %s caches",
                         kernel_name(k), format_name(in->kv_format));
            return MLA_STATUS_NOT_SUPPORTED;
        }
    }
    return choose_portable(in, out, msg, len);
}
