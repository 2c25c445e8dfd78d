/* error.c - per-thread error messages.
 *
 * Each thread has its own last message, tagged with the handle (context
 * or config) of the call that left it, so that calls running at once on
 * one handle never share a buffer.  The state hangs off a pthread key
 * rather than __thread: dynamic TLS would make libmla.so need ld.so's
 * __tls_get_addr, and initial-exec TLS can fail under dlopen(); pthread
 * keys are in libc and work in a dlopen()ed library.
 *
 * SPDX-License-Identifier: MIT */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct thread_error {
    const void *handle; /* what the message is about; NULL for no handle */
    uint64_t serial;    /* and that handle's serial */
    const char *func;   /* the public function running, for the prefix */
    char msg[MLA_ERRMSG_LEN];
};

static pthread_key_t key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_ok;

static void make_key(void)
{
    key_ok = pthread_key_create(&key, free) == 0;
}

/* At dlclose(): no thread may later run a destructor that is gone (the
 * remaining buffers are left to the process). */
__attribute__((destructor)) static void drop_key(void)
{
    if (key_ok)
        pthread_key_delete(key);
    key_ok = 0;
}

/* The calling thread's state, made on its first call (a few hundred
 * bytes, freed when the thread exits); NULL if that allocation failed,
 * and the thread's calls then leave no message. */
static struct thread_error *state(int make)
{
    struct thread_error *e;
    if (pthread_once(&key_once, make_key) != 0 || !key_ok)
        return NULL;
    e = pthread_getspecific(key);
    if (!e && make) {
        e = calloc(1, sizeof *e);
        if (e && pthread_setspecific(key, e) != 0) {
            free(e);
            e = NULL;
        }
    }
    return e;
}

mla_status_t mla__fail(char *buf, mla_status_t status, const char *fmt, ...)
{
    if (buf) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(buf, MLA_ERRMSG_LEN, fmt, ap);
        va_end(ap);
    }
    return status;
}

void mla__enter(const char *func)
{
    struct thread_error *e = state(1);
    if (e) {
        e->handle = NULL;
        e->func = func;
        e->msg[0] = '\0';
    }
}

void mla__bind(const void *handle, uint64_t serial)
{
    struct thread_error *e = state(0);
    if (e) {
        e->handle = handle;
        e->serial = serial;
    }
}

mla_status_t mla__error(mla_status_t status, const char *fmt, ...)
{
    struct thread_error *e = state(1);
    int n = 0;
    va_list ap;
    if (!e)
        return status;
    if (e->func)
        n = snprintf(e->msg, sizeof e->msg, "%s: ", e->func);
    if (n < 0 || (size_t)n >= sizeof e->msg)
        n = 0;
    va_start(ap, fmt);
    vsnprintf(e->msg + n, sizeof e->msg - (size_t)n, fmt, ap);
    va_end(ap);
    return status;
}

const char *mla__message(const void *handle, uint64_t serial)
{
    const struct thread_error *e = state(0);
    if (!e)
        return "";
    return !handle || (e->handle == handle && e->serial == serial) ? e->msg : "";
}

uint64_t mla__new_serial(void)
{
    static atomic_uint_fast64_t next = 1;
    return atomic_fetch_add_explicit(&next, 1, memory_order_relaxed);
}

const char *mla_last_error(void)
{
    return mla__message(NULL, 0);
}
