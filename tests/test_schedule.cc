/*
 * test_schedule.cc - the split-KV scheduler without a GPU: the real
 * kernels/service/schedule.cu, compiled for the host with its CUDA
 * primitives emulated (tests/simt.h), runs both of CTA 0's paths (the
 * warp path for up to 32 requests, the block path) and the block-table
 * CTAs on hand-picked and random length mixes, and each result is
 * checked against a serial reference made of the same helpers and
 * cut()'s loop: header and status, kept lengths, the combine list (each
 * request's piece count and first slot), the pieces as a multiset
 * stored largest-first, the flag bytes, and nothing written past the
 * lists.
 *   tests/test_schedule [random cases]   (default 200; MLA_TEST_SCHEDULE_CASES)
 *
 * SPDX-License-Identifier: MIT
 */
#include "simt.h"
#include <algorithm>
#include <array>
#include <csignal>
#include <map>
#include <random>
#include <tuple>
#include <unistd.h>
#include "../kernels/service/schedule.cu"

thread_local dim3u threadIdx;
dim3u blockIdx, gridDim;
SimtWarp *simt_warps;
SimtBlock *simt_block;
std::atomic<long> simt_exchanges;
static const char *cur_case = "";
void simt_fail(const char *what)
{
    fprintf(stderr, "SIMT FAILURE: %s (case %s)\n", what, cur_case);
    fflush(stderr);
    _exit(2);
}

using namespace mla::sched;

struct Layout { size_t lens, clist, pieces, total; };
static size_t a256(size_t x) { return (x + 255) & ~(size_t)255; }
static Layout layout(int batch, int max_pieces)
{
    Layout l;
    size_t off = MLA_WS_HEADER_BYTES;
    l.lens = off; off = a256(off + (size_t)batch * 4);
    l.clist = off; off = a256(off + (size_t)batch * 16);
    l.pieces = off; off = a256(off + (size_t)max_pieces * 16);
    l.total = off;
    return l;
}

static void run_cta(unsigned bx, unsigned grid, const mla_decode_params &p,
                    void (*fn)(const mla_decode_params &))
{
    SimtWarp warps[8];
    SimtBlock block;
    simt_warps = warps;
    simt_block = &block;
    blockIdx = {bx, 0, 0};
    gridDim = {grid, 1, 1};
    std::vector<std::thread> th;
    for (unsigned t = 0; t < 256; t++)
        th.emplace_back([&, t] {
            threadIdx = {t, 0, 0};
            fn(p);
        });
    for (auto &x : th)
        x.join();
}

struct Case {
    mla_decode_params p;
    std::vector<int32_t> lens, table;
};

/* One call on a fresh workspace (0xab), or on *prev, what an earlier
 * call left (reuse). */
static std::vector<uint8_t> run(Case &c, bool warp, bool pages,
                                const std::vector<uint8_t> *prev = nullptr)
{
    const Layout l = layout(c.p.batch, c.p.max_pieces);
    std::vector<uint8_t> ws = prev ? *prev : std::vector<uint8_t>(l.total + 256, 0xab);
    c.p.seq_lens = (uint64_t)(uintptr_t)c.lens.data();
    c.p.block_table = (uint64_t)(uintptr_t)c.table.data();
    mla_decode_params p = c.p;
    p.workspace = (uint64_t)(uintptr_t)ws.data();
    p.ws_lens = l.lens; p.ws_clist = l.clist; p.ws_pieces = l.pieces;
    p.seq_lens = (uint64_t)(uintptr_t)c.lens.data();
    p.block_table = (uint64_t)(uintptr_t)c.table.data();
    run_cta(0, p.sched_ctas, p, warp ? cut_warp : cut_pieces);
    if (pages)
        for (int i = 1; i < p.sched_ctas; i++)
            run_cta(i, p.sched_ctas, p, check_pages);
    return ws;
}

