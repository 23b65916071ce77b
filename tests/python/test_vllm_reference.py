# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""idxplan.vllm against vLLM's own builder: with IDXPLAN_REFERENCE=<path to vLLM's
rocm_paged_mxfp4_indexer.py>, the reference's builder (loaded by
benchmarks/python/vllm_reference.py, vLLM's imports stubbed) runs on the same torch
tensors as build(), on the CPU and, where there is one, on the GPU, and every field
it produces is compared. Skipped without the path or torch."""

import os
import pathlib
import sys

import numpy as np
import pytest

import idxplan
from idxplan import vllm
from steps import CONFIGS, random_step, rng_for, torch_step

torch = pytest.importorskip("torch")
REFERENCE = os.environ.get("IDXPLAN_REFERENCE")
STEPS = int(os.environ.get("IDXPLAN_PY_GPU_STEPS", "300"))
pytestmark = pytest.mark.skipif(REFERENCE is None,
                                reason="IDXPLAN_REFERENCE (vLLM's rocm_paged_mxfp4_indexer.py) not set")
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.skipif(
    not (idxplan.has_device and torch.cuda.is_available()), reason="no GPU, or no device part"))]

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "python"))
import vllm_reference  # noqa: E402


def synchronize(device):
    if device == "cuda":
        torch.cuda.synchronize()


@pytest.mark.parametrize("device", DEVICES)
def test_the_references_own_builder_gives_the_same_fields(device):
    rng = rng_for(31337)
    counts = dict(steps=0, compared=0, trimmed=0, reference_raised=0, native=0, padded_native=0, chunks=0,
                  gathers=0)
    for k, c in enumerate(CONFIGS):
        g = idxplan.make_geometry(**c)
        ref = vllm_reference.make_builder(vllm_reference.load(REFERENCE, g), g, device)
        builder = vllm.MetadataBuilder(g, device)
        for _ in range(STEPS // len(CONFIGS) + 1):
            step = random_step(c, rng)
            cm = torch_step(step, device)
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
            synchronize(device)
            trimmed = compare_with_reference(m, r, cm)
            counts["trimmed" if trimmed else "compared"] += 1
            counts["native"] += m.decode_native is not None
            counts["padded_native"] += m.decode_native is not None and bool(
                (cm.query_start_loc_cpu[1:m.num_decodes + 1] == cm.query_start_loc_cpu[:m.num_decodes]).any())
            counts["chunks"] += len(m.prefill_plans)
            counts["gathers"] += len(m.gather_launches)
    print(f"reference comparison on {device}:", counts)
    assert counts["compared"] >= STEPS // 2 and counts["padded_native"] >= STEPS // 30, counts


@pytest.mark.parametrize("device", DEVICES)
def test_the_reference_names_the_wrong_rows_after_an_empty_request(device):
    # docs/vllm.md: the reference's chunk [20, 30) indexes the base chunk's block
    # table (from request 1) with requests counted from request 2.
    from test_vllm import TRIM_STEP

    g = idxplan.make_geometry(**CONFIGS[0])
    ref = vllm_reference.make_builder(vllm_reference.load(REFERENCE, g), g, device)
    cm = torch_step(TRIM_STEP, device)
    ref.prepare(cm)
    r = ref.build(0, cm)
    i = next(i for i, c in enumerate(r.prefill.chunks) if c.token_start == 20)
    p, c = r.prefill_plans[i], r.prefill.chunks[i]
    assert p.first_request == 2 and p.requests == [(0, 5, 0), (5, 10, 1)] and p.width == 100
    assert c.block_table[:, 0].tolist() == [1, 2, 3]  # rows 0 and 1 name requests 1 and 2
    assert p.context_lens.tolist() == [50, 75, 100]
    m = vllm.MetadataBuilder(g, device).build(0, cm)
    assert m.prefill.chunks[i].block_table[:, 0].tolist() == [2, 3] and m.prefill_plans[i].width == 75


def equal(a, b, what):
    if a is None or b is None:
        assert a is None and b is None, what
        return
    assert torch.equal(a.to(torch.int32).cpu().reshape(-1), b.to(torch.int32).cpu().reshape(-1)), what


def compare_with_reference(m, r, cm):
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
            # Rows of requests with query rows only: an empty request (vLLM's
            # graph padding) has context 0, so no launch reads its row; the
            # reference's is zeros, idxplan's the engine's row (docs/vllm.md).
            live = m.decode_native.context_lens.new_tensor(np.diff(cm.query_start_loc_cpu[:m.num_decodes + 1].numpy()) > 0,
                                                          dtype=torch.bool)
            equal(m.decode_native.block_table[live], r.decode_native.block_table[live.to(r.decode_native.block_table.device)],
                  "decode_native.block_table")
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
