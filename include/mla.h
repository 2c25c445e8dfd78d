/*
 * mla.h - libmla public API: Multi-head Latent Attention decode over a
 * paged KV cache (BF16 or FP8) on NVIDIA GPUs, with a CPU reference backend.
 *
 * This header is the specification.  Anything not described here is not
 * part of the published interface and may change without notice.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_H
#define MLA_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** @cond INTERNAL */
#if defined(MLA_BUILDING_LIBRARY) && defined(__GNUC__)
#define MLA_API __attribute__((visibility("default")))
#else
#define MLA_API
#endif
/* CUstream and cudaStream_t point to this type.  Declared at file scope so
 * that the prototypes below all name one type even without cuda.h (in C a
 * struct first seen in a parameter list is local to that prototype). */
struct CUstream_st;
/** @endcond */

/**
 * @file mla.h
 * @brief The whole public API of libmla.
 *
 * @mainpage libmla
 *
 * libmla computes absorbed Multi-head Latent Attention (DeepSeek-V2/V3
 * style) for the decode phase of inference: a few query tokens per request
 * attend over a long, paged, latent KV cache with one 576-wide row per
 * token (512 "nope" dimensions followed by 64 RoPE dimensions); V is the
 * first 512 dimensions of the same row.
 *
 * Objects, all opaque:
 *  - ::mla_context_t binds a backend: a CUDA device or the CPU.
 *  - ::mla_config_t  describes the model shape and the KV-cache format.
 *  - ::mla_plan_t    is the frozen pipeline state for one config, batch
 *                    size and maximum sequence length on one context.
 *
 * A decode step is then: mla_kv_append() to write the new latent rows
 * into the cache, and mla_decode() to compute the attention output.
 * Neither call allocates device memory or synchronizes; on a CUDA context
 * both are asynchronous on the caller's stream and may be captured into a
 * CUDA graph.
 *
 * Conventions:
 *  - Every function that can fail returns ::mla_status_t.  On failure it
 *    writes nothing to any caller buffer (but for the verdict some
 *    failures record in a workspace, see mla_workspace_status(), and a
 *    launch that fails after the same call queued another, see
 *    ::MLA_STATUS_CUDA_ERROR in mla_decode()) and leaves a message for the
 *    calling thread, readable with mla_last_error(), and with
 *    mla_context_last_error() or mla_config_last_error() when the call
 *    concerned a context or config (see Threads below).  Messages start with
 *    the function's name, then name the argument or parameter at fault,
 *    e.g. "mla_config_set_int: MLA_PARAM_PAGE_SIZE = 48: want a power of
 *    two in [1, 1024]"; their wording is not part of the interface.
 *  - Destroy functions accept NULL.
 *  - Aliasing: a buffer that a call writes (mla_decode(): out, lse and the
 *    first mla_plan_workspace_size() bytes of the workspace;
 *    mla_kv_append(): kv_cache and kv_block_scales) must not overlap any
 *    other buffer argument of the call, input or output, over the extents
 *    its shape gives.  Inputs may overlap each other.  A call that breaks
 *    this rule fails with ::MLA_STATUS_INVALID_ARGUMENT and writes nothing.
 *  - Tensors are dense, row-major, with the shapes given below.  On a
 *    CUDA context every tensor argument is a device pointer (CUdeviceptr
 *    cast to a pointer); on the CPU context every tensor is host memory.
 *  - Streams are passed as `struct CUstream_st *` (the same type as
 *    CUstream and cudaStream_t), so callers need no CUDA header.  NULL is
 *    the legacy default stream.  The CPU backend ignores the stream and
 *    runs synchronously.
 *
 * Threads:
 *  - Any function may be called from any thread, and calls may run at
 *    the same time on the same context, plans and configs: several
 *    threads may decode, append and create plans on one context at once.
 *    The caller orders only these: a destroy function runs while no other
 *    call uses the object it destroys (and a context's plans are
 *    destroyed before it); mla_config_set_int() and mla_config_set_float()
 *    run while no other call uses that config; a workspace serves one
 *    mla_decode() in flight at a time; and a buffer that one call writes
 *    is not read or written by another call running at the same time (on
 *    a CUDA context: queued on another stream without an ordering).
 *  - Error messages are per thread.  Each function that returns
 *    ::mla_status_t first clears the calling thread's message and leaves a
 *    new one only if it fails; calls on other threads never change it.
 *    mla_last_error() returns it whatever the call concerned;
 *    mla_context_last_error() and mla_config_last_error() return it when
 *    the thread's last such call concerned that context (a plan made on it
 *    included) or config, and "" otherwise.
 *    Read it right after the call that failed, on the same thread.  A
 *    thread's first call allocates its message buffer (a few hundred
 *    bytes of host memory, freed when the thread exits); if that fails,
 *    calls still work but leave no message.
 *  - On a CUDA context every call makes the device's primary context
 *    current on the calling thread for its duration, then restores the
 *    thread's previous current context.
 *  - The CPU backend runs each mla_decode() on the calling thread and
 *    worker threads (by default as many in all as online processors, at
 *    most 256 and at most one per request and KV head) that it starts and
 *    joins within the call.
 */

