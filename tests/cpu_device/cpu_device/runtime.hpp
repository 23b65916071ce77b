// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The GPU names idxplan's kernels and GPU tests use, on the CPU
// (threads.hpp): the CUDA runtime's, CUDA's intrinsics and CUB's scans and
// reductions, or, where __HIP_PLATFORM_AMD__ is defined, HIP's, rocPRIM's
// and 64-lane waves. idxplan/device/runtime.hpp includes this header in
// place of the GPU runtime when IDXPLAN_CPU_DEVICE is defined, which only
// the tests' CPU builds do (tests/cpu_device/CMakeLists.txt).
//
// A launch runs at once, in full; a stream is a name, an event a reading of
// the host clock; a captured graph keeps its launches and memsets and runs
// them again on each launch of it. Device memory is the host's heap.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "cpu_device/threads.hpp"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static  // the block's: blocks run one at a time (threads.hpp)

#define threadIdx (::cpu_device::Machine::get().thread_index())
#define blockIdx (::cpu_device::Machine::get().block_index())
#define blockDim (::cpu_device::Machine::get().block_dim())
#define gridDim (::cpu_device::Machine::get().grid_dim())

struct alignas(16) int4 {
  int x, y, z, w;
};
inline int4 make_int4(int x, int y, int z, int w) { return int4{x, y, z, w}; }

inline void __syncthreads() { cpu_device::Machine::get().block_sync(); }
inline int __clz(int v) { return v == 0 ? 32 : __builtin_clz(static_cast<unsigned>(v)); }
inline int __ffs(int v) { return __builtin_ffs(v); }
inline int __popc(unsigned v) { return __builtin_popcount(v); }
// The GPU's cycle counter: the host clock's nanoseconds.
inline long long clock64() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

namespace cpu_device {

#if defined(__HIP_PLATFORM_AMD__)
inline constexpr int kWarpSize = 64;  // gfx9's waves
#else
inline constexpr int kWarpSize = 32;
#endif

// The bytes a launch asked for past its static shared memory.
inline void* dynamic_shared() { return Machine::get().dynamic_shared(); }

// A stream, while it captures, keeps its work for the graph.
struct StreamState {
  bool capturing = false;
  std::vector<std::function<void()>> captured;
};
using Stream = StreamState*;

inline void submit(Stream s, std::function<void()> work) {
  if (s != nullptr && s->capturing) {
    s->captured.push_back(std::move(work));
    return;
  }
  work();
}

// kernel<<<blocks, threads, shared, stream>>>(args...), as
// launch(kernel, blocks, threads, shared, stream)(args...).
template <class Kernel>
struct Launch {
  Kernel kernel;
  unsigned blocks;
  unsigned threads;
  std::size_t shared;
  Stream stream;

