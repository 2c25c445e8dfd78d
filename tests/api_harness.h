/* api_harness.h - what the files of test_api share: configs made and read
 * back under check's assertions, and a small valid CPU problem whose
 * buffers the tests break one at a time.
 * SPDX-License-Identifier: MIT */
#ifndef MLA_TESTS_API_HARNESS_H
#define MLA_TESTS_API_HARNESS_H

#include <check.h>
#include <stddef.h>
#include <stdint.h>

#include "mla.h"

mla_config_t *new_config(void);
int64_t geti(const mla_config_t *cfg, mla_param_t p);

/* A small valid CPU problem whose buffers the tests break one at a time. */
struct fixture {
    mla_context_t *ctx;
    mla_config_t *cfg;
    mla_plan_t *plan;
    uint16_t *q;
    uint8_t *kv;
    float *scales;
    int32_t table[4];
    int32_t lens[2];
    uint16_t *out;
    float lse[2 * 16];
    void *ws;
    size_t ws_size;
};

enum { FX_HEADS = 16, FX_BATCH = 2, FX_PAGES = 4, FX_PAGE = 16 };

void fx_init(struct fixture *f, int fp8_blockwise);
void fx_fini(struct fixture *f);

/* Each file's tests, added to the suite's one test case in its order. */
void add_config_tests(TCase *tc);
void add_decode_tests(TCase *tc);

#endif /* MLA_TESTS_API_HARNESS_H */
