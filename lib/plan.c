/* plan.c - a config frozen for one context, batch size and length bound.
 * SPDX-License-Identifier: MIT */
#include <stdlib.h>

#include "internal.h"

#define MLA_MAX_BATCH 65535
#define MLA_MAX_SEQ_LEN (1 << 24)

/* A valid context, bound as the handle of the call's message. */
int mla__context_arg(const mla_context_t *ctx, const char *name)
{
    if (!ctx) {
        mla__error(MLA_STATUS_INVALID_ARGUMENT, "%s is NULL", name);
        return 0;
    }
    if (ctx->magic != MLA_MAGIC_CONTEXT) {
        mla__error(MLA_STATUS_INVALID_ARGUMENT,
                   "%s is not a context (destroyed, or another kind of handle)", name);
        return 0;
    }
    mla__bind(ctx, ctx->serial);
    return 1;
}

/* A valid plan on a valid context, which is bound as the message's handle. */
int mla__plan_arg(const mla_plan_t *plan)
{
    if (!plan) {
        mla__error(MLA_STATUS_INVALID_ARGUMENT, "plan is NULL");
        return 0;
    }
    if (plan->magic != MLA_MAGIC_PLAN) {
        mla__error(MLA_STATUS_INVALID_ARGUMENT,
                   "plan is not a plan (destroyed, or another kind of handle)");
        return 0;
    }
    if (!plan->ctx || plan->ctx->magic != MLA_MAGIC_CONTEXT) {
        mla__error(MLA_STATUS_INVALID_ARGUMENT, "the plan's context was destroyed");
        return 0;
    }
    mla__bind(plan->ctx, plan->ctx->serial);
    return 1;
}

mla_status_t mla_plan_create(mla_plan_t **plan, mla_context_t *ctx, const mla_config_t *cfg,
                             int32_t batch, int32_t max_seq_len)
{
    mla__enter("mla_plan_create");
    if (plan)
        *plan = NULL;
    /* The context first: the message of any other fault is then its. */
    if (!mla__context_arg(ctx, "ctx"))
        return MLA_STATUS_INVALID_ARGUMENT;
    if (!plan)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT, "plan is NULL");
    if (!mla__config_valid(cfg, "cfg"))
        return MLA_STATUS_INVALID_ARGUMENT;
    if (batch < 1 || batch > MLA_MAX_BATCH)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT, "batch = %d: want a value in [1, %d]",
                          batch, MLA_MAX_BATCH);
    if (max_seq_len < 1 || max_seq_len > MLA_MAX_SEQ_LEN)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "max_seq_len = %d: want a value in [1, %d]", max_seq_len,
                          MLA_MAX_SEQ_LEN);
    mla_status_t st = mla__shape_validate(&cfg->s);
    if (st == MLA_STATUS_SUCCESS)
        st = mla__scores_validate(&cfg->s);
    if (st != MLA_STATUS_SUCCESS)
        return st;

    mla_plan_t *p = calloc(1, sizeof(*p));
    if (!p)
        return mla__error(MLA_STATUS_OUT_OF_MEMORY, "out of host memory");
    p->magic = MLA_MAGIC_PLAN;
    p->ctx = ctx;
    p->s = cfg->s;
    p->batch = batch;
    p->max_seq_len = max_seq_len;
    if (ctx->backend == MLA_BACKEND_CPU) {
        p->workspace_bytes = mla__cpu_workspace_bytes(&p->s, batch, max_seq_len);
        p->sched_tag = mla__cpu_sched_tag(p);
        p->sched_ctas = 1;
        p->cpu_threads = p->s.cpu_threads ? p->s.cpu_threads : ctx->cpu_threads;
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
    mla__enter("mla_plan_workspace_size");
    if (!mla__plan_arg(plan))
        return MLA_STATUS_INVALID_ARGUMENT;
    if (!bytes)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT, "bytes is NULL");
    *bytes = plan->workspace_bytes;
    return MLA_STATUS_SUCCESS;
}
