/*
 * cpu_decode.c - the CPU reference backend of mla_decode(): exact
 * dequantization and fp64 accumulation, multithreaded with pthreads.
 *
 * This is the oracle the GPU kernels are tested against, so it favours
 * plain code over speed: every cache row a request needs is dequantized
 * exactly into doubles, once per (request, KV head), and every query row
 * of that KV head runs an fp64 online softmax over those keys.
 *
 * SPDX-License-Identifier: MIT
 */
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"
#include "fp8_codec.h"
#include "mla_params.h"

/* Keys dequantized and scored together: bounds the scratch memory of a
 * thread whatever the sequence length. */
#define CHUNK_KEYS 64

/* The workspace: the header, then the lengths a schedule kept (what
 * mla_decode_scheduled uses). */
size_t mla__cpu_workspace_bytes(const struct mla_shape *s, int32_t batch, int32_t max_seq_len)
{
    (void)s;
    (void)max_seq_len;
    return MLA_WS_HEADER_BYTES + (size_t)batch * sizeof(int32_t);
}

/* What a CPU plan's schedules depend on: the batch (FNV-1a, never 0). */
uint32_t mla__cpu_sched_tag(const mla_plan_t *plan)
{
    uint32_t h = 2166136261u;
    const uint32_t v[] = {(uint32_t)plan->batch, (uint32_t)plan->max_seq_len, 0x435055u};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        for (int k = 0; k < 4; k++) {
            h ^= (v[i] >> (8 * k)) & 0xffu;
            h *= 16777619u;
        }
    return h ? h : 1u;
}

/* Everything the workers share, read-only once they start. */
struct job {
    const struct mla_decode_args *a;
    /* The lengths and the block-table entries they use, copied and
     * checked before any worker starts; workers never read the caller's
     * seq_lens or block_table, which another thread may change. */
    const int32_t *lens;  /* [batch] */
    const int64_t *first; /* [batch]: request b's first entry in pages */
    const int32_t *pages; /* the entries each length needs, by request */
    int32_t batch, q_len, h_q, h_kv, hpk; /* hpk: query heads per KV head */
    int32_t page_size, fmt, row_bytes, scale_block, spr;
    int causal;
    double softmax_scale;
    double kv_scale;
    atomic_int next; /* next work item (request * h_kv + kv head) */
};

/* Scratch of one worker thread. */
struct scratch {
    double *k;   /* [CHUNK_KEYS][576] dequantized rows */
    double *acc; /* [rows][512] unnormalized output */
    double *m;   /* [rows] running max score */
    double *l;   /* [rows] running sum of exp(score - m) */
    double *sc;  /* [CHUNK_KEYS] scores of one query row */
    unsigned char *nan; /* [rows] a NaN weight was met: the row is NaN */
};

struct worker {
    struct job *job;
    struct scratch sc;
    pthread_t tid;
};

/* Round a double to bf16, nearest even, without the double rounding of
 * going through float: a float that lands exactly on a bf16 midpoint is a
 * tie only if the double was exactly that value. */
static uint16_t double_to_bf16(double d)
{
    float f = (float)d;
    uint32_t u = mla_f32_bits(f);
    if ((u & 0xffffu) == 0x8000u && (u & 0x7fffffffu) < 0x7f800000u && (double)f != d) {
        uint16_t lo = (uint16_t)(u >> 16); /* truncated toward zero */
        return fabs(d) > fabs((double)f) ? (uint16_t)(lo + 1) : lo;
    }
    return mla_float_to_bf16(f);
}

/* Dequantize the cache row of token t of a request (through its checked
 * block-table entries bt) and KV head k into 576 exact doubles. */
