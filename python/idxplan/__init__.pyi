# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
# Type stubs for the package idxplan (python/idxplan/__init__.py and its
# extension _idxplan), so an editor shows the API. docs/python.md has more.

from dataclasses import dataclass
from typing import Any, Callable, Optional

import numpy

from . import vllm as vllm  # the drop-in for vLLM's builder (docs/vllm.md)

#: The library's version (the CMake project's, and the wheel's).
__version__: str
#: "cuda" or "hip" where the module was built with a device part, else None.
device_platform: Optional[str]
#: Whether enqueue() exists in this build.
has_device: bool

class ConfigError(ValueError):
    """A config that cannot make a Geometry; the message names the field and value."""

class StepError(ValueError):
    """A step, or step buffers, that cannot be planned or filled; the message names them."""

class DeviceError(RuntimeError):
    """A failed GPU runtime call, with the runtime's error name and string."""

class CacheLayout:
    """aiter's layout of one page of the MXFP4 cache."""
    n_per_tile: int
    d_per_tile: int
    scale_lanes: int
    block_kv: int
    value_bytes: int
    scale_bytes: int

class Geometry:
    """A checked config and what is derived from it; only make_geometry makes one."""
    @property
    def config(self) -> dict: ...
    @property
    def page_entries(self) -> int: ...
    @property
    def cache(self) -> CacheLayout: ...
    @property
    def native_next_n(self) -> int: ...
    @property
    def decode_threshold(self) -> int: ...
    @property
    def logits_width(self) -> int: ...
    @property
    def max_logits_bytes(self) -> int: ...
    @property
    def max_blocks_per_seq(self) -> int: ...
    @property
    def max_decode_rows(self) -> int: ...
    @property
    def num_candidate_cols(self) -> int: ...
    @property
    def gather_rows(self) -> int: ...
    @property
    def schedule_words(self) -> int: ...
    @property
    def fingerprint(self) -> int:
        """A digest of the config: plans record it, and buffers refuse other geometries' plans."""

class NativeDecode:
    """The decode rows as next_n-row sequences."""
    next_n: int
    num_seqs: int

class ScheduleShape:
    """The decode schedule's shape; num_ctas descriptors of 4 int32 words."""
    num_seqs: int
    rows_per_seq: int
    block_m: int
    row_blocks: int
    work: int
    block_kv: int
    num_ctas: int
    max_tiles: int
    native: bool

class DecodePlan:
    """Everything about the step's decode rows."""
    num_rows: int
    num_real_rows: int
    max_seq_len: int
    num_block_cols: int
    use_gather: bool
    rows_are_requests: bool
    @property
    def ragged(self) -> bool:
        """Only ragged rows need decode_block_table; the rest read the engine's table in place."""
    @property
    def native(self) -> Optional[NativeDecode]: ...
    @property
    def schedule(self) -> Optional[ScheduleShape]: ...

class Plan:
    """A step's plan. A Planner's plan is its own: the next plan() overwrites it and its
    array views; copy() keeps one."""
    geometry: int
    num_reqs: int
    num_tokens: int
    num_decodes: int
    num_decode_tokens: int
    num_prefills: int
    num_prefill_tokens: int
    max_seq_len: int
    num_prefill_query_start_loc_words: int
    decode: DecodePlan
    @property
    def splits(self) -> numpy.ndarray:
        """Structured: request_begin, request_end, query_begin, query_end."""
    @property
    def prefill(self) -> numpy.ndarray:
        """Structured: token_start, token_end, first_request, num_reqs, width, first_piece,
        num_pieces, query_start_loc_offset, use_gather; one row a dense chunk."""
    @property
    def pieces(self) -> numpy.ndarray:
        """Structured: first_row, end_row, request; each chunk's requests with rows."""
    @property
    def chunk_groups(self) -> numpy.ndarray: ...
    @property
    def gather_launches(self) -> numpy.ndarray:
        """Structured: token_start, token_end, request; the candidate consumers' launches."""
    def has_decode(self) -> bool: ...
    def has_prefill(self) -> bool: ...
    def copy(self) -> Plan: ...

class Planner:
    """Plans steps for one geometry into one reused plan: no allocation once warm."""
    def __init__(self, geometry: Geometry) -> None: ...
    @property
    def geometry(self) -> Geometry: ...
    def plan(self, query_start_loc: Any, seq_lens_upper_bound: Any,
             num_tokens: Optional[int] = None) -> Plan:
        """Plans one step from the host's query_start_loc [num_reqs + 1] and seq-length
        upper bounds [num_reqs]: any 1-D integer arrays (numpy, CPU torch tensors, lists).
        num_tokens counts graph padding past query_start_loc's end (None: no padding).
        Raises StepError naming the request and values."""

