/*
 * gpu_context.c - bind a CUDA device: retain its primary context, load the
 * embedded fatbins and look up every kernel, the decode variants of the
 * table in gpu_variants.c for the device's architecture.
 *
 * SPDX-License-Identifier: MIT
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "gpu_internal.h"

#ifndef MLA_CUDA_ARCHS_STRING
#define MLA_CUDA_ARCHS_STRING ""
#endif

/* The fatbins, defined in the generated lib/fatbin.S. */
#define MLA_FB_DECL_(name)                                                        \
    extern const unsigned char mla__fb_##name[] __attribute__((visibility("hidden"))); \
    extern const uint64_t mla__fb_##name##_size __attribute__((visibility("hidden")));
MLA_GPU_FATBINS(MLA_FB_DECL_)
#undef MLA_FB_DECL_

struct fatbin {
    const char *name;
    const unsigned char *data;
    const uint64_t *size;
};
#define MLA_FB_ENTRY_(name) {#name, mla__fb_##name, &mla__fb_##name##_size},
static const struct fatbin fatbins[MLA_GPU_NUM_FATBINS] = {MLA_GPU_FATBINS(MLA_FB_ENTRY_)};
#undef MLA_FB_ENTRY_

const char *mla__gpu_archs(void)
{
    return MLA_CUDA_ARCHS_STRING;
}

/*
 * Whether an embedded target such as "sm_90a", "sm_100f", "sm_90" or
 * "compute_90a" can run on compute capability major.minor: "a" targets
 * need that exact capability, "f" ones the same major, plain SASS the same
 * major and no lower minor, plain PTX any capability at or above.
 */
static int target_runs_on(const char *t, size_t len, int major, int minor)
{
    int ptx = 0;
    if (len > 3 && strncmp(t, "sm_", 3) == 0) {
        t += 3;
        len -= 3;
    } else if (len > 8 && strncmp(t, "compute_", 8) == 0) {
        t += 8;
        len -= 8;
        ptx = 1;
    } else {
        return 0;
    }
    int num = 0;
    size_t i = 0;
    for (; i < len && t[i] >= '0' && t[i] <= '9'; i++)
        num = num * 10 + (t[i] - '0');
    if (i == 0 || num < 10)
        return 0;
    char suffix = i < len ? t[i] : '\0';
    int tmaj = num / 10, tmin = num % 10;
    if (suffix == 'a')
        return tmaj == major && tmin == minor;
    if (suffix == 'f')
        return tmaj == major && minor >= tmin;
    if (ptx)
        return major > tmaj || (major == tmaj && minor >= tmin);
    return tmaj == major && minor >= tmin;
}

/* 1 if some embedded target runs on major.minor, or the list is unknown. */
static int archs_cover(const char *list, int major, int minor)
{
    if (!list[0])
        return 1;
    const char *p = list;
    while (*p) {
        size_t n = strcspn(p, ", ");
        if (n && target_runs_on(p, n, major, minor))
            return 1;
        p += n;
        p += strspn(p, ", ");
    }
    return 0;
}

mla_status_t mla__gpu_push(mla_context_t *ctx)
{
    struct mla_gpu_context *g = ctx->gpu;
    CUresult r = g->cu->p_cuCtxPushCurrent(g->pctx);
    if (r != CUDA_SUCCESS)
        return mla__cu_fail(MLA_STATUS_CUDA_ERROR, r, "cuCtxPushCurrent");
    return MLA_STATUS_SUCCESS;
}

void mla__gpu_pop(mla_context_t *ctx)
{
    CUcontext dummy;
    ctx->gpu->cu->p_cuCtxPopCurrent(&dummy);
}

static mla_status_t no_image(mla_context_t *ctx, const char *what)
{
    struct mla_gpu_context *g = ctx->gpu;
    const char *archs = mla__gpu_archs();
    return mla__error(MLA_STATUS_NO_KERNEL_IMAGE,
                         "%s: no kernel image for device %d (%s, compute capability %d.%d); "
                         "this build embeds %s",
                         what, ctx->device, g->name, g->cc_major, g->cc_minor,
                         archs[0] ? archs : "no CUDA targets");
}

