/*
 * hopper_convert.cuh - the converter warpgroup of the narrow sm_90a
 * kernels (warps 8-11): it writes the Q tile, BF16 as it is for BF16
 * caches, and for FP8 caches with its dims permuted to match the
 * consumers' register fragments, in f16 where K converts unscaled
 * (hopper_load.cuh); the FP8 tiles themselves are converted by the
 * consumers, in registers (hopper_narrow_fp8.cuh).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_HOPPER_CONVERT_CUH
#define MLA_HOPPER_CONVERT_CUH

#include "hopper_layout.cuh"
#include "hopper_load.cuh"

namespace mla {
namespace hopper {

template <int FMT, bool NARROW>
MLA_DEV void convert_role(const mla_decode_params &p, const Cta &c, uint32_t tid)
{
    static_assert(NARROW, "the wide kernels have no converter warpgroup");
    if (kFp8Direct<FMT, NARROW>) {
        const uint32_t nf16 = q_f16_chunks<FMT>(p);
        float undo = 1.0f;
        if (nf16)
            undo = load_q_permuted_f16(p, c, tid, nf16, c.bars + kQMax);
        else
            load_q_permuted(p, c, tid);
        if (tid == 0)
            sts32(c.bars + kQScale, __float_as_uint(undo));
    } else {
        load_q<MLA_NARROW_ROWS, 128u>(p, c, tid);
    }
    cp_async_wait_all();
    fence_proxy_async(); /* wgmma reads the tile through the async proxy */
    mbar_arrive(c.bars + kBarQ);
}

} /* namespace hopper */
} /* namespace mla */

#endif /* MLA_HOPPER_CONVERT_CUH */
