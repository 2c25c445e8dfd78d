/*
 * devmem.h - a small CUDA driver-API helper for libmla's tests and tools
 * (not part of libmla): device memory, copies, streams, events and graph
 * capture, and modules of PTX or cubin images, on a device's primary
 * context.
 *
 * The driver is loaded with dlopen at run time, so programs using this
 * start on machines without a driver and can report "skip" instead of
 * failing to load.  No CUDA header is needed.
 *
 * Every int-returning function returns 0 on success; on failure it prints
 * "devmem: <call>: <CUDA error name>: <text>" to stderr, keeps the same
 * text for devmem_last_error(), and returns -1.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_DEVMEM_H
#define MLA_DEVMEM_H

#include <stddef.h>
#include <stdint.h>

/* CUdeviceptr, CUstream (the type libmla's API takes), CUevent, CUgraph,
 * CUgraphExec, CUmodule, CUfunction. */
typedef uint64_t devmem_ptr;
typedef struct CUstream_st *devmem_stream;
typedef struct CUevent_st *devmem_event;
typedef struct CUgraph_st *devmem_graph;
typedef struct CUgraphExec_st *devmem_graph_exec;
typedef struct CUmod_st *devmem_module;
typedef struct CUfunc_st *devmem_function;

/* Graph capture modes (CUstreamCaptureMode values). */
#define DEVMEM_CAPTURE_GLOBAL 0
#define DEVMEM_CAPTURE_THREAD_LOCAL 1
#define DEVMEM_CAPTURE_RELAXED 2

/*
 * Load the driver, initialize it, retain device's primary context and make
 * it current on the calling thread.  Returns 0; 1 when no driver or device
 * is usable (why holds the reason; callers skip); -1 on other errors.
 * Call once per thread that uses the device (later calls only make the
 * context current).  why may be NULL.
 */
int devmem_init(int device, char *why, size_t why_len);
/* Release the primary context retained by devmem_init (if any). */
void devmem_fini(void);

/* Text of the last failure, "" if none. */
const char *devmem_last_error(void);
/* Name and compute capability of the device given to devmem_init. */
int devmem_device_info(char *name, size_t name_len, int *cc_major, int *cc_minor,
                       int *sm_count);

int devmem_alloc(devmem_ptr *p, size_t bytes);
/* Accepts 0. */
void devmem_free(devmem_ptr p);
/* Synchronous copies and memset (legacy default stream semantics). */
int devmem_htod(devmem_ptr dst, const void *src, size_t bytes);
int devmem_dtoh(void *dst, devmem_ptr src, size_t bytes);
int devmem_dtod(devmem_ptr dst, devmem_ptr src, size_t bytes);
int devmem_memset8(devmem_ptr dst, unsigned char value, size_t bytes);
/* Stream-ordered versions. */
int devmem_htod_async(devmem_ptr dst, const void *src, size_t bytes, devmem_stream s);
int devmem_memset8_async(devmem_ptr dst, unsigned char value, size_t bytes, devmem_stream s);
/* Wait for all work of the context. */
int devmem_sync(void);

/* Non-blocking streams (no implicit sync with the legacy stream). */
int devmem_stream_create(devmem_stream *s);
int devmem_stream_destroy(devmem_stream s);
int devmem_stream_sync(devmem_stream s);

int devmem_event_create(devmem_event *e);
int devmem_event_destroy(devmem_event e);
int devmem_event_record(devmem_event e, devmem_stream s);
int devmem_event_sync(devmem_event e);
/* Milliseconds between two recorded, completed events. */
int devmem_event_elapsed_ms(float *ms, devmem_event start, devmem_event end);

/* Stream capture into a graph, instantiation and replay. */
int devmem_capture_begin(devmem_stream s, int mode);
int devmem_capture_end(devmem_stream s, devmem_graph *g);
int devmem_graph_instantiate(devmem_graph_exec *x, devmem_graph g);
int devmem_graph_launch(devmem_graph_exec x, devmem_stream s);
int devmem_graph_destroy(devmem_graph g);
int devmem_graph_exec_destroy(devmem_graph_exec x);

/* Modules: load a PTX text (NUL-terminated; the driver compiles it for the
 * device) or a cubin or fatbin image.  A failed load's message holds the
 * compiler's error log. */
int devmem_module_load(devmem_module *m, const void *image);
int devmem_module_unload(devmem_module m);
int devmem_module_function(devmem_function *f, devmem_module m, const char *name);
/* Blocks of f that fit on one SM at once, for block threads each. */
int devmem_occupancy(int *blocks_per_sm, devmem_function f, int block, size_t shared_bytes);
/* Launch f on a grid of grid blocks of block threads; params as
 * cuLaunchKernel takes them (an array of pointers to the arguments). */
int devmem_launch(devmem_function f, unsigned grid, unsigned block, unsigned shared_bytes,
                  devmem_stream s, void **params);

#endif /* MLA_DEVMEM_H */
