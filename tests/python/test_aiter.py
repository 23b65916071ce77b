# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""idxplan.aiter: aiter main's two FlyDSL FP4 schedule functions as drop-ins.

On CPU tensors, worked examples and aiter's refusals; on a GPU, the launch against
the CPU fill and inside a CUDA graph; with IDXPLAN_AITER=<aiter checkout>, against
aiter's own compute_varctx_schedule and compute_prefill_schedule (Triton, compiled
from aiter's files by benchmarks/python/aiter_fp4.py) on IDXPLAN_PY_GPU_STEPS random
steps (300) and, with IDXPLAN_TRACE_STEPS=<`idxplan replay --dump-steps` file>, on
every step of that trace, word for word. Skipped without torch."""

import json
import os
import pathlib
import sys

import numpy as np
import pytest

import idxplan

torch = pytest.importorskip("torch")
from idxplan import aiter  # noqa: E402

AITER = os.environ.get("IDXPLAN_AITER")
TRACE_STEPS = os.environ.get("IDXPLAN_TRACE_STEPS")
STEPS = int(os.environ.get("IDXPLAN_PY_GPU_STEPS", "300"))
GPU = idxplan.has_device and torch.cuda.is_available()
gpu = pytest.mark.skipif(not GPU, reason="no GPU, or no device part")
with_aiter = pytest.mark.skipif(AITER is None or not GPU, reason="IDXPLAN_AITER (an aiter checkout) not set, or no GPU")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "python"))


def i32(values, device="cpu"):
    return torch.tensor(values, dtype=torch.int32, device=device)


def test_the_decode_schedule_of_a_worked_example():
    # Chunks of 256 keys: 2, 0 and 4; four CTAs take two chunks each.
    safe, info, ctas = aiter.compute_varctx_schedule(i32([300, 0, 1000]), 256, 4, 1024)
    assert ctas == 4
    assert safe.dtype == torch.int32 and safe.shape == (1,) and safe.tolist() == [2]
    assert info.dtype == torch.int32 and info.shape == (4, 4)
    assert info.tolist() == [[0, 0, 2, 300], [2, 0, 2, 1000], [2, 2, 2, 1000], [0, 0, 1, 0]]


def test_the_decode_schedule_repeats_a_split_for_each_of_next_n_rows():
    safe, info, ctas = aiter.compute_varctx_schedule(i32([600]), 256, 4, 512, next_n=2)
    assert (safe.tolist(), ctas) == ([2], 4)
    assert info.tolist() == [[0, 0, 2, 600], [1, 0, 2, 600], [0, 2, 1, 600], [1, 2, 1, 600]]


def test_no_parallel_unit_num_is_a_cta_for_every_chunk_a_row_can_have():
    safe, info, ctas = aiter.compute_varctx_schedule(i32([300, 5]), 256, None, 1000, next_n=2)
    assert ctas == 2 * 2 * 4 and info.shape == (16, 4) and safe.tolist() == [1]


def test_the_prefill_schedule_of_a_worked_example():
    safe, info, ctas = aiter.compute_prefill_schedule(i32([3, 3, 4]), i32([0, 5, 7]), i32([0, 300, 513]), 256, 4, 1024)
    assert ctas == 4
    assert safe.dtype == torch.int32 and safe.shape == () and int(safe) == 2  # 0-dim, as aiter's
    assert info.shape == (4, 6)
    assert info.tolist() == [[1, 3, 0, 2, 5, 300], [2, 4, 0, 2, 7, 513], [2, 4, 2, 1, 7, 513], [0, 0, 0, 1, 0, 0]]


def test_an_out_buffer_is_the_tensor_returned_and_only_its_rows_are_written():
    out = torch.full((6, 4), -7, dtype=torch.int32)
    _, info, _ = aiter.compute_varctx_schedule(i32([300]), 256, 2, 1024, cta_info_out=out)
    assert info is out
    assert out.tolist() == [[0, 0, 1, 300], [0, 1, 1, 300]] + [[-7] * 4] * 4
    prefill_out = torch.full((3, 6), -7, dtype=torch.int32)
    _, info, _ = aiter.compute_prefill_schedule(i32([0]), i32([0]), i32([10]), 256, 2, 64, cta_info_out=prefill_out)
    assert info is prefill_out and prefill_out[2].tolist() == [-7] * 6


def test_lengths_of_other_integer_types_or_strides_are_read_as_aiter_converts_them():
    wide = torch.tensor([300, 0, 1000], dtype=torch.int64)
    strided = i32([300, 99, 0, 99, 1000, 99])[::2]
    for lengths in (wide, strided):
        _, info, _ = aiter.compute_varctx_schedule(lengths, 256, 4, 1024)
        assert info[1].tolist() == [2, 0, 2, 1000]


def test_what_aiter_refuses_is_refused_by_name():
    with pytest.raises(ValueError, match="parallel_unit_num=5 must be a multiple of next_n=2"):
        aiter.compute_varctx_schedule(i32([1, 2]), 256, 5, 1024, next_n=2)
    with pytest.raises(ValueError, match=r"parallel_unit_num // next_n = 2 < batches=3 would drop batches"):
        aiter.compute_varctx_schedule(i32([1, 2, 3]), 256, 4, 1024, next_n=2)
    with pytest.raises(ValueError, match="parallel_unit_num=2 < rows=3 would drop rows"):
        aiter.compute_prefill_schedule(i32([0, 0, 0]), i32([0, 0, 0]), i32([1, 2, 3]), 256, 2, 1024)


def test_arguments_aiter_would_misread_are_refused_by_name():
    with pytest.raises(ValueError, match=r"cta_info_out must be a contiguous int32 \[4, 4\] tensor"):
        aiter.compute_varctx_schedule(i32([1]), 256, 4, 1024, cta_info_out=torch.zeros((3, 4), dtype=torch.int32))
    with pytest.raises(ValueError, match="cta_info_out must hold int32"):
        aiter.compute_varctx_schedule(i32([1]), 256, 4, 1024, cta_info_out=torch.zeros((4, 4)))
    with pytest.raises(ValueError, match="local_starts has 1 entries and local_ends 2"):
        aiter.compute_prefill_schedule(i32([0, 0]), i32([0]), i32([1, 2]), 256, 4, 1024)
    with pytest.raises(ValueError, match="context_lens must be 1-D"):
        aiter.compute_varctx_schedule(i32([[1, 2]]), 256, 4, 1024)
    with pytest.raises(ValueError, match="context_lens must be a torch tensor"):
        aiter.compute_varctx_schedule([1, 2], 256, 4, 1024)
    with pytest.raises(ValueError, match="block_k must be an integer"):
        aiter.compute_varctx_schedule(i32([1]), 256.0, 4, 1024)
    with pytest.raises(ValueError, match="block_k=0 is not a positive int32"):
        aiter.compute_varctx_schedule(i32([1]), 0, 4, 1024)


def random_lengths(rng, rows, longest):
    kind = rng.integers(0, 10, rows)
    lengths = rng.integers(0, max(longest, 1) + 1, rows)
    lengths = np.where(kind == 0, 0, lengths)
    lengths = np.where(kind == 1, -rng.integers(1, 600, rows), lengths)  # read as no chunk
    lengths = np.where(kind == 2, rng.integers(longest, 3 * longest + 2, rows), lengths)  # past max_seq_len
    return lengths.astype(np.int32)


def random_decode(rng):
    """Arguments of a random compute_varctx_schedule call, sglang's and others'."""
    next_n = int(rng.integers(1, 5)) if rng.integers(0, 3) == 0 else 1
    rows = int(rng.integers(0, 6000 if rng.integers(0, 8) == 0 else 300))
    max_seq_len = int(rng.integers(0, 300000))
    block_k = 256 if rng.integers(0, 4) else int(rng.integers(1, 300))
    ctas = next_n * (rows + int(rng.integers(0, 5000 if rng.integers(0, 2) else 5)))
    return random_lengths(rng, rows, max_seq_len), block_k, ctas, max_seq_len, next_n


def random_prefill(rng):
    rows = int(rng.integers(0, 20000 if rng.integers(0, 8) == 0 else 1500))
    max_seq_len = int(rng.integers(0, 100000))
    block_k = 256 if rng.integers(0, 4) else int(rng.integers(1, 300))
    ctas = max(rows, 1024 if rng.integers(0, 2) else rows + int(rng.integers(0, 4)))
    batches = rng.integers(0, 50, rows).astype(np.int32)
    starts = rng.integers(-3, 400, rows).astype(np.int32)
    return batches, starts, random_lengths(rng, rows, max_seq_len), block_k, ctas, max_seq_len


def as_tensors(args, device):
    return [i32(a, device) if isinstance(a, np.ndarray) else a for a in args]


def words(result):
    safe, info, ctas = result
    return int(safe.reshape(-1)[0]), info.cpu().tolist(), ctas


@gpu
def test_the_launch_writes_the_cpu_fills_words():
    rng = np.random.default_rng(4903)
    for _ in range(STEPS):
        decode = random_decode(rng)
        want = words(aiter.compute_varctx_schedule(*as_tensors(decode, "cpu")))
        assert words(aiter.compute_varctx_schedule(*as_tensors(decode, "cuda"))) == want
        prefill = random_prefill(rng)
        want = words(aiter.compute_prefill_schedule(*as_tensors(prefill, "cpu")))
        assert words(aiter.compute_prefill_schedule(*as_tensors(prefill, "cuda"))) == want


@gpu
def test_a_graph_replays_the_launch_on_new_lengths():
    lengths = i32([300, 0, 1000], "cuda")
    out = torch.empty((8, 4), dtype=torch.int32, device="cuda")
    ends = i32([0, 300, 513], "cuda")
    batches, starts = i32([3, 3, 4], "cuda"), i32([0, 5, 7], "cuda")
    prefill_out = torch.empty((4, 6), dtype=torch.int32, device="cuda")
    aiter.compute_varctx_schedule(lengths, 256, 8, 1024, cta_info_out=out)  # warm, outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        safe, _, _ = aiter.compute_varctx_schedule(lengths, 256, 8, 1024, cta_info_out=out)
        prefill_safe, _, _ = aiter.compute_prefill_schedule(batches, starts, ends, 256, 4, 1024, cta_info_out=prefill_out)
    for contexts, row_ends in (([5000, 2, 700], [1, 2, 3]), ([0, 0, 0], [4000, 0, 256])):
        lengths.copy_(i32(contexts))
        ends.copy_(i32(row_ends))
        graph.replay()
        torch.cuda.synchronize()
        want = words(aiter.compute_varctx_schedule(i32(contexts), 256, 8, 1024))
        assert (int(safe[0]), out.cpu().tolist()) == want[:2]
        want = words(aiter.compute_prefill_schedule(i32([3, 3, 4]), i32([0, 5, 7]), i32(row_ends), 256, 4, 1024))
        assert (int(prefill_safe), prefill_out.cpu().tolist()) == want[:2]


def aiter_functions():
    import aiter_fp4

    return aiter_fp4.load(AITER, specialize=False)


@with_aiter
def test_aiters_own_functions_write_the_same_words_on_random_steps():
    varctx, prefill = aiter_functions()
    rng = np.random.default_rng(4904)
    compared = 0
    for _ in range(STEPS):
        lengths, block_k, ctas, max_seq_len, next_n = random_decode(rng)
        # aiter's kernel holds every batch in one tile: past 1,024 its compile takes minutes.
        lengths = lengths[:1024]
        if (lengths <= -2 * block_k + 1).any():  # aiter's int32 rule counts negative chunks there
            lengths = np.maximum(lengths, 0)
        decode = (lengths, block_k, ctas, max_seq_len, next_n)
        want = words(varctx(*as_tensors(decode, "cuda")))
        assert words(aiter.compute_varctx_schedule(*as_tensors(decode, "cuda"))) == want
        assert words(aiter.compute_varctx_schedule(*as_tensors(decode, "cpu"))) == want
        batches, starts, ends, block_k, ctas, max_seq_len = random_prefill(rng)
        if len(ends) == 0:  # aiter raises on no rows
            continue
        if len(ends) * -(-max_seq_len // block_k) > 20_000_000:  # aiter's [s_max, rows] tensor
            block_k = 256
        args = (batches, starts, ends, block_k, ctas, max_seq_len)
        want = words(prefill(*as_tensors(args, "cuda")))
        assert words(aiter.compute_prefill_schedule(*as_tensors(args, "cuda"))) == want
        assert words(aiter.compute_prefill_schedule(*as_tensors(args, "cpu"))) == want
        compared += 1
    assert compared > STEPS // 2


def sglang_decode_ctas(rows, max_seq_len):
    """sglang's decode grid (fp4_indexer_hip.py): min(T * ceil(msl / 256), max(1024, 4T))."""
    return min(rows * max(1, -(-max_seq_len // 256)), max(1024, 4 * rows))


@with_aiter
@pytest.mark.skipif(TRACE_STEPS is None, reason="IDXPLAN_TRACE_STEPS (idxplan replay --dump-steps) not set")
def test_aiters_own_functions_write_the_same_words_on_every_step_of_a_trace():
    """Every step of the trace as sglang schedules it: the decode rows flattened, a
    context a row, and each prefill chunk's rows with their request and row end."""
    varctx, prefill = aiter_functions()
    decodes = prefills = 0
    for line in pathlib.Path(TRACE_STEPS).read_text().splitlines():
        request = json.loads(line)
        config = request["config"]
        plan = idxplan.plan_json(config, request["step"])
        width = config["max_model_len"] // config["compress_ratio"]
        rows = plan["decode"]["row_lens"] if plan.get("decode") else []
        if rows:
            args = (i32(rows, "cuda"), 256, sglang_decode_ctas(len(rows), width), width)
            assert words(aiter.compute_varctx_schedule(*args)) == words(varctx(*args))
            decodes += 1
        for chunk in plan["prefill"]:
            qsl = chunk["query_start_loc"]
            batch = np.repeat(np.arange(len(qsl) - 1), np.diff(qsl)).astype(np.int32)
            ends = np.array(chunk["row_ends"], dtype=np.int32)
            args = (i32(batch, "cuda"), i32(np.zeros_like(ends), "cuda"), i32(ends, "cuda"), 256,
                    max(1024, len(ends)), chunk["width"])
            assert words(aiter.compute_prefill_schedule(*args)) == words(prefill(*args))
            prefills += 1
    assert decodes > 100 and prefills > 100
