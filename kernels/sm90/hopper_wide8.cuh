/*
 * hopper_wide8.cuh - the consumer warpgroups (warps 0-7) of the wide FP8
 * sm_90a kernels (E4M3, DS_MLA), 64 packed query rows a CTA.  As in the
 * narrow FP8 kernel (hopper_narrow_fp8.cuh) there is no BF16 copy of a
 * tile: the consumers build their wgmma A fragments in registers from the
 * FP8 stage as it landed, so the stages hold FP8 bytes only (three in
 * flight beside the 72-KB Q tile, where a BF16 stage took 72 KB), and no
 * warpgroup converts for the others.  This file holds the tile loop (the
 * scores, P V, the end); hopper_wide8_base.cuh what its parts share,
 * hopper_wide8_softmax.cuh the tile's P.  With 64 rows as the N of the
 * MMAs:
 *
 *   S^T[64 keys x 64 rows] = K Q^T     36 k-steps of m64n64k16, by the
 *                                      warpgroup whose tile it is (WG 0
 *                                      the even tiles of the piece, WG 1
 *                                      the odd ones);
 *   O^T[512 dims x 64 rows] += V^T P^T each warpgroup its 256 dims (128
 *                                      fp32 registers) of every tile: 4
 *                                      m-tiles x 4 k-steps.
 *
 * The warpgroup that took a tile's scores turns them into P against a
 * reference maximum per row and publishes P (8 KB, the B operand of both
 * warpgroups' P V) with that reference and, if it changed, the factors
 * for O, in its P slot; the slot is free again once both warpgroups'
 * P V of the tile retired (mbarriers p_full, p_free).  The references
 * are lazy (softmax.cuh, ColumnSoftmax::lazy_exp): a tile takes the
 * previous tile's reference unless a score passes it by more than 2^8,
 * and only then do the warps of the warpgroup agree on the tile's column
 * maxima and publish factors.  So the only chain between the warpgroups
 * is each tile's reference after the previous one's, and a warpgroup
 * computes its P against its own last reference (that after tile k - 2)
 * before it waits for tile k - 1's, keeping it when tile k - 1 changed
 * nothing: the scores and P of both tiles of a pair run side by side, and
 * each warpgroup applies every tile's factors in tile order before its
 * P V of that tile, so both halves of O^T and both partial row sums stay
 * in the same units.
 *
 * Fragments as in the narrow FP8 kernel: QK's A rows are keys 16 w + g
 * and + 8, one 16-byte load a row and chunk gives a thread 4 k-steps
 * (the Q tile holds Q with the same dim permutation); PV's A rows are
 * value dims, thread (w, g) of warpgroup wg holds dims 128 b + 32 w + 4 g
 * .. + 3 of blocks b = 2 wg, 2 wg + 1, one 4-byte load a key and block,
 * keys t and t + 8 of a k-step in one k-column pair, t + 4 and t + 12 in
 * the other; the P tile's keys are in that fragment order, which puts a
 * thread's two keys of an S^T column side by side (one 32-bit store).
 * Conversions (f16 throughout the MMAs but DS_MLA's RoPE chunk):
 *  - K: E4M3 without block scales, its bytes to f16 (one cvt a pair)
 *    against the f16 Q tile (scaled by a power of two); with block scales
 *    (E4M3 /128, /64, /32: mla_hopper_wide8_e4m3b; DS_MLA) times its
 *    block's scale over a power of two of the key, 2^e for its largest
 *    scale (a cvt and a multiply a pair), that 2^e put back on the key's
 *    scores; DS_MLA's bf16 RoPE times 2^-e (exact) against a bf16 Q
 *    chunk, its nope scales times kv_scale (the RoPE is unscaled; the
 *    scores then take score_scale_log2 / kv_scale).
 *  - V: its bytes to f16 (a byte permute and two cvt for two pairs), with
 *    block scales times a factor a key and block in f16 (a multiply a
 *    pair): its scale over the power of two 2^ev of the key's largest
 *    scale (E4M3: K's 2^e; DS_MLA: of its four, without kv_scale).  The
 *    warpgroup that publishes a tile's P puts the tile's factors beside
 *    it (put_vf); a key past the length has factor 0, and its bytes are
 *    zeroed (zero_dead_v: the e4m3 NaN byte converts to NaN).
 *  - P: f16, up to 2^8 against the lazy references.  With block scales
 *    the key's scores take ev in log2 units, so P carries 2^ev and stays
 *    in f16's range, and the row sums take P / 2^ev.  P below 2^-24
 *    flushes to zero (bf16's rounding of P lost more).
 *  A block whose scale is below 2^-14 of its key's largest loses
 *    precision in f16 (K: its share of the score is below the fp32 sums'
 *    rounding there; V: its share of the row below f16's rounding of the
 *    largest block's).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_HOPPER_WIDE8_CUH
#define MLA_HOPPER_WIDE8_CUH

#include "hopper_wide8_softmax.cuh"
#include "wgmma.cuh"
#include "epilogue.cuh"

namespace mla {
namespace hopper {

/* The consumer warpgroups' tile loop: S^T by the warpgroup whose tile it
 * is, P by hopper_wide8_softmax.cuh, O^T += V^T P^T by both, the end. */
