# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""idxplan.deepgemm: DeepGEMM's get_paged_mqa_logits_metadata as a drop-in.

On CPU tensors, worked examples and DeepGEMM's refusals; on a GPU, the launch
against the CPU fill and inside a CUDA graph; where ``deep_gemm`` imports (a
DeepGEMM build, IDXPLAN_DEEPGEMM=<its folder> put first on the path) and the GPU
is an SM90 one, against DeepGEMM's own metadata kernel on IDXPLAN_PY_GPU_STEPS
random steps (300), word for word. Skipped without torch."""

import os
import sys

import numpy as np
import pytest

import idxplan

torch = pytest.importorskip("torch")
from idxplan import deepgemm  # noqa: E402

STEPS = int(os.environ.get("IDXPLAN_PY_GPU_STEPS", "300"))
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


def random_step(rng):
    """context_lens [batch, next_n] of a random step, num_sms."""
    batch = int(rng.integers(0, 19360 if rng.integers(0, 20) == 0 else 600))
    next_n = int(rng.integers(1, 5))
    num_sms = int(rng.integers(1, 40)) if rng.integers(0, 5) == 0 else int(rng.integers(60, 300))
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
    for _ in range(STEPS):
        lens, num_sms = random_step(rng)
        cuda = i32(lens, "cuda")
        want = deep_gemm.get_paged_mqa_logits_metadata(cuda, 64, num_sms).cpu().tolist()
        assert deepgemm.get_paged_mqa_logits_metadata(cuda, 64, num_sms).cpu().tolist() == want
        assert deepgemm.get_paged_mqa_logits_metadata(i32(lens), 64, num_sms).tolist() == want
