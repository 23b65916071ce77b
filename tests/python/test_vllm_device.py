# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""idxplan.vllm on a GPU: build() on torch CUDA tensors equals the CPU builder's
objects word for word on random steps, every tensor a view of the builder's buffers
or of the engine's tensors; and with IDXPLAN_REFERENCE=<path to vLLM's
rocm_paged_mxfp4_indexer.py>, the reference's own builder, run on the same CUDA
tensors, produces the same fields. Skipped without a GPU, torch or a device build."""

import dataclasses
import os
import pathlib
import sys

import numpy as np
import pytest

import idxplan
from idxplan import vllm
from steps import CONFIGS, random_step, rng_for

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not (idxplan.has_device and torch.cuda.is_available()),
                                reason="no GPU, or idxplan built without a device part")

STEPS = int(os.environ.get("IDXPLAN_PY_GPU_STEPS", "300"))
REFERENCE = os.environ.get("IDXPLAN_REFERENCE")


def common_attn_metadata(step, device):
    """The step as vLLM's CommonAttentionMetadata carries it, its device tensors on ``device``."""
    num_reqs = len(step["seq_lens"])
    qsl = torch.tensor(step["query_start_loc"], dtype=torch.int32)
    table = torch.tensor(step["block_table"], dtype=torch.int32).reshape(num_reqs, step["stride"])
    return dataclasses.make_dataclass("CommonAttentionMetadata", [
        "num_reqs", "num_actual_tokens", "query_start_loc", "query_start_loc_cpu", "seq_lens",
        "seq_lens_cpu_upper_bound", "block_table_tensor", "max_seq_len", "slot_mapping"])(
        num_reqs=num_reqs,
        num_actual_tokens=step["num_tokens"] if step["num_tokens"] is not None else int(qsl[-1]),
        query_start_loc=qsl.to(device), query_start_loc_cpu=qsl,
        seq_lens=torch.tensor(step["seq_lens"], dtype=torch.int32, device=device),
        seq_lens_cpu_upper_bound=torch.tensor(step["seq_lens_upper_bound"], dtype=torch.int32),
        block_table_tensor=table.to(device), max_seq_len=max(step["seq_lens_upper_bound"], default=0),
        slot_mapping=None)


def same(a, b, path="metadata"):
    """Asserts a (device build) and b (CPU build) hold the same values everywhere."""
    if isinstance(a, torch.Tensor):
        assert isinstance(b, torch.Tensor) and a.shape == b.shape, path
        assert torch.equal(a.cpu(), b), path
    elif dataclasses.is_dataclass(a):
        assert type(a) is type(b), path
        for f in dataclasses.fields(a):
            same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            same(x, y, f"{path}[{i}]")
    else:
        assert a == b, f"{path}: {a!r} != {b!r}"


def tensors_of(obj, path="metadata"):
    if isinstance(obj, torch.Tensor):
        yield path, obj
    elif dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            yield from tensors_of(getattr(obj, f.name), f"{path}.{f.name}")
    elif isinstance(obj, list):
        for i, item in enumerate(obj):
            yield from tensors_of(item, f"{path}[{i}]")


def inside(t, owners):
    lo = t.data_ptr()
    hi = lo + t.numel() * t.element_size()
    return any(o.data_ptr() <= lo and hi <= o.data_ptr() + o.numel() * o.element_size() for o in owners)


def test_device_build_equals_the_cpu_build_and_copies_nothing():
    rng = rng_for(2718)
    pairs = []
    for c in CONFIGS:
        g = idxplan.make_geometry(**c)
        pairs.append((vllm.MetadataBuilder(g, "cuda"), vllm.MetadataBuilder(g, "cpu")))
    for i in range(STEPS):
        k = i % len(CONFIGS)
        gpu, cpu = pairs[k]
        step = random_step(CONFIGS[k], rng)
        cm = common_attn_metadata(step, "cuda")
        m = gpu.build(0, cm)
        torch.cuda.synchronize()
        same(m, cpu.build(0, common_attn_metadata(step, "cpu")))
        owners = list(gpu.buffers.values()) + [cm.seq_lens, cm.query_start_loc, cm.block_table_tensor]
        for path, t in tensors_of(m):
            assert t.is_cuda and inside(t, owners), f"step {i}: {path} is a copy"