/* ------------------------------------------------------------------ */
/** @defgroup version Version
 *  @{ */

/** Major version: changes only with an incompatible ABI (new SONAME). */
#define MLA_VERSION_MAJOR 1
/** Minor version: new functionality, backward compatible. */
#define MLA_VERSION_MINOR 1
/** Patch version: bug fixes only. */
#define MLA_VERSION_PATCH 0
/** The version as one number: major * 10000 + minor * 100 + patch. */
#define MLA_VERSION_NUMBER \
    (MLA_VERSION_MAJOR * 10000 + MLA_VERSION_MINOR * 100 + MLA_VERSION_PATCH)
/** @cond INTERNAL */
#define MLA_STR_(x) #x
#define MLA_STR(x) MLA_STR_(x)
/** @endcond */
/** The version as a string, "major.minor.patch". */
#define MLA_VERSION_STRING \
    MLA_STR(MLA_VERSION_MAJOR) "." MLA_STR(MLA_VERSION_MINOR) "." MLA_STR(MLA_VERSION_PATCH)

/**
 * @brief Run-time version of the library actually loaded.
 * @return MLA_VERSION_NUMBER as it was when the library was built.
 *         Compare with the macro to detect a header/library mismatch.
 */
MLA_API unsigned mla_version_number(void);

/**
 * @brief Run-time version string of the library actually loaded.
 * @return A static string such as "1.0.0"; never NULL.
 */
MLA_API const char *mla_version_string(void);

/**
 * @brief How the library was built.
 * @return A static, NUL-terminated string of space-separated key=value
 *         pairs, for example
 *         "version=1.0.0 cuda=13.0 archs=sm_90a,sm_100a backends=cpu,cuda".
 *         `archs=` lists the SM targets whose kernels are embedded (empty
 *         when built without CUDA).  Never NULL.
 */
MLA_API const char *mla_build_info(void);

/** @} */

/* ------------------------------------------------------------------ */
/** @defgroup status Status codes
 *  @{ */

/**
 * @brief Result of every fallible call.  Values are frozen; new codes are
 *        only ever appended.
 */
typedef enum mla_status {
    MLA_STATUS_SUCCESS = 0,          /**< The call did what it was asked. */
    MLA_STATUS_INVALID_ARGUMENT = 1, /**< NULL pointer, value out of range,
                                          or a handle of the wrong kind. */
    MLA_STATUS_NOT_SUPPORTED = 2,    /**< Valid request this build, backend or
                                          device does not implement. */
    MLA_STATUS_NO_DEVICE = 3,        /**< No CUDA driver, or no such device. */
    MLA_STATUS_OUT_OF_MEMORY = 4,    /**< A host or device allocation failed
                                          (only create functions allocate). */
    MLA_STATUS_MISALIGNED = 5,       /**< A pointer lacks the alignment its
                                          argument requires. */
    MLA_STATUS_SIZE_MISMATCH = 6,    /**< A buffer size (e.g. workspace) is
                                          smaller than required. */
    MLA_STATUS_OUT_OF_BOUNDS = 7,    /**< A sequence length exceeds the block
                                          table or the plan, or a block-table
                                          entry or slot exceeds the cache. */
    MLA_STATUS_DRIVER_TOO_OLD = 8,   /**< The CUDA driver lacks an entry point
                                          the library needs. */
    MLA_STATUS_NO_KERNEL_IMAGE = 9,  /**< The device's architecture has no
                                          kernel embedded in this build. */
    MLA_STATUS_CUDA_ERROR = 10,      /**< A CUDA driver call failed; the
                                          message names it. */
    MLA_STATUS_INTERNAL_ERROR = 11   /**< A bug in libmla; please report it. */
} mla_status_t;

/**
 * @brief Describe a status code.
 * @param status Any value, valid or not.
 * @return A static short English description; "unknown status" for values not in
 *         ::mla_status_t.  Never NULL.
 */
MLA_API const char *mla_status_string(mla_status_t status);

/** @} */

/* ------------------------------------------------------------------ */
/** @defgroup context Contexts
 *  @{ */

/** Opaque backend binding: a CUDA device or the CPU. */
typedef struct mla_context mla_context_t;

/** Device ordinal that selects the CPU reference backend. */
#define MLA_DEVICE_CPU (-1)

/**
 * @brief Create a context on a CUDA device or on the CPU.
 *
 * For a device ordinal >= 0 the CUDA driver (libcuda.so.1) is loaded at
 * run time, the device's primary context is retained, and the kernels
 * embedded for its architecture are loaded.  All later calls on the
 * context make that primary context current for their duration.
 *
 * @param[out] ctx    Receives the new context; set to NULL on failure.
 * @param device      CUDA device ordinal, or ::MLA_DEVICE_CPU.
 * @return ::MLA_STATUS_SUCCESS;
 *         ::MLA_STATUS_INVALID_ARGUMENT if @p ctx is NULL or @p device < -1;
 *         ::MLA_STATUS_NO_DEVICE without a driver or with no such device;
 *         ::MLA_STATUS_DRIVER_TOO_OLD if the driver lacks an entry point;
 *         ::MLA_STATUS_NO_KERNEL_IMAGE if no kernel matches the device;
 *         ::MLA_STATUS_NOT_SUPPORTED if built without CUDA kernels;
 *         ::MLA_STATUS_OUT_OF_MEMORY; ::MLA_STATUS_CUDA_ERROR.
 *         No context exists to hold a message: mla_last_error() gives
 *         the reason, e.g. the dynamic loader's text when libcuda.so.1
 *         cannot be loaded, or the driver's error name and description.
 */
