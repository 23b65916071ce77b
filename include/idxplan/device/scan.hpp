// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The block-wide primitives the decode schedule needs: an exclusive sum of
// kItems int32 a thread (a block scan), and the units' TileStats combined
// over the block and handed to every thread. rocPRIM on AMD, CUB on NVIDIA,
// as hipCUB chooses between them; the only other file that names a platform
// is runtime.hpp, and prepare_step.hpp asks only IDXPLAN_WARP_REDUX.
//
// Both are built for latency, which is all a step's few thousand units cost:
// the scan runs warp scans and one exchange between warps; the reduction
// runs warp reductions (the redux instruction from sm_80 on, and on the
// tests' CPU stand-in, tests/cpu_device), one barrier, and every thread
// combines the warps' partials itself, so no second barrier broadcasts a
// result. The stats' tiles are never negative. Their warp_ versions serve a
// schedule of a unit or two a lane, which every warp computes on its own
// with no barrier at all, as does warp_or, where redux has it. lane_value
// is a warp's shuffle, for the contracts' own sums.

#include <cstdint>

#include "idxplan/contracts/gluon_mxfp4.hpp"
#include "idxplan/device/runtime.hpp"

#if defined(IDXPLAN_CPU_DEVICE)
// runtime.hpp's CPU stand-in has the few CUB and rocPRIM names used here.
#elif defined(__HIP_PLATFORM_AMD__)
#include <rocprim/block/block_scan.hpp>
#include <rocprim/intrinsics/thread.hpp>
#include <rocprim/intrinsics/warp.hpp>
#include <rocprim/intrinsics/warp_shuffle.hpp>
#include <rocprim/warp/warp_reduce.hpp>
#include <rocprim/warp/warp_scan.hpp>
#else
#include <cub/block/block_scan.cuh>
#include <cub/warp/warp_reduce.cuh>
#include <cub/warp/warp_scan.cuh>
#endif

// Whether the warp's reductions are redux instructions: NVIDIA's from sm_80
// on, and the tests' CPU stand-in as NVIDIA. Only device code reads it.
#if !defined(__HIP_PLATFORM_AMD__) && (__CUDA_ARCH__ >= 800 || defined(IDXPLAN_CPU_DEVICE))
#define IDXPLAN_WARP_REDUX 1
#else
#define IDXPLAN_WARP_REDUX 0
#endif

namespace idxplan::device {

template <int kThreads>
struct BlockPrimitives {
#if defined(__HIP_PLATFORM_AMD__)
  static constexpr int kWarpSize = 64;  // gfx9's wavefronts
  using Scan = rocprim::block_scan<int32_t, kThreads, rocprim::block_scan_algorithm::using_warp_scan>;
  using WarpReduce = rocprim::warp_reduce<TileStats, kWarpSize>;
  using WarpAllReduce = rocprim::warp_reduce<TileStats, kWarpSize, true>;  // every lane gets the result
  using WarpScan = rocprim::warp_scan<int32_t, kWarpSize>;
  using ScanStorage = typename Scan::storage_type;
  using WarpStorage = typename WarpReduce::storage_type;
  using WarpAllStorage = typename WarpAllReduce::storage_type;
  using WarpScanStorage = typename WarpScan::storage_type;
#else
  static constexpr int kWarpSize = 32;
  using Scan = cub::BlockScan<int32_t, kThreads, cub::BLOCK_SCAN_WARP_SCANS>;
  using WarpReduce = cub::WarpReduce<TileStats>;
  using WarpScan = cub::WarpScan<int32_t>;
  using ScanStorage = typename Scan::TempStorage;
  using WarpStorage = typename WarpReduce::TempStorage;
  using WarpAllStorage = WarpStorage;  // the reduction, then lane 0's result to every lane
  using WarpScanStorage = typename WarpScan::TempStorage;
#endif
  static constexpr int kWarps = kThreads / kWarpSize;
  static_assert(kThreads % kWarpSize == 0, "whole warps");

  // Shared memory takes no initialised types: the partials as plain words.
  struct TempStorage {
    ScanStorage scan;
    WarpStorage warp[kWarps];
    WarpAllStorage warp_all[kWarps];
    WarpScanStorage warp_scan[kWarps];
    int64_t total[kWarps];
    int32_t live[kWarps];
    int32_t max_tiles[kWarps];
  };

  // Exclusive prefix sums of the block's values, thread by thread in order;
  // `total` gets their sum.
  template <int kItems>
  __device__ static void exclusive_sum(int32_t (&values)[kItems], int32_t (&sums)[kItems],
                                       int32_t& total, TempStorage& temp) {
#if defined(__HIP_PLATFORM_AMD__)
    Scan().exclusive_scan(values, sums, 0, total, temp.scan, rocprim::plus<int32_t>());
#else
    Scan(temp.scan).ExclusiveSum(values, sums, total);
#endif
  }

  // The same for one value a thread.
  __device__ static void exclusive_sum(int32_t value, int32_t& sum, int32_t& total, TempStorage& temp) {
#if defined(__HIP_PLATFORM_AMD__)
    Scan().exclusive_scan(value, sum, 0, total, temp.scan, rocprim::plus<int32_t>());
#else
    Scan(temp.scan).ExclusiveSum(value, sum, total);
#endif
  }

