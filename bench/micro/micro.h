/*
 * micro.h - what the microbenchmarks in bench/micro share: CK(x), which
 * exits with the failed runtime call and its error; the load-path
 * micros' cache and block table, and the tensor-map encoder.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_BENCH_MICRO_H
#define MLA_BENCH_MICRO_H

#include <cuda.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <random>
#include <vector>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                           \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

/* Device 0, its properties in *prop; returns its SM count. */
static inline int micro_device(cudaDeviceProp *prop)
{
    CK(cudaSetDevice(0));
    CK(cudaGetDeviceProperties(prop, 0));
    return prop->multiProcessorCount;
}

/* The cache a load-path micro streams: `pages` pages of `page_bytes`
 * (filled with 0x3c, a finite bf16 pair) and a block table that visits
 * them in a shuffled order, as mla-bench lays them out. */
struct MicroCache {
    uint8_t *kv;
    int *bt;
    size_t pages, bytes;
};

static inline MicroCache micro_cache(size_t pages, size_t page_bytes)
{
    MicroCache c{nullptr, nullptr, pages, pages * page_bytes};
    CK(cudaMalloc(&c.kv, c.bytes));
    CK(cudaMemset(c.kv, 0x3c, c.bytes));
    CK(cudaMalloc(&c.bt, pages * sizeof(int)));
    std::vector<int> perm(pages);
    std::iota(perm.begin(), perm.end(), 0);
    std::shuffle(perm.begin(), perm.end(), std::mt19937(1234));
    CK(cudaMemcpy(c.bt, perm.data(), pages * sizeof(int), cudaMemcpyHostToDevice));
    return c;
}

static inline void micro_cache_free(MicroCache &c)
{
    CK(cudaFree(c.kv));
    CK(cudaFree(c.bt));
}

/* cuTensorMapEncodeTiled through the runtime's driver entry point (no
 * -lcuda); exits if the driver lacks it. */
typedef CUresult (*MicroEncodeTiled)(CUtensorMap *, CUtensorMapDataType, cuuint32_t, void *,
                                     const cuuint64_t *, const cuuint64_t *, const cuuint32_t *,
                                     const cuuint32_t *, CUtensorMapInterleave,
                                     CUtensorMapSwizzle, CUtensorMapL2promotion,
                                     CUtensorMapFloatOOBfill);

static inline MicroEncodeTiled micro_encode_tiled()
{
    MicroEncodeTiled encode = nullptr;
    cudaDriverEntryPointQueryResult q;
    CK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", (void **)&encode, 12000,
                                         cudaEnableDefault, &q));
    if (!encode || q != cudaDriverEntryPointSuccess) {
        fprintf(stderr, "no cuTensorMapEncodeTiled\n");
        exit(1);
    }
    return encode;
}

#endif /* MLA_BENCH_MICRO_H */
