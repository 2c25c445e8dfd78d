/*
 * problem.c - random MLA decode problems, the CPU reference for sampled
 * requests and the tolerance check shared by mla-demo and mla-bench.
 *
 * SPDX-License-Identifier: MIT
 */
#include "problem.h"

#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "devmem.h"
#include "fp8_codec.h"

static char last_error[512];

static void set_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
}

const char *problem_last_error(void)
{
    return last_error;
}

/* 256-byte aligned (the API wants 16), NULL with a message on failure. */
static void *alloc_bytes(size_t bytes)
{
    void *p = aligned_alloc(256, (bytes + 255) / 256 * 256 + 256 * (bytes == 0));
    if (!p)
        set_error("out of host memory (%zu bytes)", bytes);
    return p;
}

void *problem_xalloc(const char *prog, size_t bytes)
{
    void *p = alloc_bytes(bytes);
    if (!p) {
        fprintf(stderr, "%s: %s\n", prog, last_error);
        exit(1);
    }
    return p;
}

double problem_now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* ---- random numbers ---- */

uint64_t problem_rng_next(struct problem_rng *r)
{
    uint64_t z = (r->s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

double problem_rng_uniform(struct problem_rng *r)
{
    return (double)(problem_rng_next(r) >> 11) * (1.0 / 9007199254740992.0);
}

double problem_rng_normal(struct problem_rng *r)
{
    double u = problem_rng_uniform(r), v = problem_rng_uniform(r);
    return sqrt(-2.0 * log(u + 1e-300)) * cos(6.283185307179586 * v);
}

uint64_t problem_hash(uint64_t seed, uint64_t index)
{
    struct problem_rng r = {seed ^ (index * 0xd1b54a32d192ed03ull)};
    problem_rng_next(&r);
    return problem_rng_next(&r);
}

/* Inputs through a table of 2^16 draws indexed by 16 random bits, so that
 * filling gigabyte caches takes seconds, not minutes. */
static uint16_t input_table[1 << 16];

void problem_inputs_init(uint64_t seed)
{
    struct problem_rng r = {seed};
    for (int i = 0; i < (1 << 16); i++)
        input_table[i] =
            mla_float_to_bf16((float)fmin(1.0, fmax(-1.0, problem_rng_normal(&r) / 10.0)));
}

/* Fill n bf16 values, four per 64-bit draw. */
static void fill_inputs(uint16_t *dst, size_t n, struct problem_rng *r)
{
    size_t i = 0;
    while (i < n) {
        uint64_t bits = problem_rng_next(r);
        for (int k = 0; k < 4 && i < n; k++, i++, bits >>= 16)
            dst[i] = input_table[bits & 0xffff];
    }
}

static const char *const lens_names[PROBLEM_LENS_COUNT] = {"fixed", "normal", "flashmla", "mix"};

const char *problem_lens_name(int dist)
{
    return dist >= 0 && dist < PROBLEM_LENS_COUNT ? lens_names[dist] : NULL;
}

int problem_lens_parse(const char *name)
{
    for (int i = 0; i < PROBLEM_LENS_COUNT; i++)
        if (!strcmp(name, lens_names[i]))
            return i;
    return -1;
}

/* A few long requests among many short ones, the mean kept at seq_len:
 * round(batch / 16) long ones (at least one) share half of the keys, the
 * others the rest.  The long ones sit at random places (selection
 * sampling), as an engine's batch would hold them. */
static void draw_mix(int32_t *lens, int batch, int seq_len, struct problem_rng *r)
{
    if (batch < 2) {
        for (int b = 0; b < batch; b++)
            lens[b] = seq_len;
        return;
    }
    int nlong = (batch + 8) / 16 > 0 ? (batch + 8) / 16 : 1;
    double half = (double)batch * seq_len / 2.0;
    int32_t longlen = (int32_t)fmax(1.0, round(half / nlong));
    int32_t shortlen = (int32_t)fmax(1.0, round(half / (batch - nlong)));
    int left = nlong;
    for (int b = 0; b < batch; b++) {
        int take = left > 0 && problem_rng_uniform(r) * (batch - b) < left;
        left -= take;
        lens[b] = take ? longlen : shortlen;
    }
}

void problem_draw_lens(int32_t *lens, int batch, int seq_len, int dist, int q_len,
                       uint64_t seed)
{
    struct problem_rng r = {problem_hash(seed, (uint64_t)seq_len)};
    if (dist == PROBLEM_LENS_MIX) {
        r.s = problem_hash(r.s, (uint64_t)batch);
        draw_mix(lens, batch, seq_len, &r);
        return;
    }
    for (int b = 0; b < batch; b++) {
        int len = seq_len;
        double x;
        switch (dist) {
        case PROBLEM_LENS_NORMAL:
            x = seq_len + problem_rng_normal(&r) * seq_len / 2.0;
            len = (int)fmin(fmax(x, 1.0), 2.0 * seq_len);
            break;
        case PROBLEM_LENS_FLASHMLA:
            /* max(random.normalvariate(s, s / 2), s_q) stored as int32, as
             * FlashMLA's tests and benchmark draw them: no upper bound. */
            x = seq_len + problem_rng_normal(&r) * seq_len / 2.0;
            len = (int)fmin(fmax(x, q_len > 1 ? q_len : 1), (double)(1 << 30));
            break;
        default: break;
        }
        lens[b] = len;
    }
}

/* ---- layout ---- */

static int pages_of(int len, int page_size)
{
    return (len + page_size - 1) / page_size;
}

/* Sizes, lengths and a block table over randomly permuted pages: the
 * pages each request needs, plus one spare page that every table entry
 * past a request's last page names.  Cache bytes are NaN (0xff is NaN in
 * e4m3 and in bf16), scales NaN. */
static int layout(struct problem *p, int batch, const int32_t *lens, int page_size, int kv_heads,
                  int row_bytes, int spr, uint64_t seed)
{
    memset(p, 0, sizeof(*p));
    p->batch = batch;
    p->kv_heads = kv_heads;
    p->page_size = page_size;
    p->row_bytes = row_bytes;
    p->spr = spr;
    p->max_len = 1; /* plans need max_seq_len >= 1 */
    int64_t used = 0;
    for (int b = 0; b < batch; b++) {
        if (lens[b] < 0) {
            set_error("request %d: negative length %d", b, (int)lens[b]);
            return -1;
        }
        if (lens[b] > p->max_len)
            p->max_len = lens[b];
        used += pages_of(lens[b], page_size);
    }
    if (used + 1 > INT32_MAX) {
        set_error("%lld pages do not fit int32 block-table entries", (long long)used + 1);
        return -1;
    }
    p->max_pages = pages_of(p->max_len, page_size);
    p->num_pages = (int)used + 1;
    p->lens = alloc_bytes(sizeof(int32_t) * (size_t)batch);
    p->table = alloc_bytes(sizeof(int32_t) * (size_t)batch * p->max_pages);
    int32_t *perm = alloc_bytes(sizeof(int32_t) * (size_t)p->num_pages);
    size_t rows = (size_t)p->num_pages * page_size * kv_heads;
    p->kv_bytes = rows * row_bytes;
    p->kv = alloc_bytes(p->kv_bytes);
    if (spr) {
        p->scale_bytes = rows * spr * sizeof(float);
        p->scales = alloc_bytes(p->scale_bytes);
    }
    if (!p->lens || !p->table || !perm || !p->kv || (spr && !p->scales)) {
        free(perm);
        problem_free(p);
        return -1;
    }
    memcpy(p->lens, lens, sizeof(int32_t) * (size_t)batch);
    struct problem_rng r = {seed};
    for (int i = 0; i < p->num_pages; i++)
        perm[i] = i;
    for (int i = p->num_pages - 1; i > 0; i--) {
        int j = (int)(problem_rng_next(&r) % (uint64_t)(i + 1));
        int32_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    int32_t spare = perm[p->num_pages - 1];
    int k = 0;
    for (int b = 0; b < batch; b++) {
        int np = pages_of(lens[b], page_size);
        for (int pg = 0; pg < p->max_pages; pg++)
            p->table[(size_t)b * p->max_pages + pg] = pg < np ? perm[k++] : spare;
    }
    free(perm);
    memset(p->kv, 0xff, p->kv_bytes);
    for (size_t i = 0; i < rows * spr; i++)
        p->scales[i] = NAN;
    return 0;
}

static void row_sizes(const mla_config_t *cfg, int *page_size, int *kv_heads, int *row_bytes,
                      int *spr)
{
    int64_t v = 0;
    mla_config_get_int(cfg, MLA_PARAM_PAGE_SIZE, &v);
    *page_size = (int)v;
    mla_config_get_int(cfg, MLA_PARAM_NUM_KV_HEADS, &v);
    *kv_heads = (int)v;
    mla_config_get_int(cfg, MLA_PARAM_KV_ROW_BYTES, &v);
    *row_bytes = (int)v;
    mla_config_get_int(cfg, MLA_PARAM_SCALES_PER_ROW, &v);
    *spr = (int)v;
}

/* ---- generation, on worker threads ---- */

struct gen_job {
    struct problem *p;
    const mla_config_t *cfg;
    uint64_t seed;
    atomic_int next;       /* next request to fill */
    atomic_int failed;     /* set by the first failure */
    pthread_mutex_t lock;  /* guards the error text */
};

/* Append request by request in chunks, as an engine's steps would. */
static void *gen_worker(void *arg)
{
    struct gen_job *j = arg;
    struct problem *p = j->p;
    enum { CHUNK = 4096 };
    mla_context_t *cpu = NULL; /* one per thread: contexts hold error text */
    uint16_t *lat = NULL;
    int64_t *slots = NULL;
    mla_status_t st = mla_context_create(&cpu, MLA_DEVICE_CPU);
    if (st) {
        pthread_mutex_lock(&j->lock);
        set_error("mla_context_create (cpu): %s", mla_status_string(st));
        pthread_mutex_unlock(&j->lock);
        atomic_store(&j->failed, 1);
        return NULL;
    }
    lat = malloc((size_t)CHUNK * p->kv_heads * 576 * 2);
    slots = malloc(sizeof(int64_t) * CHUNK);
    if (!lat || !slots) {
        pthread_mutex_lock(&j->lock);
        set_error("out of host memory (generation buffers)");
        pthread_mutex_unlock(&j->lock);
        atomic_store(&j->failed, 1);
    }
    for (;;) {
        if (atomic_load(&j->failed))
            break;
        int b = atomic_fetch_add(&j->next, 1);
        if (b >= p->batch)
            break;
        struct problem_rng r = {problem_hash(j->seed, (uint64_t)b)};
        for (int t0 = 0; t0 < p->lens[b]; t0 += CHUNK) {
            int n = p->lens[b] - t0 < CHUNK ? p->lens[b] - t0 : CHUNK;
            fill_inputs(lat, (size_t)n * p->kv_heads * 576, &r);
            for (int i = 0; i < n; i++) {
                int t = t0 + i;
                slots[i] = (int64_t)p->table[(size_t)b * p->max_pages + t / p->page_size] *
                               p->page_size +
                           t % p->page_size;
            }
            st = mla_kv_append(cpu, j->cfg, p->kv, p->scales, p->num_pages, lat, slots, n,
                               NULL);
            if (st) {
                pthread_mutex_lock(&j->lock);
                set_error("mla_kv_append: %s: %s", mla_status_string(st),
                          mla_context_last_error(cpu));
                pthread_mutex_unlock(&j->lock);
                atomic_store(&j->failed, 1);
                break;
            }
        }
    }
    free(lat);
    free(slots);
    mla_context_destroy(cpu);
    return NULL;
}

int problem_generate(struct problem *p, const mla_config_t *cfg, int batch, const int32_t *lens,
                     uint64_t seed, int threads)
{
    int page_size, kv_heads, row_bytes, spr;
    row_sizes(cfg, &page_size, &kv_heads, &row_bytes, &spr);
    if (layout(p, batch, lens, page_size, kv_heads, row_bytes, spr, problem_hash(seed, ~0ull)))
        return -1;

    struct gen_job j = {.p = p, .cfg = cfg, .seed = seed};
    atomic_init(&j.next, 0);
    atomic_init(&j.failed, 0);
    pthread_mutex_init(&j.lock, NULL);
    if (threads > batch)
        threads = batch;
    if (threads < 1)
        threads = 1;
    pthread_t *tid = calloc((size_t)threads, sizeof(*tid));
    int started = 0;
    /* A thread that fails to start leaves its share to the others. */
    for (int t = 1; tid && t < threads; t++) {
        if (pthread_create(&tid[started], NULL, gen_worker, &j) != 0)
            break;
        started++;
    }
    gen_worker(&j);
    for (int t = 0; t < started; t++)
        pthread_join(tid[t], NULL);
    free(tid);
    pthread_mutex_destroy(&j.lock);
    if (atomic_load(&j.failed)) {
        problem_free(p);
        return -1;
    }
    return 0;
}

int problem_subset(struct problem *dst, const struct problem *src, int batch, const int32_t *lens,
                   uint64_t seed)
{
    if (batch > src->batch) {
        set_error("subset of %d requests from a problem of %d", batch, src->batch);
        return -1;
    }
    for (int b = 0; b < batch; b++) {
        if (lens[b] > src->lens[b]) {
            set_error("request %d: length %d exceeds the generated %d", b, (int)lens[b],
                      (int)src->lens[b]);
            return -1;
        }
    }
    if (layout(dst, batch, lens, src->page_size, src->kv_heads, src->row_bytes, src->spr, seed))
        return -1;
    size_t page_rows = (size_t)src->page_size * src->kv_heads;
    size_t page_bytes = page_rows * src->row_bytes, page_scales = page_rows * src->spr;
    for (int b = 0; b < batch; b++) {
        int np = pages_of(lens[b], src->page_size);
        for (int pg = 0; pg < np; pg++) {
            size_t from = (size_t)src->table[(size_t)b * src->max_pages + pg];
            size_t to = (size_t)dst->table[(size_t)b * dst->max_pages + pg];
            memcpy(dst->kv + to * page_bytes, src->kv + from * page_bytes, page_bytes);
            if (src->spr)
                memcpy(dst->scales + to * page_scales, src->scales + from * page_scales,
                       sizeof(float) * page_scales);
        }
        /* The source may hold data past the new length: NaN it again. */
        int tail = lens[b] % src->page_size;
        if (np > 0 && tail) {
            size_t to = (size_t)dst->table[(size_t)b * dst->max_pages + np - 1];
            size_t r0 = to * page_rows + (size_t)tail * src->kv_heads, r1 = (to + 1) * page_rows;
            memset(dst->kv + r0 * src->row_bytes, 0xff, (r1 - r0) * src->row_bytes);
            for (size_t i = r0 * src->spr; i < r1 * src->spr; i++)
                dst->scales[i] = NAN;
        }
    }
    return 0;
}

int problem_make_q(struct problem *p, int q_len, int heads, uint64_t seed)
{
    free(p->q);
    p->q_len = q_len;
    p->heads = heads;
    p->q_bytes = (size_t)p->batch * q_len * heads * 576 * 2;
    p->out_bytes = (size_t)p->batch * q_len * heads * 512 * 2;
    p->lse_bytes = (size_t)p->batch * q_len * heads * sizeof(float);
    p->q = alloc_bytes(p->q_bytes);
    if (!p->q)
        return -1;
    struct problem_rng r = {seed};
    fill_inputs(p->q, p->q_bytes / 2, &r);
    return 0;
}

void problem_free(struct problem *p)
{
    free(p->lens);
    free(p->table);
    free(p->q);
    free(p->kv);
    free(p->scales);
    memset(p, 0, sizeof(*p));
}

/* ---- work, check, reference ---- */

void problem_work(const struct problem *p, int causal, double *bytes, double *flops,
                  double *keys)
{
    double k = 0, visible = 0;
    int n = p->q_len;
    for (int b = 0; b < p->batch; b++) {
        int len = p->lens[b];
        k += len;
        if (causal && n > 1) {
            for (int i = 0; i < n; i++) {
                int v = len - n + 1 + i;
                visible += v < 0 ? 0 : v > len ? len : v;
            }
        } else {
            visible += (double)n * len;
        }
    }
    if (bytes)
        *bytes = k * p->kv_heads * (p->row_bytes + 4.0 * p->spr) + (double)p->q_bytes +
                 (double)p->out_bytes;
    if (flops)
        *flops = 2.0 * (576 + 512) * visible * p->heads;
    if (keys)
        *keys = k;
}

long problem_compare(const uint16_t *out, const uint16_t *ref, size_t n, const float *lse,
                     const float *lse_ref, size_t nl, double *max_err, double *cos_diff)
{
    long bad = 0;
    double dot = 0, na = 0, nb = 0;
    *max_err = 0;
    for (size_t i = 0; i < n; i++) {
        double a = mla_bf16_to_float(out[i]), r = mla_bf16_to_float(ref[i]);
        if (isnan(a) != isnan(r) || isinf(a) != isinf(r)) {
            bad++;
            continue;
        }
        if (!isfinite(r))
            continue;
        double e = fabs(a - r);
        if (e > *max_err)
            *max_err = e;
        if (e > 8e-4 && e > 2.01 / 128 * fabs(r))
            bad++;
        dot += a * r;
        na += a * a;
        nb += r * r;
    }
    *cos_diff = (na > 0 && nb > 0) ? 1.0 - dot / sqrt(na * nb) : 0.0;
    if (*cos_diff > 5e-6)
        bad++;
    for (size_t i = 0; i < nl; i++) {
        double a = lse[i], r = lse_ref[i];
        if (isnan(a) || isnan(r) || isinf(r) || isinf(a)) {
            bad += !(a == r);
            continue;
        }
        double e = fabs(a - r);
        if (e > 1e-6 && e > 8.01 / 65536 * fabs(r))
            bad++;
    }
    return bad;
}

mla_status_t problem_cpu_reference(const struct problem *p, mla_context_t *cpu,
                                   const mla_config_t *cfg, const int *reqs, int nreq,
                                   uint16_t *out, float *lse)
{
    size_t qrow = (size_t)p->q_len * p->heads * 576;
    int32_t *lens = alloc_bytes(sizeof(int32_t) * (size_t)nreq);
    int32_t *table = alloc_bytes(sizeof(int32_t) * (size_t)nreq * p->max_pages);
    uint16_t *q = alloc_bytes(sizeof(uint16_t) * qrow * nreq);
    mla_plan_t *plan = NULL;
    void *ws = NULL;
    size_t ws_bytes = 0;
    mla_status_t st = MLA_STATUS_OUT_OF_MEMORY;
    if (!lens || !table || !q)
        goto out;
    int max_len = 1;
    for (int i = 0; i < nreq; i++) {
        int b = reqs[i];
        lens[i] = p->lens[b];
        if (lens[i] > max_len)
            max_len = lens[i];
        memcpy(table + (size_t)i * p->max_pages, p->table + (size_t)b * p->max_pages,
               sizeof(int32_t) * p->max_pages);
        memcpy(q + qrow * i, p->q + qrow * b, sizeof(uint16_t) * qrow);
    }
    st = mla_plan_create(&plan, cpu, cfg, nreq, max_len);
    if (st) {
        set_error("mla_plan_create (cpu): %s: %s", mla_status_string(st),
                  mla_context_last_error(cpu));
        goto out;
    }
    mla_plan_workspace_size(plan, &ws_bytes);
    ws = alloc_bytes(ws_bytes);
    if (!ws) {
        st = MLA_STATUS_OUT_OF_MEMORY;
        goto out;
    }
    st = mla_decode(plan, q, p->kv, p->scales, p->num_pages, table, p->max_pages, lens, out, lse,
                    ws, ws_bytes, NULL);
    if (st)
        set_error("mla_decode (cpu): %s: %s", mla_status_string(st), mla_context_last_error(cpu));
out:
    free(ws);
    mla_plan_destroy(plan);
    free(lens);
    free(table);
    free(q);
    return st;
}

mla_context_t *problem_open_gpu(int device, char *why, size_t why_len)
{
    mla_context_t *ctx;
    char driver[256] = "";
    /* Ask libmla first: only it knows whether it was built with CUDA, so
     * only then is the driver's own reason the one that matters. */
    mla_status_t st = mla_context_create(&ctx, device);
    switch (st) {
    case MLA_STATUS_SUCCESS:
        if (devmem_init(device, driver, sizeof(driver)) == 0)
            return ctx;
        snprintf(why, why_len, "GPU %d: libmla opened it, but the tool's driver calls failed: %s",
                 device, *driver ? driver : devmem_last_error());
        mla_context_destroy(ctx);
        return NULL;
    case MLA_STATUS_NOT_SUPPORTED:
        snprintf(why, why_len, "this libmla was built without the CUDA backend");
        return NULL;
    case MLA_STATUS_NO_DEVICE: {
        int rc = devmem_init(device, driver, sizeof(driver));
        if (rc == 0) {
            devmem_fini();
            snprintf(why, why_len, "no CUDA device %d", device);
        } else {
            snprintf(why, why_len, "%s", rc > 0 ? driver : devmem_last_error());
        }
        return NULL;
    }
    case MLA_STATUS_NO_KERNEL_IMAGE:
        snprintf(why, why_len, "GPU %d: this libmla has no kernels for its architecture",
                 device);
        return NULL;
    default:
        snprintf(why, why_len, "GPU %d unusable: %s", device, mla_status_string(st));
        return NULL;
    }
}
