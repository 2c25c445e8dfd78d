/* rng.h - the reproducible random stream shared by the test programs
 * (splitmix64; every test restarts it from the seed and its own salt).
 * The seed and the state are defined once per program, in rng.c.
 * SPDX-License-Identifier: MIT */
#ifndef MLA_TESTS_RNG_H
#define MLA_TESTS_RNG_H

#include <math.h>
#include <stdint.h>

extern uint64_t g_seed, g_rng;

static inline uint64_t rnd_u64(void)
{
    uint64_t z = (g_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Each test restarts the stream from the seed and its own salt, so that
 * one test reproduces alone whatever ran before it. */
static inline void rnd_start(uint64_t salt)
{
    g_rng = g_seed ^ (salt * 0xd1b54a32d192ed03ull);
}

static inline double rnd_unit(void) /* [0, 1) */
{
    return (double)(rnd_u64() >> 11) * 0x1p-53;
}

static inline int rnd_int(int n) /* [0, n) */
{
    return (int)(rnd_u64() % (uint64_t)n);
}

static inline double rnd_gauss(void)
{
    double u = rnd_unit(), v = rnd_unit();
    return sqrt(-2.0 * log(1.0 - u)) * cos(6.283185307179586 * v);
}

#endif /* MLA_TESTS_RNG_H */
