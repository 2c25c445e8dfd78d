/*
 * devmem.c - CUDA driver-API helper for tests and tools, loaded with
 * dlopen so that programs run (and skip) on machines without a driver.
 *
 * SPDX-License-Identifier: MIT
 */
#include "devmem.h"

#include <dlfcn.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The few driver types needed, ABI-identical to cuda.h's. */
typedef int cu_result; /* CUresult; 0 is CUDA_SUCCESS */
typedef int cu_device;
typedef struct CUctx_st *cu_context;

#define CU_OK 0
#define CU_ERROR_NO_DEVICE 100
#define CU_STREAM_NON_BLOCKING 1
#define CU_EVENT_DEFAULT 0
#define CU_ATTR_SM_COUNT 16
#define CU_ATTR_CC_MAJOR 75
#define CU_ATTR_CC_MINOR 76
#define CU_JIT_ERROR_LOG_BUFFER 5
#define CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES 6

/* Exported symbol names are those of the ABI each pointer type spells out
 * (the _v2 names are what cuda.h maps the plain names to). */
static struct {
    cu_result (*init)(unsigned);
    cu_result (*get_error_name)(cu_result, const char **);
    cu_result (*get_error_string)(cu_result, const char **);
    cu_result (*device_get)(cu_device *, int);
    cu_result (*device_get_count)(int *);
    cu_result (*device_get_name)(char *, int, cu_device);
    cu_result (*device_get_attribute)(int *, int, cu_device);
    cu_result (*primary_retain)(cu_context *, cu_device);
    cu_result (*primary_release)(cu_device);
    cu_result (*ctx_set_current)(cu_context);
    cu_result (*ctx_synchronize)(void);
    cu_result (*mem_alloc)(devmem_ptr *, size_t);
    cu_result (*mem_free)(devmem_ptr);
    cu_result (*htod)(devmem_ptr, const void *, size_t);
    cu_result (*dtoh)(void *, devmem_ptr, size_t);
    cu_result (*dtod)(devmem_ptr, devmem_ptr, size_t);
    cu_result (*memset8)(devmem_ptr, unsigned char, size_t);
    cu_result (*htod_async)(devmem_ptr, const void *, size_t, devmem_stream);
    cu_result (*memset8_async)(devmem_ptr, unsigned char, size_t, devmem_stream);
    cu_result (*stream_create)(devmem_stream *, unsigned);
    cu_result (*stream_destroy)(devmem_stream);
    cu_result (*stream_sync)(devmem_stream);
    cu_result (*event_create)(devmem_event *, unsigned);
    cu_result (*event_destroy)(devmem_event);
    cu_result (*event_record)(devmem_event, devmem_stream);
    cu_result (*event_sync)(devmem_event);
    cu_result (*event_elapsed)(float *, devmem_event, devmem_event);
    cu_result (*capture_begin)(devmem_stream, int);
    cu_result (*capture_end)(devmem_stream, devmem_graph *);
    cu_result (*graph_instantiate)(devmem_graph_exec *, devmem_graph, unsigned long long);
    cu_result (*graph_launch)(devmem_graph_exec, devmem_stream);
    cu_result (*graph_destroy)(devmem_graph);
    cu_result (*graph_exec_destroy)(devmem_graph_exec);
    cu_result (*module_load)(devmem_module *, const void *, unsigned, int *, void **);
    cu_result (*module_unload)(devmem_module);
    cu_result (*module_function)(devmem_function *, devmem_module, const char *);
    cu_result (*occupancy)(int *, devmem_function, int, size_t);
    cu_result (*launch)(devmem_function, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                        unsigned, devmem_stream, void **, void **);
} cu;

struct sym {
    const char *name, *alt; /* alt: older spelling tried second, or NULL */
    void **slot;
};