struct Piece {
    int b, t0, t1, slot;
    bool operator<(const Piece &o) const { return std::tie(b, t0, t1, slot) < std::tie(o.b, o.t0, o.t1, o.slot); }
    bool operator==(const Piece &o) const { return b == o.b && t0 == o.t0 && t1 == o.t1 && slot == o.slot; }
};

struct Ref {
    std::vector<int> kept;
    std::vector<std::array<int, 4>> comb; /* the combine's list, by request */
    std::vector<Piece> pieces;           /* flat order: request, key */
    std::vector<int> bkt;                /* bucket of each flat piece */
    bool bad_len, bad_alone;
    std::vector<int> flags;              /* CTA i's flag */
    Rule rule;
    int maxp;
};

/* The serial reference: the block path's formulas one request after the
 * other, cut() as the loop it is. */
static Ref reference(const Case &c)
{
    const mla_decode_params &p = c.p;
    Ref r;
    const long long limit = std::min((long long)p.max_pages_per_seq * p.page_size, (long long)p.max_seq_len);
    const int bn = p.block_n, cost = p.piece_cost, min_tiles = p.min_piece_tiles;
    r.bad_len = false;
    long long tiles = 0, line = 0;
    for (int b = 0; b < p.batch; b++) {
        int len = c.lens[b];
        if (len < 0 || len > limit) { r.bad_len = true; len = 0; }
        r.kept.push_back(len);
        const int nt = ceil_tiles(len, bn);
        tiles += nt;
        line += nt ? nt + cost : 0;
    }
    float cr[kRounds];
    Stats s;
    candidates(p, tiles, cr, s);
    for (int b = 0; b < p.batch; b++) {
        const int nt = ceil_tiles(r.kept[b], bn);
        if (nt)
            add_request(s, nt, cr, min_tiles);
    }
    r.rule = choose_rule(p, s, tiles, line, cr, r.maxp);
    const float scale = bucket_scale(r.maxp);
    long long c0 = 0;
    int slot = 0;
    for (int b = 0; b < p.batch; b++) {
        const int nt = ceil_tiles(r.kept[b], bn);
        if (!nt) {
            r.comb.push_back({b, 0, -1, 0});
            continue;
        }
        const int n = count_pieces(r.rule, c0, nt, cost, min_tiles);
        const int first = n > 1 ? slot : -1;
        int prev = 0;
        const int m = cut(r.rule, c0, nt, cost, min_tiles, [&](int t0, int t1, int i) {
            if (t0 != prev || t1 <= t0)
                simt_fail("reference: pieces not contiguous and non-empty");
            prev = t1;
            r.pieces.push_back({b, t0, t1, n > 1 ? first + i : -1});
            r.bkt.push_back(bucket(t1 - t0, scale));
        });
        if (m != n || prev != nt)
            simt_fail("reference: count_pieces or coverage");
        if (n > 1)
            r.comb.push_back({b, n, first, 0});
        slot += n > 1 ? n : 0;
        c0 += nt + cost;
    }
    /* Block table: request b bad if a page of its valid length is. */
    std::vector<int> badreq(p.batch, 0);
    for (int b = 0; b < p.batch; b++) {
        const int len = c.lens[b];
        if (len < 0 || len > limit)
            continue;
        const int np = (int)(((long long)len + p.page_size - 1) >> p.page_shift);
        for (int pg = 0; pg < np; pg++) {
            const int e = c.table[(size_t)b * p.max_pages_per_seq + pg];
            badreq[b] |= e < 0 || e >= p.num_pages;
        }
    }
    r.bad_alone = false;
    if (p.sched_ctas == 1)
        for (int b = 0; b < p.batch; b++)
            r.bad_alone |= badreq[b] != 0;
    r.flags.assign(p.sched_ctas, 0);
    for (int i = 1; i < p.sched_ctas; i++) {
        const int stride = (p.sched_ctas - 1) * kWarps;
        for (int w = 0; w < kWarps; w++)
            for (int b = (i - 1) * kWarps + w; b < p.batch; b += stride)
                r.flags[i] |= badreq[b];
    }
    return r;
}

