// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// idxplan.vllm's core (docs/vllm.md): one call a step reads what vLLM's
// CommonAttentionMetadata carries, plans the step, fills the step buffers
// (one launch on the GPU, the CPU reference on the host) and returns the
// metadata object the ROCm MXFP4 indexer's forward reads, every tensor a
// view of the builder's buffers or of the engine's own. The dataclasses and
// the builder an engine makes are python/idxplan/vllm.py's. A shim: what goes
// where comes from the plan and from plan/launches.hpp, never from a rule of
// its own.

#include "vllm.hpp"

#include <pybind11/pybind11.h>

#include <chrono>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include <fmt/format.h>

#include "arrays.hpp"
#include "torch_arrays.hpp"
#include "idxplan/idxplan.hpp"
#if defined(IDXPLAN_PYTHON_DEVICE)
#include "device.hpp"
#endif

namespace idxplan::python {
namespace {

// The builder's buffers: the step buffers, the key bounds, and decode_lens
// (ones: every flattened decode row is one token).
enum Buffer : int {
  kContextLens, kDecodeRowLens, kDecodeBlockEnds, kDecodeBlockTable, kPrefillRowEnds, kPrefillBlockEnds,
  kPrefillQueryStartLoc, kDecodeSchedule, kKeyStarts, kKeyEnds, kDecodeLens, kBuffers,
  kDecodeSeqLens = kBuffers,  // decode_row_lens as [rows, 1], a view kind of its own
};
constexpr const char* kBufferNames[kBuffers] = {
    "context_lens",     "decode_row_lens",    "decode_block_ends",       "decode_block_table",
    "prefill_row_ends", "prefill_block_ends", "prefill_query_start_loc", "decode_schedule",
    "prefill_key_starts", "prefill_key_ends", "decode_lens"};

// The attribute names the core reads and sets, interned once.
struct Names {
  PyObject* num_reqs = intern("num_reqs");
  PyObject* num_actual_tokens = intern("num_actual_tokens");
  PyObject* query_start_loc = intern("query_start_loc");
  PyObject* query_start_loc_cpu = intern("query_start_loc_cpu");
  PyObject* seq_lens = intern("seq_lens");
  PyObject* seq_lens_cpu_upper_bound = intern("seq_lens_cpu_upper_bound");
  PyObject* block_table_tensor = intern("block_table_tensor");
  PyObject* max_seq_len = intern("max_seq_len");
  PyObject* slot_mapping = intern("slot_mapping");
  PyObject* reshape = intern("reshape");
};
const Names& names() {
  static const Names* n = new Names();  // outlives the interpreter's teardown order
  return *n;
}

// Raises, from the Python error being handled, a ValueError saying `message`:
// its __cause__ is the engine's own exception, whose words and traceback stay.
[[noreturn]] void fail_from(const std::string& message) {
  py::raise_from(PyExc_ValueError, message.c_str());
  throw py::error_already_set();
}

// Reading attribute `name` of common_attn_metadata failed: an AttributeError
// is a field the builder needs and the object lacks; anything else is the
// engine's own fault, kept as the cause.
[[noreturn]] void fail_reading(PyObject* name) {
  const char* field = PyUnicode_AsUTF8(name);
  if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
    fail_from(fmt::format("common_attn_metadata has no {}: build() reads vLLM's CommonAttentionMetadata fields "
                          "(docs/vllm.md)",
                          field));
  }
  PyObject *type = nullptr, *value = nullptr, *trace = nullptr;
  PyErr_Fetch(&type, &value, &trace);
  const std::string raised = reinterpret_cast<PyTypeObject*>(type)->tp_name;
  PyErr_Restore(type, value, trace);
  fail_from(fmt::format("reading common_attn_metadata.{} raised {} (the cause, below)", field, raised));
}

// An attribute of `obj`, or a ValueError naming what the builder needed.
py::object attr(py::handle obj, PyObject* name) {
  PyObject* v = PyObject_GetAttr(obj.ptr(), name);
  if (v == nullptr) fail_reading(name);
  return py::reinterpret_steal<py::object>(v);
}
// An attribute that may be absent (None then); one that raises otherwise is refused.
py::object attr_or_none(py::handle obj, PyObject* name) {
  PyObject* v = PyObject_GetAttr(obj.ptr(), name);
  if (v == nullptr) {
    if (!PyErr_ExceptionMatches(PyExc_AttributeError)) fail_reading(name);
    PyErr_Clear();
    return py::none();
  }
  return py::reinterpret_steal<py::object>(v);
}

// A count of common_attn_metadata: an int, or anything with an integer
// __index__ (numpy and torch integers), never a bool or a float.
int64_t as_int(py::handle v, const char* name) {
  const auto refuse = [&] {
    fail(fmt::format("common_attn_metadata.{} must be an integer, got {}", name, py::repr(v).cast<std::string>()));
  };
  if (PyBool_Check(v.ptr()) || PyIndex_Check(v.ptr()) == 0) refuse();
  PyObject* index = PyNumber_Index(v.ptr());  // raises for a float tensor or a 1-D array
  if (index == nullptr) {
    PyErr_Clear();
    refuse();
  }
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(index, &overflow);
  const std::string text = overflow != 0 ? py::str(py::handle(index)).cast<std::string>() : std::string();
  Py_DECREF(index);
  if (overflow != 0) fail(fmt::format("common_attn_metadata.{}={} does not fit int64", name, text));
  return value;
}

// Calls f with the first `count` entries of a host array as a Span.
template <class F>
void with_host_span(const EngineArray& a, int64_t count, F&& f) {
  const auto n = static_cast<std::size_t>(count);
  if (a.wide) {
    f(Span<const int64_t>(static_cast<const int64_t*>(a.data), n));
  } else {
    f(Span<const int32_t>(static_cast<const int32_t*>(a.data), n));
  }
}

class VllmBuilder {
 public:
  // `buffers`: a dict of kBufferNames' arrays (the package sizes them),
  // `classes`: a dict of the dataclasses the objects are made as, `device`:
  // the GPU's index, or -1 to fill with the CPU reference;
  // `row_table_every_step`: write decode_block_table on every step with
  // decodes (as vLLM's base builder copies it), not only where a decode
  // launch reads it.
  VllmBuilder(const Geometry& g, const py::dict& buffers, const py::dict& classes, int64_t device,
              bool row_table_every_step)
      : g_(g), device_(device), row_table_every_step_(row_table_every_step) {
    if (g_.contract() != Contract::gluon_mxfp4) {
      fail(fmt::format("vLLM's ROCm MXFP4 indexer launches the Gluon kernel, which reads contract=gluon_mxfp4; this "
                       "geometry's is {} (docs/vllm.md)",
                       contract_name(g_.contract())));
    }
    reserve(plan_, g_);
    const Memory wanted = device >= 0 ? Memory::device : Memory::host;
    for (int b = 0; b < kBuffers; ++b) {
      const py::object obj = buffers[kBufferNames[b]];
      const Array a = read_array(obj, kBufferNames[b], b == kDecodeBlockTable ? 2 : 1);
      if (a.memory != wanted) {
        fail(fmt::format("{} is in {} memory, and the builder fills {} memory", kBufferNames[b],
                         memory_name(a.memory), memory_name(wanted)));
      }
      if (a.words >= (int64_t{1} << 28)) fail(fmt::format("{} holds {} words, past 2^28", kBufferNames[b], a.words));
      buffers_[b] = obj;
      output(b) = OutputBuffer{a.data, a.words};
      if (b == kDecodeBlockTable) out_.decode_block_table_stride = static_cast<int32_t>(a.row_stride);
    }
    check_step_outputs(g_, out_);
    const StepBufferSizes sizes = step_buffer_sizes(g_);
    for (const OutputBuffer* b : {&out_.prefill_key_starts, &out_.prefill_key_ends}) {
      if (b->capacity < sizes.prefill_rows) fail("the key bound buffers hold fewer words than prefill_row_ends");
    }
    if (decode_lens_.capacity < sizes.decode_rows) fail("decode_lens holds fewer words than decode_row_lens");
    for (const char* name : {"metadata", "decode", "prefill", "chunk", "prefill_plan", "gather_launch", "native"}) {
      if (!classes.contains(name)) fail(fmt::format("classes has no {}", name));
    }
    metadata_ = classes["metadata"];
    decode_ = classes["decode"];
    prefill_ = classes["prefill"];
    chunk_ = classes["chunk"];
    prefill_plan_ = classes["prefill_plan"];
    gather_launch_ = classes["gather_launch"];
    native_ = classes["native"];
    torch_ = load_torch(device >= 0);
    if (device >= 0 && !torch_.raw_stream) {
      fail("a GPU builder launches on torch's current stream: import torch before making it");
    }
  }

#if defined(IDXPLAN_PYTHON_DEVICE)
  // An empty kernel launched as build() launches (torch's current stream on
  // the builder's GPU): the floor a one-launch build() is measured against.
  void launch_empty() {
    if (device_ < 0) fail("a CPU builder launches nothing");
    python::launch_empty(current_stream());
  }
#endif

