/* config.c - model shape, KV format, tuning and experimental parameters.
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

const char *mla__param_name(mla_param_t param)
{
    switch (param) {
    case MLA_PARAM_NUM_HEADS: return "MLA_PARAM_NUM_HEADS";
    case MLA_PARAM_NUM_KV_HEADS: return "MLA_PARAM_NUM_KV_HEADS";
    case MLA_PARAM_Q_LEN: return "MLA_PARAM_Q_LEN";
    case MLA_PARAM_HEAD_DIM_QK: return "MLA_PARAM_HEAD_DIM_QK";
    case MLA_PARAM_HEAD_DIM_V: return "MLA_PARAM_HEAD_DIM_V";
    case MLA_PARAM_KV_FORMAT: return "MLA_PARAM_KV_FORMAT";
    case MLA_PARAM_PAGE_SIZE: return "MLA_PARAM_PAGE_SIZE";
    case MLA_PARAM_SCALE_BLOCK_SIZE: return "MLA_PARAM_SCALE_BLOCK_SIZE";
    case MLA_PARAM_CAUSAL: return "MLA_PARAM_CAUSAL";
    case MLA_PARAM_NUM_KV_STAGES: return "MLA_PARAM_NUM_KV_STAGES";
    case MLA_PARAM_BLOCK_N: return "MLA_PARAM_BLOCK_N";
    case MLA_PARAM_KV_ROW_BYTES: return "MLA_PARAM_KV_ROW_BYTES";
    case MLA_PARAM_SCALES_PER_ROW: return "MLA_PARAM_SCALES_PER_ROW";
    case MLA_PARAM_SOFTMAX_SCALE: return "MLA_PARAM_SOFTMAX_SCALE";
    case MLA_PARAM_KV_SCALE: return "MLA_PARAM_KV_SCALE";
    default: break;
    }
    /* The experimental parameters are not enumerators of mla_param_t. */
    switch ((int)param) {
    case MLA_XPARAM_KERNEL: return "MLA_XPARAM_KERNEL";
    case MLA_XPARAM_CPU_THREADS: return "MLA_XPARAM_CPU_THREADS";
    }
    return "param";
}

/* The integer parameters that set_int and get_int take, read-only ones
 * included. */
static int is_int_param(mla_param_t p)
{
    return (p >= MLA_PARAM_NUM_HEADS && p <= MLA_PARAM_SCALES_PER_ROW) || p == MLA_XPARAM_KERNEL ||
           p == MLA_XPARAM_CPU_THREADS;
}

static const char *format_name(int32_t fmt)
{
    return fmt == MLA_KV_BF16        ? "MLA_KV_BF16"
           : fmt == MLA_KV_FP8_E4M3  ? "MLA_KV_FP8_E4M3"
                                     : "MLA_KV_FP8_DS_MLA";
}

mla_status_t mla__scores_validate(const struct mla_shape *s)
{
    /* Both backends scale scores by softmax_scale * kv_scale (the GPU
     * kernels as one fp32 factor, times log2(e)): the product must be a
     * normal, finite fp32 value for them to agree. */
    const double kv = s->kv_format == MLA_KV_FP8_E4M3 ? s->kv_scale : 1.0;
    const double p = mla__softmax_scale(s) * kv;
    if (!(p >= MLA_SCALE_MIN && p <= MLA_SCALE_MAX))
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "MLA_PARAM_SOFTMAX_SCALE * MLA_PARAM_KV_SCALE = %g * %g = %g: want a "
                          "product in [%g, %g]",
                          mla__softmax_scale(s), kv, p, MLA_SCALE_MIN, MLA_SCALE_MAX);
    return MLA_STATUS_SUCCESS;
}

