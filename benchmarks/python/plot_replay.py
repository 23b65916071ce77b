#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""Plots an `idxplan replay --series FILE` run: the step mix and plan_step's
time a step over the trace, a minute a bucket.

    benchmarks/python/plot_replay.py SERIES.json OUT.png
"""

import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    with open(sys.argv[1]) as f:
        series = json.load(f)
    minutes = [t / 60.0 for t in series["time_s"]]
    last = int(max(minutes)) + 1 if minutes else 1
    kinds = ("decode", "mixed", "prefill")
    counts = {k: [0] * last for k in kinds}
    plan = [[] for _ in range(last)]
    for m, kind, us in zip(minutes, series["kind"], series["plan_us"]):
        if kind in counts:
            counts[kind][int(m)] += 1
        plan[int(m)].append(us)

    fig, (mix, time) = plt.subplots(2, 1, figsize=(10, 6.5), sharex=True)
    x = list(range(last))
    bottom = [0] * last
    colors = {"decode": "#4c72b0", "mixed": "#dd8452", "prefill": "#55a868"}
    labels = {"decode": "decode-only", "mixed": "mixed", "prefill": "prefill-only"}
    for k in kinds:
        mix.bar(x, counts[k], bottom=bottom, width=1.0, color=colors[k], label=labels[k], align="edge")
        bottom = [b + c for b, c in zip(bottom, counts[k])]
    mix.set_ylabel("steps a minute")
    mix.legend(loc="upper right", ncol=3)
    mix.set_title("Mooncake conversation trace through idxplan replay: step mix and plan_step time")

    def pct(values, q):
        if not values:
            return float("nan")
        s = sorted(values)
        return s[min(len(s) - 1, int(q * (len(s) - 1) + 0.5))]

    for q, style, label in ((0.5, "-", "p50"), (0.99, "--", "p99"), (1.0, ":", "max")):
        time.plot([i + 0.5 for i in x], [pct(p, q) for p in plan], style, color="#333333", label=label)
    time.set_yscale("log")
    time.set_ylabel("plan_step a step (us)")
    time.set_xlabel("minutes into the trace (simulated)")
    time.legend(loc="upper right", ncol=3)
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)


if __name__ == "__main__":
    main()
