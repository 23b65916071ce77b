// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The one AMD/NVIDIA seam for the GPU runtime: HIP under __HIP_PLATFORM_AMD__
// (hipcc), the CUDA runtime under __CUDACC__ (nvcc). Debian's HIP headers for
// NVIDIA do not build against CUDA 13, so on NVIDIA the library calls the
// CUDA runtime directly, through these few wrappers. A failed call throws
// DeviceError with the runtime's error name and string.

// hipcc defines __HIP_PLATFORM_AMD__ through hip_runtime.h, which is why a
// HIP compile (__HIP__) also takes this branch; scan.hpp, included after
// this file, then sees the macro.
//
// IDXPLAN_CPU_DEVICE, which only the tests' CPU builds define, puts the
// tests' CPU stand-in for a GPU (tests/cpu_device) in the runtime's place:
// the kernel's own code then runs on the CPU, under the sanitizers, as
// CUDA's (or, with __HIP_PLATFORM_AMD__, HIP's and rocPRIM's) names there say.
#if defined(IDXPLAN_CPU_DEVICE)
#include <cpu_device/runtime.hpp>
#elif defined(__HIP_PLATFORM_AMD__) || defined(__HIP__)
#include <hip/hip_runtime.h>
#elif defined(__CUDACC__)
#include <cuda_runtime.h>
#else
#error "idxplan/device needs hipcc (AMD) or nvcc (NVIDIA)"
#endif

#include <cstddef>
#include <cstdint>

#include <fmt/format.h>

#include "idxplan/error.hpp"

// A kernel's launch bounds: at most `threads` a block and, on NVIDIA, at
// least `cuda_min_blocks` blocks an SM (0: no minimum), which bounds
// ptxas's registers a thread. HIP's second argument means waves an
// execution unit instead, so AMD takes the first alone.
#if defined(__HIP_PLATFORM_AMD__)
#define IDXPLAN_LAUNCH_BOUNDS(threads, cuda_min_blocks) __launch_bounds__(threads)
#else
#define IDXPLAN_LAUNCH_BOUNDS(threads, cuda_min_blocks) __launch_bounds__(threads, cuda_min_blocks)
#endif

// kernel<<<blocks, threads, shared, stream>>>(args...), spelled
// IDXPLAN_KERNEL_LAUNCH(kernel, blocks, threads, shared, stream)(args...) so
// that the tests' CPU stand-in runs it too.
#if defined(IDXPLAN_CPU_DEVICE)
#define IDXPLAN_KERNEL_LAUNCH(kernel, blocks, threads, shared, stream) \
  ::cpu_device::launch(kernel, blocks, threads, shared, stream)
#else
#define IDXPLAN_KERNEL_LAUNCH(kernel, blocks, threads, shared, stream) kernel<<<blocks, threads, shared, stream>>>
#endif