template <int FMT, bool SCALED>
struct Wide8Consumer : Wide8Softmax<FMT, SCALED> {
    using B = Wide8Base<FMT, SCALED>;
    using S = Wide8Softmax<FMT, SCALED>;
    using B::RP, B::p, B::c, B::wg, B::w, B::g, B::t, B::smul, B::l, B::kScaled;
    using B::kmul, B::tid, B::head, B::cmax, B::stage, B::scales, B::pipe,
        B::bars, B::col, B::pfull, B::pfree, B::pslot, B::k_scale, B::hmul2, B::bmul2,
        B::bf16x2_of_pow2, B::vshift, B::vf_word;
    using S::take_factors;
    float o[4][8][4]; /* O^T: m-tile mm, query columns 8 nt + 2 t (+1) */

    MLA_DEV Wide8Consumer(const mla_decode_params &p_, const Cta &c_, uint32_t wg_, uint32_t wl,
                          uint32_t lane)
        : S(p_, c_, wg_, wl, lane)
    {
#pragma unroll
        for (int mm = 0; mm < 4; mm++)
#pragma unroll
            for (int nt = 0; nt < 8; nt++)
#pragma unroll
                for (int e = 0; e < 4; e++)
                    o[mm][nt][e] = 0.0f;
    }

    /* ---- S^T = K Q^T ---- */

    /* The bytes of chunk ch for key rows 16 w + g (x) and + 8 (y), loaded
     * before the wait for the buffer they go to; DS_MLA chunk 8 is the
     * bf16 RoPE, two 16-byte granules a row. */
    struct KRaw {
        uint4 x, y, x2, y2;
        uint32_t hx, hy; /* the scales over the keys' powers of two, f16x2 */
    };

    /* Whether a scale block spans two 64-dim chunks (DS_MLA's 128
     * channels, E4M3 /128): an odd chunk then takes its even chunk's
     * scales (k_load's prev). */
    MLA_DEV bool wide_blocks() const
    {
        return FMT == MLA_FMT_FP8_DS_MLA || this->gshift() >= 7;
    }

    /* kd: the inverses of the keys' powers of two; prev: the previous
     * chunk's (its scales, where the block spans both). */
    template <bool SC>
    MLA_DEV KRaw k_load(uint32_t stg, uint32_t scl, uint32_t ch, const float (&kd)[2],
                        const KRaw &prev) const
    {
        const uint32_t r0 = 16u * w + g, r1 = r0 + 8u;
        KRaw k;
        k.hx = k.hy = 0u;
        if (FMT == MLA_FMT_FP8_DS_MLA && ch == 8) {
            const uint32_t b = stg + kDsRopeOffset + 32u * t;
            k.x = lds128(b + RP * r0);
            k.x2 = lds128(b + 16u + RP * r0);
            k.y = lds128(b + RP * r1);
            k.y2 = lds128(b + 16u + RP * r1);
            return k;
        }
        const uint32_t b = stg + 64u * ch + 16u * t;
        k.x = lds128(b + RP * r0);
        k.y = lds128(b + RP * r1);
        k.x2 = k.y2 = make_uint4(0u, 0u, 0u, 0u);
        if (SC && (ch & 1u) && wide_blocks()) {
            k.hx = prev.hx;
            k.hy = prev.hy;
        } else if (SC) {
            const float sx = k_scale(scl, r0, ch) * kd[0], sy = k_scale(scl, r1, ch) * kd[1];
            k.hx = pack_f16x2(sx, sx);
            k.hy = pack_f16x2(sy, sy);
        }
        return k;
    }

