/* options.c - mla-bench's command line: usage, parsing, formats, presets.
 * SPDX-License-Identifier: MIT */
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "bench.h"
#include "mla_experimental.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " [options]\n"
            "grid (comma-separated lists; the grid is their cross product):\n"
            "  --preset NAME      deepseek-v3-tp1 | deepseek-v3-tp8 | kimi | mtp\n"
            "  --format LIST      bf16, fp8, fp8/gN, fp8-ds-mla, all (fp8 = fp8/g128)\n"
            "  --scale-block LIST fp8 block-scale sizes 0|32|64|128 (128)\n"
            "  --batch LIST       requests per call (GPU 64, CPU 2)\n"
            "  --seq-len LIST     cache length, the mean of varied lengths (GPU 4096, CPU 512)\n"
            "  --lengths LIST     fixed | normal | flashmla | mix: how request lengths vary\n"
            "                     around --seq-len (fixed)\n"
            "  --varlen           --lengths normal: ~ N(s, s/2) clamped to [1, 2s]\n"
            "  --q-len LIST       query tokens per request, 1..8 (1)\n"
            "  --heads LIST       query heads, 1..128 (128)\n"
            "  --kv-heads N       KV heads, dividing every --heads value (1)\n"
            "  --page-size LIST   tokens per page, powers of two up to 1024 (64)\n"
            "  --causal           causal mask for q_len > 1\n"
            "measurement:\n"
            "  --layers N         time decode steps: one mla_schedule, then N\n"
            "                     mla_decode_scheduled calls; report per layer (0: time\n"
            "                     mla_decode calls, the default)\n"
            "  --iters N          timed calls (or steps) per shape (GPU 50, CPU 3)\n"
            "  --warmup N         untimed calls first (GPU 5, CPU 1)\n"
            "  --check-requests N requests checked against the CPU reference (4)\n"
            "  --l2-mb X          L2 size to rotate past (the driver's, else 60)\n"
            "  --mma-tflops X     compute ceiling, assumed (GPU 750; CPU none)\n"
            "  --no-ceilings      do not measure the copy and read bandwidths\n"
            "output:\n"
            "  --json FILE, --csv FILE, --svg FILE\n"
            "other:\n"
            "  --cpu              use the CPU backend even if a GPU is present\n"
            "  --device N         CUDA device ordinal (0)\n"
            "  --kernel NAME      auto | portable | hopper | hopper-wide | hopper-narrow |\n"
            "                     hopper-wide8 (auto; experimental)\n"
            "  --threads N        host threads generating caches (online cores, at most 64)\n"
            "  --seed N           random seed (time)\n"
            "  --corrupt-check    alter one output before each check (tests the guard)\n"
            "  --help, --version\n");
}

static void bad_arg(const char *name, const char *s, const char *want)
{
    fprintf(stderr, PROG ": --%s %s: want %s\n", name, s, want);
    exit(2);
}

static int parse_int(const char *s, const char *name, long lo, long hi)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        char want[96];
        snprintf(want, sizeof(want), "an integer in [%ld, %ld]", lo, hi);
        bad_arg(name, s, want);
    }
    return (int)v;
}

static double parse_double(const char *s, const char *name, double lo, double hi)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        char want[96];
        snprintf(want, sizeof(want), "a number in [%g, %g]", lo, hi);
        bad_arg(name, s, want);
    }
    return v;
}

/* Add v to a list unless it holds it already. */
static void list_add(struct ilist *l, int v, const char *name, const char *s)
{
    for (int i = 0; i < l->n; i++)
        if (l->v[i] == v)
            return;
    if (l->n == MAX_LIST)
        bad_arg(name, s, "at most 32 values");
    l->v[l->n++] = v;
}

/* Copy the next comma-separated token of *t into tok and step past it;
 * 0 at the end of the list. */
static int next_token(const char **t, char *tok, size_t n, const char *name, const char *s)
{
    if (!*t)
        return 0;
    size_t len = strcspn(*t, ",");
    if (len == 0 || len >= n)
        bad_arg(name, s, "a comma-separated list");
    memcpy(tok, *t, len);
    tok[len] = '\0';
    *t = (*t)[len] ? *t + len + 1 : NULL;
    return 1;
}

static void parse_list(struct ilist *l, const char *s, const char *name, long lo, long hi)
{
    char tok[64];
    l->n = 0;
    for (const char *t = s; next_token(&t, tok, sizeof(tok), name, s);)
        list_add(l, parse_int(tok, name, lo, hi), name, s);
}

