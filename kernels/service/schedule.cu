/*
 * schedule.cu - the split-KV scheduler: checks the device-resident lengths
 * and block table, keeps the lengths it read, and splits the step's work
 * into pieces whatever the mix of lengths (the contract is in
 * mla_params.h; the rules that cut, in schedule_model.cuh).  Launched by
 * mla_decode() before the decode kernel, or once per step by
 * mla_schedule() for every decode of that step.
 *
 * CTA 0 cuts on one of two paths that call the same functions for every
 * rule and count (piece_at is cut()'s walk in closed form), so they make
 * the same pieces.  The block path (cut_pieces) makes three passes over
 * the lengths, each thread taking a contiguous run of requests: (1) read
 * and check the lengths; prefix sums of tiles and cost; (2) the
 * equal-split candidates' piece counts and sizes, and the rule; (3) prefix
 * sums of the split pieces give their partial slots, a histogram of sizes
 * their order, then the pieces.  Batches of up to kWarpBatch take the warp
 * path (cut_warp): the same steps with a request a lane, scans by
 * shuffles and sums by reduxes, spread over the CTA's warps to shorten
 * the one chain that the scheduler's time is at small batches, where it
 * is on the critical path of mla_decode.  The block-table entries are
 * checked by CTA 0 when it is alone (by all its warps on the block path,
 * by warps 5-7 on the warp path), else at the same time by CTAs 1.., one
 * warp a request, each into its flag byte (no memset).  Both paths first
 * compare the lengths with the kept ones: a workspace that already holds
 * this call's schedule keeps it (reuse, below), and CTA 0 then only checks
 * the block table (when alone) and rewrites the header.
 *
 * SPDX-License-Identifier: MIT
 */
#include "mla.h"
#include "mla_params.h"
#include "ptx.cuh"
#include "schedule.cuh"
#include "schedule_model.cuh"

