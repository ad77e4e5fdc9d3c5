#!/usr/bin/env python3
"""check_tools.py — the device-side analysis tools on fixtures (no GPU, no CUDA tools): tools/sass_waits.py decodes
the control bits of `nvdisasm -hex` output and finds a wait for a global load between two wgmmas, and
tools/ncu_source_stalls.py summarizes an Nsight Compute source page, and tools/ab_orders.py joins the two orders of
a paired A/B. Exit 0 when every check holds."""
import contextlib
import io
import json
import os
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tools"))
import ab_orders  # noqa: E402
import ncu_source_stalls  # noqa: E402
import sass_waits  # noqa: E402

failures = []


def check(ok, what):
    print("%s: %s" % ("ok" if ok else "FAILED", what))
    if not ok:
        failures.append(what)


def word(stall=1, wbar=7, rbar=7, wait=(), low=0):
    """An instruction's upper 64-bit word with these control fields (bit 41 on: stall, yield, wbar, rbar, wait)."""
    ctl = stall | (wbar << 5) | (rbar << 8) | (sum(1 << b for b in wait) << 11)
    return "0x%016x" % ((ctl << 41) | low)


def dump(insns):
    lines = [".text._Z6kernelv:\n"]
    for i, (text, hi) in enumerate(insns):
        lines.append("        /*%04x*/                   %s ;   /* 0x%016x */\n" % (16 * i, text, 0x1234))
        lines.append("                                                   /* %s */\n" % hi)
    return lines


def gaps(insns):
    (name, parsed), = sass_waits.functions(dump(insns))
    return parsed, sass_waits.issue_gaps(parsed, "QGMMA")


QG = "QGMMA.64x128x32.F32.E4M3.E4M3 R24, gdesc[UR8], R24"
parsed, found = gaps([("LDG.E.CONSTANT R15, desc[UR16][R2.64]", word(wbar=5)),
                      (QG, word()),
                      ("@P4 LDG.E.CONSTANT R178, desc[UR16][R226.64]", word(wbar=5)),
                      (QG, word()),
                      ("FSETP.GTU.AND P3, PT, |R15|, 1.2e+30, PT", word(wait=[5])),
                      (QG, word())])
c = parsed[2][2]
check(c["wbar"] == 5 and c["rbar"] is None and c["wait"] == [] and c["stall"] == 1, "control bits of an LDG decoded")
check(parsed[4][2]["wait"] == [5], "the wait mask decoded")
check(len(found) == 1 and found[0][0] == "0040" and found[0][3][0] == "0020",
      "a wait for a barrier last set by a global load between two QGMMAs is an issue gap")
_, found = gaps([("LDS.64 R178, [R211+0x30040]", word(wbar=1)),
                 (QG, word()),
                 ("FSETP.GTU.AND P3, PT, |R179|, 1.2e+30, PT", word(wait=[1])),
                 (QG, word())])
check(found == [], "a wait for a shared-memory load is not one")
_, found = gaps([("LDG.E R8, desc[UR16][R2.64]", word(wbar=5)),
                 ("FSETP.GTU.AND P3, PT, |R8|, 1.2e+30, PT", word(wait=[5])),
                 (QG, word())])
check(found == [], "nor a wait before the first QGMMA")

header = ["Address", "Source", "Warp Stall Sampling (All Samples)", "Instructions Executed", "stall_long_sb",
          "stall_wait", "stall_long_sb (Not Issued)"]
rows = [["0x10", "LDG.E R1, [R2.64]", "10", "100", "2", "8", "2"],
        ["0x20", "@!P0 BRA 0x10", "90", "100", "80", "10", "80"]]
with tempfile.NamedTemporaryFile("w", suffix=".csv", delete=False) as f:
    f.write('"Kernel Name","k"\n')
    for r in [header] + rows:
        f.write(",".join('"%s"' % v for v in r) + "\n")
out = io.StringIO()
with contextlib.redirect_stdout(out):
    rc = ncu_source_stalls.main([f.name, "--top", "1", "--bin", "2"])
os.unlink(f.name)
text = out.getvalue()
check(rc == 0 and "100 warp samples" in text, "ncu_source_stalls reads the table after the kernel-name row")
check("long_sb                   82.0 %" in text, "stall shares over all samples (Not Issued columns left out)")
check("1  90.0 %" in text and "BRA" in text.split("instructions with the most samples:")[1].split("\n")[1],
      "the instruction with the most samples first")


def bench_json(points):
    f = tempfile.NamedTemporaryFile("w", suffix=".json", delete=False)
    json.dump({"points": points}, f)
    f.close()
    return f.name


def point(t, a_us, b_us, ratio, wins):
    return {"shape": "s", "format": "FP8_BLOCK128", "routing": "uniform", "T": t, "median_us": a_us,
            "ab_median_us": b_us, "ab_ratio": ratio, "ab_wins": wins, "ab_replay_us": [b_us] * 10}


# order 1: A = base, B = new (new 2 % faster, in 9 of 10 pairs); order 2: A = new, B = base (base/new 1.04: new faster
# in 10 − 1 pairs); a point only order 1 measured is left out
one = bench_json([point(512, 100.0, 98.0, 0.98, 9), point(2048, 50.0, 50.0, 1.0, 5)])
two = bench_json([point(512, 96.0, 99.84, 1.04, 1)])
table = ab_orders.rows(ab_orders.points(one), ab_orders.points(two))
os.unlink(one)
os.unlink(two)
check(len(table) == 1 and table[0][0][3] == 512, "ab_orders keeps the points measured in both orders")
(_, base, new, r1, r2, mean, w1, w2, n), = table
check(abs(r1 - 0.98) < 1e-9 and abs(r2 - 1 / 1.04) < 1e-9 and abs(mean - (0.98 / 1.04) ** 0.5) < 1e-9,
      "ab_orders: order 2's ratio inverted, the geometric mean of both")
check((w1, w2, n) == (9, 9, 10), "ab_orders: the change's wins in each order")
print("check_tools: %d failed" % len(failures))
sys.exit(1 if failures else 0)