#define S(field, name, alt) {name, alt, (void **)&cu.field}
static const struct sym syms[] = {
    S(init, "cuInit", NULL),
    S(get_error_name, "cuGetErrorName", NULL),
    S(get_error_string, "cuGetErrorString", NULL),
    S(device_get, "cuDeviceGet", NULL),
    S(device_get_count, "cuDeviceGetCount", NULL),
    S(device_get_name, "cuDeviceGetName", NULL),
    S(device_get_attribute, "cuDeviceGetAttribute", NULL),
    S(primary_retain, "cuDevicePrimaryCtxRetain", NULL),
    S(primary_release, "cuDevicePrimaryCtxRelease_v2", "cuDevicePrimaryCtxRelease"),
    S(ctx_set_current, "cuCtxSetCurrent", NULL),
    S(ctx_synchronize, "cuCtxSynchronize", NULL),
    S(mem_alloc, "cuMemAlloc_v2", NULL),
    S(mem_free, "cuMemFree_v2", NULL),
    S(htod, "cuMemcpyHtoD_v2", NULL),
    S(dtoh, "cuMemcpyDtoH_v2", NULL),
    S(dtod, "cuMemcpyDtoD_v2", NULL),
    S(memset8, "cuMemsetD8_v2", NULL),
    S(htod_async, "cuMemcpyHtoDAsync_v2", NULL),
    S(memset8_async, "cuMemsetD8Async", NULL),
    S(stream_create, "cuStreamCreate", NULL),
    S(stream_destroy, "cuStreamDestroy_v2", NULL),
    S(stream_sync, "cuStreamSynchronize", NULL),
    S(event_create, "cuEventCreate", NULL),
    S(event_destroy, "cuEventDestroy_v2", NULL),
    S(event_record, "cuEventRecord", NULL),
    S(event_sync, "cuEventSynchronize", NULL),
    S(event_elapsed, "cuEventElapsedTime_v2", "cuEventElapsedTime"),
    S(capture_begin, "cuStreamBeginCapture_v2", NULL),
    S(capture_end, "cuStreamEndCapture", NULL),
    S(graph_instantiate, "cuGraphInstantiateWithFlags", NULL),
    S(graph_launch, "cuGraphLaunch", NULL),
    S(graph_destroy, "cuGraphDestroy", NULL),
    S(graph_exec_destroy, "cuGraphExecDestroy", NULL),
    S(module_load, "cuModuleLoadDataEx", NULL),
    S(module_unload, "cuModuleUnload", NULL),
    S(module_function, "cuModuleGetFunction", NULL),
    S(occupancy, "cuOccupancyMaxActiveBlocksPerMultiprocessor", NULL),
    S(launch, "cuLaunchKernel", NULL),
};
#undef S

static int loaded;           /* 1 once every symbol resolved */
static cu_device dev;
static cu_context primary;   /* retained primary context, or NULL */
static int dev_ordinal = -1;
static char last_err[512];

static void set_err(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void set_err(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_err, sizeof(last_err), fmt, ap);
    va_end(ap);
}

/* Report a failed call: record and print it, return -1. */
static int fail(cu_result r, const char *what)
{
    const char *name = NULL, *text = NULL;
    if (loaded) {
        if (cu.get_error_name(r, &name) != CU_OK)
            name = NULL;
        if (cu.get_error_string(r, &text) != CU_OK)
            text = NULL;
    }
    set_err("%s: %s: %s", what, name ? name : "CUDA error", text ? text : "no description");
    fprintf(stderr, "devmem: %s (error %d)\n", last_err, r);
    return -1;
}

#define CALL(expr, what)                                                          \
    do {                                                                          \
        cu_result r_ = (expr);                                                    \
        if (r_ != CU_OK)                                                          \
            return fail(r_, what);                                                \
    } while (0)

static void set_why(char *why, size_t n, const char *msg)
{
    if (why && n)
        snprintf(why, n, "%s", msg);
}

const char *devmem_last_error(void)
{
    return last_err;
}

