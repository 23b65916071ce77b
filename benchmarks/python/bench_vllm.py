# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""Host time a step from Python: idxplan's vLLM builders against vLLM's own, in one process.

    PYTHONPATH=<build>/python python3 benchmarks/python/bench_vllm.py \\
        --reference path/to/vllm/v1/attention/backends/mla/rocm_paged_mxfp4_indexer.py \\
        [--vllm path/to/vllm-source --aiter path/to/aiter/.../pa_mqa_logits_mxfp4.py] [--json out.json]

Every builder runs in this process on the same CUDA tensors and the same steps, in
alternating rounds; a round times STEPS calls with no synchronisation inside (the GPU
runs behind), and each figure is the median over the rounds. The columns, host
microseconds a step:

- ``file``: the ROCm file's own work, vLLM's imports stubbed (vllm_reference.py):
  its base builder's output prepared before the timing, aiter's scheduler not
  launched;
- ``chain`` (with --vllm and --aiter): what vLLM pays a step on ROCm: vLLM's base
  builder from its source tree (vllm_base.py), the file's work on its output, and
  aiter's decode scheduler kernel (plain Triton, compiled from the aiter file
  given) launched where the file launches it, with the plan's slot count (its
  launch arguments are worked out before the timing: vLLM's wrapper works them
  out on the host each step, which the chain does not count);