static long checks;
#define CHECK(cond, ...)                                                            \
    do {                                                                            \
        checks++;                                                                   \
        if (!(cond)) {                                                              \
            fprintf(stderr, "MISMATCH [%s] %s: ", cur_case, what);                  \
            fprintf(stderr, __VA_ARGS__);                                           \
            fprintf(stderr, "\n");                                                  \
            return false;                                                           \
        }                                                                           \
    } while (0)

/* fresh: the workspace was all 0xab before the call (nothing written past
 * the lists can then be checked); reused: the header's verdict expected. */
static bool compare(const Case &c, const Ref &r, const std::vector<uint8_t> &ws, bool warp,
                    bool pages, bool fresh = true, bool reused = false)
{
    const char *what = warp ? "warp path" : "block path";
    const mla_decode_params &p = c.p;
    const Layout l = layout(p.batch, p.max_pieces);
    const mla_ws_header *h = (const mla_ws_header *)ws.data();
    const int N = (int)r.pieces.size();
    CHECK(h->magic == MLA_WS_MAGIC, "magic");
    CHECK(h->status == ((r.bad_len || r.bad_alone) ? (int)MLA_STATUS_OUT_OF_BOUNDS : 0),
          "status %d (bad_len %d bad_alone %d)", h->status, r.bad_len, r.bad_alone);
    CHECK(h->plan_tag == p.plan_tag, "plan_tag");
    CHECK(h->num_pieces == N, "num_pieces %d want %d", h->num_pieces, N);
    CHECK(h->block_table == p.block_table && h->num_pages == p.num_pages &&
              h->max_pages_per_seq == p.max_pages_per_seq, "args");
    CHECK(h->num_combine == (int)r.comb.size(), "num_combine %d want %zu", h->num_combine, r.comb.size());
    CHECK(h->reused == (reused ? 1 : 0), "reused %d want %d", h->reused, reused ? 1 : 0);
    CHECK(N <= p.max_pieces, "more pieces than max_pieces");
    if (pages)
        for (int i = 1; i < p.sched_ctas; i++)
            CHECK(ws[MLA_WS_FLAGS_OFFSET + i] == r.flags[i], "flag %d", i);
    const int32_t *kept = (const int32_t *)(ws.data() + l.lens);
    const int4 *clist = (const int4 *)(ws.data() + l.clist);
    const int4 *pc = (const int4 *)(ws.data() + l.pieces);
    for (int b = 0; b < p.batch; b++)
        CHECK(kept[b] == r.kept[b], "kept[%d]", b);
    std::vector<std::array<int, 4>> cl;
    for (int i = 0; i < h->num_combine; i++)
        cl.push_back({clist[i].x, clist[i].y, clist[i].z, clist[i].w});
    std::sort(cl.begin(), cl.end());
    CHECK(cl == r.comb, "clist: (request, pieces, first slot, 0) of each listed request");
    /* Nothing written past the lists. */
    for (size_t i = l.clist + 16 * (size_t)h->num_combine; fresh && i < l.clist + 16 * (size_t)p.batch; i++)
        CHECK(ws[i] == 0xab, "write past clist");
    for (size_t i = l.pieces + 16 * (size_t)N; fresh && i < l.total + 256; i++)
        CHECK(ws[i] == 0xab, "write past the pieces at byte %zu", i - l.pieces);
    /* The same multiset of pieces, stored by bucket (largest first). */
    std::vector<Piece> got(N), want = r.pieces;
    for (int i = 0; i < N; i++)
        got[i] = {pc[i].x, pc[i].y, pc[i].z, pc[i].w};
    std::vector<int> kb = r.bkt;
    std::sort(kb.begin(), kb.end());
    std::map<Piece, int> bof;
    for (int i = 0; i < N; i++)
        bof[r.pieces[i]] = r.bkt[i];
    for (int i = 0; i < N; i++) {
        auto it = bof.find(got[i]);
        CHECK(it != bof.end(), "piece %d (%d,%d,%d,%d) not in the reference", i, got[i].b, got[i].t0,
              got[i].t1, got[i].slot);
        CHECK(it->second == kb[i], "piece %d in bucket %d, position's bucket %d", i, it->second, kb[i]);
    }
    std::vector<Piece> gs = got;
    std::sort(gs.begin(), gs.end());
    std::sort(want.begin(), want.end());
    CHECK(gs == want, "multiset of pieces");
    if (warp) /* within a bucket: flat order */
        for (int i = 1; i < N; i++)
            if (bof[got[i]] == bof[got[i - 1]])
                CHECK(got[i - 1] < got[i], "flat order within bucket at %d", i);
    return true;
}

