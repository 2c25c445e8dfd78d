/*
 * schedule_model.cuh - what the split-KV scheduler (schedule.cu) decides,
 * apart from how it walks the lengths: the rules that cut a request into
 * pieces, their statistics and estimates, and the choice between them.
 * Both of the scheduler's paths (the block path and the warp path) call
 * these functions for every rule and count, so they make the same pieces.
 *
 * The pieces run as independent CTAs that the hardware dispatches in grid
 * order as SMs free up, so the goal is the shortest greedy schedule of
 * the pieces on `parts` slots, each piece costing its tiles plus a fixed
 * piece_cost.  Two rules, the one with the shorter estimate wins:
 *  - equal splits: each request in n equal pieces of about c tiles, c the
 *    step's tiles over r = 1..kRounds waves of slots: uniform batches come
 *    out as whole requests or equal splits that fill whole waves, with no
 *    more pieces (partials to merge) than that needs;
 *  - parts: the requests end to end on a cost line (tiles plus one fixed
 *    cost each), cut at every multiple of one slot's share, as a
 *    persistent kernel would take them: for lengths that vary, where equal
 *    splits make pieces of unequal size and greedy rounds end unevenly.
 * Pieces are stored largest first (bucket), so in-order dispatch packs
 * the small ones last.
 *
 * SPDX-License-Identifier: MIT
 */
#ifndef MLA_SCHEDULE_MODEL_CUH
#define MLA_SCHEDULE_MODEL_CUH

#include "mla_params.h"
#include "ptx.cuh"

