/* config.c - model shape, KV format and tuning parameters.
 * SPDX-License-Identifier: MIT */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "mla_params.h"

void mla__shape_defaults(struct mla_shape *s)
{
    memset(s, 0, sizeof(*s));
    s->num_heads = 128;
    s->num_kv_heads = 1;
    s->q_len = 1;
    s->head_dim_qk = MLA_D_QK;
    s->head_dim_v = MLA_D_V;
    s->kv_format = MLA_KV_BF16;
    s->page_size = 64;
    s->kv_scale = 1.0;
}

int32_t mla__row_bytes(const struct mla_shape *s)
{
    return mla_row_bytes(s->kv_format);
}

int32_t mla__scales_per_row(const struct mla_shape *s)
{
    if (s->kv_format != MLA_KV_FP8_E4M3 || s->scale_block == 0)
        return 0;
    return (s->head_dim_qk + s->scale_block - 1) / s->scale_block;
}

double mla__softmax_scale(const struct mla_shape *s)
{
    return s->softmax_scale > 0 ? s->softmax_scale : 1.0 / sqrt((double)s->head_dim_qk);
}

mla_status_t mla__shape_validate(const struct mla_shape *s, char *err)
{
    if (s->num_heads % s->num_kv_heads != 0)
        return mla__fail(err, MLA_STATUS_NOT_SUPPORTED,
                         "num_kv_heads %d does not divide num_heads %d",
                         s->num_kv_heads, s->num_heads);
    if (s->scale_block != 0 && s->kv_format != MLA_KV_FP8_E4M3)
        return mla__fail(err, MLA_STATUS_NOT_SUPPORTED,
                         "scale_block_size %d needs the FP8_E4M3 format", s->scale_block);
    if (s->kv_format != MLA_KV_FP8_E4M3 && s->kv_scale != 1.0)
        return mla__fail(err, MLA_STATUS_NOT_SUPPORTED,
                         "kv_scale %g needs the FP8_E4M3 format (BF16 and DS_MLA rows "
                         "are unscaled or carry their own scales)", s->kv_scale);
    return MLA_STATUS_SUCCESS;
}

static int valid_config(const mla_config_t *cfg)
{
    return cfg && cfg->magic == MLA_MAGIC_CONFIG;
}

mla_status_t mla_config_create(mla_config_t **cfg)
{
    if (!cfg)
        return MLA_STATUS_INVALID_ARGUMENT;
    *cfg = NULL;
    mla_config_t *c = calloc(1, sizeof(*c));
    if (!c)
        return MLA_STATUS_OUT_OF_MEMORY;
    c->magic = MLA_MAGIC_CONFIG;
    mla__shape_defaults(&c->s);
    *cfg = c;
    return MLA_STATUS_SUCCESS;
}

void mla_config_destroy(mla_config_t *cfg)
{
    if (!valid_config(cfg))
        return;
    cfg->magic = MLA_MAGIC_DEAD;
    free(cfg);
}

mla_status_t mla_config_copy(mla_config_t **dst, const mla_config_t *src)
{
    if (!dst)
        return MLA_STATUS_INVALID_ARGUMENT;
    *dst = NULL;
    if (!valid_config(src))
        return MLA_STATUS_INVALID_ARGUMENT;
    mla_config_t *c = malloc(sizeof(*c));
    if (!c)
        return MLA_STATUS_OUT_OF_MEMORY;
    memcpy(c, src, sizeof(*c));
    mla__clear(c->err);
    *dst = c;
    return MLA_STATUS_SUCCESS;
}

static int is_pow2(int64_t v)
{
    return v > 0 && (v & (v - 1)) == 0;
}

static mla_status_t range(mla_config_t *cfg, const char *name, int64_t v, int64_t lo, int64_t hi)
{
    if (v < lo || v > hi)
        return mla__fail(cfg->err, MLA_STATUS_INVALID_ARGUMENT,
                         "%s = %lld is outside [%lld, %lld]", name, (long long)v,
                         (long long)lo, (long long)hi);
    return MLA_STATUS_SUCCESS;
}

