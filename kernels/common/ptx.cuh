/*
 * ptx.cuh - inline-PTX wrappers used by the kernels: mbarriers, bulk
 * copies, proxy fences, ldmatrix, mma.sync, FP8 conversion, programmatic
 * dependent launch, named barriers and register reallocation.
 *
 * Every wrapper that orders memory is `asm volatile` with a "memory"
 * clobber, so the compiler keeps it in program order with the shared
 * memory accesses around it.  Every target is sm_90 or later (configure
 * refuses older ones: griddepcontrol and bulk copies need it),
 * so no wrapper has a fallback.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_PTX_CUH
#define MLA_PTX_CUH

#include <stdint.h>

#define MLA_DEV __device__ __forceinline__

namespace mla {

/* ---- addresses ---- */

MLA_DEV uint32_t smem_u32(const void *p)
{
    return (uint32_t)__cvta_generic_to_shared(p);
}

/* ---- mbarrier ---- */

MLA_DEV void mbar_init(uint32_t bar, uint32_t count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(count) : "memory");
}

/* Makes barrier initialization visible to the async proxy (bulk copies
 * complete_tx on these barriers) and to the other threads once followed by
 * a CTA barrier. */
MLA_DEV void fence_mbar_init()
{
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}

/* Adds `bytes` to the transaction count of the barrier's current phase,
 * without arriving. */
MLA_DEV void mbar_expect_tx(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(bytes)
                 : "memory");
}

/* One arrival with release semantics (CTA scope): the caller's earlier
 * shared-memory writes are visible to threads that see the phase flip. */
MLA_DEV void mbar_arrive(uint32_t bar)
{
    asm volatile("mbarrier.arrive.release.cta.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}

/* Waits until the phase with the given parity has completed (acquire). */
MLA_DEV void mbar_wait(uint32_t bar, uint32_t parity)
{
    asm volatile(
        "{\n\t"
        ".reg .pred p;\n\t"
        "WAIT_%=:\n\t"
        "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%0], %1;\n\t"
        "@!p bra WAIT_%=;\n\t"
        "}" ::"r"(bar),
        "r"(parity)
        : "memory");
}

/* Whether that phase has completed, without waiting (acquire if so). */
MLA_DEV bool mbar_test(uint32_t bar, uint32_t parity)
{
    uint32_t done;
    asm volatile(
        "{\n\t"
        ".reg .pred p;\n\t"
        "mbarrier.test_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n\t"
        "selp.u32 %0, 1, 0, p;\n\t"
        "}"
        : "=r"(done)
        : "r"(bar), "r"(parity)
        : "memory");
    return done != 0;
}

/* ---- proxies ---- */

/* Orders this thread's generic-proxy shared-memory accesses before later
 * async-proxy accesses (bulk copies) to the same memory. */
MLA_DEV void fence_proxy_async()
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* ---- bulk copies (global -> shared, completing on an mbarrier) ---- */

MLA_DEV uint64_t policy_evict_first()
{
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(pol));
    return pol;
}

MLA_DEV uint64_t policy_evict_normal()
{
    uint64_t pol;
    asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(pol));
    return pol;
}

/* The L2 policy of every decode kernel's KV stream: evict-first, even
 * where another M tile's CTA reads the same tile.  Kept evict-normal
 * there, the stream pushed the schedule's and the combine's lines out of
 * L2 instead (sm_90a wide BF16 h128 b8 s4096: the schedule kernel 8.6 ->
 * 4.4 us, the call 47.2 -> 40.6; doc/performance.md, Small batches). */
MLA_DEV uint64_t policy_kv_stream()
{
    return policy_evict_first();
}

/* dst and src 16-byte aligned, bytes a multiple of 16. */
MLA_DEV void bulk_g2s(uint32_t dst, const void *src, uint32_t bytes, uint32_t bar, uint64_t pol)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint"
                 " [%0], [%1], %2, [%3], %4;" ::"r"(dst),
                 "l"(src), "r"(bytes), "r"(bar), "l"(pol)
                 : "memory");
}

/* 4-byte asynchronous copy (generic proxy), for data whose size or
 * alignment does not suit a bulk copy. */
MLA_DEV void cp_async_4(uint32_t dst, const void *src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(dst), "l"(src) : "memory");
}

/* 16-byte asynchronous copy through L2 (.cg); the bytes past src_bytes
 * (16 or 0) are written as zeros, and with 0 nothing is read. */
MLA_DEV void cp_async_16z(uint32_t dst, const void *src, uint32_t src_bytes)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}

