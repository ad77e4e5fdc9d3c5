#!/usr/bin/env python3
"""ab_orders.py — one table from the two orders of a paired A/B (docs/PERFORMANCE.md "Protocol"): fp8moe-bench
--json of order 1 (A = the base, B = the change: --library BASE --ab-library NEW, or --ab-env LETTERS for a switch)
and of order 2 (A = the change, B = the base). Per point it prints new/base as each order measured it (order 2's
ratio inverted), their geometric mean, and in how many pairs the change was faster in each order, so a claim reads
"0.975 / 0.969, 12 of 12 and 12 of 12" instead of two tables read by hand.
  python3 tools/ab_orders.py order1.json order2.json [--md]"""
import argparse
import json
import math
import sys


def points(path):
    with open(path) as f:
        data = json.load(f)
    return {(p["shape"], p["format"], p["routing"], p["T"]): p for p in data["points"]}


def pairs(p):
    return len(p.get("ab_replay_us") or p.get("replay_us") or [])


def rows(order1, order2):
    """(key, base µs, new µs, ratio order 1, ratio order 2, mean, new faster in order 1, in order 2, pairs) per point
    measured in both orders with a ratio, in order 1's order."""
    out = []
    for key, p1 in order1.items():
        p2 = order2.get(key)
        if p2 is None or not p1.get("ab_ratio") or not p2.get("ab_ratio"):
            continue
        r1, r2 = p1["ab_ratio"], 1.0 / p2["ab_ratio"]
        n = pairs(p1)
        out.append((key, p1["median_us"], p1["ab_median_us"], r1, r2, math.sqrt(r1 * r2), p1.get("ab_wins", 0),
                    pairs(p2) - p2.get("ab_wins", 0), n))
    return out


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("order1")
    ap.add_argument("order2")
    ap.add_argument("--md", action="store_true", help="a markdown table")
    a = ap.parse_args(argv)
    table = rows(points(a.order1), points(a.order2))
    if not table:
        print("ab_orders: no point with a ratio in both files")
        return 1
    if a.md:
        print("| shape | format | routing | T | base µs | new µs | new/base order 1 | order 2 | mean | new faster |")
        print("|---|---|---|---|---|---|---|---|---|---|")
    for (shape, fmt, routing, t), base, new, r1, r2, mean, w1, w2, n in table:
        if a.md:
            print("| %s | %s | %s | %d | %.1f | %.1f | %.3f | %.3f | %.3f | %d / %d of %d |"
                  % (shape, fmt, routing, t, base, new, r1, r2, mean, w1, w2, n))
        else:
            print("%-16s %-16s %-8s %5d  %9.1f %9.1f  %.3f / %.3f  mean %.3f  faster %d / %d of %d"
                  % (shape, fmt, routing, t, base, new, r1, r2, mean, w1, w2, n))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
