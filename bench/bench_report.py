#!/usr/bin/env python3
"""fp8moe-bench reports (docs/PERFORMANCE.md): check a JSON report against the schema, draw the roofline
chart, or print its Markdown table again.

  bench_report.py validate REPORT.json        exit 1 and name the field when the report is malformed
  bench_report.py plot REPORT.json OUT.png    fraction of roofline vs T, one line per shape (matplotlib)
  bench_report.py compare A.json B.json [MAX] median spread per point of two runs; exit 1 when a
                                              memory-bound point differs by more than MAX (default 0.03)
  bench_report.py selftest REPORT.json        validate, then prove the validator rejects broken copies
"""
import copy
import json
import sys

SCHEMA = "fp8moe-bench/1"
NUM = (int, float)
OPT_NUM = (int, float, type(None))  # JSON has no NaN: unmeasured numbers are null

TOP = {"schema": str, "date": str, "commit": str, "command": str, "elapsed_s": OPT_NUM, "gpu": dict,
       "rooflines": dict, "points": list}
GPU = {"name": str, "driver": str, "clocks": str, "sm_count": int, "l2_mib": OPT_NUM}
ROOF = {"measured": bool, "read_gbs": OPT_NUM, "read_bytes": OPT_NUM, "copy_gbs": OPT_NUM, "dense_8192": dict,
        "gemm_note": str, "gemm1": list}
GEMM = {"m": int, "n": int, "k": int, "tensor_tflops": OPT_NUM, "block_tflops": OPT_NUM}
POINT = {"shape": str, "format": str, "routing": str, "T": int, "E": int, "K": int, "H": int, "I": int,
         "status": str, "note": str, "median_us": OPT_NUM, "p90_us": OPT_NUM, "route_permute_us": OPT_NUM,
         "tflops": OPT_NUM, "weight_gbs": OPT_NUM, "weight_bytes": OPT_NUM, "bytes": OPT_NUM, "flops": OPT_NUM,
         "memory_floor_us": OPT_NUM, "compute_floor_us": OPT_NUM, "floor_us": OPT_NUM,
         "fraction_of_roofline": OPT_NUM, "peer_us": OPT_NUM, "rel_err": OPT_NUM, "bound": str,
         "experts_hit": int, "slots": int, "check_tokens": int, "ids_mismatch": int, "replay_us": list,
         "stages": list}
STATUSES = {"ok", "check-failed", "error", "skipped"}
# Paired A/B runs (--ab-library, --ab-env): "ab" at the top (null, or absent in older reports, without a B) and
# these keys in every point when it is an object.
AB = {"library": str, "env": (str, type(None))}
AB_POINT = {"ab_median_us": OPT_NUM, "ab_ratio": OPT_NUM, "ab_wins": int, "ab_rel_err": OPT_NUM,
            "ab_replay_us": list}
# B's routing + permutation prefix timed in pairs with A's (reports since the paired prefix; absent before it).
AB_ROUTE = {"ab_route_us": OPT_NUM, "ab_route_ratio": OPT_NUM, "ab_route_wins": int}
# The SM clock and board power over a point's timed replays (reports since the NVML sampling; absent before it).
CLOCK = {"samples": int, "window_ms": OPT_NUM, "sm_mhz_median": OPT_NUM, "sm_mhz_min": OPT_NUM, "sm_mhz_max": OPT_NUM,
         "power_w": OPT_NUM, "power_cap_share": OPT_NUM, "slowdown_share": OPT_NUM}
GEMM_CLOCK = {"tensor_sm_mhz": OPT_NUM, "block_sm_mhz": OPT_NUM}


class SchemaError(Exception):
    pass


def check_fields(obj, spec, where):
    if not isinstance(obj, dict):
        raise SchemaError(f"{where}: expected an object")
    for key, kind in spec.items():
        if key not in obj:
            raise SchemaError(f"{where}.{key}: missing")
        value = obj[key]
        if isinstance(value, bool) and kind is not bool and bool not in (kind if isinstance(kind, tuple) else (kind,)):
            raise SchemaError(f"{where}.{key}: boolean where a number is expected")
        if not isinstance(value, kind):
            raise SchemaError(f"{where}.{key}: {type(value).__name__} is not {kind}")


