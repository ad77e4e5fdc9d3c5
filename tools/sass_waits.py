#!/usr/bin/env python3
"""sass_waits.py — the scheduling control bits of sm_90 SASS, read from `nvdisasm -hex` output, and the waits
that sit inside a wgmma issue sequence (docs/GPU.md "Next" 9: a stage's third and fourth QGMMA waited for a
global load because ptxas gave it the scoreboard that an older, long-landed value was read through).

Every sm_70+ instruction is 128 bits; the upper 64-bit word carries, from bit 41: the stall count (4 bits), yield
(1), the write barrier the instruction sets when its result is ready (3 bits, 7 = none), the read barrier it sets
when its sources are read (3 bits, 7 = none), the mask of barriers it waits for (6 bits) and the operand-reuse flags
(4 bits). A variable-latency instruction (LDG, LDS, SHFL, R2UR, SYNCS, ...) sets a barrier; its consumers wait for
it. ptxas has six, so it shares them, and an instruction waiting for an old value also waits for every newer
producer on the same barrier.

  python3 tools/sass_waits.py DUMP [--function SUBSTR] [--around OPCODE] [--all]
  DUMP: `nvdisasm -hex -c file.cubin` output (cuobjdump -xelf all file.o extracts the cubin; nvdisasm and
  cuobjdump come from PyPI's nvidia-cuda-nvdisasm and nvidia-cuda-cuobjdump).

Without --all it prints, per matching function, the instructions between the first and last OPCODE (default
QGMMA) that set or wait for a barrier, and then each "issue gap": an instruction between two OPCODEs of one group
that waits for a barrier last set by a global or local load (LDG, LDL) — a memory latency on the issue path.
Exit status 0; 2 on usage errors.
"""
import argparse
import re
import sys

INSN = re.compile(r"/\*([0-9a-f]{4,})\*/\s+(.*?)\s*;\s*/\* (0x[0-9a-f]{16}) \*/")
HEX = re.compile(r"^\s*/\* (0x[0-9a-f]{16}) \*/\s*$")
LONG_LOADS = ("LDG", "LDL")


def control(hi):
    """The control fields of an instruction's upper 64-bit word."""
    c = hi >> 41
    bar = lambda v: None if v == 7 else v
    return {
        "stall": c & 0xF,
        "yield": (c >> 4) & 1,
        "wbar": bar((c >> 5) & 7),
        "rbar": bar((c >> 8) & 7),
        "wait": [b for b in range(6) if (c >> 11) & (1 << b)],
        "reuse": (c >> 17) & 0xF,
    }


def opcode(text):
    """The instruction's opcode without its predicate (`@P0 LDG.E ...` -> `LDG.E`)."""
    words = text.split()
    if words and words[0].startswith("@"):
        words = words[1:]
    return words[0] if words else ""


def functions(lines):
    """(name, [(address, text, control)]) per function of the dump."""
    name, insns, out = None, [], []
    pending = None
    for line in lines:
        if line.startswith(".text."):
            if name is not None:
                out.append((name, insns))
            name, insns, pending = line.rstrip(":\n")[len(".text."):], [], None
            continue
        m = INSN.search(line)
        if m:
            pending = (m.group(1), m.group(2))
            continue
        h = HEX.match(line)
        if h and pending is not None:
            insns.append((pending[0], pending[1], control(int(h.group(1), 16))))
            pending = None
    if name is not None:
        out.append((name, insns))
    return out


def describe(c):
    return "wb=%s rb=%s wait=%s st=%d" % (
        "-" if c["wbar"] is None else c["wbar"], "-" if c["rbar"] is None else c["rbar"],
        "".join(str(b) for b in c["wait"]) or "-", c["stall"])


def marks_of(insns, op):
    """Indices of the instructions whose opcode starts with `op`."""
    return [i for i, x in enumerate(insns) if opcode(x[1]).startswith(op)]


def issue_gaps(insns, op):
    """Instructions between two `op`s (of one group: < 64 apart) that wait for a barrier whose latest setter is a
    global or local load."""
    last_setter = {}
    gaps = []
    marks = marks_of(insns, op)
    inside = {i for a, b in zip(marks, marks[1:]) if b - a < 64 for i in range(a + 1, b)}
    for i, (addr, text, c) in enumerate(insns):
        for b in c["wait"]:
            setter = last_setter.get(b)
            if i in inside and setter is not None and opcode(setter[1]).startswith(LONG_LOADS):
                gaps.append((addr, text, b, setter))
        if c["wbar"] is not None:
            last_setter[c["wbar"]] = (addr, text)
    return gaps


def main(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("dump")
    ap.add_argument("--function", default="", help="substring of the (mangled) function name")
    ap.add_argument("--around", default="QGMMA", help="opcode whose first..last occurrence bounds the listing")
    ap.add_argument("--all", action="store_true", help="every instruction of the function, with its control bits")
    args = ap.parse_args(argv)
    try:
        with open(args.dump) as f:
            lines = f.readlines()
    except OSError as e:
        print("sass_waits: %s" % e, file=sys.stderr)
        return 2
    for name, insns in functions(lines):
        if args.function not in name:
            continue
        marks = marks_of(insns, args.around)
        print("== %s: %d instructions, %d %s" % (name, len(insns), len(marks), args.around))
        if args.all or marks:
            lo, hi = (0, len(insns)) if args.all else (marks[0], marks[-1] + 1)
            for addr, text, c in insns[lo:hi]:
                if args.all or c["wait"] or c["wbar"] is not None or opcode(text).startswith(args.around):
                    print("  %s %-26s %s" % (addr, describe(c), text))
        for addr, text, b, setter in issue_gaps(insns, args.around):
            print("  issue gap: %s %s waits for barrier %d, last set by %s %s" % (addr, text, b, setter[0], setter[1]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