    /* The 4 k-steps' fragments of chunk ch: a[s] = {row g cols 2t.., row
     * g + 8, row g cols 2t + 8.., row g + 8}.  A scale that is not finite
     * makes the key's scores NaN (masked when the key is past the
     * length). */
    template <bool SC>
    MLA_DEV void k_frags(const KRaw &k, uint32_t ch, const float (&kd)[2], uint32_t (&a)[4][4]) const
    {
        if (FMT == MLA_FMT_FP8_DS_MLA && ch == 8) {
            const uint32_t x8[8] = {k.x.x, k.x.y, k.x.z, k.x.w, k.x2.x, k.x2.y, k.x2.z, k.x2.w};
            const uint32_t y8[8] = {k.y.x, k.y.y, k.y.z, k.y.w, k.y2.x, k.y2.y, k.y2.z, k.y2.w};
            /* the RoPE (bf16, against a bf16 Q chunk scaled by the f16
             * chunks' 2^kq) takes the keys' powers of two as well,
             * exactly, so that all of S^T is in one unit */
            const uint32_t dx = bf16x2_of_pow2(kd[0]), dy = bf16x2_of_pow2(kd[1]);
#pragma unroll
            for (int st = 0; st < 4; st++) {
                a[st][0] = x8[2 * st];
                a[st][1] = y8[2 * st];
                a[st][2] = x8[2 * st + 1];
                a[st][3] = y8[2 * st + 1];
                a[st][0] = bmul2(a[st][0], dx);
                a[st][1] = bmul2(a[st][1], dy);
                a[st][2] = bmul2(a[st][2], dx);
                a[st][3] = bmul2(a[st][3], dy);
            }
            return;
        }
        const uint32_t xw[4] = {k.x.x, k.x.y, k.x.z, k.x.w}, yw[4] = {k.y.x, k.y.y, k.y.z, k.y.w};
#pragma unroll
        for (int st = 0; st < 4; st++) {
            if constexpr (SC) {
                a[st][0] = hmul2(e4m3_lo_f16x2(xw[st]), k.hx);
                a[st][1] = hmul2(e4m3_lo_f16x2(yw[st]), k.hy);
                a[st][2] = hmul2(e4m3_hi_f16x2(xw[st]), k.hx);
                a[st][3] = hmul2(e4m3_hi_f16x2(yw[st]), k.hy);
            } else {
                a[st][0] = e4m3_lo_f16x2(xw[st]);
                a[st][1] = e4m3_lo_f16x2(yw[st]);
                a[st][2] = e4m3_hi_f16x2(xw[st]);
                a[st][3] = e4m3_hi_f16x2(yw[st]);
            }
        }
    }

    /* S^T of the tile in stage stg into s: chunk by chunk, the fragments of
     * chunk ch + 1 built while the tensor cores run chunk ch (two buffers,
     * a commit group a chunk).  No wgmma of this warpgroup may be in
     * flight on entry (else ptxas serializes the loop).  ku: the keys'
     * powers of two that the scores are short of (key_unit; 1 without
     * block scales), for publish. */
    template <bool SC>
    MLA_DEV void qk(float (&s)[8][4], uint32_t stg, uint32_t scl, float (&ku)[2])
    {
        float kd[2] = {1.0f, 1.0f};
        ku[0] = ku[1] = 1.0f;
        if (SC) {
            kd[0] = this->key_unit(scl, 16u * w + g, ku[0]);
            kd[1] = this->key_unit(scl, 16u * w + g + 8u, ku[1]);
        }
        uint32_t a[2][4][4];
        KRaw k = k_load<SC>(stg, scl, 0, kd, KRaw{});
        k_frags<SC>(k, 0, kd, a[0]);
        const uint64_t q0 = wg_desc(c.sq, 16u, 1024u);
#pragma unroll
        for (uint32_t ch = 0; ch < 9; ch++) {
            /* f16 but DS_MLA's RoPE chunk */
            const bool f16 = !(FMT == MLA_FMT_FP8_DS_MLA && ch == 8);
            wg_fence();
#pragma unroll
            for (uint32_t st = 0; st < 4; st++) {
                const uint64_t db = wg_desc_add(q0, ch * kChunk + 32u * st);
                if (f16)
                    wgmma_m64n64_rs<true>(s, a[ch % 2][st], db, (ch | st) != 0 ? 1u : 0u);
                else
                    wgmma_m64n64_rs<false>(s, a[ch % 2][st], db, (ch | st) != 0 ? 1u : 0u);
            }
            wg_commit();
            if (ch + 1 < 9) {
                k = k_load<SC>(stg, scl, ch + 1, kd, k);
                wg_wait<1>(); /* chunk ch - 1 retired: its buffer is free */
                k_frags<SC>(k, ch + 1, kd, a[(ch + 1) % 2]);
            }
        }
        wg_wait<0>();
        wg_hold(s);
    }

