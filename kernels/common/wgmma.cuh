/*
 * wgmma.cuh - Hopper warpgroup MMA (sm_90a): shared-memory matrix
 * descriptors for 128-byte-swizzled BF16 tiles and the wgmma shapes the
 * decode kernels issue.  All four warps of a warpgroup execute each of
 * these together (converged, same operands).
 *
 * Tile layout (what TMA SWIZZLE_128B writes and wgmma reads): a matrix of
 * R rows x 64 bf16 is R rows of 128 bytes, 8-row groups 1024 bytes apart,
 * and 16-byte granule g of row r stored at granule g ^ (r & 7); wider
 * matrices are several such 64-column chunks.  Chunks start 1024-byte
 * aligned, so the hardware's address-based swizzle matches.
 *
 * Accumulator layout of m64nNk16 (f32): warp w of the warpgroup holds rows
 * 16 w .. 16 w + 15 exactly as an m16n8 mma.sync accumulator per 8-column
 * tile: d[nt][0..1] row g, columns 8 nt + 2 t (+1); d[nt][2..3] row g + 8
 * (g = lane / 4, t = lane % 4).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_WGMMA_CUH
#define MLA_WGMMA_CUH

#include "ptx.cuh"

namespace mla {

/* The swizzle: the byte offset, within its 128-byte row r, of 16-byte
 * granule g (0..7) of a 128B-swizzled chunk. */
MLA_DEV uint32_t sw128_granule(uint32_t r, uint32_t g)
{
    return (g ^ (r & 7u)) << 4;
}

/*
 * Descriptor of a 128B-swizzled operand at shared address addr.
 * K-major (rows are M or N, K contiguous: Q, K, P): sbo = 1024 (next 8
 * rows), lbo unused (16).  MN-major (V, N contiguous, read with
 * imm-trans-b): lbo = bytes to the next 64-column chunk, sbo = 1024 (next 8
 * rows of K).
 */
MLA_DEV uint64_t wg_desc(uint32_t addr, uint32_t lbo, uint32_t sbo)
{
    return (uint64_t)((addr & 0x3ffffu) >> 4) | ((uint64_t)(lbo >> 4) << 16) |
           ((uint64_t)(sbo >> 4) << 32) | (1ull << 62);
}

/* The descriptor of the operand off bytes past d's: only the start
 * address field (bits 0-13, address / 16) moves, and shared addresses
 * below 256 KB never carry out of it, so one 32-bit add instead of a new
 * descriptor per wgmma. */
MLA_DEV uint64_t wg_desc_add(uint64_t d, uint32_t off)
{
    return (d & 0xffffffff00000000ull) | (uint32_t)((uint32_t)d + (off >> 4));
}

/* Orders this thread's register accesses before the wgmmas that follow
 * (accumulators written by ordinary instructions). */
MLA_DEV void wg_fence()
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}

MLA_DEV void wg_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}

/* Wait until at most N committed groups are pending. */
template <int N>
MLA_DEV void wg_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

/* Keeps the compiler from moving accesses of an accumulator across a
 * wg_wait (the asm above does not name the registers). */
template <int NT>
MLA_DEV void wg_hold(float (&d)[NT][4])
{
#pragma unroll
    for (int i = 0; i < NT; i++)
#pragma unroll
        for (int e = 0; e < 4; e++)
            asm volatile("" : "+f"(d[i][e])::"memory");
}

/* d (+)= A[64 x 16] B[16 x 64]: A and B K-major in shared memory (Q K^T
 * of a whole 64-key tile). */
MLA_DEV void wgmma_m64n64_ss(float (&d)[8][4], uint64_t da, uint64_t db, uint32_t accumulate)
{
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %34, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {"
                 "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "
                 "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"
                 "}, %32, %33, p, 1, 1, 0, 0;\n\t}"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]),
          "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3]),
          "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]),
          "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]),
          "+f"(d[4][0]), "+f"(d[4][1]), "+f"(d[4][2]), "+f"(d[4][3]),
          "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]),
          "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]),
          "+f"(d[7][0]), "+f"(d[7][1]), "+f"(d[7][2]), "+f"(d[7][3])
        : "l"(da), "l"(db), "r"(accumulate));
}

/* d (+)= A[64 x 16] B[16 x 16], B K-major; A K-major (TA 0: K Q^T with
 * the keys as M) or MN-major (TA 1, imm-trans-a: V^T P^T with V read
 * N-major, the dims as M). */
template <int TA>
MLA_DEV void wgmma_m64n16_ss(float (&d)[2][4], uint64_t da, uint64_t db, uint32_t accumulate)
{
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %10, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n16k16.f32.bf16.bf16 "
                 "{%0, %1, %2, %3, %4, %5, %6, %7}, %8, %9, p, 1, 1, %11, 0;\n\t}"
        : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]),
          "+f"(d[1][0]), "+f"(d[1][1]), "+f"(d[1][2]), "+f"(d[1][3])
        : "l"(da), "l"(db), "r"(accumulate), "n"(TA));
}

