# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""idxplan.vllm on a GPU: build() on torch CUDA tensors equals the CPU builder's
objects word for word on random steps, every tensor a view of the builder's buffers
or of the engine's tensors, on torch's current stream. test_vllm_reference.py
compares it with vLLM's own builder. Skipped without a GPU, torch or a device build."""

import dataclasses
import os

import pytest

import idxplan
from idxplan import vllm
from steps import CONFIGS, random_step, rng_for, torch_step
from test_vllm import TWO_DECODES

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not (idxplan.has_device and torch.cuda.is_available()),
                                reason="no GPU, or idxplan built without a device part")

STEPS = int(os.environ.get("IDXPLAN_PY_GPU_STEPS", "300"))


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
    if t.numel() == 0:
        return True  # nothing to copy (torch may give an empty view no address)
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
        cm = torch_step(step, "cuda")
        m = gpu.build(0, cm)
        torch.cuda.synchronize()
        same(m, cpu.build(0, torch_step(step, "cpu")))
        owners = list(gpu.buffers.values()) + [cm.seq_lens, cm.query_start_loc, cm.block_table_tensor]
        for path, t in tensors_of(m):
            assert t.is_cuda and inside(t, owners), f"step {i}: {path} is a copy"


def test_build_runs_on_torchs_current_stream():
    g = idxplan.make_geometry(**CONFIGS[0])
    builder = vllm.MetadataBuilder(g, "cuda")
    step = TWO_DECODES
    cm = torch_step(step, "cuda")
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
    step = TWO_DECODES
    cm = torch_step(step, "cuda")
    cm.seq_lens = cm.seq_lens.cpu()
    with pytest.raises(ValueError, match="seq_lens must be on the builder's GPU 0 \\(it is in host memory\\)"):
        builder.build(0, cm)
