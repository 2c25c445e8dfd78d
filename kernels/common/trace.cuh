/*
 * trace.cuh - step stamps for kernel trace builds (configure
 * --enable-kernel-trace, MLA_KERNEL_TRACE): one thread of a role stamps
 * clock64 when its CTA passes a step of a pair of tiles, into the
 * workspace's last MLA_TRACE_BYTES (mla_params.h), for the decode grid's
 * first MLA_TRACE_CTAS CTAs (blockIdx.x fastest).  bench/sxs.py
 * --trace-dir saves that region after a shape's runs, and bench/trace.py
 * prints each step's time from the pair's start.  In other builds every
 * call here compiles to nothing.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_TRACE_CUH
#define MLA_TRACE_CUH

#include "mla_params.h"
#include "ptx.cuh"

namespace mla {

/* Roles: the consumer warpgroups (the wide BF16 kernel's step numbers are
 * SeesawConsumer's), the loader (steps kTrIssueEven / kTrIssueOdd), and
 * the CTA itself (pair 0 only: the kTrCta* steps). */
enum : uint32_t { kTrWg0 = 0, kTrWg1 = 1, kTrLoad = 2, kTrCta = 3 };
enum : uint32_t {
    kTrIssueEven = 0,   /* the even tile's first part issued */
    kTrIssueOdd = 1,    /* the odd tile's */
    kTrAcquireEven = 2, /* the loader starts waiting for the even tile's first part */
    kTrAcquireOdd = 3,
    kTrIssueSecond = 4  /* added to kTrIssue*: the second part issued */
};
enum : uint32_t {
    kTrCtaStart = 0, /* %globaltimer, ns, once the CTA found its piece */
    kTrCtaEnd = 1,   /* %globaltimer after the consumers' epilogue */
    kTrCtaT0 = 2,    /* the piece's first tile */
    kTrCtaT1 = 3,    /* its end */
    kTrCtaSm = 4,    /* %smid, and 0x7ace << 32 (a stamp this launch wrote) */
    kTrCtaReq = 5,   /* request b, KV head << 32 */
    kTrCtaClk0 = 6,  /* clock64 at the start */
    kTrCtaClk1 = 7   /* clock64 at the end */
};

#ifdef MLA_KERNEL_TRACE
MLA_DEV void trace_put(const mla_decode_params &p, uint32_t role, int pair, uint32_t step,
                       uint64_t v)
{
    const uint32_t cta = blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z);
    if (cta >= MLA_TRACE_CTAS || pair < 0 || pair >= MLA_TRACE_PAIRS)
        return;
    uint64_t *t = (uint64_t *)(p.workspace + p.ws_trace);
    t[((cta * MLA_TRACE_ROLES + role) * MLA_TRACE_PAIRS + (uint32_t)pair) * MLA_TRACE_STEPS +
      step] = v;
}

MLA_DEV uint64_t trace_clock()
{
    uint64_t c;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(c));
    return c;
}

MLA_DEV uint64_t trace_globaltimer()
{
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
}

MLA_DEV uint32_t trace_smid()
{
    uint32_t s;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(s));
    return s;
}

/* clock64 now, as step `step` of pair `pair` of role `role`. */
MLA_DEV void trace(const mla_decode_params &p, uint32_t role, int pair, uint32_t step)
{
    trace_put(p, role, pair, step, trace_clock());
}

/* The CTA's record: at its start (end false: its piece, SM and request)
 * or its end. */
MLA_DEV void trace_cta(const mla_decode_params &p, bool end, int t0, int t1, int b, int kh)
{
    if (end) {
        trace_put(p, kTrCta, 0, kTrCtaClk1, trace_clock());
        trace_put(p, kTrCta, 0, kTrCtaEnd, trace_globaltimer());
        return;
    }
    trace_put(p, kTrCta, 0, kTrCtaClk0, trace_clock());
    trace_put(p, kTrCta, 0, kTrCtaStart, trace_globaltimer());
    trace_put(p, kTrCta, 0, kTrCtaT0, (uint64_t)(uint32_t)t0);
    trace_put(p, kTrCta, 0, kTrCtaT1, (uint64_t)(uint32_t)t1);
    trace_put(p, kTrCta, 0, kTrCtaSm, (0x7aceull << 32) | trace_smid());
    trace_put(p, kTrCta, 0, kTrCtaReq, (uint64_t)(uint32_t)b | (uint64_t)(uint32_t)kh << 32);
}
#else
MLA_DEV void trace(const mla_decode_params &, uint32_t, int, uint32_t) {}
MLA_DEV void trace_cta(const mla_decode_params &, bool, int, int, int, int) {}
#endif

} /* namespace mla */

#endif /* MLA_TRACE_CUH */