mla_status_t mla__shape_validate(const struct mla_shape *s)
{
    if (s->num_heads % s->num_kv_heads != 0)
        return mla__error(MLA_STATUS_NOT_SUPPORTED,
                          "MLA_PARAM_NUM_KV_HEADS = %d does not divide MLA_PARAM_NUM_HEADS = %d",
                          s->num_kv_heads, s->num_heads);
    if (s->scale_block != 0 && s->kv_format != MLA_KV_FP8_E4M3)
        return mla__error(MLA_STATUS_NOT_SUPPORTED,
                          "MLA_PARAM_SCALE_BLOCK_SIZE = %d needs MLA_KV_FP8_E4M3, not %s",
                          s->scale_block, format_name(s->kv_format));
    if (s->kv_format != MLA_KV_FP8_E4M3 && s->kv_scale != 1.0)
        return mla__error(MLA_STATUS_NOT_SUPPORTED,
                          "MLA_PARAM_KV_SCALE = %g needs MLA_KV_FP8_E4M3 (%s rows are "
                          "unscaled or carry their own scales)",
                          s->kv_scale, format_name(s->kv_format));
    return MLA_STATUS_SUCCESS;
}

/* A valid config, else 0 with a message naming the argument; binds nothing
 * (plan and append calls bind their context). */
int mla__config_valid(const mla_config_t *cfg, const char *name)
{
    if (!cfg) {
        mla__error(MLA_STATUS_INVALID_ARGUMENT, "%s is NULL", name);
        return 0;
    }
    if (cfg->magic != MLA_MAGIC_CONFIG) {
        mla__error(MLA_STATUS_INVALID_ARGUMENT, "%s is not a config (destroyed, or another "
                   "kind of handle)", name);
        return 0;
    }
    return 1;
}

/* A valid config, bound as the handle of the call's message. */
static int config_arg(const mla_config_t *cfg, const char *name)
{
    if (!mla__config_valid(cfg, name))
        return 0;
    mla__bind(cfg, cfg->serial);
    return 1;
}

mla_status_t mla_config_create(mla_config_t **cfg)
{
    mla__enter("mla_config_create");
    if (!cfg)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT, "cfg is NULL");
    *cfg = NULL;
    mla_config_t *c = calloc(1, sizeof(*c));
    if (!c)
        return mla__error(MLA_STATUS_OUT_OF_MEMORY, "out of host memory");
    c->magic = MLA_MAGIC_CONFIG;
    c->serial = mla__new_serial();
    mla__shape_defaults(&c->s);
    *cfg = c;
    return MLA_STATUS_SUCCESS;
}

void mla_config_destroy(mla_config_t *cfg)
{
    if (!cfg || cfg->magic != MLA_MAGIC_CONFIG)
        return;
    cfg->magic = MLA_MAGIC_DEAD;
    free(cfg);
}

mla_status_t mla_config_copy(mla_config_t **dst, const mla_config_t *src)
{
    mla__enter("mla_config_copy");
    if (dst)
        *dst = NULL;
    /* The source first: the message of any other fault is then its. */
    if (!config_arg(src, "src"))
        return MLA_STATUS_INVALID_ARGUMENT;
    if (!dst)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT, "dst is NULL");
    mla_config_t *c = malloc(sizeof(*c));
    if (!c)
        return mla__error(MLA_STATUS_OUT_OF_MEMORY, "out of host memory");
    memcpy(c, src, sizeof(*c));
    c->serial = mla__new_serial();
    *dst = c;
    return MLA_STATUS_SUCCESS;
}

static int is_pow2(int64_t v)
{
    return v > 0 && (v & (v - 1)) == 0;
}

static mla_status_t range(mla_param_t p, int64_t v, int64_t lo, int64_t hi)
{
    if (v < lo || v > hi)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT, "%s = %lld: want a value in [%lld, %lld]",
                          mla__param_name(p), (long long)v, (long long)lo, (long long)hi);
    return MLA_STATUS_SUCCESS;
}

