/*
 * mla_experimental.h - experimental parameters of libmla, for measurements
 * and tests.
 *
 * NOT PART OF THE STABLE INTERFACE.  Everything declared here may change
 * meaning, values or names, or disappear, in any release, patch releases
 * included.  It is outside the compatibility promise of ABI.md and outside
 * the ABI checks.  A program that uses it should be built and run against
 * one exact version of libmla (compare MLA_VERSION_NUMBER with
 * mla_version_number()).  A program that runs well without it never needs
 * it: results are the same, within the documented accuracy, whatever these
 * parameters say.
 *
 * The parameters are values of mla_param_t in the range mla.h reserves,
 * MLA_PARAM_EXPERIMENTAL_FIRST..MLA_PARAM_EXPERIMENTAL_LAST, set and read
 * with mla_config_set_int() and mla_config_get_int() like the others:
 * mla_config_set_int() checks each value and refuses one it does not take
 * with MLA_STATUS_INVALID_ARGUMENT, and plans copy them with the rest of
 * the config.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_EXPERIMENTAL_H
#define MLA_EXPERIMENTAL_H

#include "mla.h"

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @file mla_experimental.h
 * @brief Experimental parameters: unstable, outside the ABI promise.
 */

/**
 * Which decode kernel a plan on a CUDA context runs: an ::mla_xkernel_t.
 * Read by mla_plan_create(); the CPU backend ignores it.  Any value other
 * than ::MLA_XKERNEL_AUTO and ::MLA_XKERNEL_PORTABLE makes that kernel a
 * requirement: mla_plan_create() fails with ::MLA_STATUS_NOT_SUPPORTED for
 * a shape or device it does not serve, and a decode call that it cannot
 * take (kv_block_scales not 16-byte aligned, a cache of 2^31 rows or more)
 * fails with ::MLA_STATUS_NOT_SUPPORTED instead of running the portable
 * kernel.  Default ::MLA_XKERNEL_AUTO.
 */
#define MLA_XPARAM_KERNEL ((mla_param_t)(MLA_PARAM_EXPERIMENTAL_FIRST + 0))

/**
 * Threads of each mla_decode() on the CPU backend, the calling thread
 * included: 0 = as many as online processors (at most 256), else 1..256.
 * Read by mla_plan_create() on a CPU context; a CUDA context ignores it.
 * Default 0.
 */
#define MLA_XPARAM_CPU_THREADS ((mla_param_t)(MLA_PARAM_EXPERIMENTAL_FIRST + 1))

/** Values of ::MLA_XPARAM_KERNEL. */
typedef enum mla_xkernel {
    /** The plan's own choice for the device and shape. */
    MLA_XKERNEL_AUTO = 0,
    /** The portable kernel, on every device the build has kernels for. */
    MLA_XKERNEL_PORTABLE = 1,
    /** An sm_90a kernel, the one the automatic choice would take. */
    MLA_XKERNEL_HOPPER = 2,
    /** The wide sm_90a kernel for BF16 caches, also for shapes that the
     *  narrow kernel would take.  It serves no FP8 cache (a plan for one
     *  fails with ::MLA_STATUS_NOT_SUPPORTED): their wide kernel is
     *  ::MLA_XKERNEL_HOPPER_WIDE8. */
    MLA_XKERNEL_HOPPER_WIDE = 3,
    /** The narrow sm_90a kernel, whatever the batch: at most 16 query rows
     *  per KV head (heads per KV head times query tokens) with BF16
     *  caches, 32 with FP8 ones. */
    MLA_XKERNEL_HOPPER_NARROW = 4,
    /** The wide sm_90a kernel for FP8 caches, which converts in registers
     *  (E4M3 and DS_MLA; E4M3 block scales with one KV head), also for
     *  shapes that the narrow kernel would take. */
    MLA_XKERNEL_HOPPER_WIDE8 = 5
} mla_xkernel_t;

/** Short names of the mla_xkernel_t values in value order, for command
 *  lines and test tables: `static const char *const n[] = {MLA_XKERNEL_NAMES};`. */
#define MLA_XKERNEL_NAMES \
    "auto", "portable", "hopper", "hopper-wide", "hopper-narrow", "hopper-wide8"

#ifdef __cplusplus
}
#endif

#endif /* MLA_EXPERIMENTAL_H */
