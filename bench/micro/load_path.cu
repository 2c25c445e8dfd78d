/*
 * load_path.cu - the narrow kernels' load path alone: how close a ring of
 * shared-memory stages filled by one loader lane comes to the card's
 * read-only streaming rate, by copy shape, stage count and the consumers'
 * time on a tile (doc/performance.md, Narrow kernels).  No Q, no MMAs:
 * one CTA an SM, CTA i reads request i's pages (64 rows each, in a
 * shuffled order through a block table, as mla-bench lays them out) in
 * 64-row tiles:
 *
 *   tma   the narrow BF16 kernel's copy: 9 boxes of 64 rows x 64 bf16
 *         (128-byte swizzle) a tile, through a tensor map;
 *   bulk  one bulk copy of the tile's contiguous rows (the narrow FP8
 *         kernel's copy; for BF16 rows only as a comparison);
 *
 * and the consumers: 256 threads that wait for a tile, spin `delay`
 * clocks (their work on it) and release the stage, either all of them on
 * every tile (the narrow BF16 kernel) or two warpgroups on alternate
 * tiles (alt: the narrow FP8 kernel).  Each configuration prints the
 * median time of 5 launches, its rate and the fraction of a streaming
 * read measured in the same process, and the CTAs' end times (first,
 * median, last after the earliest start): how much of the time is the
 * last CTA's tail.
 *
 * Build (sm_90a only):
 *   nvcc -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 \
 *        -Ikernels/common -o load_path bench/micro/load_path.cu
 * Run: ./load_path [tiles a request, default 128 (s8192)]
 *
 * SPDX-License-Identifier: MIT
 */
#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "micro.h"
#include "ptx.cuh"

using namespace mla;

