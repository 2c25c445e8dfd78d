/* api_harness.c - test_api's configs and its CPU fixture: a context, a
 * plan and buffers of a small valid problem, filled with known bytes.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "api_harness.h"
#include "mla.h"

mla_config_t *new_config(void)
{
    mla_config_t *cfg = NULL;
    ck_assert_int_eq(mla_config_create(&cfg), MLA_STATUS_SUCCESS);
    ck_assert_ptr_nonnull(cfg);
    return cfg;
}

int64_t geti(const mla_config_t *cfg, mla_param_t p)
{
    int64_t v = -12345;
    ck_assert_int_eq(mla_config_get_int(cfg, p, &v), MLA_STATUS_SUCCESS);
    return v;
}

void fx_init(struct fixture *f, int fp8_blockwise)
{
    memset(f, 0, sizeof(*f));
    ck_assert_int_eq(mla_context_create(&f->ctx, MLA_DEVICE_CPU), 0);
    f->cfg = new_config();
    ck_assert_int_eq(mla_config_set_int(f->cfg, MLA_PARAM_NUM_HEADS, FX_HEADS), 0);
    ck_assert_int_eq(mla_config_set_int(f->cfg, MLA_PARAM_PAGE_SIZE, FX_PAGE), 0);
    if (fp8_blockwise) {
        ck_assert_int_eq(mla_config_set_int(f->cfg, MLA_PARAM_KV_FORMAT, MLA_KV_FP8_E4M3), 0);
        ck_assert_int_eq(mla_config_set_int(f->cfg, MLA_PARAM_SCALE_BLOCK_SIZE, 64), 0);
    }
    ck_assert_int_eq(mla_plan_create(&f->plan, f->ctx, f->cfg, FX_BATCH, 32), 0);
    ck_assert_int_eq(mla_plan_workspace_size(f->plan, &f->ws_size), 0);
    f->q = aligned_alloc(64, FX_BATCH * FX_HEADS * 576 * 2);
    f->kv = aligned_alloc(64, FX_PAGES * FX_PAGE * 1152);
    f->scales = aligned_alloc(64, FX_PAGES * FX_PAGE * 9 * sizeof(float));
    f->out = aligned_alloc(64, FX_BATCH * FX_HEADS * 512 * 2);
    f->ws = aligned_alloc(256, (f->ws_size + 255) / 256 * 256);
    ck_assert(f->q && f->kv && f->scales && f->out && f->ws);
    for (int i = 0; i < FX_BATCH * FX_HEADS * 576; i++)
        f->q[i] = 0x3c00; /* bf16 0.0078125 */
    memset(f->kv, 0x3c, FX_PAGES * FX_PAGE * 1152);
    for (int i = 0; i < FX_PAGES * FX_PAGE * 9; i++)
        f->scales[i] = 1.0f;
    f->table[0] = 3; f->table[1] = 1; f->table[2] = 0; f->table[3] = 2;
    f->lens[0] = 20; f->lens[1] = 5;
    memset(f->out, 0xA5, FX_BATCH * FX_HEADS * 512 * 2);
    memset(f->lse, 0xA5, sizeof(f->lse));
}

void fx_fini(struct fixture *f)
{
    mla_plan_destroy(f->plan);
    mla_config_destroy(f->cfg);
    mla_context_destroy(f->ctx);
    free(f->q); free(f->kv); free(f->scales); free(f->out); free(f->ws);
}
