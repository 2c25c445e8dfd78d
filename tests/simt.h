/*
 * simt.h - the CUDA primitives kernels/service/schedule.cu uses, emulated
 * on the host for tests/test_schedule.cc: one host thread per CUDA thread
 * of a 256-thread block, warp intrinsics as exchanges through a per-warp
 * barrier (every lane must be in the same intrinsic with a full mask:
 * checked), block barriers through a block-wide one.  Not a model of the
 * GPU's memory ordering or timing.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_TEST_SIMT_H
#define MLA_TEST_SIMT_H
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#define __device__
#define __host__
#define __forceinline__ inline
#define __global__
#define __shared__ static
#define __grid_constant__
#define __launch_bounds__(...)

struct dim3u { unsigned x, y, z; };
extern thread_local dim3u threadIdx;
extern dim3u blockIdx, gridDim;
struct int2 { int x, y; };
struct int4 { int x, y, z, w; };
struct uint4 { unsigned x, y, z, w; };
inline int2 make_int2(int x, int y) { return {x, y}; }
inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
inline int max(int a, int b) { return a > b ? a : b; }
inline int min(int a, int b) { return a < b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
inline long long max(long long a, long long b) { return a > b ? a : b; }
inline long long min(long long a, long long b) { return a < b ? a : b; }
inline int __float2int_rn(float x) { return (int)std::nearbyintf(x); }
inline int __popc(unsigned x) { return __builtin_popcount(x); }
inline int atomicAdd(int *p, int v) { return __atomic_fetch_add(p, v, __ATOMIC_SEQ_CST); }

[[noreturn]] void simt_fail(const char *what);

struct SimtWarp {
    std::barrier<> bar{32};
    uint64_t slot[32];
    int op[32];
};
extern SimtWarp *simt_warps;
struct SimtBlock {
    std::barrier<> bar{256};
    int pred[256];
};
extern SimtBlock *simt_block;
extern std::atomic<long> simt_exchanges;

enum { OP_SHFL = 1, OP_UP, OP_XOR, OP_BALLOT, OP_ANY, OP_ALL, OP_ADD, OP_MAX, OP_MIN };

template <class T>
inline T simt_xchg(unsigned mask, T v, int src, int op)
{
    if (mask != 0xffffffffu)
        simt_fail("partial mask");
    SimtWarp &w = simt_warps[threadIdx.x / 32];
    const int lane = threadIdx.x % 32;
    uint64_t u = 0;
    std::memcpy(&u, &v, sizeof v);
    w.slot[lane] = u;
    w.op[lane] = op;
    w.bar.arrive_and_wait();
    for (int l = 0; l < 32; l++)
        if (w.op[l] != op)
            simt_fail("lanes of a warp in different intrinsics");
    if (src < 0 || src > 31)
        simt_fail("source lane out of range");
    T r;
    const uint64_t s = w.slot[src];
    std::memcpy(&r, &s, sizeof r);
    w.bar.arrive_and_wait();
    simt_exchanges++;
    return r;
}

template <class T> inline T __shfl_sync(unsigned m, T v, int src)
{
    return simt_xchg(m, v, src, OP_SHFL);
}
template <class T> inline T __shfl_up_sync(unsigned m, T v, unsigned d)
{
    const int lane = threadIdx.x % 32;
    return simt_xchg(m, v, lane - (int)d >= 0 ? lane - (int)d : lane, OP_UP);
}
template <class T> inline T __shfl_xor_sync(unsigned m, T v, int x)
{
    return simt_xchg(m, v, (int)(threadIdx.x % 32) ^ x, OP_XOR);
}
inline unsigned simt_vote(unsigned m, int pred, int op)
{
    if (m != 0xffffffffu)
        simt_fail("partial mask");
    SimtWarp &w = simt_warps[threadIdx.x / 32];
    const int lane = threadIdx.x % 32;
    w.slot[lane] = pred != 0;
    w.op[lane] = op;
    w.bar.arrive_and_wait();
    unsigned r = 0;
    for (int l = 0; l < 32; l++) {
        if (w.op[l] != op)
            simt_fail("lanes of a warp in different votes");
        r |= (unsigned)w.slot[l] << l;
    }
    w.bar.arrive_and_wait();
    simt_exchanges++;
    return r;
}
/* __reduce_*_sync: every lane's value through the warp's slots; op names
 * the reduction, so that lanes in different ones are caught. */
template <class T, class F>
inline T simt_redux(unsigned m, T v, int op, F f)
{
    if (m != 0xffffffffu)
        simt_fail("partial mask");
    SimtWarp &w = simt_warps[threadIdx.x / 32];
    const int lane = threadIdx.x % 32;
    w.slot[lane] = (uint64_t)(int64_t)v;
    w.op[lane] = op;
    w.bar.arrive_and_wait();
    T r = (T)w.slot[0];
    for (int l = 0; l < 32; l++) {
        if (w.op[l] != op)
            simt_fail("lanes of a warp in different intrinsics");
        if (l)
            r = f(r, (T)w.slot[l]);
    }
    w.bar.arrive_and_wait();
    simt_exchanges++;
    return r;
}
inline unsigned __reduce_add_sync(unsigned m, unsigned v)
{
    return simt_redux(m, v, OP_ADD, [](unsigned x, unsigned y) { return x + y; });
}
inline int __reduce_max_sync(unsigned m, int v)
{
    return simt_redux(m, v, OP_MAX, [](int x, int y) { return x > y ? x : y; });
}
inline int __reduce_min_sync(unsigned m, int v)
{
    return simt_redux(m, v, OP_MIN, [](int x, int y) { return x < y ? x : y; });
}
inline unsigned __ballot_sync(unsigned m, int pred) { return simt_vote(m, pred, OP_BALLOT); }
inline int __any_sync(unsigned m, int pred) { return simt_vote(m, pred, OP_ANY) != 0; }
inline int __all_sync(unsigned m, int pred) { return simt_vote(m, pred, OP_ALL) == 0xffffffffu; }
inline int __syncthreads_or(int pred)
{
    simt_block->pred[threadIdx.x] = pred != 0;
    simt_block->bar.arrive_and_wait();
    int r = 0;
    for (int t = 0; t < 256; t++)
        r |= simt_block->pred[t];
    simt_block->bar.arrive_and_wait();
    return r;
}
inline int __syncthreads_and(int pred) { return !__syncthreads_or(!pred); }
inline void __syncthreads() { (void)__syncthreads_or(0); }

/* kernels/common/ptx.cuh's part that schedule.cu and schedule.cuh use
 * (its include guard keeps the device version out). */
#define MLA_PTX_CUH
#define MLA_DEV inline
namespace mla {
MLA_DEV int ld_volatile_s32(const int32_t *p) { return *(const volatile int32_t *)p; }
MLA_DEV int4 ld_volatile_v4(const void *p) { return *(const int4 *)p; }
MLA_DEV void griddep_wait() {}
MLA_DEV void griddep_launch_dependents() {}
} /* namespace mla */

#endif /* MLA_TEST_SIMT_H */