static void dequant_row(const struct job *j, const int32_t *bt, int32_t t, int32_t k,
                        double *dst)
{
    const struct mla_decode_args *a = j->a;
    int64_t page = bt[t / j->page_size];
    int64_t row = (page * j->page_size + t % j->page_size) * j->h_kv + k;
    const uint8_t *src = (const uint8_t *)a->kv + row * j->row_bytes;
    int c;

    switch (j->fmt) {
    case MLA_FMT_BF16:
        for (c = 0; c < MLA_D_QK; c++) {
            uint16_t h;
            memcpy(&h, src + 2 * c, 2);
            dst[c] = mla_bf16_to_float(h);
        }
        break;
    case MLA_FMT_FP8_E4M3: {
        const float *bs = j->scale_block ? a->scales + row * j->spr : NULL;
        /* e4m3 (4 significant bits) * fp32 * fp32 fits in 53 bits: exact. */
        for (c = 0; c < MLA_D_QK; c++) {
            double s = bs ? (double)bs[c / j->scale_block] : 1.0;
            dst[c] = (double)mla_e4m3_to_float(src[c]) * j->kv_scale * s;
        }
        break;
    }
    default: { /* MLA_FMT_FP8_DS_MLA: 512 e4m3 | 4 fp32 scales | 64 bf16 */
        float bs[4];
        memcpy(bs, src + MLA_D_NOPE, sizeof bs);
        for (c = 0; c < MLA_D_NOPE; c++)
            dst[c] = (double)mla_e4m3_to_float(src[c]) * j->kv_scale * (double)bs[c / 128];
        for (c = 0; c < MLA_D_ROPE; c++) {
            uint16_t h;
            memcpy(&h, src + MLA_D_NOPE + sizeof bs + 2 * c, 2);
            dst[MLA_D_NOPE + c] = mla_bf16_to_float(h); /* RoPE is unscaled */
        }
        break;
    }
    }
}

/* One work item: request b, KV head k, all its query heads and tokens.
 * Packed row r = i * hpk + hh is query token i of query head k*hpk + hh. */