MLA_API mla_status_t mla_context_create(mla_context_t **ctx, int device);

/**
 * @brief Destroy a context.  Plans made on it must be destroyed first.
 * @param ctx Context, or NULL (no-op).
 */
MLA_API void mla_context_destroy(mla_context_t *ctx);

/**
 * @brief The calling thread's message about a context.
 *
 * Each function that returns ::mla_status_t clears the calling thread's
 * message and leaves a new one if it fails.  This returns that message
 * when the thread's last such call concerned @p ctx: mla_plan_create() or
 * mla_kv_append() on it, or mla_plan_workspace_size(), mla_decode() or
 * mla_workspace_status() with a plan made on it.  Other threads' calls on
 * the same context never change it.
 *
 * @param ctx Context, or NULL.
 * @return A NUL-terminated string owned by the library: the message, or
 *         "" after a success, for a call about another handle, or for a
 *         NULL or invalid @p ctx.  Valid until the calling thread's next
 *         call into libmla.  Never NULL.
 */
MLA_API const char *mla_context_last_error(const mla_context_t *ctx);

/**
 * @brief The calling thread's last error message, whatever the call
 *        concerned.
 *
 * The message that the calling thread's last call returning
 * ::mla_status_t left: "" if that call succeeded.  It covers failures
 * that have no context or config to read a message from, such as
 * mla_context_create() (why no context could be made), mla_config_create()
 * or a call given a NULL or invalid handle.  Like errno, it is per thread:
 * other threads' calls never change it.
 *
 * @return A NUL-terminated string owned by the library, valid until the
 *         calling thread's next call into libmla.  Never NULL.
 * @since 1.1 (symbol version MLA_1.1).
 */
MLA_API const char *mla_last_error(void);

/** @} */

/* ------------------------------------------------------------------ */
/** @defgroup config Configs
 *  @{ */

/** Opaque description of the model shape, cache format and tuning. */
typedef struct mla_config mla_config_t;

/** KV-cache row formats. */
typedef enum mla_kv_format {
    /** 576 bf16 per token and KV head (1152 bytes). */
    MLA_KV_BF16 = 0,
    /** 576 e4m3 per token and KV head (576 bytes), nope and RoPE alike.
     *  Dequantized value = e4m3 * kv_scale [* block scale]; block scales,
     *  when MLA_PARAM_SCALE_BLOCK_SIZE is not 0, are fp32 in a separate
     *  paged array (see mla_decode()). */
    MLA_KV_FP8_E4M3 = 1,
    /** DeepSeek-V3.2 / vLLM "fp8_ds_mla" 656-byte row: 512 e4m3, then 4
     *  fp32 scales (one per 128 nope channels), then 64 bf16 RoPE values.
     *  nope value = e4m3 * scale[c / 128]; RoPE is unscaled.  The row
     *  carries its own scales, so MLA_PARAM_KV_SCALE must be 1. */
    MLA_KV_FP8_DS_MLA = 2
} mla_kv_format_t;

/**
 * @brief Config parameters.  Integer parameters use mla_config_set_int(),
 *        floating-point ones mla_config_set_float().  Values are frozen;
 *        new parameters are only ever appended.
 */
