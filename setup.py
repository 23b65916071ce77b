# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""The package's one build step setuptools cannot say in pyproject.toml: the
extension ``idxplan._idxplan`` is CMake's target ``idxplan_python``, built in
``build/wheel-<device>`` (kept, so a second build recompiles only what
changed) and copied where setuptools packs it. The version is the CMake
project's."""

import os
import pathlib
import re
import shlex
import shutil
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = pathlib.Path(__file__).resolve().parent


def cmake_version():
    text = (ROOT / "CMakeLists.txt").read_text()
    match = re.search(r"project\(idxplan VERSION ([0-9.]+)", text)
    if match is None:
        raise RuntimeError("CMakeLists.txt has no project(idxplan VERSION ...)")
    return match.group(1)


def device_arguments(device):
    """CMake's arguments for the module's device part."""
    if device == "cpu":
        return []
    if device == "cuda":
        nvcc = os.environ.get("CUDACXX", "/usr/local/cuda/bin/nvcc")
        return ["-DIDXPLAN_CUDA=ON", f"-DCMAKE_CUDA_COMPILER={nvcc}",
                f"-DCMAKE_CUDA_ARCHITECTURES={os.environ.get('CUDAARCHS', 'native')}"]
    if device == "hip":
        return ["-DIDXPLAN_HIP=ON", f"-DCMAKE_CXX_COMPILER={os.environ.get('HIPCXX', 'hipcc')}"]
    raise ValueError(f"IDXPLAN_DEVICE={device!r}: idxplan builds cpu, cuda or hip")


class CMakeBuild(build_ext):
    def build_extension(self, ext):
        device = os.environ.get("IDXPLAN_DEVICE", "cpu")
        cmake = shutil.which("cmake")
        if cmake is None:
            raise RuntimeError("building idxplan needs cmake (scripts/install-deps installs it)")
        build = ROOT / "build" / f"wheel-{device}"
        generator = ["-G", "Ninja"] if shutil.which("ninja") and not (build / "Makefile").exists() else []
        configure = [cmake, "-S", str(ROOT), "-B", str(build), *generator, "-DCMAKE_BUILD_TYPE=Release",
                     "-DIDXPLAN_PYTHON=ON", "-DIDXPLAN_BUILD_TESTS=OFF", "-DIDXPLAN_BUILD_TOOLS=OFF",
                     "-DIDXPLAN_BUILD_BENCHMARKS=OFF", "-DIDXPLAN_INSTALL=OFF",
                     f"-DPython3_EXECUTABLE={sys.executable}", *device_arguments(device),
                     *shlex.split(os.environ.get("IDXPLAN_CMAKE_ARGS", ""))]
        subprocess.run(configure, check=True)
        subprocess.run([cmake, "--build", str(build), "--target", "idxplan_python"], check=True)
        built = sorted((build / "python" / "idxplan").glob("_idxplan*"))
        built = [p for p in built if p.suffix in (".so", ".pyd")]
        if len(built) != 1:
            raise RuntimeError(f"expected one built module in {build}/python/idxplan, found {built}")
        target = pathlib.Path(self.get_ext_fullpath(ext.name))
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(built[0], target)


setup(
    version=cmake_version(),
    ext_modules=[Extension("idxplan._idxplan", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
)