static void run_item(const struct job *j, struct scratch *sc, int32_t b, int32_t k)
{
    const struct mla_decode_args *a = j->a;
    const int32_t *bt = j->pages + j->first[b];
    const uint16_t *q = (const uint16_t *)a->q;
    uint16_t *out = (uint16_t *)a->out;
    int32_t len = j->lens[b];
    int32_t rows = j->q_len * j->hpk;
    int32_t r, t0, d;
    double qrow[MLA_D_QK];

    for (r = 0; r < rows; r++) {
        sc->m[r] = -INFINITY;
        sc->l[r] = 0.0;
        sc->nan[r] = 0;
        memset(sc->acc + (size_t)r * MLA_D_V, 0, MLA_D_V * sizeof(double));
    }

    for (t0 = 0; t0 < len; t0 += CHUNK_KEYS) {
        int32_t nk = len - t0 < CHUNK_KEYS ? len - t0 : CHUNK_KEYS;
        int32_t t;
        for (t = 0; t < nk; t++)
            dequant_row(j, bt, t0 + t, k, sc->k + (size_t)t * MLA_D_QK);

        for (r = 0; r < rows; r++) {
            int32_t i = r / j->hpk, h = k * j->hpk + r % j->hpk;
            /* keys of this chunk it sees */
            int32_t vis = mla_visible_keys(j->causal, j->q_len, len, i) - t0;
            const uint16_t *qs = q + (((int64_t)b * j->q_len + i) * j->h_q + h) * MLA_D_QK;
            double *acc = sc->acc + (size_t)r * MLA_D_V;
            double mnew;
            int nan_score = 0;
            if (vis <= 0 || sc->nan[r])
                continue;
            if (vis > nk)
                vis = nk;
            for (d = 0; d < MLA_D_QK; d++)
                qrow[d] = mla_bf16_to_float(qs[d]);

            mnew = sc->m[r];
            for (t = 0; t < vis; t++) {
                const double *kr = sc->k + (size_t)t * MLA_D_QK;
                /* Four partial sums only to shorten the dependency chain;
                 * the order is fixed, so results are reproducible. */
                double d0 = 0.0, d1 = 0.0, d2 = 0.0, d3 = 0.0;
                for (d = 0; d < MLA_D_QK; d += 4) {
                    d0 += qrow[d] * kr[d];
                    d1 += qrow[d + 1] * kr[d + 1];
                    d2 += qrow[d + 2] * kr[d + 2];
                    d3 += qrow[d + 3] * kr[d + 3];
                }
                sc->sc[t] = j->softmax_scale * ((d0 + d1) + (d2 + d3));
                if (isnan(sc->sc[t]))
                    nan_score = 1;
                else if (sc->sc[t] > mnew)
                    mnew = sc->sc[t];
            }
            /* As the fp64 evaluation exp(s - max) / sum: a NaN score, or a
             * +inf maximum (inf - inf), makes a weight, the sum and so the
             * whole row NaN, whatever the other keys hold. */
            if (nan_score || mnew == INFINITY) {
                sc->nan[r] = 1;
                continue;
            }

            /* Online softmax: rescale what was accumulated under the old
             * maximum (exp(-inf) = 0 when the first finite score arrives;
             * NaN left by 0 * Inf stays NaN, as it would in one pass). */
            if (mnew != sc->m[r]) {
                double corr = exp(sc->m[r] - mnew);
                for (d = 0; d < MLA_D_V; d++)
                    acc[d] *= corr;
                sc->l[r] *= corr;
            }
            sc->m[r] = mnew;
            for (t = 0; t < vis; t++) {
                const double *vr = sc->k + (size_t)t * MLA_D_QK; /* V = first 512 dims */
                /* A -inf score has weight 0 (and 0 * Inf in its V row is
                 * NaN, as in one pass); with every score so far -inf the
                 * maximum is -inf too, and the row ends NaN below. */
                double p = sc->sc[t] == -INFINITY ? 0.0 : exp(sc->sc[t] - mnew);
                sc->l[r] += p;
                for (d = 0; d < MLA_D_V; d++)
                    acc[d] += p * vr[d];
            }
        }
    }

    for (r = 0; r < rows; r++) {
        int32_t i = r / j->hpk, h = k * j->hpk + r % j->hpk;
        uint16_t *o = out + (((int64_t)b * j->q_len + i) * j->h_q + h) * MLA_D_V;
        const double *acc = sc->acc + (size_t)r * MLA_D_V;
        double lse;
        /* "No visible key" comes from the mask alone; a NaN sum is not it. */
        if (mla_visible_keys(j->causal, j->q_len, len, i) == 0) {
            for (d = 0; d < MLA_D_V; d++)
                o[d] = 0;
            lse = INFINITY;
        } else if (sc->nan[r] || sc->m[r] == -INFINITY) {
            /* NaN weights (a NaN score, an infinite maximum): NaN row. */
            for (d = 0; d < MLA_D_V; d++)
                o[d] = double_to_bf16(NAN);
            lse = NAN;
        } else {
            for (d = 0; d < MLA_D_V; d++)
                o[d] = double_to_bf16(acc[d] / sc->l[r]);
            lse = sc->m[r] + log(sc->l[r]);
        }
        if (a->lse)
            a->lse[((int64_t)b * j->h_q + h) * j->q_len + i] = (float)lse;
    }
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    struct job *j = w->job;
    int32_t items = j->batch * j->h_kv;
    for (;;) {
        int item = atomic_fetch_add(&j->next, 1);
        if (item >= items)
            break;
        run_item(j, &w->sc, item / j->h_kv, item % j->h_kv);
    }
    return NULL;
}

static void scratch_free(struct scratch *sc)
{
    free(sc->k);
    free(sc->acc);
    free(sc->m);
    free(sc->l);
    free(sc->sc);
    free(sc->nan);
}

