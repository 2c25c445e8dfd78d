/*
 * fp8_tile.cu - the per-tile cycle budget of a wide FP8 consumer that
 * converts in registers (doc/performance.md, "Plan: FP8 at 64-128
 * heads"), measured on the consumers alone: no loads, no pipeline, no
 * softmax, one 64-key E4M3 tile resident in shared memory and used over
 * and over.  Two consumer warpgroups a CTA, one CTA an SM:
 *
 *   S^T = K Q^T   (64 keys x 64 rows x 576 dims): 36 wgmma m64n64k16,
 *                 A = K built in registers from the FP8 bytes, B = the Q
 *                 tile; one warpgroup a tile, the two alternate;
 *   O^T += V^T P^T (512 dims x 64 rows x 64 keys): each warpgroup its 256
 *                 dims of every tile, 16 wgmma m64n64k16, A = V^T built in
 *                 registers, B = the P tile.
 *
 * So a pair of tiles is, per warpgroup, one S^T and two halves of P V.
 * Each mode times that pair loop (or a part of it) and reports clocks a
 * tile and CTA; the full tile is 8.91 MFLOP, so at 790 TFLOP/s and 132
 * SMs an SM may spend 2176 clocks on it (1.98 GHz).  Modes:
 *
 *   mma-qk / mma-pv / mma-tile  the wgmmas alone (A fragments constant):
 *                               the tensor floor of register-A n64;
 *   qk-f16        K bytes to f16 (one cvt a pair) against an f16 Q tile;
 *   qk-f16-scaled the same times a per-key f16x2 scale (one mul a pair);
 *   qk-bf16-scaled per-byte fp32 scale, rounded to bf16 (the narrow
 *                 kernel's scaled path, seven instructions a pair);
 *   pv-raw        V bytes to bf16 times 2^-120 (three integer ops a pair);
 *   pv-scaled     V times per-key fp32 scales, rounded to bf16;
 *   tile / tile-scaled / tile-scaled-bf16  S^T and both P V halves.
 *
 * Build (sm_90a only):
 *   nvcc -gencode arch=compute_90a,code=sm_90a -O3 -std=c++17 -Iinclude \
 *        -Ikernels/common -Xptxas -v -o fp8_tile bench/micro/fp8_tile.cu
 * Run: ./fp8_tile [iterations]   (prints one line a mode)
 *
 * SPDX-License-Identifier: MIT
 */
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <utility>
#include <vector>

#include "micro.h"
#include "ptx.cuh"
#include "wgmma.cuh"
#include "convert.cuh"

using namespace mla;

