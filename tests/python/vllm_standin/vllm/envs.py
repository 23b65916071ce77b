# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""vLLM's environment settings the builder reads."""

VLLM_SPARSE_INDEXER_MAX_LOGITS_MB = 512
