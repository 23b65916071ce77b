# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""aiter main's two FlyDSL FP4 schedule functions, from aiter's own files: the
baseline and the reference of idxplan.aiter (tests/python/test_aiter.py,
bench_aiter_fp4.py). compute_varctx_schedule and compute_prefill_schedule are plain
torch and Triton, so they run on any GPU Triton targets; each is compiled from its
file with the Triton kernel it launches (from_source.py), without importing the rest
of the file (FlyDSL, gfx950 only). Nothing of aiter is copied into idxplan: the path
is the user's (IDXPLAN_AITER, --aiter)."""

from pathlib import Path

import torch
import triton
import triton.language as tl

from from_source import constant_from_source, function_from_source

KERNELS = Path("aiter/ops/flydsl/kernels/mqa_logits")
DECODE = "pa_mqa_logits_fp4.py"
PREFILL = "pa_mqa_logits_fp4_prefill.py"


def kernel_dir(path):
    """The folder holding aiter's two files: `path` itself, or under an aiter checkout."""
    p = Path(path)
    for d in (p, p / KERNELS):
        if (d / DECODE).is_file() and (d / PREFILL).is_file():
            return d
    raise SystemExit(f"{path}: neither it nor {KERNELS} under it holds {DECODE} and {PREFILL}")


def _kernel(path, name, scope, specialize):
    kernel = function_from_source(path, name, scope)
    if not specialize:
        # Triton compiles a kernel again for each pattern of its integer arguments
        # (1, multiples of 16): hundreds of random shapes would each compile. Its
        # specialization changes the code, never what the code computes.
        ints = [p.name for p in kernel.params if not p.is_constexpr and not p.name.endswith("_ptr")]
        scope[name] = triton.jit(kernel.fn, do_not_specialize=ints)
    return scope[name]


def load(path, specialize=True):
    """(compute_varctx_schedule, compute_prefill_schedule) as aiter's files at `path`
    define them; with `specialize` False, their kernels compile once a block size."""
    d = kernel_dir(path)
    decode = {"torch": torch, "triton": triton, "tl": tl}
    _kernel(d / DECODE, "_varctx_cta_info_kernel", decode, specialize)
    varctx = function_from_source(d / DECODE, "compute_varctx_schedule", decode)
    prefill = {"torch": torch, "triton": triton, "tl": tl,
               "CTA_INFO_WIDTH": constant_from_source(d / PREFILL, "CTA_INFO_WIDTH")}
    _kernel(d / PREFILL, "_prefill_cta_info_kernel", prefill, specialize)
    prefill_schedule = function_from_source(d / PREFILL, "compute_prefill_schedule", prefill)
    return varctx, prefill_schedule
