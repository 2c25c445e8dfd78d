/*
 * no_gpu.c - the CUDA backend of a build without CUDA kernels (configure
 * found no nvcc or cuda.h): every entry reports MLA_STATUS_NOT_SUPPORTED.
 *
 * SPDX-License-Identifier: MIT
 */
#include "internal.h"

#define NO_GPU_MSG "libmla was built without CUDA kernels"

mla_status_t mla__gpu_context_init(mla_context_t *ctx, int device)
{
    (void)ctx;
    (void)device;
    return mla__error(MLA_STATUS_NOT_SUPPORTED, NO_GPU_MSG);
}

void mla__gpu_context_fini(mla_context_t *ctx)
{
    (void)ctx;
}

mla_status_t mla__gpu_plan_init(mla_plan_t *plan)
{
    (void)plan;
    return mla__error(MLA_STATUS_NOT_SUPPORTED, NO_GPU_MSG);
}

void mla__gpu_plan_fini(mla_plan_t *plan)
{
    (void)plan;
}

mla_status_t mla__gpu_decode(mla_plan_t *plan, const struct mla_decode_args *a, int steps)
{
    (void)plan;
    (void)a;
    (void)steps;
    return mla__error(MLA_STATUS_NOT_SUPPORTED, NO_GPU_MSG);
}

mla_status_t mla__gpu_append(mla_context_t *ctx, const struct mla_shape *s,
                             const struct mla_append_args *a)
{
    (void)ctx;
    (void)s;
    (void)a;
    return mla__error(MLA_STATUS_NOT_SUPPORTED, NO_GPU_MSG);
}

mla_status_t mla__gpu_read_header(const mla_plan_t *plan, const void *workspace, void *buf)
{
    (void)plan;
    (void)workspace;
    (void)buf;
    return mla__error(MLA_STATUS_NOT_SUPPORTED, NO_GPU_MSG);
}

const char *mla__gpu_archs(void)
{
    return "";
}