/* 4-byte asynchronous copy, zero-filled like cp_async_16z. */
MLA_DEV void cp_async_4z(uint32_t dst, const void *src, uint32_t src_bytes)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;" ::"r"(dst), "l"(src),
                 "r"(src_bytes)
                 : "memory");
}

/* Waits for all of this thread's cp.async copies; their data is then
 * visible to it (and, after a barrier, to the CTA). */
MLA_DEV void cp_async_wait_all()
{
    asm volatile("cp.async.wait_all;" ::: "memory");
}

/* The barrier receives one arrival (counted in its expected count: .noinc)
 * once all of this thread's earlier cp.async copies have completed; their
 * data is then visible to threads that observe the phase completion. */
MLA_DEV void cp_async_mbar_arrive_noinc(uint32_t bar)
{
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];" ::"r"(bar) : "memory");
}

/* Tensor-map (TMA) copy of one box with origin (c0, c1, c2), in elements,
 * to shared memory; the box's full size counts toward the barrier's
 * transaction bytes (elements outside the tensor are written as zeros).
 * tmap: generic address of a CUtensorMap in kernel parameter space. */
MLA_DEV void tma_load_3d(uint32_t dst, const void *tmap, int c0, int c1, int c2, uint32_t bar,
                         uint64_t pol)
{
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 ".L2::cache_hint [%0], [%1, {%2, %3, %4}], [%5], %6;" ::"r"(dst),
                 "l"(tmap), "r"(c0), "r"(c1), "r"(c2), "r"(bar), "l"(pol)
                 : "memory");
}

MLA_DEV void tma_load_4d(uint32_t dst, const void *tmap, int c0, int c1, int c2, int c3,
                         uint32_t bar, uint64_t pol)
{
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 ".L2::cache_hint [%0], [%1, {%2, %3, %4, %5}], [%6], %7;" ::"r"(dst),
                 "l"(tmap), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar), "l"(pol)
                 : "memory");
}

MLA_DEV void prefetch_tensormap(const void *tmap)
{
    asm volatile("prefetch.tensormap [%0];" ::"l"(tmap) : "memory");
}

/* Registers `bytes` more transaction bytes and arrives, in one step. */
MLA_DEV void mbar_arrive_expect_tx(uint32_t bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 _, [%0], %1;" ::"r"(bar),
                 "r"(bytes)
                 : "memory");
}

/* ---- plain shared / global accesses ---- */

MLA_DEV void sts128(uint32_t a, uint32_t x, uint32_t y, uint32_t z, uint32_t w)
{
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};" ::"r"(a), "r"(x), "r"(y), "r"(z),
                 "r"(w)
                 : "memory");
}

MLA_DEV void sts32(uint32_t a, uint32_t x)
{
    asm volatile("st.shared.b32 [%0], %1;" ::"r"(a), "r"(x) : "memory");
}

MLA_DEV void sts16(uint32_t a, uint16_t x)
{
    asm volatile("st.shared.b16 [%0], %1;" ::"r"(a), "h"(x) : "memory");
}

MLA_DEV uint2 lds64(uint32_t a)
{
    uint2 v;
    asm volatile("ld.shared.v2.b32 {%0, %1}, [%2];" : "=r"(v.x), "=r"(v.y) : "r"(a) : "memory");
    return v;
}

MLA_DEV uint4 lds128(uint32_t a)
{
    uint4 v;
    asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "r"(a)
                 : "memory");
    return v;
}

/* Volatile, so that each role reloads these after its setmaxnreg instead
 * of keeping them live across the role split (a value live into a
 * 40-register branch would be spilled). */
MLA_DEV int ld_volatile_s32(const int32_t *p)
{
    int v;
    asm volatile("ld.global.s32 %0, [%1];" : "=r"(v) : "l"(p));
    return v;
}

MLA_DEV int4 ld_volatile_v4(const void *p)
{
    int4 v;
    asm volatile("ld.global.v4.s32 {%0, %1, %2, %3}, [%4];"
                 : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
                 : "l"(p));
    return v;
}

MLA_DEV uint32_t lds32(uint32_t a)
{
    uint32_t v;
    asm volatile("ld.shared.b32 %0, [%1];" : "=r"(v) : "r"(a) : "memory");
    return v;
}

MLA_DEV float lds_f32(uint32_t a)
{
    float v;
    asm volatile("ld.shared.f32 %0, [%1];" : "=f"(v) : "r"(a) : "memory");
    return v;
}

/* ---- tensor-core fragments ---- */

