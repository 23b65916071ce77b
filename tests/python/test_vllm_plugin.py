# SPDX-License-Identifier: Apache-2.0
# SPDX-FileCopyrightText: Copyright idxplan contributors
"""The vLLM plugin without vLLM: tests/python/vllm_standin is a stand-in vllm package
holding only what the plugin and its builder touch. The plugin is off by default, on
with IDXPLAN_VLLM_INDEXER=1, changes nothing when called twice, logs what a vLLM
lacks, returns quietly without vLLM, and its builder class makes the metadata
idxplan.vllm.MetadataBuilder makes. From an installed wheel, vLLM finds its entry
point through importlib.metadata."""

import dataclasses
import importlib
import importlib.metadata
import logging
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import idxplan
from idxplan import vllm, vllm_plugin

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "python"))
import vllm_reference  # noqa: E402
from steps import CONFIGS, assert_same, random_step, rng_for  # noqa: E402
from test_vllm import common_attn_metadata  # noqa: E402

STANDIN = pathlib.Path(__file__).resolve().parent / "vllm_standin"
ROCM = "vllm.v1.attention.backends.mla.rocm_paged_mxfp4_indexer"
STEPS = 150


def vllm_modules():
    return [name for name in sys.modules if name == "vllm" or name.startswith("vllm.")]


@pytest.fixture
def standin(monkeypatch):
    """The stand-in vLLM importable as vllm, freshly imported; the variable unset."""
    for name in vllm_modules():
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.syspath_prepend(str(STANDIN))
    monkeypatch.delenv(vllm_plugin.ENV, raising=False)
    yield
    for name in vllm_modules():
        del sys.modules[name]


def rocm():
    return importlib.import_module(ROCM)


def builders():
    m = rocm()
    return {name: getattr(m, name).get_builder_cls()
            for name in ("DeepseekV41RocmMxfp4IndexerBackend", "RocmMxfp4IndexerBackend", "RocmDenseIndexerBackend")}