  // The block's combined stats, in every thread. One barrier.
  __device__ static TileStats all_reduce(const TileStats& value, TempStorage& temp) {
    const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
#if defined(__HIP_PLATFORM_AMD__)
    TileStats mine{};
    WarpReduce().reduce(value, mine, temp.warp[warp], TileStats{});
#elif IDXPLAN_WARP_REDUX
    const TileStats mine = redux(value);
#else
    const TileStats mine = WarpReduce(temp.warp[warp]).Reduce(value, TileStats{});
#endif
    if (static_cast<int>(threadIdx.x) % kWarpSize == 0) {  // the warp's result is in its lane 0
      temp.total[warp] = mine.total;
      temp.live[warp] = mine.live;
      temp.max_tiles[warp] = mine.max_tiles;
    }
    __syncthreads();
    TileStats all{};
#pragma unroll
    for (int w = 0; w < kWarps; ++w) {
      all = TileStats{}(all, TileStats{temp.total[w], temp.live[w], temp.max_tiles[w]});
    }
    return all;
  }

  // The warp's combined stats, in every lane of it. No barrier.
  __device__ static TileStats warp_all_reduce(const TileStats& value, TempStorage& temp) {
    const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
#if defined(__HIP_PLATFORM_AMD__)
    TileStats all{};
    WarpAllReduce().reduce(value, all, temp.warp_all[warp], TileStats{});
    return all;
#elif IDXPLAN_WARP_REDUX
    (void)temp;
    (void)warp;
    return redux(value);
#else
    const TileStats lane0 = WarpReduce(temp.warp_all[warp]).Reduce(value, TileStats{});
    return TileStats{__shfl_sync(~0u, lane0.total, 0), __shfl_sync(~0u, lane0.live, 0),
                     __shfl_sync(~0u, lane0.max_tiles, 0)};
#endif
  }

  // Exclusive prefix sums of the warp's values, lane by lane; `total`
  // (in every lane) gets their sum. No barrier.
  __device__ static void warp_exclusive_sum(int32_t value, int32_t& sum, int32_t& total, TempStorage& temp) {
    const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
#if defined(__HIP_PLATFORM_AMD__)
    WarpScan().exclusive_scan(value, sum, 0, total, temp.warp_scan[warp], rocprim::plus<int32_t>());
#else
    WarpScan(temp.warp_scan[warp]).ExclusiveSum(value, sum, total);
#endif
  }

#if IDXPLAN_WARP_REDUX
  // The bitwise or of the warp's words, in every lane: one redux. No barrier.
  __device__ static uint32_t warp_or(uint32_t word) { return __reduce_or_sync(~0u, word); }
#endif

  // `value` of lane `lane` of the warp, in every lane.
  __device__ static int32_t warp_broadcast(int32_t value, int lane) {
#if defined(__HIP_PLATFORM_AMD__)
    return rocprim::warp_shuffle(value, lane, kWarpSize);
#else
    return __shfl_sync(~0u, value, lane);
#endif
  }

  // `value` of the warp's first lane where `holds`, in every lane, or
  // `otherwise` where it holds in none. No barrier.
  __device__ static int32_t warp_first_where(bool holds, int32_t value, int32_t otherwise) {
#if defined(__HIP_PLATFORM_AMD__)
    const auto lanes = rocprim::ballot(holds);
    const int32_t found = rocprim::warp_shuffle(value, lanes == 0 ? 0 : __builtin_ctzll(lanes), kWarpSize);
#else
    const unsigned lanes = __ballot_sync(~0u, holds);
    const int32_t found = __shfl_sync(~0u, value, lanes == 0 ? 0 : __ffs(static_cast<int>(lanes)) - 1);
#endif
    return lanes == 0 ? otherwise : found;
  }

  // Orders a warp's shared-memory writes before its lanes' later reads.
  __device__ static void warp_sync() {
#if defined(__HIP_PLATFORM_AMD__)
    rocprim::wave_barrier();
#else
    __syncwarp();
#endif
  }

 private:
#if IDXPLAN_WARP_REDUX
  // The warp's stats in every lane, one redux instruction a word. A lane's
  // total is under 2^36 (32 units of under 2^31 tiles), so its halves below
  // and above bit 20 sum over a warp without overflow.
  __device__ static TileStats redux(const TileStats& value) {
    const auto total = static_cast<uint64_t>(value.total);
    const uint32_t low = __reduce_add_sync(~0u, static_cast<uint32_t>(total & 0xFFFFFu));
    const uint32_t high = __reduce_add_sync(~0u, static_cast<uint32_t>(total >> 20));
    return TileStats{(static_cast<int64_t>(high) << 20) + low,
                     static_cast<int32_t>(__reduce_add_sync(~0u, static_cast<uint32_t>(value.live))),
                     static_cast<int32_t>(__reduce_max_sync(~0u, static_cast<uint32_t>(value.max_tiles)))};
  }
#endif
};

// Lane `lane`'s `v`, in every lane of the warp that asks.
template <class T>
__device__ T lane_value(const T& v, int lane) {
#if defined(__HIP_PLATFORM_AMD__)
  return rocprim::warp_shuffle(v, lane, BlockPrimitives<64>::kWarpSize);
#else
  return __shfl_sync(~0u, v, lane);
#endif
}

}  // namespace idxplan::device
