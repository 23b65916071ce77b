# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""Host time a step: vLLM's ROCm MXFP4 indexer builder against idxplan.vllm's build().

    PYTHONPATH=<build>/python python3 benchmarks/python/bench_vllm.py \\
        --reference path/to/vllm/v1/attention/backends/mla/rocm_paged_mxfp4_indexer.py [--json out.json]

The reference is vLLM's own file, loaded from the path given with vLLM's imports
stubbed (vllm_reference.py says what runs and what does not: its base builder's
output is prepared before the timing, aiter's scheduler is not launched). Both
builders run in this process on the same CUDA tensors and the same steps, in
alternating rounds; a round times STEPS calls with no synchronisation inside (the GPU
runs behind), and the figures are medians over the rounds. idxplan's build() is
the whole call an engine makes: plan, launch, and every object and view of the
metadata. Its three parts (reading the step and planning, the launch, the objects)
are timed inside the module on separate rounds.
"""

import argparse
import json
import statistics
import sys
import time
import types
from pathlib import Path

import torch

import idxplan
from idxplan import vllm

sys.path.insert(0, str(Path(__file__).resolve().parent))
import vllm_reference  # noqa: E402
from bench_steps import mixed_1024, mtp_decodes  # noqa: E402

STEPS = 300
ROUNDS = 7


CASES = [("empty", [0], []), ("decode_4", *mtp_decodes(4)), ("decode_64", *mtp_decodes(64)),
         ("decode_256", *mtp_decodes(256)), ("decode_1024", *mtp_decodes(1024)), ("mixed_1024", *mixed_1024())]


def common_attn_metadata(g, qsl, lens):
    num_reqs = len(lens)
    qsl_cpu = torch.tensor(qsl, dtype=torch.int32)
    lens_cpu = torch.tensor(lens, dtype=torch.int32)
    table = torch.randint(0, 1 << 20, (num_reqs, g.max_blocks_per_seq), dtype=torch.int32, device="cuda")
    return types.SimpleNamespace(num_reqs=num_reqs, num_actual_tokens=qsl[-1], query_start_loc=qsl_cpu.cuda(),
                                 query_start_loc_cpu=qsl_cpu, seq_lens=lens_cpu.cuda(),
                                 seq_lens_cpu_upper_bound=lens_cpu, block_table_tensor=table,
                                 max_seq_len=max(lens, default=0), slot_mapping=None)


def host_us(call, steps):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        call()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return 1e6 * (t1 - t0) / steps


def check_same(ours, ref):
    """idxplan's fields the reference computes on this step equal the reference's."""
    def same(a, b):
        return (a is None and b is None) or torch.equal(a.cpu().reshape(-1), b.cpu().reshape(-1).to(a.dtype))
    assert same(ours.decode_row_lens, ref.decode_row_lens)
    assert same(ours.decode_block_ends, ref.decode_block_ends)
    assert (ours.decode_native is None) == (ref.decode_native is None)
    if ours.decode_native is not None:
        assert same(ours.decode_native.context_lens, ref.decode_native.context_lens)
    assert len(ours.prefill_plans) == len(ref.prefill_plans)
    for p, q in zip(ours.prefill_plans, ref.prefill_plans):
        assert p.requests == q.requests and p.width == q.width and same(p.row_ends, q.row_ends)
    assert [(a.token_start, a.token_end) for a in ours.gather_launches] == [
        (b.token_start, b.token_end) for b in ref.gather_launches]


def bench_case(name, qsl, lens, g, module, steps, rounds):
    cm = common_attn_metadata(g, qsl, lens)
    ref = vllm_reference.make_builder(module, g, "cuda")
    ref.prepare(cm)  # the base builder's output, outside the timing
    ours = vllm.MetadataBuilder(g, "cuda")
    if name != "empty":
        check_same(ours.build(0, cm), ref.build(0, cm))
        torch.cuda.synchronize()
    theirs, mine = [], []
    for r in range(rounds + 1):
        pair = [(theirs, lambda: ref.build(0, cm)), (mine, lambda: ours.build(0, cm))]
        for times, call in (pair if r % 2 == 0 else pair[::-1]):
            t = host_us(call, steps)
            if r > 0:  # the first round warms both up
                times.append(t)
    parts = [[], [], []]
    core = ours._core
    for _ in range(rounds):
        torch.cuda.synchronize()
        sums = [0, 0, 0]
        for _ in range(steps):
            _, a, b, c = core.build_timed(cm)
            sums[0] += a
            sums[1] += b
            sums[2] += c
        for k in range(3):
            parts[k].append(sums[k] / steps / 1e3)
    theirs_us, mine_us = statistics.median(theirs), statistics.median(mine)
    return dict(step=name, requests=len(lens), chunks=len(ours.build(0, cm).prefill_plans),
                reference_us=theirs_us, idxplan_us=mine_us, ratio=theirs_us / mine_us,
                read_and_plan_us=statistics.median(parts[0]), launch_us=statistics.median(parts[1]),
                objects_us=statistics.median(parts[2]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reference", required=True, help="vLLM's rocm_paged_mxfp4_indexer.py")
    parser.add_argument("--json", help="also write the table here")
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    cus = torch.cuda.get_device_properties(0).multi_processor_count
    config = idxplan.deepseek_v41_config(cus)
    config.update(max_num_seqs=1024, max_num_batched_tokens=32768)
    g = idxplan.make_geometry(**config)
    module = vllm_reference.load(args.reference, g)
    print(f"host microseconds a step, median of {args.rounds} alternated rounds of {args.steps} steps; "
          f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"{'step':<12} {'reference':>10} {'idxplan':>8} {'ratio':>7} | {'read+plan':>9} {'launch':>7} {'objects':>8}")
    rows = []
    for name, qsl, lens in CASES:
        r = bench_case(name, qsl, lens, g, module, args.steps, args.rounds)
        rows.append(r)
        print(f"{name:<12} {r['reference_us']:10.1f} {r['idxplan_us']:8.2f} {r['ratio']:6.1f}x | "
              f"{r['read_and_plan_us']:9.2f} {r['launch_us']:7.2f} {r['objects_us']:8.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                                                   steps=args.steps, rounds=args.rounds, rows=rows), indent=1))


if __name__ == "__main__":
    main()