mla_status_t mla_config_set_int(mla_config_t *cfg, mla_param_t param, int64_t value)
{
    mla__enter("mla_config_set_int");
    if (!config_arg(cfg, "cfg"))
        return MLA_STATUS_INVALID_ARGUMENT;
    struct mla_shape *s = &cfg->s;
    const char *name = mla__param_name(param);
    mla_status_t st;
    switch (param) {
    case MLA_PARAM_NUM_HEADS:
        if ((st = range(param, value, 1, 128)))
            return st;
        s->num_heads = (int32_t)value;
        return MLA_STATUS_SUCCESS;
    case MLA_PARAM_NUM_KV_HEADS:
        if ((st = range(param, value, 1, 128)))
            return st;
        s->num_kv_heads = (int32_t)value;
        return MLA_STATUS_SUCCESS;
    case MLA_PARAM_Q_LEN:
        if ((st = range(param, value, 1, 8)))
            return st;
        s->q_len = (int32_t)value;
        return MLA_STATUS_SUCCESS;
    case MLA_PARAM_HEAD_DIM_QK:
    case MLA_PARAM_HEAD_DIM_V: {
        int64_t want = param == MLA_PARAM_HEAD_DIM_QK ? MLA_D_QK : MLA_D_V;
        if ((st = range(param, value, 1, 4096)))
            return st;
        if (value != want)
            return mla__error(MLA_STATUS_NOT_SUPPORTED, "%s = %lld: only %lld is supported",
                              name, (long long)value, (long long)want);
        return MLA_STATUS_SUCCESS;
    }
    case MLA_PARAM_KV_FORMAT:
        if (value != MLA_KV_BF16 && value != MLA_KV_FP8_E4M3 && value != MLA_KV_FP8_DS_MLA)
            return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                              "%s = %lld: want MLA_KV_BF16 (0), MLA_KV_FP8_E4M3 (1) or "
                              "MLA_KV_FP8_DS_MLA (2)",
                              name, (long long)value);
        s->kv_format = (int32_t)value;
        return MLA_STATUS_SUCCESS;
    case MLA_PARAM_PAGE_SIZE:
        if (!is_pow2(value) || value > 1024)
            return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                              "%s = %lld: want a power of two in [1, 1024]", name,
                              (long long)value);
        s->page_size = (int32_t)value;
        return MLA_STATUS_SUCCESS;
    case MLA_PARAM_SCALE_BLOCK_SIZE:
        if (value != 0 && value != 32 && value != 64 && value != 128)
            return mla__error(MLA_STATUS_INVALID_ARGUMENT, "%s = %lld: want 0, 32, 64 or 128",
                              name, (long long)value);
        s->scale_block = (int32_t)value;
        return MLA_STATUS_SUCCESS;
    case MLA_PARAM_CAUSAL:
        s->causal = value != 0;
        return MLA_STATUS_SUCCESS;
    case MLA_PARAM_NUM_KV_STAGES:
        if ((st = range(param, value, 0, 8)))
            return st;
        s->num_kv_stages = (int32_t)value;
        return MLA_STATUS_SUCCESS;
    case MLA_PARAM_BLOCK_N:
        if (value != 0 && value != 32 && value != 64)
            return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                              "%s = %lld: want 0 (automatic), 32 or 64", name, (long long)value);
        s->block_n = (int32_t)value;
        return MLA_STATUS_SUCCESS;
    case MLA_PARAM_KV_ROW_BYTES:
    case MLA_PARAM_SCALES_PER_ROW:
        return mla__error(MLA_STATUS_INVALID_ARGUMENT, "%s is read-only", name);
    case MLA_PARAM_SOFTMAX_SCALE:
    case MLA_PARAM_KV_SCALE:
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "%s is floating-point: use mla_config_set_float", name);
    default:
        break;
    }
    switch ((int)param) {
    case MLA_XPARAM_KERNEL:
        if (value < MLA_XKERNEL_AUTO || value > MLA_XKERNEL_HOPPER_WIDE8)
            return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                              "%s = %lld: want MLA_XKERNEL_AUTO (0), MLA_XKERNEL_PORTABLE (1), "
                              "MLA_XKERNEL_HOPPER (2), MLA_XKERNEL_HOPPER_WIDE (3), "
                              "MLA_XKERNEL_HOPPER_NARROW (4) or MLA_XKERNEL_HOPPER_WIDE8 (5)",
                              name, (long long)value);
        s->kernel = (int32_t)value;
        return MLA_STATUS_SUCCESS;
    case MLA_XPARAM_CPU_THREADS:
        if (value < 0 || value > MLA_MAX_CPU_THREADS)
            return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                              "%s = %lld: want 0 (automatic) or a value in [1, %d]", name,
                              (long long)value, MLA_MAX_CPU_THREADS);
        s->cpu_threads = (int32_t)value;
        return MLA_STATUS_SUCCESS;
    }
    return mla__error(MLA_STATUS_INVALID_ARGUMENT, "param = %d is not an mla_param_t",
                      (int)param);
}

