# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""idxplan's builder as a vLLM builder class (docs/vllm.md, "The plugin").

``builder_class(original)`` makes, for one of vLLM's ROCm MXFP4 indexer builder
classes, a subclass that vLLM constructs and calls as it would the original: its
``__init__`` reads the indexer's config from ``vllm_config`` and makes one
``idxplan.vllm.MetadataBuilder``; its ``build`` is one call into that builder,
plus the cache write's compressed slot mapping, which vLLM's base builder makes
and idxplan does not plan. A shim: every rule is the library's.

It imports vLLM, so the plugin imports it only once vLLM is there. vLLM's names
are looked up by name, since vLLM versions move them; a name this builder cannot
do without is an error at engine start, naming it.
"""

from __future__ import annotations

import importlib
import sys
from typing import Any, Optional

from . import make_geometry
from . import vllm as _vllm

# vLLM's modules and names the builder reads, in the order they are tried.
_CG_SUPPORT = (("vllm.v1.attention.backend", "AttentionCGSupport"),
               ("vllm.v1.attention.backends.utils", "AttentionCGSupport"))
_SLOT_MAPPING = (("vllm.v1.attention.backends.mla.compressor_utils", "get_compressed_slot_mapping"),)
_COMPUTE_UNITS = (("vllm.utils.platform_utils", "num_compute_units"),)
_MAX_LOGITS_MB_DEFAULT = 512  # vLLM's VLLM_SPARSE_INDEXER_MAX_LOGITS_MB default

_classes: dict = {}  # original builder class -> its idxplan subclass (one each, for every register())


def lookup(candidates: tuple) -> Optional[Any]:
    """The first of (module, name) that this vLLM has, or None."""
    for module_name, name in candidates:
        try:
            module = importlib.import_module(module_name)
        except ImportError:
            continue
        if hasattr(module, name):
            return getattr(module, name)
    return None


def _base_init(original: type) -> Any:
    """vLLM's AttentionMetadataBuilder.__init__ (kv_cache_spec, layer_names, vllm_config,
    device): the builder skips the original's own __init__ and its buffers."""
    for cls in original.__mro__:
        if cls.__name__ == "AttentionMetadataBuilder":
            return cls.__init__
    raise TypeError(f"{original.__qualname__} does not derive from vLLM's AttentionMetadataBuilder")


class _TableView:
    """common_attn_metadata with another block table (the kernel block size's)."""

    def __init__(self, cm: Any, table: Any) -> None:
        self._cm, self.block_table_tensor = cm, table

    def __getattr__(self, name: str) -> Any:
        return getattr(self._cm, name)