namespace mla {
namespace sched {

constexpr int kThreads = MLA_SCHEDULE_THREADS;
constexpr int kWarps = kThreads / 32;
/* Batches up to this take the warp path (cut_warp): a request a lane,
 * scans by shuffles and sums by reduxes, no block-wide scans. */
constexpr int kWarpBatch = 32;

/* Lengths kept in shared memory for batches up to this (else re-read
 * from the workspace copy). */
constexpr int kLensCached = 4096;

struct Shared {
    int len[kLensCached];
    long long warp_sum[kWarps], warp_sum2[kWarps];
    Stats warp_stats[kWarps];
    Stats stats;
    int hist[kBuckets], base[kBuckets];
    int ncombine;
    Rule rule;
    int maxp; /* the largest piece, for the buckets */
    int npieces;
};

/* Inclusive prefix sum of v over the warp. */
template <class T>
MLA_DEV T warp_scan(T v)
{
    const int lane = (int)(threadIdx.x & 31u);
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) {
        const T y = __shfl_up_sync(0xffffffffu, v, o);
        if (lane >= o)
            v += y;
    }
    return v;
}

/* Exclusive prefix sum of v over the CTA, and the total; with TWO also
 * the total of u, in the same barriers. */
template <bool TWO = false>
MLA_DEV long long block_scan(long long v, Shared &sh, long long &total, long long u = 0,
                             long long *utotal = nullptr)
{
    const int lane = (int)(threadIdx.x & 31u), warp = (int)(threadIdx.x >> 5);
    const long long x = warp_scan(v), y = TWO ? warp_scan(u) : 0;
    if (lane == 31) {
        sh.warp_sum[warp] = x;
        if (TWO)
            sh.warp_sum2[warp] = y;
    }
    __syncthreads();
    long long before = 0, ut = 0;
    total = 0;
    for (int w = 0; w < kWarps; w++) {
        const long long s = sh.warp_sum[w];
        before += w < warp ? s : 0;
        total += s;
        if (TWO)
            ut += sh.warp_sum2[w];
    }
    if (TWO)
        *utotal = ut;
    __syncthreads(); /* warp_sum is reused by the next scan */
    return before + x - v;
}

/* The statistics over the warp, in every lane, by reduxes on 32 bits:
 * each thread's counts are saturated at 2^26 first.  A count that large
 * is past max_pieces (< 2^16) and partial_slots (< 2^18) already, so the
 * candidate is refused either way (equal_estimate), and 32 of them fit. */
MLA_DEV void warp_stats(Stats &s)
{
    const uint32_t full = 0xffffffffu;
    const long long sat = 1LL << 26;
#pragma unroll
    for (int r = 0; r < kRounds; r++) {
        s.pieces[r] = __reduce_add_sync(full, (unsigned)min(s.pieces[r], sat));
        s.split[r] = __reduce_add_sync(full, (unsigned)min(s.split[r], sat));
        s.maxp[r] = __reduce_max_sync(full, s.maxp[r]);
        s.minp[r] = __reduce_min_sync(full, s.minp[r]);
    }
}

/* The statistics over the CTA (warp_stats, then 16 threads over the
 * warps' results). */
MLA_DEV void reduce_stats(Stats &s, Shared &sh)
{
    const int lane = (int)(threadIdx.x & 31u), warp = (int)(threadIdx.x >> 5);
    warp_stats(s);
    if (lane == 0)
        sh.warp_stats[warp] = s;
    __syncthreads();
    /* Thread k < 4 kRounds: field k / kRounds of candidate k % kRounds. */
    const int k = (int)threadIdx.x, r = k % kRounds;
    if (k < 4 * kRounds) {
        long long sum = 0;
        int mx = 0, mn = 0x7fffffff;
        for (int w = 0; w < kWarps; w++) {
            const Stats &ws = sh.warp_stats[w];
            sum += k < kRounds ? ws.pieces[r] : ws.split[r];
            mx = max(mx, ws.maxp[r]);
            mn = min(mn, ws.minp[r]);
        }
        switch (k / kRounds) {
        case 0: sh.stats.pieces[r] = sum; break;
        case 1: sh.stats.split[r] = sum; break;
        case 2: sh.stats.maxp[r] = mx; break;
        default: sh.stats.minp[r] = mn; break;
        }
    }
    __syncthreads();
}

/* The header, last (bad: a bad length or, when alone, entry). */
MLA_DEV void write_header(const mla_decode_params &p, bool bad, int npieces, int ncombine,
                          bool reused = false)
{
    mla_ws_header *h = ws_header(p);
    h->status = bad ? (int32_t)MLA_STATUS_OUT_OF_BOUNDS : 0;
    h->plan_tag = p.plan_tag;
    h->num_pieces = npieces;
    h->block_table = p.block_table;
    h->num_pages = p.num_pages;
    h->max_pages_per_seq = p.max_pages_per_seq;
    h->num_combine = ncombine;
    h->reused = reused ? 1 : 0;
    h->magic = MLA_WS_MAGIC;
}

/*
 * Reuse: the pieces, the combine's list and the kept lengths are a
 * function of the kept lengths and the plan's layout alone (plan_tag; a
 * bad length is kept as 0 and cut as such), so a workspace whose header
 * is a schedule of this layout and whose kept lengths equal the lengths
 * read now, each within the limit, already holds this call's schedule,
 * whatever verdict its call recorded.  The call then only checks the
 * block table again and rewrites the header: a decode step's
 * mla_decode() per layer cuts at the first layer, as mla_schedule() once
 * a step would.  OldHeader is what the call reads of the header before
 * it writes anything.
 */
struct OldHeader {
    int4 head; /* status, magic, plan_tag, num_pieces */
    int4 tail; /* max_pages_per_seq, num_combine, reused, - */
};

MLA_DEV OldHeader old_header(const mla_decode_params &p)
{
    return {header_head(p), ld_volatile_v4((const uint8_t *)ws_header(p) + 32)};
}

/* The header of a reused schedule. */
MLA_DEV void write_reused_header(const mla_decode_params &p, bool bad_page, const OldHeader &o)
{
    write_header(p, bad_page, o.head.w, o.tail.y, true);
}

/* Whether request b, of length len, has a bad block-table entry (the lanes
 * of a warp together); none for a bad length, which CTA 0 reports. */
MLA_DEV bool request_bad_pages(const mla_decode_params &p, int b, int len, long long limit,
                               uint32_t lane)
{
    return len >= 0 && len <= limit && bad_pages(p, b, len, lane);
}

/* The same, its length read from seq_lens. */
MLA_DEV bool request_bad_pages(const mla_decode_params &p, int b, long long limit,
                               uint32_t lane)
{
    return request_bad_pages(p, b, ((const int32_t *)p.seq_lens)[b], limit, lane);
}

/* The warp path's block table when CTA 0 is alone: a warp a request, over
 * warps first..kWarps-1; lane b of every warp holds request b's length in
 * len. */
MLA_DEV bool warps_bad_pages(const mla_decode_params &p, int first, int len, long long limit,
                             uint32_t lane)
{
    const int warp = (int)(threadIdx.x >> 5);
    bool bad = false;
    for (int rb = warp - first; rb < p.batch; rb += kWarps - first)
        bad |= request_bad_pages(p, rb, __shfl_sync(0xffffffffu, len, rb), limit, lane);
    return bad;
}

/* CTA 0: lengths, pieces, header; the block table too when alone. */
MLA_DEV void cut_pieces(const mla_decode_params &p)
{
    __shared__ Shared sh;
    const int tid = (int)threadIdx.x;
    const uint32_t lane = threadIdx.x & 31u;
    const int32_t *lens = (const int32_t *)p.seq_lens;
    uint8_t *ws = (uint8_t *)p.workspace;
    int32_t *kept = (int32_t *)(ws + p.ws_lens);
    int4 *pieces = (int4 *)(ws + p.ws_pieces);
    const long long limit = len_limit(p);
    const int bn = p.block_n, cost = p.piece_cost, min_tiles = p.min_piece_tiles;
    const int per = (p.batch + kThreads - 1) / kThreads;
    const int lo = min(p.batch, tid * per), hi = min(p.batch, lo + per);
    const bool cached = p.batch <= kLensCached;
    auto len_of = [&](int b) { return cached ? sh.len[b] : kept[b]; };

    /* 1: the lengths, read once; the tiles, and the cost line (every
     * non-empty request's tiles plus one fixed cost); whether they are
     * the kept ones (reuse). */
    const OldHeader old = old_header(p);
    long long tiles = 0, line = 0;
    bool bad = false, same = true;
    for (int b = lo; b < hi; b++) {
        int len = lens[b];
        same &= len == kept[b]; /* this thread's own entry, read before it is written */
        if (len < 0 || len > limit) {
            bad = true;
            len = 0;
        }
        kept[b] = len;
        if (cached)
            sh.len[b] = len;
        const int nt = ceil_tiles(len, bn);
        tiles += nt;
        line += nt ? nt + cost : 0;
    }
    if (tid < kBuckets)
        sh.hist[tid] = 0;
    if (tid == 0)
        sh.ncombine = 0;
    long long total_tiles, total_line;
    const long long c0 = block_scan<true>(line, sh, total_line, tiles, &total_tiles);

    /* Alone: the block table, a warp a request (loads of all of them in
     * flight before any is tested). */
    bool bad_page = false;
    if (p.sched_ctas == 1)
        for (int b = tid >> 5; b < p.batch; b += kWarps)
            bad_page |= bad_pages(p, b, len_of(b), lane);
    const bool bad_len = __syncthreads_or(bad) != 0;
    if (__syncthreads_and(same) && !bad_len && layout_matches(p, old.head)) {
        bad_page = __syncthreads_or(bad_page) != 0;
        if (tid == 0)
            write_reused_header(p, bad_page, old);
        return;
    }

    /* 2: the equal-split candidates, and the rule. */
    float cr[kRounds];
    Stats s;
    candidates(p, total_tiles, cr, s);
    for (int b = lo; b < hi; b++) {
        const int nt = ceil_tiles(len_of(b), bn);
        if (nt)
            add_request(s, nt, cr, min_tiles);
    }
    reduce_stats(s, sh);
    if (tid == 0)
        sh.rule = choose_rule(p, sh.stats, total_tiles, total_line, cr, sh.maxp);
    __syncthreads();
    const Rule rule = sh.rule;
    const float scale = bucket_scale(sh.maxp);

    /* 3: split slots by prefix sum, sizes by histogram, then the pieces. */
    int split = 0;
    long long c = c0;
    for (int b = lo; b < hi; b++) {
        const int nt = ceil_tiles(len_of(b), bn);
        if (!nt)
            continue;
        const int n = cut(rule, c, nt, cost, min_tiles, [&](int t0, int t1, int) {
            atomicAdd(&sh.hist[bucket(t1 - t0, scale)], 1);
        });
        split += n > 1 ? n : 0;
        c += nt + cost;
    }
    long long nsplit;
    int slot = (int)block_scan(split, sh, nsplit); /* its syncs order hist */
    if (tid < 32) { /* kBuckets == 32: one warp's exclusive scan */
        const int v = sh.hist[tid];
        const int x = warp_scan(v);
        sh.base[tid] = x - v;
        if (tid == 31)
            sh.npieces = x;
    }
    __syncthreads();
    /* The combine's list: empty requests (zeros to write) and split ones. */
    int4 *clist = (int4 *)(ws + p.ws_clist);
    c = c0;
    for (int b = lo; b < hi; b++) {
        const int nt = ceil_tiles(len_of(b), bn);
        if (!nt) {
            clist[atomicAdd(&sh.ncombine, 1)] = make_int4(b, 0, -1, 0);
            continue;
        }
        const int n = count_pieces(rule, c, nt, cost, min_tiles);
        const int first = n > 1 ? slot : -1;
        cut(rule, c, nt, cost, min_tiles, [&](int t0, int t1, int i) {
            const int at = atomicAdd(&sh.base[bucket(t1 - t0, scale)], 1);
            pieces[at] = make_int4(b, t0, t1, n > 1 ? first + i : -1);
        });
        if (n > 1)
            clist[atomicAdd(&sh.ncombine, 1)] = make_int4(b, n, first, 0);
        slot += n > 1 ? n : 0;
        c += nt + cost;
    }

    bad_page = __syncthreads_or(bad_page) != 0;
    if (tid == 0)
        write_header(p, bad_len || bad_page, sh.npieces, sh.ncombine);
}

/* One piece a lane of a warp, k its bucket (any value where the lane has
 * no piece), valid the lanes that have one: same, the lanes whose piece
 * is in bucket k; mine, those whose piece is in bucket `lane`.  Five
 * ballots, one per bit of k. */
MLA_DEV void bucket_masks(int k, uint32_t valid, uint32_t &same, uint32_t &mine)
{
    static_assert(kBuckets == 32, "a bucket a lane");
    const uint32_t lane = threadIdx.x & 31u;
    same = mine = valid;
#pragma unroll
    for (int bit = 0; bit < 5; bit++) {
        const uint32_t m = __ballot_sync(0xffffffffu, (k >> bit) & 1);
        same &= (k >> bit) & 1 ? m : ~m;
        mine &= (lane >> bit) & 1u ? m : ~m;
    }
}

/* What the warps of the warp path (cut_warp) hand each other: per rule
 * (the equal-split candidates 0-3, the parts rule 4), the rule, its
 * estimate and largest piece, and per request the
 * flat index past its pieces, their count, its first partial slot and its
 * first cut (parts); per request, its tiles and where they start on the
 * cost line; the counts of each warp's pieces a bucket. */
struct WarpCut {
    int end[kWarpBatch], n[kWarpBatch], slot[kWarpBatch];
    long long k1[kWarpBatch];
    Rule rule;
    float est;
    int maxp;
};
constexpr int kRules = kRounds + 1;
struct WarpShared {
    WarpCut cut[kRules];
    int nt[kWarpBatch];
    long long a[kWarpBatch];
    int cnt[kWarps][kBuckets];
};

/*
 * CTA 0 for p.batch <= kWarpBatch: cut_pieces' steps with request b in
 * lane b (scans by shuffles, sums by reduxes), spread over the CTA's
 * warps, with the same outputs as the reference but for the pieces' order
 * within a bucket (flat order here: by request, then by key).  At small
 * batches the scheduler's time is on the critical path of mla_decode, and
 * it is that of one chain of mostly straight-line code, each instruction
 * fetched once (13 us at h128 b8 when warp 0 did it all:
 * doc/performance.md, Small batches), so the work is spread to shorten
 * the chain rather than to save instructions:
 *  - warps 0-4 read the lengths and scan them alike; warp r < 4 takes
 *    equal-split candidate r, warp 4 the parts rule: its estimate, and
 *    already its pieces' counts and partial slots, before the rule is
 *    known; warps 5-7 check the block table meanwhile when CTA 0 is alone;
 *  - every warp picks the rule (choose_rule's order); warp 0 writes the
 *    combine's list;
 *  - every warp makes pieces, in rounds of 32 over their flat index g,
 *    piece 32 r + l in lane l of round r, round r by warp r % 8: its
 *    request is the first whose pieces end past g (binary search over the
 *    running counts), its tiles come from piece_at.  A first pass counts
 *    each warp's pieces a bucket, the second stores them, 8 rounds at a
 *    time, at their bucket's next positions (ballots order a round).
 */
MLA_DEV void cut_warp(const mla_decode_params &p)
{
    static_assert(kWarpBatch == 32 && kRules < kWarps && kBuckets == 32,
                  "a request a lane; a warp a rule, others for pages; a bucket a lane");
    __shared__ WarpShared sh;
    const uint32_t full = 0xffffffffu, lane = threadIdx.x & 31u;
    const int warp = (int)(threadIdx.x >> 5);
    const long long limit = len_limit(p);
    uint8_t *ws = (uint8_t *)p.workspace;
    const int32_t *lens = (const int32_t *)p.seq_lens;
    const int cost = p.piece_cost, min_tiles = p.min_piece_tiles;
    const int b = (int)lane;
    const bool here = b < p.batch;
    bool bad_len = false, bad_page = false;
    /* Reuse, decided by every warp alike before any of them writes. */
    const OldHeader old = old_header(p);
    const int len_in = here ? lens[b] : 0;
    const bool same = !here || (len_in == ((const int32_t *)(ws + p.ws_lens))[b] && len_in >= 0 &&
                                len_in <= limit);
    if (__syncthreads_and(__all_sync(full, same) && layout_matches(p, old.head))) {
        if (p.sched_ctas == 1)
            bad_page = __syncthreads_or(warps_bad_pages(p, 0, len_in, limit, lane)) != 0;
        if (threadIdx.x == 0)
            write_reused_header(p, bad_page, old);
        return;
    }
    if (warp < kRules) {
        /* 1 (cut_pieces' pass 1), in each of warps 0-4: the length, the
         * tiles, where the request starts on the cost line (c0), the
         * totals. */
        int len = len_in;
        const bool bad = len < 0 || len > limit;
        if (bad)
            len = 0;
        const int nt = ceil_tiles(len, p.block_n);
        const long long line = nt ? nt + cost : 0;
        const long long tiles_to = warp_scan((long long)nt), line_to = warp_scan(line);
        const long long c0 = line_to - line;
        const long long total_tiles = __shfl_sync(full, tiles_to, 31);
        const long long total_line = __shfl_sync(full, line_to, 31);
        if (warp == 0) {
            bad_len = __any_sync(full, bad) != 0;
            if (here)
                ((int32_t *)(ws + p.ws_lens))[b] = len;
            sh.nt[b] = nt;
            sh.a[b] = c0 + cost;
        }

        /* 2 (pass 2): this warp's rule and its estimate (candidates(),
         * add_request(), choose_rule(); a lane's counts are at most 2^26,
         * so the sums fit 32 bits), and 3 (pass 3) for it: the request's
         * pieces, its first flat index and partial slot. */
        Rule rule;
        float est;
        int maxp;
        if (warp < kRounds) {
            rule.parts = false;
            rule.c = candidate_c(p, total_tiles, warp);
            rule.share = 0;
            int n = 0, lo = 0x7fffffff, hi = 0;
            if (nt)
                n = equal_split(nt, rule.c, min_tiles, lo, hi);
            const long long pieces = __reduce_add_sync(full, (unsigned)n);
            const long long split = __reduce_add_sync(full, n > 1 ? (unsigned)n : 0u);
            maxp = __reduce_max_sync(full, hi);
            const int minp = __reduce_min_sync(full, lo);
            est = equal_estimate(p, pieces, split, maxp, minp, total_tiles);
        } else {
            rule = parts_rule(p, total_line, est, maxp);
        }
        long long k1 = 0;
        const int n = nt ? count_pieces(rule, c0, nt, cost, min_tiles, k1) : 0;
        const int split = n > 1 ? n : 0;
        WarpCut &wc = sh.cut[warp];
        wc.end[b] = warp_scan(n);
        wc.n[b] = n;
        wc.slot[b] = warp_scan(split) - split;
        wc.k1[b] = k1;
        if (lane == 0) {
            wc.rule = rule;
            wc.est = est;
            wc.maxp = maxp;
        }
    } else if (p.sched_ctas == 1) {
        bad_page = warps_bad_pages(p, kRules, len_in, limit, lane); /* the lengths read once */
    }
    __syncthreads();

    /* The rule, in every warp: the parts rule unless an equal split's
     * estimate is no longer (choose_rule). */
    Rule rule = sh.cut[kRounds].rule;
    float best = sh.cut[kRounds].est;
    int maxp = sh.cut[kRounds].maxp, pick = kRounds;
    for (int r = 0; r < kRounds; r++)
        if (prefer(rule, best, maxp, sh.cut[r].est, sh.cut[r].rule.c, sh.cut[r].maxp))
            pick = r;
    const WarpCut &wc = sh.cut[pick];
    const int npieces = wc.end[kWarpBatch - 1];
    const uint32_t lt = (1u << lane) - 1u;
    int ncombine = 0;
    if (warp == 0) { /* the combine's list */
        const int n = wc.n[b], nt = sh.nt[b];
        const uint32_t comb = __ballot_sync(full, here && (nt == 0 || n > 1));
        if ((comb >> lane) & 1u)
            ((int4 *)(ws + p.ws_clist))[__popc(comb & lt)] =
                make_int4(b, n, n > 1 ? wc.slot[b] : -1, 0);
        ncombine = __popc(comb);
    }

    /* The pieces, by every warp: lane b holds request b's numbers. */
    int4 *pieces = (int4 *)(ws + p.ws_pieces);
    const float scale = bucket_scale(maxp);
    const int end = wc.end[lane], pn = wc.n[lane], pnt = sh.nt[lane], pslot = wc.slot[lane];
    const long long pa = sh.a[lane], pk1 = wc.k1[lane];
    /* Flat piece g into pc; returns its bucket (0 past the last). */
    auto piece_g = [&](int g, int4 &pc) {
        int o = 0; /* requests whose pieces end at or before g */
#pragma unroll
        for (int step = 16; step > 0; step >>= 1)
            o += __shfl_sync(full, end, o + step - 1) <= g ? step : 0;
        const int i = g - (__shfl_sync(full, end, o) - __shfl_sync(full, pn, o));
        const int on = __shfl_sync(full, pn, o), ont = __shfl_sync(full, pnt, o);
        const int oslot = __shfl_sync(full, pslot, o);
        const long long oa = __shfl_sync(full, pa, o), ok1 = __shfl_sync(full, pk1, o);
        pc = make_int4(0, 0, 0, 0);
        if (g >= npieces)
            return 0;
        int t0, t1;
        piece_at(rule, oa, ok1, ont, on, i, t0, t1);
        pc = make_int4(o, t0, t1, on > 1 ? oslot + i : -1);
        return bucket(t1 - t0, scale);
    };
    /* Pass 1: this warp's pieces a bucket (bucket `lane`), over its
     * rounds; the first round's piece kept for pass 2. */
    int4 pc0;
    const int k0 = piece_g(32 * warp + (int)lane, pc0);
    int count = 0;
    for (int g0 = 32 * warp; g0 < npieces; g0 += 32 * kWarps) {
        int4 pc = pc0;
        const int g = g0 + (int)lane, k = g0 == 32 * warp ? k0 : piece_g(g, pc);
        uint32_t same, mine;
        bucket_masks(k, __ballot_sync(full, g < npieces), same, mine);
        count += __popc(mine);
    }
    sh.cnt[warp][lane] = count;
    __syncthreads();
    int total = 0;
#pragma unroll
    for (int w = 0; w < kWarps; w++)
        total += sh.cnt[w][lane];
    int next = warp_scan(total) - total; /* bucket `lane`'s next position */
    __syncthreads();                     /* cnt is reused below */
    /* Pass 2: 8 rounds at a time (round 8 S + w by warp w), each piece at
     * its bucket's next position after those of the earlier rounds. */
    for (int g8 = 0; g8 < npieces; g8 += 32 * kWarps) {
        int4 pc = pc0;
        const int g = g8 + 32 * warp + (int)lane, k = g8 == 0 ? k0 : piece_g(g, pc);
        uint32_t same, mine;
        bucket_masks(k, __ballot_sync(full, g < npieces), same, mine);
        sh.cnt[warp][lane] = __popc(mine);
        __syncthreads();
        int before = 0, all = 0;
#pragma unroll
        for (int w = 0; w < kWarps; w++) {
            const int v = sh.cnt[w][lane];
            before += w < warp ? v : 0;
            all += v;
        }
        const int at = __shfl_sync(full, next + before, k) + __popc(same & lt);
        if (g < npieces)
            pieces[at] = pc;
        next += all;
        __syncthreads();
    }
    if (p.sched_ctas == 1)
        bad_page = __syncthreads_or(bad_page) != 0;
    if (threadIdx.x == 0)
        write_header(p, bad_len || bad_page, npieces, ncombine);
}

/* CTAs 1..: a share of the block-table entries, one warp per request;
 * the verdict in this CTA's flag byte. */
MLA_DEV void check_pages(const mla_decode_params &p)
{
    const uint32_t lane = threadIdx.x & 31u;
    const long long limit = len_limit(p);
    const int stride = (int)(gridDim.x - 1) * kWarps;
    bool bad = false;
    for (int b = (int)(blockIdx.x - 1) * kWarps + (int)(threadIdx.x >> 5); b < p.batch;
         b += stride)
        bad |= request_bad_pages(p, b, limit, lane);
    bad = __syncthreads_or(bad) != 0;
    if (threadIdx.x == 0)
        ((uint8_t *)ws_header(p))[MLA_WS_FLAGS_OFFSET + blockIdx.x] = bad ? 1 : 0;
}

} /* namespace sched */
} /* namespace mla */


extern "C" __global__ void __launch_bounds__(MLA_SCHEDULE_THREADS, 1)
    mla_schedule_pieces(const __grid_constant__ mla_decode_params p)
{
    mla::griddep_wait();
    if (blockIdx.x == 0 && p.batch <= mla::sched::kWarpBatch)
        mla::sched::cut_warp(p);
    else if (blockIdx.x == 0)
        mla::sched::cut_pieces(p);
    else
        mla::sched::check_pages(p);
    mla::griddep_launch_dependents();
}