static void parse_lengths(struct ilist *l, const char *s)
{
    char tok[64];
    l->n = 0;
    for (const char *t = s; next_token(&t, tok, sizeof(tok), "lengths", s);) {
        int v = problem_lens_parse(tok);
        if (v < 0)
            bad_arg("lengths", tok, "fixed, normal, flashmla or mix");
        list_add(l, v, "lengths", s);
    }
}

static void set_list(struct ilist *l, int n, const int *v)
{
    l->n = n;
    memcpy(l->v, v, sizeof(int) * (size_t)n);
}

static void add_format(struct opts *o, int format, int block)
{
    for (int i = 0; i < o->nfmt; i++)
        if (o->fmts[i].format == format && o->fmts[i].block == block)
            return;
    if (o->nfmt == MAX_FORMATS) {
        fprintf(stderr, PROG ": too many formats\n");
        exit(2);
    }
    o->fmts[o->nfmt].format = format;
    o->fmts[o->nfmt].block = block;
    o->nfmt++;
}

static void parse_formats(struct opts *o)
{
    const char *s = o->format_arg ? o->format_arg : "fp8";
    char buf[256];
    if (strlen(s) >= sizeof(buf))
        bad_arg("format", s, "a shorter list");
    snprintf(buf, sizeof(buf), "%s", s);
    char *save = NULL;
    o->nfmt = 0;
    for (char *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        if (!strcmp(t, "all")) {
            add_format(o, MLA_KV_BF16, 0);
            add_format(o, MLA_KV_FP8_E4M3, 128);
            add_format(o, MLA_KV_FP8_DS_MLA, 0);
        } else if (!strcmp(t, "bf16")) {
            add_format(o, MLA_KV_BF16, 0);
        } else if (!strcmp(t, "fp8-ds-mla")) {
            add_format(o, MLA_KV_FP8_DS_MLA, 0);
        } else if (!strcmp(t, "fp8")) {
            for (int i = 0; i < o->block.n; i++)
                add_format(o, MLA_KV_FP8_E4M3, o->block.v[i]);
        } else if (!strncmp(t, "fp8/g", 5)) {
            int g = parse_int(t + 5, "format", 0, 128);
            if (g != 0 && g != 32 && g != 64 && g != 128)
                bad_arg("format", t, "fp8/g0, fp8/g32, fp8/g64 or fp8/g128");
            add_format(o, MLA_KV_FP8_E4M3, g);
        } else {
            bad_arg("format", t, "bf16, fp8, fp8/gN, fp8-ds-mla or all");
        }
    }
    if (o->nfmt == 0)
        bad_arg("format", s, "at least one format");
}

static int known_preset(const char *p)
{
    return !strcmp(p, "deepseek-v3-tp1") || !strcmp(p, "deepseek-v3-tp8") ||
           !strcmp(p, "kimi") || !strcmp(p, "mtp");
}

/* Presets: lists for options not given on the command line. */
void apply_preset(struct opts *o, int gpu)
{
    static const int b_gpu[] = {1, 8, 64, 132}, s_gpu[] = {1024, 4096, 8192};
    static const int b_mtp[] = {1, 64, 132}, s_mtp[] = {4096, 8192};
    static const int b_cpu[] = {1, 3}, s_cpu[] = {128, 512};
    static const int h128[] = {128}, h16[] = {16}, h64[] = {64}, hmtp[] = {16, 128};
    static const int q1[] = {1}, qmtp[] = {2, 4};
    const int *h = h128, *q = q1, *b = gpu ? b_gpu : b_cpu, *s = gpu ? s_gpu : s_cpu;
    int nh = 1, nq = 1, nb = gpu ? 4 : 2, ns = gpu ? 3 : 2;
    const char *p = o->preset;
    if (!p) {
        static const int b_def_gpu[] = {64}, s_def_gpu[] = {4096};
        static const int b_def_cpu[] = {2}, s_def_cpu[] = {512};
        b = gpu ? b_def_gpu : b_def_cpu;
        s = gpu ? s_def_gpu : s_def_cpu;
        nb = ns = 1;
    } else if (!strcmp(p, "deepseek-v3-tp8")) {
        h = h16;
    } else if (!strcmp(p, "kimi")) {
        h = h64;
    } else if (!strcmp(p, "mtp")) {
        h = hmtp;
        nh = 2;
        q = qmtp;
        nq = 2;
        o->causal = 1;
        if (gpu) {
            b = b_mtp;
            s = s_mtp;
            nb = 3;
            ns = 2;
        }
    }
    if (!o->set_heads)
        set_list(&o->heads, nh, h);
    if (!o->set_q_len)
        set_list(&o->q_len, nq, q);
    if (!o->set_batch)
        set_list(&o->batch, nb, b);
    if (!o->set_seq)
        set_list(&o->seq, ns, s);
    if (!o->set_iters)
        o->iters = gpu ? 50 : 3;
    if (!o->set_warmup)
        o->warmup = gpu ? 5 : 1;
    for (int i = 0; i < o->heads.n; i++)
        if (o->heads.v[i] % o->kv_heads) {
            fprintf(stderr, PROG ": --kv-heads %d does not divide --heads %d\n", o->kv_heads,
                    o->heads.v[i]);
            exit(2);
        }
}

