/*
 * fuzz_api.c - libFuzzer target for the host API on the CPU backend:
 * config setters and getters, plan creation, and the argument checking of
 * mla_decode() and mla_kv_append(), with every buffer carved from one
 * arena between canary gaps.
 *
 * The input is a program: each step takes an opcode byte and its operands
 * from the bytes that follow (zeros once the input runs out).  The caller
 * it plays is honest about sizes (num_pages, max_pages_per_seq and the
 * workspace size describe memory that exists) but not about anything else:
 * values, lengths, block-table entries, slots, NULL, misaligned and
 * overlapping pointers all come from the input.  Checked after each call:
 *  - no canary gap between the buffers changed;
 *  - a failed call wrote none of its output buffers (the workspace's
 *    header excepted) and left a message naming the function;
 *  - a successful call left no message; every status is a known one.
 * AddressSanitizer and UBSan catch the rest.  Seeds: tests/fuzz/corpus/.
 *
 * SPDX-License-Identifier: MIT
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mla.h"
#include "mla_experimental.h"

/* ---- input ---------------------------------------------------------------- */

struct in {
    const uint8_t *p;
    size_t n;
};

static uint64_t take(struct in *in, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++) {
        v |= (uint64_t)(in->n ? *in->p : 0) << (8 * i);
        if (in->n)
            in->p++, in->n--;
    }
    return v;
}

#define U8(in) ((unsigned)take((in), 1))
#define U16(in) ((unsigned)take((in), 2))
#define U32(in) ((uint32_t)take((in), 4))

static void check(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_api: invariant broken: %s (last error \"%s\")\n", what,
                mla_last_error());
        abort();
    }
}

/* Integers worth trying: edges of every range, and anything. */
static int64_t pick_int(struct in *in)
{
    static const int64_t v[] = {0, 1, 2, 3, 7, 8, 9, 16, 31, 32, 33, 48, 64, 100, 127, 128,
                                129, 512, 576, 1023, 1024, 2048, 4096, -1, -2, INT32_MAX,
                                INT32_MIN, INT64_MAX, INT64_MIN, (int64_t)1 << 32};
    unsigned k = U8(in);
    if (k < 2 * (sizeof v / sizeof v[0]))
        return v[k % (sizeof v / sizeof v[0])];
    return (int64_t)take(in, 8);
}

static double pick_double(struct in *in)
{
    static const double v[] = {0.0, -0.0, 1.0, 0.5, 2.0, 1e-30, 1e30, 1e-31, 1e31, 0.0125,
                               1e-300, 1e300, -1.0, 0.041666666666666664};
    unsigned k = U8(in);
    if (k < 200)
        return v[k % (sizeof v / sizeof v[0])];
    if (k < 220)
        return NAN;
    if (k < 240)
        return k % 2 ? INFINITY : -INFINITY;
    uint64_t bits = take(in, 8);
    double d;
    memcpy(&d, &bits, sizeof d);
    return d;
}

static mla_param_t pick_param(struct in *in)
{
    /* 0x10000: MLA_XPARAM_KERNEL (the CPU backend ignores it); not
     * MLA_XPARAM_CPU_THREADS, which stays 1. */
    static const int v[] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 100, 101, 0, 14, 99, 102,
                            -1, 0x10000, 0x10002};
    unsigned k = U8(in);
    return (mla_param_t)(k < 240 ? v[k % (sizeof v / sizeof v[0])] : (int)U32(in));
}

/* ---- the arena: buffers between canary gaps --------------------------------- */

#define GAP 64
#define CANARY 0xCB
#define MAX_BUFS 8
#define ARENA_BYTES (4u << 20)

static uint8_t *g_arena;  /* ARENA_BYTES, 256-byte aligned */
static uint8_t *g_before; /* a copy, to see what a call wrote */

struct arena {
    size_t used;
    size_t off[MAX_BUFS], len[MAX_BUFS];
    int n;
};

/* A buffer of len bytes at a 256-byte boundary after a canary gap; NULL
 * when the arena is full. */