/* d (+)= A[64 x 16] B[16 x 16], A in registers (the m16n8k16 A fragment
 * of each warp's 16 rows: a[0] row g, columns 2t, 2t + 1; a[1] row g + 8;
 * a[2], a[3] the same at columns 2t + 8, 2t + 9), B K-major in shared
 * memory.  A must not change until the wgmma has retired.  F16: A and B
 * are f16 instead of bf16. */
#define MLA_WGMMA_M64N16_RS(ty)                                                                 \
    "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %13, 0;\n\t"                                          \
    "wgmma.mma_async.sync.aligned.m64n16k16.f32." ty "." ty " "                                 \
    "{%0, %1, %2, %3, %4, %5, %6, %7}, {%8, %9, %10, %11}, %12, p, 1, 1, 0;\n\t}"
template <bool F16 = false>
MLA_DEV void wgmma_m64n16_rs(float (&d)[2][4], const uint32_t (&a)[4], uint64_t db,
                             uint32_t accumulate)
{
#define MLA_OPERANDS                                                                            \
    : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), \
      "+f"(d[1][2]), "+f"(d[1][3])                                                              \
    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate)
    if constexpr (F16)
        asm volatile(MLA_WGMMA_M64N16_RS("f16") MLA_OPERANDS);
    else
        asm volatile(MLA_WGMMA_M64N16_RS("bf16") MLA_OPERANDS);
#undef MLA_OPERANDS
}
#undef MLA_WGMMA_M64N16_RS

/* d (+)= A[64 x 16] B[16 x 64], A in registers (the m16n8k16 fragments
 * of wgmma_m64n16_rs), B K-major in shared memory: the wide FP8 kernel's
 * S^T = K Q^T and O^T = V^T P^T with 64 query rows.  F16: f16 operands. */
#define MLA_WGMMA_M64N64_RS(ty)                                                                 \
    "{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %37, 0;\n\t"                                          \
    "wgmma.mma_async.sync.aligned.m64n64k16.f32." ty "." ty " {"                                \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "                    \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31"            \
    "}, {%32, %33, %34, %35}, %36, p, 1, 1, 0;\n\t}"
template <bool F16 = false>
MLA_DEV void wgmma_m64n64_rs(float (&d)[8][4], const uint32_t (&a)[4], uint64_t db,
                             uint32_t accumulate)
{
#define MLA_OPERANDS                                                                            \
    : "+f"(d[0][0]), "+f"(d[0][1]), "+f"(d[0][2]), "+f"(d[0][3]), "+f"(d[1][0]), "+f"(d[1][1]), \
      "+f"(d[1][2]), "+f"(d[1][3]), "+f"(d[2][0]), "+f"(d[2][1]), "+f"(d[2][2]), "+f"(d[2][3]), \
      "+f"(d[3][0]), "+f"(d[3][1]), "+f"(d[3][2]), "+f"(d[3][3]), "+f"(d[4][0]), "+f"(d[4][1]), \
      "+f"(d[4][2]), "+f"(d[4][3]), "+f"(d[5][0]), "+f"(d[5][1]), "+f"(d[5][2]), "+f"(d[5][3]), \
      "+f"(d[6][0]), "+f"(d[6][1]), "+f"(d[6][2]), "+f"(d[6][3]), "+f"(d[7][0]), "+f"(d[7][1]), \
      "+f"(d[7][2]), "+f"(d[7][3])                                                              \
    : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate)
    if constexpr (F16)
        asm volatile(MLA_WGMMA_M64N64_RS("f16") MLA_OPERANDS);
    else
        asm volatile(MLA_WGMMA_M64N64_RS("bf16") MLA_OPERANDS);
#undef MLA_OPERANDS
}
#undef MLA_WGMMA_M64N64_RS

/* 64 accumulator operands: columns [8 NT0, 8 NT0 + 128) of the
 * accumulator d, half of an m64n256 wgmma's. */
