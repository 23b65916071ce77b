# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""idxplan.vllm on the CPU: build() on 500 random steps equals the plan's JSON (the
idxplan command's) field for field, the key bounds are the chunk's contexts before
each row, every array is a view of the builder's buffers or of the engine's arrays
(checked by pointer), and bad input is refused by name."""

import dataclasses
import types

import numpy as np
import pytest

import idxplan
from idxplan import vllm
from steps import CONFIGS, random_step, rng_for, step_json

STEPS = 500


# Two MTP decodes (next_n 2 in CONFIGS[0]), the step several tests build.
TWO_DECODES = dict(query_start_loc=[0, 2, 4], seq_lens=[900, 1000], seq_lens_upper_bound=[900, 1000],
                   num_tokens=None, block_table=[[r] * 512 for r in range(2)], stride=512)


def numpy_empty(shape):
    return np.zeros(shape, dtype=np.int32)


def cpu_builder(config):
    """A CPU builder with numpy buffers (torch may be loaded by another test file)."""
    return vllm.MetadataBuilder(idxplan.make_geometry(**config), "cpu", empty=numpy_empty)


def common_attn_metadata(step, **changes):
    """The step as vLLM's CommonAttentionMetadata carries it, in numpy arrays."""
    qsl = np.array(step["query_start_loc"], dtype=np.int32)
    num_reqs = len(step["seq_lens"])
    fields = dict(
        num_reqs=num_reqs,
        num_actual_tokens=step["num_tokens"] if step["num_tokens"] is not None else int(qsl[-1]),
        query_start_loc=qsl, query_start_loc_cpu=qsl.copy(),
        seq_lens=np.array(step["seq_lens"], dtype=np.int32),
        seq_lens_cpu_upper_bound=np.array(step["seq_lens_upper_bound"], dtype=np.int32),
        block_table_tensor=np.array(step["block_table"], dtype=np.int32).reshape(num_reqs, step["stride"]),
        max_seq_len=max(step["seq_lens_upper_bound"], default=0), slot_mapping=None)
    fields.update(changes)
    return types.SimpleNamespace(**fields)


def address_range(a):
    start = a.__array_interface__["data"][0]
    return start, start + a.nbytes


def inside(view, owners):
    """Whether `view`'s memory lies inside one of `owners` (zero copy, by pointer)."""
    lo, hi = address_range(view)
    return any(o_lo <= lo and hi <= o_hi for o_lo, o_hi in map(address_range, owners))


def arrays_of(obj):
    """Every numpy array in a metadata object, with the path to it."""
    if isinstance(obj, np.ndarray):
        yield "", obj
    elif dataclasses.is_dataclass(obj):
        for f in dataclasses.fields(obj):
            for path, a in arrays_of(getattr(obj, f.name)):
                yield f".{f.name}{path}", a
    elif isinstance(obj, list):
        for i, item in enumerate(obj):
            for path, a in arrays_of(item):
                yield f"[{i}]{path}", a


def as_list(a):
    return None if a is None else a.tolist()