  const Geometry& geometry() const { return g_; }
  const StepPlan& plan() const { return plan_; }
  bool reads_through_exchange_api() const { return torch_.exchange != nullptr; }

  py::object build(py::handle cm) {
    const Entered entered(building_);
    read_and_plan(cm);
    fill();
    return metadata(cm);
  }

  // build()'s three parts and the nanoseconds each took: reading the step's
  // arrays and planning, the fill (the launch, or the CPU reference), making
  // the objects. For the benchmark's account of where build()'s time goes.
  py::tuple build_timed(py::handle cm) {
    using Clock = std::chrono::steady_clock;
    const Entered entered(building_);
    const auto t0 = Clock::now();
    read_and_plan(cm);
    const auto t1 = Clock::now();
    fill();
    const auto t2 = Clock::now();
    py::object m = metadata(cm);
    const auto t3 = Clock::now();
    const auto ns = [](auto d) { return std::chrono::duration_cast<std::chrono::nanoseconds>(d).count(); };
    return py::make_tuple(m, ns(t1 - t0), ns(t2 - t1), ns(t3 - t2));
  }

 private:
  // A build runs to its end before the next starts: the plan, the buffers and
  // the step's arrays are the builder's own. A second thread (or a callback of
  // the engine's object) entering mid-build would read and rewrite them under
  // the first, so it is refused. Every entry holds the GIL, so a plain flag is
  // enough.
  class Entered {
   public:
    explicit Entered(bool& building) : building_(building) {
      if (building_) {
        throw std::runtime_error(
            "MetadataBuilder is already building a step: one builder serves one thread and one stream at a "
            "time (docs/vllm.md), and build() was entered again before its last call returned");
      }
      building_ = true;
    }
    ~Entered() { building_ = false; }
    Entered(const Entered&) = delete;
    Entered& operator=(const Entered&) = delete;

