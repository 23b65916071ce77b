# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""Seeded random steps for the Python tests: decodes native, one-row, ragged and
padded (native ones too, as vLLM's FULL graphs pad them); prefills cut into
chunks, with and without gathers; requests with no rows."""

import dataclasses
import random

import numpy as np

import idxplan

# Small geometries, so prefills cut and schedules exist on small steps.
CONFIGS = [
    dict(num_speculative_tokens=1, max_model_len=65536, candidate_block_size=8,
         candidate_topk_blocks=64, sparse_logits=True, max_logits_mb=1, num_compute_units=4,
         max_num_seqs=64, max_num_batched_tokens=4096),
    dict(num_speculative_tokens=3, num_heads=32, max_model_len=65536, candidate_block_size=8,
         candidate_topk_blocks=64, sparse_logits=True, max_logits_mb=1, num_compute_units=2,
         max_num_seqs=64, max_num_batched_tokens=4096),
    dict(num_speculative_tokens=3, adaptive_verification=True, max_model_len=65536,
         max_logits_mb=1, num_compute_units=2, max_num_seqs=64, max_num_batched_tokens=4096),
]


def random_step(config, rng):
    """A valid step for ``config``: query_start_loc, exact and upper-bound lengths,
    num_tokens (padded or None) and a block table of stride >= its pages."""
    threshold = config.get("num_speculative_tokens", 0) + 1
    next_n = 1 if config.get("adaptive_verification") else threshold
    max_len = config["max_model_len"]
    budget = config["max_num_batched_tokens"] - 64
    kind = rng.randrange(6)  # 0-1 decodes, 2-4 mixed, 5 prefills
    num_reqs = rng.randrange(0, 24)
    num_decodes = num_reqs if kind <= 1 else (0 if kind == 5 else rng.randrange(num_reqs + 1))
    uniform = rng.random() < 0.5
    padding = rng.randrange(num_decodes + 1) if kind <= 1 and rng.random() < 0.5 else 0
    qsl, upper, exact = [0], [], []
    for r in range(num_reqs):
        if r < num_decodes - padding:
            q = next_n if uniform else rng.randrange(threshold + 1)
        elif r < num_decodes:
            q = 0
        elif r == num_decodes:
            q = rng.randrange(threshold + 1, threshold + 600)
        else:
            q = 0 if rng.random() < 0.25 else rng.randrange(1, 300)
        q = max(0, min(q, budget - qsl[-1]))
        if r == num_decodes and q <= threshold:
            break
        qsl.append(qsl[-1] + q)
        ub = max_len if rng.random() < 0.25 else min(max_len, q + rng.randrange(5000))
        upper.append(ub)
        exact.append(ub if rng.random() < 0.75 else rng.randrange(q, ub + 1))
    num_tokens = None
    if padding and uniform and next_n > 1 and len(upper) == num_decodes and rng.random() < 0.8:
        # vLLM's FULL graphs: a uniform batch padded with whole empty requests,
        # next_n tokens each, which runs native.
        num_tokens = num_decodes * next_n
    elif rng.random() < 0.25:
        all_decode = len(upper) <= num_decodes
        room = (config["max_num_seqs"] * threshold if all_decode else config["max_num_batched_tokens"])
        num_tokens = min(room, config["max_num_batched_tokens"], qsl[-1] + rng.randrange(17))
        num_tokens = max(num_tokens, qsl[-1])
    block_size = config.get("block_size", 128)
    stride = -(-max_len // block_size) + rng.randrange(3)
    table = [[(r * 7919 + c * 104729) % 1000003 for c in range(stride)] for r in range(len(upper))]
    return dict(query_start_loc=qsl, seq_lens=exact, seq_lens_upper_bound=upper,
                num_tokens=num_tokens, block_table=table, stride=stride)


def step_json(step):
    """The step as the idxplan command's "step" object."""
    out = {k: step[k] for k in ("query_start_loc", "seq_lens", "seq_lens_upper_bound")}
    if step["num_tokens"] is not None:
        out["num_tokens"] = step["num_tokens"]
    return out


def rng_for(seed):
    return random.Random(seed)


def host_inputs(step):
    """The step's exact lengths, query_start_loc and block table as host StepInputs."""
    table = np.array(step["block_table"], dtype=np.int32).reshape(len(step["seq_lens"]), step["stride"])
    return idxplan.StepInputs(seq_lens=np.array(step["seq_lens"], dtype=np.int32),
                              query_start_loc=np.array(step["query_start_loc"], dtype=np.int32),
                              block_table=table)


def torch_step(step, device):
    """The step as vLLM's CommonAttentionMetadata carries it, in torch tensors: the
    host copies on the CPU, the exact lengths, offsets and block table on ``device``."""
    import types

    import torch

    num_reqs = len(step["seq_lens"])
    qsl = torch.tensor(step["query_start_loc"], dtype=torch.int32)
    table = torch.tensor(step["block_table"], dtype=torch.int32).reshape(num_reqs, step["stride"])
    return types.SimpleNamespace(
        num_reqs=num_reqs,
        num_actual_tokens=step["num_tokens"] if step["num_tokens"] is not None else int(qsl[-1]),
        query_start_loc=qsl.to(device), query_start_loc_cpu=qsl,
        seq_lens=torch.tensor(step["seq_lens"], dtype=torch.int32, device=device),
        seq_lens_cpu_upper_bound=torch.tensor(step["seq_lens_upper_bound"], dtype=torch.int32),
        block_table_tensor=table.to(device), max_seq_len=max(step["seq_lens_upper_bound"], default=0),
        slot_mapping=None)


def _host(a):
    """An array's values on the host: a torch tensor's (on any device), or numpy's."""
    return a.cpu().numpy() if hasattr(a, "cpu") else np.asarray(a)


def assert_same(a, b, path="metadata"):
    """Two metadata objects hold the same values everywhere: the same dataclasses,
    lists and scalars, arrays (numpy, or torch on any device) of the same shape and
    values."""
    if dataclasses.is_dataclass(a):
        assert type(a) is type(b), path
        for f in dataclasses.fields(a):
            assert_same(getattr(a, f.name), getattr(b, f.name), f"{path}.{f.name}")
    elif isinstance(a, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same(x, y, f"{path}[{i}]")
    elif a is None or isinstance(a, (bool, int, float, str)):
        assert a == b and type(a) is type(b), f"{path}: {a!r} != {b!r}"
    else:
        x, y = _host(a), _host(b)
        assert x.shape == y.shape and np.array_equal(x, y), path