namespace mla {
namespace sched {

/* Waves of slots the equal-split candidates aim at. */
constexpr int kRounds = 4;
/* Piece sizes for the largest-first order. */
constexpr int kBuckets = 32;
/* Per equal-split candidate r: pieces, split pieces (partial slots),
 * largest and smallest piece. */
struct Stats {
    long long pieces[kRounds], split[kRounds];
    int maxp[kRounds], minp[kRounds];
};

/* How the requests are cut: into n equal pieces of about c tiles, or
 * (parts) at every multiple of `share` on the cost line. */
struct Rule {
    bool parts;
    float c;
    long long share;
};

MLA_DEV int ceil_tiles(int len, int bn)
{
    return (int)(((long long)len + bn - 1) / bn);
}

/* Equal split: round(nt / c) pieces, at least 1, none under min_tiles. */
MLA_DEV int pieces_of(int nt, float c, int min_tiles)
{
    const int most = nt / min_tiles > 1 ? nt / min_tiles : 1;
    const int n = __float2int_rn((float)nt / c);
    return n < 1 ? 1 : n > most ? most : n;
}

/* A request of nt > 0 tiles cut into pieces_of(nt, c, min_tiles) equal
 * pieces: their count; lo and hi, the smallest and largest piece (the
 * first nt % n are a tile longer). */
MLA_DEV int equal_split(int nt, float c, int min_tiles, int &lo, int &hi)
{
    const int n = pieces_of(nt, c, min_tiles), q = nt / n;
    lo = q;
    hi = q + (q * n != nt ? 1 : 0);
    return n;
}

/* Parts: the cuts of a request of nt tiles whose tiles sit at [a, a + nt)
 * on the cost line are the multiples of share inside, but a first or last
 * one closer than min_tiles to the request's edge (share >= min_tiles, so
 * no two are closer).  Cuts k1..k2, as multiples of share; k2 < k1: none. */
MLA_DEV void part_cuts(long long a, int nt, long long share, int min_tiles, long long &k1,
                       long long &k2)
{
    k1 = a / share + 1;
    k2 = (a + nt - 1) / share;
    if (k1 <= k2 && k1 * share - a < min_tiles)
        k1++;
    if (k1 <= k2 && a + nt - k2 * share < min_tiles)
        k2--;
}

/* Calls f(t0, t1, i) for each piece of a request of nt > 0 tiles whose
 * cost line starts at c0 (its fixed cost first); returns the count. */
template <class F>
MLA_DEV int cut(const Rule &rule, long long c0, int nt, int cost, int min_tiles, F &&f)
{
    if (rule.parts) {
        const long long a = c0 + cost;
        long long k1, k2;
        part_cuts(a, nt, rule.share, min_tiles, k1, k2);
        int prev = 0, i = 0;
        for (long long k = k1; k <= k2; k++) {
            const int t = (int)(k * rule.share - a);
            f(prev, t, i++);
            prev = t;
        }
        f(prev, nt, i++);
        return i;
    }
    const int n = pieces_of(nt, rule.c, min_tiles), q = nt / n, rem = nt - q * n;
    for (int i = 0, t0 = 0; i < n; i++) {
        const int len = q + (i < rem); /* the first nt % n are a tile longer */
        f(t0, t0 + len, i);
        t0 += len;
    }
    return n;
}

/* Larger pieces in lower buckets (dispatched first); scale = kBuckets /
 * (largest piece + 1).  (A 64-bit division here, per piece and serial in
 * the thread of a long request, made the kernel take 20 us at b1.) */
MLA_DEV int bucket(int tiles, float scale)
{
    const int k = (int)((float)tiles * scale);
    return kBuckets - 1 - (k < kBuckets - 1 ? k : kBuckets - 1);
}

MLA_DEV float bucket_scale(int maxp)
{
    return (float)kBuckets / ((float)maxp + 1.0f);
}

/* Piece i (0 <= i < n) of the n pieces cut() makes of a request of nt
 * tiles, in closed form: tiles [t0, t1).  Parts: a = c0 + cost, where its
 * tiles start on the cost line, and k1 the first cut of part_cuts; piece
 * i ends at cut k1 + i, the last at nt. */
MLA_DEV void piece_at(const Rule &rule, long long a, long long k1, int nt, int n, int i, int &t0,
                      int &t1)
{
    if (rule.parts) {
        t0 = i == 0 ? 0 : (int)((k1 + i - 1) * rule.share - a);
        t1 = i == n - 1 ? nt : (int)((k1 + i) * rule.share - a);
        return;
    }
    const int q = nt / n, rem = nt - q * n; /* the first nt % n are a tile longer */
    t0 = i * q + min(i, rem);
    t1 = t0 + q + (i < rem ? 1 : 0);
}

/* Pieces of a request under the rule, without walking them; k1: the
 * first cut of part_cuts (parts only), for piece_at. */
MLA_DEV int count_pieces(const Rule &rule, long long c0, int nt, int cost, int min_tiles,
                         long long &k1)
{
    k1 = 0;
    if (!rule.parts)
        return pieces_of(nt, rule.c, min_tiles);
    long long k2;
    part_cuts(c0 + cost, nt, rule.share, min_tiles, k1, k2);
    return k2 >= k1 ? (int)(k2 - k1) + 2 : 1;
}

MLA_DEV int count_pieces(const Rule &rule, long long c0, int nt, int cost, int min_tiles)
{
    long long k1;
    return count_pieces(rule, c0, nt, cost, min_tiles, k1);
}

/* Equal-split candidate r's piece size: the step's tiles over r + 1
 * waves of slots, never under min_piece_tiles. */
MLA_DEV float candidate_c(const mla_decode_params &p, long long tiles, int r)
{
    const float c = (float)tiles / (float)((long long)(r + 1) * p.parts);
    return c > (float)p.min_piece_tiles ? c : (float)p.min_piece_tiles;
}

/* The equal-split candidates: piece sizes c of about the step's tiles
 * over r + 1 waves of slots (never under min_piece_tiles), and their
 * statistics, empty. */
MLA_DEV void candidates(const mla_decode_params &p, long long tiles, float (&cr)[kRounds],
                        Stats &s)
{
#pragma unroll
    for (int r = 0; r < kRounds; r++) {
        cr[r] = candidate_c(p, tiles, r);
        s.pieces[r] = s.split[r] = 0;
        s.maxp[r] = 0;
        s.minp[r] = 0x7fffffff;
    }
}

/* Adds a request of nt > 0 tiles to the candidates' statistics. */
MLA_DEV void add_request(Stats &s, int nt, const float (&cr)[kRounds], int min_tiles)
{
#pragma unroll
    for (int r = 0; r < kRounds; r++) {
        int lo, hi;
        const int n = equal_split(nt, cr[r], min_tiles, lo, hi);
        s.pieces[r] += n;
        s.split[r] += n > 1 ? n : 0;
        s.maxp[r] = max(s.maxp[r], hi);
        s.minp[r] = min(s.minp[r], lo);
    }
}

/* The parts rule: its share, and its estimate (best) and largest piece. */
MLA_DEV Rule parts_rule(const mla_decode_params &p, long long cost_total, float &best, int &maxp)
{
    Rule rule;
    rule.parts = true;
    rule.c = 0.0f;
    rule.share = (cost_total + p.parts - 1) / p.parts;
    if (rule.share < p.min_piece_tiles)
        rule.share = p.min_piece_tiles;
    best = (float)(rule.share + 2 * p.piece_cost);
    maxp = (int)(rule.share < 0x7fffffff ? rule.share : 0x7fffffff);
    return rule;
}

/* An equal-split candidate's estimate from its statistics over the step's
 * requests, or -1 where its pieces or partial slots do not fit, or its
 * pieces are of unequal size (lengths that vary defeat the estimate:
 * greedy rounds then end unevenly; minp is INT_MAX when every request is
 * empty). */
MLA_DEV float equal_estimate(const mla_decode_params &p, long long pieces, long long split, int maxp,
                             int minp, long long tiles)
{
    if (pieces > p.max_pieces || split > p.partial_slots)
        return -1.0f;
    if (maxp > (long long)minp + max(2, minp / 8))
        return -1.0f;
    const int cost = p.piece_cost;
    /* (pieces <= max_pieces, an int: a 32-bit division) */
    const float rounds = (float)(((int)pieces + p.parts - 1) / p.parts);
    float est = (float)(maxp + cost);
    est = fmaxf(est, (float)(tiles + cost * pieces) / (float)p.parts);
    return fmaxf(est, rounds * ((float)minp + (float)cost));
}

/* The candidate (estimate est, piece size c) replaces the rule if its
 * estimate is no longer: a tie goes to the later candidate, an equal
 * split over the parts rule and, of the equal splits (tried from one wave
 * to kRounds), the one over more waves (more pieces; the rule as
 * measured). */
MLA_DEV bool prefer(Rule &rule, float &best, int &maxp, float est, float c, int cmaxp)
{
    if (!(est >= 0.0f && est <= best))
        return false;
    best = est;
    rule.parts = false;
    rule.c = c;
    maxp = cmaxp;
    return true;
}

/*
 * The rule whose estimated greedy schedule on p.parts slots is shortest,
 * from the candidates' statistics t over the step's requests; maxp_out:
 * its largest piece, for the buckets.  Equal splits over r waves, where
 * they make pieces of about one size: the largest piece, the work spread
 * evenly, whole rounds of the smallest pieces; parts: a share and about
 * two pieces' fixed cost a slot.  Parts always fit the grid and the
 * partial slots (at most batch + parts - 1 pieces, 2 (parts - 1) split);
 * an equal split only where it does.  (A greedy simulation of FlashMLA's
 * benchmark lengths at 128 requests: equal splits 292 tile-times, parts
 * 267, 245 ideal.)
 */
MLA_DEV Rule choose_rule(const mla_decode_params &p, const Stats &t, long long tiles,
                         long long cost_total, const float (&cr)[kRounds], int &maxp_out)
{
    float best;
    Rule rule = parts_rule(p, cost_total, best, maxp_out);
    for (int r = 0; r < kRounds; r++)
        prefer(rule, best, maxp_out, equal_estimate(p, t.pieces[r], t.split[r], t.maxp[r], t.minp[r], tiles),
               cr[r], t.maxp[r]);
    return rule;
}

} /* namespace sched */
} /* namespace mla */

#endif /* MLA_SCHEDULE_MODEL_CUH */
