# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""scripts/device-resources: its readers of code-object metadata and of ptxas,
the occupancy it derives, and the check CI runs against the baseline."""

import importlib.machinery
import importlib.util
import pathlib
import struct

SCRIPT = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "device-resources"
_loader = importlib.machinery.SourceFileLoader("device_resources", str(SCRIPT))
_spec = importlib.util.spec_from_loader("device_resources", _loader)
dr = importlib.util.module_from_spec(_spec)
_loader.exec_module(dr)

NOTES = """
AMDGPU Metadata
    amdhsa.kernels:
      - .agpr_count:     0
        .group_segment_fixed_size: 3680
        .name:           _ZN7idxplan6device6detail19prepare_step_kernelILi1EEEvNS_8StepArgsENS0_10LaunchGridE
        .private_segment_fixed_size: 0
        .sgpr_count:     73
        .sgpr_spill_count: 0
        .vgpr_count:     62
        .vgpr_spill_count: 0
      - .agpr_count:     4
        .group_segment_fixed_size: 3680
        .name:           _ZN7idxplan6device6detail19prepare_step_kernelILi32EEEvNS_8StepArgsENS0_10LaunchGridE
        .private_segment_fixed_size: 16
        .sgpr_count:     106
        .sgpr_spill_count: 2
        .vgpr_count:     134
        .vgpr_spill_count: 1
      - .agpr_count:     0
        .name:           _ZN7idxplan12_GLOBAL__N_111empty_kernelEv
        .vgpr_count:     1
"""

PTXAS = """
ptxas info    : Compiling entry function '_ZN7idxplan6device6detail19prepare_step_kernelILi32EEEvNS_8StepArgsENS0_10LaunchGridE' for 'sm_90'
ptxas info    : Function properties for _ZN7idxplan6device6detail19prepare_step_kernelILi32EEEvNS_8StepArgsENS0_10LaunchGridE
    16 bytes stack frame, 12 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 128 registers, used 1 barriers, 16 bytes cumulative stack size, 3808 bytes smem