static int scratch_alloc(struct scratch *sc, int32_t rows)
{
    sc->k = malloc((size_t)CHUNK_KEYS * MLA_D_QK * sizeof(double));
    sc->acc = malloc((size_t)rows * MLA_D_V * sizeof(double));
    sc->m = malloc((size_t)rows * sizeof(double));
    sc->l = malloc((size_t)rows * sizeof(double));
    sc->sc = malloc((size_t)CHUNK_KEYS * sizeof(double));
    sc->nan = malloc((size_t)rows);
    if (sc->k && sc->acc && sc->m && sc->l && sc->sc && sc->nan)
        return 0;
    scratch_free(sc);
    return -1;
}

/* The checked copy of the lengths and the block-table entries they use. */
struct frozen {
    int32_t *lens;
    int64_t *first;
    int32_t *pages;
};

static void frozen_free(struct frozen *fz)
{
    free(fz->lens);
    free(fz->first);
    free(fz->pages);
}

/* Copy each length into lens (read once) and check the copies; *total
 * counts the block-table entries they use, first[b] (if first) is request
 * b's first of them.  OUT_OF_BOUNDS for a bad length. */
static mla_status_t take_lengths(const mla_plan_t *plan, const struct mla_decode_args *a,
                                 int32_t *lens, int64_t *first, int64_t *total)
{
    const int64_t ps = plan->s.page_size;
    const int64_t cap = (int64_t)a->max_pages_per_seq * ps;
    *total = 0;
    for (int32_t b = 0; b < plan->batch; b++) {
        const int32_t len = lens[b] = a->seq_lens[b];
        if (len < 0)
            return mla__error(MLA_STATUS_OUT_OF_BOUNDS, "seq_lens[%d] = %d is negative",
                             (int)b, (int)len);
        if (len > plan->max_seq_len)
            return mla__error(MLA_STATUS_OUT_OF_BOUNDS,
                             "seq_lens[%d] = %d exceeds the plan's max_seq_len %d", (int)b,
                             (int)len, (int)plan->max_seq_len);
        if (len > cap)
            return mla__error(MLA_STATUS_OUT_OF_BOUNDS,
                             "seq_lens[%d] = %d exceeds max_pages_per_seq * MLA_PARAM_PAGE_SIZE = %lld",
                             (int)b, (int)len, (long long)cap);
        if (first)
            first[b] = *total;
        *total += (len + ps - 1) / ps;
    }
    return MLA_STATUS_SUCCESS;
}

/* Check each block-table entry the checked lengths use, read once (and
 * copied into pages, if pages).  OUT_OF_BOUNDS for a bad entry. */
static mla_status_t take_pages(const mla_plan_t *plan, const struct mla_decode_args *a,
                               const int32_t *lens, int32_t *pages)
{
    const int64_t ps = plan->s.page_size;
    int64_t k = 0;
    for (int32_t b = 0; b < plan->batch; b++) {
        const int32_t *bt = a->block_table + (int64_t)b * a->max_pages_per_seq;
        const int32_t len = lens[b], n = (int32_t)((len + ps - 1) / ps);
        for (int32_t p = 0; p < n; p++, k++) {
            const int32_t e = bt[p];
            if (pages)
                pages[k] = e;
            if (e < 0 || e >= a->num_pages)
                return mla__error(MLA_STATUS_OUT_OF_BOUNDS,
                                 "block_table[%d][%d] = %d is outside [0, num_pages = %lld) "
                                 "(request %d, length %d)",
                                 (int)b, (int)p, (int)e, (long long)a->num_pages, (int)b,
                                 (int)len);
        }
    }
    return MLA_STATUS_SUCCESS;
}

/*
 * Copy each length and each block-table entry it uses exactly once and
 * check the copies; the decode then reads only those.  Nothing is written
 * to the caller's buffers.  OUT_OF_BOUNDS for a bad value, OUT_OF_MEMORY
 * if the copy cannot be made.
 */
