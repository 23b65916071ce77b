# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""DeepGEMM's paged MQA-logits metadata kernel against idxplan's step launch and drop-in.

    PYTHONPATH=<build>/python python3 benchmarks/python/bench_deepgemm.py \\
        --deepgemm path/to/DeepGEMM [--json out.json]

The baseline is DeepGEMM's own get_paged_mqa_logits_metadata (its build in the
folder --deepgemm names, imported as vLLM imports it) on the step's decode
context_lens, on the GPU, block_kv 64, DeepGEMM's SM count. Against it:

- idxplan's whole-step launch (idxplan.enqueue) of a deepgemm_sm90 geometry
  (DeepSeek-V4's indexer, pages of 64 keys, those SMs): every buffer of the
  step, the metadata among them, into buffers made once;
- idxplan.deepgemm's drop-in, the same arguments as DeepGEMM's; both allocate
  their [num_sms + 1, 2] result, as the signature has them do.

Alternated in one process, ROUNDS rounds:

- GPU time a call: 100 calls captured in one CUDA graph, replayed, the median a
  call (graph100, as the other Python benchmarks');
- host time a call: CALLS eager calls back to back, the mean a call, then a sync.

Steps: decode_N, N decodes of one token each ([N, 1]) or N MTP decodes of next_n 2
([N, 2], native sequences), contexts spread over 1K-200K tokens at compression 4.
The three's words are compared before any timing.
"""

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import torch

import idxplan
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


class Step:
    """decode_n of next_n rows planned for a deepgemm_sm90 geometry, its buffers on the GPU."""

    def __init__(self, n, next_n, num_sms):
        config = idxplan.deepseek_v41_config(num_sms)
        config.update(contract="deepgemm_sm90", block_size=256, num_speculative_tokens=next_n - 1,
                      max_num_seqs=n, max_num_batched_tokens=max(n * next_n, 8192))
        self.geometry = idxplan.make_geometry(**config)
        lens = [spread_context(r) for r in range(n)]
        qsl = list(range(0, next_n * (n + 1), next_n))
        self.plan = idxplan.Planner(self.geometry).plan(qsl, lens).copy()
        gpu = lambda v: torch.tensor(v, dtype=torch.int32, device="cuda")  # noqa: E731
        table = torch.zeros((n, self.geometry.max_blocks_per_seq), dtype=torch.int32, device="cuda")
        self.inputs = idxplan.StepInputs(seq_lens=gpu(lens), query_start_loc=gpu(qsl), block_table=table)
        self.outputs = idxplan.step_outputs(
            self.geometry, lambda shape: torch.zeros(shape, dtype=torch.int32, device="cuda"))

    def launch(self):
        idxplan.enqueue(self.geometry, self.plan, self.inputs, self.outputs)

    def metadata(self):
        decode = idxplan.decode_launch(self.geometry, self.plan, self.inputs, self.outputs)
        return decode.schedule.view(-1, 2)


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
            step = Step(n, next_n, num_sms)
            ours = lambda lens=lens: deepgemm.get_paged_mqa_logits_metadata(lens, 64, num_sms)  # noqa: E731
            base = lambda lens=lens: deep_gemm.get_paged_mqa_logits_metadata(lens, 64, num_sms)  # noqa: E731
            step.launch()
            want = base()
            if not (torch.equal(ours(), want) and torch.equal(step.metadata(), want)):
                raise SystemExit(f"{name}: idxplan's metadata differs from DeepGEMM's")  # no timing of wrong words
            cases.append((name, {"step": step.launch, "dropin": ours, "deepgemm": base}))

    kinds = ("step", "dropin", "deepgemm")
    figures = {name: {f"{k}_{w}": [] for k in kinds for w in ("gpu", "host")} for name, _ in cases}
    for _ in range(ROUNDS):
        for name, calls in cases:
            for k in kinds:
                figures[name][f"{k}_gpu"].append(graph_us(calls[k]))
                figures[name][f"{k}_host"].append(host_us(calls[k]))

    print(f"{torch.cuda.get_device_name()}, {num_sms} SMs; medians of {ROUNDS} rounds; "
          "GPU: graph of 100 calls, us a call; host: eager calls, us a call")
    print(f"{'step':<20} {'step GPU':>9} {'drop-in GPU':>12} {'DeepGEMM GPU':>13} {'ratio':>6} "
          f"{'step host':>10} {'drop-in host':>13} {'DeepGEMM host':>14}")
    rows = []
    for name, _ in cases:
        f = {k: statistics.median(v) for k, v in figures[name].items()}
        print(f"{name:<20} {f['step_gpu']:>9.2f} {f['dropin_gpu']:>12.2f} {f['deepgemm_gpu']:>13.2f} "
              f"{f['deepgemm_gpu'] / f['step_gpu']:>5.1f}x {f['step_host']:>10.2f} {f['dropin_host']:>13.2f} "
              f"{f['deepgemm_host']:>14.2f}")
        rows.append({"step": name, **f, "rounds": figures[name]})
    if args.json:
        Path(args.json).write_text(json.dumps({"deepgemm": deepgemm_version(args.deepgemm), "num_sms": num_sms,
                                               "torch": torch.__version__, "device": torch.cuda.get_device_name(),
                                               "steps": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