mla_status_t mla_config_set_int(mla_config_t *cfg, mla_param_t param, int64_t value)
{
    if (!valid_config(cfg))
        return MLA_STATUS_INVALID_ARGUMENT;
    struct mla_shape *s = &cfg->s;
    mla_status_t st;
    mla__clear(cfg->err);
    switch (param) {
    case MLA_PARAM_NUM_HEADS:
        if ((st = range(cfg, "num_heads", value, 1, 128)))
            return st;
        s->num_heads = (int32_t)value;
        return MLA_STATUS_SUCCESS;
    case MLA_PARAM_NUM_KV_HEADS:
        if ((st = range(cfg, "num_kv_heads", value, 1, 128)))
            return st;
        s->num_kv_heads = (int32_t)value;
        return MLA_STATUS_SUCCESS;
    case MLA_PARAM_Q_LEN:
        if ((st = range(cfg, "q_len", value, 1, 8)))
            return st;
        s->q_len = (int32_t)value;
        return MLA_STATUS_SUCCESS;
    case MLA_PARAM_HEAD_DIM_QK:
    case MLA_PARAM_HEAD_DIM_V: {
        int qk = param == MLA_PARAM_HEAD_DIM_QK;
        int64_t want = qk ? MLA_D_QK : MLA_D_V;
        if ((st = range(cfg, qk ? "head_dim_qk" : "head_dim_v", value, 1, 4096)))
            return st;
        if (value != want)
            return mla__fail(cfg->err, MLA_STATUS_NOT_SUPPORTED,
                             "%s = %lld: only %lld is supported",
                             qk ? "head_dim_qk" : "head_dim_v", (long long)value,
                             (long long)want);
        return MLA_STATUS_SUCCESS;
    }
    case MLA_PARAM_KV_FORMAT:
        if (value != MLA_KV_BF16 && value != MLA_KV_FP8_E4M3 && value != MLA_KV_FP8_DS_MLA)
            return mla__fail(cfg->err, MLA_STATUS_INVALID_ARGUMENT,
                             "kv_format = %lld is not an mla_kv_format_t", (long long)value);
        s->kv_format = (int32_t)value;
        return MLA_STATUS_SUCCESS;
    case MLA_PARAM_PAGE_SIZE:
        if (!is_pow2(value) || value > 1024)
            return mla__fail(cfg->err, MLA_STATUS_INVALID_ARGUMENT,
                             "page_size = %lld: want a power of two in [1, 1024]",
                             (long long)value);
        s->page_size = (int32_t)value;
        return MLA_STATUS_SUCCESS;
    case MLA_PARAM_SCALE_BLOCK_SIZE:
        if (value != 0 && value != 32 && value != 64 && value != 128)
            return mla__fail(cfg->err, MLA_STATUS_INVALID_ARGUMENT,
                             "scale_block_size = %lld: want 0, 32, 64 or 128", (long long)value);
        s->scale_block = (int32_t)value;
        return MLA_STATUS_SUCCESS;
    case MLA_PARAM_CAUSAL:
        s->causal = value != 0;
        return MLA_STATUS_SUCCESS;
    case MLA_PARAM_NUM_KV_STAGES:
        if ((st = range(cfg, "num_kv_stages", value, 0, 8)))
            return st;
        s->num_kv_stages = (int32_t)value;
        return MLA_STATUS_SUCCESS;
    case MLA_PARAM_BLOCK_N:
        if (value != 0 && value != 32 && value != 64)
            return mla__fail(cfg->err, MLA_STATUS_INVALID_ARGUMENT,
                             "block_n = %lld: want 0 (auto), 32 or 64", (long long)value);
        s->block_n = (int32_t)value;
        return MLA_STATUS_SUCCESS;
    case MLA_PARAM_KV_ROW_BYTES:
    case MLA_PARAM_SCALES_PER_ROW:
        return mla__fail(cfg->err, MLA_STATUS_INVALID_ARGUMENT,
                         "parameter %d is read-only", (int)param);
    case MLA_PARAM_SOFTMAX_SCALE:
    case MLA_PARAM_KV_SCALE:
        return mla__fail(cfg->err, MLA_STATUS_INVALID_ARGUMENT,
                         "parameter %d is floating-point: use mla_config_set_float",
                         (int)param);
    }
    return mla__fail(cfg->err, MLA_STATUS_INVALID_ARGUMENT, "unknown parameter %d", (int)param);
}

