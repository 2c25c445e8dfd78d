/*
 * refill.cu - the wide BF16 kernel's load path alone: how long a stage's
 * refill takes from its issue to its landing when every SM streams
 * 72-KB tiles through two stages, as the wide kernel's loader does, by
 * the number of CTAs that read each tile (the M tiles of a KV head: 1 at
 * 64 rows, 2 at 128 heads, 4 at 128 heads and q_len 2) and by how they
 * get it: each CTA its own copy from L2, or one copy multicast to a
 * cluster of them (doc/performance.md, Wide kernels: the mid-pair
 * refills take 2,400-3,200 clocks with the cache in DRAM or in L2, and
 * the M tiles' CTAs as a cluster made the kernel a third slower).
 *
 * One CTA an SM (the 216 KB of the wide layout: a 72-KB area standing
 * for the Q tile, two 72-KB stages), CTAs r*i .. r*i + r - 1 reading
 * request i's pages (64 rows, 1152 bytes each, shuffled through a block
 * table) in 64-row tiles, 9 TMA boxes of 64 x 64 bf16 a tile (128-byte
 * swizzle, evict-first, 128-byte L2 promotion: the wide kernel's copy).
 * The consumers (4 warps) wait for a tile, spin `delay` clocks (their
 * work on it) and free the stage, each warp once; a watcher lane stamps
 * when each tile has landed, the loader when it issued it, both with
 * clock64.  In a cluster (mc) each CTA's loader issues the boxes k with
 * (k + t) % r == its rank, multicast to all r, and a stage is refilled
 * once every CTA of the cluster freed it (remote arrivals, as the
 * clustered kernel did).
 *
 * Each configuration prints the median time of 5 launches, the cache's
 * rate (each byte counted once) and the rate into the SMs (r times
 * that), the refill latency (issue to landing, clocks; median, p10, p90
 * over every tile of the third launch but each CTA's first two, which
 * start at once) and how long a stage is held (from a tile's landing to
 * the issue of the next one into its stage: the consumers' delay, their
 * release, and in a cluster the other CTAs' lag).  In a cluster the
 * latency is from this CTA's own issue, and a tile lands only once every
 * CTA issued its boxes, so it includes the others' lag (clocks of
 * different SMs do not compare).  Every row of a reader count runs the
 * same CTAs: as many groups of r as can be resident at once in clusters
 * of r.
 *
 * Build (sm_90a only):
 *   nvcc -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 \
 *        -Ikernels/common -o refill bench/micro/refill.cu
 * Run: ./refill [tiles a request, default 128 (s8192)]
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

/* The cluster's wrappers (kernels/common/ptx.cuh has no cluster code). */
__device__ __forceinline__ uint32_t cluster_rank()
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ uint32_t cluster_ctas()
{
    uint32_t n;
    asm volatile("mov.u32 %0, %%cluster_nctarank;" : "=r"(n));
    return n;
}

__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\n\t"
                 "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}

__device__ __forceinline__ void mbar_arrive_peer(uint32_t bar, uint32_t rank)
{
    asm volatile("{\n\t"
                 ".reg .b32 ra;\n\t"
                 "mapa.shared::cluster.u32 ra, %0, %1;\n\t"
                 "mbarrier.arrive.release.cluster.shared::cluster.b64 _, [ra];\n\t"
                 "}" ::"r"(bar),
                 "r"(rank)
                 : "memory");
}

__device__ __forceinline__ void mbar_wait_cluster(uint32_t bar, uint32_t parity)
{
    asm volatile("{\n\t"
                 ".reg .pred p;\n\t"
                 "WAIT_%=:\n\t"
                 "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%0], %1;\n\t"
                 "@!p bra WAIT_%=;\n\t"
                 "}" ::"r"(bar),
                 "r"(parity)
                 : "memory");
}

__device__ __forceinline__ void tma_load_3d_mc(uint32_t dst, const void *tmap, int c0, int c1,
                                               int c2, uint32_t bar, uint16_t mask, uint64_t pol)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 ".multicast::cluster.L2::cache_hint [%0], [%1, {%2, %3, %4}], [%5], %6, %7;" ::"r"(dst),
                 "l"(tmap), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "h"(mask), "l"(pol)
                 : "memory");
}

constexpr uint32_t kRows = 64;       /* rows a tile and a page */
constexpr uint32_t kTile = 73728;    /* 64 rows x 576 bf16 */
constexpr uint32_t kStages = 2;
constexpr uint32_t kWarps = 4;       /* consumer warps */
constexpr uint32_t kThreads = 32 * (2 + kWarps); /* loader, watcher, consumers */
constexpr uint32_t kSmem = 3 * kTile + 1024;
constexpr int kMaxTiles = 1024; /* a request's block-table row, in shared memory */

