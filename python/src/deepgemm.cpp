// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// idxplan.deepgemm's core (docs/deepgemm.md): DeepGEMM's
// get_paged_mqa_logits_metadata with DeepGEMM's arguments, return value and
// refusals on SM90, over the deepgemm_sm90 contract
// (include/idxplan/contracts): one launch on torch's current stream for a
// GPU tensor, the CPU fill for a host one. A shim: every rule is the
// contract's.

#include "deepgemm.hpp"

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "arrays.hpp"
#include "idxplan/contracts/deepgemm_sm90.hpp"
#include "torch_arrays.hpp"
#include "torch_calls.hpp"
#if defined(IDXPLAN_PYTHON_DEVICE)
#include "device.hpp"
#endif

namespace idxplan::python {
namespace {

class DeepGemmMetadata : TorchCalls {
 public:
  DeepGemmMetadata() : TorchCalls("idxplan.deepgemm") {}

  // get_paged_mqa_logits_metadata(context_lens, block_kv, num_sms,
  // indices=None) -> int32 [num_sms + 1, 2] where context_lens lives.
  py::object metadata(py::handle context_lens, py::handle block_kv, py::handle num_sms, py::handle indices) {
    constexpr const char* kFn = "get_paged_mqa_logits_metadata";
    if (!indices.is_none()) {
      fail(fmt::format("{}: indices (varlen rows) is DeepGEMM's SM100 path; deepgemm_sm90 takes context_lens "
                       "[batch, next_n] alone",
                       kFn));
    }
    require_tensor(context_lens, kFn, "context_lens");
    const std::string name = fmt::format("{}: context_lens", kFn);
    const EngineArray lens = read_engine(torch_, context_lens, name.c_str(), 2, false);
    if (lens.rows > 1 && lens.row_stride != lens.cols) {
      fail(fmt::format("{}: context_lens must be contiguous, got rows {} elements apart for {} columns", kFn,
                       lens.row_stride, lens.cols));
    }
    const deepgemm_sm90::MetadataShape s = deepgemm_sm90::metadata_shape(
        lens.rows, lens.cols, as_index(block_kv, kFn, "block_kv"), as_index(num_sms, kFn, "num_sms"));
    const py::object out = new_empty(lens, py::make_tuple(s.rows(), deepgemm_sm90::kRowWords));
    int32_t* words = pointer(out);
    if (lens.memory == Memory::host) {
      deepgemm_sm90::fill_metadata(s, host_span(lens), Span<int32_t>(words, static_cast<std::size_t>(s.words())));
    } else {
#if defined(IDXPLAN_PYTHON_DEVICE)
      python::enqueue_deepgemm_metadata(s, static_cast<const int32_t*>(lens.data), words, launch_stream(lens, kFn));
#else
      no_device_part(kFn);
#endif
    }
    return out;
  }
};

}  // namespace

void register_deepgemm(py::module_& m) {
  py::class_<DeepGemmMetadata>(m, "_DeepGemmMetadata")
      .def(py::init<>())
      .def("metadata", &DeepGemmMetadata::metadata, py::arg("context_lens"), py::arg("block_kv"),
           py::arg("num_sms"), py::arg("indices") = py::none());
}

}  // namespace idxplan::python
