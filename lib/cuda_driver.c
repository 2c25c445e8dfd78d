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

static void cu_load(void)
{
    /* Never dlclose()d: function pointers escape into every context. */
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        const char *why = dlerror();
        cu_status = mla__fail(cu_err, MLA_STATUS_NO_DEVICE,
                              "CUDA driver not found: %s", why ? why : "dlopen failed");
        return;
    }
    PFN_cuGetProcAddress_v12000 gpa;
    *(void **)&gpa = dlsym(h, "cuGetProcAddress_v2");
    if (!gpa) {
        cu_status = mla__fail(cu_err, MLA_STATUS_DRIVER_TOO_OLD,
                              "CUDA driver lacks cuGetProcAddress_v2 (needs a CUDA %d.%d "
                              "driver or newer)",
                              MLA_CUDA_MIN_DRIVER / 1000, MLA_CUDA_MIN_DRIVER % 1000 / 10);
        return;
    }
    /* The version first: a too-old driver gets a clearer message than
     * "entry point missing". */
    PFN_cuDriverGetVersion_v2020 getver = NULL;
    CUdriverProcAddressQueryResult qres = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    CUresult r = gpa("cuDriverGetVersion", (void **)&getver, 2020,
                     CU_GET_PROC_ADDRESS_LEGACY_STREAM, &qres);
    int ver = 0;
    if (r != CUDA_SUCCESS || !getver || getver(&ver) != CUDA_SUCCESS) {
        cu_status = mla__fail(cu_err, MLA_STATUS_DRIVER_TOO_OLD,
                              "cuDriverGetVersion unavailable (cuGetProcAddress returned %d)",
                              (int)r);
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
            cu_status = mla__fail(cu_err, MLA_STATUS_DRIVER_TOO_OLD,
                                  "CUDA driver %d.%d lacks %s (ABI %d; cuGetProcAddress "
                                  "returned %d, query result %d)",
                                  ver / 1000, ver % 1000 / 10, e->name, e->version, (int)r,
                                  (int)qres);
            return;
        }
    }
    cu.driver_version = ver;
    r = cu.p_cuInit(0);
    if (r != CUDA_SUCCESS) {
        const char *name = NULL, *text = NULL;
        if (cu.p_cuGetErrorName(r, &name) != CUDA_SUCCESS)
            name = NULL;
        if (cu.p_cuGetErrorString(r, &text) != CUDA_SUCCESS)
            text = NULL;
        cu_status = mla__fail(cu_err, MLA_STATUS_NO_DEVICE, "cuInit: %s: %s",
                              name ? name : "unknown error", text ? text : "no description");
        return;
    }
    cu_status = MLA_STATUS_SUCCESS;
    cu_ok = &cu;
}

const struct mla_cuda_api *mla__cuda(mla_status_t *st, char *err)
{
    if (pthread_once(&cu_once, cu_load) != 0) {
        if (st)
            *st = MLA_STATUS_INTERNAL_ERROR;
        mla__fail(err, MLA_STATUS_INTERNAL_ERROR, "pthread_once failed");
        return NULL;
    }
    if (st)
        *st = cu_status;
    if (!cu_ok && err)
        snprintf(err, MLA_ERRMSG_LEN, "%s", cu_err);
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

mla_status_t mla__cu_fail(char *err, mla_status_t st, CUresult r, const char *what)
{
    if (st == MLA_STATUS_SUCCESS)
        st = mla__cu_status(r);
    if (st == MLA_STATUS_SUCCESS)
        st = MLA_STATUS_INTERNAL_ERROR;
    const char *name = NULL, *text = NULL;
    if (cu_ok) {
        if (cu.p_cuGetErrorName(r, &name) != CUDA_SUCCESS)
            name = NULL;
        if (cu.p_cuGetErrorString(r, &text) != CUDA_SUCCESS)
            text = NULL;
    }
    if (name)
        return mla__fail(err, st, "%s: %s: %s", what, name, text ? text : "no description");
    return mla__fail(err, st, "%s: CUDA error %d", what, (int)r);
}