static mla_status_t freeze(const mla_plan_t *plan, const struct mla_decode_args *a,
                           struct frozen *fz)
{
    int64_t total = 0;
    memset(fz, 0, sizeof *fz);
    fz->lens = malloc((size_t)plan->batch * sizeof(int32_t));
    fz->first = malloc((size_t)plan->batch * sizeof(int64_t));
    if (!fz->lens || !fz->first)
        return mla__error(MLA_STATUS_OUT_OF_MEMORY, "out of host memory (CPU backend)");
    mla_status_t st = take_lengths(plan, a, fz->lens, fz->first, &total);
    if (st != MLA_STATUS_SUCCESS)
        return st;
    if ((uint64_t)total > SIZE_MAX / sizeof(int32_t) ||
        !(fz->pages = malloc((size_t)(total ? total : 1) * sizeof(int32_t))))
        return mla__error(MLA_STATUS_OUT_OF_MEMORY, "out of host memory (CPU backend)");
    return take_pages(plan, a, fz->lens, fz->pages);
}

/* Where a workspace keeps the schedule's lengths. */
static int32_t *ws_lengths(const struct mla_decode_args *a)
{
    return (int32_t *)(void *)((uint8_t *)a->workspace + MLA_WS_HEADER_BYTES);
}

/* The workspace header as the GPU's schedule leaves it. */
static void write_header(const mla_plan_t *plan, const struct mla_decode_args *a,
                         mla_status_t st)
{
    struct mla_ws_header h;
    memset(&h, 0, sizeof(h));
    h.status = (int32_t)st;
    h.magic = MLA_WS_MAGIC;
    h.plan_tag = plan->sched_tag;
    h.num_pieces = plan->batch;
    h.block_table = (uint64_t)(uintptr_t)a->block_table;
    h.num_pages = a->num_pages;
    h.max_pages_per_seq = a->max_pages_per_seq;
    memcpy(a->workspace, &h, sizeof(h));
}

mla_status_t mla__cpu_decode(const mla_plan_t *plan, const struct mla_decode_args *a)
{
    const struct mla_shape *s = &plan->s;
    struct job job;
    struct frozen fz;
    struct worker *w;
    mla_status_t st;
    int32_t items, rows;
    int nthreads, started, t;

    if (s->kv_format == MLA_FMT_FP8_E4M3 && s->scale_block && !a->scales)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                         "kv_block_scales is NULL but MLA_PARAM_SCALE_BLOCK_SIZE = %d",
                         (int)s->scale_block);
    st = freeze(plan, a, &fz);
    if (st != MLA_STATUS_SUCCESS) {
        frozen_free(&fz);
        if (st == MLA_STATUS_OUT_OF_BOUNDS)
            write_header(plan, a, st);
        return st;
    }

    job.a = a;
    job.lens = fz.lens;
    job.first = fz.first;
    job.pages = fz.pages;
    job.batch = plan->batch;
    job.q_len = s->q_len;
    job.h_q = s->num_heads;
    job.h_kv = s->num_kv_heads;
    job.hpk = s->num_heads / s->num_kv_heads;
    job.page_size = s->page_size;
    job.fmt = s->kv_format;
    job.row_bytes = mla_row_bytes(s->kv_format);
    job.scale_block = s->kv_format == MLA_FMT_FP8_E4M3 ? s->scale_block : 0;
    job.spr = job.scale_block ? (MLA_D_QK + job.scale_block - 1) / job.scale_block : 0;
    job.causal = s->causal != 0;
    job.softmax_scale = mla__softmax_scale(s);
    /* The kernels and the append path use kv_scale as an fp32 value. */
    job.kv_scale = s->kv_format == MLA_FMT_BF16 ? 1.0 : (double)(float)s->kv_scale;
    atomic_init(&job.next, 0);

    items = job.batch * job.h_kv;
    rows = job.q_len * job.hpk;
    nthreads = plan->cpu_threads > 1 ? plan->cpu_threads : 1;
    if (nthreads > items)
        nthreads = items;

    w = calloc((size_t)nthreads, sizeof *w);
    if (!w) {
        frozen_free(&fz);
        return mla__error(MLA_STATUS_OUT_OF_MEMORY, "out of host memory (CPU backend)");
    }
    /* Scratch for every thread before any output is written; fewer
     * threads if memory is short, failure only if not even one fits. */
    for (t = 0; t < nthreads; t++) {
        w[t].job = &job;
        if (scratch_alloc(&w[t].sc, rows) != 0)
            break;
    }
    if (t == 0) {
        free(w);
        frozen_free(&fz);
        return mla__error(MLA_STATUS_OUT_OF_MEMORY, "out of host memory (CPU backend)");
    }
    nthreads = t;

    /* Thread 0 is the caller; a thread that fails to start just leaves
     * its share to the others through the shared item counter. */
    started = 1;
    for (t = 1; t < nthreads; t++) {
        if (pthread_create(&w[t].tid, NULL, worker_main, &w[t]) != 0)
            break;
        started++;
    }
    worker_main(&w[0]);
    for (t = 1; t < started; t++)
        pthread_join(w[t].tid, NULL);

    for (t = 0; t < nthreads; t++)
        scratch_free(&w[t].sc);
    free(w);
    /* The schedule mla_schedule would leave: the lengths where
     * mla_decode_scheduled reads them, and the header. */
    memcpy(ws_lengths(a), fz.lens, (size_t)plan->batch * sizeof(int32_t));
    frozen_free(&fz);
    write_header(plan, a, MLA_STATUS_SUCCESS);
    return MLA_STATUS_SUCCESS;
}