class StepInputs:
    """The step's exact lengths and block table, int32: host arrays for the CPU reference,
    device arrays (__cuda_array_interface__ or __dlpack__) for enqueue."""
    def __init__(self, seq_lens: Any, query_start_loc: Any, block_table: Any) -> None:
        """seq_lens [num_reqs], query_start_loc [num_reqs + 1], block_table 2-D [rows, cols]
        with contiguous rows, all native-order int32. Their shapes are the extents
        check_step_buffers holds against what a plan reads. Raises ValueError naming an
        array of the wrong type, byte order or shape."""
    @property
    def seq_lens(self) -> Any: ...
    @property
    def query_start_loc(self) -> Any: ...
    @property
    def block_table(self) -> Any: ...
    @property
    def on_device(self) -> bool: ...

class StepOutputs:
    """The caller's step buffers, int32, sized by step_buffer_sizes (or larger)."""
    def __init__(self, context_lens: Any, decode_row_lens: Any, decode_block_ends: Any,
                 decode_block_table: Any, prefill_row_ends: Any, prefill_block_ends: Any,
                 prefill_query_start_loc: Any, decode_schedule: Any,
                 always_write_decode_block_table: bool = False, prefill_schedule: Any = None,
                 schedule_safe: Any = None) -> None:
        """decode_block_table is 2-D [rows, stride]; the rest 1-D. With
        always_write_decode_block_table the table is written on every step with decodes,
        not only on ragged ones. prefill_schedule and schedule_safe are flydsl_fp4's
        (None under gluon_mxfp4)."""
    def __getitem__(self, name: str) -> Any: ...
    @property
    def names(self) -> list[str]:
        """The buffers given, in this order: those left None are not among them."""
    @property
    def always_write_decode_block_table(self) -> bool: ...
    @property
    def on_device(self) -> bool: ...

@dataclass(frozen=True)
class DecodeLaunch:
    """The decode rows as the dense launch walks them; arrays are slices of the caller's."""
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
    safe: Any = None
    max_seq_len: int = 0

@dataclass(frozen=True)
class PrefillLaunch:
    """One dense prefill chunk; arrays are slices of the caller's."""
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
    schedule: Any = None
    num_ctas: int = 0
    safe: Any = None

@dataclass(frozen=True)
class CandidateLaunch:
    """One candidate-consumer prefill launch; arrays are slices of the caller's."""
    token_start: int
    token_end: int
    request: int
    context_len: Any
    row_ends: Any
    block_ends: Any
    block_table: Any
    block_table_stride: int

def plan_json(config: dict, step: dict) -> dict:
    """The `idxplan plan --json` output for one step, through the same code path."""

def deepseek_v41_config(num_compute_units: int) -> dict:
    """DeepSeek-V4.1's indexer config, as keywords for make_geometry."""

def make_geometry(**config: Any) -> Geometry:
    """Checks a config (IndexerConfig's fields as keywords); raises ConfigError."""

def step_buffer_sizes(geometry: Geometry) -> dict:
    """Words of each step buffer (decode_block_table: (rows, stride))."""

def step_outputs(geometry: Geometry, empty: Callable[[tuple], Any],
                 always_write_decode_block_table: bool = False) -> StepOutputs:
    """Step buffers of step_buffer_sizes, each made by empty(shape), then
    check_step_outputs'd."""

def host_step_outputs(geometry: Geometry, always_write_decode_block_table: bool = False) -> StepOutputs:
    """Step buffers in host memory (numpy), for the CPU reference."""

def check_step_buffers(geometry: Geometry, plan: Plan, inputs: StepInputs, outputs: StepOutputs) -> None:
    """Raises StepError for a plan of another geometry, an input shorter than the plan
    reads, or a buffer too small or missing."""

def check_step_outputs(geometry: Geometry, outputs: StepOutputs) -> None:
    """Engine start: raises StepError for a buffer smaller than step_buffer_sizes."""

def fill_step_buffers(geometry: Geometry, plan: Plan, inputs: StepInputs, outputs: StepOutputs) -> None:
    """The CPU reference: what enqueue writes, into host arrays."""

def decode_launch(geometry: Geometry, plan: Plan, inputs: StepInputs,
                  outputs: StepOutputs) -> Optional[DecodeLaunch]: ...
def prefill_launch(geometry: Geometry, plan: Plan, index: int, inputs: StepInputs,
                   outputs: StepOutputs) -> PrefillLaunch: ...
def candidate_launch(geometry: Geometry, plan: Plan, index: int, inputs: StepInputs,
                     outputs: StepOutputs) -> CandidateLaunch: ...

def enqueue(geometry: Geometry, plan: Plan, inputs: StepInputs, outputs: StepOutputs,
            stream: Optional[int] = None) -> None:
    """The prepare launch on the stream whose handle is ``stream`` (device arrays only).
    Without it, torch's current stream when torch is loaded, else ValueError: never a
    silent stream 0. Checks the buffers first and raises StepError naming a missing, short
    or small one. RuntimeError in a build without a device part."""

def device_count() -> int: ...
def compute_units() -> int:
    """The current GPU's compute units, for num_compute_units."""