mla_status_t mla_config_get_int(const mla_config_t *cfg, mla_param_t param, int64_t *value)
{
    mla__enter("mla_config_get_int");
    if (!config_arg(cfg, "cfg"))
        return MLA_STATUS_INVALID_ARGUMENT;
    if (!value)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT, "value is NULL");
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
    case MLA_PARAM_SOFTMAX_SCALE:
    case MLA_PARAM_KV_SCALE:
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "%s is floating-point: use mla_config_get_float",
                          mla__param_name(param));
    default:
        if ((int)param == MLA_XPARAM_KERNEL)
            v = s->kernel;
        else if ((int)param == MLA_XPARAM_CPU_THREADS)
            v = s->cpu_threads;
        else
            return mla__error(MLA_STATUS_INVALID_ARGUMENT, "param = %d is not an mla_param_t",
                              (int)param);
    }
    *value = v;
    return MLA_STATUS_SUCCESS;
}

mla_status_t mla_config_set_float(mla_config_t *cfg, mla_param_t param, double value)
{
    mla__enter("mla_config_set_float");
    if (!config_arg(cfg, "cfg"))
        return MLA_STATUS_INVALID_ARGUMENT;
    const char *name = mla__param_name(param);
    switch (param) {
    case MLA_PARAM_SOFTMAX_SCALE:
        /* !(a <= v) also refuses NaN. */
        if (value != 0 && !(value >= MLA_SCALE_MIN && value <= MLA_SCALE_MAX))
            return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                              "%s = %g: want 0 (automatic) or a value in [%g, %g]", name, value,
                              MLA_SCALE_MIN, MLA_SCALE_MAX);
        cfg->s.softmax_scale = value;
        return MLA_STATUS_SUCCESS;
    case MLA_PARAM_KV_SCALE:
        if (!(value >= MLA_SCALE_MIN && value <= MLA_SCALE_MAX))
            return mla__error(MLA_STATUS_INVALID_ARGUMENT, "%s = %g: want a value in [%g, %g]",
                              name, value, MLA_SCALE_MIN, MLA_SCALE_MAX);
        cfg->s.kv_scale = value;
        return MLA_STATUS_SUCCESS;
    default:
        break;
    }
    if (is_int_param(param))
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "%s is an integer parameter: use mla_config_set_int", name);
    return mla__error(MLA_STATUS_INVALID_ARGUMENT, "param = %d is not an mla_param_t",
                      (int)param);
}

mla_status_t mla_config_get_float(const mla_config_t *cfg, mla_param_t param, double *value)
{
    mla__enter("mla_config_get_float");
    if (!config_arg(cfg, "cfg"))
        return MLA_STATUS_INVALID_ARGUMENT;
    if (!value)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT, "value is NULL");
    switch (param) {
    case MLA_PARAM_SOFTMAX_SCALE: *value = mla__softmax_scale(&cfg->s); return MLA_STATUS_SUCCESS;
    case MLA_PARAM_KV_SCALE: *value = cfg->s.kv_scale; return MLA_STATUS_SUCCESS;
    default:
        break;
    }
    if (is_int_param(param))
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "%s is an integer parameter: use mla_config_get_int",
                          mla__param_name(param));
    return mla__error(MLA_STATUS_INVALID_ARGUMENT, "param = %d is not an mla_param_t",
                      (int)param);
}

const char *mla_config_last_error(const mla_config_t *cfg)
{
    return cfg && cfg->magic == MLA_MAGIC_CONFIG ? mla__message(cfg, cfg->serial) : "";
}
