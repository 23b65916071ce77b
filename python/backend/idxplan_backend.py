# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""pyproject.toml's build backend: setuptools' own, with idxplan's settings read.

pip passes ``--config-settings KEY=VALUE`` to the backend; setuptools 66 ignores
keys it does not know, so this layer takes idxplan's and hands them to setup.py
through the environment:

- ``device``: ``cpu`` (default), ``cuda`` or ``hip``, the module's device part
  (``IDXPLAN_DEVICE`` when the setting is absent);
- ``cmake-args``: more CMake arguments, as one shell-quoted string (for example
  ``-DCMAKE_CUDA_ARCHITECTURES=90`` or ``-DGPU_TARGETS=gfx950``), added to
  ``IDXPLAN_CMAKE_ARGS``.
"""

import os

from setuptools import build_meta as _setuptools

# What pip asks of a backend to build a wheel (no sdist, no editable install:
# the module is built from the repository).
get_requires_for_build_wheel = _setuptools.get_requires_for_build_wheel
prepare_metadata_for_build_wheel = _setuptools.prepare_metadata_for_build_wheel

DEVICES = ("cpu", "cuda", "hip")


def _take_settings(config_settings):
    """Moves idxplan's settings into the environment; returns the rest for setuptools."""
    settings = dict(config_settings or {})
    device = settings.pop("device", None) or os.environ.get("IDXPLAN_DEVICE") or "cpu"
    if device not in DEVICES:
        raise ValueError(f"--config-settings device={device!r}: idxplan builds device=cpu, cuda or hip")
    os.environ["IDXPLAN_DEVICE"] = device
    cmake_args = settings.pop("cmake-args", None)
    if cmake_args:
        os.environ["IDXPLAN_CMAKE_ARGS"] = " ".join(filter(None, [os.environ.get("IDXPLAN_CMAKE_ARGS"), cmake_args]))
    return settings or None


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    return _setuptools.build_wheel(wheel_directory, _take_settings(config_settings), metadata_directory)