  template <class... Args>
  void operator()(const Args&... args) const {
    const Kernel k = kernel;
    const unsigned b = blocks, t = threads;
    const std::size_t bytes = shared;
    submit(stream, [k, b, t, bytes, args...] {
      const std::function<void()> body = [&] { k(args...); };
      Machine::get().run(b, t, kWarpSize, bytes, body);
    });
  }
};
template <class Kernel, class Blocks, class Threads>
Launch<Kernel> launch(Kernel kernel, Blocks blocks, Threads threads, std::size_t shared, Stream stream) {
  return Launch<Kernel>{kernel, static_cast<unsigned>(blocks), static_cast<unsigned>(threads), shared, stream};
}

struct Event {
  std::chrono::steady_clock::time_point at;
};
struct Graph {
  std::vector<std::function<void()>> work;
};

// The runtime's answers, named as the platform's runtime names them.
enum Error : int { kSuccess = 0, kInvalidValue = 1, kOutOfMemory = 2 };
#if defined(__HIP_PLATFORM_AMD__)
inline const char* error_name(Error e) {
  return e == kSuccess ? "hipSuccess" : e == kInvalidValue ? "hipErrorInvalidValue" : "hipErrorOutOfMemory";
}
#else
inline const char* error_name(Error e) {
  return e == kSuccess ? "cudaSuccess" : e == kInvalidValue ? "cudaErrorInvalidValue" : "cudaErrorMemoryAllocation";
}
#endif
inline const char* error_string(Error e) {
  return e == kSuccess ? "no error" : e == kInvalidValue ? "invalid argument" : "out of memory";
}

// The one device attribute asked for, and its value: compute units, 2
// unless CPU_DEVICE_COMPUTE_UNITS says, so that a launch's blocks stride
// over their items as a big step's do on a GPU.
inline constexpr int kComputeUnitsAttribute = 16;
inline int compute_units() {
  const char* v = std::getenv("CPU_DEVICE_COMPUTE_UNITS");
  return v != nullptr ? std::max(1, std::atoi(v)) : 2;
}

// Device memory: exactly `bytes`, 256-byte aligned as the GPU runtimes'
// are, so ASan sees a word past them. More than a GPU holds (1 TiB) fails as
// on a GPU, rather than as the sanitizer's allocator does (it stops).
inline Error allocate(void** p, std::size_t bytes) {
  *p = nullptr;
  if (bytes > (std::size_t{1} << 40)) return kOutOfMemory;
  return posix_memalign(p, 256, bytes > 0 ? bytes : 1) == 0 ? kSuccess : kOutOfMemory;
}

}  // namespace cpu_device

// HIP's names (with rocPRIM's below) or CUDA's: the same, but for the prefix.
#if defined(__HIP_PLATFORM_AMD__)
#define CPU_DEVICE_API(name) hip##name
#else
#define CPU_DEVICE_API(name) cuda##name
#endif
using CPU_DEVICE_API(Error_t) = cpu_device::Error;
inline constexpr cpu_device::Error CPU_DEVICE_API(Success) = cpu_device::kSuccess;
using CPU_DEVICE_API(Stream_t) = cpu_device::Stream;
using CPU_DEVICE_API(Event_t) = cpu_device::Event*;
using CPU_DEVICE_API(Graph_t) = cpu_device::Graph*;
using CPU_DEVICE_API(GraphExec_t) = cpu_device::Graph*;

enum { CPU_DEVICE_API(StreamNonBlocking) = 1 };
enum { CPU_DEVICE_API(MemcpyHostToDevice) = 1, CPU_DEVICE_API(MemcpyDeviceToHost) = 2 };
enum { CPU_DEVICE_API(StreamCaptureModeThreadLocal) = 1 };
enum {
  CPU_DEVICE_API(DevAttrMultiProcessorCount) = cpu_device::kComputeUnitsAttribute,
  CPU_DEVICE_API(DeviceAttributeMultiprocessorCount) = cpu_device::kComputeUnitsAttribute
};

