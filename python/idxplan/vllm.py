# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""A drop-in for vLLM's ROCm MXFP4 indexer metadata builder (docs/vllm.md).

An engine makes one builder at start and calls ``build`` every step, with vLLM's own
builder signature; what it returns has the fields, types and shapes of vLLM's
``RocmMxfp4IndexerMetadata``, so the indexer's forward reads it unchanged::

    builder = idxplan.vllm.MetadataBuilder(geometry, device)
    metadata = builder.build(common_prefix_len, common_attn_metadata)

One call into the module plans the step, fills the builder's buffers (one launch on
the GPU; the CPU reference with ``device="cpu"``) and makes every object. Every
tensor is a view of the builder's buffers or of the engine's own tensors: nothing is
copied. The buffers are the builder's, rewritten by the next build: one build in
flight at a time.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from . import _idxplan as _core
from ._idxplan import Geometry, Plan

__all__ = [
    "DeepSeekV32IndexerDecodeMetadata", "DeepseekV32IndexerMetadata",
    "DeepseekV32IndexerPrefillChunkMetadata", "DeepseekV32IndexerPrefillMetadata", "MetadataBuilder",
    "RocmMxfp4GatherLaunch", "RocmMxfp4IndexerMetadata", "RocmMxfp4NativeDecode", "RocmMxfp4PrefillPlan",
]

Tensor = Any  # a torch tensor (numpy array on a CPU builder without torch)


# vLLM's base indexer metadata: the fields of its DeepseekV32Indexer* dataclasses.
# idxplan fills those the ROCm forward reads; the rest (K gather and context
# parallel only) are None, as docs/vllm.md lists.

@dataclass
class DeepseekV32IndexerPrefillChunkMetadata:
    block_table: Tensor
    cu_seqlen_ks: Tensor
    cu_seqlen_ke: Tensor
    cu_seq_lens: Optional[Tensor]
    token_to_seq: Optional[Tensor]
    total_seq_lens: int
    token_start: int
    token_end: int
    num_reqs: int
    skip_kv_gather: bool = False
    local_cu_seq_lens: Optional[Tensor] = None
    local_total_seq_lens: int = 0
    max_local_total_seq_lens: int = 0


@dataclass
class DeepseekV32IndexerPrefillMetadata:
    chunks: list
    max_prefill_seq_len: int = -1


@dataclass
class DeepSeekV32IndexerDecodeMetadata:
    block_table: Optional[Tensor]
    seq_lens: Tensor
    decode_lens: Tensor
    requires_padding: bool
    schedule_metadata: Optional[Tensor]
    global_seq_lens: Optional[Tensor] = None
    per_req_decode_lens: Optional[Tensor] = None
    decode_is_uniform: bool = True
    write_max_decode_len: int = 0
    indices: Optional[Tensor] = None


@dataclass
class DeepseekV32IndexerMetadata:
    seq_lens: Tensor
    max_seq_len: int
    slot_mapping: Optional[Tensor]
    num_decodes: int
    num_decode_tokens: int
    num_prefills: int
    num_prefill_tokens: int
    decode: Optional[DeepSeekV32IndexerDecodeMetadata] = None
    prefill: Optional[DeepseekV32IndexerPrefillMetadata] = None


# The ROCm MXFP4 path's own metadata, with the reference's names.

@dataclass
class RocmMxfp4PrefillPlan:
    requests: list
    width: int
    row_ends: Tensor
    context_lens: Tensor
    query_start_loc: Tensor
    first_request: int
    block_ends: Optional[Tensor] = None
    use_gather: bool = False


@dataclass
class RocmMxfp4GatherLaunch:
    token_start: int
    token_end: int
    block_table: Tensor
    context_len: Tensor
    row_ends: Tensor
    pool: Optional[tuple] = None


@dataclass
class RocmMxfp4NativeDecode:
    next_n: int
    context_lens: Tensor
    block_table: Tensor


@dataclass
class RocmMxfp4IndexerMetadata(DeepseekV32IndexerMetadata):
    prefill_plans: list = field(default_factory=list)
    decode_row_lens: Optional[Tensor] = None
    decode_block_ends: Optional[Tensor] = None
    decode_native: Optional[RocmMxfp4NativeDecode] = None
    decode_schedule: Optional[Tensor] = None
    decode_use_gather: bool = False
    decode_gather: Optional[tuple] = None
    gather_launches: list = field(default_factory=list)


