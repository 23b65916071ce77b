# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""idxplan.vllm on the CPU: build() on 500 random steps equals the plan's JSON (the
idxplan command's) field for field, the key bounds are the chunk's contexts before
each row, every array is a view of the builder's buffers or of the engine's arrays
(checked by pointer), and bad input is refused by name."""

import dataclasses
import sys
import threading
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
    kinds = {"decode": 0, "native": 0, "padded native": 0, "prefill": 0, "gather": 0, "several chunks": 0}
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
        # vLLM's FULL graphs' padding: whole empty requests in a native step.
        qsl = cm.query_start_loc_cpu[:m.num_decodes + 1]
        kinds["padded native"] += m.decode_native is not None and 0 in np.diff(qsl)
        kinds["prefill"] += m.num_prefills > 0
        kinds["gather"] += bool(m.gather_launches)
        kinds["several chunks"] += len(m.prefill_plans) > 1
    assert all(n >= (10 if kind == "padded native" else 20) for kind, n in kinds.items()), kinds


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
    del cm.query_start_loc_cpu
    with pytest.raises(ValueError, match="common_attn_metadata has no query_start_loc_cpu"):
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


# Found by an engine engineer's tries (issue 50): each of these crashed, was
# refused, or answered otherwise than the reference.

@pytest.mark.parametrize("count", [np.array(4.0), np.array([4, 5]), np.float64(4.0), 4.0, "4", None])
@pytest.mark.parametrize("field", ["num_reqs", "num_actual_tokens"])
def test_a_count_that_is_not_an_integer_is_refused_by_name(field, count):
    # np.array(4.0) has __index__, which raises: that used to crash the process.
    builder = cpu_builder(CONFIGS[0])
    with pytest.raises(ValueError, match=f"common_attn_metadata.{field} must be an integer"):
        builder.build(0, common_attn_metadata(TWO_DECODES, **{field: count}))


def test_integer_like_counts_are_read_and_huge_ones_refused_by_name():
    builder = cpu_builder(CONFIGS[0])
    m = builder.build(0, common_attn_metadata(TWO_DECODES, num_reqs=np.int64(2), num_actual_tokens=np.array(4)))
    assert m.num_decodes == 2 and m.num_decode_tokens == 4
    with pytest.raises(ValueError, match="common_attn_metadata.num_actual_tokens=18446744073709551616 does not fit"):
        builder.build(0, common_attn_metadata(TWO_DECODES, num_actual_tokens=2**64))


def test_torch_counts_that_are_not_integers_are_refused_by_name():
    torch = pytest.importorskip("torch")
    builder = cpu_builder(CONFIGS[0])
    for count in (torch.tensor(4.0), torch.tensor([4, 5])):
        with pytest.raises(ValueError, match="common_attn_metadata.num_reqs must be an integer"):
            builder.build(0, common_attn_metadata(TWO_DECODES, num_reqs=count))


class Reentering:
    """common_attn_metadata whose num_reqs builds again on the same builder, as a
    second thread would while the first is inside build()."""

    def __init__(self, builder, cm):
        self.__dict__.update(vars(cm))
        self.builder, self.inner = builder, None

    @property
    def num_reqs(self):
        try:
            self.builder.build(0, common_attn_metadata(TWO_DECODES))
        except RuntimeError as e:
            self.inner = e
        return 2


def test_a_build_entered_again_is_refused_not_crashed():
    builder = cpu_builder(CONFIGS[0])
    cm = Reentering(builder, common_attn_metadata(TWO_DECODES))
    m = builder.build(0, cm)
    assert isinstance(cm.inner, RuntimeError) and "already building" in str(cm.inner)
    assert m.decode_row_lens.tolist() == [224, 225, 249, 250]
    # The guard is released, by a build that raised too.
    with pytest.raises(ValueError):
        builder.build(0, common_attn_metadata(TWO_DECODES, num_reqs=2.0))
    assert builder.build(0, common_attn_metadata(TWO_DECODES)).num_decodes == 2


def test_one_builder_from_two_threads_raises_or_builds_never_crashes():
    builder = cpu_builder(CONFIGS[0])
    outcomes = {"built": 0, "refused": 0}
    lock = threading.Lock()

    class Slow:  # a Python property, so the threads switch inside build()
        def __init__(self):
            self.__dict__.update(vars(common_attn_metadata(TWO_DECODES)))

        @property
        def num_reqs(self):
            return sum([1, 1])

    def run():
        for _ in range(1500):
            try:
                m = builder.build(0, Slow())
                assert m.decode_row_lens.tolist()[:4] == [224, 225, 249, 250]
                key = "built"
            except RuntimeError as e:
                assert "already building" in str(e)
                key = "refused"
            with lock:
                outcomes[key] += 1

    threads = [threading.Thread(target=run) for _ in range(2)]
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads inside build(), at its Python property
    try:
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    finally:
        sys.setswitchinterval(interval)
    print("two threads:", outcomes)
    assert outcomes["built"] + outcomes["refused"] == 3000 and outcomes["built"] > 0, outcomes


def test_the_decode_gate_holds_for_the_graphs_max_seq_len():
    # While capturing, vLLM sets max_seq_len to max_model_len: the gate must hold
    # for any replay, so it takes the larger of that and the step's bounds.
    builder = cpu_builder(CONFIGS[0])  # 512 candidate columns: decodes gather from 1,536 keys
    short = builder.build(0, common_attn_metadata(TWO_DECODES))
    assert short.decode_use_gather is False
    captured = builder.build(0, common_attn_metadata(TWO_DECODES, max_seq_len=65536))
    assert captured.decode_use_gather is True and builder.plan.decode.use_gather
    # The gathering rows read the flattened table, written for them.
    assert captured.decode.block_table is not None
    with pytest.raises(ValueError, match="common_attn_metadata.max_seq_len must be an integer"):
        builder.build(0, common_attn_metadata(TWO_DECODES, max_seq_len=1.5))


def test_a_decode_only_step_without_upper_bounds_plans_from_max_seq_len():
    builder = cpu_builder(CONFIGS[0])
    m = builder.build(0, common_attn_metadata(TWO_DECODES, seq_lens_cpu_upper_bound=None))
    assert m.num_decodes == 2 and m.decode_row_lens.tolist() == [224, 225, 249, 250]
    assert builder.plan.decode.max_seq_len == 1000  # max_seq_len, the bound of every request
    cm = common_attn_metadata(TWO_DECODES)
    del cm.seq_lens_cpu_upper_bound
    assert builder.build(0, cm).decode_row_lens.tolist() == [224, 225, 249, 250]
    with pytest.raises(ValueError, match="seq_lens_cpu_upper_bound is None, and the step has 1 prefill"):
        step = dict(TWO_DECODES, query_start_loc=[0, 2, 300], seq_lens=[900, 5000])
        builder.build(0, common_attn_metadata(step, seq_lens_cpu_upper_bound=None, max_seq_len=5000))
    with pytest.raises(ValueError, match="seq_lens_cpu_upper_bound is None, and so is max_seq_len"):
        builder.build(0, common_attn_metadata(TWO_DECODES, seq_lens_cpu_upper_bound=None, max_seq_len=None))


class Raising:
    def __init__(self, cm, field):
        self.__dict__.update(vars(cm))
        del self.__dict__[field]
        self.field = field

    def __getattr__(self, name):
        if name == self.field:
            raise KeyError(f"the engine's own fault reading {name}")
        raise AttributeError(name)


@pytest.mark.parametrize("field", ["query_start_loc", "max_seq_len", "slot_mapping"])
def test_a_field_that_raises_is_chained_not_reported_missing(field):
    builder = cpu_builder(CONFIGS[0])
    with pytest.raises(ValueError, match=f"reading common_attn_metadata.{field} raised KeyError") as e:
        builder.build(0, Raising(common_attn_metadata(TWO_DECODES), field))
    assert isinstance(e.value.__cause__, KeyError) and "the engine's own fault" in str(e.value.__cause__)


def test_the_flattened_decode_table_has_the_geometrys_width():
    # docs/vllm.md's field map: decode.block_table is [rows, max_blocks_per_seq]
    # where rows are flattened (the engine's table, where rows are requests).
    builder = cpu_builder(CONFIGS[1])  # next_n 4: a request of 2 rows is ragged
    step = dict(TWO_DECODES, query_start_loc=[0, 2, 3], block_table=[[r] * 520 for r in range(2)], stride=520)
    m = builder.build(0, common_attn_metadata(step))
    assert m.decode_native is None and m.decode.block_table.shape == (3, 512)
    assert inside(m.decode.block_table, [builder.buffers["decode_block_table"]])
