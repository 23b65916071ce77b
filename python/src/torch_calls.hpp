// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// What the drop-ins of other libraries' functions (aiter.cpp, deepgemm.cpp)
// share: their integer arguments, the int32 tensors they make where the
// caller's lengths live, those tensors' words, and the stream a launch runs
// on (torch's current one, on the lengths' GPU).

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include <fmt/format.h>

#include "arrays.hpp"
#include "idxplan/plan/span.hpp"
#include "torch_arrays.hpp"
#if defined(IDXPLAN_PYTHON_DEVICE)
#include "device.hpp"
#endif

namespace idxplan::python {

// An integer argument: an int or anything with an integer __index__, never a
// bool or a float.
inline int64_t as_index(py::handle v, const char* function, const char* name) {
  const auto refuse = [&] {
    fail(fmt::format("{}: {} must be an integer, got {}", function, name, py::repr(v).cast<std::string>()));
  };
  if (PyBool_Check(v.ptr()) || PyIndex_Check(v.ptr()) == 0) refuse();
  PyObject* index = PyNumber_Index(v.ptr());
  if (index == nullptr) {
    PyErr_Clear();
    refuse();
  }
  int overflow = 0;
  const long long value = PyLong_AsLongLongAndOverflow(index, &overflow);
  Py_DECREF(index);
  if (value == -1 && PyErr_Occurred() != nullptr) throw py::error_already_set();
  if (overflow != 0) fail(fmt::format("{}: {} does not fit int64", function, name));
  return value;
}

// The base of a drop-in's core: torch, read from sys.modules when the core
// is made (the caller imports it first).
class TorchCalls {
 protected:
  explicit TorchCalls(const char* module) : torch_(load_torch(true)) {
    if (!torch_.tensor_type) fail(fmt::format("{} takes torch tensors: import torch before calling it", module));
  }

  // Refuses `obj`, argument `name` of `function`, unless it is a torch tensor.
  void require_tensor(py::handle obj, const char* function, const char* name) const {
    if (PyObject_TypeCheck(obj.ptr(), reinterpret_cast<PyTypeObject*>(torch_.tensor_type.ptr())) == 0) {
      fail(fmt::format("{}: {} must be a torch tensor, got {}", function, name, py::repr(obj).cast<std::string>()));
    }
  }

  // A new int32 tensor of `shape` where `like` (int32) lives: like.new_empty(shape).
  static py::object new_empty(const EngineArray& like, const py::tuple& shape) {
    static PyObject* const name = intern("new_empty");
    PyObject* t = PyObject_CallMethodOneArg(like.obj.ptr(), name, shape.ptr());
    if (t == nullptr) throw py::error_already_set();
    return py::reinterpret_steal<py::object>(t);
  }

  // The words of a tensor this core made (int32, contiguous).
  int32_t* pointer(const py::object& tensor) const {
    if (torch_.exchange != nullptr) {
      detail::DLTensor t{};
      if (torch_.exchange->dltensor_from_py_object_no_sync(tensor.ptr(), &t) != 0) throw py::error_already_set();
      return reinterpret_cast<int32_t*>(static_cast<char*>(t.data) + t.byte_offset);
    }
    void* data = PyLong_AsVoidPtr(call_method(tensor, tensor_names().data_ptr).ptr());
    if (data == nullptr && PyErr_Occurred() != nullptr) throw py::error_already_set();
    return static_cast<int32_t*>(data);
  }

  static void same_device(const EngineArray& a, const EngineArray& b, const char* function, const char* a_name,
                          const char* b_name) {
    if (a.memory != b.memory || a.device != b.device) {
      fail(fmt::format("{}: {} is in {} memory{} and {} in {}{}", function, a_name, memory_name(a.memory),
                       a.memory == Memory::device ? fmt::format(" (GPU {})", a.device) : "", b_name,
                       memory_name(b.memory), b.memory == Memory::device ? fmt::format(" (GPU {})", b.device) : ""));
    }
  }

  // A host array's words: a 1-D one's entries, a contiguous 2-D one's rows
  // by columns.
  static Span<const int32_t> host_span(const EngineArray& a) {
    const int64_t words = a.cols > 0 ? a.rows * a.cols : a.rows;
    return Span<const int32_t>(static_cast<const int32_t*>(a.data), static_cast<std::size_t>(words));
  }

#if defined(IDXPLAN_PYTHON_DEVICE)
  // torch's current stream on the lengths' GPU, which must be the current one.
  std::uintptr_t launch_stream(const EngineArray& a, const char* function) const {
    const int current = python::current_device();
    if (a.device != current) {
      fail(fmt::format("{}: the tensors are on GPU {}, and the current GPU is {}; launch with torch.cuda.device({})",
                       function, a.device, current, a.device));
    }
    return current_stream(torch_, a.device);
  }
#else
  [[noreturn]] static void no_device_part(const char* function) {
    fail(fmt::format("{}: this idxplan was built without a device part (pip install with --config-settings "
                     "device=cuda or device=hip); CPU tensors take the CPU fill",
                     function));
  }
#endif

  Torch torch_;
};

}  // namespace idxplan::python