struct Args {
    const int *bt;
    long long *stamps; /* per CTA and tile: issue, landing */
    int tiles;         /* a request */
    uint32_t readers;  /* CTAs a request */
    uint32_t delay;    /* clocks a tile, a consumer warp */
};

__global__ void __launch_bounds__(kThreads, 1)
    ring(const __grid_constant__ CUtensorMap map, const Args a)
{
    extern __shared__ __align__(1024) uint8_t smem[];
    __shared__ __align__(8) uint64_t bars[2 * kStages];
    __shared__ int pages[kMaxTiles];
    const uint32_t base = (smem_u32(smem) + 1023u) & ~1023u;
    const uint32_t stage0 = base + kTile; /* after the stand-in for Q */
    const uint32_t loaded = smem_u32(bars), fre = loaded + 8u * kStages;
    const uint32_t ncta = cluster_ctas(), rank = cluster_rank();
    const uint32_t tid = threadIdx.x, warp = tid >> 5, lane = tid & 31u;
    if (tid == 0) {
        for (uint32_t s = 0; s < kStages; s++) {
            mbar_init(loaded + 8u * s, 1);
            mbar_init(fre + 8u * s, kWarps * ncta);
        }
        fence_mbar_init();
    }
    /* The request's pages first, so that no block-table load counts
     * toward a refill. */
    const int *bt = a.bt + (size_t)(blockIdx.x / a.readers) * a.tiles;
    for (int t = (int)tid; t < a.tiles; t += (int)kThreads)
        pages[t] = bt[t];
    if (ncta > 1)
        cluster_sync();
    else
        __syncthreads();
    long long *st = a.stamps + 2 * (size_t)blockIdx.x * a.tiles;
    if (warp == 0) {
        if (lane == 0) {
            const uint64_t pol = policy_evict_first();
            for (int t = 0; t < a.tiles; t++) {
                const uint32_t s = (uint32_t)t % kStages, ph = ((uint32_t)t / kStages) & 1u;
                const int page = pages[t];
                if (ncta > 1)
                    mbar_wait_cluster(fre + 8u * s, ph ^ 1u);
                else
                    mbar_wait(fre + 8u * s, ph ^ 1u);
                const long long issue = clock64();
                const uint32_t bar = loaded + 8u * s, dst = stage0 + s * kTile;
                mbar_arrive_expect_tx(bar, kTile);
                for (int k = 0; k < 9; k++) {
                    if (ncta == 1)
                        tma_load_3d(dst + 8192u * (uint32_t)k, &map, 64 * k, 0,
                                    page * (int)kRows, bar, pol);
                    else if ((uint32_t)(k + t) % ncta == rank)
                        tma_load_3d_mc(dst + 8192u * (uint32_t)k, &map, 64 * k, 0,
                                       page * (int)kRows, bar, (uint16_t)((1u << ncta) - 1u),
                                       pol);
                }
                st[2 * t] = issue;
            }
        }
    } else if (warp == 1) {
        if (lane == 0)
            for (int t = 0; t < a.tiles; t++) {
                mbar_wait(loaded + 8u * ((uint32_t)t % kStages), ((uint32_t)t / kStages) & 1u);
                st[2 * t + 1] = clock64();
            }
    } else {
        uint32_t sink = 0;
        for (int t = 0; t < a.tiles; t++) {
            const uint32_t s = (uint32_t)t % kStages;
            mbar_wait(loaded + 8u * s, ((uint32_t)t / kStages) & 1u);
            sink += lds32(stage0 + s * kTile + 4u * (tid & 255u));
            const long long t0 = clock64();
            while (clock64() - t0 < (long long)a.delay) {
            }
            __syncwarp();
            if (lane == 0) {
                mbar_arrive(fre + 8u * s);
                /* The other CTAs' loaders refill this stage too, unless
                 * no tile comes after t into it (they may have ended). */
                if (t + (int)kStages < a.tiles)
                    for (uint32_t r = 0; r < ncta; r++)
                        if (r != rank)
                            mbar_arrive_peer(fre + 8u * s, r);
            }
        }
        if (sink == 0x9e3779b9u)
            a.stamps[0] = 0; /* keeps the reads */
    }
}

struct Run {
    double us;
    double lat[3];  /* refill latency, clocks: median, p10, p90 */
    double held[2]; /* a stage from its landing to its next issue, clocks: median, p90 */
};

double pct(std::vector<long long> &v, double q)
{
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : (double)v[(size_t)(q * (double)(v.size() - 1))];
}

} /* namespace */