/* mla_schedule: the checks of a decode and the lengths kept in the
 * workspace, without allocating.  A bad length or entry stops it (the
 * lengths past a bad one are not written, where the GPU's writes 0 for a
 * bad one) and makes the header's status OUT_OF_BOUNDS, which keeps
 * every decode off them. */
mla_status_t mla__cpu_schedule(const mla_plan_t *plan, const struct mla_decode_args *a)
{
    int64_t total;
    mla_status_t st = take_lengths(plan, a, ws_lengths(a), NULL, &total);
    if (st == MLA_STATUS_SUCCESS)
        st = take_pages(plan, a, ws_lengths(a), NULL);
    write_header(plan, a, st);
    return st;
}

/* mla_decode_scheduled: a decode over the lengths the schedule kept, if
 * the workspace holds a good schedule for this call's block table. */
mla_status_t mla__cpu_decode_scheduled(const mla_plan_t *plan, const struct mla_decode_args *a)
{
    struct mla_ws_header h;
    memcpy(&h, a->workspace, sizeof(h));
    /* As the GPU's decode: no schedule of this layout, nothing written
     * (mla_workspace_status finds none); this layout's schedule made for
     * another block table or cache, the call recorded as invalid. */
    if (h.magic != MLA_WS_MAGIC || h.plan_tag != plan->sched_tag)
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "workspace = %p holds no schedule of this plan's layout "
                          "(mla_schedule or mla_decode makes one)",
                          a->workspace);
    if (h.block_table != (uint64_t)(uintptr_t)a->block_table || h.num_pages != a->num_pages ||
        h.max_pages_per_seq != a->max_pages_per_seq) {
        h.status = (int32_t)MLA_STATUS_INVALID_ARGUMENT;
        memcpy(a->workspace, &h, sizeof(h));
        return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                          "the schedule in workspace = %p was made for another block_table, "
                          "max_pages_per_seq or num_pages",
                          a->workspace);
    }
    if (h.status != MLA_STATUS_SUCCESS)
        return mla__error((mla_status_t)h.status, "the schedule in workspace = %p recorded %s",
                          a->workspace, mla_status_string((mla_status_t)h.status));
    struct mla_decode_args b = *a;
    b.seq_lens = ws_lengths(a);
    return mla__cpu_decode(plan, &b);
}