static uint8_t *carve(struct arena *a, size_t len)
{
    size_t off = (a->used + GAP + 255) / 256 * 256;
    if (a->n == MAX_BUFS || len > ARENA_BYTES || off + len + GAP > ARENA_BYTES)
        return NULL;
    a->off[a->n] = off;
    a->len[a->n] = len;
    a->n++;
    a->used = off + len;
    return g_arena + off;
}

static void arena_reset(struct arena *a)
{
    memset(a, 0, sizeof *a);
    memset(g_arena, CANARY, ARENA_BYTES);
}

/* Every byte outside the buffers still holds the canary. */
static void check_gaps(const struct arena *a)
{
    size_t pos = 0;
    for (int i = 0; i <= a->n; i++) {
        size_t end = i < a->n ? a->off[i] : a->used + GAP;
        if (end > ARENA_BYTES)
            end = ARENA_BYTES;
        for (size_t k = pos; k < end; k++)
            check(g_arena[k] == CANARY, "a canary gap was written");
        if (i < a->n)
            pos = a->off[i] + a->len[i];
    }
}

static void fill(struct in *in, uint8_t *p, size_t len)
{
    unsigned mode = U8(in) % 4;
    uint8_t seed = (uint8_t)U8(in);
    for (size_t i = 0; i < len; i++) {
        switch (mode) {
        case 0: p[i] = 0; break;
        case 1: p[i] = (uint8_t)(seed + i * 37); break;
        case 2: p[i] = (uint8_t)(i % 2 ? 0x3c : seed); break;
        default: p[i] = (uint8_t)(in->n ? take(in, 1) : i); break;
        }
    }
}

/* ---- calls ------------------------------------------------------------------ */

static mla_context_t *g_ctx;
static int g_verbose; /* MLA_FUZZ_VERBOSE=1: each call's status on stderr */

/* The message rules: a failure names the function, a success leaves "". */
static void check_message(mla_status_t st, const char *fn)
{
    const char *m = mla_last_error();
    if (g_verbose)
        fprintf(stderr, "%s -> %s%s%s\n", fn, mla_status_string(st), m[0] ? ": " : "", m);
    check(st >= MLA_STATUS_SUCCESS && st <= MLA_STATUS_INTERNAL_ERROR, "unknown status");
    if (st == MLA_STATUS_SUCCESS) {
        check(m[0] == '\0', "a success left a message");
    } else {
        size_t n = strlen(fn);
        check(strncmp(m, fn, n) == 0 && m[n] == ':', "a failure's message lacks its function");
    }
}

/* A pointer as the input wants it: as is, NULL, or misaligned by an odd
 * offset (which no alignment requirement admits, so the buffer is never
 * used past its end); an output of `need` bytes may also land on another
 * buffer of the call at least that large, which the library must refuse
 * (it overlaps a buffer the call is given; a smaller one could be
 * overrun without overlapping any, the caller's error, not the
 * library's). */
static void *mangle(struct in *in, void *p, void *const *others, const size_t *sizes,
                    int nothers, size_t need)
{
    unsigned k = U8(in);
    if (k < 200)
        return p;
    if (k < 215)
        return NULL;
    if (k < 235 || !others)
        return p ? (uint8_t *)p + 1 + 2 * (k % 8) : p;
    void *o = others[k % nothers];
    return sizes[k % nothers] >= need ? o : p;
}

static int64_t cfg_int(const mla_config_t *cfg, mla_param_t p)
{
    int64_t v = 0;
    check(mla_config_get_int(cfg, p, &v) == MLA_STATUS_SUCCESS, "get_int of a valid config");
    return v;
}