int devmem_init(int device, char *why, size_t why_len)
{
    if (!loaded) {
        void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            set_err("no CUDA driver: %s", e ? e : "dlopen(libcuda.so.1) failed");
            set_why(why, why_len, last_err);
            return 1;
        }
        for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++) {
            void *p = dlsym(h, syms[i].name);
            if (!p && syms[i].alt)
                p = dlsym(h, syms[i].alt);
            if (!p) {
                set_err("CUDA driver lacks %s", syms[i].name);
                set_why(why, why_len, last_err);
                return 1;
            }
            *syms[i].slot = p;
        }
        loaded = 1;
        cu_result r = cu.init(0);
        if (r != CU_OK) {
            fail(r, "cuInit");
            loaded = 0; /* try again, and say why, next time */
            set_why(why, why_len, last_err);
            return 1;
        }
    }
    if (primary && device == dev_ordinal) {
        CALL(cu.ctx_set_current(primary), "cuCtxSetCurrent");
        return 0;
    }
    if (primary)
        devmem_fini();
    int count = 0;
    CALL(cu.device_get_count(&count), "cuDeviceGetCount");
    if (device < 0 || device >= count) {
        set_err("CUDA device %d does not exist (%d visible)", device, count);
        set_why(why, why_len, last_err);
        return 1;
    }
    CALL(cu.device_get(&dev, device), "cuDeviceGet");
    CALL(cu.primary_retain(&primary, dev), "cuDevicePrimaryCtxRetain");
    dev_ordinal = device;
    CALL(cu.ctx_set_current(primary), "cuCtxSetCurrent");
    return 0;
}

void devmem_fini(void)
{
    if (primary) {
        cu.ctx_set_current(NULL);
        cu.primary_release(dev);
        primary = NULL;
        dev_ordinal = -1;
    }
}

int devmem_device_info(char *name, size_t name_len, int *cc_major, int *cc_minor, int *sm_count)
{
    if (!primary) {
        set_err("devmem_device_info: devmem_init not called");
        return -1;
    }
    if (name && name_len)
        CALL(cu.device_get_name(name, (int)name_len, dev), "cuDeviceGetName");
    if (cc_major)
        CALL(cu.device_get_attribute(cc_major, CU_ATTR_CC_MAJOR, dev), "cuDeviceGetAttribute");
    if (cc_minor)
        CALL(cu.device_get_attribute(cc_minor, CU_ATTR_CC_MINOR, dev), "cuDeviceGetAttribute");
    if (sm_count)
        CALL(cu.device_get_attribute(sm_count, CU_ATTR_SM_COUNT, dev), "cuDeviceGetAttribute");
    return 0;
}

int devmem_alloc(devmem_ptr *p, size_t bytes)
{
    *p = 0;
    /* cuMemAlloc rejects 0 bytes; callers get a valid, tiny allocation. */
    CALL(cu.mem_alloc(p, bytes ? bytes : 1), "cuMemAlloc");
    return 0;
}

void devmem_free(devmem_ptr p)
{
    if (p && loaded) {
        cu_result r = cu.mem_free(p);
        if (r != CU_OK)
            fail(r, "cuMemFree");
    }
}

int devmem_htod(devmem_ptr dst, const void *src, size_t bytes)
{
    if (bytes)
        CALL(cu.htod(dst, src, bytes), "cuMemcpyHtoD");
    return 0;
}

int devmem_dtoh(void *dst, devmem_ptr src, size_t bytes)
{
    if (bytes)
        CALL(cu.dtoh(dst, src, bytes), "cuMemcpyDtoH");
    return 0;
}

int devmem_dtod(devmem_ptr dst, devmem_ptr src, size_t bytes)
{
    if (bytes)
        CALL(cu.dtod(dst, src, bytes), "cuMemcpyDtoD");
    return 0;
}

int devmem_memset8(devmem_ptr dst, unsigned char value, size_t bytes)
{
    if (bytes)
        CALL(cu.memset8(dst, value, bytes), "cuMemsetD8");
    return 0;
}

int devmem_htod_async(devmem_ptr dst, const void *src, size_t bytes, devmem_stream s)
{
    if (bytes)
        CALL(cu.htod_async(dst, src, bytes, s), "cuMemcpyHtoDAsync");
    return 0;
}

int devmem_memset8_async(devmem_ptr dst, unsigned char value, size_t bytes, devmem_stream s)
{
    if (bytes)
        CALL(cu.memset8_async(dst, value, bytes, s), "cuMemsetD8Async");
    return 0;
}

int devmem_sync(void)
{
    CALL(cu.ctx_synchronize(), "cuCtxSynchronize");
    return 0;
}

