# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""Plans DeepSeek's sparse-attention indexer steps for aiter's paged MXFP4 kernel.

Engine start::

    geometry = idxplan.make_geometry(**idxplan.deepseek_v41_config(num_compute_units=256))
    planner = idxplan.Planner(geometry)
    outputs = idxplan.step_outputs(geometry, lambda shape: torch.empty(shape, dtype=torch.int32,
                                                                         device="cuda"))
    inputs = idxplan.StepInputs(seq_lens=seq_lens_gpu, query_start_loc=qsl_gpu,
                                block_table=block_table_gpu)

Every step::

    plan = planner.plan(query_start_loc_cpu, seq_lens_upper_bound_cpu, num_tokens)
    idxplan.enqueue(geometry, plan, inputs, outputs)   # on torch's current stream
    decode = idxplan.decode_launch(geometry, plan, inputs, outputs)   # tensor slices

docs/python.md in the repository says more. Errors are ConfigError and StepError
(both ValueError) with the C++ library's messages, and DeviceError (a RuntimeError).
"""

from __future__ import annotations

import json as _json
import sys as _sys
from dataclasses import dataclass
from typing import Any, Callable, Optional

from . import _idxplan as _core
from ._idxplan import __version__
from ._idxplan import (
    CacheLayout,
    ConfigError,
    DecodePlan,
    DeviceError,
    Geometry,
    NativeDecode,
    Plan,
    Planner,
    ScheduleShape,
    StepError,
    StepInputs,
    StepOutputs,
    check_step_buffers,
    check_step_outputs,
    fill_step_buffers,
    step_buffer_sizes,
)

__all__ = [
    "__version__", "CacheLayout", "CandidateLaunch", "ConfigError", "DecodeLaunch", "DecodePlan", "DeviceError",
    "Geometry", "NativeDecode", "Plan", "Planner", "PrefillLaunch", "ScheduleShape", "StepError",
    "StepInputs", "StepOutputs", "candidate_launch", "check_step_buffers", "check_step_outputs",
    "compute_units",
    "decode_launch", "deepseek_v41_config", "device_count", "device_platform", "enqueue",
    "fill_step_buffers", "has_device", "host_step_outputs", "make_geometry", "plan_json",
    "prefill_launch", "step_buffer_sizes", "step_outputs",
]

#: "cuda" or "hip" where the module was built with a device part, else None.
device_platform: Optional[str] = _core.device_platform
#: Whether enqueue() exists in this build.
has_device: bool = device_platform is not None


def _plain(value: Any) -> Any:
    # numpy scalars and arrays, torch tensors: their Python values.
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not a number, list or dict")


def _to_json(value: Any) -> str:
    return _json.dumps(value, default=_plain)


def plan_json(config: dict, step: dict) -> dict:
    """The `idxplan plan --json` output for one step, through the same code path.

    ``config`` and ``step`` are the command's input objects (docs/cli.md).
    """
    return _json.loads(_core._plan_json_text(_to_json({"config": config, "step": step})))


def deepseek_v41_config(num_compute_units: int) -> dict:
    """DeepSeek-V4.1's indexer config on a GPU of ``num_compute_units`` CUs, as keywords
    for make_geometry."""
    return _core._deepseek_v41_config(num_compute_units)


def make_geometry(**config: Any) -> Geometry:
    """Checks a config (IndexerConfig's fields as keywords) and derives its geometry.

    Raises ConfigError naming the field and its value.
    """
    return _core._make_geometry_json(_to_json(config))


def step_outputs(geometry: Geometry, empty: Callable[[tuple], Any],
                 always_write_decode_block_table: bool = False) -> StepOutputs:
    """Step buffers of step_buffer_sizes(geometry), made by ``empty(shape)`` (any int32
    array: ``lambda shape: torch.empty(shape, dtype=torch.int32, device="cuda")``).

    Checked by check_step_outputs: arrays ``empty`` made smaller than asked raise
    StepError here, at engine start, not at the first step that needs the space.
    """
    arrays = {}
    for name, words in step_buffer_sizes(geometry).items():
        arrays[name] = empty(words if isinstance(words, tuple) else (words,))
    outputs = StepOutputs(**arrays, always_write_decode_block_table=always_write_decode_block_table)
    check_step_outputs(geometry, outputs)
    return outputs


def host_step_outputs(geometry: Geometry, always_write_decode_block_table: bool = False) -> StepOutputs:
    """Step buffers in host memory (numpy), for the CPU reference."""
    import numpy

    return step_outputs(geometry, lambda shape: numpy.zeros(shape, dtype=numpy.int32),
                        always_write_decode_block_table)


@dataclass(frozen=True)
class DecodeLaunch:
    """The step's decode rows as the dense decode launch walks them (docs/integration.md).

    Array fields are slices of the caller's inputs and outputs: no copies.
    """

    num_seqs: int
    next_n: int
    context_lens: Any
    row_ends: Any
    block_ends: Any
    block_table: Any
    block_table_stride: int
    max_blocks: int
    row_block_table: Any
    row_block_table_stride: int
    schedule: Any
    num_ctas: int
    use_gather: bool
    in_place: bool
    safe: Any = None  #: flydsl_fp4: [1] the decode grid's ``safe``
    max_seq_len: int = 0  #: flydsl_fp4: keys a logits row holds (the grid's max_seq_len)


@dataclass(frozen=True)
class PrefillLaunch:
    """One dense prefill chunk; array fields are slices of the caller's arrays."""

    token_start: int
    token_end: int
    first_request: int
    num_reqs: int
    width: int
    context_lens: Any
    row_ends: Any
    block_ends: Any
    query_start_loc: Any
    block_table: Any
    block_table_stride: int
    max_blocks: int
    use_gather: bool
    schedule: Any = None  #: flydsl_fp4: the chunk's cta_info, 6 words a CTA
    num_ctas: int = 0
    safe: Any = None  #: flydsl_fp4: [1] its ``safe``


@dataclass(frozen=True)
class CandidateLaunch:
    """One candidate-consumer prefill launch; array fields are slices of the caller's arrays."""

    token_start: int
    token_end: int
    request: int
    context_len: Any
    row_ends: Any
    block_ends: Any
    block_table: Any
    block_table_stride: int


def decode_launch(geometry: Geometry, plan: Plan, inputs: StepInputs,
                  outputs: StepOutputs) -> Optional[DecodeLaunch]:
    """The decode launch of a planned step, or None when it has no decode rows."""
    fields = _core._decode_launch(geometry, plan, inputs, outputs)
    return DecodeLaunch(**fields) if fields else None


def prefill_launch(geometry: Geometry, plan: Plan, index: int, inputs: StepInputs,
                   outputs: StepOutputs) -> PrefillLaunch:
    """Dense prefill chunk ``index`` (of plan.prefill)."""
    return PrefillLaunch(**_core._prefill_launch(geometry, plan, index, inputs, outputs))


def candidate_launch(geometry: Geometry, plan: Plan, index: int, inputs: StepInputs,
                     outputs: StepOutputs) -> CandidateLaunch:
    """Candidate-consumer launch ``index`` (of plan.gather_launches)."""
    return CandidateLaunch(**_core._candidate_launch(geometry, plan, index, inputs, outputs))


def _current_stream() -> int:
    # torch's current stream on the current device, when torch is loaded:
    # never a silent stream 0 (the legacy default stream, which synchronises
    # with every other).
    torch = _sys.modules.get("torch")
    if torch is None:
        raise ValueError("enqueue needs a stream: pass stream= (an integer handle: "
                         "torch.cuda.current_stream().cuda_stream, cupy's stream.ptr); without "
                         "torch loaded there is no current stream to take")
    return torch.cuda.current_stream().cuda_stream


if has_device:
    from ._idxplan import compute_units, device_count

    def enqueue(geometry: Geometry, plan: Plan, inputs: StepInputs, outputs: StepOutputs,
                stream: Optional[int] = None) -> None:
        """Enqueues the step's prepare launch on ``stream`` (an integer handle).

        Without ``stream``: torch's current stream when torch is loaded, else ValueError.
        check_step_buffers runs first, and a StepError launches nothing.
        """
        _core._enqueue(geometry, plan, inputs, outputs, _current_stream() if stream is None else stream)
else:
    def _no_device(*_args: Any, **_kwargs: Any) -> Any:
        raise RuntimeError("this idxplan was built without a device part: configure it with "
                           "-DIDXPLAN_CUDA=ON or -DIDXPLAN_HIP=ON beside -DIDXPLAN_PYTHON=ON")

    def enqueue(geometry: Geometry, plan: Plan, inputs: StepInputs, outputs: StepOutputs,
                stream: Optional[int] = None) -> None:
        """Not in this build: it has no device part."""
        _no_device()

    def device_count() -> int:
        """0: this build has no device part."""
        return 0

    def compute_units() -> int:
        """Not in this build: it has no device part."""
        return _no_device()

from . import vllm  # noqa: E402  (idxplan.vllm: the drop-in for vLLM's builder)