    /* ---- O^T += V^T P^T ---- */

    /* The V bytes of k-step ks for this thread's dims of blocks 2 wg (x)
     * and 2 wg + 1 (y), keys 16 ks + t + 4 i, and with SC their factors
     * for the key pairs (t, t + 8) and (t + 4, t + 12) (put_vf: 0 past
     * the length, where zero_dead_v zeroed the bytes). */
    struct VRaw {
        uint32_t x[4], y[4];
        uint2 fx, fy;
    };

    template <bool SC>
    MLA_DEV VRaw v_load(uint32_t stg, uint32_t slot, uint32_t ks) const
    {
        const uint32_t d0 = 256u * wg + 32u * w + 4u * g;
        VRaw r;
#pragma unroll
        for (uint32_t i = 0; i < 4; i++) {
            const uint32_t key = 16u * ks + t + 4u * i;
            r.x[i] = lds32(stg + RP * key + d0);
            r.y[i] = lds32(stg + RP * key + d0 + 128u);
        }
        r.fx = r.fy = make_uint2(0u, 0u);
        if (SC) {
            r.fx = lds64(vf_word(slot, d0 >> vshift(), ks, t));
            r.fy = lds64(vf_word(slot, (d0 + 128u) >> vshift(), ks, t));
        }
        return r;
    }

    /* V^T fragments: m-tile mm (block 2 wg + mm / 2, its dims 2 (mm % 2)
     * and + 1 as rows g and g + 8), f16; with SC times the factors of the
     * key pairs. */
    template <bool SC>
    MLA_DEV void v_frags(const VRaw &r, uint32_t (&a)[4][4]) const
    {
#pragma unroll
        for (int mm = 0; mm < 4; mm++) {
            const bool y = mm >> 1;
            const uint32_t w0 = y ? r.y[0] : r.x[0], w1 = y ? r.y[1] : r.x[1];
            const uint32_t w2 = y ? r.y[2] : r.x[2], w3 = y ? r.y[3] : r.x[3];
            /* k columns 2 t, 2 t + 1: keys t, t + 8 (pair 0); 2 t + 8,
             * 2 t + 9: keys t + 4, t + 12 (pair 1) (P's key order,
             * publish) */
            if (mm & 1) {
                e4m3_pairs_f16x2<2>(w0, w2, a[mm][0], a[mm][1]);
                e4m3_pairs_f16x2<2>(w1, w3, a[mm][2], a[mm][3]);
            } else {
                e4m3_pairs_f16x2<0>(w0, w2, a[mm][0], a[mm][1]);
                e4m3_pairs_f16x2<0>(w1, w3, a[mm][2], a[mm][3]);
            }
            if (SC) {
                const uint2 f = y ? r.fy : r.fx;
                a[mm][0] = hmul2(a[mm][0], f.x);
                a[mm][1] = hmul2(a[mm][1], f.x);
                a[mm][2] = hmul2(a[mm][2], f.y);
                a[mm][3] = hmul2(a[mm][3], f.y);
            }
        }
    }

    /* Rows nvalid.. of the tile in stage stg past the length: V's bytes
     * to zero, by this warpgroup before it publishes the tile's P (which
     * both warpgroups' P V wait for): garbage bytes may be the e4m3 NaN,
     * which converts to NaN and would turn P = 0 into NaN.  (K's scores
     * of those rows are masked by selection.)  Once every thread of the
     * warpgroup has read its K of them (qk). */
    MLA_DEV void zero_dead_v(uint32_t stg, uint32_t nvalid) const
    {
        bar_sync(kNbWg0 + wg, 128);
        const uint32_t n = (kBN - nvalid) * 32u, lt = 32u * w + 4u * g + t;
        for (uint32_t i = lt; i < n; i += 128u)
            sts128(stg + RP * (nvalid + (i >> 5)) + 16u * (i & 31u), 0u, 0u, 0u, 0u);
    }