int devmem_stream_create(devmem_stream *s)
{
    *s = NULL;
    CALL(cu.stream_create(s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
    return 0;
}

int devmem_stream_destroy(devmem_stream s)
{
    if (s)
        CALL(cu.stream_destroy(s), "cuStreamDestroy");
    return 0;
}

int devmem_stream_sync(devmem_stream s)
{
    CALL(cu.stream_sync(s), "cuStreamSynchronize");
    return 0;
}

int devmem_event_create(devmem_event *e)
{
    *e = NULL;
    CALL(cu.event_create(e, CU_EVENT_DEFAULT), "cuEventCreate");
    return 0;
}

int devmem_event_destroy(devmem_event e)
{
    if (e)
        CALL(cu.event_destroy(e), "cuEventDestroy");
    return 0;
}

int devmem_event_record(devmem_event e, devmem_stream s)
{
    CALL(cu.event_record(e, s), "cuEventRecord");
    return 0;
}

int devmem_event_sync(devmem_event e)
{
    CALL(cu.event_sync(e), "cuEventSynchronize");
    return 0;
}

int devmem_event_elapsed_ms(float *ms, devmem_event start, devmem_event end)
{
    CALL(cu.event_elapsed(ms, start, end), "cuEventElapsedTime");
    return 0;
}

int devmem_capture_begin(devmem_stream s, int mode)
{
    CALL(cu.capture_begin(s, mode), "cuStreamBeginCapture");
    return 0;
}

int devmem_capture_end(devmem_stream s, devmem_graph *g)
{
    *g = NULL;
    CALL(cu.capture_end(s, g), "cuStreamEndCapture");
    return 0;
}

int devmem_graph_instantiate(devmem_graph_exec *x, devmem_graph g)
{
    *x = NULL;
    CALL(cu.graph_instantiate(x, g, 0), "cuGraphInstantiateWithFlags");
    return 0;
}

int devmem_graph_launch(devmem_graph_exec x, devmem_stream s)
{
    CALL(cu.graph_launch(x, s), "cuGraphLaunch");
    return 0;
}

int devmem_graph_destroy(devmem_graph g)
{
    if (g)
        CALL(cu.graph_destroy(g), "cuGraphDestroy");
    return 0;
}

int devmem_graph_exec_destroy(devmem_graph_exec x)
{
    if (x)
        CALL(cu.graph_exec_destroy(x), "cuGraphExecDestroy");
    return 0;
}

int devmem_module_load(devmem_module *m, const void *image)
{
    char log[1024] = "";
    int opt[2] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
    void *val[2] = {log, (void *)(uintptr_t)sizeof(log)};
    *m = NULL;
    cu_result r = cu.module_load(m, image, 2, opt, val);
    if (r != CU_OK) {
        log[sizeof(log) - 1] = '\0';
        for (char *c = log; *c; c++)
            if (*c == '\n')
                *c = ' ';
        char what[1100];
        snprintf(what, sizeof(what), "cuModuleLoadDataEx%s%s", log[0] ? ": " : "", log);
        return fail(r, what);
    }
    return 0;
}

int devmem_module_unload(devmem_module m)
{
    if (m)
        CALL(cu.module_unload(m), "cuModuleUnload");
    return 0;
}

int devmem_module_function(devmem_function *f, devmem_module m, const char *name)
{
    *f = NULL;
    CALL(cu.module_function(f, m, name), "cuModuleGetFunction");
    return 0;
}

int devmem_occupancy(int *blocks_per_sm, devmem_function f, int block, size_t shared_bytes)
{
    *blocks_per_sm = 0;
    CALL(cu.occupancy(blocks_per_sm, f, block, shared_bytes),
         "cuOccupancyMaxActiveBlocksPerMultiprocessor");
    return 0;
}

int devmem_launch(devmem_function f, unsigned grid, unsigned block, unsigned shared_bytes,
                  devmem_stream s, void **params)
{
    CALL(cu.launch(f, grid, 1, 1, block, 1, 1, shared_bytes, s, params, NULL), "cuLaunchKernel");
    return 0;
}
