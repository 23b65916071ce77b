# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""DeepGEMM's paged MQA-logits metadata kernel against idxplan.deepgemm's launch.

    PYTHONPATH=<build>/python python3 benchmarks/python/bench_deepgemm.py \\
        --deepgemm path/to/DeepGEMM [--json out.json]

The baseline is DeepGEMM's own get_paged_mqa_logits_metadata (its build in the
folder --deepgemm names, imported as vLLM imports it); idxplan's is
idxplan.deepgemm's, the same arguments: context_lens on the GPU, block_kv 64,
DeepGEMM's SM count. Both allocate their [num_sms + 1, 2] result, as the
signature has them do. Alternated in one process, ROUNDS rounds:

- GPU time a call: 100 calls captured in one CUDA graph, replayed, the median a
  call (graph100, as the other Python benchmarks');
- host time a call: CALLS eager calls back to back, the mean a call, then a sync.

Steps: decode_N, N rows of one token each ([N, 1], vLLM's flattened decode) or N
sequences of next_n 2 ([N, 2], its native MTP decode), contexts spread over 1K-200K
tokens at compression 4. The words are compared before any timing.
"""

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import torch

from bench_steps import spread_context
from gpu_timing import graph_us, host_us
from idxplan import deepgemm

ROUNDS = 3
DECODE_SIZES = [4, 16, 64, 256, 1024, 4096]


def deepgemm_version(path):
    """The DeepGEMM tree's commit where git knows it, else its folder's name."""
    try:
        git = ["git", "-C", str(path), "rev-parse", "--show-toplevel", "HEAD"]
        top, commit = subprocess.run(git, capture_output=True, text=True, check=True).stdout.split()
        if Path(top).resolve() == Path(path).resolve():
            return f"deepseek-ai/DeepGEMM at {commit}"
    except (OSError, ValueError, subprocess.CalledProcessError):
        pass
    return f"DeepGEMM tree {Path(path).name}"


def decode_lens(n, next_n):
    """[n, next_n] int32 on the GPU: row j of a sequence of L tokens sees (L - next_n + 1 + j) // 4 keys."""
    lens = [[(spread_context(r) - next_n + 1 + j) // 4 for j in range(next_n)] for r in range(n)]
    return torch.tensor(lens, dtype=torch.int32, device="cuda")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--deepgemm", required=True, help="a DeepGEMM folder with its extension built")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    sys.path.insert(0, args.deepgemm)
    import deep_gemm

    num_sms = deep_gemm.get_num_sms()
    cases = []
    for next_n in (1, 2):
        for n in DECODE_SIZES:
            lens = decode_lens(n, next_n)
            name = f"decode_{n}" + ("" if next_n == 1 else "_next_n2")
            ours = lambda lens=lens: deepgemm.get_paged_mqa_logits_metadata(lens, 64, num_sms)  # noqa: E731
            base = lambda lens=lens: deep_gemm.get_paged_mqa_logits_metadata(lens, 64, num_sms)  # noqa: E731
            if not torch.equal(ours(), base()):  # a timing of wrong words is no timing
                raise SystemExit(f"{name}: idxplan's metadata differs from DeepGEMM's")
            cases.append((name, ours, base))

    figures = {name: {"idxplan_gpu": [], "deepgemm_gpu": [], "idxplan_host": [], "deepgemm_host": []}
               for name, _, _ in cases}
    for _ in range(ROUNDS):
        for name, ours, base in cases:
            f = figures[name]
            f["idxplan_gpu"].append(graph_us(ours))
            f["deepgemm_gpu"].append(graph_us(base))
            f["idxplan_host"].append(host_us(ours))
            f["deepgemm_host"].append(host_us(base))

    print(f"{torch.cuda.get_device_name()}, {num_sms} SMs; medians of {ROUNDS} rounds; "
          "GPU: graph of 100 calls, us a call; host: eager calls, us a call")
    print(f"{'step':<20} {'idxplan GPU':>12} {'DeepGEMM GPU':>13} {'ratio':>6} "
          f"{'idxplan host':>13} {'DeepGEMM host':>14} {'ratio':>6}")
    rows = []
    for name, _, _ in cases:
        f = {k: statistics.median(v) for k, v in figures[name].items()}
        print(f"{name:<20} {f['idxplan_gpu']:>12.2f} {f['deepgemm_gpu']:>13.2f} "
              f"{f['deepgemm_gpu'] / f['idxplan_gpu']:>5.1f}x {f['idxplan_host']:>13.2f} "
              f"{f['deepgemm_host']:>14.2f} {f['deepgemm_host'] / f['idxplan_host']:>5.1f}x")
        rows.append({"step": name, **f, "rounds": figures[name]})
    if args.json:
        Path(args.json).write_text(json.dumps({"deepgemm": deepgemm_version(args.deepgemm), "num_sms": num_sms,
                                               "torch": torch.__version__, "device": torch.cuda.get_device_name(),
                                               "steps": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