MLA_DEV void ldmatrix_x4(uint32_t a, uint32_t &r0, uint32_t &r1, uint32_t &r2, uint32_t &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(a));
}

MLA_DEV void ldmatrix_x4_trans(uint32_t a, uint32_t &r0, uint32_t &r1, uint32_t &r2,
                               uint32_t &r3)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(r0), "=r"(r1), "=r"(r2), "=r"(r3)
                 : "r"(a));
}

/* D (16x8 fp32) += A (16x16 bf16, row) * B (16x8 bf16, col). */
MLA_DEV void mma_bf16(float (&d)[4], uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3,
                      uint32_t b0, uint32_t b1)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* ---- conversions ---- */

/* Two floats to bf16x2, round to nearest even: lo in bits 0..15. */
MLA_DEV uint32_t pack_bf16x2(float lo, float hi)
{
    uint32_t d;
    asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}

/* The same in f16. */
MLA_DEV uint32_t pack_f16x2(float lo, float hi)
{
    uint32_t d;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
}

/* Two e4m3 (byte 0 -> bits 0..15) to f16x2; exact (every e4m3 value is
 * an f16 value). */
MLA_DEV uint32_t e4m3x2_to_f16x2(uint16_t v)
{
    uint32_t d;
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(d) : "h"(v));
    return d;
}

MLA_DEV float f16lo_to_f32(uint32_t h2)
{
    float f;
    asm("{\n\t.reg .f16 lo, hi;\n\tmov.b32 {lo, hi}, %1;\n\tcvt.f32.f16 %0, lo;\n\t}"
        : "=f"(f)
        : "r"(h2));
    return f;
}

MLA_DEV float f16hi_to_f32(uint32_t h2)
{
    float f;
    asm("{\n\t.reg .f16 lo, hi;\n\tmov.b32 {lo, hi}, %1;\n\tcvt.f32.f16 %0, hi;\n\t}"
        : "=f"(f)
        : "r"(h2));
    return f;
}

/* 2^x, approximate (about 2 ulp), subnormal results flushed to zero;
 * ex2(-inf) = 0. */
MLA_DEV float ex2(float x)
{
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
    return y;
}

/* ---- programmatic dependent launch ---- */

/* Waits until the grids this one depends on have completed and their
 * memory operations are performed and visible (PTX ISA, griddepcontrol);
 * a no-op when the grid was not launched as a programmatic dependent. */
MLA_DEV void griddep_wait()
{
    asm volatile("griddepcontrol.wait;" ::: "memory");
}

/* Lets the dependent grid be scheduled once every CTA of this grid has
 * issued it or exited.  Says nothing about memory: the dependent's
 * griddep_wait() still waits for this grid's completion. */
MLA_DEV void griddep_launch_dependents()
{
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

/* ---- CTA-level synchronization ---- */

/* Named barrier: the `count` threads (a multiple of 32) that use `id`. */
MLA_DEV void bar_sync(uint32_t id, uint32_t count)
{
    asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(count) : "memory");
}

/* bar_sync that also returns whether `pred` held in any of the threads. */
MLA_DEV bool bar_red_or(uint32_t id, uint32_t count, bool pred)
{
    uint32_t any;
    asm volatile("{\n\t.reg .pred p, q;\n\tsetp.ne.u32 p, %2, 0;\n\t"
                 "bar.red.or.pred q, %1, %3, p;\n\tselp.u32 %0, 1, 0, q;\n\t}"
                 : "=r"(any)
                 : "r"(id), "r"((uint32_t)pred), "r"(count)
                 : "memory");
    return any != 0;
}

/* One lane of the (fully active) warp is elected; returns true there. */
MLA_DEV bool elect_one()
{
    uint32_t pred = 0;
    asm volatile(
        "{\n\t.reg .pred p;\n\telect.sync _|p, 0xffffffff;\n\tselp.u32 %0, 1, 0, p;\n\t}"
        : "=r"(pred));
    return pred != 0;
}

/* Per-thread register limit of the executing warpgroup (sm_90a/sm_100a;
 * all four warps of the warpgroup must execute the same instruction). */
template <int N>
MLA_DEV void setmaxnreg_inc()
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(__CUDA_ARCH_FEAT_SM100_ALL)
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
#endif
}

template <int N>
MLA_DEV void setmaxnreg_dec()
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL) || defined(__CUDA_ARCH_FEAT_SM100_ALL)
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
#endif
}

} /* namespace mla */

#endif /* MLA_PTX_CUH */