def validate(doc):
    check_fields(doc, TOP, "report")
    if doc["schema"] != SCHEMA:
        raise SchemaError(f"report.schema: {doc['schema']!r}, expected {SCHEMA!r}")
    check_fields(doc["gpu"], GPU, "gpu")
    check_fields(doc["rooflines"], ROOF, "rooflines")
    check_fields(doc["rooflines"]["dense_8192"], GEMM, "rooflines.dense_8192")
    if "tensor_sm_mhz" in doc["rooflines"]["dense_8192"]:
        check_fields(doc["rooflines"]["dense_8192"], GEMM_CLOCK, "rooflines.dense_8192")
    if doc.get("ab") is not None:
        check_fields(doc["ab"], AB, "ab")
    for i, g in enumerate(doc["rooflines"]["gemm1"]):
        check_fields(g, {"shape": str, "format": str, "rate": dict}, f"rooflines.gemm1[{i}]")
        check_fields(g["rate"], GEMM, f"rooflines.gemm1[{i}].rate")
    for i, p in enumerate(doc["points"]):
        where = f"points[{i}]"
        check_fields(p, POINT, where)
        if p["status"] not in STATUSES:
            raise SchemaError(f"{where}.status: {p['status']!r}")
        if p["status"] == "ok":
            if not p["replay_us"] or not all(isinstance(x, NUM) and x > 0 for x in p["replay_us"]):
                raise SchemaError(f"{where}.replay_us: an ok point needs positive replay times")
            if not isinstance(p["median_us"], NUM) or p["median_us"] <= 0:
                raise SchemaError(f"{where}.median_us: an ok point needs a positive median")
        for j, s in enumerate(p["stages"]):
            check_fields(s, {"name": str, "us": OPT_NUM}, f"{where}.stages[{j}]")
        if "clock" in p:
            validate_clock(p["clock"], f"{where}.clock")
        if doc.get("ab") is not None:
            validate_ab_point(p, where)


def validate_clock(c, where):
    check_fields(c, CLOCK, where)
    if c["samples"] < 0:
        raise SchemaError(f"{where}.samples: {c['samples']}")
    if c["samples"] > 0 and not all(isinstance(c[k], NUM) and c[k] > 0 for k in ("sm_mhz_median", "sm_mhz_min",
                                                                               "sm_mhz_max")):
        raise SchemaError(f"{where}: a sampled window needs positive SM clocks")
    for key in ("power_cap_share", "slowdown_share"):
        if c[key] is not None and not 0 <= c[key] <= 1:
            raise SchemaError(f"{where}.{key}: {c[key]} is not a share")


def validate_ab_point(p, where):
    check_fields(p, AB_POINT, where)
    if p["status"] == "ok":
        b = p["ab_replay_us"]
        if len(b) != len(p["replay_us"]) or not all(isinstance(x, NUM) and x > 0 for x in b):
            raise SchemaError(f"{where}.ab_replay_us: an ok A/B point needs one positive B time per A replay")
        for key in ("ab_median_us", "ab_ratio"):
            if not isinstance(p[key], NUM) or p[key] <= 0:
                raise SchemaError(f"{where}.{key}: an ok A/B point needs a positive value")
        if not 0 <= p["ab_wins"] <= len(b):
            raise SchemaError(f"{where}.ab_wins: {p['ab_wins']} of {len(b)} pairs")
    if "ab_route_ratio" in p:
        check_fields(p, AB_ROUTE, where)
        for key in ("ab_route_us", "ab_route_ratio"):
            if p[key] is not None and (not isinstance(p[key], NUM) or p[key] <= 0):
                raise SchemaError(f"{where}.{key}: a paired prefix needs a positive value")
        if not 0 <= p["ab_route_wins"] <= len(p["replay_us"]):
            raise SchemaError(f"{where}.ab_route_wins: {p['ab_route_wins']} of {len(p['replay_us'])} pairs")


