#!/usr/bin/env python3
"""The overhead bench of this tree against another revision, interleaved.

    scripts/bench-against.py REV [--rounds N] [--bench overhead] [--filter GROUP]

Builds `cargo bench --bench overhead` twice — this working tree, and REV
checked out in a temporary git worktree with a target directory of its own
(cargo would otherwise mix the two builds' artifacts) — then runs the two
binaries in turn, REV first, N times (5 by default), so that whatever else
the machine does falls on both alike. Each run prints its medians (the
bench's own summary table); this prints, per row, the median over the
rounds of each side and their ratio, with the date and the load average
before and after. `--filter` passes criterion a filter (a group's name,
such as `priorities`), to run again the rows of one group only.
Criterion runs each case for 1 s of warm-up and 2 s of
measurement here, so a round takes about a minute per side.
"""

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from statistics import median

NS = re.compile(r"^([0-9.]+) ns$")


def load():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "unknown"


def build(tree, target, bench):
    """The bench binary of `tree`, built in `target`."""
    env = dict(os.environ, CARGO_TARGET_DIR=target)
    out = subprocess.run(
        ["cargo", "bench", "-p", "rheostat", "--bench", bench, "--no-run"],
        cwd=tree, env=env, capture_output=True, text=True,
    )
    if out.returncode != 0:
        sys.exit(f"building {tree} failed:\n{out.stderr}")
    found = re.findall(r"Executable .*? \((.+?)\)", out.stderr)
    if not found:
        sys.exit(f"no bench binary named in cargo's output for {tree}:\n{out.stderr}")
    path = found[-1]
    return path if os.path.isabs(path) else os.path.join(tree, path)


def run(binary, tree, only=None):
    """One run's medians by row, from the bench's summary tables."""
    out = subprocess.run(
        [binary, "--bench", "--warm-up-time", "1", "--measurement-time", "2"]
        + ([only] if only else []),
        cwd=tree, capture_output=True, text=True,
    )
    if out.returncode != 0:
        sys.exit(f"{binary} failed:\n{out.stderr[-2000:]}")
    rows = {}
    header = []
    for line in out.stdout.splitlines():
        if not line.startswith("|"):
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        values = [(i, NS.match(c)) for i, c in enumerate(cells)]
        values = [(i, float(m[1])) for i, m in values if m]
        if not values:
            if not cells[0].startswith("---"):
                header = cells
            continue
        for i, ns in values:
            # A row with more than one figure (with and without classes)
            # is named by its column too.
            name = cells[0] if len(values) == 1 else f"{cells[0]}, {header[i] if i < len(header) else i}"
            rows[name] = ns
    return rows


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rev", help="the revision to compare against, e.g. main~3")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--bench", default="overhead")
    parser.add_argument("--filter", default=None, help="a criterion filter, e.g. priorities")
    args = parser.parse_args()

    here = subprocess.run(
        ["git", "rev-parse", "--show-toplevel"], capture_output=True, text=True, check=True
    ).stdout.strip()
    rev = subprocess.run(
        ["git", "rev-parse", "--short", args.rev], cwd=here, capture_output=True, text=True
    )
    if rev.returncode != 0:
        sys.exit(f"unknown revision {args.rev!r}")
    rev = rev.stdout.strip()
    scratch = tempfile.mkdtemp(prefix="bench-against-")
    other = os.path.join(scratch, "tree")
    try:
        subprocess.run(
            ["git", "worktree", "add", "--detach", other, rev],
            cwd=here, check=True, capture_output=True,
        )
        print(f"building {rev} and this tree …", file=sys.stderr)
        theirs = build(other, os.path.join(scratch, "target"), args.bench)
        ours = build(here, os.environ.get("CARGO_TARGET_DIR", os.path.join(here, "target")), args.bench)
        before = load()
        started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
        results = {"them": {}, "us": {}}
        for n in range(args.rounds):
            for side, binary, tree in (("them", theirs, other), ("us", ours, here)):
                print(f"round {n + 1}/{args.rounds}: {side}", file=sys.stderr)
                for row, ns in run(binary, tree, args.filter).items():
                    results[side].setdefault(row, []).append(ns)
        after = load()
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", other], cwd=here, capture_output=True)
        shutil.rmtree(scratch, ignore_errors=True)

    only = f" (`{args.filter}` only)" if args.filter else ""
    print(f"\n## `{args.bench}`{only}: this tree against {rev}, {args.rounds} interleaved rounds\n")
    print(f"Started {started}; load average before and after: {before} / {after}\n")
    print(f"| row | {rev} | this tree | × {rev} |")
    print("| --- | ---: | ---: | ---: |")
    worst = 0.0
    for row, theirs_ns in results["them"].items():
        ours_ns = results["us"].get(row)
        if not ours_ns:
            print(f"| {row} | {median(theirs_ns):.1f} ns | – | – |")
            continue
        ratio = median(ours_ns) / median(theirs_ns)
        worst = max(worst, ratio)
        print(f"| {row} | {median(theirs_ns):.1f} ns | {median(ours_ns):.1f} ns | {ratio:.2f} |")
    for row, ours_ns in results["us"].items():
        if row not in results["them"]:
            print(f"| {row} | – | {median(ours_ns):.1f} ns | – |")
    print(f"\nThe highest ratio: {worst:.2f}.")


if __name__ == "__main__":
    main()
