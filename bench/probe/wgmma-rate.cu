/*
 * wgmma-rate.cu - how many SM cycles one warpgroup MMA costs on sm_90a, in
 * the shapes the libmla kernels issue: m64n16k16 with A from registers
 * (the narrow kernels' S^T = K Q^T and O^T = V^T P^T), m64n64k16 and
 * m64n128k16 for comparison, by 1-3 warpgroups of one CTA at once.  Each
 * warpgroup issues groups of 4 MMAs, commits, and waits for all but the
 * last group (the narrow kernels' pattern), into 4 different accumulators
 * per group ("indep") or one chain ("dep"); operands are zeros.
 *
 *   nvcc -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 \
 *        -I include -I kernels -o wgmma-rate bench/probe/wgmma-rate.cu
 *   ./wgmma-rate
 *
 * Prints, per shape and warpgroup count: cycles per MMA as one warpgroup
 * sees it, and per MMA of the whole SM (all warpgroups' MMAs over the
 * longest warpgroup's time).
 *
 * SPDX-License-Identifier: MIT
 */
#include <cstdio>
#include <cuda_runtime.h>

#include "ptx.cuh"
#include "wgmma.cuh"

using namespace mla;

constexpr int kGroups = 512; /* groups of 4 MMAs per warpgroup */

enum Mode { kN16Indep, kN16Dep, kN64Ss, kN128Rs };

/* One group of 4 MMAs, the group index's parity (gi) picking the
 * accumulators of "indep". */
template <int MODE, int GI>
__device__ __forceinline__ void group(float (&d16)[8][2][4], float (&d64)[2][8][4],
                                      float (&d128)[32][4], const uint32_t (&a)[4],
                                      uint64_t db, uint64_t dv)
{
    wg_fence();
#pragma unroll
    for (int k = 0; k < 4; k++) {
        if (MODE == kN16Indep)
            wgmma_m64n16_rs(d16[4 * GI + k], a, db, 1u);
        else if (MODE == kN16Dep)
            wgmma_m64n16_rs(d16[0], a, db, 1u);
        else if (MODE == kN64Ss)
            wgmma_m64n64_ss(d64[k & 1], db, db, 1u);
        else
            wgmma_m64n128_rs_tb<0>(d128, a, dv, 1u);
    }
    wg_commit();
    wg_wait<1>();
}

template <int MODE>
__global__ void __launch_bounds__(384, 1) probe(long long *cycles)
{
    extern __shared__ __align__(1024) uint8_t smem[];
    for (uint32_t i = threadIdx.x; i < 32768u / 4u; i += blockDim.x)
        ((uint32_t *)smem)[i] = 0u;
    fence_proxy_async();
    __syncthreads();
    const uint32_t base = smem_u32(smem);
    const uint64_t db = wg_desc(base, 16u, 1024u), dv = wg_desc(base, 4096u, 1024u);
    const uint32_t a[4] = {0u, 0u, 0u, 0u};
    /* Only the mode's own accumulators stay live (the rest fold away). */
    float d16[8][2][4] = {}, d64[2][8][4] = {}, d128[32][4] = {};
    const long long t0 = clock64();
    for (int gi = 0; gi < kGroups; gi += 2) {
        group<MODE, 0>(d16, d64, d128, a, db, dv);
        group<MODE, 1>(d16, d64, d128, a, db, dv);
    }
    wg_wait<0>();
    float sum = 0.0f;
    if (MODE == kN128Rs) {
        wg_hold(d128);
        sum = d128[0][0];
    } else if (MODE == kN64Ss) {
        wg_hold(d64[0]);
        wg_hold(d64[1]);
        sum = d64[0][0][0] + d64[1][0][0];
    } else {
#pragma unroll
        for (int i = 0; i < 8; i++) {
            wg_hold(d16[i]);
            sum += d16[i][0][0];
        }
    }
    const long long t1 = clock64();
    if ((threadIdx.x & 127u) == 0)
        cycles[threadIdx.x >> 7] = t1 - t0 + (sum != 0.0f ? 1 : 0);
}

template <int MODE>
static void run(const char *name, long long *dev)
{
    cudaFuncSetAttribute(probe<MODE>, cudaFuncAttributeMaxDynamicSharedMemorySize, 32768);
    for (int nwg = 1; nwg <= 3; nwg++) {
        probe<MODE><<<1, 128 * nwg, 32768>>>(dev); /* warm-up */
        probe<MODE><<<1, 128 * nwg, 32768>>>(dev);
        long long c[3] = {0, 0, 0};
        if (cudaMemcpy(c, dev, sizeof c, cudaMemcpyDeviceToHost) != cudaSuccess) {
            printf("%s: %s\n", name, cudaGetErrorString(cudaGetLastError()));
            return;
        }
        long long mx = 0;
        for (int w = 0; w < nwg; w++)
            mx = c[w] > mx ? c[w] : mx;
        const double n = 4.0 * kGroups;
        printf("%-12s wgs %d  cycles/MMA per warpgroup %7.1f  per SM %7.1f\n", name, nwg,
               (double)mx / n, (double)mx / (n * nwg));
    }
}

int main()
{
    long long *dev = nullptr;
    if (cudaMalloc(&dev, 3 * sizeof(long long)) != cudaSuccess) {
        printf("no device\n");
        return 1;
    }
    run<kN16Indep>("n16 rs indep", dev);
    run<kN16Dep>("n16 rs dep", dev);
    run<kN64Ss>("n64 ss", dev);
    run<kN128Rs>("n128 rs", dev);
    cudaFree(dev);
    return 0;
}