    /*
     * Tile k of the piece in stage st: once its P is published, O^T takes
     * the tile's factors (if its reference changed; every wgmma of this
     * warpgroup retired first), then 4 k-steps of 4 wgmmas, one commit
     * group each, the stage freed once the last k-step's bytes are in
     * registers.
     */
    template <bool SC>
    MLA_DEV void pv_tile(int k, const PipeState &st)
    {
        const Pipe pipe = this->pipe();
        const uint32_t slot = (uint32_t)k & 1u, head = this->head();
        pipe.consumer_wait(st);
        mbar_wait(pfull(slot), (uint32_t)(k >> 1) & 1u);
        /* one answer for the warpgroup, visibly (ptxas keeps the wgmmas
         * below off a divergent path) */
        const bool changed = __shfl_sync(0xffffffffu, lds32(head + kW8Changed + 4u * slot), 0) != 0;
        if (changed) {
            wg_wait<0>();
#pragma unroll
            for (int mm = 0; mm < 4; mm++)
                wg_hold(o[mm]);
#pragma unroll
            for (int j = 0; j < 16; j++) {
                const float a = lds_f32(head + kW8Alpha + 256u * slot + 4u * col(j));
#pragma unroll
                for (int mm = 0; mm < 4; mm++) {
                    o[mm][j >> 1][j & 1] *= a;
                    o[mm][j >> 1][(j & 1) + 2] *= a;
                }
            }
        }
        const uint32_t stg = stage(st.stage);
        uint32_t a[2][4][4];
        v_frags<SC>(v_load<SC>(stg, slot, 0), a[0]);
        const uint64_t p0 = wg_desc(pslot(slot), 16u, 1024u);
#pragma unroll
        for (uint32_t ks = 0; ks < 4; ks++) {
            wg_fence();
#pragma unroll
            for (uint32_t mm = 0; mm < 4; mm++)
                wgmma_m64n64_rs<true>(o[mm], a[ks % 2][mm], wg_desc_add(p0, 32u * ks), 1u);
            wg_commit();
            if (ks + 1 < 4) {
                const VRaw r = v_load<SC>(stg, slot, ks + 1);
                if (ks + 1 == 3)
                    pipe.consumer_release(st);
                wg_wait<1>(); /* k-step ks - 1 retired: its buffer is free */
                v_frags<SC>(r, a[(ks + 1) % 2]);
            }
        }
    }

    /* ---- the tile loop ---- */

    template <bool SC>
    MLA_DEV void tiles()
    {
        static_assert(SC == kScaled, "write_p and finish take kScaled");
        const Pipe pipe = this->pipe();
        const int n = c.t1 - c.t0;
        PipeState st; /* tile k0 of the pair */
        st.init();
        float s[8][4];
        for (int k0 = 0; k0 < n; k0 += 2) {
            /* The pair before has left this warpgroup's P V: free its P
             * slots (the S^T wgmmas below must not be queued behind P V
             * anyway: ptxas would serialize them). */
            wg_wait<0>();
#pragma unroll
            for (int mm = 0; mm < 4; mm++)
                wg_hold(o[mm]);
            if (k0 >= 2) {
                mbar_arrive(pfree(0));
                mbar_arrive(pfree(1));
            }
            const int k = k0 + (int)wg;
            if (k < n) {
                PipeState sk = st;
                if (wg)
                    sk.advance(MLA_WIDE8_STAGES);
                pipe.consumer_wait(sk);
                float ku[2];
                qk<SC>(s, stage(sk.stage), scales(sk.stage), ku);
                const int nvalid = c.len - (c.t0 + k) * (int)kBN;
                if (nvalid < (int)kBN)
                    zero_dead_v(stage(sk.stage), (uint32_t)nvalid);
                this->template publish<SC>(k, s, scales(sk.stage), ku);
            }
            pv_tile<SC>(k0, st);
            st.advance(MLA_WIDE8_STAGES);
            if (k0 + 1 < n) {
                pv_tile<SC>(k0 + 1, st);
                st.advance(MLA_WIDE8_STAGES);
            }
        }
        wg_wait<0>();
#pragma unroll
        for (int mm = 0; mm < 4; mm++)
            wg_hold(o[mm]);
    }

    /* ---- the CTA ---- */