typedef enum mla_param {
    /** Query heads h_q, 1..128.  Default 128. */
    MLA_PARAM_NUM_HEADS = 1,
    /** KV heads h_kv; must divide h_q.  Default 1. */
    MLA_PARAM_NUM_KV_HEADS = 2,
    /** Query tokens per request (MTP / speculative decode), 1..8.
     *  Default 1. */
    MLA_PARAM_Q_LEN = 3,
    /** Q/K head dimension.  Only 576 is supported.  Default 576. */
    MLA_PARAM_HEAD_DIM_QK = 4,
    /** V head dimension (V = first dims of the K row).  Only 512 is
     *  supported.  Default 512. */
    MLA_PARAM_HEAD_DIM_V = 5,
    /** A ::mla_kv_format_t.  Default ::MLA_KV_BF16. */
    MLA_PARAM_KV_FORMAT = 6,
    /** Tokens per cache page: a power of two, 1..1024.  Default 64. */
    MLA_PARAM_PAGE_SIZE = 7,
    /** Channels per blockwise fp32 scale for ::MLA_KV_FP8_E4M3: 0 (no
     *  block scales), 32, 64 or 128.  Must be 0 for other formats.
     *  Default 0. */
    MLA_PARAM_SCALE_BLOCK_SIZE = 8,
    /** Non-zero: causal attention when q_len > 1, bottom-right aligned
     *  (query i of n sees keys < len - n + 1 + i).  Default 0. */
    MLA_PARAM_CAUSAL = 9,
    /** Hint for the portable kernel: shared-memory pipeline stages;
     *  0 = automatic.  A plan that runs a faster kernel ignores it (it
     *  never makes a plan give one up); a plan that runs the portable
     *  kernel fails with ::MLA_STATUS_NOT_SUPPORTED if the device cannot
     *  run the value.  Default 0. */
    MLA_PARAM_NUM_KV_STAGES = 10,
    /** Hint for the portable kernel: keys per KV tile, 0 = automatic,
     *  else 32 or 64.  As ::MLA_PARAM_NUM_KV_STAGES, it never makes a
     *  plan give up a faster kernel.  Default 0. */
    MLA_PARAM_BLOCK_N = 11,
    /** Read-only: bytes of one cache row (one token of one KV head). */
    MLA_PARAM_KV_ROW_BYTES = 12,
    /** Read-only: fp32 block scales per cache row in the separate scale
     *  array (0 when there is none). */
    MLA_PARAM_SCALES_PER_ROW = 13,
    /** Softmax scale (float): 0 = automatic, 1/sqrt(head_dim_qk), or a
     *  value in [1e-30, 1e30].  Reading it returns the effective value.
     *  mla_plan_create() also requires the product of the effective
     *  softmax scale and the KV scale to lie in [1e-30, 1e30], so that
     *  it is a normal fp32 number on every backend.  Default 0. */
    MLA_PARAM_SOFTMAX_SCALE = 100,
    /** Per-tensor KV dequantization scale (float) for
     *  ::MLA_KV_FP8_E4M3, in [1e-30, 1e30] and applied as its nearest
     *  fp32 value; must be 1 for ::MLA_KV_BF16 and ::MLA_KV_FP8_DS_MLA.
     *  Default 1. */
    MLA_PARAM_KV_SCALE = 101,
    /** First value of the range reserved for the experimental parameters
     *  of mla_experimental.h (since 1.1).  What they mean is outside the
     *  interface this header describes and may change in any release. */
    MLA_PARAM_EXPERIMENTAL_FIRST = 0x10000,
    /** Last value of the experimental range. */
    MLA_PARAM_EXPERIMENTAL_LAST = 0x1ffff
} mla_param_t;

/**
 * @brief Create a config holding the defaults listed in ::mla_param_t.
 * @param[out] cfg Receives the new config; set to NULL on failure.
 * @return ::MLA_STATUS_SUCCESS, ::MLA_STATUS_INVALID_ARGUMENT (NULL
 *         @p cfg) or ::MLA_STATUS_OUT_OF_MEMORY.
 */
MLA_API mla_status_t mla_config_create(mla_config_t **cfg);

/**
 * @brief Destroy a config.  Plans made from it keep their own copy.
 * @param cfg Config, or NULL (no-op).
 */
MLA_API void mla_config_destroy(mla_config_t *cfg);

/**
 * @brief Create an independent copy of a config.
 * @param[out] dst Receives the copy; set to NULL on failure.
 * @param src      Config to copy.
 * @return ::MLA_STATUS_SUCCESS, ::MLA_STATUS_INVALID_ARGUMENT or
 *         ::MLA_STATUS_OUT_OF_MEMORY.
 */
MLA_API mla_status_t mla_config_copy(mla_config_t **dst, const mla_config_t *src);

/**
 * @brief Set an integer parameter.
 *
 * Each value is checked on its own here; combinations (h_kv dividing h_q,
 * a scale block size with a format) are checked by mla_plan_create().
 *
 * @param cfg   Config.
 * @param param An integer ::mla_param_t.
 * @param value New value.
 * @return ::MLA_STATUS_SUCCESS;
 *         ::MLA_STATUS_INVALID_ARGUMENT for a NULL @p cfg, an unknown,
 *         read-only or floating-point @p param, or an out-of-range value;
 *         ::MLA_STATUS_NOT_SUPPORTED for head dims other than 576/512.
 *         On failure the config is unchanged.
 */
MLA_API mla_status_t mla_config_set_int(mla_config_t *cfg, mla_param_t param, int64_t value);

/**
 * @brief Read an integer parameter (read-only ones included).
 * @param cfg        Config.
 * @param param      An integer ::mla_param_t.
 * @param[out] value Receives the value; untouched on failure.
 * @return ::MLA_STATUS_SUCCESS or ::MLA_STATUS_INVALID_ARGUMENT.
 */
MLA_API mla_status_t mla_config_get_int(const mla_config_t *cfg, mla_param_t param, int64_t *value);

/**
 * @brief Set a floating-point parameter (::MLA_PARAM_SOFTMAX_SCALE,
 *        ::MLA_PARAM_KV_SCALE).
 * @param cfg   Config.
 * @param param A floating-point ::mla_param_t.
 * @param value New value: softmax scale 0 or in [1e-30, 1e30], KV scale
 *              in [1e-30, 1e30] (NaN and infinities are refused).
 * @return ::MLA_STATUS_SUCCESS or ::MLA_STATUS_INVALID_ARGUMENT (the config
 *         is then unchanged).
 */
MLA_API mla_status_t mla_config_set_float(mla_config_t *cfg, mla_param_t param, double value);

