// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// idxplan's Python module (docs/python.md): the planner, the CPU reference
// and, where built with CUDA or HIP, the prepare launch, over the caller's
// arrays. The package idxplan (python/idxplan/__init__.py) wraps this
// extension, _idxplan.

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <fmt/format.h>

#include "arrays.hpp"
#include "idxplan/idxplan.hpp"
#include "idxplan/json.hpp"
#include "aiter.hpp"
#include "deepgemm.hpp"
#include "vllm.hpp"
#if defined(IDXPLAN_PYTHON_DEVICE)
#include "device.hpp"
#endif

namespace idxplan::python {
namespace {

// ---------------------------------------------------------------- configs

py::dict config_dict(const IndexerConfig& c) {
  py::dict d;
  d["num_heads"] = c.num_heads;
  d["head_dim"] = c.head_dim;
  d["block_size"] = c.block_size;
  d["compress_ratio"] = c.compress_ratio;
  d["num_speculative_tokens"] = c.num_speculative_tokens;
  d["adaptive_verification"] = c.adaptive_verification;
  d["max_model_len"] = c.max_model_len;
  d["candidate_block_size"] = c.candidate_block_size;
  d["candidate_topk_blocks"] = c.candidate_topk_blocks;
  d["sparse_logits"] = c.sparse_logits;
  d["max_logits_mb"] = c.max_logits_mb;
  d["num_compute_units"] = c.num_compute_units;
  d["dcp_world_size"] = c.dcp_world_size;
  d["pcp_world_size"] = c.pcp_world_size;
  d["max_num_seqs"] = c.max_num_seqs;
  d["max_num_batched_tokens"] = c.max_num_batched_tokens;
  d["max_blocks_per_seq"] = c.max_blocks_per_seq;
  d["contract"] = std::string(contract_name(c.contract));
  d["decode_parallel_units"] = c.decode_parallel_units;
  d["prefill_parallel_units"] = c.prefill_parallel_units;
  return d;
}

// The config as JSON text (the package serialises the caller's keyword
// arguments), read by idxplan/json.hpp's config_from_json, as the idxplan
// command reads it: the same keys, the same checks, the same messages.
Geometry make_geometry_from_json(const std::string& text) {
  return make_geometry(config_from_json(nlohmann::json::parse(text)));
}

// ---------------------------------------------------------------- the planner

// A numpy structured dtype of `T`'s fields: int32 words and bools at their
// offsets. Made through numpy's own dtype() rather than pybind11's
// PYBIND11_NUMPY_DTYPE, whose format-string building crashed at import on
// the H200 image (pybind11 3.1, numpy 2.5).
struct Field {
  const char* name;
  std::size_t offset;
  bool boolean;
};
py::object record_dtype(std::initializer_list<Field> fields, std::size_t itemsize) {
  py::list names, formats, offsets;
  for (const Field& f : fields) {
    names.append(f.name);
    formats.append(f.boolean ? "?" : "<i4");
    offsets.append(f.offset);
  }
  py::dict spec;
  spec["names"] = names;
  spec["formats"] = formats;
  spec["offsets"] = offsets;
  spec["itemsize"] = itemsize;
  return py::module_::import("numpy").attr("dtype")(spec);
}

#define IDXPLAN_FIELD(T, f) Field{#f, offsetof(T, f), std::is_same_v<decltype(T::f), bool>}

template <class T>
const py::object& dtype_of();

// Made once, on first use, and never destroyed (it outlives the interpreter's
// teardown order).
#define IDXPLAN_DTYPE(T, ...)                                                          \
  template <>                                                                          \
  const py::object& dtype_of<T>() {                                                    \
    static const py::object* dtype = new py::object(record_dtype({__VA_ARGS__}, sizeof(T))); \
    return *dtype;                                                                     \
  }
IDXPLAN_DTYPE(ChunkSplit, IDXPLAN_FIELD(ChunkSplit, request_begin), IDXPLAN_FIELD(ChunkSplit, request_end),
              IDXPLAN_FIELD(ChunkSplit, query_begin), IDXPLAN_FIELD(ChunkSplit, query_end))
IDXPLAN_DTYPE(RequestRows, IDXPLAN_FIELD(RequestRows, first_row), IDXPLAN_FIELD(RequestRows, end_row),
              IDXPLAN_FIELD(RequestRows, request))
IDXPLAN_DTYPE(PrefillPlan, IDXPLAN_FIELD(PrefillPlan, token_start), IDXPLAN_FIELD(PrefillPlan, token_end),
              IDXPLAN_FIELD(PrefillPlan, first_request), IDXPLAN_FIELD(PrefillPlan, num_reqs),
              IDXPLAN_FIELD(PrefillPlan, width), IDXPLAN_FIELD(PrefillPlan, first_piece),
              IDXPLAN_FIELD(PrefillPlan, num_pieces), IDXPLAN_FIELD(PrefillPlan, query_start_loc_offset),
              IDXPLAN_FIELD(PrefillPlan, use_gather), IDXPLAN_FIELD(PrefillPlan, max_seq_len))
IDXPLAN_DTYPE(ChunkGroup, IDXPLAN_FIELD(ChunkGroup, first_request), IDXPLAN_FIELD(ChunkGroup, num_reqs),
              IDXPLAN_FIELD(ChunkGroup, token_start), IDXPLAN_FIELD(ChunkGroup, token_end),
              IDXPLAN_FIELD(ChunkGroup, slice_rows), IDXPLAN_FIELD(ChunkGroup, word_offset),
              IDXPLAN_FIELD(ChunkGroup, max_seq_len))
IDXPLAN_DTYPE(GatherLaunch, IDXPLAN_FIELD(GatherLaunch, token_start), IDXPLAN_FIELD(GatherLaunch, token_end),
              IDXPLAN_FIELD(GatherLaunch, request))
#undef IDXPLAN_DTYPE
#undef IDXPLAN_FIELD

// A plan's arrays as read-only numpy views of the plan's own memory.
template <class T>
py::array view_of(const std::vector<T>& v, py::handle owner) {
  py::array a(py::dtype(dtype_of<T>()), {static_cast<py::ssize_t>(v.size())},
              {static_cast<py::ssize_t>(sizeof(T))}, v.data(), owner);
  a.attr("setflags")(py::arg("write") = false);
  return a;
}

// Calls f with `obj` as a Span of int32 or int64: any 1-D integer array
// (numpy, a CPU torch tensor, anything with __array__ or the buffer
// protocol, a list). Only arrays of other integer widths are copied.
template <class F>
void with_ints(py::handle obj, const char* name, F&& f) {
  py::array a = py::reinterpret_steal<py::array>(
      py::detail::npy_api::get().PyArray_FromAny_(obj.ptr(), nullptr, 0, 0,
                                                   py::detail::npy_api::NPY_ARRAY_ENSUREARRAY_, nullptr));
  if (!a) {
    PyErr_Clear();
    fail(fmt::format("{} must be a 1-D integer array, got {}", name,
                     py::str(py::type::handle_of(obj)).cast<std::string>()));
  }
  if (a.ndim() != 1) fail(fmt::format("{} must be a 1-D integer array, got {} dimensions", name, a.ndim()));
  if (a.size() == 0) {
    f(Span<const int64_t>());  // [] comes as float64
    return;
  }
  const char kind = a.dtype().kind();
  const std::string dtype = py::str(a.dtype()).cast<std::string>();
  if (kind != 'i' && kind != 'u') fail(fmt::format("{} must hold integers, got dtype {}", name, dtype));
  if (foreign_byte_order(a.dtype().byteorder())) {
    fail(fmt::format("{} holds {} in the other byte order; pass a native-order array", name, dtype));
  }
  const bool contiguous = a.strides(0) == a.itemsize();
  const auto n = static_cast<std::size_t>(a.size());
  if (kind == 'u' && a.itemsize() == 8) {
    // The one width whose values int64 cannot hold: named as given.
    const auto wide = py::array_t<uint64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    for (std::size_t i = 0; i < n; ++i) {
      if (wide.data()[i] > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
        fail(fmt::format("{}[{}]={} is past any length or offset idxplan takes (int32)", name, i,
                         wide.data()[i]));
      }
    }
  }
  if (kind == 'i' && a.itemsize() == 4 && contiguous) {
    f(Span<const int32_t>(static_cast<const int32_t*>(a.data()), n));
  } else if (kind == 'i' && a.itemsize() == 8 && contiguous) {
    f(Span<const int64_t>(static_cast<const int64_t*>(a.data()), n));
  } else {
    const auto wide = py::array_t<int64_t, py::array::c_style | py::array::forcecast>::ensure(a);
    f(Span<const int64_t>(wide.data(), n));
  }
}

// A property of StepPlan: a view of one of its arrays, kept alive by the plan.
template <class T>
auto plan_array(std::vector<T> StepPlan::*member) {
  return [member](py::object self) { return view_of(self.cast<const StepPlan&>().*member, self); };
}

// The step's token count: an integer (int, numpy or torch integer
// scalars: anything with __index__), never a float or a string rounded or
// parsed into one, nor a bool.
int64_t token_count(py::handle obj) {
  const std::string given = py::repr(obj).cast<std::string>();
  if (PyBool_Check(obj.ptr()) || PyIndex_Check(obj.ptr()) == 0) {
    throw StepError(fmt::format("num_tokens must be an integer, got {} ({})", given,
                                py::str(py::type::handle_of(obj)).cast<std::string>()));
  }
  const py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(obj.ptr()));
  if (!index) throw py::error_already_set();
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (overflow != 0) throw StepError(fmt::format("num_tokens={} does not fit int64", given));
  if (value < 0) throw StepError(fmt::format("num_tokens={} is negative", given));
  return value;
}

class Planner {
 public:
  explicit Planner(const Geometry& g) : g_(g) { reserve(plan_, g_); }