static void op_decode(struct in *in, mla_config_t *cfg)
{
    const int64_t h_q = cfg_int(cfg, MLA_PARAM_NUM_HEADS), h_kv = cfg_int(cfg, MLA_PARAM_NUM_KV_HEADS);
    const int64_t n = cfg_int(cfg, MLA_PARAM_Q_LEN), ps = cfg_int(cfg, MLA_PARAM_PAGE_SIZE);
    const int64_t rb = cfg_int(cfg, MLA_PARAM_KV_ROW_BYTES), spr = cfg_int(cfg, MLA_PARAM_SCALES_PER_ROW);
    const int32_t batch = (int32_t)(U8(in) % 4 ? 1 + U8(in) % 4 : pick_int(in));
    const int32_t max_seq_len = (int32_t)(U8(in) % 4 ? 1 + U16(in) % 300 : pick_int(in));
    mla_plan_t *plan = NULL;
    mla_status_t st = mla_plan_create(&plan, g_ctx, cfg, batch, max_seq_len);
    check_message(st, "mla_plan_create");
    check((st == MLA_STATUS_SUCCESS) == (plan != NULL), "plan set on failure, or not on success");
    if (st != MLA_STATUS_SUCCESS)
        return;
    size_t ws_size = 0;
    check(mla_plan_workspace_size(plan, &ws_size) == MLA_STATUS_SUCCESS, "workspace size");

    /* Keep each decode small: at most 64 query rows and 1024 cache rows. */
    const int64_t rows = (int64_t)batch * n * h_q;
    const int64_t num_pages = 1 + U8(in) % 8, mpps = 1 + U8(in) % 8;
    if (rows > 64 || num_pages * ps * h_kv > 1024) {
        mla_plan_destroy(plan);
        return;
    }
    for (int rep = 0; rep < 2; rep++) {
        struct arena a;
        arena_reset(&a);
        uint8_t *q = carve(&a, (size_t)rows * 1152);
        uint8_t *kv = carve(&a, (size_t)(num_pages * ps * h_kv * rb));
        uint8_t *sc = spr ? carve(&a, (size_t)(num_pages * ps * h_kv * spr * 4)) : NULL;
        uint8_t *bt = carve(&a, (size_t)(batch * mpps * 4));
        uint8_t *lens = carve(&a, (size_t)batch * 4);
        uint8_t *out = carve(&a, (size_t)rows * 1024);
        uint8_t *lse = carve(&a, (size_t)rows * 4);
        uint8_t *ws = carve(&a, ws_size);
        if (!q || !kv || (spr && !sc) || !bt || !lens || !out || !lse || !ws)
            break;
        fill(in, q, (size_t)rows * 1152);
        fill(in, kv, (size_t)(num_pages * ps * h_kv * rb));
        if (sc)
            fill(in, sc, (size_t)(num_pages * ps * h_kv * spr * 4));
        /* Lengths and entries: mostly in range, sometimes anything. */
        for (int32_t b = 0; b < batch; b++) {
            int64_t cap = mpps * ps < 256 ? mpps * ps : 256; /* keeps a decode cheap */
            int32_t len = U8(in) < 220 ? (int32_t)(U16(in) % (cap + 1)) : (int32_t)U32(in);
            memcpy(lens + 4 * b, &len, 4);
        }
        for (int64_t e = 0; e < batch * mpps; e++) {
            int32_t v = U8(in) < 230 ? (int32_t)(U8(in) % num_pages) : (int32_t)U32(in);
            memcpy(bt + 4 * e, &v, 4);
        }
        memset(out, 0xA5, (size_t)rows * 1024);
        memset(lse, 0xA5, (size_t)rows * 4);
        const int with_lse = U8(in) % 4 != 0;
        /* Outputs may land only on buffers the call is given, where the
         * overlap must be refused (an unused lse would be a legal, if
         * undersized, workspace). */
        void *all[] = {q, kv, bt, lens, out, ws, with_lse ? (void *)lse : (void *)out};
        const size_t out_bytes = (size_t)rows * 1024, lse_bytes = (size_t)rows * 4;
        const size_t sizes[] = {(size_t)rows * 1152, (size_t)(num_pages * ps * h_kv * rb),
                                (size_t)(batch * mpps * 4), (size_t)batch * 4, out_bytes, ws_size,
                                with_lse ? lse_bytes : out_bytes};
        void *pq = mangle(in, q, NULL, NULL, 0, 0), *pkv = mangle(in, kv, NULL, NULL, 0, 0);
        void *pbt = mangle(in, bt, NULL, NULL, 0, 0), *plens = mangle(in, lens, NULL, NULL, 0, 0);
        void *pout = mangle(in, out, all, sizes, 7, out_bytes);
        void *plse = with_lse ? mangle(in, lse, all, sizes, 7, lse_bytes) : NULL;
        void *pws = mangle(in, ws, all, sizes, 7, ws_size);
        float *psc = U8(in) < 240 ? (float *)(void *)sc : (float *)(void *)(sc ? NULL : lse);
        size_t wss = U8(in) < 240 ? ws_size : ws_size - U8(in) % (ws_size + 1);
        int32_t mp = U8(in) < 240 ? (int32_t)mpps : (int32_t)(mpps - 1 - U8(in) % 3);
        memcpy(g_before, g_arena, a.used + GAP);

        st = mla_decode(plan, pq, pkv, psc, num_pages, pbt, mp, plens, pout, plse, pws, wss, NULL);
        check_message(st, "mla_decode");
        check_gaps(&a);
        if (st != MLA_STATUS_SUCCESS) {
            /* Nothing written but the workspace's header (the status
             * word and the schedule's identity, mla_workspace_status). */
            size_t ws_off = (size_t)((uintptr_t)pws - (uintptr_t)g_arena);
            for (size_t k = 0; k < a.used; k++)
                check(g_arena[k] == g_before[k] || (k >= ws_off && k < ws_off + 64),
                      "a failed decode wrote a buffer");
        }
        if (st == MLA_STATUS_SUCCESS || st == MLA_STATUS_OUT_OF_BOUNDS) {
            mla_status_t dst = MLA_STATUS_INTERNAL_ERROR;
            check(pws == ws, "a call with a misplaced workspace passed the checks");
            check(mla_workspace_status(plan, ws, &dst) == MLA_STATUS_SUCCESS, "workspace status");
            check(dst == st, "workspace status differs from the call's");
        }
    }
    /* The read-back calls' own checks. */
    mla_status_t dst;
    st = mla_workspace_status(plan, U8(in) % 2 ? NULL : g_arena + 1, &dst);
    check(st != MLA_STATUS_SUCCESS, "workspace status of a bad pointer");
    check_message(st, "mla_workspace_status");
    st = mla_plan_workspace_size(plan, NULL);
    check_message(st, "mla_plan_workspace_size");
    mla_plan_destroy(plan);
}

