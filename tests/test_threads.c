/* test_threads.c - several threads on one CPU context at once: decodes,
 * appends and plan creations that succeed and fail side by side, each
 * thread reading only its own error messages.  Meant to run under
 * ThreadSanitizer too (configure --enable-sanitizers=thread).
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mla.h"
#include "mla_experimental.h"

enum { HEADS = 16, BATCH = 2, PAGES = 4, PAGE = 16, THREADS = 4 };

/* Shared, read-only while the threads run: one context, one config, one
 * plan and the cache. */
static mla_context_t *g_ctx;
static mla_config_t *g_cfg;
static mla_plan_t *g_plan;
static size_t g_ws_size;
static uint8_t *g_kv;

/* Buffers of one thread. */
struct bufs {
    uint16_t *q, *out, *lat;
    float *lse;
    void *ws;
    uint8_t *kv; /* the thread's own cache, for appends */
    int32_t table[BATCH * 2], lens[BATCH];
};

static void setup(void)
{
    ck_assert_int_eq(mla_context_create(&g_ctx, MLA_DEVICE_CPU), 0);
    ck_assert_int_eq(mla_config_create(&g_cfg), 0);
    /* Worker threads inside each decode too. */
    ck_assert_int_eq(mla_config_set_int(g_cfg, MLA_XPARAM_CPU_THREADS, 2), 0);
    ck_assert_int_eq(mla_config_set_int(g_cfg, MLA_PARAM_NUM_HEADS, HEADS), 0);
    ck_assert_int_eq(mla_config_set_int(g_cfg, MLA_PARAM_PAGE_SIZE, PAGE), 0);
    ck_assert_int_eq(mla_plan_create(&g_plan, g_ctx, g_cfg, BATCH, 2 * PAGE), 0);
    ck_assert_int_eq(mla_plan_workspace_size(g_plan, &g_ws_size), 0);
    g_kv = aligned_alloc(64, PAGES * PAGE * 1152);
    ck_assert_ptr_nonnull(g_kv);
    for (size_t i = 0; i < PAGES * PAGE * 576; i++)
        ((uint16_t *)g_kv)[i] = (uint16_t)(0x3c00 + i % 64);
}

static void teardown(void)
{
    mla_plan_destroy(g_plan);
    mla_config_destroy(g_cfg);
    mla_context_destroy(g_ctx);
    free(g_kv);
}

static void bufs_init(struct bufs *b)
{
    b->q = aligned_alloc(64, BATCH * HEADS * 576 * 2);
    b->out = aligned_alloc(64, BATCH * HEADS * 512 * 2);
    b->lat = aligned_alloc(64, 576 * 2);
    b->lse = aligned_alloc(64, BATCH * HEADS * sizeof(float));
    b->ws = aligned_alloc(256, (g_ws_size + 255) / 256 * 256);
    b->kv = aligned_alloc(64, PAGES * PAGE * 1152);
    ck_assert(b->q && b->out && b->lat && b->lse && b->ws && b->kv);
    for (int i = 0; i < BATCH * HEADS * 576; i++)
        b->q[i] = (uint16_t)(0x3c00 + i % 7);
    for (int i = 0; i < 576; i++)
        b->lat[i] = 0x3f80;
    b->table[0] = 0, b->table[1] = 1, b->table[2] = 2, b->table[3] = 3;
    b->lens[0] = 20, b->lens[1] = 5;
}

static void bufs_free(struct bufs *b)
{
    free(b->q), free(b->out), free(b->lat), free(b->lse), free(b->ws), free(b->kv);
}

/* ---- one thread's failure survives another thread's calls ---------------- */

static pthread_barrier_t g_bar;
static char g_seen[2][512];

static void *failer(void *arg)
{
    mla_plan_t *p = NULL;
    (void)arg;
    mla_status_t st = mla_plan_create(&p, g_ctx, g_cfg, 0, 16); /* batch 0 */
    pthread_barrier_wait(&g_bar); /* the other thread now calls on g_ctx */
    pthread_barrier_wait(&g_bar);
    snprintf(g_seen[0], sizeof g_seen[0], "%d %s", (int)st, mla_context_last_error(g_ctx));
    return NULL;
}

