# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""enqueue from torch tensors on a GPU: the buffers it writes equal fill_step_buffers
word for word on random steps, the launch views are slices of the caller's tensors
holding the CPU reference's values, and device arrays are checked. Skipped without a
GPU, torch, or a build with a device part."""

import os

import numpy as np
import pytest

import idxplan
from steps import CONFIGS, host_inputs, random_step, rng_for

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not (idxplan.has_device and torch.cuda.is_available()),
                                reason="no GPU, or idxplan built without a device part")

STEPS = int(os.environ.get("IDXPLAN_PY_GPU_STEPS", "600"))
POISON = -0x5A5A5A5B  # a word nobody writes


def stream():
    return torch.cuda.current_stream().cuda_stream


def inputs_for(step, device):
    table = torch.tensor(step["block_table"], dtype=torch.int32).reshape(len(step["seq_lens"]), step["stride"])
    return idxplan.StepInputs(seq_lens=torch.tensor(step["seq_lens"], dtype=torch.int32, device=device),
                              query_start_loc=torch.tensor(step["query_start_loc"], dtype=torch.int32,
                                                           device=device),
                              block_table=table.to(device))


def cuda_outputs(g, always):
    return idxplan.step_outputs(g, lambda shape: torch.full(shape, POISON, dtype=torch.int32, device="cuda"),
                                always)


def host_outputs(g, always):
    return idxplan.step_outputs(g, lambda shape: np.full(shape, POISON, dtype=np.int32), always)


def as_numpy(value):
    return value.cpu().numpy() if isinstance(value, torch.Tensor) else value


def test_enqueue_matches_fill_step_buffers_on_random_steps():
    geometries = [idxplan.make_geometry(**c) for c in CONFIGS]
    planners = [idxplan.Planner(g) for g in geometries]
    rng = rng_for(11)
    kinds = {"native": 0, "one_row": 0, "ragged": 0, "padded": 0, "always": 0, "chunked": 0, "gathers": 0}
    for i in range(STEPS):
        k = i % len(CONFIGS)
        g = geometries[k]
        step = random_step(CONFIGS[k], rng)
        plan = planners[k].plan(step["query_start_loc"], step["seq_lens_upper_bound"], step["num_tokens"])
        always = i % 3 == 0
        device = cuda_outputs(g, always)  # poisoned, both sides
        host = host_outputs(g, always)
        idxplan.enqueue(g, plan, inputs_for(step, "cuda"), device, stream())
        idxplan.fill_step_buffers(g, plan, host_inputs(step), host)
        torch.cuda.synchronize()
        for name in device.names:
            got, want = device[name].cpu().numpy(), host[name]
            assert np.array_equal(got, want), (i, name, np.flatnonzero(got.ravel() != want.ravel())[:8])
        d = plan.decode
        kinds["native"] += d.native is not None
        kinds["one_row"] += d.rows_are_requests
        kinds["ragged"] += d.ragged
        kinds["padded"] += d.num_rows > d.num_real_rows
        kinds["always"] += always and d.num_rows > 0
        kinds["chunked"] += len(plan.prefill) > 1
        kinds["gathers"] += len(plan.gather_launches) > 0
    print(f"{STEPS} random steps from torch tensors equal to fill_step_buffers: {kinds}")
    assert all(count > 10 for count in kinds.values()), kinds


def test_launch_views_are_slices_of_the_callers_tensors():
    g = idxplan.make_geometry(**CONFIGS[0])
    planner = idxplan.Planner(g)
    rng = rng_for(12)
    checked = 0
    for _ in range(100):
        step = random_step(CONFIGS[0], rng)
        plan = planner.plan(step["query_start_loc"], step["seq_lens_upper_bound"], step["num_tokens"])
        inputs, device = inputs_for(step, "cuda"), cuda_outputs(g, False)
        host_in, host = host_inputs(step), host_outputs(g, False)
        idxplan.enqueue(g, plan, inputs, device, stream())
        idxplan.fill_step_buffers(g, plan, host_in, host)
        torch.cuda.synchronize()
        views = [(idxplan.decode_launch(g, plan, inputs, device), idxplan.decode_launch(g, plan, host_in, host))]
        views += [(idxplan.prefill_launch(g, plan, c, inputs, device),
                   idxplan.prefill_launch(g, plan, c, host_in, host)) for c in range(len(plan.prefill))]
        views += [(idxplan.candidate_launch(g, plan, c, inputs, device),
                   idxplan.candidate_launch(g, plan, c, host_in, host))
                  for c in range(len(plan.gather_launches))]
        for on_device, reference in views:
            if on_device is None:
                assert reference is None
                continue
            for field, value in vars(on_device).items():
                want = getattr(reference, field)
                if isinstance(value, torch.Tensor):
                    assert value.is_cuda
                    assert np.array_equal(as_numpy(value), want), field
                    checked += 1
                else:
                    assert value == want, field
    assert checked > 500


def test_a_dlpack_only_array_is_read_like_a_tensor():
    class DlpackOnly:  # hides __cuda_array_interface__: the DLPack path
        def __init__(self, tensor):
            self.tensor = tensor

        def __dlpack__(self, stream=None):
            return self.tensor.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return self.tensor.__dlpack_device__()

        def __getitem__(self, index):
            return self.tensor[index]

    g = idxplan.make_geometry(**CONFIGS[0])
    step = random_step(CONFIGS[0], rng_for(13))
    plan = idxplan.Planner(g).plan(step["query_start_loc"], step["seq_lens_upper_bound"], step["num_tokens"])
    plain = inputs_for(step, "cuda")
    wrapped = idxplan.StepInputs(seq_lens=DlpackOnly(plain.seq_lens), query_start_loc=DlpackOnly(plain.query_start_loc),
                                 block_table=DlpackOnly(plain.block_table))
    assert wrapped.on_device
    a, b = cuda_outputs(g, True), cuda_outputs(g, True)
    idxplan.enqueue(g, plan, plain, a, stream())
    idxplan.enqueue(g, plan, wrapped, b, stream())
    torch.cuda.synchronize()
    for name in a.names:
        assert torch.equal(a[name], b[name]), name


def test_device_arrays_are_checked_naming_the_argument():
    g = idxplan.make_geometry(**CONFIGS[0])
    step = random_step(CONFIGS[0], rng_for(14))
    plan = idxplan.Planner(g).plan([0, 2, 4], [100, 200])
    good = inputs_for(dict(step, seq_lens=[100, 200], query_start_loc=[0, 2, 4],
                           block_table=[[1] * step["stride"]] * 2), "cuda")
    lens, qsl, table = good.seq_lens, good.query_start_loc, good.block_table
    with pytest.raises(ValueError, match="seq_lens must hold int32"):
        idxplan.StepInputs(seq_lens=lens.float(), query_start_loc=qsl, block_table=table)
    with pytest.raises(ValueError, match="query_start_loc must be contiguous"):
        idxplan.StepInputs(seq_lens=lens, query_start_loc=torch.zeros(6, dtype=torch.int32, device="cuda")[::2],
                           block_table=table)
    with pytest.raises(ValueError, match="block_table must have contiguous rows"):
        idxplan.StepInputs(seq_lens=lens, query_start_loc=qsl, block_table=table.t())
    with pytest.raises(ValueError, match="seq_lens is in device memory but query_start_loc or block_table in host"):
        idxplan.StepInputs(seq_lens=lens, query_start_loc=qsl.cpu(), block_table=table)
    with pytest.raises(ValueError, match="enqueue needs device arrays"):
        idxplan.enqueue(g, plan, good, host_outputs(g, False), stream())
    small = {name: torch.zeros(2, dtype=torch.int32, device="cuda") for name in idxplan.step_buffer_sizes(g)}
    small["decode_block_table"] = torch.zeros((2, 4), dtype=torch.int32, device="cuda")
    with pytest.raises(idxplan.StepError, match="decode_row_lens holds 2 words, and the step writes 4"):
        idxplan.enqueue(g, plan, good, idxplan.StepOutputs(**small), stream())


def test_enqueue_takes_torchs_current_stream_or_a_given_one():
    g = idxplan.make_geometry(**CONFIGS[0])
    step = random_step(CONFIGS[0], rng_for(15))
    plan = idxplan.Planner(g).plan(step["query_start_loc"], step["seq_lens_upper_bound"], step["num_tokens"])
    inputs, host = inputs_for(step, "cuda"), host_outputs(g, False)
    idxplan.fill_step_buffers(g, plan, host_inputs(step), host)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        a = cuda_outputs(g, False)
        idxplan.enqueue(g, plan, inputs, a)  # on `side`, torch's current stream here
    side.synchronize()
    for name in a.names:
        assert np.array_equal(a[name].cpu().numpy(), host[name]), name


def test_enqueue_without_torch_needs_a_stream(monkeypatch):
    g = idxplan.make_geometry(**CONFIGS[0])
    plan = idxplan.Planner(g).plan([0, 2, 4], [100, 200])
    monkeypatch.delitem(__import__("sys").modules, "torch")
    with pytest.raises(ValueError, match="enqueue needs a stream"):
        idxplan.enqueue(g, plan, None, None)


def test_short_device_inputs_are_refused_and_nothing_is_written():
    # The cases on the GPU: a 2-row table and a 1-entry seq_lens for a
    # 4-request ragged step were out-of-bounds device reads.
    g = idxplan.make_geometry(**dict(CONFIGS[0], num_speculative_tokens=1, adaptive_verification=False))
    plan = idxplan.Planner(g).plan([0, 1, 3, 4, 5], [1250, 100, 15000 // 8, 101])
    assert plan.decode.ragged
    lens = torch.tensor([1250, 100, 15000 // 8, 101], dtype=torch.int32, device="cuda")
    qsl = torch.tensor([0, 1, 3, 4, 5], dtype=torch.int32, device="cuda")
    table = torch.ones((4, g.max_blocks_per_seq), dtype=torch.int32, device="cuda")
    out = cuda_outputs(g, False)
    with pytest.raises(idxplan.StepError, match=r"block_table_rows=2 is short: the step reads 4"):
        idxplan.enqueue(g, plan, idxplan.StepInputs(seq_lens=lens, query_start_loc=qsl, block_table=table[:2]), out)
    with pytest.raises(idxplan.StepError, match=r"num_seq_lens=1 is short: the step reads 4"):
        idxplan.enqueue(g, plan, idxplan.StepInputs(seq_lens=lens[:1], query_start_loc=qsl, block_table=table), out)
    torch.cuda.synchronize()
    assert (out["context_lens"] == POISON).all() and (out["decode_block_table"] == POISON).all()


def test_a_device_length_past_its_bound_stays_in_its_chunk_on_the_gpu():
    config = dict(CONFIGS[0], max_logits_mb=1)
    g = idxplan.make_geometry(**config)
    qsl, upper, exact = [0, 50, 60], [60000, 400], [60000, 4000]
    plan = idxplan.Planner(g).plan(qsl, upper)
    step = dict(query_start_loc=qsl, seq_lens=exact, block_table=[[1] * g.max_blocks_per_seq] * 2,
                stride=g.max_blocks_per_seq)
    inputs, device = inputs_for(step, "cuda"), cuda_outputs(g, False)
    host = host_outputs(g, False)
    idxplan.enqueue(g, plan, inputs, device)
    idxplan.fill_step_buffers(g, plan, host_inputs(step), host)
    torch.cuda.synchronize()
    for name in device.names:
        assert np.array_equal(device[name].cpu().numpy(), host[name]), name
    last = idxplan.prefill_launch(g, plan, len(plan.prefill) - 1, inputs, device)
    assert (last.width, last.max_blocks) == (100, 4)
    assert int(last.row_ends.max()) == 100 and last.context_lens.tolist() == [100]