static void op_append(struct in *in, mla_config_t *cfg)
{
    int64_t h_kv = 0, ps = 0, rb = 0, spr = 0;
    if (mla_config_get_int(cfg, MLA_PARAM_NUM_KV_HEADS, &h_kv) ||
        mla_config_get_int(cfg, MLA_PARAM_PAGE_SIZE, &ps) ||
        mla_config_get_int(cfg, MLA_PARAM_KV_ROW_BYTES, &rb) ||
        mla_config_get_int(cfg, MLA_PARAM_SCALES_PER_ROW, &spr))
        return;
    const int64_t num_pages = 1 + U8(in) % 8, nrows = U8(in) % 9;
    if (num_pages * ps * h_kv > 2048)
        return;
    struct arena a;
    arena_reset(&a);
    const size_t kv_bytes = (size_t)(num_pages * ps * h_kv * rb);
    const size_t sc_bytes = (size_t)(num_pages * ps * h_kv * spr * 4);
    uint8_t *kv = carve(&a, kv_bytes);
    uint8_t *sc = spr ? carve(&a, sc_bytes) : NULL;
    uint8_t *lat = carve(&a, (size_t)(nrows * h_kv * 1152) + 1);
    uint8_t *slots = carve(&a, (size_t)nrows * 8 + 1);
    if (!kv || (spr && !sc) || !lat || !slots)
        return;
    fill(in, kv, kv_bytes);
    if (sc)
        fill(in, sc, sc_bytes);
    fill(in, lat, (size_t)(nrows * h_kv * 1152));
    for (int64_t i = 0; i < nrows; i++) {
        int64_t s = U8(in) < 220 ? (int64_t)(U16(in) % (num_pages * ps + 2)) - 1 : pick_int(in);
        memcpy(slots + 8 * i, &s, 8);
    }
    void *all[] = {kv, lat, slots, sc ? (void *)sc : (void *)kv};
    const size_t sizes[] = {kv_bytes, (size_t)(nrows * h_kv * 1152) + 1, (size_t)nrows * 8 + 1,
                            sc ? sc_bytes : kv_bytes};
    void *pkv = mangle(in, kv, all, sizes, 4, kv_bytes), *plat = mangle(in, lat, NULL, NULL, 0, 0);
    void *pslots = mangle(in, slots, NULL, NULL, 0, 0);
    float *psc = U8(in) < 240 ? (float *)(void *)sc : (float *)(void *)(sc ? NULL : lat);
    int64_t n = U8(in) < 240 ? nrows : pick_int(in);
    if (n > nrows)
        n = U8(in) % 2 ? -n : nrows; /* never more rows than the buffers hold */
    memcpy(g_before, g_arena, a.used + GAP);

    mla_status_t st = mla_kv_append(g_ctx, cfg, pkv, psc, num_pages, plat, pslots, n, NULL);
    check_message(st, "mla_kv_append");
    check_gaps(&a);
    if (st != MLA_STATUS_SUCCESS)
        check(memcmp(g_arena, g_before, a.used) == 0, "a failed append wrote a buffer");
}

