# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""idxplan.vllm on a GPU: build() on torch CUDA tensors equals the CPU builder's
objects word for word on random steps, every tensor a view of the builder's buffers
or of the engine's tensors, on torch's current stream. test_vllm_reference.py
compares it with vLLM's own builder. Skipped without a GPU, torch or a device build."""

import dataclasses
import os
import types

import pytest

import idxplan
from idxplan import vllm
from steps import CONFIGS, assert_same, random_step, rng_for, torch_step
from test_vllm import TWO_DECODES

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not (idxplan.has_device and torch.cuda.is_available()),
                                reason="no GPU, or idxplan built without a device part")

STEPS = int(os.environ.get("IDXPLAN_PY_GPU_STEPS", "300"))


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


def builder_pairs(second):
    """For each of CONFIGS, a GPU builder and a second one on ``second``."""
    return [(vllm.MetadataBuilder(g, "cuda"), vllm.MetadataBuilder(g, second))
            for g in (idxplan.make_geometry(**c) for c in CONFIGS)]


def test_device_build_equals_the_cpu_build_and_copies_nothing():
    rng = rng_for(2718)
    pairs = builder_pairs("cpu")
    for i in range(STEPS):
        k = i % len(CONFIGS)
        gpu, cpu = pairs[k]
        step = random_step(CONFIGS[k], rng)
        cm = torch_step(step, "cuda")
        m = gpu.build(0, cm)
        torch.cuda.synchronize()
        assert_same(m, cpu.build(0, torch_step(step, "cpu")))
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


class Wrapped(torch.Tensor):
    """A torch.Tensor subclass: the builder reads it through torch's accessors, as it
    reads every tensor of a torch without DLPack's C exchange API."""


def wrapped(cm):
    out = types.SimpleNamespace(**vars(cm))
    for name in ("query_start_loc", "query_start_loc_cpu", "seq_lens", "seq_lens_cpu_upper_bound",
                 "block_table_tensor"):
        setattr(out, name, getattr(cm, name).as_subclass(Wrapped))
    return out


def test_the_exchange_api_and_torchs_accessors_read_the_same_steps():
    rng = rng_for(1618)
    pairs = builder_pairs("cuda")
    assert pairs[0][0]._core.reads_through_exchange_api == hasattr(torch.Tensor, "__dlpack_c_exchange_api__")
    for i in range(STEPS // 3):
        k = i % len(CONFIGS)
        fast, slow = pairs[k]
        cm = torch_step(random_step(CONFIGS[k], rng), "cuda")
        a, b = fast.build(0, cm), slow.build(0, wrapped(cm))
        torch.cuda.synchronize()
        assert_same(a, b)


@pytest.mark.parametrize("wrap", [False, True], ids=["exchange_api", "accessors"])
def test_tensors_neither_path_takes_are_refused_by_name(wrap):
    g = idxplan.make_geometry(**CONFIGS[0])
    builder = vllm.MetadataBuilder(g, "cuda")
    cases = [("seq_lens", lambda t: t.long(), "seq_lens must hold int32, got torch.int64"),
             ("block_table_tensor", lambda t: t[:, ::2],
              "block_table_tensor must have contiguous rows, got a column stride of 2 elements"),
             ("query_start_loc", lambda t: t.reshape(1, -1), "query_start_loc must be a 1-D tensor, got 2 dimensions"),
             ("seq_lens", lambda t: torch.empty_like(t, device="meta"), "seq_lens is on meta, neither the host nor a GPU")]
    for name, change, message in cases:
        cm = torch_step(TWO_DECODES, "cuda")
        setattr(cm, name, change(getattr(cm, name)))
        with pytest.raises(ValueError, match=message.replace("(", "\\(").replace(")", "\\)")):
            builder.build(0, wrapped(cm) if wrap else cm)
