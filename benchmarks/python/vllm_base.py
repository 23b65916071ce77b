# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""vLLM's base DeepSeek indexer builder (``DeepseekV32IndexerMetadataBuilder`` in
``vllm/v1/attention/backends/mla/indexer.py``), loaded from a vLLM source tree the
user gives, running in this process: the base whose ``build`` vLLM's ROCm MXFP4
indexer builder calls first each step (bench_vllm.py's whole chain).

What runs is vLLM's own source, read from the tree:

- ``indexer.py`` whole: the base builder's ``__init__`` and ``build``, its split of
  the prefill chunks, its Triton kernels (the uniform decode rows, the prefill
  chunks' key bounds);
- ``compressor_utils.py``: the cache write's compressed slot mapping and its kernel;
- ``split_decodes_and_prefills`` from ``backends/utils.py``, that function alone
  (read with ast: the rest of the file imports much of vLLM).

What is stubbed, because vLLM is not installed here: its config, logger, envs
(``VLLM_SPARSE_INDEXER_MAX_LOGITS_MB`` from the geometry), the platform (ROCm:
``is_cuda()`` False, no DeepGEMM, so the base takes the path it takes on an
MI355X), the context-parallel groups (unused at world size 1), the attention base
classes, and the Triton launch helper of ``vllm.model_executor.warmup``:
``kernel_launcher`` and ``VllmTritonJitKernel.launch`` do what vLLM's do at run
time (bind the ``__call__``'s arguments by name, to the kernel's parameters of the
same name or with ``_ptr``, add the launch spec's, launch ``kernel[grid]``), without
vLLM's warmup machinery.

The figures in docs/performance.md ran on these files, each as read at a commit
of vLLM's main branch (SOURCES below; vLLM's tree moves fast, and no one commit
of it held all three here): ``indexer.py`` at 0023368d,
``compressor_utils.py`` at 0ff8df7b, and ``split_decodes_and_prefills`` in its
form with ``treat_short_extends_as_decodes``, the one that ``indexer.py``
calls. The loader refuses a tree whose split predates that argument.
"""

from __future__ import annotations

import enum
import functools
import importlib.util
import inspect
import sys
import types
from pathlib import Path
from typing import Any, Generic, TypeVar

from from_source import function_from_source

# The files read from the vLLM tree, and the commit each was read at for the
# figures in docs/performance.md.
SOURCES = {
    "vllm/v1/attention/backends/mla/indexer.py": "0023368d052caf392d159ab32d380a807a89be99",
    "vllm/v1/attention/backends/mla/compressor_utils.py": "0ff8df7bef328b26f94c678c5e7bffb1d2cbc213",
    "vllm/v1/attention/backends/utils.py": "split_decodes_and_prefills with treat_short_extends_as_decodes",
}

INDEXER = "vllm.v1.attention.backends.mla.indexer"
COMPRESSOR = "vllm.v1.attention.backends.mla.compressor_utils"
SPLIT = "split_decodes_and_prefills"


def _module(name: str, **attrs: Any) -> types.ModuleType:
    module = types.ModuleType(name)
    module.__dict__.update(attrs)
    sys.modules[name] = module
    return module


def _from_source(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class _Logger:
    def info(self, *args: Any, **kwargs: Any) -> None:
        pass

    info_once = warning = warning_once = debug = debug_once = info


class _Platform:
    """ROCm, as the base builder asks: no CUDA, so no DeepGEMM metadata."""

    device_type = "cuda"

    def is_cuda(self) -> bool:
        return False

    def is_rocm(self) -> bool:
        return True

    def is_device_capability_family(self, family: int) -> bool:
        return False


K = TypeVar("K")


class _TritonJitKernel(Generic[K]):
    """vLLM's VllmTritonJitKernel at run time: ``launch`` binds the inputs to the
    kernel's parameters by name (or name + ``_ptr``) and launches ``kernel[grid]``."""

    kernel: Any

    def __init__(self) -> None:
        self._plans: dict = {}

    def _binding(self, input_names: tuple, launch_names: tuple) -> tuple:
        key = (input_names, launch_names)
        plan = self._plans.get(key)
        if plan is None:
            params = set(self.kernel.arg_names)
            plan = tuple((i, n if n in params else f"{n}_ptr") for i, n in enumerate(input_names)
                         if (n in params or f"{n}_ptr" in params) and n not in launch_names)
            self._plans[key] = plan
        return plan

    def launch(self, grid: tuple, input_names: tuple, input_values: tuple, /, **kwargs: Any) -> Any:
        for index, target in self._binding(input_names, tuple(kwargs)):
            kwargs[target] = input_values[index]
        return self.kernel[grid](**kwargs)


def _kernel_launcher(call_fn: Any) -> Any:
    signature = inspect.signature(call_fn)

    @functools.wraps(call_fn)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        spec = call_fn(self, *args, **kwargs)
        grid, launch_kwargs = spec[0], spec[1]
        bound = signature.bind(self, *args, **kwargs)
        bound.apply_defaults()
        inputs = {name: value for name, value in bound.arguments.items() if name != "self"}
        self.launch(grid, tuple(inputs), tuple(inputs.values()), **launch_kwargs)
        return spec[2] if len(spec) == 3 else None

    return wrapper


class _Variant:
    @classmethod
    def from_alignment(cls, **offsets: bool) -> "_Variant":
        return cls()

    from_offsets = from_alignment


def load(source: str | Path, config: dict, base_classes: dict) -> types.ModuleType:
    """vLLM's indexer module from the tree at `source`, its imports stubbed for the
    idxplan `config` (a geometry's). `base_classes` are the attention base names the
    stubs provide (AttentionCGSupport, AttentionMetadataBuilder, MultipleOf, ...)."""
    import torch
    import triton
    import triton.language as tl

    root = Path(source)
    for path in SOURCES:
        if not (root / path).is_file():
            raise SystemExit(f"--vllm {root}: no {path} (a vLLM source tree holds it)")

    class KVCacheLayout(enum.Enum):
        LBHNC = "LBHNC"
        BLHNC = "BLHNC"
        BLNHC = "BLNHC"

    class AttentionSpec:
        pass

    class MLAAttentionSpec(AttentionSpec):
        def __init__(self, block_size: int, tokens_per_state: int) -> None:
            self.block_size, self.tokens_per_state = block_size, tokens_per_state
            self.num_states = block_size // tokens_per_state

    def no_group() -> Any:
        raise AssertionError("context parallel is off in this benchmark")

    def compute_units(index: Any = None) -> int:
        return torch.cuda.get_device_properties(index or 0).multi_processor_count

    _module("vllm")
    _module("vllm.envs", VLLM_SPARSE_INDEXER_MAX_LOGITS_MB=config["max_logits_mb"])
    sys.modules["vllm"].envs = sys.modules["vllm.envs"]
    _module("vllm.config", VllmConfig=object)
    _module("vllm.distributed", get_dcp_group=no_group, get_pcp_group=no_group)
    _module("vllm.logger", init_logger=lambda name: _Logger())
    _module("vllm.model_executor")
    _module("vllm.model_executor.warmup")
    _module("vllm.model_executor.warmup.jit_warmup_triton_helper", LaunchSpec=tuple, TritonPointerInputVariant=_Variant,
            TritonWarmupTensor=lambda *a, **k: None, VllmTritonJitKernel=_TritonJitKernel,
            kernel_launcher=_kernel_launcher, triton_scalar_specialization_rep=lambda value: value)
    _module("vllm.platforms", current_platform=_Platform())
    _module("vllm.triton_utils", tl=tl, triton=triton)
    _module("vllm.utils")
    _module("vllm.utils.deep_gemm", get_paged_mqa_logits_metadata=None, has_deep_gemm=lambda: False,
            native_next_n_supported=lambda next_n: False)
    _module("vllm.utils.platform_utils", num_compute_units=compute_units)
    _module("vllm.v1")
    _module("vllm.v1.attention")
    _module("vllm.v1.attention.backend", **base_classes)
    _module("vllm.v1.attention.backends")
    _module("vllm.v1.attention.backends.mla")
    _module("vllm.v1.kv_cache_interface", AttentionSpec=AttentionSpec, KVCacheLayout=KVCacheLayout,
            KVCacheSpec=object, MLAAttentionSpec=MLAAttentionSpec)
    _from_source(COMPRESSOR, root / "vllm/v1/attention/backends/mla/compressor_utils.py")
    split = function_from_source(root / "vllm/v1/attention/backends/utils.py", SPLIT,
                                 {"torch": torch, "CommonAttentionMetadata": object})
    if "treat_short_extends_as_decodes" not in inspect.signature(split).parameters:
        raise SystemExit(f"--vllm {root}: its {SPLIT} predates the indexer.py read beside it "
                         "(no treat_short_extends_as_decodes)")
    _module("vllm.v1.attention.backends.utils", split_decodes_and_prefills=split,
            get_dcp_local_seq_lens=lambda *a, **k: no_group())
    module = _from_source(INDEXER, root / "vllm/v1/attention/backends/mla/indexer.py")
    module.MLAAttentionSpec = MLAAttentionSpec
    return module