static void *succeeder(void *arg)
{
    struct bufs *b = arg;
    pthread_barrier_wait(&g_bar);
    mla_status_t st = mla_decode(g_plan, b->q, g_kv, NULL, PAGES, b->table, 2, b->lens, b->out,
                                 b->lse, b->ws, g_ws_size, NULL);
    snprintf(g_seen[1], sizeof g_seen[1], "%d %s", (int)st, mla_context_last_error(g_ctx));
    pthread_barrier_wait(&g_bar);
    return NULL;
}

START_TEST(messages_are_per_thread)
{
    struct bufs b;
    pthread_t t[2];
    setup();
    bufs_init(&b);
    pthread_barrier_init(&g_bar, NULL, 2);
    pthread_create(&t[0], NULL, failer, NULL);
    pthread_create(&t[1], NULL, succeeder, &b);
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    pthread_barrier_destroy(&g_bar);
    /* The successful decode on the same context neither cleared nor
     * replaced the failing thread's message. */
    ck_assert_str_eq(g_seen[0], "1 mla_plan_create: batch = 0: want a value in [1, 65535]");
    ck_assert_str_eq(g_seen[1], "0 ");
    /* This thread made no call that failed. */
    ck_assert_str_eq(mla_context_last_error(g_ctx), "");
    bufs_free(&b);
    teardown();
}
END_TEST

/* ---- many calls at once ------------------------------------------------------ */

struct worker {
    pthread_t tid;
    int id;
    int errors;
    char first_error[256];
};

static void note_failure(struct worker *w, const char *what, const char *got)
{
    if (w->errors++ == 0)
        snprintf(w->first_error, sizeof w->first_error, "thread %d: %s: \"%s\"", w->id, what,
                 got);
}

static void expect(struct worker *w, mla_status_t st, mla_status_t want, const char *msg,
                   const char *what)
{
    const char *got = mla_context_last_error(g_ctx);
    if (st != want)
        note_failure(w, what, mla_status_string(st));
    else if (strcmp(got, msg) != 0)
        note_failure(w, what, got);
}

static void *stress(void *arg)
{
    struct worker *w = arg;
    struct bufs b;
    char want[128];
    bufs_init(&b);
    for (int it = 0; it < 40; it++) {
        mla_plan_t *p = NULL;
        mla_config_t *cfg = NULL;
        int64_t slot = w->id * PAGE + it % PAGE;
        mla_status_t st;
        /* A decode that succeeds on the shared plan. */
        st = mla_decode(g_plan, b.q, g_kv, NULL, PAGES, b.table, 2, b.lens, b.out, b.lse, b.ws,
                        g_ws_size, NULL);
        expect(w, st, MLA_STATUS_SUCCESS, "", "decode");
        /* One that fails, with this thread's own value in the message. */
        st = mla_decode(g_plan, b.q, g_kv, NULL, PAGES, b.table, -w->id - 1, b.lens, b.out,
                        b.lse, b.ws, g_ws_size, NULL);
        snprintf(want, sizeof want, "mla_decode: max_pages_per_seq = %d: want at least 1",
                 -w->id - 1);
        expect(w, st, MLA_STATUS_INVALID_ARGUMENT, want, "failing decode");
        /* Plans made from the shared config, and refused. */
        st = mla_plan_create(&p, g_ctx, g_cfg, 1 + w->id, 64);
        expect(w, st, MLA_STATUS_SUCCESS, "", "plan");
        mla_plan_destroy(p);
        st = mla_plan_create(&p, g_ctx, g_cfg, 1, -w->id);
        snprintf(want, sizeof want, "mla_plan_create: max_seq_len = %d: want a value in [1, %d]",
                 -w->id, 1 << 24);
        expect(w, st, MLA_STATUS_INVALID_ARGUMENT, want, "failing plan");
        /* Appends into this thread's cache, and one past its end. */
        st = mla_kv_append(g_ctx, g_cfg, b.kv, NULL, PAGES, b.lat, &slot, 1, NULL);
        expect(w, st, MLA_STATUS_SUCCESS, "", "append");
        slot = PAGES * PAGE + w->id;
        st = mla_kv_append(g_ctx, g_cfg, b.kv, NULL, PAGES, b.lat, &slot, 1, NULL);
        if (st != MLA_STATUS_OUT_OF_BOUNDS ||
            strncmp(mla_context_last_error(g_ctx), "mla_kv_append: slots[0] = ", 26) != 0)
            note_failure(w, "failing append", mla_context_last_error(g_ctx));
        /* A config of its own, refused a value. */
        if (mla_config_copy(&cfg, g_cfg) != MLA_STATUS_SUCCESS)
            note_failure(w, "copy", mla_config_last_error(g_cfg));
        st = mla_config_set_int(cfg, MLA_PARAM_Q_LEN, 9 + w->id);
        snprintf(want, sizeof want, "mla_config_set_int: MLA_PARAM_Q_LEN = %d: want a value in "
                 "[1, 8]", 9 + w->id);
        if (st != MLA_STATUS_INVALID_ARGUMENT || strcmp(mla_config_last_error(cfg), want) != 0)
            note_failure(w, "config", mla_config_last_error(cfg));
        mla_config_destroy(cfg);
    }
    bufs_free(&b);
    return NULL;
}

