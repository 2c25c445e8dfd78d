/*
 * gpu_variants.h - the decode kernel variants of the CUDA backend, what
 * each supports and needs, and the one function that picks a variant for a
 * plan.  Plain C without CUDA types, so that tests/test_select.c checks the
 * choice on a machine without a GPU.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_GPU_VARIANTS_H
#define MLA_GPU_VARIANTS_H

#include <stddef.h>
#include <stdint.h>

#include "mla.h"
#include "mla_params.h"

/* A set of scale modes (mla_params.h's MLA_SCALES_*, from mla_scale_mode:
 * where the dequantization scales of a cache row come from) as a mask. */
#define MLA_SM(mode) (1u << (mode))

/* Architectures a variant's image is built for. */
enum mla_arch {
    MLA_ARCH_ANY,   /* the portable kernels: every embedded target */
    MLA_ARCH_SM90A  /* compute capability 9.0 exactly */
};
int mla__arch_runs_on(int arch, int cc_major, int cc_minor);

/* Shared-memory layouts (mla__variant_smem gives the bytes). */
enum mla_layout {
    MLA_LAYOUT_PORTABLE, /* Q tile and a ring of stages x block_n rows */
    MLA_LAYOUT_WIDE,     /* the sm_90a wide BF16 layout */
    MLA_LAYOUT_NARROW,   /* the sm_90a narrow layout of the format */
    MLA_LAYOUT_WIDE8     /* the sm_90a wide FP8 layout (FP8 stages) */
};

/* The variants, in the order the automatic choice prefers them: the
 * selector takes the first that serves the shape. */
enum mla_variant_id {
    MLA_V_NARROW_BF16,
    MLA_V_NARROW_E4M3,
    MLA_V_NARROW_DSMLA,
    MLA_V_WIDE8_E4M3,
    MLA_V_WIDE8_E4M3B,
    MLA_V_WIDE8_DSMLA,
    MLA_V_WIDE_BF16,
    MLA_V_PORTABLE_BF16_N64,
    MLA_V_PORTABLE_BF16_N32,
    MLA_V_PORTABLE_E4M3_N64,
    MLA_V_PORTABLE_E4M3_N32,
    MLA_V_PORTABLE_DSMLA_N64,
    MLA_V_PORTABLE_DSMLA_N32,
    MLA_NUM_VARIANTS
};

struct mla_variant {
    const char *name;   /* "hopper-narrow-e4m3": messages and tests */
    const char *symbol; /* entry point in the embedded images */
    int32_t family;     /* the mla_xkernel_t that forces it */
    int32_t format;     /* MLA_FMT_* */
    /* What it supports. */
    uint32_t scale_modes;       /* MLA_SM() of each scale mode */
    uint32_t one_kv_head_modes; /* scale modes it takes with one KV head only */
    int32_t arch;               /* enum mla_arch */
    int32_t min_page;           /* smallest page size */
    int32_t max_rows;           /* query rows per KV head (q_len x heads per KV head) at most; 0: any */
    /* What it needs. */
    int32_t threads; /* per thread block */
    int32_t layout;  /* enum mla_layout */
    int32_t block_m; /* query rows per thread block */
    int32_t block_n; /* keys per tile (an sm_90a variant's portable fallback has the same) */
    int32_t stages;  /* ring stages; 0: chosen for the device and the hints (portable) */
    /* Where the automatic choice takes it (it never takes a variant that
     * does not serve the shape). */
    uint32_t auto_full_rows_modes; /* scale modes in which up to max_rows, else block_m rows */
    int32_t auto_min_seqs;         /* requests x KV heads, at least */
};

extern const struct mla_variant mla__variants[MLA_NUM_VARIANTS];

/* Dynamic shared memory of a variant at a ring depth (portable) for a
 * number of block scales per row. */
uint32_t mla__variant_smem(const struct mla_variant *v, int32_t stages, int32_t scales_per_row);

/* What the selector looks at: the plan's shape and the device. */
struct mla_select_in {
    int32_t kv_format, scale_mode, scales_per_row;
    int32_t num_heads, num_kv_heads, q_len, page_size;
    int32_t block_n, num_kv_stages; /* the portable kernel's hints; 0: automatic */
    int32_t kernel;                 /* MLA_XPARAM_KERNEL */
    int32_t batch;
    const char *device; /* its name, for messages */
    int32_t smem_optin; /* shared memory a block may opt in to, for messages */
    /* Dynamic shared memory each variant may use once loaded; -1 where the
     * image or the device has none. */
    int32_t smem_limit[MLA_NUM_VARIANTS];
};

struct mla_selection {
    int32_t variant;  /* the variant each call runs when it can */
    int32_t portable; /* the portable variant at the same tiling: the variant
                       * itself, or the one for the calls an sm_90a variant
                       * cannot take */
    int32_t block_n, stages;
    uint32_t smem, portable_smem;
    int required; /* forced by MLA_XPARAM_KERNEL: calls it cannot take fail */
};

/*
 * The decode variant of a plan: the first in mla__variants that serves the
 * shape on the device and that the automatic choice takes, or the one
 * MLA_XPARAM_KERNEL forces, else the portable kernel with the tiling the
 * hints and the device allow.  Returns MLA_STATUS_SUCCESS with *out
 * filled, or MLA_STATUS_NOT_SUPPORTED with the reason in msg.
 */
mla_status_t mla__select_variant(const struct mla_select_in *in, struct mla_selection *out,
                                 char *msg, size_t msg_len);

#endif /* MLA_GPU_VARIANTS_H */
