# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""vLLM's ROCm MXFP4 indexer builder (``rocm_paged_mxfp4_indexer.py``, loaded from a
path the user gives) running in this process beside idxplan.vllm, for the benchmark
and the GPU test that compares the two.

The file imports vLLM; those imports are stubbed here. Two ways to run it:

- **The file's own work** (``load(path, geometry)``): its base builder (vLLM's
  ``DeepseekV32IndexerMetadataBuilder``) is a stub whose ``build`` hands back base
  metadata prepared beforehand by ``prepare`` (outside any timing): the decodes
  flattened a row a token and the prefill chunks split by the file's own
  ``split_prefill_chunks``, their ``cu_seqlen_ks``/``cu_seqlen_ke`` as the base
  builder's chunk kernel writes them. aiter's decode scheduler is not launched: it
  returns None. So a timed ``build`` is the file's own torch operations and planners.
- **vLLM's whole chain** (``load(path, geometry, vllm_source=TREE, schedule=...)``):
  the base builder is vLLM's own, loaded from the vLLM source tree TREE
  (vllm_base.py says what of it runs and what is stubbed), and the decode schedule
  is ``schedule``, a callable that launches aiter's scheduler kernel
  (bench_vllm.py's). A timed ``build`` is what vLLM pays a step on ROCm: the base
  builder, the file's work and the scheduler's launch.

The other aiter facts the file imports (the cache layout, the schedule's words, the
consumers' rows) come from the idxplan geometry (docs/design.md 3, 4).
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


class AttentionCGSupport(Enum):
    NEVER = 0
    UNIFORM_SINGLE_TOKEN_DECODE = 1
    UNIFORM_BATCH = 2
    ALWAYS = 3


class MultipleOf:
    def __init__(self, base):
        self.base = base


class AttentionMetadataBuilder:
    """vLLM's base of every builder, as the builders read it."""

    _cudagraph_support = AttentionCGSupport.NEVER
    reorder_batch_threshold = None
    supports_update_block_table = False
    kernel_block_size = None  # vLLM's model runner sets it where the kernel's pages differ

    def __init__(self, kv_cache_spec, layer_names, vllm_config, device):
        self.kv_cache_spec, self.layer_names, self.vllm_config, self.device = (
            kv_cache_spec, layer_names, vllm_config, device)

    @classmethod
    def get_cudagraph_support(cls, vllm_config, kv_cache_spec):
        return cls._cudagraph_support


BASE_CLASSES = dict(AttentionBackend=type("AttentionBackend", (), {}), AttentionCGSupport=AttentionCGSupport,
                    AttentionMetadataBuilder=AttentionMetadataBuilder, CommonAttentionMetadata=object,
                    MultipleOf=MultipleOf)


def load(path, geometry, vllm_source=None, schedule=None):
    """The reference module at ``path``, its vLLM imports stubbed for ``geometry``:
    on the prepared base, or with ``vllm_source`` on vLLM's own base builder and
    ``schedule`` as the decode scheduler's launch (the module docstring)."""
    import torch  # noqa: F401  (the file needs it)

    _CONFIG.clear()
    _CONFIG.update(geometry.config)
    for name in [m for m in sys.modules if m == "vllm" or m.startswith("vllm.")]:
        del sys.modules[name]  # each load stubs vLLM afresh

    if vllm_source is not None:
        import vllm_base

        base = vllm_base.load(vllm_source, geometry.config, BASE_CLASSES)
        # The ROCm file's backend derives from V4.1's indexer backend, which this
        # vLLM may not name yet; nothing of it runs here.
        if not hasattr(base, "DeepseekV41IndexerBackend"):
            base.DeepseekV41IndexerBackend = type("DeepseekV41IndexerBackend", (), {})
    else:
        _module("vllm")
        _module("vllm.config", VllmConfig=object)
        _module("vllm.logger", init_logger=lambda name: _Logger())
        _module("vllm.v1")
        _module("vllm.v1.attention")
        _module("vllm.v1.attention.backend", **BASE_CLASSES)
        _module("vllm.v1.attention.backends")
        _module("vllm.v1.attention.backends.mla")
        _module("vllm.v1.attention.backends.mla.indexer",
                DeepseekV32IndexerMetadata=idxplan_vllm.DeepseekV32IndexerMetadata,
                DeepseekV32IndexerMetadataBuilder=_BaseBuilder,
                DeepseekV32IndexerPrefillChunkMetadata=idxplan_vllm.DeepseekV32IndexerPrefillChunkMetadata,
                DeepseekV41IndexerBackend=type("DeepseekV41IndexerBackend", (), {}))
    _module("vllm.v1.attention.ops")
    _module("vllm.v1.attention.ops.rocm_paged_mxfp4_indexer",
            build_rocm_mxfp4_decode_schedule=schedule or (lambda *args, **kwargs: None),
            rocm_mxfp4_consumer_rows=lambda cols: geometry.gather_rows,
            rocm_mxfp4_decode_schedule_words=lambda *args: geometry.schedule_words,
            rocm_paged_mxfp4_cache_layout=lambda heads, dim, entries: geometry.cache)
    if vllm_source is None:
        _module("vllm.v1.kv_cache_interface", AttentionSpec=object, KVCacheSpec=object)
    spec = importlib.util.spec_from_file_location("rocm_paged_mxfp4_indexer_reference", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.vllm_base = base if vllm_source is not None else None  # vLLM's base module, if it runs
    return module


def vllm_config_for(geometry, module=None):
    """What vLLM hands a builder for ``geometry``: (kv_cache_spec, vllm_config). The
    spec is vLLM's MLA spec where ``module`` was loaded on vLLM's own base, else a
    namespace with its fields."""
    c = geometry.config
    ns = types.SimpleNamespace
    hf = ns(index_n_heads=c["num_heads"], index_head_dim=c["head_dim"],
            candidate_block_size=c["candidate_block_size"], candidate_topk_blocks=c["candidate_topk_blocks"])
    spec = None
    if c["num_speculative_tokens"] > 0:
        spec = ns(num_speculative_tokens=c["num_speculative_tokens"],
                  enable_adaptive_verification=c["adaptive_verification"], parallel_drafting=False)
    vllm_config = ns(model_config=ns(hf_text_config=hf, hf_config=hf, max_model_len=c["max_model_len"]),
                     speculative_config=spec, num_speculative_tokens=c["num_speculative_tokens"],
                     attention_config=ns(indexer_sparse_logits=c["sparse_logits"],
                                         resolve_indexer_kv_dtype=lambda default: default),
                     scheduler_config=ns(max_num_seqs=c["max_num_seqs"],
                                         max_num_batched_tokens=c["max_num_batched_tokens"]),
                     parallel_config=ns(decode_context_parallel_size=1, prefill_context_parallel_size=1,
                                        cp_kv_cache_interleave_size=1))
    base = getattr(module, "vllm_base", None)
    if base is not None:
        return base.MLAAttentionSpec(c["block_size"], c["compress_ratio"]), vllm_config
    return ns(block_size=c["block_size"], tokens_per_state=c["compress_ratio"],
              num_states=c["block_size"] // c["compress_ratio"]), vllm_config


def make_builder(module, geometry, device):
    """The file's DeepSeek-V4.1 builder for ``geometry``, as vLLM makes it (on
    vLLM's own base when the module was loaded with one: its device and width)."""
    import torch

    kv_cache_spec, vllm_config = vllm_config_for(geometry, module)
    if getattr(module, "vllm_base", None) is not None:
        return module.DeepseekV41RocmMxfp4IndexerMetadataBuilder(
            kv_cache_spec, [], vllm_config, torch.device(device, 0) if device == "cuda" else torch.device(device),
            block_table_width=geometry.max_blocks_per_seq)
    return module.DeepseekV41RocmMxfp4IndexerMetadataBuilder(kv_cache_spec, [], vllm_config, device)


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