static std::mt19937_64 rng(12345);
static long long rnd(long long lo, long long hi) { return std::uniform_int_distribution<long long>(lo, hi)(rng); }

static Case make_case(int batch, int bn, int parts, int cost, int min_tiles, int page_size,
                      int max_seq_len, const std::vector<int> &lens, int sched_ctas, double bad_page,
                      int fewer_pages = 0)
{
    Case c;
    mla_decode_params &p = c.p;
    memset(&p, 0, sizeof p);
    p.batch = batch;
    p.block_n = bn;
    p.parts = parts;
    p.max_pieces = (int)std::min<long long>(batch + 2LL * parts, 65535);
    p.partial_slots = 3 * parts;
    p.piece_cost = cost;
    p.min_piece_tiles = min_tiles;
    p.page_size = page_size;
    int sh = 0;
    while ((1 << sh) < page_size) sh++;
    p.page_shift = sh;
    p.max_seq_len = max_seq_len;
    p.max_pages_per_seq = (int)(((long long)max_seq_len + page_size - 1) / page_size);
    /* The block table's bound below the plan's: limit = pages * page_size. */
    p.max_pages_per_seq = std::max(1, p.max_pages_per_seq - fewer_pages);
    p.num_pages = (int64_t)p.max_pages_per_seq * batch + 7;
    p.plan_tag = 0x1234abcdu;
    p.sched_ctas = sched_ctas;
    c.lens = lens;
    c.table.resize((size_t)batch * p.max_pages_per_seq);
    for (auto &e : c.table) {
        e = (int32_t)rnd(0, p.num_pages - 1);
        if (bad_page > 0 && std::uniform_real_distribution<double>(0, 1)(rng) < bad_page)
            e = rnd(0, 1) ? -1 : (int32_t)p.num_pages;
    }
    return c;
}

static int host_sched_ctas(int batch)
{
    int s = batch <= 8 ? 1 : 1 + (batch + 7) / 8;
    return s > 1 + MLA_SCHEDULE_MAX_CHECK_CTAS ? 1 + MLA_SCHEDULE_MAX_CHECK_CTAS : s;
}

static long cases, warp_cases, by_rule[2], max_np, n_badlen, n_badalone, n_flags, n_alone_warp,
    n_reused;

/* A call; with again, the same lengths again on its workspace (kept
 * unless one is bad), then one length changed (cut again). */
static bool with_reuse(Case &c, const Ref &r, bool warp, bool pages, bool again)
{
    const char *what = "reuse";
    std::vector<uint8_t> ws = run(c, warp, pages);
    bool ok = compare(c, r, ws, warp, pages);
    if (!again)
        return ok;
    ws = run(c, warp, pages, &ws);
    ok = ok && compare(c, r, ws, warp, pages, false, !r.bad_len);
    n_reused += !r.bad_len;
    if (!ok || c.p.batch == 0)
        return ok;
    Case d = c;
    const int k = (int)(d.lens.size() - 1) / 2, old = d.lens[k];
    d.lens[k] = old >= 1 && old <= d.p.max_seq_len ? old - 1 : 1;
    const Ref rd = reference(d);
    ws = run(d, warp, pages, &ws);
    CHECK(d.lens[k] != old, "a changed length");
    return compare(d, rd, ws, warp, pages, false, false);
}
static std::map<int, long> by_rounds;

