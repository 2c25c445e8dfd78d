/*
 * trace.cuh - a timeline of one CTA, for builds with -DMLA_TRACE only
 * (MLA_NVCC_FLAGS=-DMLA_TRACE with tools/device-check's build.sh):
 * MLA_STAMP(i) records the SM clock at point i (0..9) in shared memory;
 * MLA_TRACE_DUMP leaves CTA (0, 0, 0)'s words where the library prints
 * them after each decode: the points relative to point 0, in cycles, and
 * the global timer's nanoseconds from MLA_STAMP_NS(0) to (1).
 * Phases: MLA_LAP(on, t, k) adds the cycles since lap clock t (declared by
 * MLA_LAP_START) to accumulator k (0..15) and restarts t, so a role's
 * loop splits its time into waits and work (kernels/hopper.cu lists
 * which role uses which accumulator).  Each stamp
 * and lap is made by one thread; the caller picks which.  Normal builds
 * compile all of it away.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_TRACE_CUH
#define MLA_TRACE_CUH

/* CTA (0, 0, 0)'s words of the last launch (defined in hopper.cu): 32 in
 * trace builds, which the library tells by the symbol's size and prints
 * (lib/gpu_decode.c), 1 otherwise. */
#ifdef MLA_TRACE
#define MLA_TRACE_WORDS 32
#else
#define MLA_TRACE_WORDS 1
#endif
extern "C" __device__ long long mla_trace_words[MLA_TRACE_WORDS];

#ifdef MLA_TRACE
#include "ptx.cuh"

namespace mla {
/* The last 256 bytes of the dynamic shared memory (32 words: stamps
 * 0-9, nanoseconds 10-11, phase accumulators 12-27; 31 the kernel's tag
 * once dumped): every kernel that stamps keeps 1024 bytes of slack there
 * for aligning its base (static shared memory would not fit beside the
 * largest layouts). */
MLA_DEV uint32_t trace_area()
{
    extern __shared__ __align__(1024) uint8_t smem[];
    uint32_t size;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(size));
    return smem_u32(smem) + size - 256u;
}

MLA_DEV unsigned long long global_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

MLA_DEV void trace_put(uint32_t i, long long v)
{
    asm volatile("st.shared.u64 [%0], %1;" ::"r"(trace_area() + 8u * i), "l"(v) : "memory");
}

MLA_DEV long long trace_get(uint32_t i)
{
    long long v;
    asm volatile("ld.shared.u64 %0, [%1];" : "=l"(v) : "r"(trace_area() + 8u * i) : "memory");
    return v;
}

constexpr uint32_t kTracePhase0 = 12, kTracePhases = 16, kTraceTag = 31;

MLA_DEV void trace_add(uint32_t k, long long d)
{
    trace_put(kTracePhase0 + k, trace_get(kTracePhase0 + k) + d);
}
} /* namespace mla */

#define MLA_STAMP(i) mla::trace_put((i), clock64())
#define MLA_STAMP_NS(i) mla::trace_put(10u + (i), (long long)mla::global_ns())
/* At the end of CTA (0, 0, 0), after a barrier: its words to
 * mla_trace_words, which the library prints after the launch (a printf
 * here would make ptxas serialize every wgmma of the kernel: C7510). */
#define MLA_TRACE_DUMP(tag)                                                                     \
    do {                                                                                        \
        if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0 && threadIdx.x < 32) {        \
            const long long v_ = mla::trace_get(threadIdx.x);                                   \
            mla_trace_words[threadIdx.x] = threadIdx.x == mla::kTraceTag ? (long long)(tag) : v_; \
        }                                                                                       \
    } while (0)
/* Thread tid zeroes accumulator tid (before the CTA's first barrier). */
#define MLA_TRACE_ZERO(tid)                                                                     \
    do {                                                                                        \
        if ((tid) < mla::kTracePhases)                                                          \
            mla::trace_put(mla::kTracePhase0 + (tid), 0);                                       \
    } while (0)
#define MLA_LAP_START(t) long long t = clock64()
#define MLA_LAP(on, t, k)                                                                       \
    do {                                                                                        \
        if (on) {                                                                               \
            const long long n_ = clock64();                                                     \
            mla::trace_add((k), n_ - (t));                                                      \
            (t) = n_;                                                                           \
        }                                                                                       \
    } while (0)
#else
#define MLA_STAMP(i) ((void)0)
#define MLA_STAMP_NS(i) ((void)0)
#define MLA_TRACE_DUMP(tag) ((void)0)
#define MLA_TRACE_ZERO(tid) ((void)0)
#define MLA_LAP_START(t) ((void)0)
#define MLA_LAP(on, t, k) ((void)0)
#endif

#endif /* MLA_TRACE_CUH */
