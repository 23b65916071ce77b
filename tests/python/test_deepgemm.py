# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""idxplan.deepgemm: DeepGEMM's get_paged_mqa_logits_metadata as a drop-in.

On CPU tensors, worked examples and DeepGEMM's refusals; on a GPU, the launch
against the CPU fill and inside a CUDA graph. Where ``deep_gemm`` imports (a
DeepGEMM build, IDXPLAN_DEEPGEMM=<its folder> put first on the path) and the GPU
is an SM90 one:

- against DeepGEMM's own metadata kernel, word for word, on IDXPLAN_PY_GPU_STEPS
  random steps (300) and, with IDXPLAN_TRACE_STEPS=<`idxplan replay --dump-steps`
  file>, on every decode step of that trace as vLLM's CUDA indexer passes it;
- DeepGEMM's fp8_paged_mqa_logits, the consumer, on random FP8 caches: the logits
  it computes from idxplan's metadata equal bit for bit those from its own.

On an empty DeepGEMM JIT cache (DG_JIT_CACHE_DIR) the comparisons first compile
about 35 of DeepGEMM's metadata kernels, one after another (DEEPGEMM_BATCHES).

Skipped without torch; the DeepGEMM tests say why they skip."""

import json
import os
import pathlib
import sys

import numpy as np
import pytest

import idxplan

torch = pytest.importorskip("torch")
from idxplan import deepgemm  # noqa: E402

STEPS = int(os.environ.get("IDXPLAN_PY_GPU_STEPS", "300"))
TRACE_STEPS = os.environ.get("IDXPLAN_TRACE_STEPS")
# DeepGEMM's own metadata kernel asks for 12 bytes of dynamic shared memory a
# sequence. Up to 4,096 sequences that is within the 48 KiB every launch may
# take, so a refusal there is a failure; past it the driver may refuse the
# opt-in (an H100 refused one of the random steps' large batches; the largest
# it takes is not known here). idxplan's launch takes up to 19,360.
DEEPGEMM_LAUNCHES = 4096
GPU = idxplan.has_device and torch.cuda.is_available()
gpu = pytest.mark.skipif(not GPU, reason="no GPU, or no device part")


def deep_gemm_module():
    """DeepGEMM's module, or the reason it is not here."""
    if not GPU:
        return None, "no GPU, or no device part"
    if torch.cuda.get_device_capability()[0] != 9:
        return None, "DeepGEMM's SM90 metadata needs an SM90 GPU"
    if os.environ.get("IDXPLAN_DEEPGEMM"):
        sys.path.insert(0, os.environ["IDXPLAN_DEEPGEMM"])
    try:
        import deep_gemm
    except ImportError as e:
        return None, f"deep_gemm does not import ({e}); set IDXPLAN_DEEPGEMM to a DeepGEMM build"
    return deep_gemm, ""


def i32(values, device="cpu"):
    return torch.tensor(values, dtype=torch.int32, device=device)


def test_the_first_sms_take_one_unit_more():
    # Splits of 256 keys: 2, 0 and 3; five units on four SMs.
    meta = deepgemm.get_paged_mqa_logits_metadata(i32([[300], [0], [700]]), 64, 4)
    assert meta.dtype == torch.int32 and meta.shape == (5, 2) and meta.device.type == "cpu"
    assert meta.tolist() == [[0, 0], [2, 0], [2, 1], [2, 2], [3, 0]]


def test_a_sequence_of_next_n_rows_is_its_last_columns_keys_in_two_row_atoms():
    meta = deepgemm.get_paged_mqa_logits_metadata(i32([[9, 9, 513], [9, 9, 256]]), 64, 3)
    assert meta.tolist() == [[0, 0], [1, 0], [2, 0], [4, 0]]