/* again: each path also called twice more on the workspace it left
 * (with_reuse); every hand case and every fourth random one. */
static bool one(Case &c, const char *name, bool verbose = false, bool again = true)
{
    cur_case = name;
    const Ref r = reference(c);
    const bool pages = c.p.sched_ctas > 1 && c.p.sched_ctas <= 6;
    bool ok = true;
    if (c.p.batch <= kWarpBatch) {
        ok &= with_reuse(c, r, true, pages, again);
        warp_cases++;
    }
    ok &= with_reuse(c, r, false, pages, again);
    cases++;
    by_rule[r.rule.parts]++;
    n_badlen += r.bad_len;
    n_badalone += r.bad_alone && c.p.batch <= kWarpBatch;
    n_alone_warp += c.p.sched_ctas == 1 && c.p.batch <= kWarpBatch;
    for (int f : r.flags) n_flags += f && pages;
    max_np = std::max<long>(max_np, (long)r.pieces.size());
    by_rounds[((int)r.pieces.size() + 31) / 32]++;
    if (verbose || !ok) {
        printf("%s: batch %d parts %d rule %s c %.3f share %lld maxp %d pieces %zu split %d\n", name,
               c.p.batch, c.p.parts, r.rule.parts ? "parts" : "equal", r.rule.c, r.rule.share, r.maxp,
               r.pieces.size(), (int)std::count_if(r.pieces.begin(), r.pieces.end(), [](const Piece &x) { return x.slot >= 0; }));
        if (verbose) {
            const float scale = bucket_scale(r.maxp);
            std::map<int, int> sizes;
            for (auto &x : r.pieces) sizes[x.t1 - x.t0]++;
            printf("   sizes:");
            for (auto &kv : sizes) printf(" %dx%d(b%d)", kv.second, kv.first, bucket(kv.first, scale));
            printf("\n");
        }
    }
    return ok;
}

