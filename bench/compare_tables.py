#!/usr/bin/env python3
"""compare_tables.py - the tables of bench/compare.sh from the raw outputs it left in --out.

Inputs, per round i and collective c: braid-c-ri.txt and PEER-c-ri.txt (nccl-tests format),
pp-c-ri-{before,after}.txt (bench/probe/pingpong), ceil-SIZE-ri.txt (bench/probe/memceil).
A round of a collective is "near" when both ping-pongs' round trips (their least disturbed
repetition) are below --near-ns, "far" when both are at or above it, "mixed" otherwise.
Ratios are braid busbw / peer busbw per round and size (out of place; computed as peer time /
braid time, the same number with the digits small sizes' busbw lose), then medianed: over
all rounds, the near ones and the far ones. Writes compare-<coll>.txt, compare-summary.txt
and <side>-<coll>-median.txt (benchmark format, for tools/plot-bench); prints the tables.
A collective a peer lacks (PEER-c-lacks.txt, from compare.sh) gets that line instead of rows."""
import argparse
import statistics
from importlib.machinery import SourceFileLoader

pb = SourceFileLoader("plot_bench", "tools/plot-bench").load_module()
NAMES = {"braid": "braid", "ompi": "Open MPI", "mpich": "MPICH", "gloo": "Gloo", "oneccl": "Intel oneCCL"}
MIB = 1 << 20
CLASSES = [("<=4K", 0, 4096), ("4K-1M", 4097, MIB - 1), ("1M-16M", MIB, 16 * MIB - 1),
           (">=16M", 16 * MIB, 1 << 62)]  # (label, smallest size, largest size)


def med(xs):
    return statistics.median(xs) if xs else None


def fmt(x, w, d=2, g=False):
    if x is None:
        return f"{'-':>{w}}"
    return f"{x:{w}.{d}g}" if g else f"{x:{w}.{d}f}"


def rows_of(path):
    """{size: (time_oop_us, busbw_oop)} of one output, or {} when it is missing."""
    try:
        series = pb.parse_rows(path)
    except OSError:
        return {}
    out = {}
    for rows in series.values():  # one series: compare runs one type/op/root
        for r in rows:
            out[r[0]] = (r[1], r[2])
    return out


def wrong_results(path):
    try:
        return any(l.startswith("# Out of bounds") and "FAILED" in l for l in open(path))
    except OSError:
        return False


def probe_value(path, key):
    """The number after KEY in a probe's one line, or None."""
    try:
        words = open(path).read().split()
        return float(words[words.index(key) + 1])
    except (OSError, ValueError, IndexError):
        return None


def gap_threshold(out, colls, rounds, fallback=150.0):
    """--near-ns gap: the geometric middle of the widest gap between the sorted round trips
    of this run, when the values across it differ by 1.8x or more (two populations), else
    FALLBACK ns (one population: the run cannot tell which, the fixed default decides)."""
    vals = sorted(v for c in colls for i in range(1, rounds + 1) for w in ("before", "after")
                  if (v := probe_value(f"{out}/pp-{c}-r{i}-{w}.txt", "rtt_ns")) and v > 0)
    best = max(zip(vals, vals[1:]), key=lambda p: p[1] / p[0], default=None)
    return (best[0] * best[1]) ** 0.5 if best and best[1] / best[0] >= 1.8 else fallback


def classify(out, coll, rnd, near_ns):
    pp = [probe_value(f"{out}/pp-{coll}-r{rnd}-{w}.txt", "rtt_ns") for w in ("before", "after")]
    if None in pp:
        return "?", pp
    near = [v < near_ns for v in pp]
    return ("near" if all(near) else "far" if not any(near) else "mixed"), pp


def header_of(out, side, coll, rounds):
    """The first raw output's '#' lines (tools/plot-bench reads the rank count there)."""
    for i in range(1, rounds + 1):
        try:
            return [l for l in open(f"{out}/{side}-{coll}-r{i}.txt") if l.startswith("#")
                    and not l.startswith(("# Out of bounds", "# Avg bus", "# Collective test concluded"))]
        except OSError:
            continue
    return [f"# Collective test starting: {coll}_perf\n"]