_CLASSES = {
    "metadata": RocmMxfp4IndexerMetadata,
    "decode": DeepSeekV32IndexerDecodeMetadata,
    "prefill": DeepseekV32IndexerPrefillMetadata,
    "chunk": DeepseekV32IndexerPrefillChunkMetadata,
    "prefill_plan": RocmMxfp4PrefillPlan,
    "gather_launch": RocmMxfp4GatherLaunch,
    "native": RocmMxfp4NativeDecode,
}


def _device_index(device: Any) -> int:
    """-1 for the CPU, else the GPU's index: "cpu", "cuda", "cuda:1", a torch.device, an int."""
    torch = sys.modules.get("torch")
    if torch is not None and isinstance(device, torch.device):
        device = str(device)
    if isinstance(device, int) and not isinstance(device, bool):
        return device
    if device == "cpu":
        return -1
    if isinstance(device, str) and device.split(":")[0] == "cuda":
        if torch is None:
            raise ValueError(f"device={device!r} needs torch: the builder's buffers and the engine's "
                             "tensors are torch tensors")
        return int(device.split(":")[1]) if ":" in device else torch.cuda.current_device()
    raise ValueError(f"device must be 'cpu', 'cuda', 'cuda:N', a torch.device or an index, got {device!r}")


class MetadataBuilder:
    """vLLM's ROCm MXFP4 indexer metadata builder, as one call a step (docs/vllm.md).

    ``geometry``: the indexer's (idxplan.make_geometry). ``device``: the GPU the
    engine's tensors are on ("cuda", "cuda:N", a torch.device), or "cpu" to fill
    with the CPU reference. ``row_table_every_step``: write the flattened decode
    block table (``decode.block_table``) on every step with decodes, as vLLM's base
    builder copies it; with False a native step's ``decode.block_table`` is None
    unless its decode rows gather. ``empty(shape)`` makes the builder's int32 buffers
    (default: torch on ``device``; numpy on a CPU builder without torch loaded).
    """

    def __init__(self, geometry: Geometry, device: Any = "cuda", *, row_table_every_step: bool = True,
                 empty: Optional[Callable[[tuple], Any]] = None) -> None:
        index = _device_index(device)
        if index >= 0 and not _core.device_platform:
            raise RuntimeError("this idxplan was built without a device part: configure it with "
                               "-DIDXPLAN_CUDA=ON or -DIDXPLAN_HIP=ON, or make the builder with "
                               "device='cpu'")
        if empty is None:
            empty = _default_empty(index)
        sizes = _core.step_buffer_sizes(geometry)
        sizes["prefill_key_starts"] = sizes["prefill_row_ends"]
        sizes["prefill_key_ends"] = sizes["prefill_row_ends"]
        sizes["decode_lens"] = sizes["decode_row_lens"]
        self.buffers = {name: empty(words if isinstance(words, tuple) else (words,))
                        for name, words in sizes.items()}
        self.buffers["decode_lens"][:] = 1
        self.geometry = geometry
        self._core = _core._VllmBuilder(geometry, self.buffers, _CLASSES, index, row_table_every_step)

    def build(self, common_prefix_len: int, common_attn_metadata: Any,
              fast_build: bool = False) -> RocmMxfp4IndexerMetadata:
        """The step's metadata, from the attributes vLLM's CommonAttentionMetadata has:
        num_reqs, num_actual_tokens (graph padding included), query_start_loc and
        query_start_loc_cpu, seq_lens and seq_lens_cpu_upper_bound, block_table_tensor;
        max_seq_len and slot_mapping pass through. ``common_prefix_len`` and
        ``fast_build`` are vLLM's and change nothing here.

        Raises StepError (a ValueError) for a step that cannot be planned or filled,
        ValueError for a missing or malformed field, before anything is launched.
        """
        return self._core.build(common_attn_metadata)

    @property
    def plan(self) -> Plan:
        """The last build's plan (the builder's own, rewritten by the next build)."""
        return self._core.plan


def _default_empty(index: int) -> Callable[[tuple], Any]:
    torch = sys.modules.get("torch")
    if torch is not None:
        device = "cpu" if index < 0 else f"cuda:{index}"
        return lambda shape: torch.zeros(shape, dtype=torch.int32, device=device)
    if index >= 0:
        raise ValueError("a GPU builder needs torch loaded")
    import numpy

    return lambda shape: numpy.zeros(shape, dtype=numpy.int32)