char *join_args(int argc, char **argv)
{
    size_t n = 1;
    for (int i = 0; i < argc; i++)
        n += 4 * strlen(argv[i]) + 3;
    char *s = problem_xalloc(PROG, n), *w = s;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int plain = *a != '\0';
        for (const char *c = a; *c; c++)
            plain &= (strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                             "0123456789-_=.,/:+@%", *c) != NULL);
        if (i)
            *w++ = ' ';
        if (plain) {
            w += sprintf(w, "%s", a);
        } else {
            *w++ = '\'';
            for (const char *c = a; *c; c++) {
                if (*c == '\'')
                    w += sprintf(w, "'\\''");
                else
                    *w++ = *c;
            }
            *w++ = '\'';
        }
    }
    *w = '\0';
    return s;
}

enum {
    O_PRESET = 256, O_FORMAT, O_BLOCK, O_BATCH, O_SEQ, O_VARLEN, O_LENS, O_QLEN, O_HEADS, O_KVH,
    O_PAGE, O_CAUSAL, O_LAYERS, O_ITERS, O_WARMUP, O_CHECK, O_L2, O_MMA, O_NOCEIL, O_JSON,
    O_CSV, O_SVG, O_CPU, O_DEVICE, O_THREADS, O_SEED, O_CORRUPT, O_HELP, O_VERSION, O_KERNEL
};

static const struct option long_opts[] = {
    {"preset", 1, 0, O_PRESET}, {"format", 1, 0, O_FORMAT}, {"scale-block", 1, 0, O_BLOCK},
    {"batch", 1, 0, O_BATCH}, {"seq-len", 1, 0, O_SEQ}, {"varlen", 0, 0, O_VARLEN},
    {"lengths", 1, 0, O_LENS}, {"q-len", 1, 0, O_QLEN}, {"heads", 1, 0, O_HEADS},
    {"kv-heads", 1, 0, O_KVH}, {"page-size", 1, 0, O_PAGE}, {"causal", 0, 0, O_CAUSAL},
    {"layers", 1, 0, O_LAYERS}, {"iters", 1, 0, O_ITERS}, {"warmup", 1, 0, O_WARMUP},
    {"check-requests", 1, 0, O_CHECK}, {"l2-mb", 1, 0, O_L2}, {"mma-tflops", 1, 0, O_MMA},
    {"no-ceilings", 0, 0, O_NOCEIL}, {"json", 1, 0, O_JSON}, {"csv", 1, 0, O_CSV},
    {"svg", 1, 0, O_SVG}, {"cpu", 0, 0, O_CPU}, {"device", 1, 0, O_DEVICE},
    {"threads", 1, 0, O_THREADS}, {"seed", 1, 0, O_SEED}, {"corrupt-check", 0, 0, O_CORRUPT},
    {"help", 0, 0, O_HELP}, {"version", 0, 0, O_VERSION}, {"kernel", 1, 0, O_KERNEL},
    {0, 0, 0, 0}};

int bench_kernel = MLA_XKERNEL_AUTO;
const char *const bench_kernel_names[] = {MLA_XKERNEL_NAMES};
const int bench_kernel_count = (int)(sizeof(bench_kernel_names) / sizeof(bench_kernel_names[0]));