namespace {

constexpr uint32_t kRows = 64;          /* rows a tile and a page */
constexpr uint32_t kMaxStages = 8;
constexpr uint32_t kConsumers = 256;    /* two warpgroups */
constexpr uint32_t kThreads = 32 + kConsumers;
constexpr uint32_t kSmem = 227u * 1024u - 1024u;

enum Copy { TMA, BULK };

struct Args {
    const uint8_t *kv;
    const int *bt;
    unsigned long long *stamps; /* start, end a CTA */
    int tiles;                  /* a request */
    uint32_t row_bytes;
    uint32_t nst;
    uint32_t delay;  /* clocks a tile, a consumer */
    uint32_t alt;    /* warpgroups on alternate tiles */
    uint32_t evict_first;
};

__device__ unsigned long long now_ns()
{
    unsigned long long t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

template <Copy C>
__global__ void __launch_bounds__(kThreads, 1)
    ring(const __grid_constant__ CUtensorMap map, const Args a)
{
    extern __shared__ __align__(1024) uint8_t smem[];
    /* loaded[group][stage], free[stage] */
    __shared__ __align__(8) uint64_t bars[3 * kMaxStages];
    const uint32_t base = (smem_u32(smem) + 1023u) & ~1023u;
    const uint32_t tile = kRows * a.row_bytes, pitch = (tile + 1023u) & ~1023u;
    const uint32_t loaded = smem_u32(bars), fre = loaded + 16u * kMaxStages;
    const uint32_t tid = threadIdx.x;
    if (tid == 0) {
        for (uint32_t s = 0; s < kMaxStages; s++) {
            mbar_init(loaded + 8u * s, 1);
            mbar_init(loaded + 8u * (kMaxStages + s), 1);
            mbar_init(fre + 8u * s, a.alt ? kConsumers / 2 : kConsumers);
        }
        fence_mbar_init();
    }
    __syncthreads();
    const unsigned long long t_start = now_ns();
    const int *bt = a.bt + (size_t)blockIdx.x * a.tiles;
    if (tid < 32) {
        if (tid == 0) {
            const uint64_t pol = a.evict_first ? policy_evict_first() : policy_evict_normal();
            for (int t = 0; t < a.tiles; t++) {
                const uint32_t s = (uint32_t)t % a.nst, ph = ((uint32_t)t / a.nst) & 1u;
                const int page = __ldg(bt + t);
                mbar_wait(fre + 8u * s, ph ^ 1u);
                const uint32_t g = a.alt ? (uint32_t)t & 1u : 0u;
                const uint32_t bar = loaded + 8u * (g * kMaxStages + s), dst = base + s * pitch;
                mbar_arrive_expect_tx(bar, tile);
                if (C == TMA) {
                    for (int k = 0; k < 9; k++)
                        tma_load_3d(dst + 8192u * (uint32_t)k, &map, 64 * k, 0, page * (int)kRows,
                                    bar, pol);
                } else {
                    bulk_g2s(dst, a.kv + (size_t)page * tile, tile, bar, pol);
                }
            }
        }
    } else {
        const uint32_t ct = tid - 32u, g = a.alt ? ct / 128u : 0u;
        uint32_t sink = 0;
        for (int t = (int)g; t < a.tiles; t += a.alt ? 2 : 1) {
            /* A group's uses of a stage: every one, or with alternate
             * tiles on an odd ring every other. */
            const uint32_t s = (uint32_t)t % a.nst;
            const uint32_t ph = ((uint32_t)t / (a.alt && (a.nst & 1u) ? 2u * a.nst : a.nst)) & 1u;
            mbar_wait(loaded + 8u * (g * kMaxStages + s), ph);
            sink += lds32(base + s * pitch + 4u * (ct & 255u));
            const long long t0 = clock64();
            while (clock64() - t0 < (long long)a.delay) {
            }
            mbar_arrive(fre + 8u * s);
        }
        if (sink == 0x9e3779b9u)
            a.stamps[0] = 0; /* keeps the reads */
    }
    __syncthreads();
    if (tid == 0) {
        a.stamps[2 * blockIdx.x] = t_start;
        a.stamps[2 * blockIdx.x + 1] = now_ns();
    }
}

/* The roof: every thread streams 16-byte non-coherent loads. */
__global__ void __launch_bounds__(1024) stream_read(const uint4 *p, size_t n, uint32_t *out)
{
    uint32_t acc = 0;
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        const uint4 v = __ldg(p + i);
        acc ^= v.x ^ v.y ^ v.z ^ v.w;
    }
    if (acc == 0x9e3779b9u)
        *out = acc;
}

struct Run {
    double us, first, mid, last; /* time; CTA ends after the earliest start */
};

template <class F>
Run timed(F launch, unsigned long long *d_stamps, int nctas)
{
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    launch();
    CK(cudaDeviceSynchronize());
    std::vector<double> t;
    std::vector<unsigned long long> st(2 * (size_t)nctas);
    Run r{};
    for (int i = 0; i < 5; i++) {
        CK(cudaEventRecord(e0));
        launch();
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms = 0;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        t.push_back(ms * 1e3);
        if (d_stamps && i == 2) {
            CK(cudaMemcpy(st.data(), d_stamps, st.size() * 8, cudaMemcpyDeviceToHost));
            unsigned long long s0 = ~0ull;
            std::vector<double> ends;
            for (int c = 0; c < nctas; c++)
                s0 = std::min(s0, st[2 * c]);
            for (int c = 0; c < nctas; c++)
                ends.push_back((st[2 * c + 1] - s0) * 1e-3);
            std::sort(ends.begin(), ends.end());
            r.first = ends.front();
            r.mid = ends[ends.size() / 2];
            r.last = ends.back();
        }
    }
    std::sort(t.begin(), t.end());
    r.us = t[2];
    CK(cudaEventDestroy(e0));
    CK(cudaEventDestroy(e1));
    return r;
}

} /* namespace */