def check_against_json(m, j, cm, ratio):
    assert (m.num_decodes, m.num_decode_tokens, m.num_prefills, m.num_prefill_tokens) == (
        j["num_decodes"], j["num_decode_tokens"], j["num_prefills"], j["num_prefill_tokens"])
    assert m.seq_lens is cm.seq_lens and m.max_seq_len == cm.max_seq_len
    d = j["decode"]
    if m.num_decodes == 0:
        assert m.decode is None and m.decode_row_lens is None and m.decode_native is None
    else:
        # Decode requests without rows (a step's leading empty requests) still
        # make a decode, as vLLM's base builder's, of no rows.
        row_lens = d["row_lens"] or []
        rows = len(row_lens)
        assert m.decode_row_lens.tolist() == row_lens
        assert m.decode.seq_lens.shape == (rows, 1) and m.decode.seq_lens[:, 0].tolist() == row_lens
        assert m.decode.decode_lens.tolist() == [1] * rows
        assert as_list(m.decode_block_ends) in (d["block_ends"], [] if rows == 0 else None)
        # The gate holds without rows too, as the reference's (the JSON's
        # decode launch has none to gate).
        assert m.decode_use_gather == d["use_gather"] or rows == 0
        # The flattened table: row i is row i's request's row of the engine's table.
        qsl = cm.query_start_loc_cpu
        real = int(qsl[m.num_decodes])
        owner = np.searchsorted(qsl[:m.num_decodes + 1], np.arange(real), side="right") - 1
        cols = cm.block_table_tensor.shape[1]
        assert m.decode.block_table.shape[0] == rows
        used = -(-max(cm.seq_lens_cpu_upper_bound[:m.num_decodes], default=0) // 128)
        expected = cm.block_table_tensor[owner]
        assert (m.decode.block_table[:real, :min(used, cols)] == expected[:, :min(used, cols)]).all()
        if d["native"] is None:
            assert m.decode_native is None
        else:
            n = m.decode_native
            assert n.next_n == d["native"]["next_n"]
            assert n.context_lens.tolist() == j["context_lens"][:d["native"]["num_seqs"]]
            assert (n.block_table == cm.block_table_tensor[:d["native"]["num_seqs"]]).all()
        if d["schedule"] is None:
            assert m.decode_schedule is None
        else:
            assert m.decode_schedule.tolist() == d["schedule"]["words"]
    assert len(m.prefill_plans) == len(j["prefill"])
    if m.num_prefills == 0:
        assert m.prefill is None
    else:
        assert len(m.prefill.chunks) == len(j["prefill"])
        bounds = cm.seq_lens_cpu_upper_bound[m.num_decodes:]
        assert m.prefill.max_prefill_seq_len == max(bounds, default=0)
    for p, c, e in zip(m.prefill_plans, m.prefill.chunks if m.prefill else [], j["prefill"]):
        assert [list(r) for r in p.requests] == e["requests"]
        assert (p.width, p.first_request, p.use_gather) == (e["width"], e["first_request"], e["use_gather"])
        assert p.row_ends.tolist() == e["row_ends"]
        assert as_list(p.block_ends) == e["block_ends"]
        assert p.context_lens.tolist() == e["context_lens"]
        assert p.query_start_loc.tolist() == e["query_start_loc"]
        assert (c.token_start, c.token_end, c.num_reqs) == (e["token_start"], e["token_end"], e["num_reqs"])
        assert (c.block_table == cm.block_table_tensor[e["first_request"]:e["first_request"] + e["num_reqs"]]).all()
        # Each row's keys start after the chunk's requests before its own.
        qsl = cm.query_start_loc_cpu
        for k, t in enumerate(range(c.token_start, c.token_end)):
            owner = int(np.searchsorted(qsl, t, side="right")) - 1
            before = sum(e["context_lens"][:owner - e["first_request"]])
            assert c.cu_seqlen_ks[k] == before and c.cu_seqlen_ke[k] == before + e["row_ends"][k]
        assert c.skip_kv_gather == (c.token_start > qsl[e["first_request"]])
        assert c.total_seq_lens == sum(
            int(b) // ratio for b in cm.seq_lens_cpu_upper_bound[e["first_request"]:e["first_request"] + e["num_reqs"]])
    assert len(m.gather_launches) == len(j["gather_launches"])
    for launch, e in zip(m.gather_launches, j["gather_launches"]):
        assert (launch.token_start, launch.token_end) == (e["token_start"], e["token_end"])
        assert launch.context_len.tolist() == [e["context_len"]]
        assert launch.row_ends.tolist() == e["row_ends"]
        assert (launch.block_table == cm.block_table_tensor[e["request"]:e["request"] + 1]).all()
        assert launch.pool is None


def test_build_equals_the_plan_field_for_field_and_copies_nothing():
    rng = rng_for(1414)
    builders = [cpu_builder(c) for c in CONFIGS]
    kinds = {"decode": 0, "native": 0, "prefill": 0, "gather": 0, "several chunks": 0}
    for i in range(STEPS):
        k = i % len(CONFIGS)
        step = random_step(CONFIGS[k], rng)
        cm = common_attn_metadata(step)
        m = builders[k].build(0, cm)
        assert type(m) is vllm.RocmMxfp4IndexerMetadata
        check_against_json(m, idxplan.plan_json(CONFIGS[k], step_json(step)), cm,
                           builders[k].geometry.config["compress_ratio"])
        owners = list(builders[k].buffers.values()) + [cm.seq_lens, cm.query_start_loc, cm.block_table_tensor]
        for path, a in arrays_of(m):
            assert inside(a, owners), f"step {i}: metadata{path} is a copy"
        kinds["decode"] += m.num_decodes > 0
        kinds["native"] += m.decode_native is not None
        kinds["prefill"] += m.num_prefills > 0
        kinds["gather"] += bool(m.gather_launches)
        kinds["several chunks"] += len(m.prefill_plans) > 1
    assert all(n >= 20 for n in kinds.values()), kinds


def test_every_field_of_the_reference_dataclasses_is_set():
    builder = cpu_builder(CONFIGS[0])
    step = dict(query_start_loc=[0, 2, 4, 300], seq_lens=[900, 1000, 5000], seq_lens_upper_bound=[900, 1000, 5000],
                num_tokens=None, block_table=[[r] * 512 for r in range(3)], stride=512)
    m = builder.build(0, common_attn_metadata(step))
    objects = [m, m.decode, m.decode_native, m.prefill, *m.prefill.chunks, *m.prefill_plans, *m.gather_launches]
    assert m.decode_native is not None and len(m.gather_launches) == 1 and len(m.prefill.chunks) == 2
    for obj in objects:
        for f in dataclasses.fields(obj):
            assert f.name in vars(obj), f"{type(obj).__name__}.{f.name} is not set"


def test_a_padded_uniform_decode_step_runs_native():
    # vLLM's FULL graphs pad a uniform MTP batch with whole empty requests; the
    # padded token count is num_actual_tokens.
    builder = cpu_builder(CONFIGS[0])  # next_n 2
    step = dict(query_start_loc=[0, 2, 4, 4, 4], seq_lens=[900, 1000, 0, 0], seq_lens_upper_bound=[900, 1000, 0, 0],
                num_tokens=8, block_table=[[r] * 512 for r in range(4)], stride=512)
    m = builder.build(0, common_attn_metadata(step))
    assert m.num_decodes == 4 and m.num_decode_tokens == 8
    assert m.decode_native.next_n == 2 and m.decode_native.context_lens.tolist() == [225, 250, 0, 0]
    assert m.decode_row_lens.tolist() == [224, 225, 249, 250, 0, 0, 0, 0]


def test_views_of_fixed_buffers_are_made_once():
    builder = cpu_builder(CONFIGS[0])
    step = TWO_DECODES
    first = builder.build(0, common_attn_metadata(step))
    second = builder.build(0, common_attn_metadata(step))
    assert first is not second and first.decode_row_lens is second.decode_row_lens


def test_bad_input_is_refused_by_name():
    builder = cpu_builder(CONFIGS[0])
    step = TWO_DECODES
    cm = common_attn_metadata(step)
    del cm.seq_lens_cpu_upper_bound
    with pytest.raises(ValueError, match="common_attn_metadata has no seq_lens_cpu_upper_bound"):
        builder.build(0, cm)
    with pytest.raises(ValueError, match="num_reqs must be an integer"):
        builder.build(0, common_attn_metadata(step, num_reqs=2.0))
    with pytest.raises(ValueError, match="query_start_loc_cpu has 3 entries, fewer than num_reqs \\+ 1 = 4"):
        builder.build(0, common_attn_metadata(step, num_reqs=3))
    with pytest.raises(idxplan.StepError, match="StepInputs.num_seq_lens=1 is short"):
        builder.build(0, common_attn_metadata(step, seq_lens=np.array([900], dtype=np.int32)))
    with pytest.raises(ValueError, match="block_table_tensor must hold int32"):
        builder.build(0, common_attn_metadata(step, block_table_tensor=np.zeros((2, 512), dtype=np.int64)))
    with pytest.raises(idxplan.StepError, match="seq_lens_upper_bound\\[1\\]=70000 is past max_model_len"):
        builder.build(0, common_attn_metadata(step, seq_lens_cpu_upper_bound=np.array([900, 70000], np.int32)))
    with pytest.raises(ValueError, match="device must be"):
        vllm.MetadataBuilder(builder.geometry, "tpu")


# The step docs/vllm.md shows: the split's second group is requests 1-3 (request 1
# without rows), one chunk of tokens [20, 30).
TRIM_STEP = dict(query_start_loc=[0, 20, 20, 25, 30, 50], seq_lens=[100, 65536, 200, 300, 400],
                 seq_lens_upper_bound=[100, 65536, 200, 300, 400], num_tokens=None,
                 block_table=[[r] * 512 for r in range(5)], stride=512)


def test_a_chunk_after_an_empty_request_covers_the_requests_with_rows():
    builder = cpu_builder(CONFIGS[0])
    cm = common_attn_metadata(TRIM_STEP)
    m = builder.build(0, cm)
    chunk = next(i for i, c in enumerate(m.prefill.chunks) if c.token_start == 20)
    p, c = m.prefill_plans[chunk], m.prefill.chunks[chunk]
    assert (c.token_start, c.token_end, c.num_reqs, p.first_request) == (20, 30, 2, 2)
    assert p.requests == [(0, 5, 0), (5, 10, 1)] and p.width == 75
    assert c.block_table[:, 0].tolist() == [2, 3]
    assert p.context_lens.tolist() == [50, 75] and p.query_start_loc.tolist() == [0, 5, 10]
    assert c.cu_seqlen_ks.tolist() == [0] * 5 + [50] * 5


def test_slices_of_the_engines_table_are_kept_while_its_memory_stays():
    builder = cpu_builder(CONFIGS[0])
    cm = common_attn_metadata(TRIM_STEP)
    table = cm.block_table_tensor
    first = builder.build(0, cm).prefill.chunks[1].block_table
    # A new array object over the same memory (as vLLM slices its persistent table
    # every step): the same view.
    again = builder.build(0, common_attn_metadata(TRIM_STEP, block_table_tensor=table[:]))
    assert again.prefill.chunks[1].block_table is first
    # Other memory: a view of it, with its values.
    other = table.copy()
    other[:, 0] += 100
    moved = builder.build(0, common_attn_metadata(TRIM_STEP, block_table_tensor=other))
    assert moved.prefill.chunks[1].block_table is not first
    assert moved.prefill.chunks[1].block_table[:, 0].tolist() == [102, 103]
    assert inside(moved.prefill.chunks[1].block_table, [other])
