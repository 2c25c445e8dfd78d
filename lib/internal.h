/*
 * internal.h - private structures and cross-module functions of libmla.
 * Nothing here is exported; internal helpers use the mla__ prefix.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_INTERNAL_H
#define MLA_INTERNAL_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include "mla.h"
#include "mla_experimental.h"

#define MLA_ERRMSG_LEN 512

/* Bytes of one bf16 q or latent row (576 dims) and of one output row (512). */
#define MLA_D_QK_BYTES 1152u
#define MLA_D_V_BYTES 1024u

/* Handle magics: a wrong or freed handle is reported, not dereferenced
 * further than its first word. */
#define MLA_MAGIC_CONTEXT 0x4d4c4143u /* "MLAC" */
#define MLA_MAGIC_CONFIG 0x4d4c4146u  /* "MLAF" */
#define MLA_MAGIC_PLAN 0x4d4c4150u    /* "MLAP" */
#define MLA_MAGIC_DEAD 0xdeadbeefu

/* The validated shape carried by configs and plans. */
struct mla_shape {
    int32_t num_heads;     /* h_q */
    int32_t num_kv_heads;  /* h_kv */
    int32_t q_len;
    int32_t head_dim_qk;   /* 576 */
    int32_t head_dim_v;    /* 512 */
    int32_t kv_format;     /* mla_kv_format_t */
    int32_t page_size;
    int32_t scale_block;   /* 0, 32, 64, 128 */
    int32_t causal;
    int32_t num_kv_stages; /* 0 = auto */
    int32_t block_n;       /* 0 = auto */
    int32_t kernel;        /* MLA_XPARAM_KERNEL: an mla_xkernel_t */
    int32_t cpu_threads;   /* MLA_XPARAM_CPU_THREADS: 0 = auto */
    double softmax_scale;  /* 0 = auto */
    double kv_scale;
};

struct mla_config {
    uint32_t magic;
    uint64_t serial; /* mla__new_serial(): this config among all made */
    struct mla_shape s;
};

enum mla_backend { MLA_BACKEND_CPU = 0, MLA_BACKEND_CUDA = 1 };

struct mla_gpu_context; /* lib/cuda/gpu_context.c */
struct mla_gpu_plan;    /* lib/cuda/gpu_plan.c */

struct mla_context {
    uint32_t magic;
    uint64_t serial;             /* mla__new_serial(): this context among all made */
    int device;                  /* ordinal, or MLA_DEVICE_CPU */
    enum mla_backend backend;
    int cpu_threads;             /* CPU backend threads by default: online processors */
    struct mla_gpu_context *gpu; /* NULL on the CPU backend */
};

struct mla_plan {
    uint32_t magic;
    mla_context_t *ctx;
    struct mla_shape s;
    int32_t batch;
    int32_t max_seq_len;
    size_t workspace_bytes;
    uint32_t sched_tag;          /* mla_ws_header.plan_tag of this plan's schedules */
    int32_t sched_ctas;          /* scheduler CTAs (flag bytes 1.. in the header) */
    int cpu_threads;             /* threads of a CPU backend decode */
    struct mla_gpu_plan *gpu;    /* NULL on the CPU backend */
};

/* Arguments of one decode or schedule call, after host-side validation
 * (a schedule has no tensors, mla_decode_scheduled no seq_lens). */
struct mla_decode_args {
    const void *q;
    const void *kv;
    const float *scales;
    int64_t num_pages;
    const int32_t *block_table;
    int32_t max_pages_per_seq;
    const int32_t *seq_lens;
    void *out;
    float *lse;
    void *workspace;
    size_t workspace_size;
    struct CUstream_st *stream;
};

/* Arguments of one append call, after host-side validation. */
struct mla_append_args {
    void *kv;
    float *scales;
    int64_t num_pages;
    const void *latent;
    const int64_t *slots;
    int64_t n;
    struct CUstream_st *stream;
};

/* ---- errors (lib/error.c) ---- */
/* Per-thread messages.  Every public function that returns a status
 * starts with mla__enter("its name"), which clears the calling thread's
 * message, then names the context or config the call concerns with
 * mla__bind() once that handle is known to be valid.  mla__error() writes
 * "name: text" for this thread only and returns status.  A handle is its
 * address and its serial, so that a new object at a freed one's address
 * is another handle in every thread. */
void mla__enter(const char *func);
void mla__bind(const void *handle, uint64_t serial);
mla_status_t mla__error(mla_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* This thread's message if its last call concerned the handle (any
 * handle when NULL), else "". */