inline const char* CPU_DEVICE_API(GetErrorName)(cpu_device::Error e) { return cpu_device::error_name(e); }
inline const char* CPU_DEVICE_API(GetErrorString)(cpu_device::Error e) { return cpu_device::error_string(e); }
inline cpu_device::Error CPU_DEVICE_API(GetLastError)() { return cpu_device::kSuccess; }
inline cpu_device::Error CPU_DEVICE_API(GetDeviceCount)(int* n) {
  *n = 1;
  return cpu_device::kSuccess;
}
inline cpu_device::Error CPU_DEVICE_API(GetDevice)(int* d) {
  *d = 0;
  return cpu_device::kSuccess;
}
inline cpu_device::Error CPU_DEVICE_API(DeviceGetAttribute)(int* value, int attribute, int device) {
  if (attribute != cpu_device::kComputeUnitsAttribute || device != 0) return cpu_device::kInvalidValue;
  *value = cpu_device::compute_units();
  return cpu_device::kSuccess;
}
inline cpu_device::Error CPU_DEVICE_API(Malloc)(void** p, std::size_t bytes) { return cpu_device::allocate(p, bytes); }
inline cpu_device::Error CPU_DEVICE_API(Free)(void* p) {
  std::free(p);
  return cpu_device::kSuccess;
}
inline cpu_device::Error CPU_DEVICE_API(MemsetAsync)(void* p, int value, std::size_t bytes, cpu_device::Stream s) {
  cpu_device::submit(s, [p, value, bytes] { std::memset(p, value, bytes); });
  return cpu_device::kSuccess;
}
inline cpu_device::Error CPU_DEVICE_API(Memcpy)(void* dst, const void* src, std::size_t bytes, int) {
  std::memcpy(dst, src, bytes);
  return cpu_device::kSuccess;
}
inline cpu_device::Error CPU_DEVICE_API(DeviceSynchronize)() { return cpu_device::kSuccess; }
inline cpu_device::Error CPU_DEVICE_API(StreamCreateWithFlags)(cpu_device::Stream* s, unsigned) {
  *s = new cpu_device::StreamState;
  return cpu_device::kSuccess;
}
inline cpu_device::Error CPU_DEVICE_API(StreamDestroy)(cpu_device::Stream s) {
  delete s;
  return cpu_device::kSuccess;
}
inline cpu_device::Error CPU_DEVICE_API(StreamSynchronize)(cpu_device::Stream s) {
  return s != nullptr && s->capturing ? cpu_device::kInvalidValue : cpu_device::kSuccess;
}
inline cpu_device::Error CPU_DEVICE_API(EventCreate)(cpu_device::Event** e) {
  *e = new cpu_device::Event;
  return cpu_device::kSuccess;
}
inline cpu_device::Error CPU_DEVICE_API(EventDestroy)(cpu_device::Event* e) {
  delete e;
  return cpu_device::kSuccess;
}
inline cpu_device::Error CPU_DEVICE_API(EventRecord)(cpu_device::Event* e, cpu_device::Stream s) {
  cpu_device::submit(s, [e] { e->at = std::chrono::steady_clock::now(); });
  return cpu_device::kSuccess;
}
inline cpu_device::Error CPU_DEVICE_API(EventElapsedTime)(float* ms, cpu_device::Event* a, cpu_device::Event* b) {
  *ms = std::chrono::duration<float, std::milli>(b->at - a->at).count();
  return cpu_device::kSuccess;
}
inline cpu_device::Error CPU_DEVICE_API(StreamBeginCapture)(cpu_device::Stream s, int) {
  if (s == nullptr || s->capturing) return cpu_device::kInvalidValue;
  s->capturing = true;
  s->captured.clear();
  return cpu_device::kSuccess;
}
inline cpu_device::Error CPU_DEVICE_API(StreamEndCapture)(cpu_device::Stream s, cpu_device::Graph** g) {
  if (s == nullptr || !s->capturing) return cpu_device::kInvalidValue;
  s->capturing = false;
  *g = new cpu_device::Graph{std::move(s->captured)};
  s->captured.clear();
  return cpu_device::kSuccess;
}
#if defined(__HIP_PLATFORM_AMD__)
inline hipError_t hipGraphInstantiate(hipGraphExec_t* e, hipGraph_t g, void*, char*, std::size_t) {
  *e = new cpu_device::Graph(*g);
  return hipSuccess;
}
#else
inline cudaError_t cudaGraphInstantiate(cudaGraphExec_t* e, cudaGraph_t g, unsigned long long) {
  *e = new cpu_device::Graph(*g);
  return cudaSuccess;
}
#endif
inline cpu_device::Error CPU_DEVICE_API(GraphLaunch)(cpu_device::Graph* e, cpu_device::Stream s) {
  for (const auto& work : e->work) cpu_device::submit(s, work);
  return cpu_device::kSuccess;
}
inline cpu_device::Error CPU_DEVICE_API(GraphDestroy)(cpu_device::Graph* g) {
  delete g;
  return cpu_device::kSuccess;
}
inline cpu_device::Error CPU_DEVICE_API(GraphExecDestroy)(cpu_device::Graph* e) {
  delete e;
  return cpu_device::kSuccess;
}
#undef CPU_DEVICE_API

