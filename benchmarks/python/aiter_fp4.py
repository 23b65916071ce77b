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


def load(path):
    """(compute_varctx_schedule, compute_prefill_schedule) as aiter's files at `path` define them."""
    d = kernel_dir(path)
    decode = {"torch": torch, "triton": triton, "tl": tl}
    function_from_source(d / DECODE, "_varctx_cta_info_kernel", decode)
    varctx = function_from_source(d / DECODE, "compute_varctx_schedule", decode)
    prefill = {"torch": torch, "triton": triton, "tl": tl,
               "CTA_INFO_WIDTH": constant_from_source(d / PREFILL, "CTA_INFO_WIDTH")}
    function_from_source(d / PREFILL, "_prefill_cta_info_kernel", prefill)
    prefill_schedule = function_from_source(d / PREFILL, "compute_prefill_schedule", prefill)
    return varctx, prefill_schedule