def test_build_runs_on_torchs_current_stream():
    g = idxplan.make_geometry(**CONFIGS[0])
    builder = vllm.MetadataBuilder(g, "cuda")
    step = dict(query_start_loc=[0, 2, 4], seq_lens=[900, 1000], seq_lens_upper_bound=[900, 1000],
                num_tokens=None, block_table=[[r] * 512 for r in range(2)], stride=512)
    cm = common_attn_metadata(step, "cuda")
    side, other = torch.cuda.Stream(), torch.cuda.Stream()
    builder.buffers["decode_row_lens"].fill_(-1)
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        torch.cuda._sleep(100_000_000)  # the side stream is busy; the build queues behind it
        m = builder.build(0, cm)
    with torch.cuda.stream(other):
        early = builder.buffers["decode_row_lens"][:4].cpu()
    assert not side.query() and early.tolist() == [-1] * 4  # not run yet: it waits on its stream
    side.synchronize()
    assert m.decode_row_lens.tolist() == [224, 225, 249, 250]


def test_tensors_on_another_device_or_the_host_are_refused():
    g = idxplan.make_geometry(**CONFIGS[0])
    builder = vllm.MetadataBuilder(g, "cuda")
    step = dict(query_start_loc=[0, 2, 4], seq_lens=[900, 1000], seq_lens_upper_bound=[900, 1000],
                num_tokens=None, block_table=[[r] * 512 for r in range(2)], stride=512)
    cm = common_attn_metadata(step, "cuda")
    cm.seq_lens = cm.seq_lens.cpu()
    with pytest.raises(ValueError, match="seq_lens must be on the builder's GPU 0 \\(it is in host memory\\)"):
        builder.build(0, cm)


@pytest.mark.skipif(REFERENCE is None, reason="IDXPLAN_REFERENCE (vLLM's rocm_paged_mxfp4_indexer.py) not set")
def test_the_references_own_builder_gives_the_same_fields():
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "python"))
    import vllm_reference

    rng = rng_for(31337)
    counts = dict(steps=0, compared=0, trimmed=0, reference_raised=0, native=0, chunks=0, gathers=0)
    for k, c in enumerate(CONFIGS):
        g = idxplan.make_geometry(**c)
        ref = vllm_reference.make_builder(vllm_reference.load(REFERENCE, g), g, "cuda")
        builder = vllm.MetadataBuilder(g, "cuda")
        for _ in range(STEPS // len(CONFIGS) + 1):
            step = random_step(c, rng)
            cm = common_attn_metadata(step, "cuda")
            counts["steps"] += 1
            ref.prepare(cm)
            try:
                r = ref.build(0, cm)
            except IndexError:
                # The reference's bisect past query_start_loc on an untrimmed
                # chunk (docs/vllm.md): idxplan plans the step.
                counts["reference_raised"] += 1
                builder.build(0, cm)
                continue
            m = builder.build(0, cm)
            torch.cuda.synchronize()
            trimmed = compare_with_reference(m, r)
            counts["trimmed" if trimmed else "compared"] += 1
            counts["native"] += m.decode_native is not None
            counts["chunks"] += len(m.prefill_plans)
            counts["gathers"] += len(m.gather_launches)
    print("reference comparison:", counts)
    assert counts["compared"] >= STEPS // 2, counts


@pytest.mark.skipif(REFERENCE is None, reason="IDXPLAN_REFERENCE (vLLM's rocm_paged_mxfp4_indexer.py) not set")
def test_the_reference_names_the_wrong_rows_after_an_empty_request():
    # docs/vllm.md: the reference's chunk [20, 30) indexes the base chunk's block
    # table (from request 1) with requests counted from request 2.
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "python"))
    import vllm_reference
    from test_vllm import TRIM_STEP

    g = idxplan.make_geometry(**CONFIGS[0])
    ref = vllm_reference.make_builder(vllm_reference.load(REFERENCE, g), g, "cuda")
    cm = common_attn_metadata(TRIM_STEP, "cuda")
    ref.prepare(cm)
    r = ref.build(0, cm)
    i = next(i for i, c in enumerate(r.prefill.chunks) if c.token_start == 20)
    p, c = r.prefill_plans[i], r.prefill.chunks[i]
    assert p.first_request == 2 and p.requests == [(0, 5, 0), (5, 10, 1)] and p.width == 100
    assert c.block_table[:, 0].tolist() == [1, 2, 3]  # rows 0 and 1 name requests 1 and 2
    assert p.context_lens.tolist() == [50, 75, 100]
    m = vllm.MetadataBuilder(g, "cuda").build(0, cm)
    assert m.prefill.chunks[i].block_table[:, 0].tolist() == [2, 3] and m.prefill_plans[i].width == 75


