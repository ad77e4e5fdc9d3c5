"""tools/cluster_pair_model.py — a protocol model of the 2-CTA pair-cluster GEMM1
(gemm1_wgmma128_kernel<..., CLUSTER>, FP8MOE_CUDA_GEMM_FALLBACK "e"): mbarriers with phases and transaction bytes,
the 4-stage ring, multicast TMA landing asynchronously in both CTAs, per-thread local + per-warp peer empty
arrivals, claimed units handed rank 0 -> rank 1 through one slot with a full/empty barrier pair, end_claims, shadow
units, single pairs (warpgroup 1 passes). Random interleavings; checks: no deadlock, every item computed exactly
once, no TMA lands in a stage a consumer of that CTA has not released, every consumer reads the data of its own
unit and stage. Run: python3 tools/cluster_pair_model.py [N] (docs/GPU.md "2-CTA pair clusters")."""
import random
import sys

STAGES = 4
TX = 16 * 1024


class MBar:
    def __init__(self, count):
        self.count, self.pending, self.tx, self.phase = count, count, 0, 0

    def _maybe_complete(self):
        if self.pending == 0 and self.tx == 0:
            self.phase += 1
            self.pending = self.count

    def arrive(self, n=1):
        assert self.pending >= n, "too many arrivals in a phase"
        self.pending -= n
        self._maybe_complete()

    def expect_tx_arrive(self, b):
        self.tx += b
        self.arrive(1)

    def complete_tx(self, b):
        self.tx -= b
        self._maybe_complete()

    def done(self, parity):  # try_wait.parity: the phase with this parity has completed
        return (self.phase & 1) != parity


class Cta:
    def __init__(self, rank):
        self.rank = rank
        # full: 1 (thread 0's expect_tx) + 1 (the gathering threads, one aggregated arrival)
        self.full = [MBar(2) for _ in range(STAGES)]
        # empty: 256 local consumer threads (two warpgroups x 128) + 8 peer warps (two warpgroups x 4)
        self.empty = [MBar(264) for _ in range(STAGES)]
        self.stage_item = [None] * STAGES
        self.data = [dict() for _ in range(STAGES)]  # box -> (unit, kb) landed
        self.released = [[0, 0] for _ in range(STAGES)]  # uses released by wg0 / wg1
        self.claim_full, self.claim_empty = MBar(1), MBar(1)
        self.peer_claim = None