/* Take one option; exit after --help, --version or a bad option. */
static void take_option(struct opts *o, int c, const char *arg)
{
    switch (c) {
    case O_PRESET: o->preset = arg; break;
    case O_FORMAT: o->format_arg = arg; break;
    case O_BLOCK: parse_list(&o->block, arg, "scale-block", 0, 128); break;
    case O_BATCH: parse_list(&o->batch, arg, "batch", 1, 65535); o->set_batch = 1; break;
    case O_SEQ: parse_list(&o->seq, arg, "seq-len", 1, 1 << 23); o->set_seq = 1; break;
    case O_VARLEN: o->lens.n = 1; o->lens.v[0] = PROBLEM_LENS_NORMAL; break;
    case O_LENS: parse_lengths(&o->lens, arg); break;
    case O_QLEN: parse_list(&o->q_len, arg, "q-len", 1, 8); o->set_q_len = 1; break;
    case O_HEADS: parse_list(&o->heads, arg, "heads", 1, 128); o->set_heads = 1; break;
    case O_KVH: o->kv_heads = parse_int(arg, "kv-heads", 1, 128); break;
    case O_PAGE: parse_list(&o->page, arg, "page-size", 1, 1024); break;
    case O_CAUSAL: o->causal = 1; break;
    case O_LAYERS: o->layers = parse_int(arg, "layers", 0, MAX_LAYERS); break;
    case O_ITERS: o->iters = parse_int(arg, "iters", 1, 100000); o->set_iters = 1; break;
    case O_WARMUP: o->warmup = parse_int(arg, "warmup", 0, 100000); o->set_warmup = 1; break;
    case O_CHECK: o->check_requests = parse_int(arg, "check-requests", 1, 65535); break;
    case O_L2: o->l2_mb = parse_double(arg, "l2-mb", 0.001, 1e6); break;
    case O_MMA: o->mma_tflops = parse_double(arg, "mma-tflops", 1e-6, 1e6); break;
    case O_NOCEIL: o->no_ceilings = 1; break;
    case O_JSON: o->json = arg; break;
    case O_CSV: o->csv = arg; break;
    case O_SVG: o->svg = arg; break;
    case O_CPU: o->cpu = 1; break;
    case O_CORRUPT: o->corrupt = 1; break;
    case O_DEVICE: o->device = parse_int(arg, "device", 0, 1023); break;
    case O_KERNEL:
        bench_kernel = -1;
        for (int k = 0; k < bench_kernel_count; k++)
            if (strcmp(arg, bench_kernel_names[k]) == 0)
                bench_kernel = k;
        if (bench_kernel < 0)
            bad_arg("kernel", arg,
                    "auto, portable, hopper, hopper-wide, hopper-narrow or hopper-wide8");
        break;
    case O_THREADS: o->threads = parse_int(arg, "threads", 1, 1024); break;
    case O_SEED: {
        char *end;
        errno = 0;
        o->seed = strtoull(arg, &end, 0);
        if (errno || end == arg || *end)
            bad_arg("seed", arg, "an unsigned integer");
        break;
    }
    case O_HELP: usage(stdout); exit(0);
    case O_VERSION:
        printf(PROG " (libmla) %s\n%s\n", mla_version_string(), mla_build_info());
        exit(0);
    default: usage(stderr); exit(2);
    }
}

void parse_options(struct opts *o, int argc, char **argv)
{
    static const int page_def[] = {64}, block_def[] = {128}, lens_def[] = {PROBLEM_LENS_FIXED};
    memset(o, 0, sizeof(*o));
    o->kv_heads = 1;
    o->check_requests = 4;
    o->l2_mb = -1;
    o->mma_tflops = -1;
    o->seed = (uint64_t)time(NULL);
    set_list(&o->page, 1, page_def);
    set_list(&o->block, 1, block_def);
    set_list(&o->lens, 1, lens_def);
    o->cores = sysconf(_SC_NPROCESSORS_ONLN);
    o->threads = o->cores > 0 ? (o->cores > 64 ? 64 : (int)o->cores) : 1;
    int c;
    while ((c = getopt_long(argc, argv, "", long_opts, NULL)) != -1)
        take_option(o, c, optarg);
    if (optind < argc) {
        fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
        usage(stderr);
        exit(2);
    }
    for (int i = 0; i < o->block.n; i++)
        if (o->block.v[i] != 0 && o->block.v[i] != 32 && o->block.v[i] != 64 &&
            o->block.v[i] != 128)
            bad_arg("scale-block", "list", "values among 0, 32, 64, 128");
    for (int i = 0; i < o->page.n; i++)
        if (o->page.v[i] & (o->page.v[i] - 1))
            bad_arg("page-size", "list", "powers of two");
    parse_formats(o);
    if (o->preset && !known_preset(o->preset))
        bad_arg("preset", o->preset, "deepseek-v3-tp1, deepseek-v3-tp8, kimi or mtp");
}
