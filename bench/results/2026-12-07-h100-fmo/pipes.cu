// Pipe throughput of the softmax's instructions on one SM: clocks a warp instruction a
// scheduler.  nvcc -O3 -gencode arch=compute_90a,code=sm_90a -o pipes pipes.cu && ./pipes
#include <cstdio>
#include <cstdint>
#define N 2048
template <int OP>
__global__ void k(float *out, long long *clk, float seed)
{
    float a[8];
    uint32_t u[8];
    for (int i = 0; i < 8; i++) { a[i] = seed * (threadIdx.x + i); u[i] = threadIdx.x * 7 + i; }
    __syncthreads();
    long long t0 = clock64();
#pragma unroll 1
    for (int it = 0; it < N; it++) {
#pragma unroll
        for (int i = 0; i < 8; i++) {
            if (OP == 0) { asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(a[i])); }
            if (OP == 1) { uint32_t r; asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(a[i]), "f"(a[(i+1)&7])); a[i] = __uint_as_float(r); }
            if (OP == 2) { asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(a[i]));
                           uint32_t r; asm volatile("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(r) : "f"(__uint_as_float(u[i])), "f"(__uint_as_float(u[(i+1)&7]))); u[i] = r; }
            if (OP == 3) { uint32_t x = __float_as_uint(a[i]) + 0x8000u, y = __float_as_uint(a[(i+1)&7]) + 0x8000u; uint32_t r;
                           asm volatile("prmt.b32 %0, %1, %2, 0x7632;" : "=r"(r) : "r"(x), "r"(y)); a[i] = __uint_as_float(r); }
            if (OP == 4) { asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(a[i]));
                           uint32_t x = u[i] + 0x8000u, y = u[(i+1)&7] + 0x8000u; uint32_t r;
                           asm volatile("prmt.b32 %0, %1, %2, 0x7632;" : "=r"(r) : "r"(x), "r"(y)); u[i] = r; }
            if (OP == 5) { asm volatile("fma.rn.f32 %0, %0, %0, %0;" : "+f"(a[i])); }
        }
    }
    long long t1 = clock64();
    float s = 0; for (int i = 0; i < 8; i++) s += a[i] + __uint_as_float(u[i]);
    out[blockIdx.x * blockDim.x + threadIdx.x] = s;
    if (threadIdx.x == 0) clk[blockIdx.x] = t1 - t0;
}
template <int OP> void run(const char *name, int threads)
{
    float *o; long long *c; cudaMalloc(&o, 132 * 1024 * 4); cudaMalloc(&c, 132 * 8);
    k<OP><<<132, threads>>>(o, c, 1e-3f);
    k<OP><<<132, threads>>>(o, c, 1e-3f);
    long long h[132]; cudaMemcpy(h, c, sizeof h, cudaMemcpyDeviceToHost);
    double warps_per_smsp = threads / 32 / 4.0;
    double per = (double)h[0] / ((double)N * 8 * warps_per_smsp);
    printf("%-28s %4d thr: %8lld clk, %.2f clk per warp-op per SMSP\n", name, threads, h[0], per);
}
int main()
{
    for (int t : {128, 512}) {
        run<0>("ex2", t); run<1>("cvt.rn.bf16x2", t); run<2>("ex2 + cvt.bf16x2", t);
        run<3>("2 iadd + prmt", t); run<4>("ex2 + 2 iadd + prmt", t); run<5>("ffma", t);
    }
    return 0;
}