int main(int argc, char **argv)
{
    const int tiles = argc > 1 ? atoi(argv[1]) : 128;
    cudaDeviceProp prop;
    const int nsm = micro_device(&prop);
    const size_t pages = (size_t)nsm * tiles, max_bytes = pages * kRows * 1152u;
    MicroCache cache = micro_cache(pages, kRows * 1152u);
    uint8_t *kv = cache.kv;
    int *bt = cache.bt;
    unsigned long long *stamps;
    uint32_t *sink;
    CK(cudaMalloc(&stamps, 2 * (size_t)nsm * 8));
    CK(cudaMalloc(&sink, 4));
    const MicroEncodeTiled encode = micro_encode_tiled();
    CK(cudaFuncSetAttribute(ring<TMA>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));
    CK(cudaFuncSetAttribute(ring<BULK>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));

    printf("%s, %d SMs, %d tiles of 64 rows a CTA\n", prop.name, nsm, tiles);
    /* The roof over the BF16 cache's bytes. */
    int sgrid = 0;
    CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&sgrid, stream_read, 1024, 0));
    const Run roof = timed(
        [&] {
            stream_read<<<sgrid * nsm, 1024>>>((const uint4 *)kv, max_bytes / 16, sink);
        },
        nullptr, 0);
    const double roof_tbs = max_bytes / roof.us * 1e-6;
    printf("stream read %.1f MB: %.1f us, %.3f TB/s\n", max_bytes * 1e-6, roof.us, roof_tbs);
    printf("%-6s %5s %6s %3s %5s %6s %4s %9s %7s %6s %9s\n", "copy", "row", "promo", "st", "alt",
           "delay", "evf", "us", "TB/s", "roof", "ends");

    struct Cfg {
        Copy c;
        uint32_t row, nst, alt, delay, ef;
        CUtensorMapL2promotion promo;
    };
    const auto P128 = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
    std::vector<Cfg> cfgs;
    for (uint32_t d : {0u, 1500u, 3000u})
        for (uint32_t n : {1u, 2u, 3u})
            cfgs.push_back({TMA, 1152, n, 0, d, 1, P128});
    cfgs.push_back({TMA, 1152, 2, 0, 0, 1, CU_TENSOR_MAP_L2_PROMOTION_NONE});
    cfgs.push_back({TMA, 1152, 2, 0, 0, 1, CU_TENSOR_MAP_L2_PROMOTION_L2_256B});
    cfgs.push_back({TMA, 1152, 2, 0, 0, 0, P128});
    for (uint32_t d : {0u, 1500u})
        for (uint32_t n : {2u, 3u})
            cfgs.push_back({BULK, 1152, n, 0, d, 1, P128});
    for (uint32_t d : {0u, 2000u, 4000u, 6000u, 8000u})
        for (uint32_t n : {2u, 3u, 4u, 5u, 6u})
            cfgs.push_back({BULK, 576, n, 1, d, 1, P128});
    for (uint32_t d : {2000u, 4000u, 6000u})
        for (uint32_t n : {4u, 5u})
            cfgs.push_back({BULK, 656, n, 1, d, 1, P128});

    for (const Cfg &g : cfgs) {
        CUtensorMap map;
        const cuuint64_t rows = pages * kRows;
        const cuuint64_t dims[3] = {576, 1, rows}, strides[2] = {1152, 1152};
        const cuuint32_t box[3] = {64, 1, kRows}, estr[3] = {1, 1, 1};
        if (encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, kv, dims, strides, box, estr,
                   CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B, g.promo,
                   CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
            fprintf(stderr, "cuTensorMapEncodeTiled failed\n");
            return 1;
        }
        const uint32_t pitch = (kRows * g.row + 1023u) & ~1023u;
        if (g.nst * pitch + 1024u > kSmem)
            continue;
        Args a{kv, bt, stamps, tiles, g.row, g.nst, g.delay, g.alt, g.ef};
        const Run r = timed(
            [&] {
                if (g.c == TMA)
                    ring<TMA><<<nsm, kThreads, kSmem>>>(map, a);
                else
                    ring<BULK><<<nsm, kThreads, kSmem>>>(map, a);
                CK(cudaGetLastError());
            },
            stamps, nsm);
        const double bytes = (double)pages * kRows * g.row, tbs = bytes / r.us * 1e-6;
        printf("%-6s %5u %6s %3u %5u %6u %4u %9.1f %7.3f %5.1f%% %.1f/%.1f/%.1f\n",
               g.c == TMA ? "tma" : "bulk", g.row,
               g.c == BULK ? "-" : g.promo == P128 ? "128" : g.promo ? "256" : "none", g.nst,
               g.alt, g.delay, g.ef, r.us, tbs, 100.0 * tbs / roof_tbs, r.first, r.mid, r.last);
    }
    micro_cache_free(cache);
    CK(cudaFree(stamps));
    CK(cudaFree(sink));
    return 0;
}