/* Look a kernel up in the library of its role (mla_<role>...: the fatbin
 * named <role>), so no lookup fails by design (failed driver calls are
 * reported by compute-sanitizer), load it into the primary context and
 * read its attributes.  A kernel that is absent leaves k->fn NULL and
 * returns SUCCESS when optional is set. */
static mla_status_t get_kernel(mla_context_t *ctx, const char *kname, int optional,
                               struct mla_gpu_kernel *k)
{
    struct mla_gpu_context *g = ctx->gpu;
    const struct mla_cuda_api *cu = g->cu;
    CUkernel kern = NULL;
    CUresult r = CUDA_ERROR_NOT_FOUND;
    char what[160];

    memset(k, 0, sizeof(*k));
    for (int i = 0; i < MLA_GPU_NUM_FATBINS && !kern; i++) {
        size_t n = strlen(fatbins[i].name);
        if (!g->lib[i] || strncmp(kname, "mla_", 4) != 0 ||
            strncmp(kname + 4, fatbins[i].name, n) != 0 || (kname[4 + n] && kname[4 + n] != '_'))
            continue;
        r = cu->p_cuLibraryGetKernel(&kern, g->lib[i], kname);
        if (r != CUDA_SUCCESS && r != CUDA_ERROR_NOT_FOUND) {
            snprintf(what, sizeof(what), "cuLibraryGetKernel(%s)", kname);
            if (r == CUDA_ERROR_NO_BINARY_FOR_GPU)
                return no_image(ctx, what);
            return mla__cu_fail(MLA_STATUS_SUCCESS, r, what);
        }
        if (r != CUDA_SUCCESS)
            kern = NULL;
    }
    if (!kern) {
        if (optional)
            return MLA_STATUS_SUCCESS;
        return mla__error(MLA_STATUS_INTERNAL_ERROR,
                             "kernel %s is missing from the embedded fatbins", kname);
    }
    snprintf(what, sizeof(what), "cuKernelGetFunction(%s)", kname);
    r = cu->p_cuKernelGetFunction(&k->fn, kern);
    if (r == CUDA_ERROR_NO_BINARY_FOR_GPU)
        return no_image(ctx, what);
    if (r != CUDA_SUCCESS)
        return mla__cu_fail(MLA_STATUS_SUCCESS, r, what);

    snprintf(what, sizeof(what), "cuFuncGetAttribute(%s)", kname);
    r = cu->p_cuFuncGetAttribute(&k->static_smem, CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, k->fn);
    if (r == CUDA_SUCCESS)
        r = cu->p_cuFuncGetAttribute(&k->max_threads, CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                     k->fn);
    if (r == CUDA_SUCCESS)
        r = cu->p_cuFuncGetAttribute(&k->num_regs, CU_FUNC_ATTRIBUTE_NUM_REGS, k->fn);
    if (r != CUDA_SUCCESS)
        return mla__cu_fail(MLA_STATUS_CUDA_ERROR, r, what);
    k->max_dyn_smem = 48 * 1024 - k->static_smem;
    if (k->max_dyn_smem < 0)
        k->max_dyn_smem = 0;
    return MLA_STATUS_SUCCESS;
}

static mla_status_t need_threads(const struct mla_gpu_kernel *k, const char *kname, int threads)
{
    if (k->fn && k->max_threads < threads)
        return mla__error(MLA_STATUS_INTERNAL_ERROR,
                             "kernel %s allows %d threads per block, its launch needs %d",
                             kname, k->max_threads, threads);
    return MLA_STATUS_SUCCESS;
}

/* The sm_90a kernels hand registers from warpgroup to warpgroup with
 * setmaxnreg, budgeted from the whole register file for their one block
 * (kernels/sm90/hopper.cu, mla_entry_regs): compiled with fewer registers
 * a thread, a block's setmaxnreg.inc would wait forever for the rest. */
