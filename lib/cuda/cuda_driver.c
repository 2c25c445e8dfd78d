/*
 * cuda_driver.c - load libcuda.so.1 at run time and resolve the driver
 * entry points through cuGetProcAddress, once per process.
 *
 * SPDX-License-Identifier: MIT
 */
#ifdef HAVE_CONFIG_H
#include "config.h"
#endif

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "cuda_driver.h"

static struct mla_cuda_api cu;
static const struct mla_cuda_api *cu_ok; /* &cu once everything worked */
static mla_status_t cu_status = MLA_STATUS_INTERNAL_ERROR;
static char cu_err[MLA_ERRMSG_LEN];
static pthread_once_t cu_once = PTHREAD_ONCE_INIT;

struct entry {
    const char *name;
    int version;
    void **slot;
};

#define MLA_CUDA_ENTRY_(name, ver) {#name, ver, (void **)&cu.p_##name},
static const struct entry entries[] = {MLA_CUDA_ENTRY_POINTS(MLA_CUDA_ENTRY_)};
#undef MLA_CUDA_ENTRY_

/* "CUDA_ERROR_NAME: description" of a driver result, through the
 * driver's own tables once they are resolved, else the number. */
static void describe(CUresult r, char *buf, size_t n)
{
    const char *name = NULL, *text = NULL;
    if (!cu.p_cuGetErrorName || cu.p_cuGetErrorName(r, &name) != CUDA_SUCCESS)
        name = NULL;
    if (!cu.p_cuGetErrorString || cu.p_cuGetErrorString(r, &text) != CUDA_SUCCESS)
        text = NULL;
    if (name)
        snprintf(buf, n, "%s: %s", name, text ? text : "no description");
    else
        snprintf(buf, n, "CUDA error %d", (int)r);
}

static void cu_load(void)
{
    char why[256];
    /* Never dlclose()d: function pointers escape into every context. */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *e = dlerror();
        cu_status = mla__fail(cu_err, MLA_STATUS_NO_DEVICE, "cannot load the CUDA driver: %s",
                              e ? e : "dlopen(libcuda.so.1) failed");
        return;
    }
    PFN_cuGetProcAddress_v12000 gpa;
    *(void **)&gpa = dlsym(h, "cuGetProcAddress_v2");
    if (!gpa) {
        const char *e = dlerror();
        cu_status = mla__fail(cu_err, MLA_STATUS_DRIVER_TOO_OLD,
                              "the CUDA driver lacks cuGetProcAddress_v2 (needs a CUDA %d.%d "
                              "driver or newer): %s",
                              MLA_CUDA_MIN_DRIVER / 1000, MLA_CUDA_MIN_DRIVER % 1000 / 10,
                              e ? e : "dlsym failed");
        return;
    }
    /* The error tables first, so that every later failure has a name. */
    CUdriverProcAddressQueryResult qres = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (gpa("cuGetErrorName", (void **)&cu.p_cuGetErrorName, 6000,
            CU_GET_PROC_ADDRESS_LEGACY_STREAM, &qres) != CUDA_SUCCESS)
        cu.p_cuGetErrorName = NULL;
    if (gpa("cuGetErrorString", (void **)&cu.p_cuGetErrorString, 6000,
            CU_GET_PROC_ADDRESS_LEGACY_STREAM, &qres) != CUDA_SUCCESS)
        cu.p_cuGetErrorString = NULL;
    /* The version next: a too-old driver gets a clearer message than
     * "entry point missing". */
    PFN_cuDriverGetVersion_v2020 getver = NULL;
    qres = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = gpa("cuDriverGetVersion", (void **)&getver, 2020,
                     CU_GET_PROC_ADDRESS_LEGACY_STREAM, &qres);
    int ver = 0;
    if (r == CUDA_SUCCESS && !getver)
        r = CUDA_ERROR_NOT_FOUND;
    if (r == CUDA_SUCCESS)
        r = getver(&ver);
    if (r != CUDA_SUCCESS) {
        describe(r, why, sizeof why);
        cu_status = mla__fail(cu_err, MLA_STATUS_DRIVER_TOO_OLD, "cuDriverGetVersion: %s", why);
        return;
    }
    if (ver < MLA_CUDA_MIN_DRIVER) {
        cu_status = mla__fail(cu_err, MLA_STATUS_DRIVER_TOO_OLD,
                              "CUDA driver %d.%d is older than the %d.%d libmla needs",
                              ver / 1000, ver % 1000 / 10, MLA_CUDA_MIN_DRIVER / 1000,
                              MLA_CUDA_MIN_DRIVER % 1000 / 10);
        return;
    }
    for (size_t i = 0; i < sizeof(entries) / sizeof(entries[0]); i++) {
        const struct entry *e = &entries[i];
        qres = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
        *e->slot = NULL;
        r = gpa(e->name, e->slot, e->version, CU_GET_PROC_ADDRESS_LEGACY_STREAM, &qres);
        if (r != CUDA_SUCCESS || !*e->slot || qres != CU_GET_PROC_ADDRESS_SUCCESS) {
            describe(r, why, sizeof why);
            cu_status = mla__fail(cu_err, MLA_STATUS_DRIVER_TOO_OLD,
                                  "CUDA driver %d.%d lacks %s (ABI %d; cuGetProcAddress: %s, "
                                  "query result %d)",
                                  ver / 1000, ver % 1000 / 10, e->name, e->version, why,
                                  (int)qres);
            return;
        }
    }
    cu.driver_version = ver;
    r = cu.p_cuInit(0);
    if (r != CUDA_SUCCESS) {
        describe(r, why, sizeof why);
        cu_status = mla__fail(cu_err, MLA_STATUS_NO_DEVICE, "cuInit (CUDA driver %d.%d): %s",
                              ver / 1000, ver % 1000 / 10, why);
        return;
    }
    cu_status = MLA_STATUS_SUCCESS;
    cu_ok = &cu;
}

const struct mla_cuda_api *mla__cuda(mla_status_t *st)
{
    if (pthread_once(&cu_once, cu_load) != 0) {
        *st = mla__error(MLA_STATUS_INTERNAL_ERROR, "pthread_once failed");
        return NULL;
    }
    *st = cu_status;
    if (!cu_ok)
        mla__error(cu_status, "%s", cu_err);
    return cu_ok;
}

mla_status_t mla__cu_status(CUresult r)
{
    switch (r) {
    case CUDA_SUCCESS:
        return MLA_STATUS_SUCCESS;
    case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE:
        return MLA_STATUS_NO_DEVICE;
    case CUDA_ERROR_OUT_OF_MEMORY:
        return MLA_STATUS_OUT_OF_MEMORY;
    case CUDA_ERROR_NO_BINARY_FOR_GPU:
        return MLA_STATUS_NO_KERNEL_IMAGE;
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION:
        return MLA_STATUS_DRIVER_TOO_OLD;
    default:
        return MLA_STATUS_CUDA_ERROR;
    }
}

mla_status_t mla__cu_fail(mla_status_t st, CUresult r, const char *what)
{
    char why[256];
    if (st == MLA_STATUS_SUCCESS)
        st = mla__cu_status(r);
    if (st == MLA_STATUS_SUCCESS)
        st = MLA_STATUS_INTERNAL_ERROR;
    describe(r, why, sizeof why);
    return mla__error(st, "%s: %s", what, why);
}