def test_what_deepgemm_refuses_on_sm90_is_refused_by_name():
    with pytest.raises(ValueError, match="block_kv=32; DeepGEMM's SM90 kernels take block_kv=64 only"):
        deepgemm.get_paged_mqa_logits_metadata(i32([[1]]), 32, 4)
    with pytest.raises(ValueError, match="context_lens must be a 2-D tensor, got 1 dimensions"):
        deepgemm.get_paged_mqa_logits_metadata(i32([1, 2]), 64, 4)
    with pytest.raises(ValueError, match="context_lens must hold int32, got torch.int64"):
        deepgemm.get_paged_mqa_logits_metadata(torch.tensor([[1]]), 64, 4)
    with pytest.raises(ValueError, match="context_lens must be contiguous"):
        deepgemm.get_paged_mqa_logits_metadata(i32([[1, 2], [3, 4], [5, 6]])[::2], 64, 4)
    with pytest.raises(ValueError, match="indices .varlen rows. is DeepGEMM's SM100 path"):
        deepgemm.get_paged_mqa_logits_metadata(i32([[1]]), 64, 4, indices=i32([0]))
    with pytest.raises(ValueError, match="num_sms=0 is not a positive int32"):
        deepgemm.get_paged_mqa_logits_metadata(i32([[1]]), 64, 0)
    with pytest.raises(ValueError, match="num_sms must be an integer"):
        deepgemm.get_paged_mqa_logits_metadata(i32([[1]]), 64, 4.0)
    with pytest.raises(ValueError, match="context_lens must be a torch tensor"):
        deepgemm.get_paged_mqa_logits_metadata([[1]], 64, 4)


# DeepGEMM compiles its metadata kernel once for each batch rounded up to 32
# and SM count it meets (csrc/jit_kernels/impls/smxx_fp8_fp4_paged_mqa_logits.hpp),
# seconds each: 300 steps of any shape would take many minutes on a fresh
# JIT cache. Steps for DeepGEMM's kernel draw their batch within 32 below one
# of these, and their SM count from these.
DEEPGEMM_BATCHES = (32, 64, 256, 608)
DEEPGEMM_SMS = (1, 7, 33, 78, 132, 264)


def random_step(rng, deepgemm_shapes=False):
    """context_lens [batch, next_n] of a random step, num_sms; with
    ``deepgemm_shapes``, of the shapes above (and now and then 19,360 sequences)."""
    if deepgemm_shapes:
        rounded = 19360 if rng.integers(0, 20) == 0 else int(rng.choice(DEEPGEMM_BATCHES))
        batch = rounded - int(rng.integers(0, 32))
        num_sms = int(rng.choice(DEEPGEMM_SMS))
    else:
        batch = int(rng.integers(0, 19360 if rng.integers(0, 20) == 0 else 600))
        num_sms = int(rng.integers(1, 40)) if rng.integers(0, 5) == 0 else int(rng.integers(60, 300))
    next_n = int(rng.integers(1, 5))
    kind = rng.integers(0, 10, (batch, next_n))
    lens = rng.integers(0, 262145, (batch, next_n))
    lens = np.where(kind == 0, 0, lens)
    lens = np.where(kind == 1, -rng.integers(1, 256, (batch, next_n)), lens)  # 0 splits, read as uint32
    return lens.astype(np.int32), num_sms


@gpu
def test_the_launch_writes_the_cpu_fills_words():
    rng = np.random.default_rng(5101)
    for _ in range(STEPS):
        lens, num_sms = random_step(rng)
        want = deepgemm.get_paged_mqa_logits_metadata(i32(lens), 64, num_sms).tolist()
        got = deepgemm.get_paged_mqa_logits_metadata(i32(lens, "cuda"), 64, num_sms)
        assert got.device.type == "cuda" and got.cpu().tolist() == want


@gpu
def test_a_graph_replays_the_launch_on_new_lengths():
    lens = i32([[300], [0], [700]], "cuda")
    deepgemm.get_paged_mqa_logits_metadata(lens, 64, 4)  # warm, outside the capture
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        meta = deepgemm.get_paged_mqa_logits_metadata(lens, 64, 4)
    for contexts in ([[5000], [2], [700]], [[0], [0], [0]]):
        lens.copy_(i32(contexts))
        graph.replay()
        torch.cuda.synchronize()
        assert meta.cpu().tolist() == deepgemm.get_paged_mqa_logits_metadata(i32(contexts), 64, 4).tolist()