  // Plans into the planner's one plan, reusing its arrays.
  StepPlan& plan(py::handle query_start_loc, py::handle seq_lens_upper_bound, py::handle num_tokens) {
    const int64_t tokens = num_tokens.is_none() ? kUnpaddedTokens : token_count(num_tokens);
    with_ints(query_start_loc, "query_start_loc", [&](auto qsl) {
      with_ints(seq_lens_upper_bound, "seq_lens_upper_bound",
                [&](auto upper) { plan_step(g_, qsl, upper, tokens, plan_); });
    });
    return plan_;
  }
  const Geometry& geometry() const { return g_; }

 private:
  Geometry g_;
  StepPlan plan_;
};

// ---------------------------------------------------------------- step buffers

// The caller's step inputs, read once: pointers idxplan passes on, owners it
// keeps alive.
struct PyStepInputs {
  Array seq_lens, query_start_loc, block_table;
  StepInputs raw;
  Memory memory = Memory::host;

  PyStepInputs(py::handle seq_lens_, py::handle query_start_loc_, py::handle block_table_)
      : seq_lens(read_array(seq_lens_, "seq_lens")),
        query_start_loc(read_array(query_start_loc_, "query_start_loc")),
        block_table(read_array(block_table_, "block_table", 2)) {
    memory = seq_lens.memory;
    for (const Array* a : {&query_start_loc, &block_table}) {
      if (a->memory != memory) {
        fail(fmt::format("seq_lens is in {} memory but query_start_loc or block_table in {}",
                         memory_name(memory), memory_name(a->memory)));
      }
    }
    if (block_table.row_stride > 0x7FFFFFFF || block_table.cols > 0x7FFFFFFF) {
      fail(fmt::format("block_table's rows ({} columns, a stride of {}) do not fit int32", block_table.cols,
                       block_table.row_stride));
    }
    // The extents are the arrays' shapes: check_step_buffers refuses any
    // shorter than the plan reads.
    raw.seq_lens = seq_lens.data;
    raw.num_seq_lens = seq_lens.words;
    raw.query_start_loc = query_start_loc.data;
    raw.num_query_start_loc = query_start_loc.words;
    raw.block_table = block_table.data;
    raw.block_table_rows = block_table.rows;
    raw.block_table_cols = static_cast<int32_t>(block_table.cols);
    // A table of one row has no stride to speak of; its columns are its row.
    raw.block_table_stride =
        static_cast<int32_t>(block_table.rows > 1 ? block_table.row_stride : block_table.cols);
  }
};

constexpr const char* kOutputNames[] = {"context_lens",       "decode_row_lens",  "decode_block_ends",
                                        "decode_block_table", "prefill_row_ends", "prefill_block_ends",
                                        "prefill_query_start_loc", "decode_schedule", "prefill_schedule",
                                        "schedule_safe"};
constexpr int kOutputs = 10;
// Each output's index among them, in kOutputNames' (and StepOutputs') order.
enum OutputIndex : int {
  kContextLens, kDecodeRowLens, kDecodeBlockEnds, kDecodeBlockTable,
  kPrefillRowEnds, kPrefillBlockEnds, kPrefillQueryStartLoc, kDecodeSchedule,
  kPrefillSchedule, kScheduleSafe,  // flydsl_fp4's, None under gluon_mxfp4
};
constexpr int kRequiredOutputs = kPrefillSchedule;

// The caller's step outputs, read once.
struct PyStepOutputs {
  Array arrays[kOutputs];
  StepOutputs raw;
  Memory memory = Memory::host;