#define MLA_WGMMA_ACC128(d, NT0) \
    "+f"(d[NT0 + 0][0]), "+f"(d[NT0 + 0][1]), "+f"(d[NT0 + 0][2]), "+f"(d[NT0 + 0][3]), \
    "+f"(d[NT0 + 1][0]), "+f"(d[NT0 + 1][1]), "+f"(d[NT0 + 1][2]), "+f"(d[NT0 + 1][3]), \
    "+f"(d[NT0 + 2][0]), "+f"(d[NT0 + 2][1]), "+f"(d[NT0 + 2][2]), "+f"(d[NT0 + 2][3]), \
    "+f"(d[NT0 + 3][0]), "+f"(d[NT0 + 3][1]), "+f"(d[NT0 + 3][2]), "+f"(d[NT0 + 3][3]), \
    "+f"(d[NT0 + 4][0]), "+f"(d[NT0 + 4][1]), "+f"(d[NT0 + 4][2]), "+f"(d[NT0 + 4][3]), \
    "+f"(d[NT0 + 5][0]), "+f"(d[NT0 + 5][1]), "+f"(d[NT0 + 5][2]), "+f"(d[NT0 + 5][3]), \
    "+f"(d[NT0 + 6][0]), "+f"(d[NT0 + 6][1]), "+f"(d[NT0 + 6][2]), "+f"(d[NT0 + 6][3]), \
    "+f"(d[NT0 + 7][0]), "+f"(d[NT0 + 7][1]), "+f"(d[NT0 + 7][2]), "+f"(d[NT0 + 7][3]), \
    "+f"(d[NT0 + 8][0]), "+f"(d[NT0 + 8][1]), "+f"(d[NT0 + 8][2]), "+f"(d[NT0 + 8][3]), \
    "+f"(d[NT0 + 9][0]), "+f"(d[NT0 + 9][1]), "+f"(d[NT0 + 9][2]), "+f"(d[NT0 + 9][3]), \
    "+f"(d[NT0 + 10][0]), "+f"(d[NT0 + 10][1]), "+f"(d[NT0 + 10][2]), "+f"(d[NT0 + 10][3]), \
    "+f"(d[NT0 + 11][0]), "+f"(d[NT0 + 11][1]), "+f"(d[NT0 + 11][2]), "+f"(d[NT0 + 11][3]), \
    "+f"(d[NT0 + 12][0]), "+f"(d[NT0 + 12][1]), "+f"(d[NT0 + 12][2]), "+f"(d[NT0 + 12][3]), \
    "+f"(d[NT0 + 13][0]), "+f"(d[NT0 + 13][1]), "+f"(d[NT0 + 13][2]), "+f"(d[NT0 + 13][3]), \
    "+f"(d[NT0 + 14][0]), "+f"(d[NT0 + 14][1]), "+f"(d[NT0 + 14][2]), "+f"(d[NT0 + 14][3]), \
    "+f"(d[NT0 + 15][0]), "+f"(d[NT0 + 15][1]), "+f"(d[NT0 + 15][2]), "+f"(d[NT0 + 15][3])

/* Their places in the instruction string: %0 .. %63. */
#define MLA_WGMMA_D128_REGS                                                            \
    "%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, "             \
    "%16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, "   \
    "%32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, "   \
    "%48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63"

/* The 128 accumulator operands of an m64n256 wgmma, %0 .. %127 in the
 * instruction string. */
#define MLA_WGMMA_D256_REGS                                                                \
    MLA_WGMMA_D128_REGS ", "                                                               \
    "%64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, "     \
    "%80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, "     \
    "%96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, "     \
    "%110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, "       \
    "%123, %124, %125, %126, %127"

/* d (+)= A[64 x 16] B[16 x 256]: A K-major, B MN-major (imm-trans-b) in
 * shared memory (P V over a warpgroup's 256 columns: four 64-column
 * chunks, the descriptor's lbo apart); d is the whole accumulator.  Only
 * in kernels whose entry limit holds the 128 accumulators and the
 * operands: ptxas checks one instruction's registers against it (384
 * threads: 168 registers; 512 threads: 128, too few). */
MLA_DEV void wgmma_m64n256_ss_tb(float (&d)[32][4], uint64_t da, uint64_t db, uint32_t accumulate)
{
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %130, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
                 MLA_WGMMA_D256_REGS
                 "}, %128, %129, p, 1, 1, 0, 1;\n\t}"
        : MLA_WGMMA_ACC128(d, 0), MLA_WGMMA_ACC128(d, 16)
        : "l"(da), "l"(db), "r"(accumulate));
}

/* The same with A in registers (P: the m16n8k16 A fragment of each
 * warp's 16 rows, as wgmma_m64n16_rs); A must not change until the wgmma
 * has retired. */
MLA_DEV void wgmma_m64n256_rs_tb(float (&d)[32][4], const uint32_t (&a)[4], uint64_t db,
                                 uint32_t accumulate)
{
    asm volatile("{\n\t.reg .pred p;\n\tsetp.ne.b32 p, %133, 0;\n\t"
                 "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 {"
                 MLA_WGMMA_D256_REGS
                 "}, {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n\t}"
        : MLA_WGMMA_ACC128(d, 0), MLA_WGMMA_ACC128(d, 16)
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(accumulate));
}

} /* namespace mla */

#endif /* MLA_WGMMA_CUH */
