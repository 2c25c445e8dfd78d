/*
 * schedule.cu - the split-KV scheduler run before each decode: checks the
 * device-resident lengths and block tables and decides, per request, how
 * many splits the decode grid uses and how many KV tiles each covers.
 *
 * Every CTA reads all lengths to get the total work (so all agree on the
 * same split sizes without another launch), then handles
 * requests blockIdx.x, blockIdx.x + gridDim.x, ..., one warp per request.
 * Small batches skip this kernel: each decode CTA makes the same decision
 * itself (schedule.cuh, self_schedule()).
 *
 * SPDX-License-Identifier: MIT
 */
#include "mla.h"
#include "mla_params.h"
#include "ptx.cuh"
#include "schedule.cuh"

#define SCHED_THREADS 128

extern "C" __global__ void __launch_bounds__(SCHED_THREADS)
    mla_schedule(const __grid_constant__ mla_decode_params p)
{
    __shared__ long long part[SCHED_THREADS / 32];

    mla::griddep_wait();
    const int32_t *lens = (const int32_t *)p.seq_lens;
    uint8_t *ws = (uint8_t *)p.workspace;
    int32_t *status = (int32_t *)ws;
    int32_t *splits = (int32_t *)(ws + p.ws_splits);
    int32_t *tiles = (int32_t *)(ws + p.ws_tiles);
    const long long limit = mla::len_limit(p);
    const int bn = p.block_n;
    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;

    /* Total work in KV tiles (invalid lengths count as 0: nothing runs). */
    long long w = 0;
    for (int i = (int)threadIdx.x; i < p.batch; i += SCHED_THREADS) {
        const int len = lens[i];
        if (len > 0 && len <= limit)
            w += (len + bn - 1) / bn;
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1)
        w += __shfl_xor_sync(0xffffffffu, w, o);
    if (lane == 0)
        part[warp] = w;
    __syncthreads();
    long long total = 0;
#pragma unroll
    for (int i = 0; i < SCHED_THREADS / 32; i++)
        total += part[i];

    for (int b = (int)(blockIdx.x * (SCHED_THREADS / 32) + warp); b < p.batch;
         b += (int)(gridDim.x * (SCHED_THREADS / 32))) {
        const int len = lens[b];
        bool bad = len < 0 || len > limit;
        if (!bad)
            bad = mla::bad_pages(p, b, len, lane);
        bad = __any_sync(0xffffffffu, bad);
        if (lane == 0) {
            int ns = 1, tps = 0;
            if (bad)
                atomicExch(status, (int)MLA_STATUS_OUT_OF_BOUNDS);
            else if (len > 0)
                mla::split_request(p, len, bn, total, ns, tps);
            splits[b] = ns;
            tiles[b] = tps;
        }
    }
    mla::griddep_launch_dependents();
}
