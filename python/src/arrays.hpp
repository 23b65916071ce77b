// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The caller's arrays as idxplan reads and writes them: int32, contiguous
// rows, on the host (the buffer protocol: numpy, memoryview) or on a GPU
// (__cuda_array_interface__: torch, CuPy, Numba; or DLPack's __dlpack__:
// torch, CuPy, JAX). Nothing here needs torch: each array is read through
// the protocol it offers and kept alive, never copied.

#include <pybind11/pybind11.h>

#include <cstdint>
#include <string>

#include <fmt/format.h>

namespace idxplan::python {

namespace py = pybind11;

// Where an array's memory is.
enum class Memory { host, device };

inline const char* memory_name(Memory m) { return m == Memory::host ? "host" : "device"; }

// One int32 array of the caller's: 1-D, or 2-D with contiguous rows.
struct Array {
  py::object owner;       // the caller's object, kept alive while idxplan points into it
  py::object keep;        // what else must live as long: a DLPack capsule
  int32_t* data = nullptr;
  int64_t words = 0;      // elements: rows * cols for 2-D
  int64_t rows = 0;       // 2-D only
  int64_t cols = 0;
  int64_t row_stride = 0;  // elements between rows, 2-D only
  int32_t ndim = 0;
  Memory memory = Memory::host;
};

// A ValueError with `message`: how every bad argument is refused.
[[noreturn]] inline void fail(const std::string& message) { throw py::value_error(message); }

// Whether a buffer-protocol or numpy byte-order mark names the other byte
// order than this machine's (whose values idxplan would misread).
inline bool foreign_byte_order(char mark) {
  const uint16_t probe = 1;
  const bool little = *reinterpret_cast<const unsigned char*>(&probe) == 1;
  return little ? (mark == '>' || mark == '!') : mark == '<';
}

namespace detail {

// DLPack's ABI (github.com/dmlc/dlpack), the part idxplan reads: a tensor's
// pointer, device, type, shape and strides.
struct DLDevice {
  int32_t device_type;  // 1 CPU, 2 CUDA, 3 CUDA host, 10 ROCm, 11 ROCm host
  int32_t device_id;
};
struct DLDataType {
  uint8_t code;  // 0 int, 1 uint, 2 float
  uint8_t bits;
  uint16_t lanes;
};
struct DLTensor {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;  // in elements; null for compact row-major
  uint64_t byte_offset;
};
struct DLManagedTensor {
  DLTensor dl_tensor;
  void* manager_ctx;
  void (*deleter)(DLManagedTensor*);
};
struct DLPackVersion {
  uint32_t major;
  uint32_t minor;
};
struct DLManagedTensorVersioned {
  DLPackVersion version;
  void* manager_ctx;
  void (*deleter)(DLManagedTensorVersioned*);
  uint64_t flags;
  DLTensor dl_tensor;
};

// DLPack 1.3's C exchange API, which a framework sets on its tensor type as
// the capsule __dlpack_c_exchange_api__ ("dlpack_exchange_api"; torch from
// 2.10): C functions that describe one of its tensors in a caller's
// DLTensor, making no Python object, and that give its current stream. The
// three functions idxplan does not call are declared as plain pointers.
struct DLPackExchangeAPIHeader {
  DLPackVersion version;
  DLPackExchangeAPIHeader* prev_api;
};
struct DLPackExchangeAPI {
  DLPackExchangeAPIHeader header;
  void* managed_tensor_allocator;
  void* managed_tensor_from_py_object_no_sync;
  void* managed_tensor_to_py_object_no_sync;
  int (*dltensor_from_py_object_no_sync)(void* py_object, DLTensor* out);  // 0, or -1 with a Python error set
  int (*current_work_stream)(int32_t device_type, int32_t device_id, void** out_stream);
};

// Checks the rank and row layout shared by every protocol and fills `a`.
// `shape` and `strides` are in elements; `strides` may be null (row-major).
inline void set_layout(Array& a, const char* name, int ndim_wanted, int32_t ndim, const int64_t* shape,
                       const int64_t* strides) {
  if (ndim != ndim_wanted) {
    fail(fmt::format("{} must be a {}-D array, got {} dimensions", name, ndim_wanted, ndim));
  }
  a.ndim = ndim;
  if (ndim == 1) {
    if (strides != nullptr && shape[0] > 1 && strides[0] != 1) {
      fail(fmt::format("{} must be contiguous, got a stride of {} elements", name, strides[0]));
    }
    a.words = shape[0];
    return;
  }
  a.rows = shape[0];
  a.cols = shape[1];
  const int64_t inner = strides != nullptr ? strides[1] : 1;
  a.row_stride = strides != nullptr ? strides[0] : shape[1];
  if (a.cols > 1 && inner != 1) {
    fail(fmt::format("{} must have contiguous rows, got a column stride of {} elements", name, inner));
  }
  if (a.rows > 1 && a.row_stride < a.cols) {
    fail(fmt::format("{} rows overlap: a row stride of {} elements for {} columns", name,
                     a.row_stride, a.cols));
  }
  a.words = a.rows == 0 ? 0 : (a.rows - 1) * a.row_stride + a.cols;
}

inline Array from_buffer(py::handle obj, const char* name, int ndim) {
  const py::buffer buffer = py::reinterpret_borrow<py::buffer>(obj);
  const py::buffer_info info = buffer.request(/*writable=*/false);
  // A signed 4-byte integer, with or without a byte-order prefix.
  const char kind = info.format.empty() ? '?' : info.format.back();
  const bool int32 = info.itemsize == 4 && (kind == 'i' || kind == 'l');
  if (!int32) {
    fail(fmt::format("{} must hold int32, got items of format '{}' and {} bytes", name, info.format,
                     info.itemsize));
  }
  if (info.format.size() > 1 && foreign_byte_order(info.format.front())) {
    fail(fmt::format("{} holds int32 in the other byte order (format '{}'); pass a native-order "
                     "array (numpy: .astype('=i4'))",
                     name, info.format));
  }
  Array a;
  a.owner = py::reinterpret_borrow<py::object>(obj);
  a.data = static_cast<int32_t*>(info.ptr);
  a.memory = Memory::host;
  int64_t shape[2] = {0, 0};
  int64_t strides[2] = {0, 0};
  for (std::size_t d = 0; d < info.shape.size() && d < 2; ++d) {
    shape[d] = info.shape[d];
    strides[d] = info.strides[d] / 4;
    if (info.strides[d] % 4 != 0) fail(fmt::format("{} has a stride of {} bytes", name, info.strides[d]));
  }
  set_layout(a, name, ndim, static_cast<int32_t>(info.ndim), shape, strides);
  return a;
}

inline Array from_cuda_array_interface(py::handle obj, const char* name, int ndim) {
  const py::dict cai = obj.attr("__cuda_array_interface__").cast<py::dict>();
  const std::string typestr = cai["typestr"].cast<std::string>();
  if (typestr != "<i4" && typestr != "|i4") {
    fail(fmt::format("{} must hold int32 ('<i4'), got '{}'", name, typestr));
  }
  const py::tuple shape_tuple = cai["shape"].cast<py::tuple>();
  const int32_t dims = static_cast<int32_t>(shape_tuple.size());
  int64_t shape[2] = {0, 0};
  int64_t strides[2] = {0, 0};
  const bool has_strides = cai.contains("strides") && !cai["strides"].is_none();
  for (int32_t d = 0; d < dims && d < 2; ++d) {
    shape[d] = shape_tuple[static_cast<std::size_t>(d)].cast<int64_t>();
    if (has_strides) {
      const int64_t bytes = cai["strides"].cast<py::tuple>()[static_cast<std::size_t>(d)].cast<int64_t>();
      if (bytes % 4 != 0) fail(fmt::format("{} has a stride of {} bytes", name, bytes));
      strides[d] = bytes / 4;
    }
  }
  Array a;
  a.owner = py::reinterpret_borrow<py::object>(obj);
  a.data = reinterpret_cast<int32_t*>(cai["data"].cast<py::tuple>()[0].cast<std::uintptr_t>());
  a.memory = Memory::device;
  set_layout(a, name, ndim, dims, shape, has_strides ? strides : nullptr);
  return a;
}

inline Array from_dlpack(py::handle obj, const char* name, int ndim) {
  // stream=-1: the caller orders its streams; idxplan only takes the pointer.
  py::object capsule;
  try {
    capsule = obj.attr("__dlpack__")(py::arg("stream") = -1);
  } catch (const py::error_already_set&) {
    capsule = obj.attr("__dlpack__")();
  }
  const DLTensor* t = nullptr;
  if (PyCapsule_IsValid(capsule.ptr(), "dltensor")) {
    t = &static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor"))->dl_tensor;
  } else if (PyCapsule_IsValid(capsule.ptr(), "dltensor_versioned")) {
    t = &static_cast<DLManagedTensorVersioned*>(PyCapsule_GetPointer(capsule.ptr(), "dltensor_versioned"))
             ->dl_tensor;
  } else {
    fail(fmt::format("{}.__dlpack__() did not return a DLPack capsule", name));
  }
  if (t->dtype.code != 0 || t->dtype.bits != 32 || t->dtype.lanes != 1) {
    fail(fmt::format("{} must hold int32, got DLPack type code {} of {} bits", name, t->dtype.code,
                     t->dtype.bits));
  }
  Array a;
  a.owner = py::reinterpret_borrow<py::object>(obj);
  a.keep = capsule;  // its destructor frees the managed tensor once we are done
  a.data = reinterpret_cast<int32_t*>(static_cast<char*>(t->data) + t->byte_offset);
  // 2 CUDA and 10 ROCm are a GPU's memory; 1 CPU, 3 and 11 (pinned) and 13
  // (CUDA managed) the host reads. Any other device's is neither.
  const int32_t type = t->device.device_type;
  if (type == 2 || type == 10) {
    a.memory = Memory::device;
  } else if (type == 1 || type == 3 || type == 11 || type == 13) {
    a.memory = Memory::host;
  } else {
    fail(fmt::format("{} is in DLPack device type {}'s memory, neither the host's nor a CUDA or ROCm GPU's", name,
                     type));
  }
  set_layout(a, name, ndim, t->ndim, t->shape, t->strides);
  return a;
}

}  // namespace detail

// Reads `obj` as an int32 array of `ndim` dimensions, through the first
// protocol it offers of: __cuda_array_interface__, the buffer protocol,
// __dlpack__. Raises ValueError naming `name` for anything else.
inline Array read_array(py::handle obj, const char* name, int ndim = 1) {
  if (obj.is_none()) fail(fmt::format("{} is None", name));
  if (py::hasattr(obj, "__cuda_array_interface__")) return detail::from_cuda_array_interface(obj, name, ndim);
  if (PyObject_CheckBuffer(obj.ptr()) != 0) return detail::from_buffer(obj, name, ndim);
  if (py::hasattr(obj, "__dlpack__")) return detail::from_dlpack(obj, name, ndim);
  fail(fmt::format("{} must be an int32 array (the buffer protocol, __cuda_array_interface__ "
                           "or __dlpack__), got {}",
                           name, py::str(py::type::handle_of(obj)).cast<std::string>()));
}

}  // namespace idxplan::python