  PyStepOutputs(const py::handle (&objects)[kOutputs], bool always_write_decode_block_table) {
    for (int k = 0; k < kOutputs; ++k) {
      if (k >= kRequiredOutputs && objects[k].is_none()) {
        arrays[k].owner = py::none();
        continue;
      }
      arrays[k] = read_array(objects[k], kOutputNames[k], k == kDecodeBlockTable ? 2 : 1);
    }
    memory = arrays[0].memory;
    for (int k = 1; k < kOutputs; ++k) {
      if (arrays[k].data != nullptr && arrays[k].memory != memory) {
        fail(fmt::format("context_lens is in {} memory but {} in {}", memory_name(memory),
                         kOutputNames[k], memory_name(arrays[k].memory)));
      }
    }
    OutputBuffer* fields[kOutputs] = {&raw.context_lens,       &raw.decode_row_lens,
                                      &raw.decode_block_ends,  &raw.decode_block_table,
                                      &raw.prefill_row_ends,   &raw.prefill_block_ends,
                                      &raw.prefill_query_start_loc, &raw.decode_schedule,
                                      &raw.prefill_schedule,   &raw.schedule_safe};
    for (int k = 0; k < kOutputs; ++k) *fields[k] = OutputBuffer{arrays[k].data, arrays[k].words};
    if (arrays[kDecodeBlockTable].row_stride > 0x7FFFFFFF) {
      fail("decode_block_table's row stride does not fit int32");
    }
    raw.decode_block_table_stride = static_cast<int32_t>(arrays[kDecodeBlockTable].row_stride);
    raw.always_write_decode_block_table = always_write_decode_block_table;
  }
};

void require_memory(Memory wanted, Memory inputs, Memory outputs, const char* what) {
  if (inputs != wanted || outputs != wanted) {
    fail(fmt::format("{} needs {} arrays, got inputs in {} memory and outputs in {}", what,
                     memory_name(wanted), memory_name(inputs), memory_name(outputs)));
  }
}

// ---------------------------------------------------------------- launch views

// The caller's array a view pointer lies in, sliced to the view: `count`
// elements from the pointer (1-D), or `count` rows from it (2-D). A view of
// no elements may start at an array's end; one of some starts inside its
// array, which matters where another array begins at this one's end (a GPU
// allocator places them so).
py::object slice_at(const int32_t* p, int64_t count, std::initializer_list<const Array*> candidates) {
  if (p == nullptr) return py::none();
  const auto at = reinterpret_cast<std::uintptr_t>(p);
  for (const Array* a : candidates) {
    const auto first = reinterpret_cast<std::uintptr_t>(a->data);
    const auto end = first + 4 * static_cast<std::uintptr_t>(a->words);
    if (at < first || at > end || (at == end && count > 0)) continue;
    const auto offset = static_cast<py::ssize_t>((at - first) / 4);
    if (a->ndim == 1) return a->owner[py::slice(offset, offset + count, 1)];
    const py::ssize_t row = a->row_stride > 0 ? offset / a->row_stride : 0;
    return a->owner[py::slice(row, row + count, 1)];
  }
  throw StepError("a launch view points outside the arrays it was given");
}

py::dict decode_view(const Geometry& g, const StepPlan& plan, const PyStepInputs& in, const PyStepOutputs& out) {
  const DecodeLaunch l = decode_launch(g, plan, in.raw, out.raw);
  py::dict d;
  if (l.num_seqs == 0) return d;
  const Array* o = out.arrays;
  const int64_t rows = int64_t{l.num_seqs} * l.next_n;
  d["num_seqs"] = l.num_seqs;
  d["next_n"] = l.next_n;
  d["context_lens"] = slice_at(l.context_lens, l.num_seqs, {&o[kContextLens], &o[kDecodeRowLens]});
  d["row_ends"] = slice_at(l.row_ends, rows, {&o[kDecodeRowLens]});
  d["block_ends"] = slice_at(l.block_ends, rows, {&o[kDecodeBlockEnds]});
  d["block_table"] = slice_at(l.block_table, l.num_seqs, {&in.block_table, &o[kDecodeBlockTable]});
  d["block_table_stride"] = l.block_table_stride;
  d["max_blocks"] = l.max_blocks;
  d["row_block_table"] = slice_at(l.row_block_table, rows, {&in.block_table, &o[kDecodeBlockTable]});
  d["row_block_table_stride"] = l.row_block_table_stride;
  d["schedule"] = slice_at(l.schedule, l.schedule_words, {&o[kDecodeSchedule]});
  d["num_ctas"] = l.num_ctas;
  d["safe"] = slice_at(l.safe, 1, {&o[kScheduleSafe]});
  d["max_seq_len"] = l.max_seq_len;
  d["use_gather"] = l.use_gather;
  d["in_place"] = l.in_place;
  return d;
}

py::dict prefill_view(const Geometry& g, const StepPlan& plan, std::size_t i, const PyStepInputs& in,
                      const PyStepOutputs& out) {
  const PrefillLaunch l = prefill_launch(g, plan, i, in.raw, out.raw);
  const Array* o = out.arrays;
  const int64_t rows = l.token_end - l.token_start;
  py::dict d;
  d["token_start"] = l.token_start;
  d["token_end"] = l.token_end;
  d["first_request"] = l.first_request;
  d["num_reqs"] = l.num_reqs;
  d["width"] = l.width;
  d["context_lens"] = slice_at(l.context_lens, l.num_reqs, {&o[kContextLens]});
  d["row_ends"] = slice_at(l.row_ends, rows, {&o[kPrefillRowEnds]});
  d["block_ends"] = slice_at(l.block_ends, rows, {&o[kPrefillBlockEnds]});
  d["query_start_loc"] = slice_at(l.query_start_loc, l.num_reqs + 1, {&o[kPrefillQueryStartLoc]});
  d["block_table"] = slice_at(l.block_table, l.num_reqs, {&in.block_table});
  d["block_table_stride"] = l.block_table_stride;
  d["max_blocks"] = l.max_blocks;
  d["schedule"] = slice_at(l.schedule, int64_t{flydsl_fp4::kPrefillWords} * l.num_ctas, {&o[kPrefillSchedule]});
  d["num_ctas"] = l.num_ctas;
  d["safe"] = slice_at(l.safe, 1, {&o[kScheduleSafe]});
  d["use_gather"] = l.use_gather;
  return d;
}

py::dict candidate_view(const Geometry& g, const StepPlan& plan, std::size_t i, const PyStepInputs& in,
                        const PyStepOutputs& out) {
  const CandidateLaunch l = candidate_launch(g, plan, i, in.raw, out.raw);
  const Array* o = out.arrays;
  const int64_t rows = l.token_end - l.token_start;
  py::dict d;
  d["token_start"] = l.token_start;
  d["token_end"] = l.token_end;
  d["request"] = l.request;
  d["context_len"] = slice_at(l.context_len, 1, {&o[kContextLens]});
  d["row_ends"] = slice_at(l.row_ends, rows, {&o[kPrefillRowEnds]});
  d["block_ends"] = slice_at(l.block_ends, rows, {&o[kPrefillBlockEnds]});
  d["block_table"] = slice_at(l.block_table, 1, {&in.block_table});
  d["block_table_stride"] = l.block_table_stride;
  return d;
}

}  // namespace
}  // namespace idxplan::python