/**
 * @brief Read a floating-point parameter (the effective softmax scale).
 * @param cfg        Config.
 * @param param      A floating-point ::mla_param_t.
 * @param[out] value Receives the value; untouched on failure.
 * @return ::MLA_STATUS_SUCCESS or ::MLA_STATUS_INVALID_ARGUMENT.
 */
MLA_API mla_status_t mla_config_get_float(const mla_config_t *cfg, mla_param_t param, double *value);

/**
 * @brief The calling thread's message about a config.
 *
 * As mla_context_last_error(), for the config calls: mla_config_copy()
 * (about @p src), mla_config_set_int(), mla_config_get_int(),
 * mla_config_set_float() and mla_config_get_float().
 *
 * @param cfg Config, or NULL.
 * @return A NUL-terminated string owned by the library: the message, or
 *         "" after a success, for a call about another handle, or for a
 *         NULL or invalid @p cfg.  Valid until the calling thread's next
 *         call into libmla.  Never NULL.
 */
MLA_API const char *mla_config_last_error(const mla_config_t *cfg);

/** @} */

/* ------------------------------------------------------------------ */
/** @defgroup plan Plans
 *  @{ */

/** Opaque pipeline state for one shape: kernel choice, split-KV schedule
 *  bounds and workspace layout. */
typedef struct mla_plan mla_plan_t;

/**
 * @brief Validate a config for a context and freeze it into a plan.
 *
 * The plan copies the config.  It fixes the batch size and the largest
 * sequence length that mla_decode() will accept; the actual lengths are
 * read on the device at each call, so one plan (and one captured CUDA
 * graph) serves every step whose lengths stay within @p max_seq_len.
 *
 * @param[out] plan   Receives the new plan; set to NULL on failure.
 * @param ctx         Context the plan runs on.
 * @param cfg         Config.
 * @param batch       Requests per decode call, 1..65535.
 * @param max_seq_len Largest cache length of any request, 1..2^24.
 * @return ::MLA_STATUS_SUCCESS; ::MLA_STATUS_INVALID_ARGUMENT (also when
 *         the effective softmax scale times the KV scale is outside
 *         [1e-30, 1e30]);
 *         ::MLA_STATUS_NOT_SUPPORTED for a combination the backend lacks
 *         (h_kv not dividing h_q, a scale block size with a format that
 *         has none, a portable-kernel hint the device cannot run);
 *         ::MLA_STATUS_OUT_OF_MEMORY.
 */
MLA_API mla_status_t mla_plan_create(mla_plan_t **plan, mla_context_t *ctx,
                                     const mla_config_t *cfg, int32_t batch,
                                     int32_t max_seq_len);

/**
 * @brief Destroy a plan.
 * @param plan Plan, or NULL (no-op).
 */
MLA_API void mla_plan_destroy(mla_plan_t *plan);

/**
 * @brief Bytes of workspace mla_decode() needs with this plan.
 *
 * The workspace is caller-owned memory of the plan's backend (device
 * memory on a CUDA context), 256-byte aligned, reused across calls; it
 * must not be used by two calls in flight at once.  It holds the split
 * schedule of the last mla_decode() or mla_schedule() and the status of
 * the last call (see mla_workspace_status()); it needs no initialization.
 * A call reads the schedule that the last one left before it writes its
 * own (to keep it when the lengths are unchanged), so compute-sanitizer's
 * initcheck reports the first call's reads of a workspace nothing has
 * written; set it once (cudaMemset) to run under that tool.
 *
 * @param plan       Plan.
 * @param[out] bytes Receives the size; never 0.
 * @return ::MLA_STATUS_SUCCESS or ::MLA_STATUS_INVALID_ARGUMENT.
 */
MLA_API mla_status_t mla_plan_workspace_size(const mla_plan_t *plan, size_t *bytes);

/** @} */

/* ------------------------------------------------------------------ */
/** @defgroup decode Decode and append
 *  @{ */

