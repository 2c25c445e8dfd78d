/* test_gpu_append.c - mla_kv_append on the GPU writes the same bytes as
 * the CPU backend, in every format, over latent rows of every character
 * (wide ranges, zeros, NaN, infinities, subnormals) and padding slots.
 * SPDX-License-Identifier: MIT */
#include <check.h>
#include <stdio.h>
#include <string.h>

#include "../tools/devmem.h"
#include "fp8_codec.h"
#include "gpu_harness.h"
#include "mla.h"
#include "rng.h"

/* ------------------------------------------------------------------ */
/* KV append: GPU bytes == CPU bytes */

static const struct fmode append_modes[] = {
    {"bf16", MLA_KV_BF16, 0, 1.0},          {"e4m3", MLA_KV_FP8_E4M3, 0, 1.0},
    {"e4m3-ks", MLA_KV_FP8_E4M3, 0, 0.0125}, {"e4m3-g32", MLA_KV_FP8_E4M3, 32, 1.0},
    {"e4m3-g64", MLA_KV_FP8_E4M3, 64, 0.5},  {"e4m3-g128", MLA_KV_FP8_E4M3, 128, 2.0},
    {"dsmla", MLA_KV_FP8_DS_MLA, 0, 1.0},
};
#define NAPPEND ((int)(sizeof(append_modes) / sizeof(append_modes[0])))

static uint16_t rnd_bf16(double sigma)
{
    return mla_float_to_bf16((float)(rnd_gauss() * sigma));
}

/* A latent row with a character: ordinary, wide dynamic range, zero, one
 * NaN, an infinity, huge, tiny (bf16 subnormals). */
static void fill_latent_row(uint16_t *x, int kind)
{
    double sigma = 0.25;
    switch (kind % 8) {
    case 1: sigma = 1e-3; break;
    case 2: sigma = 300.0; break;
    case 3: sigma = 1e4; break;
    case 4: sigma = 1e-38; break;
    default: break;
    }
    for (int i = 0; i < MLA_D_QK; i++)
        x[i] = rnd_bf16(sigma);
    if (kind % 8 == 5)
        memset(x, 0, MLA_D_QK * 2);
    if (kind % 8 == 6)
        x[rnd_int(MLA_D_QK)] = 0x7fc0; /* NaN */
    if (kind % 8 == 7)
        x[rnd_int(MLA_D_QK)] = rnd_int(2) ? 0x7f80 : 0xff80; /* +-inf */
    if (kind % 16 == 9) /* one channel far above the rest of its block */
        x[rnd_int(MLA_D_QK)] = mla_float_to_bf16(1e6f);
}

static long first_diff(const uint8_t *a, const uint8_t *b, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i])
            return (long)i;
    return -1;
}

