# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""aiter main's FlyDSL FP4 schedules against idxplan.aiter's drop-ins, GPU and host time.

    PYTHONPATH=<build>/python python3 benchmarks/python/bench_aiter_fp4.py \\
        --aiter path/to/aiter [--json out.json]

The baseline is aiter's own compute_varctx_schedule and compute_prefill_schedule
(aiter_fp4.py compiles them from aiter's files: torch operations and a Triton kernel),
called as sglang calls them; idxplan's are idxplan.aiter's, the same arguments. Both
write into a cta_info_out of their own. Alternated in one process, ROUNDS rounds:

- GPU time a call: 100 calls captured in one CUDA graph, replayed TIMINGS times, the
  median a call (graph100, as idxplan_bench_prepare's);
- host time a call: CALLS eager calls back to back, the mean a call, then a sync.

Steps: decode_N, N rows of one token each (next_n 1, sglang's flattened decode) or N
sequences of next_n 2, contexts spread over 1K-200K tokens at compression 4, P =
min(rows * ceil(msl / 256), max(1024, 4 * rows)) (sglang's, times next_n: a multiple
of it), msl 262,144 keys (a 1M-token model); prefill_R, R rows of eight requests, each
row's keys its causal end, P = max(1024, R). aiter's decode kernel holds every batch in
one Triton tile: past 1,024 batches its compile does not finish in minutes, so those
sizes time idxplan alone.
"""

import argparse
import json
import statistics
import subprocess
from pathlib import Path

import torch
import triton

import aiter_fp4
from bench_steps import spread_context
from gpu_timing import CALLS, graph_us, host_us
from idxplan import aiter

ROUNDS = 3
MSL = 262144  # keys: max_model_len 1M tokens at compression 4
DECODE_SIZES = [4, 16, 64, 256, 1024, 4096]
PREFILL_SIZES = [1024, 4096, 8192, 16384, 32768, 65536]
AITER_MAX_BATCHES = 1024


def aiter_version(path):
    """The aiter tree's commit where it is a git checkout, else its folder's name: never the
    machine's own path, which a committed result would point at."""
    git = ["git", "-C", str(path), "rev-parse", "--show-toplevel", "HEAD"]
    try:
        top, commit = subprocess.run(git, capture_output=True, text=True, check=True).stdout.split()
        if Path(top).resolve() == Path(path).resolve():  # its own checkout, not a folder inside another's
            return f"ROCm/aiter at {commit}"
    except (OSError, ValueError, subprocess.CalledProcessError):
        pass
    return f"aiter tree {Path(path).name}"


def decode_step(n, next_n):
    """(name, arguments): n flattened rows, or n sequences of next_n rows."""
    if next_n == 1:
        # n / 2 MTP requests of two rows; row j of a request of L tokens sees (L - 1 + j) // 4 keys.
        lens = [(spread_context(r // 2) - 1 + r % 2) // 4 for r in range(n)]
    else:
        lens = [spread_context(r) // 4 for r in range(n)]
    batches = n
    ctas = next_n * min(batches * -(-MSL // 256), max(1024 // next_n, 4 * batches))
    name = f"decode_{n}" + ("" if next_n == 1 else f"_next_n{next_n}")
    return name, batches, (torch.tensor(lens, dtype=torch.int32, device="cuda"), 256, ctas, MSL, next_n)


def prefill_step(rows):
    per = rows // 8
    batch, ends = [], []
    for k in range(8):
        prefix = spread_context(k)
        batch += [k] * per
        ends += [(prefix + j + 1) // 4 for j in range(per)]
    msl = -(-max(ends) // 256) * 256
    i32 = lambda v: torch.tensor(v, dtype=torch.int32, device="cuda")  # noqa: E731
    return f"prefill_{rows}", (i32(batch), i32([0] * rows), i32(ends), 256, max(1024, rows), msl)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aiter", required=True, help="an aiter checkout (or its mqa_logits folder)")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    varctx, prefill = aiter_fp4.load(args.aiter)
    cases = []
    for next_n in (1, 2):
        for n in DECODE_SIZES:
            name, batches, a = decode_step(n, next_n)
            mine = torch.empty((a[2], 4), dtype=torch.int32, device="cuda")
            theirs = torch.empty_like(mine)
            ours = lambda a=a, out=mine: aiter.compute_varctx_schedule(*a, cta_info_out=out)  # noqa: E731
            base = (lambda a=a, out=theirs: varctx(*a, cta_info_out=out)) if batches <= AITER_MAX_BATCHES else None
            cases.append((name, a[2], ours, base, mine, theirs))
    for rows in PREFILL_SIZES:
        name, a = prefill_step(rows)
        mine = torch.empty((a[4], 6), dtype=torch.int32, device="cuda")
        theirs = torch.empty_like(mine)
        cases.append((name, a[4], lambda a=a, out=mine: aiter.compute_prefill_schedule(*a, cta_info_out=out),
                      lambda a=a, out=theirs: prefill(*a, cta_info_out=out), mine, theirs))

    figures = {c[0]: {"idxplan_gpu": [], "aiter_gpu": [], "idxplan_host": [], "aiter_host": []} for c in cases}
    for name, _, ours, base, mine, theirs in cases:  # the words first: a timing of wrong words is no timing
        if base is not None:
            ours()
            base()
            torch.cuda.synchronize()
            if not torch.equal(mine, theirs):
                raise SystemExit(f"{name}: idxplan's cta_info differs from aiter's")
    for _ in range(ROUNDS):
        for name, _, ours, base, _, _ in cases:
            f = figures[name]
            f["idxplan_gpu"].append(graph_us(ours))
            f["idxplan_host"].append(host_us(ours))
            if base is not None:
                f["aiter_gpu"].append(graph_us(base))
                f["aiter_host"].append(host_us(base))

    print(f"medians of {ROUNDS} rounds; GPU: graph of 100 calls, us a call; host: {CALLS} eager calls, us a call")
    print(f"{'step':<22} {'CTAs':>6} {'idxplan GPU':>12} {'aiter GPU':>10} {'ratio':>7} "
          f"{'idxplan host':>13} {'aiter host':>11} {'ratio':>7}")
    rows = []
    for name, ctas, *_ in cases:
        f = {k: statistics.median(v) if v else None for k, v in figures[name].items()}
        gpu = f["aiter_gpu"] / f["idxplan_gpu"] if f["aiter_gpu"] else None
        host = f["aiter_host"] / f["idxplan_host"] if f["aiter_host"] else None
        show = lambda v, spec: format(v, spec) if v is not None else "n/a"  # noqa: E731
        times = lambda v: f"{v:.1f}x" if v is not None else "n/a"  # noqa: E731
        print(f"{name:<22} {ctas:>6} {show(f['idxplan_gpu'], '12.2f'):>12} {show(f['aiter_gpu'], '10.2f'):>10} "
              f"{times(gpu):>7} {show(f['idxplan_host'], '13.2f'):>13} {show(f['aiter_host'], '11.2f'):>11} "
              f"{times(host):>7}")
        rows.append({"step": name, "ctas": ctas, **f, "rounds": figures[name]})
    if args.json:
        Path(args.json).write_text(json.dumps({"aiter": aiter_version(args.aiter), "triton": triton.__version__,
                                               "torch": torch.__version__, "device": torch.cuda.get_device_name(),
                                               "steps": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