def geometry_config(kv_cache_spec: Any, vllm_config: Any, device: Any) -> dict:
    """make_geometry's arguments, from what vLLM hands a builder."""
    hf = vllm_config.model_config.hf_text_config
    spec = vllm_config.speculative_config
    scheduler = vllm_config.scheduler_config
    parallel = vllm_config.parallel_config
    max_model_len = vllm_config.model_config.max_model_len
    envs = importlib.import_module("vllm.envs")
    compute_units = lookup(_COMPUTE_UNITS)
    if compute_units is not None:
        cus = compute_units(getattr(device, "index", None))
    else:  # older vLLM: torch's count of the GPU's multiprocessors (CUs on ROCm)
        import torch

        cus = torch.cuda.get_device_properties(device).multi_processor_count
    return dict(
        num_heads=hf.index_n_heads, head_dim=hf.index_head_dim,
        block_size=kv_cache_spec.block_size, compress_ratio=getattr(kv_cache_spec, "tokens_per_state", 1),
        num_speculative_tokens=(spec.num_speculative_tokens or 0) if spec else 0,
        adaptive_verification=bool(spec and getattr(spec, "enable_adaptive_verification", False)),
        max_model_len=max_model_len,
        candidate_block_size=getattr(hf, "candidate_block_size", 0),
        candidate_topk_blocks=getattr(hf, "candidate_topk_blocks", 0),
        sparse_logits=bool(getattr(vllm_config.attention_config, "indexer_sparse_logits", False)),
        max_logits_mb=getattr(envs, "VLLM_SPARSE_INDEXER_MAX_LOGITS_MB", _MAX_LOGITS_MB_DEFAULT),
        num_compute_units=cus,
        dcp_world_size=parallel.decode_context_parallel_size,
        pcp_world_size=parallel.prefill_context_parallel_size,
        max_num_seqs=scheduler.max_num_seqs,
        max_num_batched_tokens=scheduler.max_num_batched_tokens,
        max_blocks_per_seq=-(-max_model_len // kv_cache_spec.block_size))


def builder_class(original: type) -> type:
    """idxplan's subclass of vLLM's builder class ``original`` (made once per class)."""
    if original in _classes:
        return _classes[original]
    base_init = _base_init(original)
    cg_support = lookup(_CG_SUPPORT)

    class IdxplanIndexerMetadataBuilder(original):  # type: ignore[misc, valid-type]
        """vLLM's ROCm MXFP4 indexer builder, reduced to idxplan: ``__init__`` is the
        config, ``build`` one call (docs/vllm.md)."""

        _idxplan_replaces = original
        # The decode rows' buffers are persistent, and only the step's shape decides
        # a launch's shape: every step can be captured, mixed ones too.
        if cg_support is not None:
            _cudagraph_support = cg_support.ALWAYS
        # reorder_batch_threshold and the rest of what vLLM's model runner reads
        # of a builder class are the original's.

        @classmethod
        def get_cudagraph_support(cls, vllm_config: Any, kv_cache_spec: Any) -> Any:
            return cg_support.ALWAYS if cg_support is not None else super().get_cudagraph_support(
                vllm_config, kv_cache_spec)

        def __init__(self, kv_cache_spec: Any, layer_names: list, vllm_config: Any, device: Any,
                     **kwargs: Any) -> None:
            base_init(self, kv_cache_spec, layer_names, vllm_config, device)
            config = geometry_config(kv_cache_spec, vllm_config, device)
            self.compress_ratio = config["compress_ratio"]
            self.num_speculative_tokens = config["num_speculative_tokens"]
            self.decode_threshold = self.num_speculative_tokens + 1
            self.use_flattening = True
            self.idxplan = _vllm.MetadataBuilder(make_geometry(**config), device)
            self.slot_mapping_buffer = None
            self._compressed_slot_mapping = None
            if self.compress_ratio > 1:
                self._compressed_slot_mapping = lookup(_SLOT_MAPPING)
                if self._compressed_slot_mapping is None:
                    names = ", ".join(f"{m}.{n}" for m, n in _SLOT_MAPPING)
                    raise RuntimeError(f"idxplan's vLLM builder needs {names} for the cache write's slot "
                                       f"mapping at compress ratio {self.compress_ratio}; this vLLM has none")
                self.slot_mapping_buffer = _zeros(vllm_config.scheduler_config.max_num_batched_tokens, device)
            self._table_buffer = None

        def _indexer_table(self, cm: Any) -> Any:
            """The engine's table, or, where the kernel block size divides the cache's
            (vLLM sets kernel_block_size), the cache's pages as vLLM's base passes them."""
            kernel = getattr(self, "kernel_block_size", None)
            block = self.kv_cache_spec.block_size
            table = cm.block_table_tensor
            if kernel is None or kernel == block or block % kernel != 0:
                return table
            factor = block // kernel
            pages = table[:, ::factor]
            rows, cols = pages.shape
            held = self._table_buffer
            if held is None or held.shape[0] < rows or held.shape[1] < cols:
                # Persistent (vLLM's tables hold at most max_num_seqs rows), and like
                # the engine's table: its kind, device and type.
                shape = (max(rows, self.vllm_config.scheduler_config.max_num_seqs), cols)
                self._table_buffer = (table.new_zeros(shape) if hasattr(table, "new_zeros")
                                      else _numpy().zeros(shape, dtype=table.dtype))
            out = self._table_buffer[:rows, :cols]
            out[:] = pages // factor
            return out

        def build(self, common_prefix_len: int, common_attn_metadata: Any, fast_build: bool = False) -> Any:
            cm = common_attn_metadata
            table = self._indexer_table(cm)
            if table is not cm.block_table_tensor:
                cm = _TableView(cm, table)
            metadata = self.idxplan.build(common_prefix_len, cm, fast_build)
            if self._compressed_slot_mapping is not None:
                # The cache write's slot mapping, as vLLM's base builder makes it.
                metadata.slot_mapping = self._compressed_slot_mapping(
                    cm.num_actual_tokens, cm.query_start_loc, cm.seq_lens, table,
                    self.kv_cache_spec.num_states, self.compress_ratio, out=self.slot_mapping_buffer)
            return metadata

    IdxplanIndexerMetadataBuilder.__name__ = IdxplanIndexerMetadataBuilder.__qualname__ = (
        f"Idxplan{original.__name__}")
    _classes[original] = IdxplanIndexerMetadataBuilder
    return IdxplanIndexerMetadataBuilder


def _numpy() -> Any:
    import numpy

    return numpy


def _zeros(shape: Any, device: Any) -> Any:
    """A zeroed persistent int64 buffer on ``device``: torch's where torch is loaded
    (always, in vLLM), numpy's on the host otherwise."""
    torch = sys.modules.get("torch")
    if torch is not None:
        return torch.zeros(shape, dtype=torch.int64, device=device)
    return _numpy().zeros(shape, dtype=_numpy().int64)
