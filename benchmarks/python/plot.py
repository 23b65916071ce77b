# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""Plots bench_step.py's JSON: host (and, where the tables have them, GPU) microseconds
per step, idxplan beside the torch baseline, one group of bars a step size. Given
several runs' tables, each bar is the median of the runs.

    python3 benchmarks/python/plot.py run1.json [run2.json ...] docs/python_bench.png"""

import json
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def median_rows(sources):
    """The runs' tables as one: each step's numbers the median of the runs'."""
    runs = []
    for source in sources:
        with open(source) as f:
            runs.append(json.load(f))
    if any(len(run) != len(runs[0]) for run in runs):
        sys.exit("plot.py: the runs' tables have different numbers of steps")
    rows = []
    for i, first in enumerate(runs[0]):
        same = [run[i] for run in runs]
        if any(r["step"] != first["step"] for r in same):
            sys.exit(f"plot.py: the runs' tables list different steps at row {i}")
        keys = [k for k in first if k.endswith("_us") and all(k in r for r in same)]
        rows.append(dict(step=first["step"], **{k: statistics.median(r[k] for r in same) for k in keys}))
    return rows


def main(sources, target):
    rows = median_rows(sources)
    steps = [r["step"] for r in rows]
    # The GPU panel where the table has GPU times.
    panels = [("host", "host time a step (Python)")]
    if all("ours_gpu_us" in r and "torch_gpu_us" in r for r in rows):
        panels.append(("gpu", "GPU time a step (graph replay)"))
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels) + 0.5, 4.2), squeeze=False)
    axes = axes[0]
    width = 0.38
    x = range(len(steps))
    for ax, (kind, title) in zip(axes, panels):
        ours = [r[f"ours_{kind}_us"] for r in rows]
        torch = [r[f"torch_{kind}_us"] for r in rows]
        ax.bar([i - width / 2 for i in x], torch, width, label="torch ops (a Python builder)", color="#c44e52")
        ax.bar([i + width / 2 for i in x], ours, width, label="idxplan: Planner.plan + enqueue", color="#4c72b0")
        for i, (t, o) in enumerate(zip(torch, ours)):
            ax.annotate(f"{o:.1f}", (i + width / 2, o), ha="center", va="bottom", fontsize=7)
            ax.annotate(f"{t:.0f}", (i - width / 2, t), ha="center", va="bottom", fontsize=7)
        ax.set_yscale("log")
        ax.set_xticks(list(x))
        ax.set_xticklabels(steps, rotation=20)
        ax.set_ylabel("microseconds (median)")
        ax.set_title(title)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize=9)
    runs = f", median of {len(sources)} runs" if len(sources) > 1 else ""
    fig.suptitle(f"One indexer step's metadata from Python on an H200{runs}\n(DeepSeek-V4.1 indexer, MTP next_n 2)",
                 fontsize=10)
    fig.tight_layout(rect=(0, 0.07, 1, 1))
    fig.savefig(target, dpi=110)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    main(sys.argv[1:-1], sys.argv[-1])
