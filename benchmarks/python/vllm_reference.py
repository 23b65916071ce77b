# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""vLLM's ROCm MXFP4 indexer builder (``rocm_paged_mxfp4_indexer.py``, loaded from a
path the user gives) running in this process beside idxplan.vllm, for the benchmark
and the GPU test that compares the two.

The file imports vLLM; those imports are stubbed here, and nothing of vLLM's runs but
the file itself:

- its base builder (vLLM's ``DeepseekV32IndexerMetadataBuilder``) is a stub whose
  ``build`` hands back base metadata prepared beforehand by ``prepare`` (outside any
  timing): the decodes flattened a row a token and the prefill chunks split by the
  file's own ``split_prefill_chunks``, their ``cu_seqlen_ks``/``cu_seqlen_ke`` as the
  base builder's chunk kernel writes them. So a timed ``build`` is the file's own
  work: its torch operations and planners on the engine's tensors.
- aiter's decode scheduler (``build_rocm_mxfp4_decode_schedule``) is not launched:
  it returns None, and idxplan's schedule is checked against its own CPU reference
  instead. The other aiter facts the file imports (the cache layout, the schedule's
  words, the consumers' rows) come from the idxplan geometry (docs/design.md 3, 4).
"""

from __future__ import annotations

import importlib.util
import sys
import types
from dataclasses import dataclass
from enum import Enum

import numpy as np

from idxplan import vllm as idxplan_vllm


def _module(name, **attrs):
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


class _Logger:
    def info(self, *args, **kwargs):
        pass

    info_once = warning = warning_once = debug = info


class _BaseBuilder:
    """vLLM's DeepseekV32IndexerMetadataBuilder, reduced to what the file reads of it;
    build() returns the base metadata prepare() made for the step."""

    def __init__(self, kv_cache_spec, layer_names, vllm_config, device, **kwargs):
        import torch

        config = _CONFIG
        self.kv_cache_spec, self.vllm_config, self.device = kv_cache_spec, vllm_config, device
        self.dcp_world_size, self.use_pcp = 1, False
        self.compress_ratio = config["compress_ratio"]
        self.num_speculative_tokens = config["num_speculative_tokens"]
        next_n = self.num_speculative_tokens + 1
        self.arange_buffer = torch.arange(max(config["max_num_seqs"] * next_n, config["max_num_batched_tokens"]),
                                          dtype=torch.int32, device=device)
        self.max_logits_bytes = config["max_logits_mb"] * 2**20  # VLLM_SPARSE_INDEXER_MAX_LOGITS_MB
        self.base = None

    def prepare(self, cm):
        """The base metadata of the step ``cm`` (untimed: vLLM's base builder's work)."""
        self.base = _base_metadata(self, cm)

    def build(self, common_prefix_len, common_attn_metadata, fast_build=False):
        return self.base


_CONFIG: dict = {}


def load(path, geometry):
    """The reference module at ``path``, its vLLM imports stubbed for ``geometry``."""
    import torch  # noqa: F401  (the file needs it)

    _CONFIG.clear()
    _CONFIG.update(geometry.config)

    class AttentionCGSupport(Enum):
        NEVER = 0
        UNIFORM_BATCH = 1
        ALWAYS = 2

    class MultipleOf:
        def __init__(self, base):
            self.base = base

    _module("vllm")
    _module("vllm.config", VllmConfig=object)
    _module("vllm.logger", init_logger=lambda name: _Logger())
    _module("vllm.v1")
    _module("vllm.v1.attention")
    _module("vllm.v1.attention.backend", AttentionCGSupport=AttentionCGSupport,
            CommonAttentionMetadata=object, MultipleOf=MultipleOf)
    _module("vllm.v1.attention.backends")
    _module("vllm.v1.attention.backends.mla")
    _module("vllm.v1.attention.backends.mla.indexer",
            DeepseekV32IndexerMetadata=idxplan_vllm.DeepseekV32IndexerMetadata,
            DeepseekV32IndexerMetadataBuilder=_BaseBuilder,
            DeepseekV32IndexerPrefillChunkMetadata=idxplan_vllm.DeepseekV32IndexerPrefillChunkMetadata,
            DeepseekV41IndexerBackend=type("DeepseekV41IndexerBackend", (), {}))
    _module("vllm.v1.attention.ops")
    _module("vllm.v1.attention.ops.rocm_paged_mxfp4_indexer",
            build_rocm_mxfp4_decode_schedule=lambda *args, **kwargs: None,
            rocm_mxfp4_consumer_rows=lambda cols: geometry.gather_rows,
            rocm_mxfp4_decode_schedule_words=lambda *args: geometry.schedule_words,
            rocm_paged_mxfp4_cache_layout=lambda heads, dim, entries: geometry.cache)
    _module("vllm.v1.kv_cache_interface", AttentionSpec=object, KVCacheSpec=object)
    spec = importlib.util.spec_from_file_location("rocm_paged_mxfp4_indexer_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def make_builder(module, geometry, device):
    """The file's DeepSeek-V4.1 builder for ``geometry``, as vLLM makes it."""
    c = geometry.config
    ns = types.SimpleNamespace
    hf = ns(index_n_heads=c["num_heads"], index_head_dim=c["head_dim"],
            candidate_block_size=c["candidate_block_size"], candidate_topk_blocks=c["candidate_topk_blocks"])
    spec = None
    if c["num_speculative_tokens"] > 0:
        spec = ns(num_speculative_tokens=c["num_speculative_tokens"],
                  enable_adaptive_verification=c["adaptive_verification"])
    vllm_config = ns(model_config=ns(hf_text_config=hf, max_model_len=c["max_model_len"]),
                     speculative_config=spec, attention_config=ns(indexer_sparse_logits=c["sparse_logits"]))
    return module.DeepseekV41RocmMxfp4IndexerMetadataBuilder(ns(block_size=c["block_size"]), [], vllm_config,
                                                            device)


@dataclass
class _Split:
    num_decodes: int
    num_decode_tokens: int


def _split(qsl, num_tokens, threshold):
    """vLLM's decode/prefill split as the base builder makes it (docs/design.md 5.1)."""
    q = np.diff(qsl)
    n = len(q)
    if n == 0 or num_tokens == 0:
        return _Split(0, 0)
    if (q <= threshold).all():
        return _Split(n, num_tokens)
    if q[0] > threshold:
        return _Split(0, 0)
    first = int(np.argmax(q > threshold))
    return _Split(first, int(qsl[first]))


def _base_metadata(builder, cm):
    import torch

    C = builder.compress_ratio
    device = cm.seq_lens.device
    qsl = cm.query_start_loc_cpu.numpy().astype(np.int64)
    upper = cm.seq_lens_cpu_upper_bound.numpy().astype(np.int64)
    exact = cm.seq_lens.cpu().numpy().astype(np.int64)
    num_reqs = cm.num_reqs
    qsl, upper, exact = qsl[:num_reqs + 1], upper[:num_reqs], exact[:num_reqs]
    split = _split(qsl, cm.num_actual_tokens, builder.num_speculative_tokens + 1)
    nd, nd_tokens = split.num_decodes, split.num_decode_tokens
    table = cm.block_table_tensor
    decode = None
    if nd > 0:
        rows = nd_tokens
        real = int(qsl[nd])
        owner = np.searchsorted(qsl[:nd + 1], np.arange(real), side="right") - 1
        lens = np.zeros(rows, dtype=np.int64)
        j = np.arange(real) - qsl[owner]
        lens[:real] = np.maximum(exact[owner] - (qsl[owner + 1] - qsl[owner]) + j + 1, 0) // C
        row_table = torch.zeros((rows, table.shape[1]), dtype=torch.int32, device=device)
        row_table[:real] = table[torch.as_tensor(owner, device=device)]
        decode = idxplan_vllm.DeepSeekV32IndexerDecodeMetadata(
            block_table=row_table, seq_lens=torch.as_tensor(lens, dtype=torch.int32, device=device).unsqueeze(-1),
            decode_lens=torch.ones(rows, dtype=torch.int32, device=device), requires_padding=False,
            schedule_metadata=None)
    prefill = None
    num_prefills = num_reqs - nd if cm.num_actual_tokens > 0 else 0  # a step of no tokens plans nothing
    if num_prefills > 0:
        compressed_upper = torch.as_tensor(upper // C)
        query_lens = torch.as_tensor(np.diff(qsl[nd:]))
        specs = builder._split_indexer_prefill_chunks(compressed_upper[nd:], query_lens, 0,
                                                      builder.max_logits_bytes, nd)
        chunks = []
        for reqs, rows in specs:
            start, end = reqs.start, reqs.stop
            total = int((upper[start:end] // C).sum())
            if total == 0:
                continue
            t0, t1 = int(qsl[start]) + rows.start, int(qsl[start]) + rows.stop
            tokens = np.arange(t0, t1)
            owner = np.searchsorted(qsl, tokens, side="right") - 1
            cu = np.concatenate([[0], np.cumsum(exact[start:end] // C)])
            ks = cu[owner - start]
            ke = ks + (exact[owner] - (qsl[owner + 1] - qsl[owner]) + 1 + tokens - qsl[owner]) // C
            chunks.append(idxplan_vllm.DeepseekV32IndexerPrefillChunkMetadata(
                block_table=table[start:end], cu_seqlen_ks=torch.as_tensor(ks, dtype=torch.int32, device=device),
                cu_seqlen_ke=torch.as_tensor(ke, dtype=torch.int32, device=device), cu_seq_lens=None,
                token_to_seq=None, total_seq_lens=total, token_start=t0, token_end=t1, num_reqs=end - start,
                skip_kv_gather=rows.start > 0))
        prefill = idxplan_vllm.DeepseekV32IndexerPrefillMetadata(chunks=chunks,
                                                                 max_prefill_seq_len=int(upper[nd:].max()))
    return idxplan_vllm.DeepseekV32IndexerMetadata(
        seq_lens=cm.seq_lens, max_seq_len=cm.max_seq_len, slot_mapping=None, num_decodes=nd,
        num_decode_tokens=nd_tokens, num_prefills=num_prefills, num_prefill_tokens=cm.num_actual_tokens - nd_tokens if num_prefills else 0,
        decode=decode, prefill=prefill)
