/* cpu_harness.h - what the files of test_cpu share: independent fp64
 * formulas for the BF16 and e4m3 codes, configs and contexts of the CPU
 * backend, and decode problems with their fp64 reference and comparison.
 * SPDX-License-Identifier: MIT */
#ifndef MLA_TESTS_CPU_HARNESS_H
#define MLA_TESTS_CPU_HARNESS_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "mla.h"

double rnd_sym(double amp); /* [-amp, amp) */

/* Independent formulas (no bit tricks shared with the codec). */
double ref_e4m3(uint8_t c);
double ref_bf16(uint16_t h);
uint16_t rd16(const uint8_t *p);
float rdf(const uint8_t *p);
int is_pow2(double s);
void *xalloc(size_t bytes);

/* ck_assert* record a checkpoint even when they pass (a write to a pipe
 * in fork mode), too slow for per-element checks: test, then abort. */
#define REQUIRE(cond, ...)                  \
    do {                                    \
        if (!(cond))                        \
            ck_abort_msg(__VA_ARGS__);      \
    } while (0)

#define ST_OK(call)                                                                     \
    do {                                                                                \
        mla_status_t st_ = (call);                                                      \
        REQUIRE(st_ == MLA_STATUS_SUCCESS, "%s -> %s", #call, mla_status_string(st_));  \
    } while (0)

/* Every KV format, E4M3 with and without block scales. */
struct fmt_case {
    int fmt, g;
};

#define NFMTS 6
extern const struct fmt_case FMTS[NFMTS];

const char *fmt_name(int fmt);
int row_bytes_of(int fmt);
int spr_of(int fmt, int g);
mla_config_t *make_config(int h_q, int h_kv, int q_len, int fmt, int g, int ps, int causal,
                          double kv_scale, double softmax_scale);
mla_context_t *make_cpu_context(void);

/* Decode problems: setup, independent reference, comparison. */
struct dcase {
    int h_q, h_kv, q_len, batch, ps, fmt, g, causal;
    int len_cap; /* longest length drawn */
};

struct dsetup {
    struct dcase c;
    mla_context_t *ctx;
    mla_config_t *cfg;
    mla_plan_t *plan;
    int32_t max_seq_len, mpps;
    int64_t num_pages;
    int32_t *lens, *bt;
    uint8_t *kv;
    size_t kv_bytes;
    float *scales;
    size_t scales_count;
    uint16_t *q, *out;
    float *lse;
    size_t out_bytes, lse_bytes;
    void *ws;
    size_t ws_bytes;
    double kv_scale; /* as the library applies it: rounded to fp32 */
    double sm_scale;
    int rb, spr;
};

void setup_build(struct dsetup *d, const struct dcase *c, int threads, uint64_t salt,
                 const int32_t *lens);
void setup_free(struct dsetup *d);
mla_status_t run_decode(struct dsetup *d, int with_lse);
void ref_decode(const struct dsetup *d, double *ref_out, double *ref_lse);
void compare(const struct dsetup *d, int with_lse);

/* Each file's test cases, added to the suite in its order. */
void add_codec_cases(Suite *s);
void add_append_cases(Suite *s);
void add_decode_cases(Suite *s);
void add_long_cases(Suite *s);

#endif /* MLA_TESTS_CPU_HARNESS_H */
