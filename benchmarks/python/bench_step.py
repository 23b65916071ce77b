# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""Host and GPU time per step from Python: idxplan (Planner.plan + enqueue) against
the same buffers built the way a Python metadata builder does today, with torch
operations on the GPU (one or a few per buffer and per chunk, the decode schedule
as tensor ops) and the prefill split in Python. Both run in one process, side by
side; the baseline's buffers are checked against idxplan's before timing.

    PYTHONPATH=<build>/python python3 benchmarks/python/bench_step.py [--json out.json]

Host time is wall time per step of the step's calls with the GPU left to run behind
(no synchronisation inside the timed loop); GPU time is 20 steps captured in one CUDA
graph and replayed between CUDA events. Medians over repeats."""

import argparse
import json
import statistics
import time

import numpy as np
import torch

import idxplan

STEPS = 200     # steps a timing covers
REPEATS = 9     # timings a median is taken over
GRAPH_STEPS = 20  # steps one CUDA graph holds, for the GPU time


def spread_context(r):
    return 1024 + (r * 104729) % (200000 - 1024)


def mtp_decodes(n):
    qsl = [2 * r for r in range(n + 1)]
    return qsl, [spread_context(r) for r in range(n)]


def mixed_1024():
    qsl, lens = mtp_decodes(1016)
    qsl.append(qsl[-1] + 8192)
    lens.append(1048576)
    for r in range(7):
        qsl.append(qsl[-1] + 200 + 300 * r)
        lens.append(200 + 300 * r)
    return qsl, lens


class TorchBuilder:
    """The step buffers the way a Python builder makes them: Python planning on the
    host, torch operations on the GPU. Buffers are preallocated once, as vLLM's are."""

    def __init__(self, geometry, block_table):
        c = geometry.config
        self.g = geometry
        self.C = c["compress_ratio"]
        self.threshold = geometry.decode_threshold
        self.next_n = geometry.native_next_n
        self.block = c["candidate_block_size"]
        self.block_size = c["block_size"]
        self.max_bytes = geometry.max_logits_bytes
        self.block_table = block_table
        sizes = idxplan.step_buffer_sizes(geometry)
        dev = block_table.device
        self.out = {name: torch.zeros(words, dtype=torch.int32, device=dev) for name, words in sizes.items()}
        self.arange = torch.arange(max(sizes["prefill_row_ends"], sizes["decode_schedule"]), dtype=torch.int32,
                                   device=dev)

    def split(self, contexts, query_lens):
        """The reference's split_prefill_chunks, in Python."""
        def max_rows(width):
            return max(1, self.max_bytes // (4 * max(width, 1)))
        chunks, end = [], 0
        while end < len(contexts):
            start, rows, width = end, 0, 0
            while end < len(contexts):
                q, w = query_lens[end], max(width, contexts[end])
                if rows and rows + q > max_rows(w):
                    break
                rows, width, end = rows + q, w, end + 1
            step = max_rows(width)
            chunks += [(start, end, lo, min(lo + step, rows)) for lo in range(0, rows, step)]
        return chunks

    def schedule(self, seq_lens, shape):
        """aiter's scheduler rules over native units, as torch operations."""
        n, block_m, row_blocks = shape.rows_per_seq, shape.block_m, shape.row_blocks
        units = self.arange[:shape.work]
        seq = units // row_blocks
        blk = units % row_blocks
        first_row = blk if block_m == 1 else torch.clamp(torch.clamp(blk * block_m, max=n - block_m), min=0)
        rows = torch.clamp(n - first_row, max=block_m)
        lens = seq_lens[seq.long()]
        end = torch.clamp(lens - n + first_row + rows, min=0) // self.C
        ctx = lens // self.C
        keys = torch.minimum(ctx, end)
        tiles = torch.where(ctx > 0, torch.clamp((keys + shape.block_kv - 1) // shape.block_kv, min=1), 0)
        total, live, biggest = tiles.sum(), (tiles > 0).sum(), tiles.max()
        spare = shape.num_ctas - live
        per_slice = torch.clamp((total + torch.clamp(spare, min=1) - 1) // torch.clamp(spare, min=1), 1,
                                shape.max_tiles)
        share = torch.clamp(torch.clamp(spare, min=0) // torch.clamp(live, min=1), min=1)
        per_slice = torch.maximum(per_slice, (biggest + share * 4 - 1) // (share * 4))
        slices = torch.clamp((tiles + per_slice - 1) // per_slice, max=65536).to(torch.int32)
        ends = torch.cumsum(slices, 0, dtype=torch.int32)
        slots = self.arange[:shape.num_ctas]
        unit = torch.clamp(torch.searchsorted(ends, slots, right=True), max=shape.work - 1)
        first = ends[unit] - slices[unit]
        live_slot = slots < ends[-1]
        words = torch.stack([seq[unit], blk[unit], slots - first, slices[unit]], dim=1)
        self.out["decode_schedule"][:4 * shape.num_ctas].view(-1, 4).copy_(
            torch.where(live_slot[:, None], words, torch.zeros_like(words)))

    def step(self, qsl_cpu, seq_lens_cpu, qsl_gpu, seq_lens_gpu):
        out = self.out
        qsl = qsl_cpu.tolist()
        lens_host = seq_lens_cpu.tolist()
        num_reqs = len(lens_host)
        query_lens = [qsl[r + 1] - qsl[r] for r in range(num_reqs)]
        num_decodes = next((r for r, q in enumerate(query_lens) if q > self.threshold), num_reqs)
        num_decode_tokens = qsl[num_decodes]
        torch.floor_divide(seq_lens_gpu, self.C, out=out["context_lens"][:num_reqs])
        if num_decodes:
            rows = num_decode_tokens
            native = all(q == self.next_n for q in query_lens[:num_decodes]) and self.next_n > 1
            # Decode rows: each row's request, position and length.
            req = torch.repeat_interleave(self.arange[:num_decodes], qsl_gpu[1:num_decodes + 1] - qsl_gpu[:num_decodes],
                                          output_size=rows)
            pos = self.arange[:rows] - qsl_gpu[req.long()]
            q_of = (qsl_gpu[1:num_decodes + 1] - qsl_gpu[:num_decodes])[req.long()]
            row_lens = out["decode_row_lens"][:rows]
            torch.floor_divide(torch.clamp(seq_lens_gpu[req.long()] - q_of + pos + 1, min=0), self.C, out=row_lens)
            if self.block:
                torch.floor_divide(row_lens + self.block - 1, self.block, out=out["decode_block_ends"][:rows])
            cols = -(-max(lens_host[:num_decodes]) // self.block_size)
            out["decode_block_table"][:rows, :cols].copy_(self.block_table[req.long(), :cols])
            # Native sequences only: the benchmark's steps are MTP decodes.
            shape = Shape(self.g, num_decodes, self.next_n) if native else None
            if shape is not None:
                self.schedule(seq_lens_gpu, shape)
        if num_decodes < num_reqs:
            first_t = num_decode_tokens
            tokens = qsl[-1] - first_t
            req = torch.repeat_interleave(self.arange[num_decodes:num_reqs],
                                          qsl_gpu[num_decodes + 1:] - qsl_gpu[num_decodes:num_reqs],
                                          output_size=tokens)
            pos = self.arange[first_t:first_t + tokens] - qsl_gpu[req.long()]
            q_of = (qsl_gpu[1:] - qsl_gpu[:-1])[req.long()]
            ends = out["prefill_row_ends"][:tokens]
            torch.floor_divide(torch.clamp(seq_lens_gpu[req.long()] - q_of + pos + 1, min=0), self.C, out=ends)
            if self.block:
                torch.floor_divide(ends + self.block - 1, self.block, out=out["prefill_block_ends"][:tokens])
            contexts = [l // self.C for l in lens_host[num_decodes:]]
            offset = 0
            for start, end, lo, hi in self.split(contexts, query_lens[num_decodes:]):
                first, last = start + num_decodes, end + num_decodes
                t0, t1 = qsl[first] + lo, qsl[first] + hi
                while qsl[first + 1] <= t0:  # the owners of the chunk's first and last rows
                    first += 1
                while qsl[last - 1] >= t1:
                    last -= 1
                if sum(lens_host[r] // self.C for r in range(first, last)) == 0:
                    continue
                packed = out["prefill_query_start_loc"][offset:offset + last - first + 1]
                torch.sub(torch.clamp(qsl_gpu[first:last + 1], t0, t1), t0, out=packed)
                offset += last - first + 1


def preferred_block_m(heads, rows):
    """aiter's rows per workgroup (docs/design.md section 4), before clamping to ``rows``."""
    few = heads <= 32
    if rows >= 512:
        return 3 if few else 1
    if 2 <= rows <= 8:
        cap = 7 if few else (3 if rows <= 6 else 2)
        return min(range(1, cap + 1), key=lambda b: (-(-rows // b), b * -(-rows // b), b))
    if few and rows > 8:
        return 3 if rows < 64 else 4
    if not few and rows >= 2:
        return 2
    return 1


class Shape:
    """The decode schedule's shape by aiter's host rules (docs/design.md sections 4 and 5.4), or None."""

    def __new__(cls, geometry, num_seqs, rows):
        c = geometry.config
        block_m = max(1, min(preferred_block_m(c["num_heads"], rows), rows))
        row_blocks = -(-rows // block_m)
        waves = 3 if rows >= 512 or (c["num_heads"] > 32 and rows == 1) else 2
        target = 4 * c["num_compute_units"] * waves
        work = num_seqs * row_blocks
        if num_seqs < 4 or work > target:
            return None
        self = super().__new__(cls)
        block_kv = geometry.cache.block_kv
        n_tiles = max(1, -(-geometry.logits_width // block_kv))
        cap = 128 if rows == 1 else 64
        plain = max(1, -(-(n_tiles * work) // max(target - work, 1)))
        if plain < 4 * cap:
            cap = plain
        per_unit = -(-n_tiles // cap)
        self.num_ctas = max(target, min(work * per_unit, 65536))
        self.max_tiles = max(cap, -(-(n_tiles * work) // max(self.num_ctas - work, 1)))
        self.rows_per_seq, self.block_m, self.row_blocks = rows, block_m, row_blocks
        self.work, self.block_kv = work, block_kv
        return self


def median_host_us(run, stream):
    """Host microseconds per step: wall time of STEPS calls with the GPU left to run
    behind (no synchronisation inside the timed loop), median over REPEATS."""
    host = []
    for rep in range(REPEATS + 2):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(STEPS):
            run(stream.cuda_stream)
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        if rep >= 2:  # warm-ups
            host.append(1e6 * (t1 - t0) / STEPS)
    return statistics.median(host)


def median_gpu_us(run):
    """GPU microseconds per step: GRAPH_STEPS copies of one step's launches captured in
    one CUDA graph, replayed between events for STEPS steps in all, median over
    REPEATS. The host is then out of the way: a graph of one step would time Python's
    replay() calls instead, which take longer than idxplan's step takes on the GPU."""
    graph = torch.cuda.CUDAGraph()
    capture = torch.cuda.Stream()
    with torch.cuda.stream(capture):
        run(capture.cuda_stream)  # warm-up on the capture stream
        torch.cuda.synchronize()
        with torch.cuda.graph(graph, stream=capture):
            for _ in range(GRAPH_STEPS):
                run(capture.cuda_stream)
    gpu = []
    for rep in range(REPEATS + 2):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(STEPS // GRAPH_STEPS):
            graph.replay()
        stop.record()
        torch.cuda.synchronize()
        if rep >= 2:
            gpu.append(1e3 * start.elapsed_time(stop) / STEPS)
    return statistics.median(gpu)


def bench_case(name, qsl_list, lens_list, compute_units):
    config = idxplan.deepseek_v41_config(compute_units)
    config.update(max_num_seqs=4096, max_num_batched_tokens=32768)
    g = idxplan.make_geometry(**config)
    num_reqs = len(lens_list)
    qsl_cpu = torch.tensor(qsl_list, dtype=torch.int32)
    lens_cpu = torch.tensor(lens_list, dtype=torch.int32)
    qsl_np, lens_np = qsl_cpu.numpy(), lens_cpu.numpy()
    block_table = torch.randint(0, 1 << 20, (num_reqs, g.max_blocks_per_seq), dtype=torch.int32, device="cuda")
    inputs = idxplan.StepInputs(seq_lens=lens_cpu.cuda(), query_start_loc=qsl_cpu.cuda(), block_table=block_table)
    outputs = idxplan.step_outputs(g, lambda shape: torch.zeros(shape, dtype=torch.int32, device="cuda"))
    planner = idxplan.Planner(g)
    stream = torch.cuda.current_stream()

    def ours(handle):
        plan = planner.plan(qsl_np, lens_np)
        idxplan.enqueue(g, plan, inputs, outputs, handle)

    builder = TorchBuilder(g, block_table)

    def baseline(_handle):  # torch launches on its current stream
        builder.step(qsl_cpu, lens_cpu, inputs.query_start_loc, inputs.seq_lens)

    # The baseline writes what idxplan writes (it would be no baseline otherwise).
    ours(stream.cuda_stream)
    baseline(stream.cuda_stream)
    torch.cuda.synchronize()
    plan = planner.plan(qsl_np, lens_np)
    checks = {"context_lens": plan.num_reqs, "decode_row_lens": plan.decode.num_rows,
              "decode_block_ends": plan.decode.num_rows, "prefill_row_ends": plan.num_prefill_tokens,
              "prefill_block_ends": plan.num_prefill_tokens,
              "prefill_query_start_loc": plan.num_prefill_query_start_loc_words,
              "decode_schedule": 4 * (plan.decode.schedule.num_ctas if plan.decode.schedule else 0)}
    for buffer, words in checks.items():
        assert torch.equal(outputs[buffer][:words], builder.out[buffer][:words]), (name, buffer)

    ours_host, base_host = median_host_us(ours, stream), median_host_us(baseline, stream)
    ours_gpu, base_gpu = median_gpu_us(ours), median_gpu_us(baseline)
    return dict(step=name, requests=num_reqs, ours_host_us=ours_host, ours_gpu_us=ours_gpu,
                torch_host_us=base_host, torch_gpu_us=base_gpu, host_ratio=base_host / ours_host)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", help="also write the table here")
    args = parser.parse_args()
    cases = [("decode_4", *mtp_decodes(4)), ("decode_64", *mtp_decodes(64)), ("decode_256", *mtp_decodes(256)),
             ("decode_1024", *mtp_decodes(1024)), ("mixed_1024", *mixed_1024())]
    print(f"median microseconds per step over {STEPS} steps, {REPEATS} timings; "
          f"{torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"{'step':<12} {'idxplan host':>12} {'torch host':>11} {'ratio':>7} | {'idxplan GPU':>11} {'torch GPU':>10}")
    rows = []
    for name, qsl, lens in cases:
        r = bench_case(name, qsl, lens, 256)
        rows.append(r)
        print(f"{name:<12} {r['ours_host_us']:12.2f} {r['torch_host_us']:11.2f} {r['host_ratio']:6.1f}x | "
              f"{r['ours_gpu_us']:11.2f} {r['torch_gpu_us']:10.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