def run(seed, tiles_per_expert, col_blocks, kblocks, grid_clusters, claimed, group):
    rnd = random.Random(seed)
    # pair list: per expert ceil(n/2) pairs; pair = (expert, two)
    pairs = []
    for e, n in enumerate(tiles_per_expert):
        for p in range((n + 1) // 2):
            pairs.append((e, 2 * p + 1 < n))
    P = len(pairs)
    items = P * col_blocks
    units = (items + 1) // 2

    def item_of(w):  # the grouped order over pairs (sm90_items.h)
        per = group * col_blocks
        g, r = divmod(w, per)
        first = g * group
        ing = min(P - first, group)
        return first + r % ing, r // ing

    def shares(u):
        if 2 * u + 1 >= items:
            return True
        a, b = item_of(2 * u), item_of(2 * u + 1)
        return a[1] == b[1] and pairs[a[0]][0] == pairs[b[0]][0]

    ctas = [Cta(0), Cta(1)]
    counter = [0]
    computed = []
    pending_tma = []  # (dest cta, stage, box, (unit, kb), use)
    cluster_barrier = [0]

    def producer(c):
        me, peer = ctas[c], ctas[1 - c]
        w, k, it = cid, 0, 0  # the cluster's first unit (the first wave asks no counter)
        while True:
            if w >= units:
                if claimed:  # end_claims
                    s = it % STAGES
                    yield lambda: me.empty[s].done(((it // STAGES) & 1) ^ 1)
                    me.stage_item[s] = -1
                    me.full[s].arrive(2)
                break
            nxt = 0
            if claimed and me.rank == 0:
                nxt = grid_clusters + counter[0]
                counter[0] += 1
            sh = shares(w)
            wi = 2 * w + me.rank if 2 * w + me.rank < items else 2 * w
            for kb in range(kblocks):
                s = it % STAGES
                yield (lambda s=s, it=it: me.empty[s].done(((it // STAGES) & 1) ^ 1))
                use = it // STAGES
                if kb == 0:
                    me.stage_item[s] = w if claimed else None
                me.full[s].expect_tx_arrive(2 * TX)
                if sh:
                    for d in (0, 1):
                        pending_tma.append((d, s, me.rank, (w, kb), use))
                else:
                    pending_tma.append((c, s, 0, (w, kb), use))
                    pending_tma.append((c, s, 1, (w, kb), use))
                me.full[s].arrive(1)  # the gathering threads (their copies are the CTA's own)
                me.data[s][("A", use)] = (wi, kb)
                it += 1
            if claimed:
                if me.rank == 0:
                    yield lambda k=k: me.claim_empty.done((k & 1) ^ 1)
                    peer.peer_claim = nxt
                    peer.claim_full.arrive()
                else:
                    yield lambda k=k: me.claim_full.done(k & 1)
                    nxt = me.peer_claim
                    peer.claim_empty.arrive()
                w = nxt
            else:
                w += grid_clusters
            k += 1
        cluster_barrier[0] += 1
        yield lambda: cluster_barrier[0] == 6
        yield None

    def consumer(c, wg):
        me, peer = ctas[c], ctas[1 - c]
        it = 0
        ws = cid
        while True:
            if not claimed and ws >= units:
                break
            w = ws
            if claimed:
                s = it % STAGES
                yield (lambda s=s, it=it: me.full[s].done((it // STAGES) & 1))
                w = me.stage_item[s]
                if w < 0:
                    break
            wi = 2 * w + me.rank
            compute = True
            if wi >= items:
                compute = False  # the shadow: both warpgroups pass
            else:
                pr, cb = item_of(wi)
                if wg == 1 and not pairs[pr][1]:
                    compute = False
            for kb in range(kblocks):
                s = it % STAGES
                use = it // STAGES
                yield (lambda s=s, it=it: me.full[s].done((it // STAGES) & 1))
                got = {b: me.data[s].get((b, use)) for b in (0, 1)}
                for b in (0, 1):
                    assert got[b] is not None and got[b][1] == kb and got[b][0] == w, (c, wg, s, use, got, w, kb)
                if compute:
                    assert me.data[s][("A", use)] == (wi, kb)
                me.released[s][wg] = use + 1
                me.empty[s].arrive(128)
                peer.empty[s].arrive(4)
                it += 1
            if compute and wg == 0:
                computed.append(wi)
            if not claimed:
                ws += grid_clusters
        cluster_barrier[0] += 1
        yield lambda: cluster_barrier[0] == 6
        yield None

    for cid in range(grid_clusters):
        ctas[:] = [Cta(0), Cta(1)]
        cluster_barrier[0] = 0
        actors = [producer(0), producer(1), consumer(0, 0), consumer(0, 1), consumer(1, 0), consumer(1, 1)]
        waits = [None] * len(actors)
        for i, a in enumerate(actors):
            waits[i] = next(a)
        live = set(range(len(actors)))
        while live or pending_tma:
            ready = [i for i in live if waits[i] is None or waits[i]()]
            choices = ready + (["tma"] if pending_tma else [])
            if not choices:
                raise RuntimeError("deadlock: cluster %d, waits %s" % (cid, [i for i in live]))
            ch = rnd.choice(choices)
            if ch == "tma":
                j = rnd.randrange(len(pending_tma))
                d, s, box, tag, use = pending_tma.pop(j)
                dst = ctas[d]
                # the stage's previous use must be released by both warpgroups of the destination
                assert dst.released[s][0] >= use and dst.released[s][1] >= use, ("TMA over unreleased stage", d, s, use)
                dst.data[s][(box, use)] = tag
                dst.full[s].complete_tx(TX)
                continue
            try:
                waits[ch] = next(actors[ch])
                if waits[ch] is None:
                    live.discard(ch)
            except StopIteration:
                live.discard(ch)
    # every item once: all clusters run in this model one after another, sharing the counter (claims beyond the
    # first wave go to whichever cluster asks: here each cluster runs to the end alone, which is a legal schedule)
    return sorted(computed), items


def check(seed):
    rnd = random.Random(seed)
    E = rnd.randint(1, 6)
    tiles = [rnd.randint(0, 7) for _ in range(E)]
    if sum(tiles) == 0:
        tiles[0] = 1
    col_blocks = rnd.randint(1, 4)
    kblocks = rnd.randint(1, 7)
    clusters = rnd.randint(1, 3)
    claimed = rnd.random() < 0.7
    group = rnd.choice([2, 4, 8])
    got, items = run(seed, tiles, col_blocks, kblocks, clusters, claimed, group)
    assert got == list(range(items)), ("items", got, items)
    return items


if __name__ == "__main__":
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 2000
    tot = 0
    for sd in range(n):
        tot += check(sd)
    print("ok: %d random configurations, %d items" % (n, tot))
