/* gpu_harness.h - what the files of test_gpu share: the contexts and the
 * stream, the watchdog, the per-test arena of host and device allocations,
 * the KV formats and case descriptions, problem building on the host and
 * the device, and the comparison with the CPU backend.
 * SPDX-License-Identifier: MIT */
#ifndef MLA_TESTS_GPU_HARNESS_H
#define MLA_TESTS_GPU_HARNESS_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "../tools/devmem.h"
#include "mla.h"

extern mla_context_t *g_gpu, *g_cpu;
extern devmem_stream g_stream;
extern int g_quick;           /* MLA_TEST_QUICK: the small subset */
extern int g_hopper;          /* sm_90 device and an sm_90a build: the wgmma kernel exists */
extern unsigned g_watchdog_s; /* MLA_TEST_WATCHDOG: seconds per test, 0: off */
extern int g_san_calls;       /* calls per sanitizer shape (MLA_TEST_SANITIZE) */

double now_s(void);
/* Watches the test named what (#index where index >= 0): the program
 * exits with 124 if it runs past g_watchdog_s seconds. */
void watchdog(const char *what, int index);

/* The running test's host and device allocations, plans and configs, all
 * freed by arena_reset() (at each test's start and end). */
void arena_reset(void);
void *halloc(size_t bytes);
devmem_ptr dalloc(size_t bytes);
void keep_plan(mla_plan_t *p);

#define DPTR(d) ((void *)(uintptr_t)(d))

/* ck_assert* is slow per element; test, then abort with a message. */
#define REQUIRE(cond, ...)             \
    do {                               \
        if (!(cond))                   \
            ck_abort_msg(__VA_ARGS__); \
    } while (0)

#define ST_OK(ctx, call)                                                                   \
    do {                                                                                   \
        mla_status_t st_ = (call);                                                         \
        REQUIRE(st_ == MLA_STATUS_SUCCESS, "%s -> %s: %s", #call, mla_status_string(st_),  \
                mla_context_last_error(ctx));                                              \
    } while (0)

#define DM_OK(call) REQUIRE((call) == 0, "%s: %s", #call, devmem_last_error())

struct fmode {
    const char *name;
    int fmt, g;
    double ks;
};

/* The KV formats of the decode tests, in the order of the M_ names. */
#define NMODES 6
extern const struct fmode modes[NMODES];
enum { M_BF16, M_E4M3, M_G32, M_G64, M_G128, M_DSMLA };

#define MAX_BATCH 64

struct kcase {
    char name[128];
    int h_q, h_kv, q_len, mode, page, causal, block_n, stages;
    int batch;
    int32_t lens[MAX_BATCH];
    int max_seq_len;       /* plan bound; 0 = the longest length */
    int sample;            /* requests checked on the CPU; 0 = all */
    int no_lse;
    double softmax_scale;  /* 0 = default */
    double q_scale;        /* Q values times this (0 = 1) */
    double kv_mul;         /* latent values times this (0 = 1) ... */
    double kv_tail_mul;    /* ... and from half of each length on, times this too */
    int null_stream;       /* decode on the legacy stream */
    const char *kernel;    /* MLA_XPARAM_KERNEL of the plan, by name; NULL = auto */
    /* With may_nan: request may_nan_req's last key holds NaN in V dim
     * may_nan_dim, and the causal rows that do not see it may have NaN
     * there where the reference is finite (mla.h: kernel-dependent). */
    int may_nan, may_nan_req, may_nan_dim;
};

/* Clears *c and sets its shape: batch lengths from lens (NULL: zeros). */
void kcase_shape(struct kcase *c, int h_q, int h_kv, int q_len, int mode, int page, int causal,
                 int batch, const int32_t *lens);

/* A problem: inputs on the host and the device (build_problem). */
struct prob {
    const struct kcase *c;
    mla_config_t *cfg;
    int row_bytes, spr;
    int max_len;
    int32_t mpps; /* max_pages_per_seq */
    int64_t num_pages;
    size_t kv_bytes, sc_bytes, q_elems, out_elems, lse_elems;
    uint8_t *kv;
    float *sc;
    uint16_t *q;
    int32_t *bt;
    int32_t lens[MAX_BATCH];
    devmem_ptr d_kv, d_sc, d_q, d_bt, d_lens, d_out, d_lse;
};

mla_config_t *make_cfg(int h_q, int h_kv, int q_len, const struct fmode *m, int page, int causal,
                       int block_n, int stages, double softmax_scale);
void cfg_geometry(const mla_config_t *cfg, int *row_bytes, int *spr);
void build_problem(struct prob *p, const struct kcase *c, const int32_t *fill_len,
                   int mpps_override);
long check_against_cpu(const struct prob *p, const int32_t *lens, int max_seq_len,
                       const uint16_t *gout, const float *glse, const char *label);
mla_plan_t *gpu_plan(const struct prob *p, int max_seq_len);
/* mla_decode of p's device inputs into its outputs (lse unless the case
 * has no_lse); mla_decode_scheduled of them with block table bt. */
mla_status_t prob_decode(mla_plan_t *plan, const struct prob *p, devmem_ptr ws, size_t ws_bytes,
                         devmem_stream stream);
mla_status_t prob_decode_scheduled(mla_plan_t *plan, const struct prob *p, devmem_ptr bt,
                                   devmem_ptr ws, size_t ws_bytes, devmem_stream stream);
devmem_ptr gpu_workspace(mla_plan_t *plan, size_t *bytes);
int all_ff(const void *buf, size_t n);

/* The case tables, built once the device is known. */
void build_cases(void);
void build_nf_cases(void);
void build_san_cases(void);

/* Each file's test cases, added to the suite in its order. */
void add_sanitize_cases(Suite *s);
void add_decode_cases(Suite *s);
void add_nonfinite_cases(Suite *s);
void add_schedule_cases(Suite *s);
void add_validation_cases(Suite *s);
void add_append_cases(Suite *s);

#endif /* MLA_TESTS_GPU_HARNESS_H */