   private:
    bool& building_;
  };

  // Reads the step's arrays from `cm`, points the step's inputs at the
  // exact lengths and the engine's table, and plans it from the host copies.
  void read_and_plan(py::handle cm) {
    const Names& n = names();
    const int64_t num_reqs = as_int(attr(cm, n.num_reqs), "num_reqs");
    const int64_t num_tokens = as_int(attr(cm, n.num_actual_tokens), "num_actual_tokens");
    if (num_reqs < 0) fail(fmt::format("common_attn_metadata.num_reqs={} is negative", num_reqs));
    if (num_tokens < 0) fail(fmt::format("common_attn_metadata.num_actual_tokens={} is negative", num_tokens));

    // max_seq_len: vLLM's longest sequence, max_model_len while it captures a
    // graph. The decode gate holds for it too, and it bounds every request
    // where the host copies of the lengths are absent.
    max_seq_len_obj_ = attr_or_none(cm, n.max_seq_len);
    max_seq_len_ = max_seq_len_obj_.is_none() ? -1 : as_int(max_seq_len_obj_, "max_seq_len");
    if (!max_seq_len_obj_.is_none() && max_seq_len_ < 0) {
      fail(fmt::format("common_attn_metadata.max_seq_len={} is negative", max_seq_len_));
    }

    // Plan from the host copies.
    host_qsl_ = read_engine(torch_, attr(cm, n.query_start_loc_cpu), "query_start_loc_cpu", 1, true);
    require_host(host_qsl_, "query_start_loc_cpu");
    require_entries(host_qsl_, num_reqs + 1, "query_start_loc_cpu", "num_reqs + 1");
    const py::object upper = attr_or_none(cm, n.seq_lens_cpu_upper_bound);
    upper_is_max_seq_len_ = upper.is_none();
    if (!upper_is_max_seq_len_) {
      host_upper_ = read_engine(torch_, upper, "seq_lens_cpu_upper_bound", 1, true);
      require_host(host_upper_, "seq_lens_cpu_upper_bound");
      require_entries(host_upper_, num_reqs, "seq_lens_cpu_upper_bound", "num_reqs");
    } else if (max_seq_len_ < 0) {
      fail("common_attn_metadata.seq_lens_cpu_upper_bound is None, and so is max_seq_len: a step without the "
           "host's upper bounds is planned with max_seq_len as every request's");
    }

    // What the fill reads: the exact lengths and offsets and the engine's table.
    qsl_ = read_engine(torch_, attr(cm, n.query_start_loc), "query_start_loc", 1, false);
    seq_lens_ = read_engine(torch_, attr(cm, n.seq_lens), "seq_lens", 1, false);
    table_ = read_engine(torch_, attr(cm, n.block_table_tensor), "block_table_tensor", 2, false);
    for (const auto& [a, name] : {std::pair<const EngineArray*, const char*>{&qsl_, "query_start_loc"},
                                  {&seq_lens_, "seq_lens"}, {&table_, "block_table_tensor"}}) {
      require_filled_memory(*a, name);
    }
    in_ = StepInputs{};
    in_.seq_lens = static_cast<const int32_t*>(seq_lens_.data);
    in_.num_seq_lens = seq_lens_.rows;
    in_.query_start_loc = static_cast<const int32_t*>(qsl_.data);
    in_.num_query_start_loc = qsl_.rows;
    if (table_.cols > 0x7FFFFFFF || table_.row_stride > 0x7FFFFFFF) {
      fail(fmt::format("block_table_tensor's rows ({} columns, a stride of {}) do not fit int32", table_.cols,
                       table_.row_stride));
    }
    in_.block_table = static_cast<const int32_t*>(table_.data);
    in_.block_table_rows = table_.rows;
    in_.block_table_cols = static_cast<int32_t>(table_.cols);
    in_.block_table_stride = static_cast<int32_t>(table_.rows > 1 ? table_.row_stride : table_.cols);

    // Planned last, so that a step refused above leaves the last plan as it was.
    with_host_span(host_qsl_, num_reqs + 1, [&](auto qsl) {
      if (!upper_is_max_seq_len_) {
        with_host_span(host_upper_, num_reqs, [&](auto bounds) { plan_step(g_, qsl, bounds, num_tokens, plan_); });
        return;
      }
      // As the reference: the upper bounds are read for prefill chunks only, so
      // a decode-only step (vLLM's drafter and capture paths) builds without them.
      const int64_t bound = max_seq_len_;
      const auto bounds =
          idxplan::detail::index_view(static_cast<std::size_t>(num_reqs), [bound](std::size_t) { return bound; });
      const int32_t prefills = check_step(g_, qsl, bounds, num_tokens).split.num_prefills;
      if (prefills > 0) {
        fail(fmt::format("common_attn_metadata.seq_lens_cpu_upper_bound is None, and the step has {} prefill "
                         "request{}: their chunks are planned from the host's upper bounds (a decode-only step "
                         "takes max_seq_len for them)",
                         prefills, prefills == 1 ? "" : "s"));
      }
      plan_step(g_, qsl, bounds, num_tokens, plan_);
    });
    // The decode gate holds for the graph's max_seq_len as well as for this
    // step's bounds: a graph captured at max_model_len replays any step.
    if (plan_.num_decodes > 0 && max_seq_len_ >= 0) {
      plan_.decode.use_gather =
          plan_.decode.use_gather || g_.decode_gathers(max_seq_len_ / g_.config().compress_ratio);
    }
    // The flattened table, on native steps too: always, or where the decode rows gather.
    out_.always_write_decode_block_table = row_table_every_step_ || plan_.decode.use_gather;
  }

