/*
 * trace.cuh - a timeline of one CTA, for builds with -DMLA_TRACE only
 * (MLA_NVCC_FLAGS=-DMLA_TRACE with tools/device-check's build.sh):
 * MLA_STAMP(i) records the SM clock at point i (0..9) in shared memory, and
 * MLA_TRACE_PRINT prints the points of CTA (0, 0, 0) relative to point 0,
 * in cycles, with the global timer's nanoseconds over the same span.
 * Each stamp is made by one thread; the caller picks which.  Normal builds
 * compile all of it away.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_TRACE_CUH
#define MLA_TRACE_CUH

#ifdef MLA_TRACE
#include <cstdio>

#include "ptx.cuh"

namespace mla {
/* The last 128 bytes of the dynamic shared memory: every kernel that
 * stamps keeps 1024 bytes of slack there for aligning its base (static
 * shared memory would not fit beside the largest layouts). */
MLA_DEV uint32_t trace_area()
{
    extern __shared__ __align__(1024) uint8_t smem[];
    uint32_t size;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(size));
    return smem_u32(smem) + size - 128u;
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
} /* namespace mla */

#define MLA_STAMP(i) mla::trace_put((i), clock64())
#define MLA_STAMP_NS(i) mla::trace_put(10u + (i), (long long)mla::global_ns())
#define MLA_TRACE_PRINT(tag)                                                                    \
    do {                                                                                        \
        if (blockIdx.x == 0 && blockIdx.y == 0 && blockIdx.z == 0) {                            \
            long long t_[9];                                                                    \
            for (uint32_t i_ = 0; i_ < 9; i_++)                                                 \
                t_[i_] = mla::trace_get(i_);                                                    \
            printf("TRACE %s ns %lld cyc 1:%lld 2:%lld 3:%lld 4:%lld 5:%lld 6:%lld 7:%lld "     \
                   "8:%lld\n",                                                                  \
                   (tag), mla::trace_get(11) - mla::trace_get(10), t_[1] - t_[0],              \
                   t_[2] - t_[0], t_[3] - t_[0], t_[4] - t_[0], t_[5] - t_[0], t_[6] - t_[0],  \
                   t_[7] - t_[0], t_[8] - t_[0]);                                               \
        }                                                                                       \
    } while (0)
#else
#define MLA_STAMP(i) ((void)0)
#define MLA_STAMP_NS(i) ((void)0)
#define MLA_TRACE_PRINT(tag) ((void)0)
#endif

#endif /* MLA_TRACE_CUH */
