/* plan.c - a config frozen for one context, batch size and length bound.
 * SPDX-License-Identifier: MIT */
#include <stdlib.h>

#include "internal.h"

#define MLA_MAX_BATCH 65535
#define MLA_MAX_SEQ_LEN (1 << 24)

mla_status_t mla_plan_create(mla_plan_t **plan, mla_context_t *ctx, const mla_config_t *cfg,
                             int32_t batch, int32_t max_seq_len)
{
    if (!plan)
        return MLA_STATUS_INVALID_ARGUMENT;
    *plan = NULL;
    if (!ctx || ctx->magic != MLA_MAGIC_CONTEXT)
        return MLA_STATUS_INVALID_ARGUMENT;
    mla__clear(ctx->err);
    if (!cfg || cfg->magic != MLA_MAGIC_CONFIG)
        return mla__ctx_fail(ctx, MLA_STATUS_INVALID_ARGUMENT, "mla_plan_create: invalid config");
    if (batch < 1 || batch > MLA_MAX_BATCH)
        return mla__ctx_fail(ctx, MLA_STATUS_INVALID_ARGUMENT,
                             "mla_plan_create: batch %d outside [1, %d]", batch, MLA_MAX_BATCH);
    if (max_seq_len < 1 || max_seq_len > MLA_MAX_SEQ_LEN)
        return mla__ctx_fail(ctx, MLA_STATUS_INVALID_ARGUMENT,
                             "mla_plan_create: max_seq_len %d outside [1, %d]", max_seq_len,
                             MLA_MAX_SEQ_LEN);
    mla_status_t st = mla__shape_validate(&cfg->s, ctx->err);
    if (st != MLA_STATUS_SUCCESS)
        return st;

    mla_plan_t *p = calloc(1, sizeof(*p));
    if (!p)
        return mla__ctx_fail(ctx, MLA_STATUS_OUT_OF_MEMORY, "mla_plan_create: out of memory");
    p->magic = MLA_MAGIC_PLAN;
    p->ctx = ctx;
    p->s = cfg->s;
    p->batch = batch;
    p->max_seq_len = max_seq_len;
    if (ctx->backend == MLA_BACKEND_CPU) {
        p->workspace_bytes = mla__cpu_workspace_bytes(&p->s, batch, max_seq_len);
        p->sched_tag = mla__cpu_sched_tag(p);
        p->sched_ctas = 1;
    } else {
        st = mla__gpu_plan_init(p);
        if (st != MLA_STATUS_SUCCESS) {
            p->magic = MLA_MAGIC_DEAD;
            free(p);
            return st;
        }
    }
    *plan = p;
    return MLA_STATUS_SUCCESS;
}

void mla_plan_destroy(mla_plan_t *plan)
{
    if (!plan || plan->magic != MLA_MAGIC_PLAN)
        return;
    if (plan->gpu)
        mla__gpu_plan_fini(plan);
    plan->magic = MLA_MAGIC_DEAD;
    free(plan);
}

mla_status_t mla_plan_workspace_size(const mla_plan_t *plan, size_t *bytes)
{
    if (!plan || plan->magic != MLA_MAGIC_PLAN || !bytes)
        return MLA_STATUS_INVALID_ARGUMENT;
    *bytes = plan->workspace_bytes;
    return MLA_STATUS_SUCCESS;
}