  void require_host(const EngineArray& a, const char* name) const {
    if (a.memory != Memory::host) fail(fmt::format("{} must be in host memory (the CPU copy)", name));
  }
  static void require_entries(const EngineArray& a, int64_t needed, const char* name, const char* what) {
    if (a.rows < needed) fail(fmt::format("{} has {} entries, fewer than {} = {}", name, a.rows, what, needed));
  }
  void require_filled_memory(const EngineArray& a, const char* name) const {
    const bool gpu = device_ >= 0;
    if (a.wide) fail(fmt::format("{} must hold int32", name));
    if (gpu && (a.memory != Memory::device || a.device != device_)) {
      fail(fmt::format("{} must be on the builder's GPU {} (it is in {} memory{})", name, device_,
                       memory_name(a.memory), a.memory == Memory::device ? fmt::format(", GPU {}", a.device) : ""));
    }
    if (!gpu && a.memory != Memory::host) fail(fmt::format("{} must be in host memory: the builder fills on the CPU", name));
  }

  void fill() {
#if defined(IDXPLAN_PYTHON_DEVICE)
    if (device_ >= 0) {
      enqueue(g_, plan_, in_, out_, current_stream());
      return;
    }
#endif
    if (device_ >= 0) fail("this idxplan was built without a device part; make the builder with device=\"cpu\"");
    fill_step_buffers(g_, plan_, in_, out_);
  }

#if defined(IDXPLAN_PYTHON_DEVICE)
  // torch's current stream on the builder's GPU: from the exchange API, one
  // C call, where torch has it.
  std::uintptr_t current_stream() const { return python::current_stream(torch_, device_); }
#endif

