// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// idxplan.aiter's core (docs/aiter.md): aiter main's compute_varctx_schedule
// and compute_prefill_schedule with aiter's arguments, return values and
// refusals, over the flydsl_fp4 contract (include/idxplan/contracts): one
// launch on torch's current stream for GPU tensors, the CPU fill for host
// ones. A shim: every rule is the contract's.

#include "aiter.hpp"

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "arrays.hpp"
#include "idxplan/contracts/flydsl_fp4.hpp"
#include "torch_arrays.hpp"
#include "torch_calls.hpp"
#if defined(IDXPLAN_PYTHON_DEVICE)
#include "device.hpp"
#endif

namespace idxplan::python {
namespace {

class AiterSchedules : TorchCalls {
 public:
  AiterSchedules() : TorchCalls("idxplan.aiter") {}

  // compute_varctx_schedule(context_lens, block_k, parallel_unit_num,
  // max_seq_len, next_n=1, cta_info_out=None) -> (safe_out, cta_info, P)
  py::tuple varctx(py::handle context_lens, py::handle block_k, py::handle parallel_unit_num,
                   py::handle max_seq_len, py::handle next_n, py::handle cta_info_out) {
    constexpr const char* kFn = "compute_varctx_schedule";
    py::object owner;
    const EngineArray ctx = int32_vector(context_lens, kFn, "context_lens", owner);
    const int64_t bk = as_index(block_k, kFn, "block_k");
    const int64_t msl = as_index(max_seq_len, kFn, "max_seq_len");
    const int64_t n = as_index(next_n, kFn, "next_n");
    if (bk <= 0) fail(fmt::format("{}: block_k={} is not a positive int32", kFn, bk));
    const int64_t ctas = parallel_unit_num.is_none() ? flydsl_fp4::varctx_default_ctas(ctx.rows, bk, msl, n)
                                                      : as_index(parallel_unit_num, kFn, "parallel_unit_num");
    const flydsl_fp4::VarctxShape s = flydsl_fp4::varctx_shape(ctx.rows, bk, ctas, msl, n);
    const py::object cta_info = output(cta_info_out, kFn, s.ctas, flydsl_fp4::kDecodeWords, ctx);
    const py::object safe = new_empty(ctx, py::make_tuple(1));
    auto* info = pointer(cta_info);
    auto* safe_word = pointer(safe);
    if (ctx.memory == Memory::host) {
      flydsl_fp4::fill_varctx_schedule(s, host_span(ctx), Span<int32_t>(info, static_cast<std::size_t>(s.words())),
                                       safe_word);
    } else {
#if defined(IDXPLAN_PYTHON_DEVICE)
      python::enqueue_varctx_schedule(s, static_cast<const int32_t*>(ctx.data), info, safe_word,
                                      launch_stream(ctx, kFn));
#else
      no_device_part(kFn);
#endif
    }
    return py::make_tuple(safe, cta_info, ctas);
  }

  // compute_prefill_schedule(row_to_batch, local_starts, local_ends, block_k,
  // parallel_unit_num, max_seq_len, cta_info_out=None) -> (safe, cta_info, P)
  py::tuple prefill(py::handle row_to_batch, py::handle local_starts, py::handle local_ends, py::handle block_k,
                    py::handle parallel_unit_num, py::handle max_seq_len, py::handle cta_info_out) {
    constexpr const char* kFn = "compute_prefill_schedule";
    py::object batch_owner, start_owner, end_owner;
    const EngineArray ends = int32_vector(local_ends, kFn, "local_ends", end_owner);
    const EngineArray batches = int32_vector(row_to_batch, kFn, "row_to_batch", batch_owner);
    const EngineArray starts = int32_vector(local_starts, kFn, "local_starts", start_owner);
    for (const auto& [a, name] : {std::pair<const EngineArray*, const char*>{&batches, "row_to_batch"},
                                  {&starts, "local_starts"}}) {
      if (a->rows != ends.rows) {
        fail(fmt::format("{}: {} has {} entries and local_ends {}; a row takes one of each", kFn, name, a->rows,
                         ends.rows));
      }
      same_device(*a, ends, kFn, name, "local_ends");
    }
    const int64_t bk = as_index(block_k, kFn, "block_k");
    const flydsl_fp4::PrefillShape s = flydsl_fp4::prefill_shape(
        ends.rows, bk, as_index(parallel_unit_num, kFn, "parallel_unit_num"), as_index(max_seq_len, kFn, "max_seq_len"));
    const py::object cta_info = output(cta_info_out, kFn, s.ctas, flydsl_fp4::kPrefillWords, ends);
    const py::object safe = new_empty(ends, py::tuple());  // 0-dim, as aiter's
    auto* info = pointer(cta_info);
    auto* safe_word = pointer(safe);
    if (ends.memory == Memory::host) {
      flydsl_fp4::fill_prefill_schedule(s, host_span(batches), host_span(starts), host_span(ends),
                                        Span<int32_t>(info, static_cast<std::size_t>(s.words())), safe_word);
    } else {
#if defined(IDXPLAN_PYTHON_DEVICE)
      python::enqueue_prefill_schedule(s, static_cast<const int32_t*>(batches.data),
                                       static_cast<const int32_t*>(starts.data), static_cast<const int32_t*>(ends.data),
                                       info, safe_word, launch_stream(ends, kFn));
#else
      no_device_part(kFn);
#endif
    }
    return py::make_tuple(safe, cta_info, s.ctas);
  }

