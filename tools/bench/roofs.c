/* roofs.c - the ceilings mla-bench reports fractions of: the device copy
 * rate (bytes read + written), the read-only streaming rate (the memory
 * roof of decode, which reads far more than it writes) and the assumed
 * tensor-core rate; and what the driver tells about the device.
 * SPDX-License-Identifier: MIT */
#include <dlfcn.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"

enum { REPS = 5 };

/* devmem_init has loaded libcuda already; RTLD_NOLOAD only finds it. */
void driver_query(struct meta *m, int device)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!h)
        return;
    int (*get_version)(int *) = (int (*)(int *))dlsym(h, "cuDriverGetVersion");
    int (*dev_get)(int *, int) = (int (*)(int *, int))dlsym(h, "cuDeviceGet");
    int (*get_attr)(int *, int, int) = (int (*)(int *, int, int))dlsym(h, "cuDeviceGetAttribute");
    int (*total_mem)(size_t *, int) = (int (*)(size_t *, int))dlsym(h, "cuDeviceTotalMem_v2");
    int v = 0, dev = 0, l2 = 0;
    size_t mem = 0;
    if (get_version && get_version(&v) == 0 && v > 0)
        snprintf(m->driver, sizeof(m->driver), "%d.%d", v / 1000, v % 1000 / 10);
    if (dev_get && dev_get(&dev, device) == 0) {
        /* 38: CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, in bytes. */
        if (m->l2_mb <= 0 && get_attr && get_attr(&l2, 38, dev) == 0 && l2 > 0) {
            m->l2_mb = l2 / 1e6;
            snprintf(m->l2_how, sizeof(m->l2_how), "from the driver");
        }
        if (total_mem && total_mem(&mem, dev) == 0)
            m->gpu_mem_gb = mem / 1e9;
    }
    dlclose(h);
}

static void not_measured(struct roof *r, const char *why, const char *detail)
{
    snprintf(r->how, sizeof(r->how), "not measured: %s%s%s", why, detail ? ": " : "",
             detail ? detail : "");
}

/* ---- GPU ---- */

/* Median of REPS device-to-device copies of bytes from a to b. */
static int time_copy(double *ms, devmem_ptr a, devmem_ptr b, size_t bytes, devmem_event e0,
                     devmem_event e1)
{
    double t[REPS];
    if (devmem_dtod(b, a, bytes) || devmem_sync())
        return -1;
    for (int i = 0; i < REPS; i++) {
        float f = 0;
        if (devmem_event_record(e0, NULL) || devmem_dtod(b, a, bytes) ||
            devmem_event_record(e1, NULL) || devmem_event_sync(e1) ||
            devmem_event_elapsed_ms(&f, e0, e1) || !(f > 0))
            return -1;
        t[i] = f;
    }
    *ms = median(t, REPS);
    return 0;
}

/* One untimed, then the median of REPS timed launches of fn. */
static int time_launches(double *ms, devmem_function fn, unsigned grid, void **args,
                         devmem_event e0, devmem_event e1)
{
    double t[REPS];
    if (devmem_launch(fn, grid, MLA_BENCH_READ_THREADS, 0, NULL, args) || devmem_sync())
        return -1;
    for (int i = 0; i < REPS; i++) {
        float f = 0;
        if (devmem_event_record(e0, NULL) ||
            devmem_launch(fn, grid, MLA_BENCH_READ_THREADS, 0, NULL, args) ||
            devmem_event_record(e1, NULL) || devmem_event_sync(e1) ||
            devmem_event_elapsed_ms(&f, e0, e1) || !(f > 0))
            return -1;
        t[i] = f;
    }
    *ms = median(t, REPS);
    return 0;
}

/* The read probe over bytes of a, one full wave of blocks; sink receives
 * nothing unless the probe is broken. */
static int time_read(double *ms, int *grid, devmem_ptr a, size_t bytes, devmem_ptr sink,
                     devmem_event e0, devmem_event e1, int sm_count, struct roof *r)
{
    devmem_module mod = NULL;
    devmem_function fn = NULL;
    int per_sm = 0, rc = -1;
    uint64_t n = bytes / 16;
    uint32_t key = 0xffffffffu; /* the fold of byte-filled vectors is 0 */
    void *args[] = {&a, &n, &sink, &key};
    if (devmem_module_load(&mod, mla_bench_read_ptx) ||
        devmem_module_function(&fn, mod, MLA_BENCH_READ_ENTRY) ||
        devmem_occupancy(&per_sm, fn, MLA_BENCH_READ_THREADS, 0)) {
        not_measured(r, "the read probe could not be loaded", devmem_last_error());
    } else {
        *grid = (per_sm > 0 ? per_sm : 1) * (sm_count > 0 ? sm_count : 1);
        rc = time_launches(ms, fn, (unsigned)*grid, args, e0, e1);
        if (rc)
            not_measured(r, "the read probe failed", devmem_last_error());
    }
    devmem_module_unload(mod);
    return rc;
}

