/*
 * narrow_mma.cu - the tensor-core floor of the narrow kernels' tile
 * (doc/performance.md, Narrow kernels): per 64-key tile, S^T = K Q^T is
 * 36 wgmma m64n16k16 and O^T += V^T P^T 32 (8 m-tiles x 4 k-steps), here
 * with A fragments that never change (no loads, no conversion, no
 * softmax), B from a 16-row tile in shared memory, the commit groups and
 * waits of the narrow FP8 consumer (a group a chunk of the scores, a
 * group a k-step of P V, one group in flight behind the next).  One CTA
 * an SM, one or two warpgroups each running whole tiles (the narrow FP8
 * kernel's warpgroups take alternate tiles; the BF16 one splits each
 * tile's MMAs between its two), and the same with m64n64k16 for the
 * scores (the 64-row kernels' N) for comparison.  Prints clocks a tile an
 * SM: at the measured rate, an SM's share of the cache's bytes must take
 * longer than that for the MMAs to stay hidden behind the loads.
 *
 * Build (sm_90a only):
 *   nvcc -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 \
 *        -Ikernels/common -o narrow_mma bench/micro/narrow_mma.cu
 * Run: ./narrow_mma [tiles, default 256]
 *
 * SPDX-License-Identifier: MIT
 */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "micro.h"
#include "ptx.cuh"
#include "wgmma.cuh"

using namespace mla;

namespace {

constexpr uint32_t kChunk16 = 16u * 128u; /* 16 rows x 64 dims, 128B swizzle */
constexpr uint32_t kChunk64 = 64u * 128u;

/* One tile of a warpgroup: the scores (N = 16, or 64 with WIDE), then
 * P V; returns through the accumulators (kept live by the caller). */
template <bool WIDE>
__device__ __forceinline__ void tile(float (&s)[8][4], float (&s16)[2][4], float (&o)[8][2][4],
                                     const uint32_t (&a)[4], uint64_t q0, uint64_t p0)
{
    wg_wait<0>();
#pragma unroll
    for (uint32_t ch = 0; ch < 9; ch++) {
        wg_fence();
#pragma unroll
        for (uint32_t st = 0; st < 4; st++) {
            const uint32_t acc = (ch | st) != 0 ? 1u : 0u;
            if (WIDE)
                wgmma_m64n64_rs<true>(s, a, wg_desc_add(q0, ch * kChunk64 + 32u * st), acc);
            else
                wgmma_m64n16_rs<true>(s16, a, wg_desc_add(q0, ch * kChunk16 + 32u * st), acc);
        }
        wg_commit();
        if (ch + 1 < 9)
            wg_wait<1>();
    }
    wg_wait<0>();
    wg_hold(s);
    wg_hold(s16);
#pragma unroll
    for (uint32_t ks = 0; ks < 4; ks++) {
        wg_fence();
#pragma unroll
        for (uint32_t m = 0; m < 8; m++)
            wgmma_m64n16_rs(o[m], a, wg_desc_add(p0, 32u * ks), 1u);
        wg_commit();
        if (ks + 1 < 4)
            wg_wait<1>();
    }
}

template <bool WIDE>
__global__ void __launch_bounds__(256, 1) run(int tiles, uint32_t nwg, long long *clk, float *sink)
{
    extern __shared__ __align__(1024) uint8_t smem[];
    const uint32_t base = (smem_u32(smem) + 1023u) & ~1023u;
    const uint32_t wg = threadIdx.x >> 7;
    /* Any finite bf16 / f16 bits: the timing does not depend on them. */
    for (uint32_t i = threadIdx.x; i < (9u * kChunk64 + kChunk16) / 4u; i += blockDim.x)
        sts32(base + 4u * i, 0x3c003c00u);
    fence_proxy_async();
    __syncthreads();
    if (wg >= nwg)
        return;
    const uint64_t q0 = wg_desc(base, 16u, 1024u), p0 = wg_desc(base + 9u * kChunk64, 16u, 1024u);
    const uint32_t a[4] = {0x3c003c00u ^ threadIdx.x, 0x3c003c00u, 0x3c003c00u, 0x3c003c00u};
    float s[8][4] = {}, s16[2][4] = {}, o[8][2][4] = {};
    const long long t0 = clock64();
    for (int t = 0; t < tiles; t++)
        tile<WIDE>(s, s16, o, a, q0, p0);
    wg_wait<0>();
    const long long t1 = clock64();
    float acc = 0.0f;
#pragma unroll
    for (int m = 0; m < 8; m++)
        acc += o[m][0][0] + s[m][0] + s16[m & 1][m >> 1];
    if ((threadIdx.x & 127u) == 0) {
        clk[blockIdx.x * 2 + wg] = t1 - t0;
        sink[blockIdx.x * 2 + wg] = acc;
    }
}

} /* namespace */

int main(int argc, char **argv)
{
    const int tiles = argc > 1 ? atoi(argv[1]) : 256;
    int nsm = 0;
    CK(cudaDeviceGetAttribute(&nsm, cudaDevAttrMultiProcessorCount, 0));
    long long *clk;
    float *sink;
    CK(cudaMalloc(&clk, 2 * nsm * sizeof(long long)));
    CK(cudaMalloc(&sink, 2 * nsm * sizeof(float)));
    const uint32_t smem = 9u * kChunk64 + kChunk16 + 1024u;
    CK(cudaFuncSetAttribute(run<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    CK(cudaFuncSetAttribute(run<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
    printf("%d tiles a warpgroup, one CTA an SM; clocks a tile an SM (median CTA)\n", tiles);
    for (int wide = 0; wide < 2; wide++)
        for (uint32_t nwg = 1; nwg <= 2; nwg++) {
            for (int rep = 0; rep < 2; rep++) {
                if (wide)
                    run<true><<<nsm, 256, smem>>>(tiles, nwg, clk, sink);
                else
                    run<false><<<nsm, 256, smem>>>(tiles, nwg, clk, sink);
                CK(cudaGetLastError());
                CK(cudaDeviceSynchronize());
            }
            std::vector<long long> c(2 * nsm);
            CK(cudaMemcpy(c.data(), clk, c.size() * sizeof(long long), cudaMemcpyDeviceToHost));
            std::vector<double> per;
            for (int i = 0; i < nsm; i++) {
                long long m = c[2 * i];
                if (nwg == 2 && c[2 * i + 1] > m)
                    m = c[2 * i + 1];
                per.push_back((double)m / (tiles * nwg));
            }
            std::sort(per.begin(), per.end());
            printf("scores m64n%dk16, P V m64n16k16, %u warpgroup%s: %.0f clocks a tile an SM "
                   "(%.1f a wgmma)\n",
                   wide ? 64 : 16, nwg, nwg > 1 ? "s" : "", per[nsm / 2], per[nsm / 2] / 68.0);
        }
    CK(cudaFree(clk));
    CK(cudaFree(sink));
    return 0;
}
