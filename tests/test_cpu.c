/*
 * test_cpu.c - tests of the BF16/FP8 codec and of the CPU backend's
 * mla_kv_append() and mla_decode() against an independent fp64 reference
 * written here, through the public API only.
 *
 * Random inputs come from a splitmix64 generator seeded from the clock,
 * or from MLA_TEST_SEED; the seed is printed so failures reproduce.
 * MLA_TEST_LONG=1 adds large shapes.
 *
 * SPDX-License-Identifier: MIT
 */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "cpu_harness.h"
#include "rng.h"

static Suite *cpu_suite(int longrun)
{
    Suite *s = suite_create("cpu");
    add_codec_cases(s);
    add_append_cases(s);
    add_decode_cases(s);
    if (longrun)
        add_long_cases(s);
    return s;
}

int main(void)
{
    const char *env = getenv("MLA_TEST_SEED");
    const char *lng = getenv("MLA_TEST_LONG");
    SRunner *sr;
    int failed;

    g_seed = env && *env ? strtoull(env, NULL, 0) : (uint64_t)time(NULL);
    printf("test_cpu: MLA_TEST_SEED=%" PRIu64 "\n", g_seed);
    fflush(stdout);

    sr = srunner_create(cpu_suite(lng && atoi(lng) > 0));
    srunner_run_all(sr, CK_NORMAL);
    failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? 0 : 1;
}