START_TEST(append_bytes)
{
    static const int quick_modes[3] = {0, 4, 6}; /* bf16, e4m3-g64, dsmla */
    const int mi = g_quick ? quick_modes[_i / 2] : _i / 2, h_kv = _i % 2 ? 2 : 1;
    const struct fmode *m = &append_modes[mi];
    watchdog("append_bytes", _i);
    arena_reset();
    rnd_start(5000 + (uint64_t)_i);
    const int P = 16, num_pages = 9, n = g_quick ? 40 : 300;
    mla_config_t *cfg = make_cfg(16 * h_kv, h_kv, 1, m, P, 0, 0, 0, 0);
    int row_bytes, spr;
    cfg_geometry(cfg, &row_bytes, &spr);
    const int64_t nslots = (int64_t)num_pages * P;

    /* Distinct slots, ~10% padding (-1), plus one slot just past the end. */
    int64_t *slots = halloc((size_t)n * sizeof(int64_t));
    int64_t *slots_cpu = halloc((size_t)n * sizeof(int64_t));
    char *used = halloc((size_t)nslots);
    memset(used, 0, (size_t)nslots);
    int oob_row = rnd_int(n);
    for (int i = 0; i < n; i++) {
        if (i == oob_row) {
            slots[i] = nslots + rnd_int(3);
            slots_cpu[i] = -1;
            continue;
        }
        if (rnd_int(10) == 0) {
            slots[i] = slots_cpu[i] = -1 - rnd_int(3);
            continue;
        }
        int64_t s;
        int tries = 0;
        do
            s = (int64_t)(rnd_u64() % (uint64_t)nslots);
        while (used[s] && ++tries < 1000);
        if (used[s]) {
            slots[i] = slots_cpu[i] = -1;
            continue;
        }
        used[s] = 1;
        slots[i] = slots_cpu[i] = s;
    }
    const size_t lat_elems = (size_t)n * h_kv * MLA_D_QK;
    uint16_t *lat = halloc(lat_elems * 2);
    for (int i = 0; i < n * h_kv; i++)
        fill_latent_row(lat + (size_t)i * MLA_D_QK, rnd_int(16));

    const size_t kv_bytes = (size_t)nslots * h_kv * row_bytes;
    const size_t sc_bytes = (size_t)nslots * h_kv * spr * sizeof(float);
    uint8_t *kv_cpu = halloc(kv_bytes), *kv_gpu = halloc(kv_bytes);
    float *sc_cpu = spr ? halloc(sc_bytes) : NULL, *sc_gpu = spr ? halloc(sc_bytes) : NULL;
    for (size_t i = 0; i < kv_bytes; i++)
        kv_cpu[i] = (uint8_t)rnd_u64();
    for (size_t i = 0; i < sc_bytes; i++)
        ((uint8_t *)sc_cpu)[i] = (uint8_t)rnd_u64();

    devmem_ptr d_kv = dalloc(kv_bytes), d_sc = spr ? dalloc(sc_bytes) : 0;
    devmem_ptr d_lat = dalloc(lat_elems * 2), d_slots = dalloc((size_t)n * sizeof(int64_t));
    DM_OK(devmem_htod(d_kv, kv_cpu, kv_bytes));
    if (spr)
        DM_OK(devmem_htod(d_sc, sc_cpu, sc_bytes));
    DM_OK(devmem_htod(d_lat, lat, lat_elems * 2));
    DM_OK(devmem_htod(d_slots, slots, (size_t)n * sizeof(int64_t)));
    DM_OK(devmem_sync());

    ST_OK(g_gpu, mla_kv_append(g_gpu, cfg, DPTR(d_kv), spr ? DPTR(d_sc) : NULL, num_pages,
                               DPTR(d_lat), DPTR(d_slots), n, g_stream));
    /* n == 0 queues nothing and succeeds. */
    ST_OK(g_gpu, mla_kv_append(g_gpu, cfg, DPTR(d_kv), spr ? DPTR(d_sc) : NULL, num_pages,
                               DPTR(d_lat), DPTR(d_slots), 0, g_stream));
    DM_OK(devmem_stream_sync(g_stream));
    ST_OK(g_cpu, mla_kv_append(g_cpu, cfg, kv_cpu, sc_cpu, num_pages, lat,
                               slots_cpu, n, NULL));
    DM_OK(devmem_dtoh(kv_gpu, d_kv, kv_bytes));
    if (spr)
        DM_OK(devmem_dtoh(sc_gpu, d_sc, sc_bytes));

    long d = first_diff(kv_gpu, kv_cpu, kv_bytes);
    long ds = spr ? first_diff((const uint8_t *)sc_gpu, (const uint8_t *)sc_cpu, sc_bytes) : -1;
    printf("%-6s append %s h_kv %d: %d rows, cache %s, scales %s\n",
           d < 0 && ds < 0 ? "ok" : "FAIL", m->name, h_kv, n,
           d < 0 ? "identical" : "DIFFER", spr ? (ds < 0 ? "identical" : "DIFFER") : "none");
    if (d >= 0) {
        long row = d / row_bytes;
        fprintf(stderr, "  cache byte %ld (slot %ld, head %ld, byte %ld): gpu 0x%02x cpu 0x%02x\n",
                d, row / h_kv, row % h_kv, d % row_bytes, kv_gpu[d], kv_cpu[d]);
    }
    if (ds >= 0) {
        long row = ds / (long)(spr * sizeof(float));
        fprintf(stderr, "  scale %ld (slot %ld, head %ld): gpu %a cpu %a\n", ds / 4, row / h_kv,
                row % h_kv, (double)sc_gpu[ds / 4], (double)sc_cpu[ds / 4]);
    }
    arena_reset();
    REQUIRE(d < 0 && ds < 0, "append %s h_kv %d: GPU and CPU bytes differ", m->name, h_kv);
}
END_TEST

void add_append_cases(Suite *s)
{
    TCase *tc = tcase_create("append");
    tcase_set_timeout(tc, 600);
    tcase_add_loop_test(tc, append_bytes, 0, g_quick ? 6 : 2 * NAPPEND);
    suite_add_tcase(s, tc);
}
