/*
 * gpu_internal.h - private state of the CUDA backend (lib/cuda/gpu_*.c): the
 * device binding with its loaded kernels, and the prepared launches of a
 * plan.  The decode variants and their selection: gpu_variants.h.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_GPU_INTERNAL_H
#define MLA_GPU_INTERNAL_H

#include "cuda_driver.h"
#include "gpu_variants.h"
#include "internal.h"
#include "mla_params.h"

/* Embedded fatbins (lib/fatbin.S, made by build-aux/embed-fatbin.sh from
 * kernels/DIR/NAME.fatbin; the symbols take NAME only). */
#define MLA_GPU_FATBINS(X) X(schedule) X(decode) X(combine) X(append) X(hopper)
#define MLA_GPU_NUM_FATBINS 5

struct mla_gpu_kernel {
    CUfunction fn;
    int static_smem;  /* CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES */
    int max_threads;  /* CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK */
    int num_regs;     /* CU_FUNC_ATTRIBUTE_NUM_REGS */
    int max_dyn_smem; /* dynamic shared memory allowed after opting in */
};

struct mla_gpu_context {
    const struct mla_cuda_api *cu;
    CUdevice dev;
    CUcontext pctx; /* the device's primary context, retained */
    int cc_major, cc_minor;
    int sm_count;
    int smem_optin;  /* max shared memory per block after opting in */
    char name[128];
    CUlibrary lib[MLA_GPU_NUM_FATBINS];
    struct mla_gpu_kernel schedule, combine, append;
    /* The decode variants, indexed by enum mla_variant_id; fn NULL where
     * the image or the device has none. */
    struct mla_gpu_kernel decode[MLA_NUM_VARIANTS];
};

/* A decode variant as a plan launches it. */
struct mla_gpu_launch {
    const struct mla_variant *v;
    CUfunction fn;
    unsigned int smem; /* dynamic shared memory */
};

struct mla_gpu_plan {
    struct mla_decode_params p; /* shape, tiling and offsets; pointers per call */
    struct mla_gpu_launch run;  /* the selected variant */
    /* The portable variant at the same tiling: run itself, or the kernel
     * of the calls whose buffers an sm_90a variant cannot take. */
    struct mla_gpu_launch portable;
    int required; /* MLA_XPARAM_KERNEL forces run: calls it cannot take fail */
    unsigned int decode_grid[3];
    unsigned int combine_grid[3];
};

/* Launch geometry fixed by kernels/common/mla_params.h. */
#define MLA_COMBINE_THREADS 128
#define MLA_COMBINE_WARPS (MLA_COMBINE_THREADS / 32)
#define MLA_APPEND_THREADS 64

/* Make the context's primary context current on this thread (push), and
 * undo it (pop).  A push failure leaves the thread's message. */
mla_status_t mla__gpu_push(mla_context_t *ctx);
void mla__gpu_pop(mla_context_t *ctx);

#endif /* MLA_GPU_INTERNAL_H */
