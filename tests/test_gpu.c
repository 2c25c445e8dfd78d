/*
 * test_gpu.c - the CUDA backend against the CPU backend: decode over a grid
 * of shapes, formats and lengths, CUDA-graph replay with changed lengths,
 * device-side validation, and byte-exact KV append.
 *
 * Exits 77 (skip) when no usable GPU, driver or kernel image is present.
 * Runs without fork (CUDA does not survive fork after initialization).
 * Inputs are fresh each run: the seed is printed, MLA_TEST_SEED replays
 * one.  MLA_TEST_QUICK=1 runs a small subset, MLA_TEST_SANITIZE=N only the
 * sanitizer shapes, N calls each (both for compute-sanitizer).
 *
 * SPDX-License-Identifier: MIT
 */
#define _POSIX_C_SOURCE 200809L /* alarm */
#include <check.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "../tools/devmem.h"
#include "gpu_harness.h"
#include "mla.h"
#include "rng.h"

static int g_sanitize; /* MLA_TEST_SANITIZE: the sanitizer shapes only */

static Suite *gpu_suite(void)
{
    Suite *s = suite_create("gpu");
    if (g_sanitize || !g_quick) {
        add_sanitize_cases(s);
        if (g_sanitize)
            return s;
    }
    add_decode_cases(s);
    add_nonfinite_cases(s);
    add_schedule_cases(s);
    add_validation_cases(s);
    add_append_cases(s);
    return s;
}

int main(void)
{
    const char *seed = getenv("MLA_TEST_SEED");
    const char *quick = getenv("MLA_TEST_QUICK");
    g_seed = seed && *seed ? strtoull(seed, NULL, 0) : (uint64_t)time(NULL) ^ ((uint64_t)clock() << 32);
    g_quick = quick && atoi(quick) > 0;
    const char *san = getenv("MLA_TEST_SANITIZE");
    g_sanitize = san && atoi(san) > 0;
    if (g_sanitize && atoi(san) > g_san_calls)
        g_san_calls = atoi(san);
    const char *wd = getenv("MLA_TEST_WATCHDOG");
    if (wd && *wd)
        g_watchdog_s = (unsigned)strtoul(wd, NULL, 10);

    mla_status_t st = mla_context_create(&g_gpu, 0);
    if (st == MLA_STATUS_NO_DEVICE || st == MLA_STATUS_NOT_SUPPORTED ||
        st == MLA_STATUS_NO_KERNEL_IMAGE) {
        printf("SKIP: no usable GPU: mla_context_create(0) -> %s: %s (build: %s)\n",
               mla_status_string(st), mla_last_error(), mla_build_info());
        return 77;
    }
    if (st != MLA_STATUS_SUCCESS) {
        printf("mla_context_create(0) -> %s: %s\n", mla_status_string(st), mla_last_error());
        return 1;
    }
    char why[256] = "";
    int rc = devmem_init(0, why, sizeof(why));
    if (rc != 0) {
        printf("devmem_init(0) failed although libmla found the device: %s\n",
               why[0] ? why : devmem_last_error());
        return 1;
    }
    if (mla_context_create(&g_cpu, MLA_DEVICE_CPU) != MLA_STATUS_SUCCESS ||
        devmem_stream_create(&g_stream) != 0) {
        printf("setup failed\n");
        return 1;
    }
    char name[128] = "";
    int ccmaj = 0, ccmin = 0, sms = 0;
    devmem_device_info(name, sizeof(name), &ccmaj, &ccmin, &sms);
    printf("test_gpu: seed %" PRIu64 " (MLA_TEST_SEED=%" PRIu64 " replays it)%s\n", g_seed,
           g_seed, g_sanitize ? ", sanitizer shapes" : g_quick ? ", quick subset" : "");
    printf("device 0: %s, sm_%d%d, %d SMs; %s\n", name, ccmaj, ccmin, sms, mla_build_info());
    fflush(stdout);

    g_hopper = ccmaj == 9 && ccmin == 0 && strstr(mla_build_info(), "sm_90a") != NULL;
    printf("sm_90a kernel: %s\n", g_hopper ? "tested (cases marked kernel=hopper require it)"
                                             : "not available on this device/build");
    build_cases();
    build_san_cases();
    build_nf_cases();
    SRunner *sr = srunner_create(gpu_suite());
    srunner_set_fork_status(sr, CK_NOFORK);
    srunner_run_all(sr, CK_NORMAL);
    alarm(0);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);

    arena_reset();
    devmem_stream_destroy(g_stream);
    mla_context_destroy(g_cpu);
    mla_context_destroy(g_gpu);
    devmem_fini();
    printf("test_gpu: seed %" PRIu64 ", %d failed\n", g_seed, failed);
    return failed ? 1 : 0;
}