/* ---- the program -------------------------------------------------------------- */

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    g_verbose = getenv("MLA_FUZZ_VERBOSE") && atoi(getenv("MLA_FUZZ_VERBOSE")) > 0;
    if (mla_context_create(&g_ctx, MLA_DEVICE_CPU) != MLA_STATUS_SUCCESS)
        abort();
    g_arena = aligned_alloc(256, ARENA_BYTES);
    g_before = malloc(ARENA_BYTES);
    if (!g_arena || !g_before)
        abort();
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct in in = {data, size};
    mla_config_t *cfg = NULL, *copy = NULL;
    mla_status_t st = mla_config_create(&cfg);
    check(st == MLA_STATUS_SUCCESS && cfg, "config create");
    /* One thread per decode: fast and deterministic. */
    st = mla_config_set_int(cfg, MLA_XPARAM_CPU_THREADS, 1);
    check(st == MLA_STATUS_SUCCESS, "MLA_XPARAM_CPU_THREADS");
    for (int step = 0; step < 24 && in.n; step++) {
        switch (U8(&in) % 8) {
        case 0:
        case 1: {
            mla_param_t p = pick_param(&in);
            int64_t v = pick_int(&in), before = 0, after = 0;
            int readable = mla_config_get_int(cfg, p, &before) == MLA_STATUS_SUCCESS;
            st = mla_config_set_int(cfg, p, v);
            check_message(st, "mla_config_set_int");
            if (st != MLA_STATUS_SUCCESS && readable)
                check(mla_config_get_int(cfg, p, &after) == MLA_STATUS_SUCCESS && after == before,
                      "a refused set_int changed the config");
            break;
        }
        case 2: {
            mla_param_t p = pick_param(&in);
            double v = pick_double(&in), d = 0;
            st = mla_config_set_float(cfg, p, v);
            check_message(st, "mla_config_set_float");
            st = mla_config_get_float(cfg, p, U8(&in) % 8 ? &d : NULL);
            check_message(st, "mla_config_get_float");
            break;
        }
        case 3: {
            int64_t v;
            st = mla_config_get_int(cfg, pick_param(&in), U8(&in) % 8 ? &v : NULL);
            check_message(st, "mla_config_get_int");
            break;
        }
        case 4:
        case 5:
            op_decode(&in, cfg);
            break;
        case 6:
            op_append(&in, cfg);
            break;
        default:
            mla_config_destroy(copy);
            copy = NULL;
            st = mla_config_copy(&copy, cfg);
            check_message(st, "mla_config_copy");
            /* Continue on the copy: the original must keep working. */
            if (st == MLA_STATUS_SUCCESS && U8(&in) % 2) {
                mla_config_t *t = cfg;
                cfg = copy;
                copy = t;
            }
            break;
        }
    }
    mla_config_destroy(copy);
    mla_config_destroy(cfg);
    return 0;
}