PYBIND11_MODULE(_idxplan, m) {
  using namespace idxplan;
  using namespace idxplan::python;
  m.doc() = "idxplan: plans DeepSeek's sparse-attention indexer steps (the package idxplan wraps this)";
  // The library's version (idxplan/version.hpp), which the wheel's is (the CMake project's).
  m.attr("__version__") = fmt::format("{}.{}.{}", kVersionMajor, kVersionMinor, kVersionPatch);

  // C++ exceptions as the package's: ValueError for a bad config, step or
  // buffer, RuntimeError for a failed GPU call.
  py::register_exception<ConfigError>(m, "ConfigError", PyExc_ValueError).doc() =
      "A config that cannot make a Geometry; the message names the field and value.";
  py::register_exception<StepError>(m, "StepError", PyExc_ValueError).doc() =
      "A step, or step buffers, that cannot be planned or filled; the message names them.";
  py::register_exception<DeviceError>(m, "DeviceError", PyExc_RuntimeError).doc() =
      "A failed GPU runtime call, with the runtime's error name and string.";
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const nlohmann::json::exception& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    }
  });

  m.def("_deepseek_v41_config", [](int32_t cus) { return config_dict(deepseek_v41_config(cus)); });
  m.def("_make_geometry_json", &make_geometry_from_json);
  m.def("_plan_json_text", [](const std::string& text) {
    PlannedStep planned = plan_request(parse_step_request(nlohmann::json::parse(text)));
    return plan_to_json(planned).dump();
  });

  py::class_<CacheLayout>(m, "CacheLayout", "aiter's layout of one page of the MXFP4 cache.")
      .def_readonly("n_per_tile", &CacheLayout::n_per_tile)
      .def_readonly("d_per_tile", &CacheLayout::d_per_tile)
      .def_readonly("scale_lanes", &CacheLayout::scale_lanes)
      .def_readonly("block_kv", &CacheLayout::block_kv)
      .def_readonly("value_bytes", &CacheLayout::value_bytes)
      .def_readonly("scale_bytes", &CacheLayout::scale_bytes);

  py::class_<Geometry>(m, "Geometry",
                       "A checked config and what is derived from it; only make_geometry makes one.")
      .def_property_readonly("config", [](const Geometry& g) { return config_dict(g.config()); })
      .def_property_readonly("page_entries", &Geometry::page_entries)
      .def_property_readonly("cache", &Geometry::cache)
      .def_property_readonly("native_next_n", &Geometry::native_next_n)
      .def_property_readonly("decode_threshold", &Geometry::decode_threshold)
      .def_property_readonly("logits_width", &Geometry::logits_width)
      .def_property_readonly("max_logits_bytes", &Geometry::max_logits_bytes)
      .def_property_readonly("max_blocks_per_seq", &Geometry::max_blocks_per_seq)
      .def_property_readonly("max_decode_rows", &Geometry::max_decode_rows)
      .def_property_readonly("num_candidate_cols", &Geometry::num_candidate_cols)
      .def_property_readonly("gather_rows", &Geometry::gather_rows)
      .def_property_readonly("schedule_words", &Geometry::schedule_words)
      .def_property_readonly("fingerprint", &Geometry::fingerprint)
      .def("__repr__", [](const Geometry& g) {
        return fmt::format("Geometry(fingerprint={:#x}, max_num_seqs={}, max_num_batched_tokens={})",
                           g.fingerprint(), g.config().max_num_seqs, g.config().max_num_batched_tokens);
      });

  py::class_<NativeDecode>(m, "NativeDecode", "The decode rows as next_n-row sequences.")
      .def_readonly("next_n", &NativeDecode::next_n)
      .def_readonly("num_seqs", &NativeDecode::num_seqs)
      .def("__repr__", [](const NativeDecode& n) { return fmt::format("{}", n); });
  py::class_<ScheduleShape>(m, "ScheduleShape", "The decode schedule's shape.")
      .def_readonly("num_seqs", &ScheduleShape::num_seqs)
      .def_readonly("rows_per_seq", &ScheduleShape::rows_per_seq)
      .def_readonly("block_m", &ScheduleShape::block_m)
      .def_readonly("row_blocks", &ScheduleShape::row_blocks)
      .def_readonly("work", &ScheduleShape::work)
      .def_readonly("block_kv", &ScheduleShape::block_kv)
      .def_readonly("num_ctas", &ScheduleShape::num_ctas)
      .def_readonly("max_tiles", &ScheduleShape::max_tiles)
      .def_readonly("native", &ScheduleShape::native)
      .def("__repr__", [](const ScheduleShape& s) { return fmt::format("{}", s); });
  py::class_<DecodePlan>(m, "DecodePlan", "Everything about the step's decode rows.")
      .def_readonly("num_rows", &DecodePlan::num_rows)
      .def_readonly("num_real_rows", &DecodePlan::num_real_rows)
      .def_readonly("max_seq_len", &DecodePlan::max_seq_len)
      .def_readonly("num_block_cols", &DecodePlan::num_block_cols)
      .def_readonly("use_gather", &DecodePlan::use_gather)
      .def_readonly("rows_are_requests", &DecodePlan::rows_are_requests)
      .def_property_readonly("ragged", &DecodePlan::ragged)
      .def_property_readonly("native", [](const DecodePlan& d) -> py::object {
        return d.native.present() ? py::cast(d.native) : py::none();
      })
      .def_property_readonly("schedule", [](const DecodePlan& d) -> py::object {
        return d.schedule.present() ? py::cast(d.schedule) : py::none();
      })
      .def("__repr__", [](const DecodePlan& d) { return fmt::format("{}", d); });

  py::class_<StepPlan>(m, "Plan",
                       "A step's plan. A Planner's plan is its own: the next plan() overwrites it, "
                       "and its array views with it; copy() keeps one.")
      .def_readonly("geometry", &StepPlan::geometry)
      .def_readonly("num_reqs", &StepPlan::num_reqs)
      .def_readonly("num_tokens", &StepPlan::num_tokens)
      .def_readonly("num_decodes", &StepPlan::num_decodes)
      .def_readonly("num_decode_tokens", &StepPlan::num_decode_tokens)
      .def_readonly("num_prefills", &StepPlan::num_prefills)
      .def_readonly("num_prefill_tokens", &StepPlan::num_prefill_tokens)
      .def_readonly("max_seq_len", &StepPlan::max_seq_len)
      .def_readonly("num_prefill_query_start_loc_words", &StepPlan::num_prefill_query_start_loc_words)
      .def_readonly("decode", &StepPlan::decode)
      .def_property_readonly("splits", plan_array(&StepPlan::splits))
      .def_property_readonly("prefill", plan_array(&StepPlan::prefill))
      .def_property_readonly("pieces", plan_array(&StepPlan::pieces))
      .def_property_readonly("chunk_groups", plan_array(&StepPlan::chunk_groups))
      .def_property_readonly("gather_launches", plan_array(&StepPlan::gather_launches))
      .def("has_decode", &StepPlan::has_decode)
      .def("has_prefill", &StepPlan::has_prefill)
      .def("copy", [](const StepPlan& p) { return StepPlan(p); })
      .def("__eq__", [](const StepPlan& a, const StepPlan& b) { return a == b; })
      .def("__repr__", [](const StepPlan& p) { return fmt::format("{}", p); });

  py::class_<Planner>(m, "Planner", "Plans steps for one geometry into one reused plan.")
      .def(py::init<const Geometry&>(), py::arg("geometry"))
      .def_property_readonly("geometry", &Planner::geometry)
      .def("plan", &Planner::plan, py::return_value_policy::reference_internal,
           py::arg("query_start_loc"), py::arg("seq_lens_upper_bound"), py::arg("num_tokens") = py::none());

  m.def("step_buffer_sizes", [](const Geometry& g) {
    const StepBufferSizes s = step_buffer_sizes(g);
    py::dict d;
    d["context_lens"] = s.context_lens;
    d["decode_row_lens"] = s.decode_rows;
    d["decode_block_ends"] = s.decode_rows;
    d["decode_block_table"] = py::make_tuple(g.max_decode_rows(), g.max_blocks_per_seq());
    d["prefill_row_ends"] = s.prefill_rows;
    d["prefill_block_ends"] = s.prefill_rows;
    d["prefill_query_start_loc"] = s.prefill_query_start_loc;
    d["decode_schedule"] = s.decode_schedule;
    if (g.contract() == Contract::flydsl_fp4) {  // flydsl_fp4's grids
      d["prefill_schedule"] = s.prefill_schedule;
      d["schedule_safe"] = s.schedule_safe;
    }
    return d;
  });

  py::class_<PyStepInputs>(m, "StepInputs", "The step's exact lengths and block table, all int32.")
      .def(py::init<py::handle, py::handle, py::handle>(), py::arg("seq_lens"), py::arg("query_start_loc"),
           py::arg("block_table"))
      .def_property_readonly("seq_lens", [](const PyStepInputs& s) { return s.seq_lens.owner; })
      .def_property_readonly("query_start_loc", [](const PyStepInputs& s) { return s.query_start_loc.owner; })
      .def_property_readonly("block_table", [](const PyStepInputs& s) { return s.block_table.owner; })
      .def_property_readonly("on_device", [](const PyStepInputs& s) { return s.memory == Memory::device; });

  py::class_<PyStepOutputs>(m, "StepOutputs", "The caller's step buffers, all int32.")
      .def(py::init([](py::handle context_lens, py::handle decode_row_lens, py::handle decode_block_ends,
                       py::handle decode_block_table, py::handle prefill_row_ends,
                       py::handle prefill_block_ends, py::handle prefill_query_start_loc,
                       py::handle decode_schedule, bool always_write_decode_block_table, py::handle prefill_schedule,
                       py::handle schedule_safe) {
             const py::handle objects[kOutputs] = {context_lens,     decode_row_lens,    decode_block_ends,
                                                   decode_block_table, prefill_row_ends, prefill_block_ends,
                                                   prefill_query_start_loc, decode_schedule, prefill_schedule,
                                                   schedule_safe};
             return new PyStepOutputs(objects, always_write_decode_block_table);
           }),
           py::arg("context_lens"), py::arg("decode_row_lens"), py::arg("decode_block_ends"),
           py::arg("decode_block_table"), py::arg("prefill_row_ends"), py::arg("prefill_block_ends"),
           py::arg("prefill_query_start_loc"), py::arg("decode_schedule"),
           py::arg("always_write_decode_block_table") = false, py::arg("prefill_schedule") = py::none(),
           py::arg("schedule_safe") = py::none())
      .def("__getitem__",
           [](const PyStepOutputs& s, const std::string& name) {
             for (int k = 0; k < kOutputs; ++k) {
               if (name == kOutputNames[k]) return s.arrays[k].owner;
             }
             throw py::key_error(name);
           })
      .def_property_readonly("names", [](const PyStepOutputs& s) {  // the buffers given, not the None ones
        std::vector<std::string> given;
        for (int k = 0; k < kOutputs; ++k) {
          if (!s.arrays[k].owner.is_none()) given.emplace_back(kOutputNames[k]);
        }
        return given;
      })
      .def_property_readonly("always_write_decode_block_table",
                             [](const PyStepOutputs& s) { return s.raw.always_write_decode_block_table; })
      .def_property_readonly("on_device", [](const PyStepOutputs& s) { return s.memory == Memory::device; });

  m.def("check_step_buffers", [](const Geometry& g, const StepPlan& plan, const PyStepInputs& in,
                                 const PyStepOutputs& out) { check_step_buffers(g, plan, in.raw, out.raw); });
  m.def("check_step_outputs", [](const Geometry& g, const PyStepOutputs& out) { check_step_outputs(g, out.raw); });
  m.def("fill_step_buffers", [](const Geometry& g, const StepPlan& plan, const PyStepInputs& in,
                                const PyStepOutputs& out) {
    require_memory(Memory::host, in.memory, out.memory, "fill_step_buffers (the CPU reference)");
    fill_step_buffers(g, plan, in.raw, out.raw);
  });
  m.def("_decode_launch", &decode_view);
  m.def("_prefill_launch", &prefill_view);
  m.def("_candidate_launch", &candidate_view);

  register_vllm(m);
  register_aiter(m);
  register_deepgemm(m);

#if defined(IDXPLAN_PYTHON_DEVICE)
  m.attr("device_platform") = device_platform();
  m.def("device_count", &python::device_count);
  m.def("compute_units", &python::compute_units);
  // The package's enqueue() picks the stream; this one takes it as given.
  m.def("_enqueue", [](const Geometry& g, const StepPlan& plan, const PyStepInputs& in,
                       const PyStepOutputs& out, std::uintptr_t stream) {
    require_memory(Memory::device, in.memory, out.memory, "enqueue");
    const py::gil_scoped_release release;
    python::enqueue(g, plan, in.raw, out.raw, stream);
  }, py::arg("geometry"), py::arg("plan"), py::arg("inputs"), py::arg("outputs"), py::arg("stream"));
#else
  m.attr("device_platform") = py::none();
#endif
}
