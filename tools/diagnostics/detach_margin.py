#!/usr/bin/env python3
"""Which cycles detach, and why: the release against the replacement's binding.

Reads strandlab reports (report.json, or the .json.gz kept under
docs/evidence/) and, per provider and build, pools their cycle logs to print:

  margin: the replacement bound minus the old node's release (the kubelet
         dropping the volume from status.volumesInUse). The controller
         detaches only if it acts on the release before the replacement is
         in its desired state, so a cycle's chance of a detach rises with
         this margin.
  P(detach | margin): the detaching share per margin bin, and the
         Mantel-Haenszel common odds ratio of a detach over those bins, fix
         against stock on one provider and local against kind for one build
         (Mantel & Haenszel 1959, the stratified 2x2 estimator). An odds
         ratio near 1 says the controller answers a given margin alike; a
         difference in which cycles detach then comes from the margin's
         distribution (the kubelet's release, the scheduler's binding).
  quartiles of the old pod's terminal phase (delete -> terminal): the
         detaching share, the release after the terminal phase and the
         binding after it, per quartile, so a selection of late-ending
         cycles shows where it comes from.

A diagnostic for docs/kind.md ("Seed 14"), not part of make test.

Usage: tools/diagnostics/detach_margin.py REPORT...
"""
import gzip
import json
import statistics
import sys
from datetime import datetime

BINS = [float("-inf"), 0, 200, 400, 600, 800, 1000, 1500, 2000, float("inf")]


def instant(text):
    """Seconds since the epoch of an RFC 3339 time with nanoseconds."""
    text = text.rstrip("Z")
    whole, _, fraction = text.partition(".")
    return datetime.fromisoformat(whole).timestamp() + float("0." + (fraction or "0"))


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def cycles(report, build):
    """The cycles whose old pod reached its terminal phase, in ms from the delete."""
    for c in build.get("cycle_log") or []:
        if "delete_to_terminal_ns" not in c or not c.get("replacement_bound_at", "").startswith("2"):
            continue
        deleted = instant(c["deleted_at"])
        released = c.get("delete_to_released_ns")
        yield {
            "terminal": c["delete_to_terminal_ns"] / 1e6,
            "released": released / 1e6 if released else None,
            "bound": (instant(c["replacement_bound_at"]) - deleted) * 1000,
            "detached": "delete_to_detach_ns" in c,
        }


def margin(c):
    return c["bound"] - c["released"]


def binned(rows):
    """(detaching, cycles) per margin bin, over the cycles that released."""
    out = []
    for lo, hi in zip(BINS, BINS[1:]):
        inbin = [c for c in rows if c["released"] is not None and lo <= margin(c) < hi]
        out.append((sum(c["detached"] for c in inbin), len(inbin)))
    return out


def mantel_haenszel(a, b):
    """Common odds ratio of a detach, a against b, stratified by margin bin."""
    num = den = 0.0
    for (a1, an), (b1, bn) in zip(binned(a), binned(b)):
        n = an + bn
        if n:
            num += a1 * (bn - b1) / n
            den += (an - a1) * b1 / n
    return num / den if den else float("nan")


def median(values):
    return round(statistics.median(values)) if values else "-"


def main(paths):
    if not paths:
        sys.exit(__doc__)
    groups = {}
    for path in paths:
        report = load(path)
        for build in report["builds"]:
            groups.setdefault((report["provider"], build["name"]), []).extend(cycles(report, build))
    for (provider, build), rows in sorted(groups.items()):
        released = [c for c in rows if c["released"] is not None]
        print(f"{provider} {build}: {len(rows)} cycles, {sum(c['detached'] for c in rows)} with a detach, "
              f"{len(rows) - len(released)} without a release; margin p50 {median([margin(c) for c in released])} ms")
        labels = ["<0" if hi == 0 else f"<{hi:g}" if hi != float("inf") else f">={lo:g}" for lo, hi in zip(BINS, BINS[1:])]
        print("  P(detach | margin ms): " + "  ".join(f"{l} {d}/{n}" for l, (d, n) in zip(labels, binned(rows))))
        terminals = sorted(c["terminal"] for c in rows)
        cuts = [terminals[len(terminals) * q // 4] for q in (1, 2, 3)] + [float("inf")]
        lo = float("-inf")
        for q, hi in enumerate(cuts, 1):
            part = [c for c in rows if lo <= c["terminal"] < hi]
            rel = [c for c in part if c["released"] is not None]
            print(f"  terminal Q{q} (p50 {median([c['terminal'] for c in part])} ms): detach {sum(c['detached'] for c in part)}/{len(part)}, "
                  f"terminal -> released p50 {median([c['released'] - c['terminal'] for c in rel])}, "
                  f"terminal -> bound p50 {median([c['bound'] - c['terminal'] for c in rel])}, "
                  f"margin p50 {median([margin(c) for c in rel])}")
            lo = hi
    providers = sorted({p for p, _ in groups})
    builds = sorted({b for _, b in groups})
    print("Mantel-Haenszel odds ratio of a detach at a given margin:")
    for p in providers:
        if (p, "fix") in groups and (p, "stock") in groups:
            print(f"  {p}: fix / stock {mantel_haenszel(groups[(p, 'fix')], groups[(p, 'stock')]):.2f}")
    for b in builds:
        if ("local", b) in groups and ("kind", b) in groups:
            print(f"  {b}: local / kind {mantel_haenszel(groups[('local', b)], groups[('kind', b)]):.2f}")


if __name__ == "__main__":
    main(sys.argv[1:])
