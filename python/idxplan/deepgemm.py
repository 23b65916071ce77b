# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""DeepGEMM's paged MQA-logits schedule metadata, as a drop-in (docs/deepgemm.md).

``get_paged_mqa_logits_metadata(context_lens, block_kv, num_sms)`` takes
DeepGEMM's arguments (``deep_gemm.get_paged_mqa_logits_metadata`` at DeepGEMM
891d57b4, the commit vLLM pins) and returns what DeepGEMM's returns on SM90: a
new int32 ``[num_sms + 1, 2]`` tensor where ``context_lens`` lives, row ``i``
SM ``i``'s first ``(query atom, KV split)`` and the last row the end, the
words DeepGEMM's ``fp8_paged_mqa_logits`` and ``fp8_fp4_paged_mqa_logits``
walk. On a GPU tensor it is one launch on torch's current stream, with no
sync, so a graph captures it; on a CPU tensor, the CPU fill.

What DeepGEMM refuses on SM90 raises ValueError naming the values:
``context_lens`` not a contiguous 2-D int32 tensor, ``block_kv`` other than 64,
more sequences than its kernel's shared memory holds (19,360), and
``indices`` (its varlen rows run on SM100 only). The CPU fill also refuses
lengths whose (atom, split) units pass 2^32 - 1, where DeepGEMM's uint32
sums wrap; the device writes every row as the end there.
"""

from __future__ import annotations

from typing import Any, Optional

from . import _idxplan as _core

__all__ = ["get_paged_mqa_logits_metadata"]

_metadata: Any = None


def _core_metadata() -> Any:
    global _metadata
    if _metadata is None:
        import torch  # noqa: F401  (the core reads torch from sys.modules)

        _metadata = _core._DeepGemmMetadata()
    return _metadata


def get_paged_mqa_logits_metadata(
    context_lens: Any, block_kv: int, num_sms: int, indices: Optional[Any] = None
) -> Any:
    """DeepGEMM's schedule metadata of ``context_lens`` (int32 ``[batch, next_n]``).

    Each sequence's KV is its last column's length, in splits of 256 keys;
    its ``ceil(next_n / 2)`` two-row query atoms (one at ``next_n`` 1) each
    walk all its splits, and the SMs share those units evenly, the first
    ones taking one more.
    """
    return (_metadata or _core_metadata()).metadata(context_lens, block_kv, num_sms, indices)