namespace {

constexpr uint32_t kRowPitch = 576;            /* an E4M3 row */
constexpr uint32_t kChunkBytes = 64u * 128u;   /* 64 rows x 64 dims, 128B swizzle */
constexpr uint32_t kQBytes = 9u * kChunkBytes; /* the 64-row Q tile */
constexpr uint32_t kPBytes = kChunkBytes;      /* 64 rows x 64 keys */
constexpr uint32_t kKvBytes = 64u * kRowPitch;
constexpr uint32_t kSclBytes = 64u * 8u * 4u; /* fp32 scales, 8 a key */
constexpr uint32_t kSclH2Bytes = 64u * 8u * 4u; /* f16x2 copies */
constexpr uint32_t kOffP = kQBytes, kOffKv = kOffP + kPBytes, kOffScl = kOffKv + kKvBytes,
                   kOffSclH2 = kOffScl + kSclBytes, kSmemBytes = kOffSclH2 + kSclH2Bytes;
constexpr uint32_t kThreads = 256;

enum Mode {
    MMA_QK,
    MMA_PV,
    MMA_TILE,
    QK_F16,
    QK_F16S,
    QK_BF16S,
    PV_RAW,
    PV_SCALED,
    TILE,
    TILE_SCALED,
    TILE_SCALED_BF16,
    NMODES
};
const char *const kModeNames[NMODES] = {"mma-qk",          "mma-pv",        "mma-tile",
                                        "qk-f16",          "qk-f16-scaled", "qk-bf16-scaled",
                                        "pv-raw",          "pv-scaled",     "tile",
                                        "tile-scaled",     "tile-scaled-bf16"};

__device__ __forceinline__ uint32_t hmul2(uint32_t a, uint32_t b)
{
    uint32_t d;
    asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
    return d;
}

/* K modes: 0 f16 unscaled, 1 f16 times an f16x2 key scale, 2 bf16 from
 * fp32 scales (the narrow kernel's scaled pair). */
struct Thr {
    uint32_t w, g, t;
};

/* The 4 k-steps' A fragments of chunk ch for key rows 16 w + g and + 8
 * (the narrow FP8 kernel's dim order: one 16-byte load a row). */
template <int KS>
__device__ __forceinline__ void k_frags(uint32_t kv, uint32_t scl, uint32_t sclh2, uint32_t ch,
                                        const Thr &th, uint32_t (&a)[4][4])
{
    const uint32_t r0 = 16u * th.w + th.g, r1 = r0 + 8u;
    const uint4 x = lds128(kv + kRowPitch * r0 + 64u * ch + 16u * th.t);
    const uint4 y = lds128(kv + kRowPitch * r1 + 64u * ch + 16u * th.t);
    const uint32_t xw[4] = {x.x, x.y, x.z, x.w}, yw[4] = {y.x, y.y, y.z, y.w};
    if constexpr (KS == 2) {
        const float sx = lds_f32(scl + 32u * r0 + 4u * (ch >> 1));
        const float sy = lds_f32(scl + 32u * r1 + 4u * (ch >> 1));
#pragma unroll
        for (int s = 0; s < 4; s++) {
            a[s][0] = e4m3_pair_bf16x2_scaled<0, 1>(xw[s], 0u, sx, sx);
            a[s][1] = e4m3_pair_bf16x2_scaled<0, 1>(yw[s], 0u, sy, sy);
            a[s][2] = e4m3_pair_bf16x2_scaled<2, 3>(xw[s], 0u, sx, sx);
            a[s][3] = e4m3_pair_bf16x2_scaled<2, 3>(yw[s], 0u, sy, sy);
        }
    } else {
#pragma unroll
        for (int s = 0; s < 4; s++) {
            a[s][0] = e4m3_lo_f16x2(xw[s]);
            a[s][1] = e4m3_lo_f16x2(yw[s]);
            a[s][2] = e4m3_hi_f16x2(xw[s]);
            a[s][3] = e4m3_hi_f16x2(yw[s]);
        }
        if constexpr (KS == 1) {
            const uint32_t hx = lds32(sclh2 + 32u * r0 + 4u * (ch >> 1));
            const uint32_t hy = lds32(sclh2 + 32u * r1 + 4u * (ch >> 1));
#pragma unroll
            for (int s = 0; s < 4; s++) {
                a[s][0] = hmul2(a[s][0], hx);
                a[s][1] = hmul2(a[s][1], hy);
                a[s][2] = hmul2(a[s][2], hx);
                a[s][3] = hmul2(a[s][3], hy);
            }
        }
    }
}

/* S^T of one tile: 9 chunks of 4 k-steps, chunk ch + 1's fragments built
 * while chunk ch runs (two buffers). */
template <int KS, bool CVT>
__device__ __forceinline__ void qk(float (&s)[8][4], uint32_t sq, uint32_t kv, uint32_t scl,
                                   uint32_t sclh2, const Thr &th)
{
    uint32_t a[CVT ? 2 : 1][4][4];
    if (CVT) {
        k_frags<KS>(kv, scl, sclh2, 0, th, a[0]);
    } else {
#pragma unroll
        for (int s2 = 0; s2 < 4; s2++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                a[0][s2][e] = 0x3c003c00u ^ (th.g << (e + s2));
    }
    const uint64_t q0 = wg_desc(sq, 16u, 1024u);
    wg_wait<0>(); /* the P V before retires first, as in the narrow kernel */
#pragma unroll
    for (uint32_t ch = 0; ch < 9; ch++) {
        wg_fence();
#pragma unroll
        for (uint32_t st = 0; st < 4; st++)
            wgmma_m64n64_rs<KS != 2>(s, a[CVT ? ch % 2 : 0][st],
                                     wg_desc_add(q0, ch * kChunkBytes + 32u * st),
                                     (ch | st) != 0 ? 1u : 0u);
        wg_commit();
        if (ch + 1 < 9) {
            /* the same waits with or without conversion */
            uint32_t nx[4][4];
            if (CVT)
                k_frags<KS>(kv, scl, sclh2, ch + 1, th, nx);
            wg_wait<1>();
            if (CVT)
#pragma unroll
                for (int s2 = 0; s2 < 4; s2++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        a[(ch + 1) % 2][s2][e] = nx[s2][e];
        }
    }
    wg_wait<0>();
    wg_hold(s);
}

template <bool SC, int LO, int HI>
__device__ __forceinline__ uint32_t vpair(uint32_t a, uint32_t b, float s_lo, float s_hi)
{
    if (SC)
        return e4m3_pair_bf16x2_scaled<LO, HI>(a, b, s_lo, s_hi);
    return e4m3_pair_bf16x2_raw<LO, HI>(a, b);
}

/* V^T fragments of k-step ks for warpgroup wg's 256 dims (blocks 2 wg
 * and 2 wg + 1; m-tile mm: block 2 wg + mm / 2), keys 16 ks + t + 4 i. */
template <bool SC>
__device__ __forceinline__ void v_frags(uint32_t kv, uint32_t scl, uint32_t wg, uint32_t ks,
                                        const Thr &th, uint32_t (&a)[4][4])
{
    const uint32_t d0 = 256u * wg + 32u * th.w + 4u * th.g;
    uint32_t vx[4], vy[4];
    float sx[4], sy[4];
#pragma unroll
    for (uint32_t i = 0; i < 4; i++) {
        const uint32_t key = 16u * ks + th.t + 4u * i;
        vx[i] = lds32(kv + kRowPitch * key + d0);
        vy[i] = lds32(kv + kRowPitch * key + d0 + 128u);
        sx[i] = sy[i] = 1.0f;
        if (SC) {
            sx[i] = lds_f32(scl + 32u * key + 8u * wg);
            sy[i] = lds_f32(scl + 32u * key + 8u * wg + 4u);
        }
    }
#pragma unroll
    for (int mm = 0; mm < 4; mm++) {
        const bool y = mm >> 1;
        const uint32_t w0 = y ? vy[0] : vx[0], w1 = y ? vy[1] : vx[1];
        const uint32_t w2 = y ? vy[2] : vx[2], w3 = y ? vy[3] : vx[3];
        const float s0 = y ? sy[0] : sx[0], s1 = y ? sy[1] : sx[1];
        const float s2 = y ? sy[2] : sx[2], s3 = y ? sy[3] : sx[3];
        if (mm & 1) {
            a[mm][0] = vpair<SC, 2, 6>(w0, w1, s0, s1);
            a[mm][1] = vpair<SC, 3, 7>(w0, w1, s0, s1);
            a[mm][2] = vpair<SC, 2, 6>(w2, w3, s2, s3);
            a[mm][3] = vpair<SC, 3, 7>(w2, w3, s2, s3);
        } else {
            a[mm][0] = vpair<SC, 0, 4>(w0, w1, s0, s1);
            a[mm][1] = vpair<SC, 1, 5>(w0, w1, s0, s1);
            a[mm][2] = vpair<SC, 0, 4>(w2, w3, s2, s3);
            a[mm][3] = vpair<SC, 1, 5>(w2, w3, s2, s3);
        }
    }
}

/* O^T += V^T P^T over this warpgroup's 4 m-tiles: 4 k-steps of 4 wgmmas,
 * k-step ks + 1's fragments built while k-step ks runs. */
template <bool SC, bool CVT>
__device__ __forceinline__ void pv(float (&o)[4][8][4], uint32_t sp, uint32_t kv, uint32_t scl,
                                   uint32_t wg, const Thr &th)
{
    uint32_t a[CVT ? 2 : 1][4][4];
    if (CVT) {
        v_frags<SC>(kv, scl, wg, 0, th, a[0]);
    } else {
#pragma unroll
        for (int m = 0; m < 4; m++)
#pragma unroll
            for (int e = 0; e < 4; e++)
                a[0][m][e] = 0x3f803f80u ^ (th.g << (e + m));
    }
    const uint64_t p0 = wg_desc(sp, 16u, 1024u);
#pragma unroll
    for (uint32_t ks = 0; ks < 4; ks++) {
        wg_fence();
#pragma unroll
        for (uint32_t mm = 0; mm < 4; mm++)
            wgmma_m64n64_rs<false>(o[mm], a[CVT ? ks % 2 : 0][mm], wg_desc_add(p0, 32u * ks), 1u);
        wg_commit();
        if (ks + 1 < 4) {
            uint32_t nx[4][4];
            if (CVT)
                v_frags<SC>(kv, scl, wg, ks + 1, th, nx);
            wg_wait<1>();
            if (CVT)
#pragma unroll
                for (int m = 0; m < 4; m++)
#pragma unroll
                    for (int e = 0; e < 4; e++)
                        a[(ks + 1) % 2][m][e] = nx[m][e];
        }
    }
}

template <int MODE>
__global__ void __launch_bounds__(kThreads, 1)
    fp8_tile_kernel(const uint8_t *src, int iters, long long *cycles, float *sink)
{
    extern __shared__ __align__(1024) uint8_t smem_raw[];
    const uint32_t base = (smem_u32(smem_raw) + 1023u) & ~1023u;
    uint8_t *smem = smem_raw + (base - smem_u32(smem_raw));
    for (uint32_t i = threadIdx.x; i < kSmemBytes / 16u; i += kThreads)
        reinterpret_cast<uint4 *>(smem)[i] = reinterpret_cast<const uint4 *>(src)[i];
    fence_proxy_async();
    __syncthreads();

    const uint32_t wg = threadIdx.x >> 7, lane = threadIdx.x & 31u;
    const Thr th{(threadIdx.x >> 5) & 3u, lane >> 2, lane & 3u};
    const uint32_t sq = base, sp = base + kOffP, kv = base + kOffKv, scl = base + kOffScl,
                   sclh2 = base + kOffSclH2;
    float s[8][4], o[4][8][4];
#pragma unroll
    for (int n = 0; n < 8; n++)
#pragma unroll
        for (int e = 0; e < 4; e++) {
            s[n][e] = 0.0f;
#pragma unroll
            for (int m = 0; m < 4; m++)
                o[m][n][e] = 0.0f;
        }
    constexpr bool kQk = MODE == MMA_QK || MODE == MMA_TILE || MODE == QK_F16 ||
                         MODE == QK_F16S || MODE == QK_BF16S || MODE == TILE ||
                         MODE == TILE_SCALED || MODE == TILE_SCALED_BF16;
    constexpr bool kPv = MODE == MMA_PV || MODE == MMA_TILE || MODE == PV_RAW ||
                         MODE == PV_SCALED || MODE == TILE || MODE == TILE_SCALED ||
                         MODE == TILE_SCALED_BF16;
    constexpr bool kQkCvt = kQk && MODE != MMA_QK && MODE != MMA_TILE;
    constexpr bool kPvCvt = kPv && MODE != MMA_PV && MODE != MMA_TILE;
    constexpr int kKs = MODE == QK_F16S || MODE == TILE_SCALED       ? 1
                        : MODE == QK_BF16S || MODE == TILE_SCALED_BF16 ? 2
                                                                        : 0;
    constexpr bool kVs = MODE == PV_SCALED || MODE == TILE_SCALED || MODE == TILE_SCALED_BF16;
    float keep = 0.0f;

    __syncthreads();
    const long long t0 = clock64();
    for (int it = 0; it < iters; it++) {
        if (kQk) {
            qk<kKs, kQkCvt>(s, sq, kv, scl, sclh2, th);
            keep += s[0][0] + s[7][3];
        }
        if (kPv) {
            pv<kVs, kPvCvt>(o, sp, kv, scl, wg, th);
            pv<kVs, kPvCvt>(o, sp, kv, scl, wg, th);
        }
    }
    wg_wait<0>();
#pragma unroll
    for (int m = 0; m < 4; m++)
        wg_hold(o[m]);
    __syncthreads();
    const long long t1 = clock64();
    if (threadIdx.x == 0)
        cycles[blockIdx.x] = t1 - t0;
#pragma unroll
    for (int m = 0; m < 4; m++)
#pragma unroll
        for (int n = 0; n < 8; n++)
            keep += o[m][n][0];
    sink[blockIdx.x * kThreads + threadIdx.x] = keep;
}

template <int MODE>
void run_mode(const uint8_t *d_src, int sms, int iters, long long *d_cyc, float *d_sink,
              int clock_khz)
{
    auto kern = fp8_tile_kernel<MODE>;
    CK(cudaFuncSetAttribute(kern, cudaFuncAttributeMaxDynamicSharedMemorySize,
                            (int)(kSmemBytes + 1024)));
    kern<<<sms, kThreads, kSmemBytes + 1024>>>(d_src, 2, d_cyc, d_sink); /* warm up */
    CK(cudaGetLastError());
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    CK(cudaEventRecord(e0));
    kern<<<sms, kThreads, kSmemBytes + 1024>>>(d_src, iters, d_cyc, d_sink);
    CK(cudaEventRecord(e1));
    CK(cudaEventSynchronize(e1));
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, e0, e1));
    std::vector<long long> cyc(sms);
    CK(cudaMemcpy(cyc.data(), d_cyc, sizeof(long long) * sms, cudaMemcpyDeviceToHost));
    std::sort(cyc.begin(), cyc.end());
    /* A pair loop is two tiles a CTA. */
    const double tiles = 2.0 * iters;
    const double med = (double)cyc[sms / 2] / tiles, mx = (double)cyc[sms - 1] / tiles;
    const double qk_flop = 2.0 * 64 * 64 * 576, pv_flop = 2.0 * 512 * 64 * 64;
    const bool qk = MODE == MMA_QK || MODE == MMA_TILE || MODE == QK_F16 || MODE == QK_F16S ||
                    MODE == QK_BF16S || MODE >= TILE;
    const bool pvm = MODE == MMA_PV || MODE == MMA_TILE || MODE == PV_RAW ||
                     MODE == PV_SCALED || MODE >= TILE;
    const double flop = tiles * sms * ((qk ? qk_flop : 0.0) + (pvm ? pv_flop : 0.0));
    const double ghz = (double)cyc[sms / 2] / (ms * 1e-3) * 1e-9;
    printf("%-17s %8.0f clk/tile (max %6.0f)  %6.1f TFLOP/s  %5.2f GHz effective"
           "  (full tile at 790 TFLOP/s: %4.0f clk)\n",
           kModeNames[MODE], med, mx, flop / (ms * 1e-3) * 1e-12, ghz,
           2.0 * (qk_flop + pv_flop) / 2.0 / (790e12 / sms / (clock_khz * 1e3)));
}

template <int... M>
void run_all(std::integer_sequence<int, M...>, const uint8_t *d_src, int sms, int iters,
             long long *d_cyc, float *d_sink, int clock_khz)
{
    (run_mode<M>(d_src, sms, iters, d_cyc, d_sink, clock_khz), ...);
}

} /* namespace */