/**
 * @brief Compute MLA decode attention for one layer and one step.
 *
 * Shapes (batch b, q_len n, h_q heads, h_kv KV heads, page size P):
 *  - @p q: bf16 [b, n, h_q, 576], 16-byte aligned.  Query head h attends
 *    to KV head h / (h_q / h_kv).
 *  - @p kv_cache: [num_pages, P, h_kv, row] in the config's format, where
 *    row is MLA_PARAM_KV_ROW_BYTES bytes; 16-byte aligned.
 *  - @p kv_block_scales: fp32 [num_pages, P, h_kv, MLA_PARAM_SCALES_PER_ROW]
 *    for ::MLA_KV_FP8_E4M3 with a scale block size; NULL otherwise.  Scale
 *    j covers channels [j*g, (j+1)*g) of the row (the last block may be
 *    short).  Powers of two are applied exactly; other values are applied
 *    in fp32 and the product rounded to bf16.
 *  - @p block_table: int32 [b, max_pages_per_seq]; logical page p of
 *    request i is physical page block_table[i * max_pages_per_seq + p].
 *  - @p seq_lens: int32 [b], the cache length of each request (the new
 *    tokens included), 0..min(max_seq_len, max_pages_per_seq * P).
 *  - @p out: bf16 [b, n, h_q, 512], 16-byte aligned.
 *  - @p lse: NULL, or fp32 [b, h_q, n]: natural-log sum of exp of the
 *    scaled scores of each query row.
 *
 * Semantics: scores are softmax_scale * kv_scale * q . k over 576 dims;
 * causal masking (if configured and n > 1) is bottom-right aligned; a row
 * that sees no key (length 0, or causal with len < n) gets output 0 and
 * LSE +inf.  Cache rows at or past a request's length, page tails
 * included, are never read into the result, whatever they hold.
 *
 * Non-finite values: NaN and +-Inf inside a request's length (in q, in a
 * cache row a query row sees, nope or RoPE, or in its block scales) reach
 * that row's output and LSE as the fp64 evaluation
 *   out = sum_t w_t v_t / sum_t w_t,  w_t = exp(s_t - M),
 *   lse = M + log(sum_t w_t),  M = the largest non-NaN score s_t,
 * over the keys the row sees, would have them: a NaN score, or an infinite
 * M (a +Inf score, or every score -Inf), makes the whole row NaN, output
 * and LSE; a -Inf score gives its key weight 0, and 0 * Inf or NaN in that
 * key's V row makes that output element NaN.  A row that meets NaN or Inf
 * never passes for one without keys: output 0 and LSE +inf mean only that
 * the mask left it no key.  Rows past the length never affect a row, nor
 * do keys a causal row does not see (the last q_len - 1 of its request at
 * most), with one exception: the GPU kernels meet those keys' V rows with
 * weight 0 inside their matrix products, so a NaN or Inf there may make
 * that output element NaN (whether it does depends on the kernel; the CPU
 * backend never does).
 *
 * Aliasing: out, lse and the workspace's first mla_plan_workspace_size()
 * bytes are written and must not overlap each other or q, kv_cache,
 * kv_block_scales, block_table ([b, max_pages_per_seq] int32) or seq_lens;
 * the call fails with ::MLA_STATUS_INVALID_ARGUMENT otherwise.
 *
 * Validation: host-side arguments are checked before anything is queued.
 * Device-resident values (lengths, block-table entries) are checked on the
 * device before any output is written; if one is out of bounds the call
 * writes no output at all and records ::MLA_STATUS_OUT_OF_BOUNDS in the
 * workspace, readable with mla_workspace_status().  The CPU backend
 * checks them on the host and returns the status directly; it reads each
 * length and each block-table entry it uses once, and computes from that
 * checked copy, so a value changed during the call cannot take it out of
 * bounds.
 *
 * The keys of the step are split into pieces of equal cost whatever the
 * mix of lengths, so that every multiprocessor gets an equal share; the
 * split is made on the device from @p seq_lens.  It depends on the
 * lengths and the plan's layout alone, so a call whose lengths are the
 * ones the split already in @p workspace was made for (by a call of a
 * plan of the same layout, see mla_schedule()) keeps that split and only
 * checks the block table again: a decode step that calls mla_decode()
 * once per layer with one workspace makes the split at its first layer.
 * mla_schedule() once per step followed by mla_decode_scheduled() per
 * layer makes it once whatever the workspace held; mla_decode() is
 * mla_schedule() followed by mla_decode_scheduled() on the same stream.
 *
 * The call never allocates and never synchronizes; it is capturable into
 * a CUDA graph, and a replayed graph follows the lengths then in
 * @p seq_lens.
 *
 * @param plan              Plan.
 * @param q                 Queries.
 * @param kv_cache          Paged cache.
 * @param kv_block_scales   Block scales, or NULL.
 * @param num_pages         Pages in @p kv_cache (and @p kv_block_scales).
 * @param block_table       Block table.
 * @param max_pages_per_seq Row stride of @p block_table, >= 1.
 * @param seq_lens          Sequence lengths.
 * @param out               Output.
 * @param lse               LSE output, or NULL.
 * @param workspace         Workspace of mla_plan_workspace_size() bytes.
 * @param workspace_size    Its size in bytes.
 * @param stream            CUDA stream, or NULL; ignored on the CPU.
 * @return ::MLA_STATUS_SUCCESS once queued (CPU: once done);
 *         ::MLA_STATUS_INVALID_ARGUMENT (also for overlapping buffers);
 *         ::MLA_STATUS_MISALIGNED;
 *         ::MLA_STATUS_SIZE_MISMATCH (workspace too small);
 *         ::MLA_STATUS_OUT_OF_BOUNDS (CPU backend);
 *         ::MLA_STATUS_OUT_OF_MEMORY (CPU backend, whose worker threads
 *         take host scratch memory; the CUDA path never allocates);
 *         ::MLA_STATUS_CUDA_ERROR if a launch failed (the call's kernels
 *         queued before it still run: the schedule writes the workspace,
 *         and where the combine's launch failed the decode has written
 *         the rows of requests it did not split).
 */
MLA_API mla_status_t mla_decode(mla_plan_t *plan, const void *q, const void *kv_cache,
                                const float *kv_block_scales, int64_t num_pages,
                                const int32_t *block_table, int32_t max_pages_per_seq,
                                const int32_t *seq_lens, void *out, float *lse,
                                void *workspace, size_t workspace_size,
                                struct CUstream_st *stream);