def test_deepgemms_own_kernel_writes_the_same_words_on_random_steps():
    deep_gemm, why = deep_gemm_module()
    if deep_gemm is None:
        pytest.skip(why)
    rng = np.random.default_rng(5102)
    compared = 0
    for _ in range(STEPS):
        lens, num_sms = random_step(rng, deepgemm_shapes=True)
        cuda = i32(lens, "cuda")
        try:
            want = deep_gemm.get_paged_mqa_logits_metadata(cuda, 64, num_sms).cpu().tolist()
        except RuntimeError as e:
            # DeepGEMM's kernel asks the driver for 12 bytes of shared memory a
            # sequence, which its host check allows up to 19,360 sequences and an
            # H100's driver refused on a large batch (DEEPGEMM_LAUNCHES).
            assert "CUDA_ERROR_INVALID_VALUE" in str(e) and len(lens) > DEEPGEMM_LAUNCHES, (len(lens), str(e))
            continue
        assert deepgemm.get_paged_mqa_logits_metadata(cuda, 64, num_sms).cpu().tolist() == want
        assert deepgemm.get_paged_mqa_logits_metadata(i32(lens), 64, num_sms).tolist() == want
        compared += 1
    assert compared >= STEPS * 9 // 10


def trace_decode_lens(request):
    """A dumped trace step's decode rows as vLLM's CUDA indexer passes them to
    DeepGEMM: [sequences, next_n] where the plan runs native next_n sequences,
    else a row a sequence, [rows, 1]."""
    plan = idxplan.plan_json(request["config"], request["step"])
    decode = plan.get("decode")
    if not decode:
        return None
    rows = np.array(decode["row_lens"], dtype=np.int32)
    native = decode.get("native")
    return rows.reshape(native["num_seqs"], native["next_n"]) if native else rows.reshape(-1, 1)


@pytest.mark.skipif(TRACE_STEPS is None, reason="IDXPLAN_TRACE_STEPS (idxplan replay --dump-steps) not set")
def test_deepgemms_own_kernel_writes_the_same_words_on_every_decode_step_of_a_trace():
    """Each decode step as it is, and again with its first sequence at length 0
    and its last past the model's longest context (max_model_len / compress_ratio
    keys), on the GPU's SM count and on 132 (an H100 SXM's)."""
    deep_gemm, why = deep_gemm_module()
    if deep_gemm is None:
        pytest.skip(why)
    compared = 0
    for line in pathlib.Path(TRACE_STEPS).read_text().splitlines():
        request = json.loads(line)
        lens = trace_decode_lens(request)
        if lens is None:
            continue
        edges = lens.copy()
        edges[0, :] = 0
        edges[-1, :] = request["config"]["max_model_len"] // request["config"]["compress_ratio"] + 4097
        for step in (lens, edges):
            for num_sms in (deep_gemm.get_num_sms(), 132):
                want = deep_gemm.get_paged_mqa_logits_metadata(i32(step, "cuda"), 64, num_sms).cpu().tolist()
                assert deepgemm.get_paged_mqa_logits_metadata(i32(step, "cuda"), 64, num_sms).cpu().tolist() == want
                assert deepgemm.get_paged_mqa_logits_metadata(i32(step), 64, num_sms).tolist() == want
        compared += 1
    assert compared > 100


def fp8_cache(blocks, block_kv, dim, generator):
    """DeepGEMM's fused FP8 cache, uint8 [blocks, block_kv, 1, dim + 4]: each
    block's block_kv * dim e4m3 values, then its block_kv float32 scales; and the
    same keys as float32 [blocks * block_kv, dim], values times scales."""
    values = torch.randn((blocks, block_kv, dim), device="cuda", generator=generator).to(torch.float8_e4m3fn)
    scales = torch.rand((blocks, block_kv), device="cuda", generator=generator) / 64 + 1 / 128
    fused = torch.empty((blocks, block_kv * (dim + 4)), dtype=torch.uint8, device="cuda")
    fused[:, : block_kv * dim] = values.view(torch.uint8).view(blocks, -1)
    fused[:, block_kv * dim :] = scales.view(torch.uint8).view(blocks, -1)
    keys = (values.float() * scales.unsqueeze(-1)).view(blocks * block_kv, dim)
    return fused.view(blocks, block_kv, 1, dim + 4), keys