int main(int argc, char **argv)
{
    const int iters = argc > 1 ? atoi(argv[1]) : 2000;
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    if (prop.major != 9) {
        fprintf(stderr, "fp8_tile: needs an sm_90 device (found %d.%d)\n", prop.major,
                prop.minor);
        return 77;
    }
    int clock_khz = 0;
    CK(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0));
    printf("%s, %d SMs, max clock %.2f GHz, %d iterations (tile pairs) a CTA\n", prop.name,
           prop.multiProcessorCount, clock_khz * 1e-6, iters);
    std::vector<uint8_t> h(kSmemBytes);
    srand(1);
    for (uint32_t i = 0; i < kQBytes + kPBytes; i += 2) {
        /* small f16 / bf16 values: 1.0-ish times 2^-4 */
        const uint16_t v = (uint16_t)(0x2c00u | (rand() & 0x3ffu));
        memcpy(&h[i], &v, 2);
    }
    for (uint32_t i = kOffKv; i < kOffScl; i++)
        h[i] = (uint8_t)(rand() & 0x77); /* never the e4m3 NaN */
    for (uint32_t i = 0; i < 64u * 8u; i++) {
        const float f = 0.5f + (float)(rand() & 1023) / 1024.0f;
        memcpy(&h[kOffScl + 4u * i], &f, 4);
        const uint32_t h2 = 0x3c003c00u; /* 1.0 as f16x2 */
        memcpy(&h[kOffSclH2 + 4u * i], &h2, 4);
    }
    uint8_t *d_src;
    long long *d_cyc;
    float *d_sink;
    const int sms = prop.multiProcessorCount;
    CK(cudaMalloc(&d_src, kSmemBytes));
    CK(cudaMalloc(&d_cyc, sizeof(long long) * sms));
    CK(cudaMalloc(&d_sink, sizeof(float) * sms * kThreads));
    CK(cudaMemcpy(d_src, h.data(), kSmemBytes, cudaMemcpyHostToDevice));
    run_all(std::make_integer_sequence<int, NMODES>{}, d_src, sms, iters, d_cyc, d_sink,
            clock_khz);
    CK(cudaFree(d_src));
    CK(cudaFree(d_cyc));
    CK(cudaFree(d_sink));
    return 0;
}