def load(path):
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def plot(doc, out):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    routings = sorted({p["routing"] for p in doc["points"]})
    fig, axes = plt.subplots(1, len(routings), figsize=(7 * len(routings), 5), squeeze=False)
    for ax, routing in zip(axes[0], routings):
        series = {}
        for p in doc["points"]:
            if p["routing"] == routing and p["status"] == "ok" and p["fraction_of_roofline"] is not None:
                series.setdefault(f"{p['shape']} {p['format']}", []).append((p["T"], p["fraction_of_roofline"]))
        for label, pts in sorted(series.items()):
            pts.sort()
            ax.plot([t for t, _ in pts], [f for _, f in pts], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_ylim(0, 1.05)
        ax.axhline(1.0, color="grey", linewidth=0.8)
        ax.set_xlabel("tokens T")
        ax.set_ylabel("fraction of roofline (floor / median time)")
        ax.set_title(f"{routing} routing")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.suptitle(f"fp8moe-bench {doc['commit']} on {doc['gpu']['name']}, {doc['date']}")
    fig.tight_layout()
    fig.savefig(out, dpi=120)


def compare(a, b, max_spread):
    """Relative spread |a-b|/min(a,b) of the medians of the points both runs measured."""
    key = lambda p: (p["shape"], p["format"], p["routing"], p["T"])
    ok = lambda p: p["status"] == "ok" and p["median_us"]
    pb = {key(p): p for p in b["points"] if ok(p)}
    worst = {"memory": (0.0, None), "compute": (0.0, None)}
    rows = 0
    for p in a["points"]:
        q = pb.get(key(p))
        if not ok(p) or q is None:
            continue
        rows += 1
        spread = abs(p["median_us"] - q["median_us"]) / min(p["median_us"], q["median_us"])
        if spread > worst[p["bound"]][0]:
            worst[p["bound"]] = (spread, key(p))
    print(f"compared {rows} points ({a['commit']} at {a['date']} vs {b['commit']} at {b['date']})")
    for bound, (spread, where) in worst.items():
        print(f"  {bound}-bound: largest median spread {100 * spread:.2f} %" + (f" at {where}" if where else ""))
    return 1 if worst["memory"][0] > max_spread else 0


def with_ab(doc):
    """A copy of a report as an A/B run would write it: B 2 % faster than A in every pair."""
    d = copy.deepcopy(doc)
    d["ab"] = {"library": "/b/libfp8moe.so.1", "env": None}
    for p in d["points"]:
        b = [0.98 * x for x in p["replay_us"] if isinstance(x, NUM)]
        timed = p["status"] == "ok" and b
        p.update(ab_median_us=0.98 * p["median_us"] if timed else None, ab_ratio=0.98 if timed else None,
                 ab_wins=len(b), ab_rel_err=p["rel_err"], ab_replay_us=b)
        route = timed and p["route_permute_us"] is not None
        p.update(ab_route_us=0.9 * p["route_permute_us"] if route else None, ab_route_ratio=0.9 if route else None,
                 ab_route_wins=len(b) if route else 0)
    return d


def selftest(path):
    doc = load(path)
    validate(doc)
    ab = with_ab(doc)
    validate(ab)
    broken = []
    d = copy.deepcopy(ab); d["ab"]["env"] = 1; broken.append(("ab.env", d))
    d = copy.deepcopy(ab); del d["points"][0]["ab_ratio"]; broken.append(("A/B point without ab_ratio", d))
    d = copy.deepcopy(ab); d["points"][0]["ab_replay_us"] = []; broken.append(("ok A/B point without B replays", d))
    d = copy.deepcopy(ab); del d["points"][0]["ab_route_wins"]; broken.append(("paired prefix without its wins", d))
    d = copy.deepcopy(ab); d["points"][0]["ab_route_ratio"] = -1.0; broken.append(("negative prefix ratio", d))
    d = copy.deepcopy(doc); d["schema"] = "other/9"; broken.append(("schema tag", d))
    d = copy.deepcopy(doc); del d["points"][0]["median_us"]; broken.append(("missing field", d))
    d = copy.deepcopy(doc); d["points"][0]["T"] = "1"; broken.append(("string for int", d))
    d = copy.deepcopy(doc); d["points"][0]["replay_us"] = []; broken.append(("ok point without replays", d))
    d = copy.deepcopy(doc); d["points"][0]["status"] = "great"; broken.append(("unknown status", d))
    d = copy.deepcopy(doc); d["rooflines"]["measured"] = 1; broken.append(("number for bool", d))
    d = copy.deepcopy(doc); del d["points"][0]["clock"]["sm_mhz_median"]; broken.append(("clock without its median", d))
    d = copy.deepcopy(doc); d["points"][0]["clock"]["sm_mhz_min"] = None; broken.append(("sampled clock, no min", d))
    d = copy.deepcopy(doc); d["points"][0]["clock"]["power_cap_share"] = 90; broken.append(("share above one", d))
    d = copy.deepcopy(doc); d["rooflines"]["dense_8192"]["block_sm_mhz"] = "x"; broken.append(("ceiling's clock", d))
    failures = 0
    for what, d in broken:
        try:
            validate(d)
            print(f"selftest: the validator accepted a report with a broken {what}", file=sys.stderr)
            failures += 1
        except SchemaError:
            pass
    print(f"bench_report selftest: {1 + len(broken) - failures} passed, {failures} failed")
    return 1 if failures else 0


def main(argv):
    if len(argv) < 3 or argv[1] not in ("validate", "plot", "selftest", "compare"):
        print(__doc__, file=sys.stderr)
        return 2
    if argv[1] == "selftest":
        return selftest(argv[2])
    if argv[1] == "compare":
        if len(argv) < 4:
            print(__doc__, file=sys.stderr)
            return 2
        docs = [load(argv[2]), load(argv[3])]
        for d in docs:
            validate(d)
        return compare(docs[0], docs[1], float(argv[4]) if len(argv) > 4 else 0.03)
    doc = load(argv[2])
    try:
        validate(doc)
    except SchemaError as e:
        print(f"{argv[2]}: {e}", file=sys.stderr)
        return 1
    if argv[1] == "plot":
        if len(argv) < 4:
            print(__doc__, file=sys.stderr)
            return 2
        plot(doc, argv[3])
        print(f"wrote {argv[3]}")
    else:
        print(f"{argv[2]}: valid {SCHEMA} report, {len(doc['points'])} points")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
