/*
 * micro.h - what the microbenchmarks in bench/micro share: CK(x), which
 * exits with the failed runtime call and its error.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_BENCH_MICRO_H
#define MLA_BENCH_MICRO_H

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#define CK(x)                                                                                  \
    do {                                                                                       \
        cudaError_t e_ = (x);                                                                  \
        if (e_ != cudaSuccess) {                                                               \
            fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                           \
            exit(1);                                                                           \
        }                                                                                      \
    } while (0)

#endif /* MLA_BENCH_MICRO_H */
