/*
 * decode.c - one decode step of one request on libmla's CPU backend: 100
 * tokens in an FP8 cache of two 64-token pages, 16 query heads.
 *
 * Build it against an installed libmla:
 *     cc -o decode decode.c $(pkg-config --cflags --libs libmla)
 *
 * The inputs make the result easy to check by hand.  Every cache row is
 * 1.0 in all 576 dimensions and every query value is 2^-7, so every key
 * scores 576 x 2^-7 x 1.0 / sqrt(576) = 0.1875.  Equal scores make the
 * softmax uniform: each output value is the mean of 100 V values of 1.0,
 * that is 1, and the log-sum-exp of a head is 0.1875 + ln(100).
 *
 * Expected output:
 *     decode: success, out[0] = 1, lse[0] = 4.792670
 *
 * SPDX-License-Identifier: MIT
 */
#include <mla.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    HEADS = 16,  /* query heads; one KV head (the default) */
    PAGE = 64,   /* tokens per cache page */
    LEN = 100,   /* tokens in the request's cache */
    PAGES = 2,   /* pages in the cache: LEN rounded up to pages */
    SCALES = 5,  /* fp32 block scales per row: 576 / 128 rounded up */
    ROW = 576,   /* dimensions of a latent row, K and Q */
    VDIM = 512   /* dimensions of V and of an output row */
};

/* bf16 is the upper 16 bits of an IEEE 754 binary32. */
#define BF16_ONE 0x3f80      /* 1.0 */
#define BF16_2_POW_M7 0x3c00 /* 2^-7 = 0.0078125 */

static float bf16_to_float(uint16_t h)
{
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof(f));
    return f;
}

int main(void)
{
    mla_context_t *ctx = NULL;
    mla_config_t *cfg = NULL;
    mla_plan_t *plan = NULL;
    uint16_t *latent = NULL, *q = NULL, *out = NULL;
    uint8_t *kv = NULL;
    float *scales = NULL, lse[HEADS];
    void *ws = NULL;
    size_t ws_size;
    int64_t slots[LEN];
    int32_t table[PAGES] = {1, 0}; /* logical page p is physical page table[p] */
    int32_t lens[1] = {LEN};
    mla_status_t st;
    int rc = 1;

    /* The CPU backend: every buffer is host memory and each call returns
     * when it is done.  With a device ordinal instead, every buffer is
     * device memory and the calls are queued on a CUDA stream. */
    st = mla_context_create(&ctx, MLA_DEVICE_CPU);
    if (st != MLA_STATUS_SUCCESS) {
        fprintf(stderr, "mla_context_create: %s\n", mla_status_string(st));
        return 1;
    }

    /* 16 heads over an FP8 E4M3 cache with a scale per 128 channels. */
    st = mla_config_create(&cfg);
    if (st != MLA_STATUS_SUCCESS) {
        fprintf(stderr, "mla_config_create: %s\n", mla_status_string(st));
        goto done;
    }
    if ((st = mla_config_set_int(cfg, MLA_PARAM_NUM_HEADS, HEADS)) != MLA_STATUS_SUCCESS ||
        (st = mla_config_set_int(cfg, MLA_PARAM_KV_FORMAT, MLA_KV_FP8_E4M3)) != MLA_STATUS_SUCCESS ||
        (st = mla_config_set_int(cfg, MLA_PARAM_SCALE_BLOCK_SIZE, 128)) != MLA_STATUS_SUCCESS ||
        (st = mla_config_set_int(cfg, MLA_PARAM_PAGE_SIZE, PAGE)) != MLA_STATUS_SUCCESS) {
        fprintf(stderr, "mla_config_set_int: %s\n", mla_config_last_error(cfg));
        goto done;
    }

    /* A plan for one request of at most LEN tokens, and its workspace. */
    st = mla_plan_create(&plan, ctx, cfg, 1, LEN);
    if (st != MLA_STATUS_SUCCESS) {
        fprintf(stderr, "mla_plan_create: %s\n", mla_context_last_error(ctx));
        goto done;
    }
    st = mla_plan_workspace_size(plan, &ws_size);
    if (st != MLA_STATUS_SUCCESS) {
        fprintf(stderr, "mla_plan_workspace_size: %s\n", mla_status_string(st));
        goto done;
    }

    /* q, the cache and out must be 16-byte aligned, the workspace 256-byte
     * aligned; aligned_alloc wants sizes that are multiples of those. */
    latent = aligned_alloc(16, sizeof(uint16_t) * LEN * ROW);   /* bf16 [LEN, 576] */
    q = aligned_alloc(16, sizeof(uint16_t) * HEADS * ROW);      /* bf16 [1, 1, 16, 576] */
    out = aligned_alloc(16, sizeof(uint16_t) * HEADS * VDIM);   /* bf16 [1, 1, 16, 512] */
    kv = aligned_alloc(16, (size_t)PAGES * PAGE * ROW);         /* e4m3 [2, 64, 1, 576] */
    scales = aligned_alloc(16, sizeof(float) * PAGES * PAGE * SCALES); /* [2, 64, 1, 5] */
    ws = aligned_alloc(256, (ws_size + 255) / 256 * 256);
    if (!latent || !q || !out || !kv || !scales || !ws) {
        fprintf(stderr, "out of memory\n");
        goto done;
    }
    for (int i = 0; i < LEN * ROW; i++)
        latent[i] = BF16_ONE;
    for (int i = 0; i < HEADS * ROW; i++)
        q[i] = BF16_2_POW_M7;
    /* Token t of the request lives in slot page * PAGE + offset. */
    for (int t = 0; t < LEN; t++)
        slots[t] = (int64_t)table[t / PAGE] * PAGE + t % PAGE;

    /* Write the LEN latent rows into the cache, quantized to E4M3. */
    st = mla_kv_append(ctx, cfg, kv, scales, PAGES, latent, slots, LEN, NULL);
    if (st != MLA_STATUS_SUCCESS) {
        fprintf(stderr, "mla_kv_append: %s\n", mla_context_last_error(ctx));
        goto done;
    }
    /* Attend: out and lse (the natural-log sum of exp, per head). */
    st = mla_decode(plan, q, kv, scales, PAGES, table, PAGES, lens, out, lse, ws, ws_size, NULL);
    if (st != MLA_STATUS_SUCCESS) {
        fprintf(stderr, "mla_decode: %s\n", mla_context_last_error(ctx));
        goto done;
    }
    printf("decode: %s, out[0] = %g, lse[0] = %f\n", mla_status_string(st), bf16_to_float(out[0]),
           lse[0]);
    rc = 0;

done:
    free(latent);
    free(q);
    free(out);
    free(kv);
    free(scales);
    free(ws);
    mla_plan_destroy(plan);
    mla_config_destroy(cfg);
    mla_context_destroy(ctx);
    return rc;
}