mla_status_t mla_config_get_int(const mla_config_t *cfg, mla_param_t param, int64_t *value)
{
    if (!valid_config(cfg) || !value)
        return MLA_STATUS_INVALID_ARGUMENT;
    const struct mla_shape *s = &cfg->s;
    int64_t v;
    switch (param) {
    case MLA_PARAM_NUM_HEADS: v = s->num_heads; break;
    case MLA_PARAM_NUM_KV_HEADS: v = s->num_kv_heads; break;
    case MLA_PARAM_Q_LEN: v = s->q_len; break;
    case MLA_PARAM_HEAD_DIM_QK: v = s->head_dim_qk; break;
    case MLA_PARAM_HEAD_DIM_V: v = s->head_dim_v; break;
    case MLA_PARAM_KV_FORMAT: v = s->kv_format; break;
    case MLA_PARAM_PAGE_SIZE: v = s->page_size; break;
    case MLA_PARAM_SCALE_BLOCK_SIZE: v = s->scale_block; break;
    case MLA_PARAM_CAUSAL: v = s->causal; break;
    case MLA_PARAM_NUM_KV_STAGES: v = s->num_kv_stages; break;
    case MLA_PARAM_BLOCK_N: v = s->block_n; break;
    case MLA_PARAM_KV_ROW_BYTES: v = mla__row_bytes(s); break;
    case MLA_PARAM_SCALES_PER_ROW: v = mla__scales_per_row(s); break;
    default: return MLA_STATUS_INVALID_ARGUMENT;
    }
    *value = v;
    return MLA_STATUS_SUCCESS;
}

mla_status_t mla_config_set_float(mla_config_t *cfg, mla_param_t param, double value)
{
    if (!valid_config(cfg))
        return MLA_STATUS_INVALID_ARGUMENT;
    mla__clear(cfg->err);
    switch (param) {
    case MLA_PARAM_SOFTMAX_SCALE:
        if (!isfinite(value) || value < 0 || value > 1e30)
            return mla__fail(cfg->err, MLA_STATUS_INVALID_ARGUMENT,
                             "softmax_scale = %g: want a finite value >= 0 (0 = auto)", value);
        cfg->s.softmax_scale = value;
        return MLA_STATUS_SUCCESS;
    case MLA_PARAM_KV_SCALE:
        if (!isfinite(value) || value <= 0 || value > 1e30 || value < 1e-30)
            return mla__fail(cfg->err, MLA_STATUS_INVALID_ARGUMENT,
                             "kv_scale = %g: want a finite value > 0", value);
        cfg->s.kv_scale = value;
        return MLA_STATUS_SUCCESS;
    default:
        return mla__fail(cfg->err, MLA_STATUS_INVALID_ARGUMENT,
                         "parameter %d is not floating-point", (int)param);
    }
}

mla_status_t mla_config_get_float(const mla_config_t *cfg, mla_param_t param, double *value)
{
    if (!valid_config(cfg) || !value)
        return MLA_STATUS_INVALID_ARGUMENT;
    switch (param) {
    case MLA_PARAM_SOFTMAX_SCALE: *value = mla__softmax_scale(&cfg->s); return MLA_STATUS_SUCCESS;
    case MLA_PARAM_KV_SCALE: *value = cfg->s.kv_scale; return MLA_STATUS_SUCCESS;
    default: return MLA_STATUS_INVALID_ARGUMENT;
    }
}

const char *mla_config_last_error(const mla_config_t *cfg)
{
    return valid_config(cfg) ? cfg->err : "";
}
