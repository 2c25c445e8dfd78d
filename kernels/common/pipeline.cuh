/*
 * pipeline.cuh - a ring of shared-memory stages guarded by mbarriers:
 * the position (stage index and phase parity) each role keeps, and the
 * acquire / commit / wait / release steps on a pair of barriers.
 *
 * Every role walks the same sequence of tiles, so every role's position
 * is the same function of the tile count: stage = n % stages, phase =
 * (n / stages) & 1.  A consumer waits for the phase of its position to
 * complete; a producer waits on the "empty" barrier of its stage for the
 * opposite parity, so its first pass over the ring does not block (the
 * phase "before" phase 0 counts as complete).
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_PIPELINE_CUH
#define MLA_PIPELINE_CUH

#include "ptx.cuh"

namespace mla {

struct PipeState {
    uint32_t stage;
    uint32_t phase;

    MLA_DEV void init()
    {
        stage = 0;
        phase = 0;
    }
    MLA_DEV void advance(uint32_t stages)
    {
        if (++stage == stages) {
            stage = 0;
            phase ^= 1u;
        }
    }
};

/* One pipe of the ring: `full` barriers signalled by the producing role,
 * `empty` barriers signalled by the consuming role; each is an array of
 * `stages` consecutive 8-byte mbarriers. */
struct Pipe {
    uint32_t full;  /* shared address of full[0] */
    uint32_t empty; /* shared address of empty[0] */

    MLA_DEV uint32_t full_bar(const PipeState &s) const { return full + 8u * s.stage; }
    MLA_DEV uint32_t empty_bar(const PipeState &s) const { return empty + 8u * s.stage; }

    /* Producer: wait until the consumers have released the stage. */
    MLA_DEV void producer_acquire(const PipeState &s) const
    {
        mbar_wait(empty_bar(s), s.phase ^ 1u);
    }
    /* Producer: one arrival on full (the barrier counts every arrival the
     * producing role makes per phase). */
    MLA_DEV void producer_commit(const PipeState &s) const { mbar_arrive(full_bar(s)); }
    /* Consumer: wait until the stage holds the data of this position. */
    MLA_DEV void consumer_wait(const PipeState &s) const { mbar_wait(full_bar(s), s.phase); }
    /* Consumer: one arrival on empty. */
    MLA_DEV void consumer_release(const PipeState &s) const { mbar_arrive(empty_bar(s)); }
};

} /* namespace mla */

#endif /* MLA_PIPELINE_CUH */
