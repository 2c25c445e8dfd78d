/* buffers.c - extents of the caller's buffers: each must fit in the
 * address space, and what a call writes must not overlap anything else it
 * reads or writes.
 * SPDX-License-Identifier: MIT */
#include <stdint.h>

#include "internal.h"

static int overlap(const struct mla_buf *a, const struct mla_buf *b)
{
    uintptr_t pa = (uintptr_t)a->p, pb = (uintptr_t)b->p;
    return a->bytes && b->bytes && pa < pb + b->bytes && pb < pa + a->bytes;
}

mla_status_t mla__check_buffers(const struct mla_buf *out, int nout, const struct mla_buf *in,
                                int nin)
{
    for (int i = 0; i < nout + nin; i++) {
        const struct mla_buf *b = i < nout ? &out[i] : &in[i - nout];
        if (b->p && b->bytes > UINTPTR_MAX - (uintptr_t)b->p)
            return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                              "%s = %p (%llu bytes) runs past the end of the address space",
                              b->name, b->p, (unsigned long long)b->bytes);
    }
    /* Outputs against the inputs and against each other; inputs may
     * share memory, since they are only read. */
    for (int o = 0; o < nout; o++) {
        if (!out[o].p)
            continue;
        for (int i = 0; i < nout + nin; i++) {
            const struct mla_buf *b = i < nout ? &out[i] : &in[i - nout];
            if (i == o || (i < nout && i < o) || !b->p || !overlap(&out[o], b))
                continue;
            return mla__error(MLA_STATUS_INVALID_ARGUMENT,
                              "%s [%p, +%llu bytes) overlaps %s [%p, +%llu bytes); outputs "
                              "may not share memory with inputs or other outputs",
                              out[o].name, out[o].p, (unsigned long long)out[o].bytes,
                             b->name, b->p, (unsigned long long)b->bytes);
        }
    }
    return MLA_STATUS_SUCCESS;
}