def test_loading_the_plugin_imports_nothing_heavy():
    code = ("import sys, idxplan.vllm_plugin; "
            "print(sorted(m for m in ('torch', 'vllm', 'numpy', 'idxplan.vllm_builder') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.strip() == "[]"


def test_off_by_default(standin):
    before = builders()
    assert vllm_plugin.register() == []
    assert builders() == before


@pytest.mark.parametrize("value", ["0", "", "true", "yes"])
def test_only_the_value_1_switches_it_on(standin, monkeypatch, value):
    monkeypatch.setenv(vllm_plugin.ENV, value)
    before = builders()
    assert vllm_plugin.register() == [] and builders() == before


def test_on_it_swaps_the_rocm_mxfp4_builders_and_nothing_else(standin, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="vllm.idxplan")
    monkeypatch.setenv(vllm_plugin.ENV, "1")
    m = rocm()
    before = builders()
    swapped = vllm_plugin.register()
    assert swapped == ["DeepseekV41RocmMxfp4IndexerBackend", "RocmMxfp4IndexerBackend"]
    after = builders()
    for name in swapped:
        assert after[name] is not before[name] and after[name]._idxplan_replaces is before[name]
        assert issubclass(after[name], before[name]) and after[name].__name__ == f"Idxplan{before[name].__name__}"
    assert after["RocmDenseIndexerBackend"] is before["RocmDenseIndexerBackend"]
    # The base backend imported into the module is another module's: untouched.
    assert m.DeepseekV41IndexerBackend.get_builder_cls() is m.DeepseekV32IndexerMetadataBuilder
    assert "built by idxplan" in caplog.text


def test_calling_it_twice_changes_nothing(standin, monkeypatch):
    monkeypatch.setenv(vllm_plugin.ENV, "1")
    first = vllm_plugin.register()
    once = builders()
    assert vllm_plugin.register() == first
    assert builders() == once


def test_a_vllm_without_the_builder_class_is_logged_not_raised(standin, monkeypatch, caplog):
    monkeypatch.setenv(vllm_plugin.ENV, "1")
    m = rocm()
    before = m.DeepseekV41RocmMxfp4IndexerBackend.get_builder_cls()
    monkeypatch.delattr(m, "RocmMxfp4IndexerMetadataBuilder")  # renamed in this vLLM
    assert vllm_plugin.register() == []
    assert m.DeepseekV41RocmMxfp4IndexerBackend.get_builder_cls() is before
    assert "has no class RocmMxfp4IndexerMetadataBuilder" in caplog.text


def test_a_vllm_without_the_rocm_module_is_logged_not_raised(standin, monkeypatch, caplog):
    monkeypatch.setenv(vllm_plugin.ENV, "1")
    monkeypatch.setitem(sys.modules, ROCM, None)  # import fails as for a missing module
    assert vllm_plugin.register() == []
    assert f"this vLLM has no {ROCM}" in caplog.text


def test_without_vllm_it_returns_quietly(monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(vllm_plugin.ENV, "1")
    monkeypatch.setitem(sys.modules, "vllm", None)
    assert vllm_plugin.register() == []
    assert caplog.records == []


def vllm_config_for(config):
    """What vLLM hands a builder, for an idxplan config: (its resolved config,
    vllm_config, kv_cache_spec), as the benchmarks make them."""
    g = idxplan.make_geometry(**config)
    spec, vllm_config = vllm_reference.vllm_config_for(g, None)
    return g.config, vllm_config, spec


def test_the_builder_class_makes_the_metadata_builders_metadata(standin, monkeypatch):
    monkeypatch.setenv(vllm_plugin.ENV, "1")
    vllm_plugin.register()
    cls = rocm().DeepseekV41RocmMxfp4IndexerBackend.get_builder_cls()
    from vllm.v1.attention.backend import AttentionCGSupport
    from vllm.v1.attention.backends.mla import compressor_utils

    rng = rng_for(1414)  # test_vllm.py's steps
    compared = 0
    for k, config in enumerate(CONFIGS):
        c, vllm_config, spec = vllm_config_for(config)
        monkeypatch.setattr("vllm.envs.VLLM_SPARSE_INDEXER_MAX_LOGITS_MB", c["max_logits_mb"])
        monkeypatch.setattr("vllm.utils.platform_utils.COMPUTE_UNITS", c["num_compute_units"])
        assert cls.get_cudagraph_support(vllm_config, spec) is AttentionCGSupport.ALWAYS
        # As vLLM's model runner makes it (block_table_width: vLLM's keyword).
        builder = cls(spec, ["layer.0"], vllm_config, "cpu", block_table_width=520)
        # The config vLLM's names give, the table's width from max_model_len's pages.
        built = dict(builder.idxplan.geometry.config)
        assert built.pop("max_blocks_per_seq") == -(-c["max_model_len"] // c["block_size"])
        assert {k: v for k, v in c.items() if k != "max_blocks_per_seq"} == built
        assert builder.reorder_batch_threshold is None
        reference = vllm.MetadataBuilder(idxplan.make_geometry(**config), "cpu")
        for _ in range(STEPS // len(CONFIGS)):
            step = random_step(config, rng)
            cm = common_attn_metadata(step, slot_mapping=np.zeros(c["max_num_batched_tokens"], np.int64))
            compressor_utils.calls.clear()
            m = builder.build(0, cm)
            assert_same(dataclasses.replace(m, slot_mapping=None),
                        dataclasses.replace(reference.build(0, cm), slot_mapping=None))
            # The cache write's slot mapping is vLLM's own, into the builder's buffer.
            (call,) = compressor_utils.calls
            assert call["out"] is builder.slot_mapping_buffer and call["compress_ratio"] == c["compress_ratio"]
            assert call["num_tokens"] == cm.num_actual_tokens and call["block_table"] is cm.block_table_tensor
            assert len(m.slot_mapping) == cm.num_actual_tokens
            assert cm.num_actual_tokens == 0 or np.shares_memory(m.slot_mapping, builder.slot_mapping_buffer)
            compared += 1
        # vLLM captures graphs through the base class's method, which calls build().
        assert builder.build_for_cudagraph_capture(cm).num_decodes == m.num_decodes
    assert compared >= STEPS - len(CONFIGS)


def test_the_kernel_block_size_reads_the_caches_pages(standin, monkeypatch):
    # vLLM sets kernel_block_size where the attention kernel's pages are smaller
    # than the cache's: the indexer then reads every factor-th entry, divided.
    monkeypatch.setenv(vllm_plugin.ENV, "1")
    vllm_plugin.register()
    cls = rocm().DeepseekV41RocmMxfp4IndexerBackend.get_builder_cls()
    c, vllm_config, spec = vllm_config_for(CONFIGS[0])
    monkeypatch.setattr("vllm.envs.VLLM_SPARSE_INDEXER_MAX_LOGITS_MB", c["max_logits_mb"])
    builder = cls(spec, [], vllm_config, "cpu")
    builder.kernel_block_size = 64  # two kernel pages a cache page
    pages = np.arange(2 * 1024, dtype=np.int32).reshape(2, 1024)
    step = dict(query_start_loc=[0, 2, 4], seq_lens=[900, 1000], seq_lens_upper_bound=[900, 1000],
                num_tokens=None, block_table=pages.tolist(), stride=1024)
    m = builder.build(0, common_attn_metadata(step, slot_mapping=np.zeros(64, np.int64)))
    expected = pages[:, ::2] // 2
    assert (m.decode_native.block_table == expected).all()


def installed_distribution():
    """idxplan's installed distribution, where the idxplan imported here is its files."""
    try:
        dist = importlib.metadata.distribution("idxplan")
    except importlib.metadata.PackageNotFoundError:
        return None
    location = pathlib.Path(dist.locate_file("idxplan/__init__.py")).resolve()
    return dist if location == pathlib.Path(idxplan.__file__).resolve() else None


@pytest.mark.skipif(installed_distribution() is None,
                    reason="idxplan is imported from a build tree, not an installed wheel (CI's wheel stage runs this)")
def test_vllm_finds_the_entry_point_in_the_installed_wheel():
    dist = installed_distribution()
    (entry,) = [e for e in importlib.metadata.entry_points(group="vllm.general_plugins") if e.name == "idxplan"]
    assert entry.value == "idxplan.vllm_plugin:register" and entry.load() is vllm_plugin.register
    assert dist.version == idxplan.__version__
    files = {str(f) for f in dist.files}
    assert {"idxplan/__init__.pyi", "idxplan/py.typed", "idxplan/vllm_plugin.py"} <= files
