# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""vLLM's DeepSeek indexer backend and builder: a builder whose own __init__ and
build must not run under idxplan's subclass."""

from vllm.v1.attention.backend import AttentionCGSupport, AttentionMetadataBuilder


class DeepseekV32IndexerMetadataBuilder(AttentionMetadataBuilder):
    reorder_batch_threshold = None
    requires_block_table_width = True

    @classmethod
    def get_cudagraph_support(cls, vllm_config, kv_cache_spec):
        return AttentionCGSupport.UNIFORM_BATCH

    def __init__(self, *args, block_table_width, **kwargs):
        raise AssertionError("vLLM's own indexer builder was constructed")

    def build(self, common_prefix_len, common_attn_metadata, fast_build=False):
        raise AssertionError("vLLM's own indexer builder built a step")


class DeepseekV41IndexerBackend:
    @staticmethod
    def get_builder_cls():
        return DeepseekV32IndexerMetadataBuilder
