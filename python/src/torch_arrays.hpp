// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// torch tensors read fast, for the cores that take an engine's tensors a
// call (vllm.cpp, aiter.cpp): through torch's DLPack C exchange API where
// torch has it (one C call, no Python object), else through a few of the
// tensor's attributes, and anything that is not a torch tensor through
// arrays.hpp's protocols. torch is never imported here: a core takes it from
// sys.modules once the caller has.

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "arrays.hpp"
#if defined(IDXPLAN_PYTHON_DEVICE)
#include "device.hpp"
#endif

namespace idxplan::python {

// A Python string made once and kept for the process (attribute names).
inline PyObject* intern(const char* s) { return PyUnicode_InternFromString(s); }

// The tensor attributes read where the exchange API does not serve.
struct TensorNames {
  PyObject* dtype = intern("dtype");
  PyObject* shape = intern("shape");
  PyObject* stride = intern("stride");
  PyObject* data_ptr = intern("data_ptr");
  PyObject* is_cuda = intern("is_cuda");
  PyObject* is_cpu = intern("is_cpu");
  PyObject* device = intern("device");
  PyObject* get_device = intern("get_device");
};
inline const TensorNames& tensor_names() {
  static const TensorNames* n = new TensorNames();  // outlives the interpreter's teardown order
  return *n;
}

// An attribute of a tensor; its error, if any, propagates.
inline py::object tensor_attr(py::handle obj, PyObject* name) {
  PyObject* v = PyObject_GetAttr(obj.ptr(), name);
  if (v == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(v);
}

// obj.name(), through vectorcall (no bound method, no argument tuple).
inline py::object call_method(py::handle obj, PyObject* name) {
  PyObject* v = PyObject_CallMethodNoArgs(obj.ptr(), name);
  if (v == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(v);
}

// One of the caller's arrays as read this call.
struct EngineArray {
  py::object obj;
  const void* data = nullptr;
  int64_t rows = 0;        // entries of a 1-D array
  int64_t cols = 0;        // 2-D only
  int64_t row_stride = 0;  // 2-D only, elements
  bool wide = false;       // int64 (the host arrays may be)
  Memory memory = Memory::host;
  int64_t device = -1;
};

// torch's objects the fast paths compare with; empty without torch.
// `exchange`: torch.Tensor's DLPack C exchange API, or null where this torch
// has none (before 2.10).
struct Torch {
  py::object tensor_type, int32, int64, raw_stream;
  py::object exchange_capsule;  // keeps `exchange` alive
  const detail::DLPackExchangeAPI* exchange = nullptr;
};

// torch.Tensor's exchange API, if it has one of DLPack's major version 1
// with the two functions the builder calls.
inline const detail::DLPackExchangeAPI* exchange_api(const py::object& capsule) {
  if (!PyCapsule_IsValid(capsule.ptr(), "dlpack_exchange_api")) return nullptr;
  const auto* api =
      static_cast<const detail::DLPackExchangeAPI*>(PyCapsule_GetPointer(capsule.ptr(), "dlpack_exchange_api"));
  if (api == nullptr || api->header.version.major != 1 || api->dltensor_from_py_object_no_sync == nullptr ||
      api->current_work_stream == nullptr) {
    return nullptr;
  }
  return api;
}

// Reads a torch.Tensor (of that type exactly) through the exchange API: one
// C call, no Python object. False where the tensor is not what the builder
// takes (or one DLPack cannot describe), so that read_engine's accessors
// read it again and name the fault.
inline bool read_exchanged(const detail::DLPackExchangeAPI& api, py::handle obj, int ndim, bool allow_wide,
                    EngineArray& a) {
  detail::DLTensor t{};
  if (api.dltensor_from_py_object_no_sync(obj.ptr(), &t) != 0) {
    PyErr_Clear();
    return false;
  }
  const bool int32 = t.dtype.bits == 32;
  if (t.dtype.code != 0 || t.dtype.lanes != 1 || !(int32 || (allow_wide && t.dtype.bits == 64))) return false;
  if (t.ndim != ndim) return false;
  a.wide = !int32;
  a.rows = t.shape[0];
  if (ndim == 1) {
    if (t.strides != nullptr && a.rows > 1 && t.strides[0] != 1) return false;
  } else {
    a.cols = t.shape[1];
    a.row_stride = t.strides != nullptr ? t.strides[0] : a.cols;
    if (t.strides != nullptr && a.cols > 1 && t.strides[1] != 1) return false;
    if (a.rows > 1 && a.row_stride < a.cols) return false;
  }
  const int32_t type = t.device.device_type;  // 1 CPU, 2 CUDA, 3 CUDA host, 10 ROCm, 11 ROCm host
  if (type == 2 || type == 10) {
    a.memory = Memory::device;
    a.device = t.device.device_id;
  } else if (type != 1 && type != 3 && type != 11) {
    return false;
  }
  a.data = static_cast<const char*>(t.data) + t.byte_offset;
  return true;
}

// Reads `obj` (named `name` in errors): a torch tensor through DLPack's C
// exchange API where torch has it, else through its own accessors (a few
// attribute reads, no DLPack capsule or interface dict a step), anything
// else through arrays.hpp's protocols (int32 only).
inline EngineArray read_engine(const Torch& torch, py::handle obj, const char* name, int ndim, bool allow_wide) {
  EngineArray a;
  a.obj = py::reinterpret_borrow<py::object>(obj);
  // The API is torch.Tensor's: a subclass, which may define its own, takes the accessors.
  if (torch.exchange != nullptr && Py_TYPE(obj.ptr()) == reinterpret_cast<PyTypeObject*>(torch.tensor_type.ptr())) {
    if (read_exchanged(*torch.exchange, obj, ndim, allow_wide, a)) return a;
    a = EngineArray{};
    a.obj = py::reinterpret_borrow<py::object>(obj);
  }
  const bool is_tensor = torch.tensor_type && PyObject_TypeCheck(obj.ptr(), reinterpret_cast<PyTypeObject*>(
                                                                                 torch.tensor_type.ptr()));
  if (!is_tensor) {
    const Array array = read_array(obj, name, ndim);
    a.data = array.data;
    a.memory = array.memory;
    if (ndim == 1) {
      a.rows = array.words;
    } else {
      a.rows = array.rows;
      a.cols = array.cols;
      a.row_stride = array.row_stride;
    }
    return a;
  }
  const TensorNames& n = tensor_names();
  const py::object dtype = tensor_attr(obj, n.dtype);
  if (dtype.is(torch.int64) && allow_wide) {
    a.wide = true;
  } else if (!dtype.is(torch.int32)) {
    fail(fmt::format("{} must hold int32{}, got {}", name, allow_wide ? " or int64" : "",
                     py::str(dtype).cast<std::string>()));
  }
  const py::object shape = tensor_attr(obj, n.shape);
  const py::object strides = call_method(obj, n.stride);
  const auto dims = static_cast<int>(PyTuple_GET_SIZE(shape.ptr()));
  if (dims != ndim) fail(fmt::format("{} must be a {}-D tensor, got {} dimensions", name, ndim, dims));
  const auto dim = [&](const py::object& t, int i) { return PyLong_AsLongLong(PyTuple_GET_ITEM(t.ptr(), i)); };
  a.rows = dim(shape, 0);
  if (ndim == 1) {
    if (a.rows > 1 && dim(strides, 0) != 1) {
      fail(fmt::format("{} must be contiguous, got a stride of {} elements", name, dim(strides, 0)));
    }
  } else {
    a.cols = dim(shape, 1);
    a.row_stride = dim(strides, 0);
    if (a.cols > 1 && dim(strides, 1) != 1) {
      fail(fmt::format("{} must have contiguous rows, got a column stride of {} elements", name, dim(strides, 1)));
    }
    if (a.rows > 1 && a.row_stride < a.cols) {
      fail(fmt::format("{} rows overlap: a row stride of {} elements for {} columns", name, a.row_stride, a.cols));
    }
  }
  if (PyObject_IsTrue(tensor_attr(obj, n.is_cuda).ptr()) == 1) {
    a.memory = Memory::device;
    a.device = PyLong_AsLongLong(call_method(obj, n.get_device).ptr());
  } else if (PyObject_IsTrue(tensor_attr(obj, n.is_cpu).ptr()) != 1) {
    fail(fmt::format("{} is on {}, neither the host nor a GPU", name, py::str(tensor_attr(obj, n.device)).cast<std::string>()));
  }
  a.data = reinterpret_cast<const void*>(PyLong_AsVoidPtr(call_method(obj, n.data_ptr).ptr()));
  return a;
}

// torch's objects from sys.modules, if the caller imported torch; with
// `stream`, its current-stream getter too.
inline Torch load_torch(bool stream) {
  Torch t;
  const py::object modules = py::module_::import("sys").attr("modules");
  if (!modules.contains("torch")) return t;
  const py::object torch = modules["torch"];
  t.tensor_type = torch.attr("Tensor");
  t.int32 = torch.attr("int32");
  t.int64 = torch.attr("int64");
  // A CPU-only torch (Debian's) has no CUDA stream getter: its tensors are
  // all host ones, which take the CPU fills.
  const py::object c = torch.attr("_C");
  if (stream && py::hasattr(c, "_cuda_getCurrentRawStream")) t.raw_stream = c.attr("_cuda_getCurrentRawStream");
  if (py::hasattr(t.tensor_type, "__dlpack_c_exchange_api__")) {
    t.exchange_capsule = t.tensor_type.attr("__dlpack_c_exchange_api__");
    t.exchange = exchange_api(t.exchange_capsule);
  }
  return t;
}

#if defined(IDXPLAN_PYTHON_DEVICE)
// torch's current stream on GPU `device`: from the exchange API, one C
// call, where torch has it.
inline std::uintptr_t current_stream(const Torch& torch, int64_t device) {
  if (torch.exchange != nullptr) {
    const int32_t type = std::string_view(device_platform()) == "hip" ? 10 : 2;  // kDLROCM, kDLCUDA
    void* stream = nullptr;
    if (torch.exchange->current_work_stream(type, static_cast<int32_t>(device), &stream) != 0) {
      throw py::error_already_set();
    }
    return reinterpret_cast<std::uintptr_t>(stream);
  }
  if (!torch.raw_stream) fail(fmt::format("this torch has no CUDA streams, and a tensor is on GPU {}", device));
  const py::object index = py::int_(device);
  PyObject* handle = PyObject_CallOneArg(torch.raw_stream.ptr(), index.ptr());
  if (handle == nullptr) throw py::error_already_set();
  const auto stream = reinterpret_cast<std::uintptr_t>(PyLong_AsVoidPtr(handle));
  Py_DECREF(handle);
  if (PyErr_Occurred() != nullptr) throw py::error_already_set();
  return stream;
}
#endif

}  // namespace idxplan::python