namespace idxplan::device {

// The launch's dynamic shared memory, as words.
#if defined(IDXPLAN_CPU_DEVICE)
inline int32_t* dynamic_shared_words() { return static_cast<int32_t*>(cpu_device::dynamic_shared()); }
#else
// (An extern declaration names a variable of the namespace, hence its long name.)
__device__ __forceinline__ int32_t* dynamic_shared_words() {
  extern __shared__ int32_t dynamic_shared_memory[];
  return dynamic_shared_memory;
}
#endif

// Whether the blocks' schedule reads a thread's lengths four a load, at 16
// and 32 units a thread (prepare_step.hpp), which was measured on the H200
// only. On AMD it took prepare_step_kernel<16> from 76 to 84 VGPRs and
// <32> from 132 to 164-176 (a wave a SIMD fewer on gfx942 and gfx950, and
// on gfx940), for a gain no AMD GPU here can measure: AMD reads them one a
// load until one does.
#if defined(__HIP_PLATFORM_AMD__)
inline constexpr bool kFourLengthsALoad = false;
#else
inline constexpr bool kFourLengthsALoad = true;
#endif

// Whether the warps' schedule's idle warps fetch the kernel arguments that
// its working warps read late (prepare_step.hpp). NVIDIA reads a kernel's
// arguments through its constant cache, where a miss stalls the warp that
// reads; AMD loads them into scalar registers, most at the kernel's start.
#if defined(__HIP_PLATFORM_AMD__)
inline constexpr bool kIdleWarpsFetchArguments = false;
#else
inline constexpr bool kIdleWarpsFetchArguments = true;
#endif

#if defined(__HIP_PLATFORM_AMD__)
using Stream = hipStream_t;
using RuntimeError = hipError_t;
inline constexpr RuntimeError kSuccess = hipSuccess;
namespace rt {
inline const char* error_name(RuntimeError e) { return hipGetErrorName(e); }
inline const char* error_string(RuntimeError e) { return hipGetErrorString(e); }
inline RuntimeError malloc(void** p, std::size_t bytes) { return hipMalloc(p, bytes); }
inline RuntimeError free(void* p) { return hipFree(p); }
inline RuntimeError memset_async(void* p, int value, std::size_t bytes, Stream s) {
  return hipMemsetAsync(p, value, bytes, s);
}
inline RuntimeError last_error() { return hipGetLastError(); }
inline RuntimeError device_count(int* n) { return hipGetDeviceCount(n); }
inline RuntimeError get_device(int* d) { return hipGetDevice(d); }
inline RuntimeError compute_units(int* n, int device) {
  return hipDeviceGetAttribute(n, hipDeviceAttributeMultiprocessorCount, device);
}
inline RuntimeError memcpy_to_device(void* dst, const void* src, std::size_t bytes) {
  return hipMemcpy(dst, src, bytes, hipMemcpyHostToDevice);
}
inline RuntimeError memcpy_to_host(void* dst, const void* src, std::size_t bytes) {
  return hipMemcpy(dst, src, bytes, hipMemcpyDeviceToHost);
}
inline RuntimeError synchronize() { return hipDeviceSynchronize(); }
// Streams, events and graphs: what the tests and benchmarks drive the kernel with.
using Event = hipEvent_t;
using Graph = hipGraph_t;
using GraphExec = hipGraphExec_t;
inline RuntimeError stream_create(Stream* s) { return hipStreamCreateWithFlags(s, hipStreamNonBlocking); }
inline RuntimeError stream_destroy(Stream s) { return hipStreamDestroy(s); }
inline RuntimeError stream_synchronize(Stream s) { return hipStreamSynchronize(s); }
inline RuntimeError event_create(Event* e) { return hipEventCreate(e); }
inline RuntimeError event_destroy(Event e) { return hipEventDestroy(e); }
inline RuntimeError event_record(Event e, Stream s) { return hipEventRecord(e, s); }
inline RuntimeError event_elapsed_ms(float* ms, Event a, Event b) { return hipEventElapsedTime(ms, a, b); }
inline RuntimeError begin_capture(Stream s) { return hipStreamBeginCapture(s, hipStreamCaptureModeThreadLocal); }
inline RuntimeError end_capture(Stream s, Graph* g) { return hipStreamEndCapture(s, g); }
inline RuntimeError graph_instantiate(GraphExec* e, Graph g) { return hipGraphInstantiate(e, g, nullptr, nullptr, 0); }
inline RuntimeError graph_launch(GraphExec e, Stream s) { return hipGraphLaunch(e, s); }
inline RuntimeError graph_destroy(Graph g) { return hipGraphDestroy(g); }
inline RuntimeError graph_exec_destroy(GraphExec e) { return hipGraphExecDestroy(e); }
}  // namespace rt
#else
using Stream = cudaStream_t;
using RuntimeError = cudaError_t;
inline constexpr RuntimeError kSuccess = cudaSuccess;
namespace rt {
inline const char* error_name(RuntimeError e) { return cudaGetErrorName(e); }
inline const char* error_string(RuntimeError e) { return cudaGetErrorString(e); }
inline RuntimeError malloc(void** p, std::size_t bytes) { return cudaMalloc(p, bytes); }
inline RuntimeError free(void* p) { return cudaFree(p); }
inline RuntimeError memset_async(void* p, int value, std::size_t bytes, Stream s) {
  return cudaMemsetAsync(p, value, bytes, s);
}
inline RuntimeError last_error() { return cudaGetLastError(); }
inline RuntimeError device_count(int* n) { return cudaGetDeviceCount(n); }
inline RuntimeError get_device(int* d) { return cudaGetDevice(d); }
inline RuntimeError compute_units(int* n, int device) {
  return cudaDeviceGetAttribute(n, cudaDevAttrMultiProcessorCount, device);
}
inline RuntimeError memcpy_to_device(void* dst, const void* src, std::size_t bytes) {
  return cudaMemcpy(dst, src, bytes, cudaMemcpyHostToDevice);
}
inline RuntimeError memcpy_to_host(void* dst, const void* src, std::size_t bytes) {
  return cudaMemcpy(dst, src, bytes, cudaMemcpyDeviceToHost);
}
inline RuntimeError synchronize() { return cudaDeviceSynchronize(); }
using Event = cudaEvent_t;
using Graph = cudaGraph_t;
using GraphExec = cudaGraphExec_t;
inline RuntimeError stream_create(Stream* s) { return cudaStreamCreateWithFlags(s, cudaStreamNonBlocking); }
inline RuntimeError stream_destroy(Stream s) { return cudaStreamDestroy(s); }
inline RuntimeError stream_synchronize(Stream s) { return cudaStreamSynchronize(s); }
inline RuntimeError event_create(Event* e) { return cudaEventCreate(e); }
inline RuntimeError event_destroy(Event e) { return cudaEventDestroy(e); }
inline RuntimeError event_record(Event e, Stream s) { return cudaEventRecord(e, s); }
inline RuntimeError event_elapsed_ms(float* ms, Event a, Event b) { return cudaEventElapsedTime(ms, a, b); }
inline RuntimeError begin_capture(Stream s) { return cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal); }
inline RuntimeError end_capture(Stream s, Graph* g) { return cudaStreamEndCapture(s, g); }
inline RuntimeError graph_instantiate(GraphExec* e, Graph g) { return cudaGraphInstantiate(e, g, 0); }
inline RuntimeError graph_launch(GraphExec e, Stream s) { return cudaGraphLaunch(e, s); }
inline RuntimeError graph_destroy(Graph g) { return cudaGraphDestroy(g); }
inline RuntimeError graph_exec_destroy(GraphExec e) { return cudaGraphExecDestroy(e); }
}  // namespace rt
#endif