int main(int argc, char **argv)
{
    const int tiles = argc > 1 ? atoi(argv[1]) : 128;
    if (tiles < 3 || tiles > kMaxTiles) {
        fprintf(stderr, "tiles: 3 to %d\n", kMaxTiles);
        return 1;
    }
    cudaDeviceProp prop;
    const int nsm = micro_device(&prop);
    const size_t pages = (size_t)nsm * tiles;
    MicroCache cache = micro_cache(pages, kTile);
    uint8_t *kv = cache.kv;
    int *bt = cache.bt;
    long long *stamps;
    CK(cudaMalloc(&stamps, 2 * pages * sizeof(long long)));
    const MicroEncodeTiled encode = micro_encode_tiled();
    CUtensorMap map;
    const cuuint64_t dims[3] = {576, 1, pages * kRows}, strides[2] = {1152, 1152};
    const cuuint32_t box[3] = {64, 1, kRows}, estr[3] = {1, 1, 1};
    if (encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 3, kv, dims, strides, box, estr,
               CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
               CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
               CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS) {
        fprintf(stderr, "cuTensorMapEncodeTiled failed\n");
        return 1;
    }
    CK(cudaFuncSetAttribute(ring, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem));

    printf("%s, %d SMs, %d tiles of 64 rows a CTA, two 72-KB stages\n", prop.name, nsm, tiles);
    printf("%7s %3s %5s %6s %9s %9s %8s %22s %14s\n", "readers", "mc", "ctas", "delay", "us",
           "DRAM TB/s", "SM TB/s", "refill clk p50/p10/p90", "held p50/p90");
    struct Cfg {
        uint32_t readers, mc, delay;
    };
    std::vector<Cfg> cfgs;
    for (uint32_t d : {0u, 2200u, 4300u})
        for (Cfg c : {Cfg{1, 0, d}, Cfg{2, 0, d}, Cfg{2, 1, d}, Cfg{4, 0, d}, Cfg{4, 1, d}})
            cfgs.push_back(c);
    for (const Cfg &g : cfgs) {
        Args a{bt, stamps, tiles, g.readers, g.delay};
        cudaLaunchConfig_t cfg = {};
        cudaLaunchAttribute at[1];
        cfg.gridDim = dim3(g.readers); /* the query wants a grid the cluster divides */
        cfg.blockDim = dim3(kThreads);
        cfg.dynamicSmemBytes = kSmem;
        at[0].id = cudaLaunchAttributeClusterDimension;
        at[0].val.clusterDim.x = g.readers;
        at[0].val.clusterDim.y = at[0].val.clusterDim.z = 1;
        cfg.attrs = at;
        cfg.numAttrs = 1;
        /* One wave of requests, the same CTAs with or without clusters:
         * as many clusters of r as can be resident at once. */
        int nc = 0;
        CK(cudaOccupancyMaxActiveClusters(&nc, ring, &cfg));
        const int ctas = std::min(nsm / (int)g.readers, nc) * (int)g.readers;
        if (ctas < 1) {
            fprintf(stderr, "no cluster of %u fits\n", g.readers);
            return 1;
        }
        cfg.gridDim = dim3((unsigned)ctas);
        at[0].val.clusterDim.x = g.mc ? g.readers : 1;
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        std::vector<double> t;
        Run r{};
        for (int i = 0; i < 5; i++) {
            CK(cudaEventRecord(e0));
            CK(cudaLaunchKernelEx(&cfg, ring, map, a));
            CK(cudaEventRecord(e1));
            CK(cudaEventSynchronize(e1));
            float ms = 0;
            CK(cudaEventElapsedTime(&ms, e0, e1));
            t.push_back(ms * 1e3);
            if (i == 2) {
                std::vector<long long> s(2 * (size_t)ctas * tiles), lat, held;
                CK(cudaMemcpy(s.data(), stamps, s.size() * 8, cudaMemcpyDeviceToHost));
                for (int c = 0; c < ctas; c++)
                    for (int k = (int)kStages; k < tiles; k++) {
                        const long long *x = &s[2 * ((size_t)c * tiles + k)];
                        lat.push_back(x[1] - x[0]);
                        held.push_back(x[0] - x[1 - 2 * (int)kStages]);
                    }
                r.lat[0] = pct(lat, 0.5);
                r.lat[1] = pct(lat, 0.1);
                r.lat[2] = pct(lat, 0.9);
                r.held[0] = pct(held, 0.5);
                r.held[1] = pct(held, 0.9);
            }
        }
        std::sort(t.begin(), t.end());
        r.us = t[2];
        const double uniq = (double)ctas / g.readers * tiles * kTile;
        printf("%7u %3u %5d %6u %9.1f %9.3f %8.3f %8.0f/%5.0f/%6.0f %7.0f/%6.0f\n", g.readers,
               g.mc, ctas, g.delay, r.us, uniq / r.us * 1e-6, uniq * g.readers / r.us * 1e-6, r.lat[0],
               r.lat[1], r.lat[2], r.held[0], r.held[1]);
        CK(cudaEventDestroy(e0));
        CK(cudaEventDestroy(e1));
    }
    micro_cache_free(cache);
    CK(cudaFree(stamps));
    return 0;
}