def reference_logits(q, keys, weights, lens, table, block_kv, width):
    """logits[row, k] = sum over heads of relu(q . key k) * weight, for the keys
    below the row's own length, in float32 (the other places are left 0)."""
    batch, next_n, heads, _ = q.shape
    out = torch.zeros((batch * next_n, width), device="cuda")
    for b in range(batch):
        for j in range(next_n):
            n = int(lens[b, j])
            if n == 0:
                continue
            slots = table[b, : -(-n // block_kv)].long().repeat_interleave(block_kv) * block_kv
            slots = (slots + torch.arange(block_kv, device="cuda").repeat(-(-n // block_kv)))[:n]
            scores = torch.relu(q[b, j].float() @ keys[slots].T)  # [heads, n]
            out[b * next_n + j, :n] = (scores * weights[b * next_n + j].unsqueeze(-1)).sum(0)
    return out


def test_deepgemms_logits_kernel_computes_the_same_logits_from_idxplans_metadata():
    """The consumer end to end: fp8_paged_mqa_logits on random FP8 caches, once
    with DeepGEMM's metadata and once with idxplan's (the launch, and the CPU fill
    moved to the GPU). Each row's logits below its length must be equal bit for bit;
    against a float32 reference of the same FP8 values they must agree within
    DeepGEMM's own bound (its test's), so that a run which computed nothing
    cannot pass. Lengths of 0 and sequences as long as the logits are wide are
    among the steps."""
    deep_gemm, why = deep_gemm_module()
    if deep_gemm is None:
        pytest.skip(why)
    rng = np.random.default_rng(5103)
    generator = torch.Generator(device="cuda").manual_seed(5103)
    block_kv, heads, dim = 64, 64, 128
    num_sms = deep_gemm.get_num_sms()
    for case in range(12):
        batch = int(rng.integers(1, 48))
        next_n = int(rng.integers(1, 3))
        width = int(rng.choice([512, 4096, 20000]))
        last = rng.integers(0, width + 1, batch)
        last[rng.integers(0, batch)] = 0 if case % 3 == 0 else width
        lens = np.maximum(last[:, None] - np.arange(next_n - 1, -1, -1)[None, :], 0).astype(np.int32)
        columns = -(-width // block_kv) + 2  # the engine's padding columns past the longest
        blocks = batch * columns
        table = torch.randperm(blocks, device="cuda", generator=generator).to(torch.int32).view(batch, columns)
        cache, keys = fp8_cache(blocks, block_kv, dim, generator)
        q = torch.randn((batch, next_n, heads, dim), device="cuda", generator=generator).to(torch.float8_e4m3fn)
        weights = torch.randn((batch * next_n, heads), device="cuda", generator=generator)
        context = i32(lens, "cuda")

        theirs = deep_gemm.get_paged_mqa_logits_metadata(context, block_kv, num_sms)
        ours = deepgemm.get_paged_mqa_logits_metadata(context, block_kv, num_sms)
        filled = deepgemm.get_paged_mqa_logits_metadata(i32(lens), block_kv, num_sms).cuda()
        assert torch.equal(ours, theirs) and torch.equal(filled, theirs)

        below = torch.arange(width, device="cuda")[None, :] < context.view(-1, 1)

        def logits(meta):
            out = deep_gemm.fp8_paged_mqa_logits(q, cache, weights, context, table, meta, width, False)
            return out.masked_fill(~below, 0)  # past a row's length the kernel writes nothing it promises

        want = logits(theirs)
        for meta in (ours, filled):
            assert torch.equal(logits(meta).view(torch.int32), want.view(torch.int32)), f"case {case}"
        reference = reference_logits(q, keys, weights, lens, table, block_kv, width).double()
        got = want.double()
        # DeepGEMM's own measure and bound for its kernel against the same FP8 values in float
        difference = 1 - 2 * (got * reference).sum() / (got * got + reference * reference).sum().clamp(min=1e-30)
        assert difference < 5e-6 or not below.any(), f"case {case}: the logits differ from the reference by {difference}"