static mla_status_t need_regs(const struct mla_gpu_kernel *k, const char *kname, int threads)
{
    const int need = mla_entry_regs(threads);
    if (k->fn && k->num_regs < need)
        return mla__error(MLA_STATUS_INTERNAL_ERROR,
                             "kernel %s was compiled with %d registers a thread; its register "
                             "budgets need %d", kname, k->num_regs, need);
    return MLA_STATUS_SUCCESS;
}

/* Let the kernel use all the shared memory a block may opt in to. */
static mla_status_t raise_smem(mla_context_t *ctx, struct mla_gpu_kernel *k, const char *kname)
{
    struct mla_gpu_context *g = ctx->gpu;
    int dyn = g->smem_optin - k->static_smem;
    if (dyn < 0)
        dyn = 0;
    CUresult r =
        g->cu->p_cuFuncSetAttribute(k->fn, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dyn);
    if (r != CUDA_SUCCESS) {
        char what[160];
        snprintf(what, sizeof(what), "cuFuncSetAttribute(%s, max dynamic smem %d)", kname, dyn);
        return mla__cu_fail(MLA_STATUS_CUDA_ERROR, r, what);
    }
    k->max_dyn_smem = dyn;
    return MLA_STATUS_SUCCESS;
}

static mla_status_t load_kernels(mla_context_t *ctx)
{
    struct mla_gpu_context *g = ctx->gpu;
    const struct mla_cuda_api *cu = g->cu;
    mla_status_t st;
    char what[160];

    for (int i = 0; i < MLA_GPU_NUM_FATBINS; i++) {
        if (*fatbins[i].size == 0)
            return mla__error(MLA_STATUS_INTERNAL_ERROR,
                                 "embedded fatbin %s is empty", fatbins[i].name);
        snprintf(what, sizeof(what), "cuLibraryLoadData(%s.fatbin)", fatbins[i].name);
        CUresult r = cu->p_cuLibraryLoadData(&g->lib[i], fatbins[i].data, NULL, NULL, 0, NULL,
                                             NULL, 0);
        if (r == CUDA_ERROR_NO_BINARY_FOR_GPU)
            return no_image(ctx, what);
        if (r != CUDA_SUCCESS) {
            g->lib[i] = NULL;
            return mla__cu_fail(MLA_STATUS_SUCCESS, r, what);
        }
    }

    if ((st = get_kernel(ctx, "mla_schedule_pieces", 0, &g->schedule)) ||
        (st = need_threads(&g->schedule, "mla_schedule_pieces", MLA_SCHEDULE_THREADS)) ||
        (st = get_kernel(ctx, "mla_combine", 0, &g->combine)) ||
        (st = need_threads(&g->combine, "mla_combine", MLA_COMBINE_THREADS)) ||
        (st = get_kernel(ctx, "mla_append", 0, &g->append)) ||
        (st = need_threads(&g->append, "mla_append", MLA_APPEND_THREADS)))
        return st;

    /* The decode variants for this architecture.  A variant may be left
     * out of a build; plans that need it are refused with NOT_SUPPORTED,
     * and the selector never takes one that cannot be resident. */
    int found = 0;
    for (int v = 0; v < MLA_NUM_VARIANTS; v++) {
        const struct mla_variant *var = &mla__variants[v];
        struct mla_gpu_kernel *k = &g->decode[v];
        if (!mla__arch_runs_on(var->arch, g->cc_major, g->cc_minor))
            continue; /* other images hold no such kernel (a failed lookup is an API error) */
        if ((st = get_kernel(ctx, var->symbol, 1, k)) ||
            (st = need_threads(k, var->symbol, var->threads)) ||
            (var->layout != MLA_LAYOUT_PORTABLE && (st = need_regs(k, var->symbol, var->threads))))
            return st;
        if (!k->fn)
            continue;
        if ((st = raise_smem(ctx, k, var->symbol)) != MLA_STATUS_SUCCESS)
            return st;
        found += var->layout == MLA_LAYOUT_PORTABLE;
    }
    if (!found)
        return mla__error(MLA_STATUS_INTERNAL_ERROR,
                             "no mla_decode_* kernel in the embedded fatbins");

    return MLA_STATUS_SUCCESS;
}