/* Both bandwidths over the same buffers: 2 GiB each, halved until they fit. */
static void measure_gpu_bw(struct ceilings *c, int sm_count)
{
    devmem_ptr a = 0, b = 0;
    size_t bytes = ROOF_GPU_BYTES;
    for (; bytes >= ((size_t)64 << 20); bytes /= 2) {
        if (devmem_alloc(&a, bytes) == 0) {
            if (devmem_alloc(&b, bytes) == 0)
                break;
            devmem_free(a);
            a = 0;
        }
    }
    if (!b) {
        not_measured(&c->copy, "no device memory for the probe", NULL);
        not_measured(&c->read, "no device memory for the probe", NULL);
        return;
    }
    const char *less = bytes < ROOF_GPU_BYTES ? " (2 GiB could not be allocated)" : "";
    devmem_event e0 = NULL, e1 = NULL;
    double ms = 0;
    int grid = 0;
    int ok = devmem_memset8(a, 0x3c, bytes) == 0 && devmem_memset8(b, 0, bytes) == 0 &&
             devmem_event_create(&e0) == 0 && devmem_event_create(&e1) == 0;
    if (ok && time_copy(&ms, a, b, bytes, e0, e1) == 0) {
        c->copy.value = 2.0 * bytes / (ms * 1e-3) / 1e12;
        c->copy.measured = 1;
        snprintf(c->copy.how, sizeof(c->copy.how),
                 "cuMemcpyDtoD of %zu MiB timed with events, bytes read + written, median of "
                 "%d%s",
                 bytes >> 20, REPS, less);
    } else {
        not_measured(&c->copy, "the copy probe failed", devmem_last_error());
    }
    /* b, which the copy left equal to a, doubles as the never-written sink. */
    if (ok && time_read(&ms, &grid, a, bytes, b, e0, e1, sm_count, &c->read) == 0) {
        c->read.value = bytes / (ms * 1e-3) / 1e12;
        c->read.measured = 1;
        snprintf(c->read.how, sizeof(c->read.how),
                 "read-only streaming kernel (16-byte ld.global.nc.L1::no_allocate) over %zu MiB "
                 "in %d blocks of %d threads, events, median of %d%s",
                 bytes >> 20, grid, MLA_BENCH_READ_THREADS, REPS, less);
    } else if (!ok) {
        not_measured(&c->read, "the probe's buffers could not be set up", devmem_last_error());
    }
    devmem_event_destroy(e0);
    devmem_event_destroy(e1);
    devmem_free(a);
    devmem_free(b);
}

/* ---- CPU ---- */

/* XOR of every 64-bit word: a read-only pass the compiler cannot drop. */
static uint64_t fold(const uint64_t *w, size_t n)
{
    uint64_t x0 = 0, x1 = 0, x2 = 0, x3 = 0;
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        x0 ^= w[i];
        x1 ^= w[i + 1];
        x2 ^= w[i + 2];
        x3 ^= w[i + 3];
    }
    for (; i < n; i++)
        x0 ^= w[i];
    return x0 ^ x1 ^ x2 ^ x3;
}

static void measure_cpu_bw(struct ceilings *c)
{
    size_t bytes = ROOF_CPU_BYTES;
    char *a = malloc(bytes), *b = malloc(bytes);
    if (!a || !b) {
        not_measured(&c->copy, "no host memory for the probe", NULL);
        not_measured(&c->read, "no host memory for the probe", NULL);
        free(a);
        free(b);
        return;
    }
    double t[REPS], r[REPS];
    volatile uint64_t sink = 0;
    memset(a, 0x3c, bytes);
    memset(b, 0, bytes);
    memcpy(b, a, bytes);
    for (int i = 0; i < REPS; i++) {
        double t0 = problem_now_s();
        memcpy(b, a, bytes);
        t[i] = problem_now_s() - t0;
        /* Keep the copies from being optimized away. */
        a[(size_t)i * 4096 % bytes] ^= b[(size_t)(i + 1) * 4096 % bytes];
        t0 = problem_now_s();
        sink ^= fold((const uint64_t *)b, bytes / 8);
        r[i] = problem_now_s() - t0;
    }
    (void)sink;
    c->copy.value = 2.0 * bytes / median(t, REPS) / 1e12;
    c->copy.measured = 1;
    snprintf(c->copy.how, sizeof(c->copy.how),
             "host memcpy of %zu MiB, bytes read + written, median of %d", bytes >> 20, REPS);
    c->read.value = bytes / median(r, REPS) / 1e12;
    c->read.measured = 1;
    snprintf(c->read.how, sizeof(c->read.how),
             "host read of %zu MiB (XOR of 64-bit words), median of %d", bytes >> 20, REPS);
    free(a);
    free(b);
}

void measure_roofs(struct ceilings *c, const struct opts *o, const struct meta *m)
{
    c->copy.value = c->read.value = c->mma.value = NAN;
    if (o->no_ceilings) {
        snprintf(c->copy.how, sizeof(c->copy.how), "not measured (--no-ceilings)");
        snprintf(c->read.how, sizeof(c->read.how), "not measured (--no-ceilings)");
    } else if (m->gpu) {
        measure_gpu_bw(c, m->sm_count);
    } else {
        measure_cpu_bw(c);
    }
    if (o->mma_tflops > 0 || m->gpu) {
        c->mma.value = o->mma_tflops > 0 ? o->mma_tflops : DEFAULT_MMA_TFLOPS;
        snprintf(c->mma.how, sizeof(c->mma.how),
                 "assumed, not measured: --mma-tflops%s (mla-bench has no MMA probe)",
                 o->mma_tflops > 0 ? "" : " default, the dense BF16 rate measured on an H200");
    } else {
        snprintf(c->mma.how, sizeof(c->mma.how), "none on the CPU backend (--mma-tflops)");
    }
}