/**
 * @brief Check the lengths and block table of one decode step and split
 *        its keys into pieces of equal cost, for the mla_decode_scheduled()
 *        calls of that step (since 1.1).
 *
 * This is the first half of mla_decode(): it reads @p seq_lens once on the
 * device, checks every length and the block-table entries it uses (as
 * mla_decode() does), keeps the lengths and writes the split schedule
 * into @p workspace.  Every mla_decode_scheduled() that then uses the
 * workspace follows this schedule, so an engine calls mla_schedule() once
 * per decode step and mla_decode_scheduled() once per layer, instead of
 * mla_decode() once per layer.
 *
 * Reuse rule: the schedule serves any plan whose schedules are laid out
 * alike (plans made from equal configs with the same batch and
 * max_seq_len on the same context, e.g. the layers of one model), for
 * decodes with the same @p block_table pointer, @p max_pages_per_seq and
 * @p num_pages, until the workspace is used by another mla_schedule() or
 * mla_decode().  The lengths are the ones read here, whatever
 * @p seq_lens holds later; the block-table entries are read again by each
 * decode and must not change in between (if they do, reads stay inside
 * the cache but the result is undefined).  The decodes must be ordered
 * after this call (the same stream, or events).
 *
 * Bad lengths or block-table entries are recorded in the workspace
 * (::MLA_STATUS_OUT_OF_BOUNDS, readable with mla_workspace_status()); the
 * decodes that use that schedule then write nothing.  The CPU backend
 * checks them here and returns the status directly.  Never allocates or
 * synchronizes; capturable into a CUDA graph.
 *
 * @param plan              Plan.
 * @param num_pages         Pages in the cache the decodes will read.
 * @param block_table       Block table, as in mla_decode().
 * @param max_pages_per_seq Row stride of @p block_table, >= 1.
 * @param seq_lens          Sequence lengths, as in mla_decode().
 * @param workspace         Workspace of mla_plan_workspace_size() bytes.
 * @param workspace_size    Its size in bytes.
 * @param stream            CUDA stream, or NULL; ignored on the CPU.
 * @return ::MLA_STATUS_SUCCESS once queued (CPU: once done);
 *         ::MLA_STATUS_INVALID_ARGUMENT; ::MLA_STATUS_MISALIGNED;
 *         ::MLA_STATUS_SIZE_MISMATCH (workspace too small);
 *         ::MLA_STATUS_OUT_OF_BOUNDS (CPU backend);
 *         ::MLA_STATUS_CUDA_ERROR if a launch failed.
 */
MLA_API mla_status_t mla_schedule(mla_plan_t *plan, int64_t num_pages,
                                  const int32_t *block_table, int32_t max_pages_per_seq,
                                  const int32_t *seq_lens, void *workspace,
                                  size_t workspace_size, struct CUstream_st *stream);

/**
 * @brief Compute MLA decode attention for one layer with the schedule an
 *        earlier mla_schedule() left in @p workspace (since 1.1).
 *
 * The second half of mla_decode(): the same arguments and results, but
 * no @p seq_lens (the schedule's lengths are used) and no split
 * computation.  @p num_pages, @p block_table and @p max_pages_per_seq must
 * be the ones the schedule was made for (see mla_schedule()'s reuse
 * rule).  If the workspace holds this plan layout's schedule made for
 * other block-table arguments, the call writes no output and records
 * ::MLA_STATUS_INVALID_ARGUMENT in the workspace; if it holds no schedule
 * of this layout (never scheduled, another plan layout), the call writes
 * nothing and mla_workspace_status() fails with
 * ::MLA_STATUS_INVALID_ARGUMENT; if the schedule recorded bad input it
 * writes no output and the status stays ::MLA_STATUS_OUT_OF_BOUNDS (the
 * CPU backend returns these statuses).  Either way no decode runs on
 * that workspace until the next mla_schedule() or mla_decode().
 *
 * @param plan              Plan.
 * @param q                 Queries, as in mla_decode().
 * @param kv_cache          Paged cache.
 * @param kv_block_scales   Block scales, or NULL.
 * @param num_pages         Pages in @p kv_cache.
 * @param block_table       Block table.
 * @param max_pages_per_seq Row stride of @p block_table.
 * @param out               Output.
 * @param lse               LSE output, or NULL.
 * @param workspace         Workspace holding the step's schedule.
 * @param workspace_size    Its size in bytes.
 * @param stream            CUDA stream, or NULL; ignored on the CPU.
 * @return ::MLA_STATUS_SUCCESS once queued (CPU: once done);
 *         ::MLA_STATUS_INVALID_ARGUMENT; ::MLA_STATUS_MISALIGNED;
 *         ::MLA_STATUS_SIZE_MISMATCH; ::MLA_STATUS_OUT_OF_BOUNDS (CPU
 *         backend); ::MLA_STATUS_OUT_OF_MEMORY (CPU backend);
 *         ::MLA_STATUS_CUDA_ERROR if a launch failed (as in mla_decode(),
 *         a decode queued before a failed combine still writes the rows
 *         of requests it did not split).
 */