    MLA_DEV void run()
    {
        constexpr bool sc = kScaled;
        /* The Q tile by both warpgroups, f16 but DS_MLA's RoPE chunk
         * (bf16, times the same 2^kq: its scores share the nope chunks'
         * accumulator); the rows' key limits. */
        const float qscale = load_q_permuted_f16<MLA_BLOCK_M, 256, kNbBoth, true>(
            p, c, tid(), FMT == MLA_FMT_FP8_DS_MLA ? 8u : 9u, cmax());
        if (tid() < MLA_BLOCK_M)
            sts32(head() + kW8Lim + 4u * tid(), (uint32_t)row_limit(p, c, (int)tid()));
        fence_proxy_async();
        bar_sync(kNbBoth, 256);
        smul = p.score_scale_log2 * qscale / kmul();
        tiles<sc>();
        if (tid() == 0)
            griddep_launch_dependents();
        finish();
    }

    /* Both warpgroups at end step k (an mbarrier of 256 arrivals, used
     * once). */
    MLA_DEV void fin_sync(uint32_t k) const
    {
        mbar_arrive(bars() + kBarFin + 8u * k);
        mbar_wait(bars() + kBarFin + 8u * k, 0);
    }

    /* The row sums over both warpgroups; then O normalized and staged,
     * rows 0-31 at the start of the stages, rows 32-63 over the Q tile
     * (kStageRow bytes a row; every tile has been consumed by both
     * warpgroups), each warpgroup its 256 dims, and written out by both.
     * A row's sum, LSE and factor are one thread's, in a branch, not in
     * the staging's unrolled code: this code runs once a CTA, so each of
     * its instructions is fetched cold (at b1, 16 unrolled rows of that
     * work took 9,700 clocks). */
    MLA_DEV void finish()
    {
        const int n = c.t1 - c.t0;
        const uint32_t tid = this->tid();
        /* The last tile's factors, if it was the other warpgroup's. */
        if (n > 0 && (uint32_t)((n - 1) & 1) != wg)
            take_factors((uint32_t)(n - 1) & 1u);
        const uint32_t cx = cmax();
#pragma unroll
        for (int i = 0; i < 2; i++)
            sts32(cx + 1024u * wg + 256u * w + 4u * col(2 * (int)g + i), __float_as_uint(l[i]));
        fin_sync(0);
        const OutTarget out(c);
        if (tid < MLA_BLOCK_M) {
            float lsum = 0.0f;
#pragma unroll
            for (uint32_t x = 0; x < 8; x++)
                lsum += lds_f32(cx + 256u * x + 4u * tid);
            if ((int)tid < c.rows_here) {
                const float m =
                    n > 0 ? lds_f32(head() + kW8Ref + 256u * ((uint32_t)(n - 1) & 1u) + 4u * tid)
                          : -__int_as_float(0x7f800000);
                out.write_lse(p, c.m_base + (int)tid, m, lsum);
            }
            /* the row's factor over its first part: no other thread reads
             * this row's parts */
            sts32(cx + 4u * tid, __float_as_uint(out.inv_sum(p, c.m_base + (int)tid, lsum)));
        }
        fin_sync(1);
        const uint32_t half[2] = {stage(0), c.sq};
#pragma unroll
        for (int j = 0; j < 16; j += 2) {
            const uint2 f2 = lds64(cx + 4u * col(j)); /* columns col(j), col(j) + 1 */
#pragma unroll
            for (int jj = 0; jj < 2; jj++) {
                const int k = j + jj;
                const float f = __uint_as_float(jj ? f2.y : f2.x);
                /* columns 0-31 (k < 8) in the first half, 32-63 in the second */
                const uint32_t row = half[k >> 3] + (col(k) & 31u) * kStageRow;
#pragma unroll
                for (int bb = 0; bb < 2; bb++) {
                    const uint32_t d = 128u * (2u * wg + (uint32_t)bb) + 32u * w + 4u * g;
                    sts128(row + 4u * d, __float_as_uint(o[2 * bb][k >> 1][k & 1] * f),
                           __float_as_uint(o[2 * bb][k >> 1][(k & 1) + 2] * f),
                           __float_as_uint(o[2 * bb + 1][k >> 1][k & 1] * f),
                           __float_as_uint(o[2 * bb + 1][k >> 1][(k & 1) + 2] * f));
                }
            }
        }
        fin_sync(2);
        /* (a select, not half[hh]: a rolled loop would index the array in
         * local memory) */
#pragma unroll 1
        for (int hh = 0; hh < 2; hh++)
            write_staged_rows<1>(p, out, hh ? half[1] : half[0], kStageRow,
                                 max(0, min(32, c.rows_here - 32 * hh)), tid, 256u, 32 * hh);
    }
};

} /* namespace hopper */
} /* namespace mla */

#endif /* MLA_HOPPER_WIDE8_CUH */
