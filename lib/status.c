/* status.c - text of each status code.
 * SPDX-License-Identifier: MIT */
#include "internal.h"

const char *mla_status_string(mla_status_t status)
{
    switch (status) {
    case MLA_STATUS_SUCCESS: return "success";
    case MLA_STATUS_INVALID_ARGUMENT: return "invalid argument";
    case MLA_STATUS_NOT_SUPPORTED: return "not supported";
    case MLA_STATUS_NO_DEVICE: return "no CUDA device or driver";
    case MLA_STATUS_OUT_OF_MEMORY: return "out of memory";
    case MLA_STATUS_MISALIGNED: return "misaligned pointer";
    case MLA_STATUS_SIZE_MISMATCH: return "buffer size too small";
    case MLA_STATUS_OUT_OF_BOUNDS: return "index or length out of bounds";
    case MLA_STATUS_DRIVER_TOO_OLD: return "CUDA driver too old";
    case MLA_STATUS_NO_KERNEL_IMAGE: return "no kernel image for this device";
    case MLA_STATUS_CUDA_ERROR: return "CUDA driver error";
    case MLA_STATUS_INTERNAL_ERROR: return "internal error";
    }
    return "unknown status";
}