def equal(a, b, what):
    if a is None or b is None:
        assert a is None and b is None, what
        return
    assert torch.equal(a.to(torch.int32).cpu().reshape(-1), b.to(torch.int32).cpu().reshape(-1)), what


def compare_with_reference(m, r):
    """Compares idxplan's metadata with the reference's; returns whether a chunk was
    trimmed (docs/vllm.md), where only the rows and their bounds are compared."""
    assert (m.num_decodes, m.num_decode_tokens, m.num_prefills, m.num_prefill_tokens) == (
        r.num_decodes, r.num_decode_tokens, r.num_prefills, r.num_prefill_tokens)
    if r.decode is not None:
        equal(m.decode_row_lens, r.decode_row_lens, "decode_row_lens")
        equal(m.decode_block_ends, r.decode_block_ends, "decode_block_ends")
        assert m.decode_use_gather == r.decode_use_gather
        assert (m.decode_native is None) == (r.decode_native is None)
        if r.decode_native is not None:
            assert m.decode_native.next_n == r.decode_native.next_n
            equal(m.decode_native.context_lens, r.decode_native.context_lens, "decode_native.context_lens")
            equal(m.decode_native.block_table, r.decode_native.block_table, "decode_native.block_table")
    assert len(m.prefill_plans) == len(r.prefill_plans)
    trimmed = any((p.first_request, p.context_lens.shape[0]) != (q.first_request, q.context_lens.shape[0])
                  for p, q in zip(m.prefill_plans, r.prefill_plans))
    for i, (p, q) in enumerate(zip(m.prefill_plans, r.prefill_plans)):
        c, d = m.prefill.chunks[i], r.prefill.chunks[i]
        assert (c.token_start, c.token_end) == (d.token_start, d.token_end)
        equal(p.row_ends, q.row_ends, f"prefill_plans[{i}].row_ends")
        equal(p.block_ends, q.block_ends, f"prefill_plans[{i}].block_ends")
        if trimmed:
            continue
        assert p.requests == q.requests and p.width == q.width and p.use_gather == q.use_gather
        equal(p.context_lens, q.context_lens, f"prefill_plans[{i}].context_lens")
        equal(p.query_start_loc, q.query_start_loc, f"prefill_plans[{i}].query_start_loc")
        equal(c.block_table, d.block_table, f"prefill.chunks[{i}].block_table")
        equal(c.cu_seqlen_ks, d.cu_seqlen_ks, f"prefill.chunks[{i}].cu_seqlen_ks")
        equal(c.cu_seqlen_ke, d.cu_seqlen_ke, f"prefill.chunks[{i}].cu_seqlen_ke")
    if not trimmed:
        assert len(m.gather_launches) == len(r.gather_launches)
        for i, (a, b) in enumerate(zip(m.gather_launches, r.gather_launches)):
            assert (a.token_start, a.token_end) == (b.token_start, b.token_end)
            equal(a.row_ends, b.row_ends, f"gather_launches[{i}].row_ends")
            equal(a.context_len, b.context_len, f"gather_launches[{i}].context_len")
            equal(a.block_table, b.block_table, f"gather_launches[{i}].block_table")
    return trimmed