static void release(mla_context_t *ctx)
{
    struct mla_gpu_context *g = ctx->gpu;
    if (!g)
        return;
    for (int i = 0; i < MLA_GPU_NUM_FATBINS; i++)
        if (g->lib[i])
            g->cu->p_cuLibraryUnload(g->lib[i]);
    if (g->pctx)
        g->cu->p_cuDevicePrimaryCtxRelease(g->dev);
    free(g);
    ctx->gpu = NULL;
}

static mla_status_t attr(mla_context_t *ctx, int *v, CUdevice_attribute a, const char *name)
{
    struct mla_gpu_context *g = ctx->gpu;
    CUresult r = g->cu->p_cuDeviceGetAttribute(v, a, g->dev);
    if (r != CUDA_SUCCESS) {
        char what[128];
        snprintf(what, sizeof(what), "cuDeviceGetAttribute(%s)", name);
        return mla__cu_fail(MLA_STATUS_CUDA_ERROR, r, what);
    }
    return MLA_STATUS_SUCCESS;
}

mla_status_t mla__gpu_context_init(mla_context_t *ctx, int device)
{
    mla_status_t st;
    const struct mla_cuda_api *cu = mla__cuda(&st);
    if (!cu)
        return st;

    int count = 0;
    CUresult r = cu->p_cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS)
        return mla__cu_fail(MLA_STATUS_SUCCESS, r, "cuDeviceGetCount");
    if (device >= count)
        return mla__error(MLA_STATUS_NO_DEVICE,
                          "device = %d: no such CUDA device (%d device%s visible)", device,
                          count, count == 1 ? "" : "s");

    struct mla_gpu_context *g = calloc(1, sizeof(*g));
    if (!g)
        return mla__error(MLA_STATUS_OUT_OF_MEMORY, "out of host memory");
    ctx->gpu = g;
    g->cu = cu;
    r = cu->p_cuDeviceGet(&g->dev, device);
    if (r != CUDA_SUCCESS) {
        st = mla__cu_fail(MLA_STATUS_SUCCESS, r, "cuDeviceGet");
        goto fail;
    }
    if (cu->p_cuDeviceGetName(g->name, (int)sizeof(g->name), g->dev) != CUDA_SUCCESS)
        snprintf(g->name, sizeof(g->name), "unknown device");
    if ((st = attr(ctx, &g->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                   "compute capability major")) ||
        (st = attr(ctx, &g->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                   "compute capability minor")) ||
        (st = attr(ctx, &g->sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                   "multiprocessor count")) ||
        (st = attr(ctx, &g->smem_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                   "max shared memory per block opt-in")))
        goto fail;
    if (!archs_cover(mla__gpu_archs(), g->cc_major, g->cc_minor)) {
        st = no_image(ctx, "embedded targets");
        goto fail;
    }

    r = cu->p_cuDevicePrimaryCtxRetain(&g->pctx, g->dev);
    if (r != CUDA_SUCCESS) {
        g->pctx = NULL;
        st = mla__cu_fail(MLA_STATUS_SUCCESS, r, "cuDevicePrimaryCtxRetain");
        goto fail;
    }
    if ((st = mla__gpu_push(ctx)) != MLA_STATUS_SUCCESS)
        goto fail;
    st = load_kernels(ctx);
    mla__gpu_pop(ctx);
    if (st != MLA_STATUS_SUCCESS)
        goto fail;
    return MLA_STATUS_SUCCESS;

fail:
    release(ctx);
    return st;
}

void mla__gpu_context_fini(mla_context_t *ctx)
{
    release(ctx);
}
