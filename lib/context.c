/* context.c - backend binding: a CUDA device or the CPU.
 * SPDX-License-Identifier: MIT */
#include <stdlib.h>
#include <unistd.h>

#include "internal.h"

/* Threads of a CPU backend decode unless MLA_XPARAM_CPU_THREADS says:
 * the online processors. */
static int cpu_threads(void)
{
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    if (n < 1)
        n = 1;
    if (n > MLA_MAX_CPU_THREADS)
        n = MLA_MAX_CPU_THREADS;
    return (int)n;
}

mla_status_t mla_context_create(mla_context_t **ctx, int device)
{
    mla__enter("mla_context_create");
    if (!ctx)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT, "ctx is NULL");
    *ctx = NULL;
    if (device < MLA_DEVICE_CPU)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "device = %d: want a CUDA device ordinal >= 0 or MLA_DEVICE_CPU (-1)",
                          device);
    mla_context_t *c = calloc(1, sizeof(*c));
    if (!c)
        return mla__error(MLA_STATUS_OUT_OF_MEMORY, "out of host memory");
    c->magic = MLA_MAGIC_CONTEXT;
    c->serial = mla__new_serial();
    c->device = device;
    c->cpu_threads = cpu_threads();
    if (device == MLA_DEVICE_CPU) {
        c->backend = MLA_BACKEND_CPU;
    } else {
        c->backend = MLA_BACKEND_CUDA;
        mla_status_t st = mla__gpu_context_init(c, device);
        if (st != MLA_STATUS_SUCCESS) {
            c->magic = MLA_MAGIC_DEAD;
            free(c);
            return st;
        }
    }
    *ctx = c;
    return MLA_STATUS_SUCCESS;
}

void mla_context_destroy(mla_context_t *ctx)
{
    if (!ctx || ctx->magic != MLA_MAGIC_CONTEXT)
        return;
    if (ctx->backend == MLA_BACKEND_CUDA)
        mla__gpu_context_fini(ctx);
    ctx->magic = MLA_MAGIC_DEAD;
    free(ctx);
}

const char *mla_context_last_error(const mla_context_t *ctx)
{
    return ctx && ctx->magic == MLA_MAGIC_CONTEXT ? mla__message(ctx, ctx->serial) : "";
}