  // buffer[begin:end] (decode_row_lens[:end] as [end, 1] for kDecodeSeqLens),
  // made once and then handed out again: a view of a fixed buffer is the
  // same view every step.
  const py::object& view(int kind, int64_t begin, int64_t end) {
    const uint64_t key = (static_cast<uint64_t>(kind) << 56) | (static_cast<uint64_t>(begin) << 28) |
                         static_cast<uint64_t>(end);
    auto it = views_.find(key);
    if (it != views_.end()) return it->second;
    if (views_.size() >= (1u << 16)) views_.clear();  // a bound, not a policy: steps repeat their shapes
    const int b = kind == kDecodeSeqLens ? kDecodeRowLens : kind;
    py::object v = buffers_[b][py::slice(py::int_(begin), py::int_(end), py::none())];
    if (kind == kDecodeSeqLens) v = v.attr(names().reshape)(end - begin, 1);
    return views_.emplace(key, std::move(v)).first->second;
  }
  // The view of buffer `b` a launch pointer `p` starts, `count` words long.
  const py::object& view_at(int b, const int32_t* p, int64_t count) {
    const OutputBuffer& base = output(b);
    const int64_t begin = p - base.data;
    return view(b, begin, begin + count);
  }
  // Buffer b's place in the step's outputs (decode_lens is the builder's own).
  OutputBuffer& output(int b) {
    OutputBuffer* fields[kBuffers] = {&out_.context_lens,       &out_.decode_row_lens,
                                      &out_.decode_block_ends,  &out_.decode_block_table,
                                      &out_.prefill_row_ends,   &out_.prefill_block_ends,
                                      &out_.prefill_query_start_loc, &out_.decode_schedule,
                                      &out_.prefill_key_starts, &out_.prefill_key_ends, &decode_lens_};
    return *fields[b];
  }
  // Rows [begin, end) of the engine's table: the table itself when that is
  // all of it. A slice of a torch tensor costs microseconds (2.6 on the
  // H200's host), so the slices are kept and handed out again while the
  // table's memory (its address, row stride and width) stays: a slice of
  // the same memory is the same view. The kept slices keep that memory
  // alive, so a table at another address is never confused with one freed.
  const py::object& table_rows(int64_t begin, int64_t end) {
    if (begin == 0 && end == table_.rows) return table_.obj;
    if (table_.data != table_views_data_ || table_.row_stride != table_views_stride_ ||
        table_.cols != table_views_cols_ || table_views_.size() >= (1u << 16)) {
      table_views_.clear();
      table_views_data_ = table_.data;
      table_views_stride_ = table_.row_stride;
      table_views_cols_ = table_.cols;
    }
    const uint64_t key = (static_cast<uint64_t>(begin) << 32) | static_cast<uint64_t>(end);
    auto it = table_views_.find(key);
    if (it != table_views_.end()) return it->second;
    py::object v = table_.obj[py::slice(py::int_(begin), py::int_(end), py::none())];
    return table_views_.emplace(key, std::move(v)).first->second;
  }