int main(int argc, char **argv)
{
    const char *env = getenv("MLA_TEST_SCHEDULE_CASES");
    const long n_random = argc > 1 ? atol(argv[1]) : env ? atol(env) : 200;
    signal(SIGALRM, [](int) { fprintf(stderr, "TIMEOUT (a deadlock?) in case %s\n", cur_case); _exit(3); });
    bool ok = true;
    /* The hand cases of the brief. */
    {
        Case c = make_case(1, 64, 132, 2, 2, 64, 65536, {4096}, 1, 0);
        ok &= one(c, "b1 h128 s4096 (64 tiles, parts 132)", true);
        std::vector<int> l8(8, 4096);
        c = make_case(8, 64, 132, 2, 2, 64, 65536, l8, 1, 0);
        ok &= one(c, "b8 4096 each", true);
        for (int i = 0; i < 8; i++) l8[i] = 512 * (i + 1) + 17 * i;
        c = make_case(8, 64, 132, 2, 2, 64, 65536, l8, 1, 0);
        ok &= one(c, "b8 mixed", true);
        std::vector<int> l32(32, 4096);
        c = make_case(32, 64, 132, 2, 2, 64, 65536, l32, 5, 0);
        ok &= one(c, "b32 4096 each", true);
        for (int i = 0; i < 32; i++) l32[i] = (int)rnd(1, 8192);
        c = make_case(32, 64, 132, 2, 2, 64, 65536, l32, 5, 0);
        ok &= one(c, "b32 random 1..8192", true);
        l32.assign(32, 0);
        c = make_case(32, 64, 132, 2, 2, 64, 65536, l32, 5, 0);
        ok &= one(c, "b32 all empty", true);
        std::vector<int> l1 = {100000};
        c = make_case(1, 64, 132, 2, 2, 64, 65536, l1, 1, 0);
        ok &= one(c, "b1 too long", true);
    }
    /* Kept lengths, the block table changed under them (CTA 0 alone): cut,
     * then a bad entry (kept, OUT_OF_BOUNDS), then the entry mended
     * (kept), then the same lengths with fewer pages a row, so that one
     * is past the limit (cut: OUT_OF_BOUNDS), then a batch whose lengths
     * are not cached in shared memory, twice. */
    for (int batch : {8, 40}) {
        for (bool warp : {true, false}) {
            if (warp && batch > kWarpBatch)
                continue;
            std::vector<int> l(batch);
            for (auto &v : l) v = (int)rnd(1, 5000);
            l[0] = 4000;
            Case c = make_case(batch, 64, 132, 2, 2, 64, 8192, l, 1, 0);
            static char name[64];
            snprintf(name, sizeof name, "reuse b%d %s, block table changed", batch, warp ? "warp" : "block");
            cur_case = name;
            const char *what = name;
            auto step = [&](std::vector<uint8_t> &ws, bool first, bool reused) {
                const Ref r = reference(c);
                ws = run(c, warp, false, first ? nullptr : &ws);
                return compare(c, r, ws, warp, false, first, reused);
            };
            std::vector<uint8_t> ws;
            int32_t &e = c.table[(size_t)3 * c.p.max_pages_per_seq];
            const int32_t good = e;
            bool seq = step(ws, true, false);
            e = -1;
            seq = seq && step(ws, false, true);
            seq = seq && ((const mla_ws_header *)ws.data())->status == (int)MLA_STATUS_OUT_OF_BOUNDS;
            e = good;
            seq = seq && step(ws, false, true) && step(ws, false, true);
            c = make_case(batch, 64, 132, 2, 2, 64, 8192, l, 1, 0, 128 - 40); /* limit 2560 */
            seq = seq && step(ws, false, false) &&
                  ((const mla_ws_header *)ws.data())->status == (int)MLA_STATUS_OUT_OF_BOUNDS;
            if (!seq)
                fprintf(stderr, "MISMATCH [%s] %s: the sequence\n", cur_case, what);
            ok &= seq;
        }
    }
    {
        std::vector<int> l(4100);
        for (auto &v : l) v = (int)rnd(0, 8192);
        Case c = make_case(4100, 64, 528, 2, 2, 64, 8192, l, host_sched_ctas(4100), 0);
        ok &= one(c, "b4100 (lengths not cached), twice");
    }
    /* CTA 0 alone: a bad entry in the last request, then in another. */
    for (int batch = 1; batch <= 32 && ok; batch++)
        for (int which = 0; which < 2 && ok; which++) {
            std::vector<int> l(batch);
            for (auto &v : l) v = (int)rnd(1, 5000);
            Case c = make_case(batch, 64, 132, 2, 2, 64, 8192, l, 1, 0);
            const int b = which ? (int)rnd(0, batch - 1) : batch - 1;
            const int np = (l[b] + 63) / 64;
            c.table[(size_t)b * c.p.max_pages_per_seq + rnd(0, np - 1)] = -1;
            static char name[64];
            snprintf(name, sizeof name, "alone b%d, bad entry in request %d", batch, b);
            ok &= one(c, name, false, which == 0);
        }
    const int parts_set[] = {1, 2, 3, 5, 8, 16, 33, 66, 132, 133, 264, 396, 528, 1000};
    for (long k = 0; k < n_random && ok; k++) {
        const int batch = rnd(0, 9) == 0 ? (int)rnd(33, 300) : (int)rnd(1, 32);
        const int bn = rnd(0, 1) ? 64 : 32;
        const int parts = rnd(0, 3) == 0 ? (int)rnd(1, 600) : parts_set[rnd(0, 13)];
        const int cost = rnd(0, 2) ? 2 : (int)rnd(0, 5);
        const int min_tiles = rnd(0, 2) ? 2 : (int)rnd(1, 8);
        const int mode = (int)rnd(0, 9);
        /* mode 9: lengths up to 2^31 - 1 (64-bit sums), large pages. */
        const int page_size = mode == 9 ? 1 << 16 : 1 << rnd(4, 7);
        const int max_seq_len = mode == 9   ? (int)rnd(1 << 24, 0x7fffffff)
                                : mode == 8 ? (int)rnd(1, 2000000)
                                            : (int)(1 << rnd(6, 18));
        std::vector<int> lens(batch);
        const int top = max_seq_len;
        const int same = (int)rnd(0, top);
        for (int b = 0; b < batch; b++) {
            int v;
            switch (mode) {
            case 0: v = same; break;                                   /* uniform batch */
            case 1: v = (int)rnd(0, top); break;                        /* uniform mix */
            case 2: v = rnd(0, 9) ? (int)rnd(1, std::max(1, top / 64)) : (int)rnd(top / 2, top); break; /* long tail */
            case 3: v = rnd(0, 2) ? 0 : (int)rnd(0, top); break;        /* many empty */
            case 4: v = (int)(rnd(0, top / bn) * bn + rnd(-1, 1)); break; /* tile edges */
            case 5: v = (int)rnd(1, 3 * bn); break;                     /* tiny */
            case 6: v = same + (int)rnd(-bn, bn); break;                /* near-uniform */
            default: v = (int)rnd(0, top); break; /* 7, 8, 9 */
            }
            v = std::max(0, std::min(v, top));
            if (rnd(0, 49) == 0) /* a bad length now and then */
                v = rnd(0, 1) ? -(int)rnd(1, 5) : (int)std::min<long long>(0x7fffffff, (long long)top + rnd(1, 100));
            lens[b] = v;
        }
        const int sched = rnd(0, 3) == 0 ? 1 : host_sched_ctas(batch);
        Case c = make_case(batch, bn, parts, cost, min_tiles, page_size, max_seq_len, lens, sched,
                           rnd(0, 3) == 0 ? 0.002 : 0.0, rnd(0, 4) == 0 ? (int)rnd(0, 2) : 0);
        if (rnd(0, 2) == 0) { /* one bad entry among a request's pages */
            const int b = (int)rnd(0, batch - 1);
            const long long len = c.lens[b];
            if (len > 0 && len <= std::min((long long)c.p.max_pages_per_seq * c.p.page_size, (long long)max_seq_len)) {
                const int np = (int)((len + page_size - 1) / page_size);
                c.table[(size_t)b * c.p.max_pages_per_seq + rnd(0, np - 1)] = rnd(0, 1) ? -7 : (int32_t)c.p.num_pages;
            }
        }
        char name[96];
        snprintf(name, sizeof name, "random #%ld mode %d", k, mode);
        alarm(60);
        ok &= one(c, name, false, k % 4 == 0);
    }
    printf("%s: %ld cases (%ld through both paths), %ld checks, rule equal %ld parts %ld, most pieces %ld, %ld exchanges\n",
           ok ? "PASS" : "FAIL", cases, warp_cases, checks, by_rule[0], by_rule[1], max_np, simt_exchanges.load());
    printf("bad lengths %ld, bad pages found by CTA 0 alone (warp path) %ld, warp-path cases alone %ld, CTA flags set %ld, schedules kept %ld\n",
           n_badlen, n_badalone, n_alone_warp, n_flags, n_reused);
    printf("rounds of 32 pieces:");
    for (auto &kv : by_rounds) printf(" %d:%ld", kv.first, kv.second);
    printf("\n");
    return ok ? 0 : 1;
}