 private:
  // A 1-D int32 tensor of `obj`'s values: `obj` itself where it is one and
  // contiguous, else obj.to(torch.int32).contiguous(), as aiter converts
  // (kept alive in `owner`). One C call through the exchange API where it
  // serves.
  EngineArray int32_vector(py::handle obj, const char* function, const char* name, py::object& owner) {
    owner = py::reinterpret_borrow<py::object>(obj);
    if (torch_.exchange != nullptr && Py_TYPE(obj.ptr()) == reinterpret_cast<PyTypeObject*>(torch_.tensor_type.ptr())) {
      EngineArray a;
      a.obj = owner;
      if (read_exchanged(*torch_.exchange, obj, 1, false, a)) return a;
    }
    require_tensor(obj, function, name);
    const py::object shape = tensor_attr(obj, tensor_names().shape);
    if (PyTuple_GET_SIZE(shape.ptr()) != 1) {
      fail(fmt::format("{}: {} must be 1-D, got shape {}", function, name, py::repr(shape).cast<std::string>()));
    }
    if (!tensor_attr(obj, tensor_names().dtype).is(torch_.int32) || !owner.attr("is_contiguous")().cast<bool>()) {
      owner = owner.attr("to")(torch_.int32).attr("contiguous")();
    }
    return read_engine(torch_, owner, name, 1, false);
  }

  // cta_info_out, checked to hold `ctas` rows of `width` words where `like`
  // lives, or a new [ctas, width] int32 tensor there.
  py::object output(py::handle given, const char* function, int32_t ctas, int32_t width, const EngineArray& like) {
    if (given.is_none()) return new_empty(like, py::make_tuple(ctas, width));
    const EngineArray out = read_engine(torch_, given, "cta_info_out", 2, false);
    if (out.cols != width || (out.rows > 1 && out.row_stride != width) || out.rows < ctas) {
      fail(fmt::format("{}: cta_info_out must be a contiguous int32 [{}, {}] tensor (or more rows), got {} rows of {} "
                       "columns {} apart",
                       function, ctas, width, out.rows, out.cols, out.row_stride));
    }
    same_device(out, like, function, "cta_info_out", "the lengths");
    return py::reinterpret_borrow<py::object>(given);
  }

};

}  // namespace

void register_aiter(py::module_& m) {
  py::class_<AiterSchedules>(m, "_AiterSchedules")
      .def(py::init<>())
      .def("varctx", &AiterSchedules::varctx, py::arg("context_lens"), py::arg("block_k"),
           py::arg("parallel_unit_num"), py::arg("max_seq_len"), py::arg("next_n") = 1,
           py::arg("cta_info_out") = py::none())
      .def("prefill", &AiterSchedules::prefill, py::arg("row_to_batch"), py::arg("local_starts"),
           py::arg("local_ends"), py::arg("block_k"), py::arg("parallel_unit_num"), py::arg("max_seq_len"),
           py::arg("cta_info_out") = py::none());
}

}  // namespace idxplan::python