  // An instance of dataclass `cls` without its __init__ (every field is set
  // after), as object.__new__(cls) makes it.
  py::object make(const py::object& cls) const {
    static PyObject* const no_args = PyTuple_New(0);
    PyObject* obj = PyBaseObject_Type.tp_new(reinterpret_cast<PyTypeObject*>(cls.ptr()), no_args, nullptr);
    if (obj == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(obj);
  }
  // obj.name = value, the name interned once (a string literal's address is its key).
  static void set(const py::object& obj, const char* name, py::handle value) {
    static std::unordered_map<const char*, PyObject*>* const interned =
        new std::unordered_map<const char*, PyObject*>();  // outlives the interpreter's teardown
    auto it = interned->find(name);
    if (it == interned->end()) it = interned->emplace(name, intern(name)).first;
    if (PyObject_SetAttr(obj.ptr(), it->second, value.ptr()) != 0) throw py::error_already_set();
  }

  py::object metadata(py::handle cm) {
    const Names& n = names();
    const StepPlan& p = plan_;
    py::object m = make(metadata_);
    set(m, "seq_lens", seq_lens_.obj);
    set(m, "max_seq_len", max_seq_len_ < 0 ? py::int_(p.max_seq_len) : max_seq_len_obj_);
    set(m, "slot_mapping", attr_or_none(cm, n.slot_mapping));
    set(m, "num_decodes", py::int_(p.num_decodes));
    set(m, "num_decode_tokens", py::int_(p.num_decode_tokens));
    set(m, "num_prefills", py::int_(p.num_prefills));
    set(m, "num_prefill_tokens", py::int_(p.num_prefill_tokens));
    set_decode(m);
    set_prefill(m);
    return m;
  }

  void set_decode(const py::object& m) {
    const StepPlan& p = plan_;
    const bool blocks = g_.config().candidate_block_size > 0;
    py::object none = py::none();
    if (p.num_decodes == 0) {
      for (const char* f : {"decode", "decode_row_lens", "decode_block_ends", "decode_native", "decode_schedule",
                            "decode_gather"}) {
        set(m, f, none);
      }
      set(m, "decode_use_gather", py::bool_(false));
      return;
    }
    const DecodeLaunch l = decode_launch(g_, p, in_, out_);
    const int64_t rows = p.decode.num_rows;
    py::object row_lens = view(kDecodeRowLens, 0, rows);
    py::object row_table = none;
    if (rows == 0) {
      row_table = view(kDecodeBlockTable, 0, 0);
    } else if (l.row_block_table != nullptr) {
      row_table = l.row_block_table == in_.block_table
                      ? table_rows(0, rows)
                      : py::object(view(kDecodeBlockTable, 0, rows));
    }
    // The decode launch's schedule, or none.
    py::object schedule = l.schedule != nullptr ? py::object(view_at(kDecodeSchedule, l.schedule,
                                                                     int64_t{kDescriptorWords} * l.num_ctas))
                                                : none;
    // Every request's query length, as the base builder sees the decodes.
    int32_t min_len = 0x7FFFFFFF;
    int32_t max_len = 0;
    for (int32_t r = 0; r < p.num_decodes; ++r) {
      const int32_t q = host_qsl(r + 1) - host_qsl(r);
      min_len = q < min_len ? q : min_len;
      max_len = q > max_len ? q : max_len;
    }
    py::object d = make(decode_);
    set(d, "block_table", row_table);
    set(d, "seq_lens", view(kDecodeSeqLens, 0, rows));
    set(d, "decode_lens", view(kDecodeLens, 0, rows));
    set(d, "requires_padding", py::bool_(false));
    set(d, "schedule_metadata", schedule);
    set(d, "global_seq_lens", none);
    set(d, "per_req_decode_lens", none);
    set(d, "decode_is_uniform", py::bool_(min_len == max_len));
    set(d, "write_max_decode_len", py::int_(max_len));
    set(d, "indices", none);
    set(m, "decode", d);
    set(m, "decode_row_lens", row_lens);
    set(m, "decode_block_ends", blocks ? py::object(view(kDecodeBlockEnds, 0, rows)) : none);
    if (p.decode.native.present()) {
      py::object native = make(native_);
      set(native, "next_n", py::int_(l.next_n));
      set(native, "context_lens", view_at(kContextLens, l.context_lens, l.num_seqs));
      set(native, "block_table", table_rows(0, l.num_seqs));
      set(m, "decode_native", native);
    } else {
      set(m, "decode_native", none);
    }
    set(m, "decode_schedule", schedule);
    set(m, "decode_use_gather", py::bool_(p.decode.use_gather));  // also without rows, as the reference
    set(m, "decode_gather", none);
  }

  void set_prefill(const py::object& m) {
    const StepPlan& p = plan_;
    const bool blocks = g_.config().candidate_block_size > 0;
    const int32_t ratio = g_.config().compress_ratio;
    py::object none = py::none();
    py::list plans(p.prefill.size());
    py::list launches(p.gather_launches.size());
    if (p.num_prefills == 0) {
      set(m, "prefill", none);
      set(m, "prefill_plans", plans);
      set(m, "gather_launches", launches);
      return;
    }
    py::list chunks(p.prefill.size());
    for (std::size_t i = 0; i < p.prefill.size(); ++i) {
      const PrefillPlan& c = p.prefill[i];
      const PrefillLaunch l = prefill_launch(g_, p, i, in_, out_);
      const int64_t rows = l.token_end - l.token_start;
      const int64_t row0 = l.row_ends - out_.prefill_row_ends.data;
      py::object table = table_rows(l.first_request, int64_t{l.first_request} + l.num_reqs);
      int64_t keys = 0;  // the chunk's requests' host compressed contexts
      for (int32_t r = c.first_request; r < c.first_request + c.num_reqs; ++r) keys += host_upper(r) / ratio;
      py::object chunk = make(chunk_);
      set(chunk, "block_table", table);
      set(chunk, "cu_seqlen_ks", view(kKeyStarts, row0, row0 + rows));
      set(chunk, "cu_seqlen_ke", view(kKeyEnds, row0, row0 + rows));
      set(chunk, "cu_seq_lens", none);
      set(chunk, "token_to_seq", none);
      set(chunk, "total_seq_lens", py::int_(keys));
      set(chunk, "token_start", py::int_(l.token_start));
      set(chunk, "token_end", py::int_(l.token_end));
      set(chunk, "num_reqs", py::int_(l.num_reqs));
      set(chunk, "skip_kv_gather", py::bool_(l.token_start > host_qsl(l.first_request)));
      set(chunk, "local_cu_seq_lens", none);
      set(chunk, "local_total_seq_lens", py::int_(keys));
      set(chunk, "max_local_total_seq_lens", py::int_(keys));
      chunks[i] = chunk;

      py::list requests(static_cast<std::size_t>(c.num_pieces));
      const RequestRows* pieces = p.pieces_of(c);
      for (int32_t k = 0; k < c.num_pieces; ++k) {
        requests[static_cast<std::size_t>(k)] =
            py::make_tuple(pieces[k].first_row, pieces[k].end_row, pieces[k].request);
      }
      py::object plan = make(prefill_plan_);
      set(plan, "requests", requests);
      set(plan, "width", py::int_(l.width));
      set(plan, "row_ends", view(kPrefillRowEnds, row0, row0 + rows));
      set(plan, "context_lens", view_at(kContextLens, l.context_lens, l.num_reqs));
      set(plan, "query_start_loc", view_at(kPrefillQueryStartLoc, l.query_start_loc, int64_t{l.num_reqs} + 1));
      set(plan, "first_request", py::int_(l.first_request));
      set(plan, "block_ends", blocks ? py::object(view(kPrefillBlockEnds, row0, row0 + rows)) : none);
      set(plan, "use_gather", py::bool_(l.use_gather));
      plans[i] = plan;
    }
    for (std::size_t i = 0; i < p.gather_launches.size(); ++i) {
      const CandidateLaunch l = candidate_launch(g_, p, i, in_, out_);
      const int64_t row0 = l.row_ends - out_.prefill_row_ends.data;
      py::object launch = make(gather_launch_);
      set(launch, "token_start", py::int_(l.token_start));
      set(launch, "token_end", py::int_(l.token_end));
      set(launch, "block_table", table_rows(l.request, int64_t{l.request} + 1));
      set(launch, "context_len", view_at(kContextLens, l.context_len, 1));
      set(launch, "row_ends", view(kPrefillRowEnds, row0, row0 + l.token_end - l.token_start));
      set(launch, "pool", none);
      launches[i] = launch;
    }
    int32_t longest = 0;
    for (int32_t r = p.num_decodes; r < p.num_reqs; ++r) longest = std::max(longest, host_upper(r));
    py::object prefill = make(prefill_);
    set(prefill, "chunks", chunks);
    set(prefill, "max_prefill_seq_len", py::int_(longest));
    set(m, "prefill", prefill);
    set(m, "prefill_plans", plans);
    set(m, "gather_launches", launches);
  }

  // The host copies' entries (read by build() this step).
  int32_t host_qsl(int64_t i) const { return host_entry(host_qsl_, i); }
  int32_t host_upper(int64_t i) const {
    return upper_is_max_seq_len_ ? static_cast<int32_t>(max_seq_len_) : host_entry(host_upper_, i);
  }
  static int32_t host_entry(const EngineArray& a, int64_t i) {
    return a.wide ? static_cast<int32_t>(static_cast<const int64_t*>(a.data)[i])
                  : static_cast<const int32_t*>(a.data)[i];
  }

  Geometry g_;
  int64_t device_;
  bool row_table_every_step_;
  StepPlan plan_;
  StepOutputs out_;
  OutputBuffer decode_lens_;
  py::object buffers_[kBuffers];
  std::unordered_map<uint64_t, py::object> views_;
  std::unordered_map<uint64_t, py::object> table_views_;  // table_rows' slices, of this memory:
  const void* table_views_data_ = nullptr;
  int64_t table_views_stride_ = 0;
  int64_t table_views_cols_ = 0;
  py::object metadata_, decode_, prefill_, chunk_, prefill_plan_, gather_launch_, native_;
  Torch torch_;
  // This step's arrays.
  EngineArray host_qsl_, host_upper_, qsl_, seq_lens_, table_;
  py::object max_seq_len_obj_;         // common_attn_metadata.max_seq_len, passed through
  int64_t max_seq_len_ = -1;           // its value, -1 when None
  bool upper_is_max_seq_len_ = false;  // no host upper bounds: max_seq_len bounds every request
  StepInputs in_;
  bool building_ = false;  // a build() is running (Entered)
};

}  // namespace

void register_vllm(py::module_& m) {
  py::class_<VllmBuilder>(m, "_VllmBuilder", "idxplan.vllm.MetadataBuilder's core (docs/vllm.md).")
      .def(py::init<const Geometry&, const py::dict&, const py::dict&, int64_t, bool>(), py::arg("geometry"),
           py::arg("buffers"), py::arg("classes"), py::arg("device"), py::arg("row_table_every_step"))
      .def("build", &VllmBuilder::build, py::arg("common_attn_metadata"))
      .def("build_timed", &VllmBuilder::build_timed, py::arg("common_attn_metadata"))
      .def_property_readonly("plan", &VllmBuilder::plan, py::return_value_policy::reference_internal)
#if defined(IDXPLAN_PYTHON_DEVICE)
      .def("launch_empty", &VllmBuilder::launch_empty,
           "One launch of an empty kernel on the stream build() launches on (the benchmarks' floor).")
#endif
      .def_property_readonly("reads_through_exchange_api", &VllmBuilder::reads_through_exchange_api,
                             "Whether torch tensors are read through DLPack's C exchange API (torch 2.10 on).");
}

}  // namespace idxplan::python
