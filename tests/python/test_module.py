# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""The Python module on the CPU: plan_json against the idxplan command, Planner.plan
against plan_json, the CPU reference and the launch views against the command's
per-launch values, the input types, the stubs and every error path."""

import ast
import json
import os
import pathlib
import re
import subprocess

import numpy as np
import pytest

import idxplan
from steps import CONFIGS, host_inputs, random_step, rng_for, step_json

CLI = os.environ.get("IDXPLAN_CLI")
STEPS = 300


def cli_plan(config, step):
    """`idxplan plan - --json` on the step, as a user runs it."""
    done = subprocess.run([CLI, "plan", "-", "--json"], input=json.dumps({"config": config, "step": step}),
                          capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def random_steps(seed, count):
    rng = rng_for(seed)
    for i in range(count):
        config = CONFIGS[i % len(CONFIGS)]
        yield config, random_step(config, rng)


@pytest.mark.skipif(CLI is None, reason="IDXPLAN_CLI (the idxplan command) is not set")
def test_plan_json_is_the_commands_output_on_random_steps():
    for config, step in random_steps(1, STEPS // 3):
        assert idxplan.plan_json(config, step_json(step)) == cli_plan(config, step_json(step))


def test_planner_and_the_cpu_reference_match_plan_json_on_random_steps():
    planners = [idxplan.Planner(idxplan.make_geometry(**c)) for c in CONFIGS]
    seen = {"native": 0, "ragged": 0, "chunks": 0, "candidates": 0}
    for i, (config, step) in enumerate(random_steps(2, STEPS)):
        planner = planners[i % len(CONFIGS)]
        g = planner.geometry
        want = idxplan.plan_json(config, step_json(step))
        plan = planner.plan(np.array(step["query_start_loc"]), step["seq_lens_upper_bound"],
                            step["num_tokens"])
        for key in ("num_decodes", "num_decode_tokens", "num_prefills", "num_prefill_tokens",
                    "max_seq_len"):
            assert getattr(plan, key) == want[key], key
        inputs = host_inputs(step)
        outputs = idxplan.host_step_outputs(g, always_write_decode_block_table=i % 2 == 0)
        idxplan.fill_step_buffers(g, plan, inputs, outputs)
        assert outputs["context_lens"][:plan.num_reqs].tolist() == want["context_lens"]

        decode = idxplan.decode_launch(g, plan, inputs, outputs)
        if want["decode"] is None or not want["decode"]["row_lens"]:
            assert decode is None  # no decode rows: no decode launch
        else:
            rows = decode.num_seqs * decode.next_n
            assert decode.row_ends.tolist() == want["decode"]["row_lens"]
            assert (decode.block_ends.tolist() if decode.block_ends is not None else None) == \
                want["decode"]["block_ends"]
            native = want["decode"]["native"]
            assert (plan.decode.native is not None) == (native is not None)
            if native is not None:
                assert (decode.next_n, decode.num_seqs) == (native["next_n"], native["num_seqs"])
                seen["native"] += 1
            assert decode.in_place == (want["decode"]["block_table"] == "engine")
            seen["ragged"] += not decode.in_place
            assert decode.block_table.shape[0] == decode.num_seqs
            assert rows == plan.decode.num_rows

        assert len(plan.prefill) == len(want["prefill"])
        for k, chunk in enumerate(want["prefill"]):
            launch = idxplan.prefill_launch(g, plan, k, inputs, outputs)
            assert (launch.token_start, launch.token_end, launch.first_request, launch.num_reqs,
                    launch.width, launch.use_gather) == \
                (chunk["token_start"], chunk["token_end"], chunk["first_request"], chunk["num_reqs"],
                 chunk["width"], chunk["use_gather"])
            assert launch.query_start_loc.tolist() == chunk["query_start_loc"]
            assert launch.context_lens.tolist() == chunk["context_lens"]
            assert launch.row_ends.tolist() == chunk["row_ends"]
            # The engine's own rows of the block table, from the chunk's first request on.
            assert np.shares_memory(launch.block_table, inputs.block_table)
            assert launch.block_table.shape[0] == launch.num_reqs
            assert plan.prefill[k]["token_start"] == chunk["token_start"]
            seen["chunks"] += 1
        assert len(plan.gather_launches) == len(want["gather_launches"])
        for k, gathered in enumerate(want["gather_launches"]):
            launch = idxplan.candidate_launch(g, plan, k, inputs, outputs)
            assert (launch.token_start, launch.token_end, launch.request) == \
                (gathered["token_start"], gathered["token_end"], gathered["request"])
            assert launch.context_len.tolist() == [gathered["context_len"]]
            assert launch.row_ends.tolist() == gathered["row_ends"]
            seen["candidates"] += 1
    assert all(count > 10 for count in seen.values()), seen


def test_plan_takes_any_1d_integer_array():
    g = idxplan.make_geometry(**idxplan.deepseek_v41_config(256))
    planner = idxplan.Planner(g)
    qsl, lens = [0, 2, 4, 8196], [9000, 120000, 300000]
    want = planner.plan(qsl, lens).copy()
    for cast in (np.int32, np.int64, np.int16, np.uint32):
        assert planner.plan(np.array(qsl).astype(cast), np.array(lens).astype(np.int64)) == want
    # A strided view is read as it is.
    strided = np.array([0, 99, 2, 99, 4, 99, 8196], dtype=np.int32)[::2]
    assert planner.plan(strided, np.array(lens, dtype=np.int32)) == want
    assert planner.plan(memoryview(np.array(qsl, dtype=np.int32)), lens) == want
    assert planner.plan([0], []).num_reqs == 0


def test_cpu_torch_tensors_plan_and_fill_like_numpy_arrays():
    torch = pytest.importorskip("torch")
    g = idxplan.make_geometry(**idxplan.deepseek_v41_config(256))
    planner = idxplan.Planner(g)
    qsl, lens = [0, 2, 4, 8196], [9000, 120000, 300000]
    want = planner.plan(qsl, lens).copy()
    plan = planner.plan(torch.tensor(qsl, dtype=torch.int32), torch.tensor(lens, dtype=torch.int64))
    assert plan == want
    # Host tensors as StepInputs and StepOutputs (read through DLPack).
    inputs = idxplan.StepInputs(seq_lens=torch.tensor(lens, dtype=torch.int32),
                                query_start_loc=torch.tensor(qsl, dtype=torch.int32),
                                block_table=torch.zeros((3, 8192), dtype=torch.int32))
    assert not inputs.on_device
    outputs = idxplan.step_outputs(g, lambda shape: torch.zeros(shape, dtype=torch.int32))
    reference = idxplan.host_step_outputs(g)
    idxplan.fill_step_buffers(g, plan, inputs, outputs)
    idxplan.fill_step_buffers(g, plan, host_inputs(dict(seq_lens=lens, query_start_loc=qsl,
                                                        block_table=[[0] * 8192] * 3, stride=8192)),
                              reference)
    for name in outputs.names:
        assert np.array_equal(outputs[name].numpy(), reference[name]), name


def test_a_planners_plan_is_reused_and_copy_keeps_one():
    g = idxplan.make_geometry(**idxplan.deepseek_v41_config(256))
    planner = idxplan.Planner(g)
    first = planner.plan([0, 8192], [1048576])
    kept = first.copy()
    again = planner.plan([0, 2, 4, 8196], [9000, 120000, 300000])
    assert again.num_decodes == 2 and first.num_decodes == 2  # the same plan, overwritten
    assert kept.num_decodes == 0 and len(kept.prefill) == 16
    assert not kept.prefill.flags.writeable
    assert kept.prefill["width"].tolist() == [262144] * 16
    assert kept.gather_launches.tolist() == [(0, 8192, 0)]
    assert kept.geometry == g.fingerprint


def test_geometry_and_sizes():
    config = idxplan.deepseek_v41_config(256)
    g = idxplan.make_geometry(**config)
    assert g.config == config
    assert (g.page_entries, g.native_next_n, g.max_blocks_per_seq, g.cache.block_kv) == (32, 2, 8192, 32)
    sizes = idxplan.step_buffer_sizes(g)
    assert sizes["decode_block_table"] == (2048, 8192)
    assert sizes["prefill_query_start_loc"] == 1024 + 2 * 65536
    with pytest.raises(TypeError):
        idxplan.Geometry()


def test_config_errors_are_value_errors_with_the_library_messages():
    with pytest.raises(idxplan.ConfigError, match="num_heads must be positive, got 0"):
        idxplan.make_geometry(num_heads=0, num_compute_units=4)
    with pytest.raises(ValueError, match='unknown key "num_heds"'):
        idxplan.make_geometry(num_heds=64, num_compute_units=4)
    with pytest.raises(idxplan.ConfigError, match="config.head_dim must be an integer"):
        idxplan.make_geometry(head_dim=1.5, num_compute_units=4)
    with pytest.raises(idxplan.ConfigError, match="num_compute_units=536870913"):
        idxplan.make_geometry(num_compute_units=536870913)
    with pytest.raises(idxplan.ConfigError, match="dcp_world_size=2"):
        idxplan.plan_json({"num_compute_units": 4, "dcp_world_size": 2}, {"query_start_loc": [0], "seq_lens": []})
    # numpy numbers are plain numbers here.
    assert idxplan.make_geometry(num_compute_units=np.int64(4)).config["num_compute_units"] == 4


def test_step_errors_name_the_request_and_values():
    planner = idxplan.Planner(idxplan.make_geometry(num_compute_units=4))
    with pytest.raises(idxplan.StepError, match=r"seq_lens_upper_bound\[1\]=-5 is negative"):
        planner.plan([0, 1, 2], [5, -5])
    with pytest.raises(idxplan.StepError, match="query_start_loc has 2 entries for 2 requests"):
        planner.plan([0, 2], [5, 5])
    with pytest.raises(idxplan.StepError, match="num_tokens=3 is below"):
        planner.plan([0, 4], [5], num_tokens=3)
    with pytest.raises(idxplan.StepError, match="num_tokens=-2 is negative"):
        planner.plan([0, 4], [5], num_tokens=-2)
    with pytest.raises(idxplan.StepError, match="does not fit int64"):
        planner.plan([0, 4], [5], num_tokens=2**70)
    with pytest.raises(ValueError, match="query_start_loc must hold integers, got dtype float64"):
        planner.plan([0.0, 4.0], [5])
    with pytest.raises(ValueError, match="seq_lens_upper_bound must be a 1-D integer array, got 2 dimensions"):
        planner.plan([0, 4], [[5]])
    with pytest.raises(ValueError, match="must be a 1-D integer array"):
        planner.plan(object(), [5])
    with pytest.raises(idxplan.StepError, match=r"step.seq_lens\[0\]=-1 is negative"):
        idxplan.plan_json({"num_compute_units": 4}, {"query_start_loc": [0, 1], "seq_lens": [-1]})


def test_buffer_errors_name_the_buffer_and_sizes():
    g = idxplan.make_geometry(**idxplan.deepseek_v41_config(256))
    plan = idxplan.Planner(g).plan([0, 2, 4, 8196], [9000, 120000, 300000])
    table = np.zeros((3, 8192), dtype=np.int32)
    inputs = idxplan.StepInputs(seq_lens=np.array([9000, 120000, 300000], dtype=np.int32),
                                query_start_loc=np.array([0, 2, 4, 8196], dtype=np.int32), block_table=table)
    small = {name: np.zeros(8, dtype=np.int32) for name in idxplan.step_buffer_sizes(g)}
    small["decode_block_table"] = np.zeros((4, 8192), dtype=np.int32)
    with pytest.raises(idxplan.StepError, match="prefill_row_ends holds 8 words, and the step writes 8192"):
        idxplan.fill_step_buffers(g, plan, inputs, idxplan.StepOutputs(**small))
    narrow = idxplan.StepInputs(seq_lens=inputs.seq_lens, query_start_loc=inputs.query_start_loc,
                                block_table=np.zeros((3, 16), dtype=np.int32))
    with pytest.raises(idxplan.StepError, match="block_table_cols=16 is below the 2344 columns"):
        idxplan.fill_step_buffers(g, plan, narrow, idxplan.host_step_outputs(g))
    other = idxplan.make_geometry(**idxplan.deepseek_v41_config(128))
    with pytest.raises(idxplan.StepError, match="another Geometry"):
        idxplan.fill_step_buffers(other, plan, inputs, idxplan.host_step_outputs(other))
    with pytest.raises(idxplan.StepError, match="chunk 5 of a plan that has 5"):
        idxplan.prefill_launch(g, plan, 5, inputs, idxplan.host_step_outputs(g))


def ragged_step():
    """Four decodes, one of 2 rows (a ragged step), on a 2-row-decode geometry."""
    g = idxplan.make_geometry(**idxplan.deepseek_v41_config(256))
    plan = idxplan.Planner(g).plan([0, 1, 3, 4, 5], [1250, 100, 15000, 101])
    assert plan.decode.ragged
    return g, plan


def test_inputs_shorter_than_the_plan_reads_are_refused():
    # The cases: before extents, a 2-row table was read past into
    # decode_block_table, and a 1-entry seq_lens into context_lens.
    g, plan = ragged_step()
    lens = np.array([1250, 100, 15000, 101], dtype=np.int32)
    qsl = np.array([0, 1, 3, 4, 5], dtype=np.int32)
    table = np.ones((4, 128), dtype=np.int32)
    out = idxplan.host_step_outputs(g)
    idxplan.fill_step_buffers(g, plan, idxplan.StepInputs(seq_lens=lens, query_start_loc=qsl, block_table=table), out)
    assert out["context_lens"][:4].tolist() == [312, 25, 3750, 25]
    out = idxplan.host_step_outputs(g)
    short_table = idxplan.StepInputs(seq_lens=lens, query_start_loc=qsl, block_table=table[:2])
    with pytest.raises(idxplan.StepError, match=r"block_table_rows=2 is short: the step reads 4 \(a row a request\)"):
        idxplan.fill_step_buffers(g, plan, short_table, out)
    short_lens = idxplan.StepInputs(seq_lens=lens[:1], query_start_loc=qsl, block_table=table)
    with pytest.raises(idxplan.StepError, match=r"num_seq_lens=1 is short: the step reads 4"):
        idxplan.fill_step_buffers(g, plan, short_lens, out)
    short_qsl = idxplan.StepInputs(seq_lens=lens, query_start_loc=qsl[:4], block_table=table)
    with pytest.raises(idxplan.StepError, match=r"num_query_start_loc=4 is short: the step reads 5"):
        idxplan.check_step_buffers(g, plan, short_qsl, out)
    # A column slice: rows of 128 words, 16 of them page ids.
    few_cols = idxplan.StepInputs(seq_lens=lens, query_start_loc=qsl, block_table=table[:, :16])
    with pytest.raises(idxplan.StepError, match=r"block_table_cols=16 is below the 118 columns"):
        idxplan.check_step_buffers(g, plan, few_cols, out)
    assert out["decode_block_table"][:5].max() == 0  # nothing was written


def test_a_device_length_past_its_bound_stays_in_its_chunk():
    # Upper bound 400, device length 4,000, beside a 60,000-token request: the
    # chunk is 100 columns (4 pages) wide, and so are its rows.
    config = dict(idxplan.deepseek_v41_config(256), max_logits_mb=1)
    g = idxplan.make_geometry(**config)
    plan = idxplan.Planner(g).plan([0, 50, 60], [60000, 400])
    inputs = idxplan.StepInputs(seq_lens=np.array([60000, 4000], dtype=np.int32),
                                query_start_loc=np.array([0, 50, 60], dtype=np.int32),
                                block_table=np.ones((2, g.max_blocks_per_seq), dtype=np.int32))
    out = idxplan.host_step_outputs(g)
    idxplan.fill_step_buffers(g, plan, inputs, out)
    last = idxplan.prefill_launch(g, plan, len(plan.prefill) - 1, inputs, out)
    assert (last.first_request, last.width, last.max_blocks) == (1, 100, 4)
    assert last.context_lens.tolist() == [100]
    assert last.row_ends.tolist() == [97, 98, 98, 98, 98, 99, 99, 99, 99, 100]


def test_step_outputs_are_checked_at_engine_start():
    g = idxplan.make_geometry(num_compute_units=4)
    sizes = idxplan.step_buffer_sizes(g)
    idxplan.check_step_outputs(g, idxplan.host_step_outputs(g))

    def short(shape):  # an allocator that hands out one word too few
        shape = (shape[0] - 1,) + tuple(shape[1:])
        return np.zeros(shape, dtype=np.int32)

    with pytest.raises(idxplan.StepError,
                       match=f"StepOutputs.context_lens holds {sizes['context_lens'] - 1} words; the "
                             f"geometry's steps write up to {sizes['context_lens']}"):
        idxplan.step_outputs(g, short)


def test_big_endian_arrays_are_refused():
    lens = np.array([1250, 100, 15000, 101], dtype=">i4")
    qsl = np.array([0, 1, 3, 4, 5], dtype=np.int32)
    table = np.ones((4, 8), dtype=np.int32)
    with pytest.raises(ValueError, match="seq_lens holds int32 in the other byte order"):
        idxplan.StepInputs(seq_lens=lens, query_start_loc=qsl, block_table=table)
    with pytest.raises(ValueError, match="block_table holds int32 in the other byte order"):
        idxplan.StepInputs(seq_lens=lens.astype("=i4"), query_start_loc=qsl, block_table=table.astype(">i4"))
    planner = idxplan.Planner(idxplan.make_geometry(num_compute_units=4))
    with pytest.raises(ValueError, match="query_start_loc holds >i8 in the other byte order"):
        planner.plan(np.array([0, 1], dtype=">i8"), [5])
    # Native order in any width is read as given.
    assert planner.plan(np.array([0, 1], dtype="<u2"), np.array([5], dtype="=i8")).num_decodes == 1


def test_num_tokens_is_an_integer_or_refused():
    planner = idxplan.Planner(idxplan.make_geometry(num_compute_units=4))
    for bad, shown in ((8.9, "8.9 (<class 'float'>)"), ("8", "'8' (<class 'str'>)"), (True, "True")):
        with pytest.raises(idxplan.StepError, match=re.escape(f"num_tokens must be an integer, got {shown}")):
            planner.plan([0, 1], [5], bad)
    assert planner.plan([0, 1], [5], np.int64(8)).num_tokens == 8
    assert planner.plan([0, 1], [5], 8).num_tokens == 8
    with pytest.raises(idxplan.StepError, match="num_tokens=-1 is negative"):
        planner.plan([0, 1], [5], -1)
    with pytest.raises(idxplan.StepError, match="num_tokens=36893488147419103232 does not fit int64"):
        planner.plan([0, 1], [5], 2**65)


def test_values_past_int32_are_named_as_given():
    planner = idxplan.Planner(idxplan.make_geometry(num_compute_units=4))
    with pytest.raises(ValueError, match=r"query_start_loc\[1\]=18446744073709551615 is past"):
        planner.plan(np.array([0, 2**64 - 1], dtype=np.uint64), [5])
    with pytest.raises(idxplan.StepError, match=r"seq_lens_upper_bound\[0\]=4294967296 is past max_model_len"):
        planner.plan([0, 1], np.array([2**32], dtype=np.int64))


def test_array_errors_name_the_argument():
    ok = np.zeros(4, dtype=np.int32)
    table = np.zeros((2, 4), dtype=np.int32)
    with pytest.raises(ValueError, match="seq_lens must hold int32"):
        idxplan.StepInputs(seq_lens=np.zeros(4, dtype=np.int64), query_start_loc=ok, block_table=table)
    with pytest.raises(ValueError, match="query_start_loc must be contiguous"):
        idxplan.StepInputs(seq_lens=ok, query_start_loc=np.zeros(8, dtype=np.int32)[::2], block_table=table)
    with pytest.raises(ValueError, match="block_table must be a 2-D array, got 1 dimensions"):
        idxplan.StepInputs(seq_lens=ok, query_start_loc=ok, block_table=ok)
    with pytest.raises(ValueError, match="block_table must have contiguous rows"):
        idxplan.StepInputs(seq_lens=ok, query_start_loc=ok, block_table=np.zeros((4, 2), dtype=np.int32).T)
    with pytest.raises(ValueError, match="seq_lens is None"):
        idxplan.StepInputs(seq_lens=None, query_start_loc=ok, block_table=table)
    with pytest.raises(ValueError, match="query_start_loc must be an int32 array"):
        idxplan.StepInputs(seq_lens=ok, query_start_loc=[0, 1], block_table=table)
    g = idxplan.make_geometry(num_compute_units=4)
    arrays = {name: np.zeros(8, dtype=np.int32) for name in idxplan.step_buffer_sizes(g)}
    arrays["decode_block_table"] = np.zeros((2, 4), dtype=np.int32)
    arrays["decode_schedule"] = np.zeros(8, dtype=np.float32)
    with pytest.raises(ValueError, match="decode_schedule must hold int32"):
        idxplan.StepOutputs(**arrays)


def test_a_dlpack_array_on_another_device_is_refused():
    """A __dlpack__ capsule of a device neither the host nor a CUDA or ROCm GPU
    (8: Metal) is refused by name, never read as host memory."""
    import ctypes

    class DLTensor(ctypes.Structure):
        _fields_ = [("data", ctypes.c_void_p), ("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32),
                    ("ndim", ctypes.c_int32), ("code", ctypes.c_uint8), ("bits", ctypes.c_uint8),
                    ("lanes", ctypes.c_uint16), ("shape", ctypes.POINTER(ctypes.c_int64)),
                    ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]

    class DLManagedTensor(ctypes.Structure):
        _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]

    shape = (ctypes.c_int64 * 1)(4)
    managed = DLManagedTensor(DLTensor(None, 8, 0, 1, 0, 32, 1, shape, None, 0), None, None)
    new_capsule = ctypes.pythonapi.PyCapsule_New
    new_capsule.restype = ctypes.py_object
    new_capsule.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
    capsule = new_capsule(ctypes.addressof(managed), b"dltensor", None)

    class OnMetal:
        def __dlpack__(self, stream=None):
            return capsule

    ok = np.zeros(4, dtype=np.int32)
    with pytest.raises(ValueError, match="seq_lens is in DLPack device type 8's memory, neither the host's"):
        idxplan.StepInputs(seq_lens=OnMetal(), query_start_loc=ok, block_table=np.zeros((2, 4), dtype=np.int32))


def test_enqueue_without_a_device_part_says_so():
    if idxplan.has_device:
        pytest.skip("this build has a device part")
    with pytest.raises(RuntimeError, match="built without a device part"):
        idxplan.enqueue(None, None, None, None, 0)
    assert idxplan.device_count() == 0


def test_stubs_cover_the_public_api():
    stub = pathlib.Path(idxplan.__file__).with_name("__init__.pyi")
    tree = ast.parse(stub.read_text())
    names = {node.name for node in tree.body if isinstance(node, (ast.FunctionDef, ast.ClassDef))}
    names |= {node.target.id for node in tree.body if isinstance(node, ast.AnnAssign)}
    assert set(idxplan.__all__) <= names, set(idxplan.__all__) - names
    for name in idxplan.__all__:
        obj = getattr(idxplan, name)
        if callable(obj):
            assert obj.__doc__, f"{name} has no docstring"


def test_a_launch_view_is_cut_from_the_array_it_starts_not_the_one_before():
    # A GPU allocator may place decode_block_table right where the engine's table
    # ends (it did on the H200): a ragged step's decode view starts at both the
    # one's end and the other's start, and must be the other's rows.
    g = idxplan.make_geometry(**CONFIGS[1])  # next_n 4: a request of 2 rows is ragged
    qsl, lens = np.array([0, 2, 3], np.int32), np.array([900, 1000], np.int32)
    plan = idxplan.Planner(g).plan(qsl, lens)
    assert plan.decode.ragged
    cols = g.max_blocks_per_seq
    sizes = idxplan.step_buffer_sizes(g)
    rows = sizes["decode_block_table"][0]
    memory = np.zeros((2 + rows) * cols, np.int32)  # the engine's 2 rows, then the step's table
    table = memory[:2 * cols].reshape(2, cols)
    table[:] = [[7], [8]]
    arrays = {name: np.zeros(words, np.int32) for name, words in sizes.items() if name != "decode_block_table"}
    outputs = idxplan.StepOutputs(decode_block_table=memory[2 * cols:].reshape(rows, cols), **arrays)
    inputs = idxplan.StepInputs(seq_lens=lens, query_start_loc=qsl, block_table=table)
    idxplan.fill_step_buffers(g, plan, inputs, outputs)
    view = idxplan.decode_launch(g, plan, inputs, outputs).row_block_table
    assert view.shape == (3, cols) and view[:, 0].tolist() == [7, 7, 8]
    assert np.shares_memory(view, outputs["decode_block_table"])


def test_a_flydsl_geometry_sizes_fills_and_views_its_grids():
    config = idxplan.deepseek_v41_config(256)
    config.update(contract="flydsl_fp4", max_num_seqs=64, max_num_batched_tokens=4096, max_model_len=65536,
                  max_logits_mb=1)
    geometry = idxplan.make_geometry(**config)
    assert geometry.config["contract"] == "flydsl_fp4"
    sizes = idxplan.step_buffer_sizes(geometry)
    assert sizes["schedule_safe"] > 1 and sizes["prefill_schedule"] > 0
    assert sizes["decode_schedule"] == 4 * min(64 * geometry.max_decode_rows, max(1024, 4 * geometry.max_decode_rows))
    qsl = np.array([0, 2, 4, 304], dtype=np.int32)  # two MTP decodes (flattened), a prompt
    lens = np.array([9000, 300, 1300], dtype=np.int32)
    plan = idxplan.Planner(geometry).plan(qsl, lens)
    table = np.zeros((3, geometry.max_blocks_per_seq), dtype=np.int32)
    inputs = idxplan.StepInputs(seq_lens=lens, query_start_loc=qsl, block_table=table)
    outputs = idxplan.host_step_outputs(geometry)
    idxplan.fill_step_buffers(geometry, plan, inputs, outputs)
    decode = idxplan.decode_launch(geometry, plan, inputs, outputs)
    assert (decode.num_seqs, decode.next_n, decode.num_ctas) == (4, 1, 4 * 64)  # every chunk a row can have
    assert decode.max_seq_len == geometry.logits_width
    rows = decode.schedule.reshape(-1, 4)
    assert rows[:, 0].max() < 4 and rows[-1].tolist() == [0, 0, 1, 0]  # four batches, idle past them
    assert decode.safe.tolist() == [1]
    chunk = idxplan.prefill_launch(geometry, plan, 0, inputs, outputs)
    assert chunk.num_ctas == 1024 and chunk.safe.tolist() == [1]
    live = chunk.schedule.reshape(-1, 6)
    assert live[0].tolist() == [0, 0, 0, 1, 0, (1300 - 299) // 4]  # the first row sees its causal end
    with pytest.raises(idxplan.StepError, match="StepOutputs.prefill_schedule is null"):
        idxplan.fill_step_buffers(geometry, plan, inputs, idxplan.StepOutputs(
            **{name: outputs[name] for name in outputs.names if name not in ("prefill_schedule", "schedule_safe")}))
    with pytest.raises(idxplan.ConfigError, match="decode_parallel_units=8 and prefill_parallel_units=0 size "
                                                  "flydsl_fp4's grids"):
        idxplan.make_geometry(**dict(idxplan.deepseek_v41_config(256), decode_parallel_units=8))


def test_a_deepgemm_geometry_writes_deepgemms_metadata_of_its_decode_rows():
    config = idxplan.deepseek_v41_config(132)
    config.update(contract="deepgemm_sm90", block_size=256, max_num_seqs=64, max_num_batched_tokens=4096,
                  max_model_len=65536, max_logits_mb=1)
    geometry = idxplan.make_geometry(**config)
    assert geometry.config["contract"] == "deepgemm_sm90"
    assert idxplan.step_buffer_sizes(geometry)["decode_schedule"] == 2 * 133
    qsl = np.array([0, 2, 4, 304], dtype=np.int32)  # two MTP decodes (native sequences of 2), a prompt
    lens = np.array([9000, 300, 1300], dtype=np.int32)
    plan = idxplan.Planner(geometry).plan(qsl, lens)
    table = np.zeros((3, geometry.max_blocks_per_seq), dtype=np.int32)
    inputs = idxplan.StepInputs(seq_lens=lens, query_start_loc=qsl, block_table=table)
    outputs = idxplan.host_step_outputs(geometry)
    idxplan.fill_step_buffers(geometry, plan, inputs, outputs)
    decode = idxplan.decode_launch(geometry, plan, inputs, outputs)
    assert (decode.num_seqs, decode.next_n, decode.num_ctas) == (2, 2, 132)
    # DeepGEMM's schedule_meta of the launch's context_lens [2, 2]: 2,250 and 75
    # keys, 9 and 1 splits of 256, ten units over 132 SMs, one each for the first ten.
    assert decode.row_ends.tolist() == [(9000 - 1) // 4, 9000 // 4, (300 - 1) // 4, 300 // 4]
    meta = decode.schedule.reshape(-1, 2)
    assert meta.shape == (133, 2)
    assert meta[:10].tolist() == [[0, s] for s in range(9)] + [[1, 0]]
    assert (meta[10:] == [2, 0]).all()
    with pytest.raises(idxplan.ConfigError, match="contract=deepgemm_sm90 needs pages of 64 entries"):
        idxplan.make_geometry(**dict(config, block_size=128))