const char *mla__message(const void *handle, uint64_t serial);
/* A serial no context or config had before (never 0). */
uint64_t mla__new_serial(void);
/* Format a message into buf (MLA_ERRMSG_LEN, may be NULL); return status. */
mla_status_t mla__fail(char *buf, mla_status_t status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* ---- caller buffers (lib/buffers.c) ---- */
struct mla_buf {
    const void *p;  /* NULL: absent, not checked */
    uint64_t bytes; /* extent the call reads or writes */
    const char *name;
};
/* INVALID_ARGUMENT when a buffer runs past the
 * end of the address space, or an output overlaps an input or another
 * output. */
mla_status_t mla__check_buffers(const struct mla_buf *out, int nout, const struct mla_buf *in,
                                int nin);

/* ---- handle arguments (lib/plan.c) ---- */
/* 1 for a valid context (bound as the message's handle), else 0 with a
 * message naming the argument. */
int mla__context_arg(const mla_context_t *ctx, const char *name);
/* 1 for a valid plan on a live context (the context is bound). */
int mla__plan_arg(const mla_plan_t *plan);
/* 1 for a valid config, else 0 with a message naming the argument; binds
 * nothing (lib/config.c). */
int mla__config_valid(const mla_config_t *cfg, const char *name);

/* ---- shape helpers (lib/config.c) ---- */
void mla__shape_defaults(struct mla_shape *s);
/* Checks combinations; leaves a message on failure. */
mla_status_t mla__shape_validate(const struct mla_shape *s);
/* Bounds of MLA_PARAM_SOFTMAX_SCALE (when not 0), MLA_PARAM_KV_SCALE and
 * of their product, which the GPU kernels apply as one fp32 factor. */
#define MLA_SCALE_MIN 1e-30
#define MLA_SCALE_MAX 1e30
/* Bound of MLA_XPARAM_CPU_THREADS and of the automatic thread count. */
#define MLA_MAX_CPU_THREADS 256
/* The product of the effective softmax scale and the KV scale is within
 * those bounds (decode only); leaves a message on failure. */
mla_status_t mla__scores_validate(const struct mla_shape *s);
/* MLA_PARAM_NUM_HEADS, MLA_XPARAM_KERNEL etc.; "param" for a value that
 * names none. */
const char *mla__param_name(mla_param_t param);
int32_t mla__row_bytes(const struct mla_shape *s);
int32_t mla__scales_per_row(const struct mla_shape *s);
double mla__softmax_scale(const struct mla_shape *s);

/* ---- CPU backend (lib/cpu/cpu_decode.c, lib/cpu/cpu_append.c) ---- */
/* Lengths and block-table entries are validated here, before any write;
 * each call leaves the workspace header (kernels/common/mla_params.h) as the GPU
 * backend does. */
mla_status_t mla__cpu_decode(const mla_plan_t *plan, const struct mla_decode_args *a);
mla_status_t mla__cpu_schedule(const mla_plan_t *plan, const struct mla_decode_args *a);
mla_status_t mla__cpu_decode_scheduled(const mla_plan_t *plan, const struct mla_decode_args *a);
uint32_t mla__cpu_sched_tag(const mla_plan_t *plan);
mla_status_t mla__cpu_append(const struct mla_shape *s, int threads,
                             const struct mla_append_args *a);
size_t mla__cpu_workspace_bytes(const struct mla_shape *s, int32_t batch, int32_t max_seq_len);

/* ---- CUDA backend (lib/cuda/gpu_*.c; lib/cuda/no_gpu.c when built without CUDA) ---- */
mla_status_t mla__gpu_context_init(mla_context_t *ctx, int device);
void mla__gpu_context_fini(mla_context_t *ctx);
mla_status_t mla__gpu_plan_init(mla_plan_t *plan);
void mla__gpu_plan_fini(mla_plan_t *plan);
/* Steps of mla__gpu_decode: the schedule kernel, the decode and combine. */
#define MLA_GPU_STEP_SCHEDULE 1
#define MLA_GPU_STEP_DECODE 2
mla_status_t mla__gpu_decode(mla_plan_t *plan, const struct mla_decode_args *a, int steps);
mla_status_t mla__gpu_append(mla_context_t *ctx, const struct mla_shape *s,
                             const struct mla_append_args *a);
/* Waits for the context's work, then copies the workspace header's
 * MLA_WS_HEADER_BYTES back into buf. */
mla_status_t mla__gpu_read_header(const mla_plan_t *plan, const void *workspace, void *buf);
/* Space-separated SM targets embedded, e.g. "sm_90a,sm_100a"; "" if none. */
const char *mla__gpu_archs(void);

#endif /* MLA_INTERNAL_H */
