# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""aiter main's FlyDSL FP4 schedule functions, as drop-ins (docs/aiter.md).

``compute_varctx_schedule`` and ``compute_prefill_schedule`` take aiter's
arguments (``aiter/ops/flydsl/kernels/mqa_logits/pa_mqa_logits_fp4.py`` and
``pa_mqa_logits_fp4_prefill.py``) and return what aiter's return: the same
words, dtypes and shapes, ``cta_info_out`` itself when it is given. On GPU
tensors each is one launch on torch's current stream, with no sync and no
allocation beyond the outputs aiter's allocates, so a graph captures it with
``cta_info_out`` given; on CPU tensors, the CPU fill. What aiter refuses
(``parallel_unit_num`` not a multiple of ``next_n``, fewer slots than
batches, fewer CTAs than prefill rows) raises ValueError naming the values.

Where aiter's words are not defined, these are (docs/aiter.md): a prefill
of no rows gets an all-idle schedule and ``safe`` 1 (aiter raises), a grid
of no CTAs ``safe`` 1 (aiter leaves it unwritten), and a context of
-2 * block_k + 1 or less, or past 2^31 - block_k, counts as its true
chunks (none for a negative one), where aiter's int32 arithmetic counts
negative or wrapped ones.
"""

from __future__ import annotations

from typing import Any, Optional, Tuple

from . import _idxplan as _core

__all__ = ["compute_varctx_schedule", "compute_prefill_schedule"]

_schedules: Any = None


def _core_schedules() -> Any:
    global _schedules
    if _schedules is None:
        import torch  # noqa: F401  (the core reads torch from sys.modules)

        _schedules = _core._AiterSchedules()
    return _schedules


def compute_varctx_schedule(
    context_lens: Any,
    block_k: int,
    parallel_unit_num: Optional[int],
    max_seq_len: int,
    next_n: int = 1,
    cta_info_out: Any = None,
) -> Tuple[Any, Any, int]:
    """aiter's decode schedule: ``(safe_out, cta_info, P)``.

    ``cta_info`` is int32 ``[P, 4]``, a row ``[batch * next_n + n,
    chunk_start, chunk_count, context_len]`` and ``[0, 0, 1, 0]`` when idle;
    ``safe_out`` int32 ``[1]``; ``P`` is ``parallel_unit_num``, or
    ``batches * next_n * ceil(max_seq_len / block_k)`` when it is None.
    """
    return (_schedules or _core_schedules()).varctx(
        context_lens, block_k, parallel_unit_num, max_seq_len, next_n, cta_info_out
    )


def compute_prefill_schedule(
    row_to_batch: Any,
    local_starts: Any,
    local_ends: Any,
    block_k: int,
    parallel_unit_num: int,
    max_seq_len: int,
    cta_info_out: Any = None,
) -> Tuple[Any, Any, int]:
    """aiter's ragged-prefill schedule: ``(safe, cta_info, P)``.

    ``cta_info`` is int32 ``[P, 6]``, a row ``[row, batch, chunk_start,
    chunk_count, local_start, local_end]`` and ``[0, 0, 0, 1, 0, 0]`` when
    idle; ``safe`` a 0-dim int32 tensor, as aiter's.
    """
    return (_schedules or _core_schedules()).prefill(
        row_to_batch, local_starts, local_ends, block_k, parallel_unit_num, max_seq_len, cta_info_out
    )