ptxas info    : Compiling entry function '_ZN7idxplan6device6detail19prepare_step_kernelILi1EEEvNS_8StepArgsENS0_10LaunchGridE' for 'sm_90'
ptxas info    : Function properties for _ZN7idxplan6device6detail19prepare_step_kernelILi1EEEvNS_8StepArgsENS0_10LaunchGridE
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 48 registers, used 1 barriers, 3808 bytes smem
"""


def test_names_each_prepare_kernel_by_its_template_argument():
    detail = "_ZN7idxplan6device6detail"
    args = "EEEvNS0_10LaunchGridENS_8StepArgsE"
    assert dr.kernel_key(f"{detail}19prepare_step_kernelILi0{args}") == "prepare_step_kernel<0>"
    assert dr.kernel_key(f"{detail}19prepare_step_kernelILi16{args}") == "prepare_step_kernel<16>"
    assert dr.kernel_key(f"{detail}25prepare_step_lanes_kernelILi2{args}") == "prepare_step_lanes_kernel<2>"
    assert dr.kernel_key(f"{detail}17key_bounds_kernelILi0{args}") is None
    assert dr.kernel_key(None) is None


def test_reads_the_prepare_kernels_from_amdgpu_metadata():
    kernels = dr.amd_notes(NOTES, "gfx950")
    assert set(kernels) == {"prepare_step_kernel<1>", "prepare_step_kernel<32>"}
    one = kernels["prepare_step_kernel<1>"]
    assert (one["vgpr"], one["sgpr"], one["lds"], one["scratch"], one["spills"], one["sgpr_spills"]) == (
        62, 73, 3680, 0, 0, 0)
    assert one["waves"] == 8  # 64 VGPRs of 512, 80 SGPRs of 800
    wide = kernels["prepare_step_kernel<32>"]
    assert (wide["scratch"], wide["spills"], wide["sgpr_spills"]) == (16, 1, 2)  # VGPRs to memory, SGPRs to lanes
    assert wide["waves"] == 3  # 136 + 4 AGPRs: 144 of 512


def test_reads_ptxas_and_derives_warps_an_sm():
    kernels = dr.sm90_from_ptxas(PTXAS)
    one, wide = kernels["prepare_step_kernel<1>"], kernels["prepare_step_kernel<32>"]
    assert (one["registers"], one["shared"], one["scratch"], one["spills"]) == (48, 3808, 0, 0)
    assert one["warps"] == 40  # 1,536 registers a warp: 42 warps, 5 blocks of 8
    assert (wide["registers"], wide["scratch"], wide["spills"]) == (128, 16, 24)
    assert wide["warps"] == 16


def test_reads_every_entry_of_an_offload_bundle():
    entries = [(b"host-x86_64-unknown-linux", b""), (b"hipv4-amdgcn-amd-amdhsa--gfx942", b"CODE942"),
               (b"hipv4-amdgcn-amd-amdhsa--gfx950", b"CODE950!")]
    header = b"__CLANG_OFFLOAD_BUNDLE__" + struct.pack("<Q", len(entries))
    size = len(header) + sum(24 + len(i) for i, _ in entries)
    table, body = b"", b""
    for bundle_id, code in entries:
        table += struct.pack("<QQQ", size + len(body), len(code), len(bundle_id)) + bundle_id
        body += code
    found = dr.bundles(b"pad" + header + table + body)
    assert found == [(i.decode(), c) for i, c in entries]


def test_the_check_fails_on_scratch_and_on_an_occupancy_drop():
    found = {"gfx950": dr.amd_notes(NOTES, "gfx950"), "sm_90": dr.sm90_from_ptxas(PTXAS)}
    baseline = {"gfx950": {"prepare_step_kernel<1>": {"waves": 8}, "prepare_step_kernel<32>": {"waves": 4}},
                "sm_90": {"prepare_step_kernel<1>": {"warps": 40}}}
    failures = dr.check(found, baseline)
    assert "gfx950 prepare_step_kernel<32>: 16 bytes of scratch, 1 spills to memory" in failures
    assert "gfx950 prepare_step_kernel<32>: 3 waves, below the baseline's 4" in failures
    assert "sm_90 prepare_step_kernel<32>: not in the baseline (run with --update)" in failures
    assert not any("prepare_step_kernel<1>" in f for f in failures)
    clean = {"gfx950": {"prepare_step_kernel<1>": found["gfx950"]["prepare_step_kernel<1>"]}}
    assert dr.check(clean, {"gfx950": {"prepare_step_kernel<1>": {"waves": 8}}}) == []


def test_sgpr_spills_are_held_against_the_baseline():
    # An SGPR spill goes to a VGPR lane, not to memory: allowed up to the
    # baseline's count, refused past it, and a kernel without them passes.
    notes = NOTES.replace(".private_segment_fixed_size: 16", ".private_segment_fixed_size: 0").replace(
        ".vgpr_spill_count: 1", ".vgpr_spill_count: 0")
    found = {"gfx950": {"prepare_step_kernel<32>": dr.amd_notes(notes, "gfx950")["prepare_step_kernel<32>"]}}
    at = {"gfx950": {"prepare_step_kernel<32>": {"waves": 3, "sgpr_spills": 2}}}
    assert dr.check(found, at) == []
    below = {"gfx950": {"prepare_step_kernel<32>": {"waves": 3, "sgpr_spills": 1}}}
    assert dr.check(found, below) == ["gfx950 prepare_step_kernel<32>: 2 SGPR spills, above the baseline's 1"]
    none = {"gfx950": {"prepare_step_kernel<32>": {"waves": 3}}}
    assert dr.check(found, none) == ["gfx950 prepare_step_kernel<32>: 2 SGPR spills, above the baseline's 0"]