- ``plugin`` (with --vllm): what an engine with IDXPLAN_VLLM_INDEXER=1 calls, the
  plugin's builder class (idxplan.vllm_builder) over vLLM's own builder class:
  idxplan.vllm's build() and vLLM's compressed slot mapping (its source's kernel,
  as vLLM's base builder launches it);
- ``build``: idxplan.vllm.MetadataBuilder.build() alone: plan, launch, and every
  object and view of the metadata;
- ``empty``: one eager launch of an empty kernel, from Python, as build() launches
  (its runtime, torch's current stream): the floor of a one-launch build().

build()'s own parts (reading the step and planning, the launch, the objects) are
timed inside the module on separate rounds.
"""

import argparse
import json
import statistics
import sys
import time
import traceback
import types
from pathlib import Path

import torch

import idxplan
from idxplan import vllm, vllm_builder

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
    query_lens = [b - a for a, b in zip(qsl, qsl[1:])]
    return types.SimpleNamespace(
        num_reqs=num_reqs, num_actual_tokens=qsl[-1], max_query_len=max(query_lens, default=0),
        query_start_loc=qsl_cpu.cuda(), query_start_loc_cpu=qsl_cpu, seq_lens=lens_cpu.cuda(),
        seq_lens_cpu_upper_bound=lens_cpu, block_table_tensor=table, max_seq_len=max(lens, default=0),
        slot_mapping=torch.zeros(qsl[-1], dtype=torch.int64, device="cuda"), dcp_local_seq_lens=None,
        is_prefilling=None)


def host_us(call, steps):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(steps):
        call()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return 1e6 * (t1 - t0) / steps


def same(a, b):
    return (a is None and b is None) or torch.equal(a.cpu().reshape(-1), b.cpu().reshape(-1).to(a.dtype))


def check_decode(ours, ref):
    """The decode fields both compute on this step are equal."""
    assert same(ours.decode_row_lens, ref.decode_row_lens)
    assert same(ours.decode_block_ends, ref.decode_block_ends)
    assert (ours.decode_native is None) == (ref.decode_native is None)
    if ours.decode_native is not None:
        assert same(ours.decode_native.context_lens, ref.decode_native.context_lens)


def check_same(ours, ref):
    """idxplan's fields the file computes on this step equal the file's."""
    check_decode(ours, ref)
    assert len(ours.prefill_plans) == len(ref.prefill_plans)
    for p, q in zip(ours.prefill_plans, ref.prefill_plans):
        assert p.requests == q.requests and p.width == q.width and same(p.row_ends, q.row_ends)
    assert [(a.token_start, a.token_end) for a in ours.gather_launches] == [
        (b.token_start, b.token_end) for b in ref.gather_launches]


class Scheduler:
    """aiter's decode scheduler launched where the file calls
    build_rocm_mxfp4_decode_schedule: its kernel, the slot count of the step's plan."""

    def __init__(self, kernel):
        self.kernel = kernel
        self.launches = {}  # (sequences, rows a sequence) -> the launch's arguments

    def prepare(self, plan):
        from bench_aiter_sched import scheduler_launch  # Triton, for the chain only

        shape = plan.decode.schedule if plan.num_decodes else None
        if shape is not None:
            self.launches[(shape.num_seqs, shape.rows_per_seq)] = scheduler_launch(shape)

    def __call__(self, lengths, num_heads, head_dim, page_entries, buffer, logits_width, native=None):
        contexts, next_n = (native.context_lens, native.next_n) if native is not None else (lengths, 1)
        launch = self.launches.get((contexts.shape[0], next_n))
        if launch is None:
            return None
        grid, num_ctas, constants = launch
        self.kernel[grid](contexts, buffer, contexts.shape[0], next_n, num_ctas, **constants)
        return buffer[:4 * num_ctas]


def bench_case(name, qsl, lens, g, builders, steps, rounds):
    cm = common_attn_metadata(g, qsl, lens)
    file_builder = vllm_reference.make_builder(builders["file_module"], g, "cuda")
    file_builder.prepare(cm)  # the base builder's output, outside the timing
    ours = vllm.MetadataBuilder(g, "cuda")
    calls = {"file": lambda: file_builder.build(0, cm), "build": lambda: ours.build(0, cm),
             "empty": ours._core.launch_empty}
    if name != "empty":
        check_same(ours.build(0, cm), file_builder.build(0, cm))
    if builders.get("chain_module") is not None and name != "empty":
        try:
            builders["scheduler"].prepare(idxplan.Planner(g).plan(qsl, lens))
            chain = vllm_reference.make_builder(builders["chain_module"], g, "cuda")
            check_decode(ours.build(0, cm), chain.build(0, cm))
            spec, vllm_config = vllm_reference.vllm_config_for(g, builders["chain_module"])
            plugin = builders["plugin_class"](spec, [], vllm_config, torch.device("cuda", 0),
                                              block_table_width=g.max_blocks_per_seq)
            check_same(plugin.build(0, cm), ours.build(0, cm))
            calls["chain"] = lambda: chain.build(0, cm)
            calls["plugin"] = lambda: plugin.build(0, cm)
        except Exception:  # the rest of the step is still timed; the failure is printed
            traceback.print_exc()
            print(f"{name}: vLLM's chain or the plugin's builder failed (above): not timed on this step")
    torch.cuda.synchronize()
    times = {k: [] for k in calls}
    order = list(calls)
    for r in range(rounds + 1):
        for k in (order if r % 2 == 0 else order[::-1]):
            t = host_us(calls[k], steps)
            if r > 0:  # the first round warms every builder up
                times[k].append(t)
    parts = [[], [], []]
    for _ in range(rounds):
        torch.cuda.synchronize()
        sums = [0, 0, 0]
        for _ in range(steps):
            _, a, b, c = ours._core.build_timed(cm)
            sums[0] += a
            sums[1] += b
            sums[2] += c
        for k in range(3):
            parts[k].append(sums[k] / steps / 1e3)
    row = dict(step=name, requests=len(lens), chunks=len(ours.build(0, cm).prefill_plans),
               read_and_plan_us=statistics.median(parts[0]), launch_us=statistics.median(parts[1]),
               objects_us=statistics.median(parts[2]))
    for k, t in times.items():
        row[f"{k}_us"] = statistics.median(t)
    row["file_over_build"] = row["file_us"] / row["build_us"]
    row["build_over_empty_us"] = row["build_us"] - row["empty_us"]
    if "chain_us" in row:
        row["chain_over_plugin"] = row["chain_us"] / row["plugin_us"]
        row["chain_over_build"] = row["chain_us"] / row["build_us"]
    return row


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reference", required=True, help="vLLM's rocm_paged_mxfp4_indexer.py")
    parser.add_argument("--vllm", help="a vLLM source tree, for its base builder (vllm_base.py)")
    parser.add_argument("--aiter", help="aiter's file holding the decode scheduler kernel (with --vllm)")
    parser.add_argument("--json", help="also write the table here")
    parser.add_argument("--steps", type=int, default=STEPS)
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    if (args.vllm is None) != (args.aiter is None):
        raise SystemExit("--vllm and --aiter come together: the whole chain needs vLLM's base and aiter's scheduler")
    cus = torch.cuda.get_device_properties(0).multi_processor_count
    config = idxplan.deepseek_v41_config(cus)
    config.update(max_num_seqs=1024, max_num_batched_tokens=32768)
    g = idxplan.make_geometry(**config)
    # The file alone, on the prepared base, loaded first: each load stubs vLLM
    # afresh, and the plugin's builder reads the chain's vLLM modules.
    builders = {"file_module": vllm_reference.load(args.reference, g)}
    if args.vllm is not None:
        from bench_aiter_sched import load_scheduler  # Triton, for the chain only

        builders["scheduler"] = Scheduler(load_scheduler(args.aiter))
        try:
            builders["chain_module"] = vllm_reference.load(args.reference, g, vllm_source=args.vllm,
                                                           schedule=builders["scheduler"])
            builders["plugin_class"] = vllm_builder.builder_class(
                builders["chain_module"].DeepseekV41RocmMxfp4IndexerMetadataBuilder)
        except Exception:  # the file and build() are still timed; the failure is printed
            traceback.print_exc()
            print("vLLM's chain could not be loaded (above): it is not timed")
            builders.pop("chain_module", None)
    print(f"host microseconds a step, median of {args.rounds} alternated rounds of {args.steps} steps; "
          f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    header = f"{'step':<12} {'file':>7} {'build':>6} {'ratio':>6} | {'empty':>5} {'b-e':>5}"
    if args.vllm:
        header += f" | {'chain':>7} {'plugin':>7} {'ch/plug':>7} {'ch/build':>8}"
    print(header + f" | {'read+plan':>9} {'launch':>6} {'objects':>7}")
    rows = []
    for name, qsl, lens in CASES:
        r = bench_case(name, qsl, lens, g, builders, args.steps, args.rounds)
        rows.append(r)
        line = (f"{name:<12} {r['file_us']:7.1f} {r['build_us']:6.2f} {r['file_over_build']:5.1f}x | "
                f"{r['empty_us']:5.2f} {r['build_over_empty_us']:5.2f}")
        if args.vllm:
            line += (f" | {r['chain_us']:7.1f} {r['plugin_us']:7.2f} {r['chain_over_plugin']:6.1f}x "
                     f"{r['chain_over_build']:7.1f}x" if "chain_us" in r else " |" + " " * 33)
        print(line + f" | {r['read_and_plan_us']:9.2f} {r['launch_us']:6.2f} {r['objects_us']:7.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(dict(device=torch.cuda.get_device_name(), torch=torch.__version__,
                                                   steps=args.steps, rounds=args.rounds, vllm=args.vllm,
                                                   aiter=args.aiter, rows=rows), indent=1))


if __name__ == "__main__":
    main()
