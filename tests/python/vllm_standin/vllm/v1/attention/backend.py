# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""vLLM's AttentionCGSupport and AttentionMetadataBuilder, as the builder uses them."""

from abc import ABC, abstractmethod
from enum import Enum


class AttentionCGSupport(Enum):
    ALWAYS = 3
    UNIFORM_BATCH = 2
    UNIFORM_SINGLE_TOKEN_DECODE = 1
    NEVER = 0


class AttentionMetadataBuilder(ABC):
    _cudagraph_support = AttentionCGSupport.NEVER
    reorder_batch_threshold = None
    supports_update_block_table = False

    @abstractmethod
    def __init__(self, kv_cache_spec, layer_names, vllm_config, device):
        self.kv_cache_spec = kv_cache_spec
        self.layer_names = layer_names
        self.vllm_config = vllm_config
        self.device = device

    @classmethod
    def get_cudagraph_support(cls, vllm_config, kv_cache_spec):
        return cls._cudagraph_support

    @abstractmethod
    def build(self, common_prefix_len, common_attn_metadata, fast_build=False):
        raise NotImplementedError

    def build_for_cudagraph_capture(self, common_attn_metadata):
        return self.build(common_prefix_len=0, common_attn_metadata=common_attn_metadata)
