/*
 * cuda_driver.h - the CUDA driver API reached at run time through
 * dlopen("libcuda.so.1") and cuGetProcAddress; libmla never links libcuda.
 * <cuda.h> is used for types and prototypes only.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_CUDA_DRIVER_H
#define MLA_CUDA_DRIVER_H

#include <cuda.h>
#include <cudaTypedefs.h>

#include "internal.h"

/* Oldest driver accepted: the cuLibrary* API appeared in CUDA 12.0. */
#define MLA_CUDA_MIN_DRIVER 12000

/*
 * Every entry point libmla calls, each with the CUDA version of the ABI we
 * call it with.  The pair names the cudaTypedefs.h pointer type and is the
 * version asked of cuGetProcAddress, so a newer driver keeps handing out
 * that ABI (asking for CUDA_VERSION would, e.g., return the 13.0
 * cuCtxSynchronize that takes a context, and fail on a 12.x driver).
 */
#define MLA_CUDA_ENTRY_POINTS(X)                                                  \
    X(cuInit, 2000)                                                               \
    X(cuDriverGetVersion, 2020)                                                   \
    X(cuGetErrorName, 6000)                                                       \
    X(cuGetErrorString, 6000)                                                     \
    X(cuDeviceGet, 2000)                                                          \
    X(cuDeviceGetCount, 2000)                                                     \
    X(cuDeviceGetAttribute, 2000)                                                 \
    X(cuDeviceGetName, 2000)                                                      \
    X(cuDevicePrimaryCtxRetain, 7000)                                             \
    X(cuDevicePrimaryCtxRelease, 11000)                                           \
    X(cuCtxPushCurrent, 4000)                                                     \
    X(cuCtxPopCurrent, 4000)                                                      \
    X(cuCtxSynchronize, 2000)                                                     \
    X(cuLibraryLoadData, 12000)                                                   \
    X(cuLibraryUnload, 12000)                                                     \
    X(cuLibraryGetKernel, 12000)                                                  \
    X(cuKernelGetFunction, 12000)                                                 \
    X(cuFuncGetAttribute, 2020)                                                   \
    X(cuFuncSetAttribute, 9000)                                                   \
    X(cuOccupancyMaxActiveBlocksPerMultiprocessor, 6050)                          \
    X(cuLaunchKernelEx, 11060)                                                    \
    X(cuMemcpyDtoH, 3020)                                                         \
    X(cuTensorMapEncodeTiled, 12000)

/* Fields are named p_<base name> so cuda.h's renaming macros
 * (cuCtxPushCurrent -> cuCtxPushCurrent_v2, ...) never touch them. */
#define MLA_CUDA_FIELD_(name, ver) PFN_##name##_v##ver p_##name;
struct mla_cuda_api {
    MLA_CUDA_ENTRY_POINTS(MLA_CUDA_FIELD_)
    int driver_version; /* cuDriverGetVersion, e.g. 13000 */
};
#undef MLA_CUDA_FIELD_

/*
 * Load the driver once per process (thread-safe) and return its entry
 * points, or NULL with the status in *st and the reason (the dlopen text,
 * the driver's error name and description) as the thread's message:
 *   MLA_STATUS_NO_DEVICE        libcuda.so.1 missing, or cuInit failed
 *                               (no GPU, driver/library mismatch, ...);
 *   MLA_STATUS_DRIVER_TOO_OLD   older than MLA_CUDA_MIN_DRIVER, or an
 *                               entry point is missing.
 * The result of the first call is kept for the life of the process.
 */
const struct mla_cuda_api *mla__cuda(mla_status_t *st);

/* Map a driver error to a status: no device, out of memory, no kernel
 * image, driver too old; anything else is MLA_STATUS_CUDA_ERROR. */
mla_status_t mla__cu_status(CUresult r);

/* Leave "what: CUDA_ERROR_NAME: description" as the thread's message and
 * return st; st == MLA_STATUS_SUCCESS means "use mla__cu_status(r)". */
mla_status_t mla__cu_fail(mla_status_t st, CUresult r, const char *what);

#endif /* MLA_CUDA_DRIVER_H */