MLA_API mla_status_t mla_decode_scheduled(mla_plan_t *plan, const void *q, const void *kv_cache,
                                          const float *kv_block_scales, int64_t num_pages,
                                          const int32_t *block_table, int32_t max_pages_per_seq,
                                          void *out, float *lse, void *workspace,
                                          size_t workspace_size, struct CUstream_st *stream);

/**
 * @brief Read the device-side verdict recorded in a workspace by the last
 *        mla_decode(), mla_schedule() or mla_decode_scheduled() that used
 *        it.
 *
 * Calls that fail on the host (any status other than
 * ::MLA_STATUS_SUCCESS, except the CPU backend's ::MLA_STATUS_OUT_OF_BOUNDS
 * and ::MLA_STATUS_INVALID_ARGUMENT from mla_decode_scheduled()) write
 * nothing to the workspace, so the verdict stays the last one recorded.
 * This call synchronizes with the device (it copies a few bytes back);
 * use it in tests and error paths, not per step.
 *
 * @param plan               Plan the workspace was used with (or a plan of
 *                           the same layout; see mla_schedule()).
 * @param workspace          Workspace.
 * @param[out] device_status Receives ::MLA_STATUS_SUCCESS,
 *                           ::MLA_STATUS_OUT_OF_BOUNDS (bad lengths or
 *                           block-table entries) or
 *                           ::MLA_STATUS_INVALID_ARGUMENT (an
 *                           mla_decode_scheduled() without a matching
 *                           schedule).
 * @return ::MLA_STATUS_SUCCESS if the verdict was read;
 *         ::MLA_STATUS_INVALID_ARGUMENT (also when no call of a plan of
 *         this layout has used the workspace); ::MLA_STATUS_MISALIGNED
 *         (workspace not 256-byte aligned); ::MLA_STATUS_CUDA_ERROR.
 */
MLA_API mla_status_t mla_workspace_status(const mla_plan_t *plan, const void *workspace,
                                          mla_status_t *device_status);

/**
 * @brief Write new latent rows into the paged cache, quantizing them to
 *        the config's format.
 *
 * Row i of @p latent (bf16 [n, h_kv, 576], 16-byte aligned) goes to cache
 * slot @p slots[i] (int64; slot = page * page_size + offset).  A negative
 * slot marks padding and is skipped.  Two rows naming the same slot leave
 * that slot undefined.  The cache and the block scales (over num_pages
 * pages) are written and must not overlap each other, @p latent or
 * @p slots ([n] int64); the call fails with ::MLA_STATUS_INVALID_ARGUMENT
 * otherwise.
 *
 * Quantization (FP8 formats), with kv_scale as its fp32 value: for each
 * group of channels sharing a block scale (each block of
 * MLA_PARAM_SCALE_BLOCK_SIZE channels; 128 nope channels for
 * ::MLA_KV_FP8_DS_MLA), amax is the largest magnitude among the group's
 * finite values (NaN and +-Inf do not count), and the block scale s is
 * the smallest power of two that fp32 represents, 2^-149 (subnormal) to
 * 2^127, with amax <= 448 * kv_scale * s, computed exactly; 2^127 if none
 * is large enough; 1 when amax is 0 (a group of zeros, NaN and Inf).
 * Without block scales s is 1.  Each value is stored as
 * e4m3(x / (kv_scale * s)), the exact quotient rounded once to nearest
 * even and saturated to +-448, +-Inf included; NaN is stored as NaN
 * (0x7f).  DS_MLA RoPE values are copied as bf16.  The GPU and CPU
 * backends produce identical bytes, whatever the host's floating-point
 * mode (flush-to-zero, denormals-are-zero).
 *
 * @param ctx             Context whose backend owns the buffers.
 * @param cfg             Config giving format, page size, h_kv and scales.
 * @param kv_cache        Paged cache, as in mla_decode().
 * @param kv_block_scales Block scales, as in mla_decode(), or NULL.
 * @param num_pages       Pages in the cache.
 * @param latent          New rows.
 * @param slots           Destination slots, int64 [n].
 * @param n               Number of rows, >= 0.
 * @param stream          CUDA stream, or NULL; ignored on the CPU.
 * @return ::MLA_STATUS_SUCCESS; ::MLA_STATUS_INVALID_ARGUMENT;
 *         ::MLA_STATUS_MISALIGNED; ::MLA_STATUS_NOT_SUPPORTED;
 *         ::MLA_STATUS_OUT_OF_BOUNDS (CPU: a slot past the cache, nothing
 *         written; CUDA: such rows are skipped, since slots live on the
 *         device); ::MLA_STATUS_CUDA_ERROR (a call of more than 2^31 - 1
 *         rows is several launches, and those queued before the failed
 *         one still write their rows).
 */
MLA_API mla_status_t mla_kv_append(mla_context_t *ctx, const mla_config_t *cfg,
                                   void *kv_cache, float *kv_block_scales, int64_t num_pages,
                                   const void *latent, const int64_t *slots, int64_t n,
                                   struct CUstream_st *stream);

/** @} */

#ifdef __cplusplus
}
#endif

#endif /* MLA_H */