// Warp intrinsics: every one a full-mask operation of the whole warp.
namespace cpu_device {
template <class T>
T shuffle(const T& value, int lane) {
  Machine& m = Machine::get();
  const auto all = m.warp_gather(value);
  // Lane numbers wrap at the warp's size, as the hardware's do.
  return all[static_cast<unsigned>(lane) % static_cast<unsigned>(m.warp_size())];
}
inline uint64_t ballot(bool holds) {
  const auto all = Machine::get().warp_gather(holds ? 1 : 0);
  uint64_t lanes = 0;
  for (std::size_t i = 0; i < all.size(); ++i) lanes |= uint64_t{all[i] != 0 ? 1u : 0u} << i;
  return lanes;
}
}  // namespace cpu_device

#if defined(__HIP_PLATFORM_AMD__)
namespace rocprim {

using lane_mask_type = uint64_t;
inline lane_mask_type ballot(int holds) { return cpu_device::ballot(holds != 0); }
template <class T>
T warp_shuffle(const T& value, int lane, int width) {
  if (width != cpu_device::kWarpSize) cpu_device::fail("warp_shuffle of part of a wave: not stood in for", -1, -1);
  return cpu_device::shuffle(value, lane);
}
inline void wave_barrier() { cpu_device::Machine::get().warp_sync(); }

template <class T>
struct plus {
  T operator()(const T& a, const T& b) const { return a + b; }
};

enum class block_scan_algorithm { using_warp_scan, reduce_then_scan };

// rocprim::block_scan's exclusive scans, one barrier each.
template <class T, unsigned kThreads, block_scan_algorithm = block_scan_algorithm::using_warp_scan>
class block_scan {
 public:
  struct storage_type {};
  template <unsigned kItems, class Op>
  void exclusive_scan(T (&in)[kItems], T (&out)[kItems], T init, T& reduction, storage_type&, Op op) {
    T mine = in[0];
    for (unsigned k = 1; k < kItems; ++k) mine = op(mine, in[k]);
    const auto all = cpu_device::Machine::get().block_gather(mine);
    const auto t = static_cast<std::size_t>(threadIdx.x);
    T before = init;
    for (std::size_t i = 0; i < t; ++i) before = op(before, all[i]);
    reduction = all[0];
    for (std::size_t i = 1; i < all.size(); ++i) reduction = op(reduction, all[i]);
    for (unsigned k = 0; k < kItems; ++k) {
      out[k] = before;
      before = op(before, in[k]);
    }
  }
  template <class Op>
  void exclusive_scan(T in, T& out, T init, T& reduction, storage_type& storage, Op op) {
    T ins[1] = {in};
    T outs[1];
    exclusive_scan(ins, outs, init, reduction, storage, op);
    out = outs[0];
  }
};

// rocprim::warp_reduce: the warp's reduction in lane 0 (in every lane with
// kAll).
template <class T, unsigned kLanes, bool kAll = false>
class warp_reduce {
 public:
  struct storage_type {};
  template <class Op>
  void reduce(T in, T& out, storage_type&, Op op) {
    const auto all = cpu_device::Machine::get().warp_gather(in);
    T sum = all[0];
    for (std::size_t i = 1; i < all.size(); ++i) sum = op(sum, all[i]);
    // Past lane 0 without kAll the result is unspecified: the lane's own.
    out = kAll || cpu_device::Machine::get().lane() == 0 ? sum : in;
  }
};

template <class T, unsigned kLanes>
class warp_scan {
 public:
  struct storage_type {};
  template <class Op>
  void exclusive_scan(T in, T& out, T init, T& reduction, storage_type&, Op op) {
    const auto all = cpu_device::Machine::get().warp_gather(in);
    const auto lane = static_cast<std::size_t>(cpu_device::Machine::get().lane());
    out = init;
    for (std::size_t i = 0; i < lane; ++i) out = op(out, all[i]);
    reduction = all[0];
    for (std::size_t i = 1; i < all.size(); ++i) reduction = op(reduction, all[i]);
  }
};

}  // namespace rocprim
#else
inline void __syncwarp(unsigned = ~0u) { cpu_device::Machine::get().warp_sync(); }
template <class T>
T __shfl_sync(unsigned, const T& value, int lane) {
  return cpu_device::shuffle(value, lane);
}
inline unsigned __ballot_sync(unsigned, int holds) {
  return static_cast<unsigned>(cpu_device::ballot(holds != 0));
}
inline unsigned __reduce_add_sync(unsigned, unsigned value) {
  const auto all = cpu_device::Machine::get().warp_gather(value);
  unsigned sum = 0;
  for (unsigned v : all) sum += v;  // wraps, as the instruction does
  return sum;
}
inline unsigned __reduce_or_sync(unsigned, unsigned value) {
  const auto all = cpu_device::Machine::get().warp_gather(value);
  unsigned bits = 0;
  for (unsigned v : all) bits |= v;
  return bits;
}
inline unsigned __reduce_max_sync(unsigned, unsigned value) {
  const auto all = cpu_device::Machine::get().warp_gather(value);
  return *std::max_element(all.begin(), all.end());
}

