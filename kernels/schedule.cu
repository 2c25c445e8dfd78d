/*
 * schedule.cu - the split-KV scheduler run before each decode: checks the
 * device-resident lengths and block tables and decides, per request, how
 * many splits the decode grid uses and how many KV tiles each covers.
 *
 * Every CTA reads all lengths to get the total work (so all agree on the
 * same tiles-per-split target without another launch), then handles
 * requests blockIdx.x, blockIdx.x + gridDim.x, ..., one warp per request.
 *
 * SPDX-License-Identifier: MIT
 */
#include "mla.h"
#include "mla_params.h"
#include "ptx.cuh"

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
    const int64_t cap_pages = (int64_t)p.max_pages_per_seq * p.page_size;
    const int64_t limit = cap_pages < p.max_seq_len ? cap_pages : (int64_t)p.max_seq_len;
    const int bn = p.block_n;
    const uint32_t lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;

    /* Total work in CTA-tiles (invalid lengths count as 0: nothing runs). */
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
    total *= (long long)p.m_blocks * p.h_kv;
    const long long ctas = p.target_ctas > 0 ? p.target_ctas : 1;
    /* Tiles per CTA, at least 4: each extra split costs a 512-wide fp32
     * partial per row and a longer combine.  Measured (bench/NOTES.md): a
     * floor of 1 took b1 s1024 h16 from 32 to 25 us but b1 s4096 h128
     * from 43 to 96 us. */
    long long target = (total + ctas - 1) / ctas;
    if (target < 4)
        target = 4;
    const int max_splits = p.max_splits < 1 ? 1 : p.max_splits;

    for (int b = (int)(blockIdx.x * (SCHED_THREADS / 32) + warp); b < p.batch;
         b += (int)(gridDim.x * (SCHED_THREADS / 32))) {
        const int len = lens[b];
        bool bad = len < 0 || len > limit;
        if (!bad) {
            const int32_t *bt = (const int32_t *)p.block_table + (int64_t)b * p.max_pages_per_seq;
            const int npages = (int)(((int64_t)len + p.page_size - 1) >> p.page_shift);
            for (int pg = (int)lane; pg < npages; pg += 32) {
                const int32_t e = bt[pg];
                if (e < 0 || (int64_t)e >= p.num_pages)
                    bad = true;
            }
        }
        bad = __any_sync(0xffffffffu, bad);
        if (lane == 0) {
            int ns = 1, tps = 0;
            if (bad) {
                atomicExch(status, (int)MLA_STATUS_OUT_OF_BOUNDS);
            } else if (len > 0) {
                const long long nt = (len + bn - 1) / bn;
                long long s = (nt + target - 1) / target;
                s = s < 1 ? 1 : s > max_splits ? max_splits : s;
                tps = (int)((nt + s - 1) / s);
                ns = (int)((nt + tps - 1) / tps); /* no split is left empty */
            }
            splits[b] = ns;
            tiles[b] = tps;
        }
    }
    mla::griddep_launch_dependents();
}
