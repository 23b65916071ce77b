# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""vLLM's ROCm MXFP4 indexer backends: two whose builders idxplan takes over, and
one (a dense builder) it leaves alone."""

from vllm.v1.attention.backends.mla.indexer import DeepseekV32IndexerMetadataBuilder, DeepseekV41IndexerBackend


class RocmMxfp4IndexerMetadataBuilder(DeepseekV32IndexerMetadataBuilder):
    pass


class DeepseekV41RocmMxfp4IndexerMetadataBuilder(RocmMxfp4IndexerMetadataBuilder):
    pass


class DeepseekV41RocmMxfp4IndexerBackend(DeepseekV41IndexerBackend):
    @staticmethod
    def get_builder_cls():
        return DeepseekV41RocmMxfp4IndexerMetadataBuilder


class RocmMxfp4IndexerBackend(DeepseekV41IndexerBackend):
    @staticmethod
    def get_builder_cls():
        return RocmMxfp4IndexerMetadataBuilder


class RocmDenseIndexerBackend(DeepseekV41IndexerBackend):
    @staticmethod
    def get_builder_cls():
        return DeepseekV32IndexerMetadataBuilder