// Throws DeviceError for a failed runtime call, naming the call.
inline void check(RuntimeError e, const char* what) {
  if (e != kSuccess) {
    throw DeviceError(fmt::format("{} failed: {} ({})", what, rt::error_name(e), rt::error_string(e)));
  }
}

// GPUs the runtime sees; 0 when there is none or no driver (no throw).
inline int device_count() {
  int n = 0;
  if (rt::device_count(&n) != kSuccess) {
    (void)rt::last_error();  // clear the sticky "no device" error
    return 0;
  }
  return n;
}

// The current device's compute units (SMs on NVIDIA): IndexerConfig's
// num_compute_units for the GPU the engine runs on.
inline int32_t query_compute_units() {
  int device = 0;
  check(rt::get_device(&device), "get_device");
  int n = 0;
  check(rt::compute_units(&n, device), "device attribute: compute units");
  return n;
}

// A device allocation of `count` T, freed on destruction; move-only.
template <class T>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(std::size_t count) : size_(count) {
    if (count > 0) {
      void* p = nullptr;
      check(rt::malloc(&p, count * sizeof(T)), "malloc");
      data_ = static_cast<T*>(p);
    }
  }
  DeviceArray(DeviceArray&& other) noexcept : data_(other.data_), size_(other.size_) {
    other.data_ = nullptr;
    other.size_ = 0;
  }
  DeviceArray& operator=(DeviceArray&& other) noexcept {
    if (this != &other) {
      reset();
      data_ = other.data_;
      size_ = other.size_;
      other.data_ = nullptr;
      other.size_ = 0;
    }
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() { reset(); }

  T* data() const { return data_; }
  std::size_t size() const { return size_; }

 private:
  void reset() {
    if (data_ != nullptr) (void)rt::free(data_);  // a destructor must not throw
    data_ = nullptr;
    size_ = 0;
  }
  T* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace idxplan::device
