# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""GPU time a step: aiter's decode scheduler kernel alone against idxplan's whole prepare launch.

    PYTHONPATH=<build>/python python3 benchmarks/python/bench_aiter_sched.py \\
        --aiter path/to/aiter/ops/triton/_gluon_kernels/gfx950/attention/pa_mqa_logits_mxfp4.py \\
        [--json out.json]

The baseline is aiter's own scheduler, the kernel the reference launches for the decode
schedule: `_pa_mqa_logits_mxfp4_sched_kernel`, a plain Triton kernel, read from the
aiter file given (which holds it beside gfx950-only Gluon kernels) and compiled alone,
so it runs on any GPU Triton targets. idxplan's figure is idxplan.enqueue(): the
context lengths, row ends, block ends and the whole schedule in one launch.

Both are timed the way idxplan_bench_prepare's graph100 column is: 100 launches
captured in one CUDA graph, the graph replayed TIMINGS times, the median a launch;
the two alternate in ROUNDS rounds in this process, on the same steps (`decode_N`, N
MTP decodes of 2 rows, lengths 1K-200K tokens, as the benchmarks' steps) and the same
slot count (the plan's num_ctas; its block_m, row blocks and KV tile). The
scheduler's launch follows aiter's launcher: BLOCK_P slots a program, the units padded
to a power of two (at least 16). Versions of aiter differ in the scheduler's rule
(its tiles a slice, its idle slots' words); only the time is compared here.
"""

import argparse
import json
import statistics
from pathlib import Path

import torch
import triton
import triton.language as tl

import idxplan
from bench_steps import mtp_decodes
from from_source import function_from_source
from gpu_timing import LAUNCHES, TIMINGS, graph_us

SCHEDULER = "_pa_mqa_logits_mxfp4_sched_kernel"
ARGS = ["context_lens_ptr", "sched_ptr", "batch", "next_n", "num_ctas",
        "BLOCK_M", "BLOCK_KV", "ROW_BLOCKS", "ALIGN_W", "BLOCK_P"]
BLOCK_P = 4  # the slots a scheduler program writes, as aiter's launcher sets it
ROUNDS = 3
SIZES = [4, 8, 16, 32, 64, 256, 1024, 4096]


def load_scheduler(path):
    """aiter's scheduler kernel, compiled from its own source in `path` alone."""
    kernel = function_from_source(path, SCHEDULER, {"triton": triton, "tl": tl})
    names = list(kernel.arg_names)
    if names != ARGS:
        raise SystemExit(f"{path}: {SCHEDULER} takes ({', '.join(names)}); this benchmark launches "
                         f"({', '.join(ARGS)})")
    return kernel


def scheduler_launch(shape):
    """aiter's launcher's arguments for a plan's schedule shape: (grid, slots, the
    constants): BLOCK_P slots a program, the units padded to a power of two (at
    least 16)."""
    align = max(16, 1 << (shape.work - 1).bit_length())
    constants = dict(BLOCK_M=shape.block_m, BLOCK_KV=shape.block_kv, ROW_BLOCKS=shape.row_blocks, ALIGN_W=align,
                     BLOCK_P=BLOCK_P)
    return (triton.cdiv(shape.num_ctas, BLOCK_P),), shape.num_ctas, constants


@triton.jit
def _load_store(src, dst):
    # This process's floor, as idxplan_bench_prepare's "+load": one program
    # loads a length and stores it.
    tl.store(dst, tl.load(src))


class Step:
    """decode_n planned by idxplan on a `cus`-CU target, with both launches ready."""

    def __init__(self, n, cus, scheduler):
        self.name = f"decode_{n}"
        config = idxplan.deepseek_v41_config(cus)
        config.update(max_num_seqs=4096, max_num_batched_tokens=32768)  # idxplan_bench_prepare's
        geometry = idxplan.make_geometry(**config)
        qsl, lens = mtp_decodes(n)
        plan = idxplan.Planner(geometry).plan(qsl, lens).copy()
        shape = plan.decode.schedule
        if shape is None:
            raise SystemExit(f"{self.name}: idxplan plans no schedule")
        self.num_ctas = shape.num_ctas
        device = "cuda"
        seq_lens = torch.tensor(lens, dtype=torch.int32, device=device)
        table = torch.zeros((n, geometry.max_blocks_per_seq), dtype=torch.int32, device=device)
        inputs = idxplan.StepInputs(seq_lens=seq_lens, query_start_loc=torch.tensor(qsl, dtype=torch.int32,
                                                                                  device=device),
                                    block_table=table)
        outputs = idxplan.step_outputs(geometry, lambda s: torch.empty(s, dtype=torch.int32, device=device))
        self.idxplan = lambda: idxplan.enqueue(geometry, plan, inputs, outputs)

        contexts = seq_lens // geometry.config["compress_ratio"]
        schedule = torch.empty(self.num_ctas * 4, dtype=torch.int32, device=device)
        grid, _, constants = scheduler_launch(shape)
        self.floor = lambda: _load_store[(1,)](seq_lens, schedule)
        self.aiter = lambda: scheduler[grid](contexts, schedule, n, shape.rows_per_seq, self.num_ctas, **constants)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--aiter", required=True, help="aiter's file holding " + SCHEDULER)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args()
    if not idxplan.has_device:
        raise SystemExit("this idxplan has no device part: build it with -DIDXPLAN_CUDA=ON or -DIDXPLAN_HIP=ON")
    scheduler = load_scheduler(args.aiter)
    # The benchmarks' targets: 256 CUs, 512 for 4,096 sequences.
    steps = [Step(n, 512 if n > 1024 else 256, scheduler) for n in SIZES]
    kinds = ("floor", "idxplan", "aiter")
    figures = {s.name: {k: [] for k in kinds} for s in steps}
    for _ in range(ROUNDS):
        for s in steps:
            for k in kinds:
                figures[s.name][k].append(graph_us(getattr(s, k)))
    print(f"GPU microseconds a launch, {LAUNCHES} launches in one graph, median of {TIMINGS} timings, "
          f"median of {ROUNDS} rounds; +load: one program loads a length and stores it")
    print(f"{'step':<12} {'slots':>6} {'+load':>7} {'idxplan':>9} {'aiter sched':>12} {'aiter / idxplan':>16}")
    rows = []
    for s in steps:
        floor, ours, theirs = (statistics.median(figures[s.name][k]) for k in kinds)
        rows.append({"step": s.name, "slots": s.num_ctas, "load_us": floor, "idxplan_us": ours,
                     "aiter_sched_us": theirs, "rounds": figures[s.name]})
        print(f"{s.name:<12} {s.num_ctas:>6} {floor:>7.2f} {ours:>9.2f} {theirs:>12.2f} {theirs / ours:>15.2f}x")
    if args.json:
        Path(args.json).write_text(json.dumps({"aiter": str(args.aiter), "triton": triton.__version__,
                                               "torch": torch.__version__,
                                               "device": torch.cuda.get_device_name(), "steps": rows},
                                              indent=1) + "\n")


if __name__ == "__main__":
    main()
