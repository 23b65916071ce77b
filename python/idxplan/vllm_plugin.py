# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""vLLM's general plugin ``idxplan`` (entry point ``idxplan.vllm_plugin:register`` in
the group ``vllm.general_plugins``): with ``IDXPLAN_VLLM_INDEXER=1``, vLLM's ROCm
MXFP4 indexer backends build their metadata with idxplan (docs/vllm.md).

vLLM calls ``register`` in its front-end, engine-core and worker processes, before
any builder is made, and may call it more than once. It does nothing unless the
variable is 1; then, for every backend class of vLLM's
``vllm.v1.attention.backends.mla.rocm_paged_mxfp4_indexer`` whose builder is, or
derives from, ``RocmMxfp4IndexerMetadataBuilder``, ``get_builder_cls`` returns
idxplan's subclass of that builder (``idxplan.vllm_builder``). Other backends are
untouched. A vLLM without that module or class is logged, not raised; no vLLM at
all, and it returns quietly.

Loading this module imports nothing but the standard library and idxplan's own
package: vLLM, torch and the builder come with the first enabled ``register``.
"""

from __future__ import annotations

import logging
import os

ENV = "IDXPLAN_VLLM_INDEXER"
MODULE = "vllm.v1.attention.backends.mla.rocm_paged_mxfp4_indexer"
BUILDER = "RocmMxfp4IndexerMetadataBuilder"

# Under vLLM's logger, so its handler formats what the plugin says.
logger = logging.getLogger("vllm.idxplan")


def enabled() -> bool:
    """Whether IDXPLAN_VLLM_INDEXER asks for idxplan's builder."""
    return os.environ.get(ENV, "0").strip() == "1"


def register() -> list:
    """Swaps the ROCm MXFP4 indexer backends' builder for idxplan's when
    IDXPLAN_VLLM_INDEXER=1; returns the names of the backends whose builder is
    idxplan's (empty when off). Calling it again changes nothing."""
    if not enabled():
        return []
    try:
        import vllm  # noqa: F401  (vLLM loads its plugins; without it, nothing to do)
    except ImportError:
        return []
    import importlib

    try:
        module = importlib.import_module(MODULE)
    except ImportError as e:
        logger.warning("idxplan: this vLLM has no %s (%s): its indexer builders stay vLLM's", MODULE, e)
        return []
    base = getattr(module, BUILDER, None)
    if not isinstance(base, type):
        logger.warning("idxplan: %s has no class %s: its indexer builders stay vLLM's", MODULE, BUILDER)
        return []
    from .vllm_builder import builder_class

    swapped = []
    for name, backend in sorted(vars(module).items()):
        if not isinstance(backend, type) or backend.__module__ != module.__name__:
            continue
        get_builder_cls = getattr(backend, "get_builder_cls", None)
        if get_builder_cls is None:
            continue
        try:
            builder = get_builder_cls()
        except Exception:  # an abstract backend's, or one that needs arguments
            continue
        if not isinstance(builder, type):
            continue
        if getattr(builder, "_idxplan_replaces", None) is not None:
            swapped.append(name)  # swapped by an earlier register()
            continue
        if not issubclass(builder, base):
            continue
        backend.get_builder_cls = staticmethod(_returning(builder_class(builder)))
        swapped.append(name)
    if swapped:
        logger.info("idxplan: the metadata of %s is built by idxplan", ", ".join(swapped))
    else:
        logger.warning("idxplan: no backend in %s builds with %s: nothing swapped", MODULE, BUILDER)
    return swapped


def _returning(cls: type):
    def get_builder_cls() -> type:
        return cls

    return get_builder_cls
