#!/usr/bin/env python3
"""ncu_source_stalls.py — where a kernel's warps wait, per SASS instruction, from Nsight Compute's source page
(`tools/gpu-profile.sh` with PROFILE_SOURCE=1 writes it: `ncu -i REPORT --page source --csv --print-source sass`,
the report taken with `--section SourceCounters`). Session 44 read the GEMMs' stalls this way (docs/GPU.md "Next"
8 and 9); tools/sass_waits.py then says which barrier an instruction waited for.

  python3 tools/ncu_source_stalls.py CSV[.xz] [--top N] [--bin B]

Prints the share of all warp samples per stall reason, the N instructions with the most samples (index in the
listing, share, times executed, the instruction, its three largest stall reasons), and the listing in bins of B
instructions with their share, three largest reasons and most frequent opcodes (bins under 0.5 % left out): a
main loop, a producer and an epilogue show up as separate bins. Exit status 0; 2 when the file has no source table.
"""
import argparse
import collections
import csv
import lzma
import sys

from sass_waits import opcode  # the opcode of a SASS line without its predicate (tools/ is this script's path)

SAMPLES = "Warp Stall Sampling (All Samples)"


def read(path):
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt", newline="") as f:
        rows = list(csv.reader(f))
    for i, row in enumerate(rows):  # the header row names the sample column; a kernel-name row may come first
        if SAMPLES in row:
            return row, [dict(zip(row, r)) for r in rows[i + 1:] if len(r) == len(row)]
    return None, []


def num(v):
    try:
        return float(v)
    except (TypeError, ValueError):
        return 0.0


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--bin", type=int, default=100)
    args = ap.parse_args(argv)
    hdr, rows = read(args.csv)
    if hdr is None:
        print("ncu_source_stalls: no '%s' column in %s" % (SAMPLES, args.csv), file=sys.stderr)
        return 2
    reasons = [h for h in hdr if h.startswith("stall_") and "Not Issued" not in h]
    total = sum(num(r[SAMPLES]) for r in rows) or 1.0
    per = collections.Counter()
    for r in rows:
        for s in reasons:
            per[s] += num(r[s])
    print("%d instructions, %d warp samples" % (len(rows), total))
    for s, v in per.most_common(10):
        print("  %-24s %5.1f %%" % (s[len("stall_"):], 100.0 * v / total))

    def top3(rs):
        c = collections.Counter()
        for r in rs:
            for s in reasons:
                c[s[len("stall_"):]] += num(r[s])
        v = sum(c.values()) or 1.0
        return " ".join("%s:%.0f%%" % (k, 100.0 * n / v) for k, n in c.most_common(3) if n > 0)

    print("\ninstructions with the most samples:")
    order = sorted(range(len(rows)), key=lambda i: -num(rows[i][SAMPLES]))[: args.top]
    for i in order:
        r = rows[i]
        print("%6d %5.1f %% ex=%-10s %-62s %s" % (i, 100.0 * num(r[SAMPLES]) / total, r.get("Instructions Executed", ""),
                                                  r["Source"].strip()[:62], top3([r])))
    print("\nbins of %d instructions:" % args.bin)
    for b in range(0, len(rows), args.bin):
        seg = rows[b:b + args.bin]
        v = sum(num(r[SAMPLES]) for r in seg)
        if v / total < 0.005:
            continue
        ops = collections.Counter(opcode(r["Source"]) for r in seg)
        print("%6d-%-6d %5.1f %% %-40s %s" % (b, b + len(seg) - 1, 100.0 * v / total, top3(seg),
                                            " ".join("%s:%d" % kv for kv in ops.most_common(4))))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
