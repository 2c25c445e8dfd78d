/*
 * problem.h - random MLA decode problems in host memory, the CPU reference
 * for sampled requests and doc/ABI.md's tolerance check, shared by mla-demo
 * and mla-bench (not part of libmla).
 *
 * A problem is laid out exactly as mla_decode() takes it: a paged cache
 * whose pages are permuted at random, a block table, lengths, Q.  Every
 * cache row no request uses (page tails, one spare page, table entries
 * past a request's last page) holds NaN, so that reading one shows up.
 *
 * Functions returning int return 0 on success and -1 on failure, with a
 * message for problem_last_error().
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_TOOLS_PROBLEM_H
#define MLA_TOOLS_PROBLEM_H

#include <stddef.h>
#include <stdint.h>

#include "mla.h"

/* splitmix64: small, fast, and good enough for test inputs. */
struct problem_rng {
    uint64_t s;
};
uint64_t problem_rng_next(struct problem_rng *r);
double problem_rng_uniform(struct problem_rng *r);
double problem_rng_normal(struct problem_rng *r);
/* Seed of an independent stream derived from a seed and an index. */
uint64_t problem_hash(uint64_t seed, uint64_t index);

/*
 * Build the table of input values from the seed: randn / 10 clamped to
 * [-1, 1], as FlashMLA's tests draw them.  Call once before generating.
 */
void problem_inputs_init(uint64_t seed);

struct problem {
    int batch, q_len, heads, kv_heads, page_size, max_pages, num_pages, max_len;
    int row_bytes, spr; /* bytes per cache row, fp32 block scales per row */
    int32_t *lens;      /* [batch] */
    int32_t *table;     /* [batch, max_pages] */
    uint16_t *q;        /* bf16 [batch, q_len, heads, 576], or NULL */
    uint8_t *kv;        /* [num_pages, page_size, kv_heads, row_bytes] */
    float *scales;      /* [num_pages, page_size, kv_heads, spr], or NULL */
    size_t kv_bytes, scale_bytes, q_bytes, out_bytes, lse_bytes;
};

/* How request lengths are drawn around a length s (the mean). */
enum problem_lens {
    PROBLEM_LENS_FIXED,    /* s each */
    PROBLEM_LENS_NORMAL,   /* ~ N(s, s/2) clamped to [1, 2s] */
    PROBLEM_LENS_FLASHMLA, /* FlashMLA's benchmark: max(N(s, s/2), q_len), truncated */
    PROBLEM_LENS_MIX,      /* 1 in 16 requests (at least one) long, holding half the
                            * keys; the rest short, sharing the other half */
    PROBLEM_LENS_COUNT
};

/* "fixed", "normal", "flashmla", "mix"; NULL for other values. */
const char *problem_lens_name(int dist);
/* The distribution of a name, or -1. */
int problem_lens_parse(const char *name);

/*
 * Draw batch lengths around seq_len.  The normal and flashmla lengths of
 * request i depend only on (seq_len, seed, i, and q_len for flashmla), so
 * a smaller batch gets a prefix of a larger one's lengths; mix places its
 * long requests at random positions that depend on the batch too.  With
 * one request, mix is seq_len.
 */
void problem_draw_lens(int32_t *lens, int batch, int seq_len, int dist, int q_len,
                       uint64_t seed);

/*
 * Generate the cache of a problem for cfg's format, page size and KV
 * heads: batch requests of lens[i] tokens, random latent rows written
 * through the CPU backend's mla_kv_append() (quantized as an engine's
 * would be).  Request i draws from its own stream problem_hash(seed, i),
 * so the result does not depend on threads (worker threads, <= 0: one).
 * Q is left NULL (see problem_make_q()).
 */
int problem_generate(struct problem *p, const mla_config_t *cfg, int batch, const int32_t *lens,
                     uint64_t seed, int threads);

/*
 * A compact copy of the first batch requests of src with lengths
 * lens[i] <= src->lens[i]: only the pages those lengths need, permuted
 * afresh with seed, page tails and a spare page set to NaN.  Q is left
 * NULL.  This lets one generated cache serve many shapes.
 */
int problem_subset(struct problem *dst, const struct problem *src, int batch, const int32_t *lens,
                   uint64_t seed);

/* Allocate and fill Q for q_len tokens and heads query heads; sets the
 * Q, output and LSE sizes. */
int problem_make_q(struct problem *p, int q_len, int heads, uint64_t seed);

/* Free everything and zero the struct (accepts a zeroed struct). */
void problem_free(struct problem *p);

/*
 * Work of one decode call: bytes = KV rows needed (row bytes + 4 per block
 * scale, per KV head) + Q + output; flops = 2 (576 + 512) per visible key,
 * per query head and per query token (with causal and q_len > 1, query i
 * of n sees len - n + 1 + i keys); keys = sum of the lengths.  Any output
 * pointer may be NULL.
 */
void problem_work(const struct problem *p, int causal, double *bytes, double *flops,
                  double *keys);

/*
 * Compare bf16 outputs (n elements) and LSE values (nl) with a reference
 * using doc/ABI.md's tolerances: per element |d| <= 8e-4 or <= 2.01/128
 * |ref|, cosine difference <= 5e-6 overall, LSE within 1e-6 absolute or
 * 8.01/65536 relative, inf/NaN positions equal.  Returns the number of
 * failures (the cosine test counts as one).
 */
long problem_compare(const uint16_t *out, const uint16_t *ref, size_t n, const float *lse,
                     const float *lse_ref, size_t nl, double *max_err, double *cos_diff);

/*
 * The CPU reference for nreq requests reqs[] of p: a sub-problem made of
 * their lengths, block-table rows and Q over the same cache, decoded by
 * the CPU context cpu with cfg.  out: bf16 [nreq, q_len, heads, 512], lse:
 * fp32 [nreq, heads, q_len].  Returns the status of the failing call
 * (message in problem_last_error()).
 */
mla_status_t problem_cpu_reference(const struct problem *p, mla_context_t *cpu,
                                   const mla_config_t *cfg, const int *reqs, int nreq,
                                   uint16_t *out, float *lse);

/*
 * Open CUDA device `device` for a tool: a libmla context on it, and the
 * devmem helper (devmem_init) for the tool's own buffers.  Returns the
 * context, or NULL with why set to what stands in the way, in libmla's
 * terms first: a build without the CUDA backend, no driver or device (with
 * the driver's reason), no kernel for the device.
 */
mla_context_t *problem_open_gpu(int device, char *why, size_t why_len);

/* Message of the last failure, "" if none. */
const char *problem_last_error(void);

/* For the tools' own buffers: 256-byte aligned host memory (bytes may be
 * 0), or exit(1) with "PROG: out of host memory"; and a monotonic clock in
 * seconds. */
void *problem_xalloc(const char *prog, size_t bytes);
double problem_now_s(void);

#endif /* MLA_TOOLS_PROBLEM_H */
