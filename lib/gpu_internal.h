/*
 * gpu_internal.h - private state of the CUDA backend (lib/gpu_*.c): the
 * device binding with its loaded kernels, and the prepared launches of a
 * plan.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_GPU_INTERNAL_H
#define MLA_GPU_INTERNAL_H

#include "cuda_driver.h"
#include "internal.h"
#include "mla_params.h"

/* Embedded fatbins (lib/fatbin.S, made by build-aux/embed-fatbin.sh from
 * kernels/NAME.fatbin). */
#define MLA_GPU_FATBINS(X) X(schedule) X(decode) X(combine) X(append) X(hopper)
#define MLA_GPU_NUM_FATBINS 5

/* Decode kernel variants, indexed [format][block_n == 64]. */
#define MLA_GPU_NUM_FORMATS 3
#define MLA_GPU_NUM_BLOCK_N 2

struct mla_gpu_kernel {
    CUfunction fn;
    int static_smem;  /* CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES */
    int max_threads;  /* CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK */
    int max_dyn_smem; /* dynamic shared memory allowed after opting in */
};

struct mla_gpu_context {
    const struct mla_cuda_api *cu;
    CUdevice dev;
    CUcontext pctx; /* the device's primary context, retained */
    int cc_major, cc_minor;
    int sm_count;
    int smem_optin;  /* max shared memory per block after opting in */
    int smem_per_sm; /* max shared memory per multiprocessor */
    char name[128];
    CUlibrary lib[MLA_GPU_NUM_FATBINS];
    struct mla_gpu_kernel schedule, combine, append;
    struct mla_gpu_kernel decode[MLA_GPU_NUM_FORMATS][MLA_GPU_NUM_BLOCK_N];
    /* sm_90a kernels (kernels/hopper.cu), wide (any row count) and
     * narrow (at most MLA_NARROW_ROWS rows); fn NULL on other devices. */
    struct mla_gpu_kernel hopper[MLA_GPU_NUM_FORMATS];
    struct mla_gpu_kernel hopper_narrow[MLA_GPU_NUM_FORMATS];
    /* The wide FP8 kernels as 2-CTA clusters ("pairs"; fn NULL for BF16). */
    struct mla_gpu_kernel hopper_pair[MLA_GPU_NUM_FORMATS];
    /* Trace builds of the sm_90a kernels only (-DMLA_TRACE,
     * kernels/trace.cuh): CTA (0, 0, 0)'s timeline, printed to stderr
     * after each such launch; 0 in normal builds. */
    CUdeviceptr trace_words;
};

struct mla_gpu_plan {
    struct mla_decode_params p; /* shape, tiling and offsets; pointers per call */
    const struct mla_gpu_kernel *decode; /* portable kernel (kernels/decode.cu) */
    unsigned int decode_grid[3];
    unsigned int decode_smem;
    /* The sm_90a kernel when the shape suits it (block_n and stages in p
     * are then its own, which the portable kernel also accepts: it runs
     * instead when a call's pointers do not suit the TMA path). */
    const struct mla_gpu_kernel *hopper;
    unsigned int hopper_smem; /* its dynamic shared memory */
    int hopper_pair;      /* it is a pair kernel: the 32-row tensor map too */
    int hopper_required; /* MLA_XPARAM_KERNEL forces it: calls it cannot take fail */
    unsigned int combine_grid[3];
};

/* Launch geometry fixed by kernels/mla_params.h. */
#define MLA_COMBINE_THREADS 128
#define MLA_COMBINE_WARPS (MLA_COMBINE_THREADS / 32)
#define MLA_APPEND_THREADS 64

/* Make the context's primary context current on this thread (push), and
 * undo it (pop).  A push failure leaves the thread's message. */
mla_status_t mla__gpu_push(mla_context_t *ctx);
void mla__gpu_pop(mla_context_t *ctx);

/* Index of a decode variant; -1 for an unknown format or block_n. */
static inline int mla__gpu_fmt_index(int32_t fmt)
{
    return fmt >= 0 && fmt < MLA_GPU_NUM_FORMATS ? fmt : -1;
}
static inline int mla__gpu_bn_index(int32_t block_n)
{
    return block_n == 32 ? 0 : block_n == 64 ? 1 : -1;
}

#endif /* MLA_GPU_INTERNAL_H */
