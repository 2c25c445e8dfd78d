/* rng.c - the seed and the state of rng.h's stream: one of each per
 * program, whichever of its files set or draw them.
 * SPDX-License-Identifier: MIT */
#include "rng.h"

uint64_t g_seed, g_rng;