def lacks(out, peer, coll):
    """The reason compare.sh wrote when PEER has no COLL, or None."""
    try:
        return open(f"{out}/{peer}-{coll}-lacks.txt").read().strip()
    except OSError:
        return None


def write_median(out, side, coll, runs, key=("float", "sum", "-1")):
    sizes = sorted({s for r in runs for s in r})
    with open(f"{out}/{side}-{coll}-median.txt", "w") as f:
        f.writelines(header_of(out, side, coll, len(runs)))
        for s in sizes:
            ts = sorted((r[s] for r in runs if s in r), key=lambda x: x[0])
            t, bw = ts[(len(ts) - 1) // 2]  # the median-time round, time and busbw a pair
            f.write(f"{s:12d}  {0:12d}  {key[0]:>8}  {key[1]:>6}  {key[2]:>6}  {t:7.2f}  {0:6.2f}  {bw:6.2f}"
                    f"  {0:6d}  {t:7.2f}  {0:6.2f}  {bw:6.2f}  {0:6d}\n")
    return sizes


def coll_tables(a, coll, kinds, ceil):
    """The lines of compare-<coll>.txt and {peer: {size: [(ratio, kind)]}} for the summary."""
    rounds = range(1, a.rounds + 1)
    braid = [rows_of(f"{a.out}/braid-{coll}-r{i}.txt") for i in rounds]
    sizes = write_median(a.out, "braid", coll, braid)
    lines = [f"# {coll}: {a.np} ranks, {a.mode}; {a.rounds} rounds, out of place, busbw GB/s",
             "# rounds (ping-pong before/after, ns): " +
             ", ".join(f"r{i} {k} ({fmt(p[0], 1, 0)}/{fmt(p[1], 1, 0)})" for i, (k, p) in zip(rounds, kinds))]
    wrong = [i for i in rounds if wrong_results(f"{a.out}/braid-{coll}-r{i}.txt")]
    per_peer = {}
    for peer in a.peers:
        if why := lacks(a.out, peer, coll):
            lines.append(f"# braid vs {NAMES[peer]}: not run ({why})")
            continue
        runs = [rows_of(f"{a.out}/{peer}-{coll}-r{i}.txt") for i in rounds]
        write_median(a.out, peer, coll, runs)
        wrong += [f"{peer} r{i}" for i in rounds if wrong_results(f"{a.out}/{peer}-{coll}-r{i}.txt")]
        name = NAMES[peer]
        lines += [f"# braid vs {name}: median busbw; ratio = median of per-round braid/{name} busbw "
                  f"(n = rounds)",
                  f"# {'size (B)':>12}  {'braid':>9}  {name:>9}  {'ratio':>6}  {'near':>6} {'n':>2}  "
                  f"{'far':>6} {'n':>2}"]
        ratios = per_peer.setdefault(peer, {})
        for s in sizes:
            # busbw ratio = time ratio (same size, same formula); times keep the digits
            # that a busbw of "0.00" GB/s loses at small sizes
            rs = [(p[s][0] / b[s][0], k[0]) for b, p, k in zip(braid, runs, kinds)
                  if s in b and s in p and b[s][0] > 0 and p[s][0] > 0]
            ratios[s] = rs
            near = [r for r, k in rs if k == "near"]
            far = [r for r, k in rs if k == "far"]
            lines.append(f"  {s:12d}  {fmt(med([b[s][1] for b in braid if s in b]), 9, 4, True)}  "
                         f"{fmt(med([p[s][1] for p in runs if s in p]), 9, 4, True)}  {fmt(med([r for r, _ in rs]), 6)}"
                         f"  {fmt(med(near), 6)} {len(near):2d}  {fmt(med(far), 6)} {len(far):2d}")
    if coll == "all_reduce" and ceil:
        lines += ceil_table(a, braid, kinds, ceil)
    if wrong:
        lines.append(f"# WARNING: rounds with wrong results: {wrong} (see the raw outputs)")
    return lines, per_peer


def ceil_table(a, braid, kinds, ceil):
    """braid's all-reduce busbw at each ceiling size as a fraction of that round's ceiling."""
    lines = [f"# all_reduce vs the one-pass memory ceiling of the same round (bench/probe/memceil: best "
             f"GB/s = size/time); frac = braid busbw / ceiling",
             "# " + f"{'round':>5} {'kind':>5}" +
             "".join(f"  {'ceil ' + s:>10}  {'braid':>7}  {'frac':>5}" for s in ceil)]
    fracs = {s: [] for s in ceil}
    for i, (b, k) in enumerate(zip(braid, kinds), 1):
        cells = ""
        for s in ceil:
            c = probe_value(f"{a.out}/ceil-{s}-r{i}.txt", "GB/s")
            nbytes = int(probe_value(f"{a.out}/ceil-{s}-r{i}.txt", "size") or 0)
            bw = b[nbytes][1] if nbytes in b else None
            fr = bw / c if bw is not None and c else None
            if fr is not None:
                fracs[s].append((fr, k[0]))
            cells += f"  {fmt(c, 10)}  {fmt(bw, 7)}  {fmt(fr, 5)}"
        lines.append(f"  {i:5d} {k[0]:>5}{cells}")
    for kind in ("all", "near", "far"):
        cells = "".join(f"  {'':>10}  {'':>7}  {fmt(med([f for f, k in fracs[s] if kind in ('all', k)]), 5)}"
                        for s in ceil)
        lines.append(f"  {'med':>5} {kind:>5}{cells}")
    return lines


def summary(a, all_ratios):
    lines = [f"# summary: median per-round busbw ratio braid/peer by size class (out of place, "
             f"{a.rounds} rounds; near/far: those rounds only)"]
    for peer in a.peers:
        for kind in ("all", "near", "far"):
            head = f"# vs {NAMES[peer]}, {kind} rounds"
            lines += [head, f"# {'collective':>14}" + "".join(f"  {c[0]:>7}" for c in CLASSES)]
            for coll, per_peer in all_ratios:
                cells = ""
                for _, lo, hi in CLASSES:
                    rs = [r for s, v in per_peer.get(peer, {}).items() if lo <= s <= hi
                          for r, k in v if kind in ("all", k)]
                    cells += f"  {fmt(med(rs), 7)}"
                lines.append(f"  {coll:>14}{cells}" + (f"  # {why}" if (why := lacks(a.out, peer, coll)) else ""))
    return lines


def main():
    ap = argparse.ArgumentParser()
    for opt in ("out", "colls", "mode", "peers", "ceil"):
        ap.add_argument("--" + opt, default="")
    ap.add_argument("--rounds", type=int, required=True)
    ap.add_argument("--np", default="2")
    ap.add_argument("--near-ns", default="150", help="ns, or 'gap': split at the run's widest gap")
    a = ap.parse_args()
    colls = a.colls.split(",")
    if a.near_ns == "gap":
        a.near_ns = gap_threshold(a.out, colls, a.rounds)
        print(f"# near/far threshold from the widest gap between this run's round trips: {a.near_ns:.0f} ns\n")
    else:
        a.near_ns = float(a.near_ns)
    a.peers = [p for p in a.peers.split(",") if p]
    ceil = [s for s in a.ceil.split(",") if s]
    all_ratios = []
    for coll in colls:
        kinds = [classify(a.out, coll, i, a.near_ns) for i in range(1, a.rounds + 1)]
        lines, per_peer = coll_tables(a, coll, kinds, ceil)
        all_ratios.append((coll, per_peer))
        print("\n".join(lines) + "\n")
        open(f"{a.out}/compare-{coll}.txt", "w").write("\n".join(lines) + "\n")
    lines = summary(a, all_ratios)
    print("\n".join(lines))
    open(f"{a.out}/compare-summary.txt", "w").write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()