/* A config made at the address of one destroyed while another thread
 * still held a message about it is a new handle in that thread too: its
 * last-error text starts empty there.  (Where the allocator never hands
 * the address out again, ASan's and valgrind's, there is nothing to
 * check, and the test says so.) */
static mla_config_t *g_old, *g_new;
static const void *g_old_addr;
static mla_status_t g_old_st;

static void *stale_holder(void *arg)
{
    char *seen = arg;
    g_old_st = mla_config_set_int(g_old, MLA_PARAM_PAGE_SIZE, 48); /* a message about g_old */
    pthread_barrier_wait(&g_bar);                       /* the main thread replaces g_old */
    pthread_barrier_wait(&g_bar);
    if (g_new)
        snprintf(seen, 256, "%s", mla_config_last_error(g_new));
    else
        snprintf(seen, 256, "%s", mla_last_error());
    return NULL;
}

START_TEST(message_not_inherited)
{
    mla_config_t *base, *held[64];
    char seen[256] = "unset";
    int n = 0;
    pthread_t t;
    ck_assert_int_eq(mla_config_create(&base), 0);
    ck_assert_int_eq(mla_config_copy(&g_old, base), 0);
    g_old_addr = g_old;
    g_new = NULL;
    pthread_barrier_init(&g_bar, NULL, 2);
    ck_assert_int_eq(pthread_create(&t, NULL, stale_holder, seen), 0);
    pthread_barrier_wait(&g_bar);
    mla_config_destroy(g_old);
    while (n < 64 && !g_new) {
        ck_assert_int_eq(mla_config_copy(&held[n], base), 0);
        if ((const void *)held[n] == g_old_addr)
            g_new = held[n];
        n++;
    }
    pthread_barrier_wait(&g_bar);
    pthread_join(t, NULL);
    pthread_barrier_destroy(&g_bar);
    ck_assert_int_eq(g_old_st, MLA_STATUS_INVALID_ARGUMENT);
    if (g_new) {
        ck_assert_str_eq(seen, "");
    } else { /* the thread's own message is still there */
        ck_assert_ptr_nonnull(strstr(seen, "MLA_PARAM_PAGE_SIZE"));
        printf("message_not_inherited: no config was made at the freed address; not checked\n");
    }
    for (int i = 0; i < n; i++)
        mla_config_destroy(held[i]);
    mla_config_destroy(base);
}
END_TEST

START_TEST(concurrent_calls)
{
    struct worker w[THREADS];
    setup();
    memset(w, 0, sizeof w);
    for (int i = 0; i < THREADS; i++) {
        w[i].id = i;
        ck_assert_int_eq(pthread_create(&w[i].tid, NULL, stress, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(w[i].tid, NULL);
    for (int i = 0; i < THREADS; i++)
        ck_assert_msg(w[i].errors == 0, "%d errors, first: %s", w[i].errors, w[i].first_error);
    teardown();
}
END_TEST

int main(void)
{
    Suite *s = suite_create("threads");
    TCase *tc = tcase_create("core");
    tcase_set_timeout(tc, 300);
    tcase_add_test(tc, messages_are_per_thread);
    tcase_add_test(tc, message_not_inherited);
    tcase_add_test(tc, concurrent_calls);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