namespace cub {

enum BlockScanAlgorithm { BLOCK_SCAN_RAKING, BLOCK_SCAN_WARP_SCANS };

// cub::BlockScan's exclusive sums, one barrier each.
template <class T, int kThreads, BlockScanAlgorithm = BLOCK_SCAN_RAKING>
class BlockScan {
 public:
  struct TempStorage {};
  explicit BlockScan(TempStorage&) {}
  template <int kItems>
  void ExclusiveSum(T (&in)[kItems], T (&out)[kItems], T& total) {
    T mine = 0;
    for (int k = 0; k < kItems; ++k) mine += in[k];
    const auto all = cpu_device::Machine::get().block_gather(mine);
    const auto t = static_cast<std::size_t>(threadIdx.x);
    T before = 0;
    for (std::size_t i = 0; i < t; ++i) before += all[i];
    total = 0;
    for (const T& v : all) total += v;
    for (int k = 0; k < kItems; ++k) {
      out[k] = before;
      before += in[k];
    }
  }
  void ExclusiveSum(T in, T& out, T& total) {
    T ins[1] = {in};
    T outs[1];
    ExclusiveSum(ins, outs, total);
    out = outs[0];
  }
};

// cub::WarpReduce: the warp's reduction, valid in lane 0.
template <class T>
class WarpReduce {
 public:
  struct TempStorage {};
  explicit WarpReduce(TempStorage&) {}
  template <class Op>
  T Reduce(T in, Op op) {
    const auto all = cpu_device::Machine::get().warp_gather(in);
    T sum = all[0];
    for (std::size_t i = 1; i < all.size(); ++i) sum = op(sum, all[i]);
    return cpu_device::Machine::get().lane() == 0 ? sum : in;  // unspecified past lane 0: the lane's own
  }
};

template <class T>
class WarpScan {
 public:
  struct TempStorage {};
  explicit WarpScan(TempStorage&) {}
  void ExclusiveSum(T in, T& out, T& total) {
    const auto all = cpu_device::Machine::get().warp_gather(in);
    const auto lane = static_cast<std::size_t>(cpu_device::Machine::get().lane());
    out = 0;
    for (std::size_t i = 0; i < lane; ++i) out += all[i];
    total = 0;
    for (const T& v : all) total += v;
  }
};

}  // namespace cub
#endif
