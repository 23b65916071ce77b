# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""Plots bench_vllm.py's JSON: host microseconds a step of vLLM's builder and of
idxplan.vllm's build() (the median over the runs given, each run's as a dot), log scale.

    python3 benchmarks/python/plot_vllm.py run1.json [run2.json ...] docs/vllm_bench.png"""

import json
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    runs = [json.load(open(path)) for path in sys.argv[1:-1]]
    steps = [r["step"] for r in runs[0]["rows"] if r["step"] != "empty"]
    for run in runs:
        if [r["step"] for r in run["rows"] if r["step"] != "empty"] != steps:
            sys.exit("plot_vllm.py: the runs list different steps")

    def values(key):
        return [[next(r[key] for r in run["rows"] if r["step"] == s) for run in runs] for s in steps]

    fig, ax = plt.subplots(figsize=(7.5, 4))
    width = 0.38
    for k, (key, label, colour) in enumerate([("reference_us", "vLLM's builder (reference)", "#c0504d"),
                                              ("idxplan_us", "idxplan.vllm build()", "#1f6fb2")]):
        per_step = values(key)
        xs = [i + (k - 0.5) * width for i in range(len(steps))]
        ax.bar(xs, [statistics.median(v) for v in per_step], width, label=label, color=colour)
        for x, v in zip(xs, per_step):
            ax.plot([x] * len(v), v, "k.", markersize=3)
    for i, (ref, ours) in enumerate(zip(values("reference_us"), values("idxplan_us"))):
        ratio = statistics.median(ref) / statistics.median(ours)
        ax.annotate(f"{ratio:.1f}x", (i, statistics.median(ref) * 1.08), ha="center", va="bottom", fontsize=8)
    ax.set_yscale("log")
    ax.set_xticks(range(len(steps)), steps)
    ax.set_ylabel("host microseconds a step")
    ax.set_title(f"Metadata build from Python, {runs[0]['device']} host", fontsize=10)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(sys.argv[-1], dpi=110)


if __name__ == "__main__":
    main()
