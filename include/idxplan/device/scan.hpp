// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// The block-wide primitives the decode schedule needs: an exclusive sum over
// one int32 a thread, and a reduction of the units' TileStats. rocPRIM on
// AMD, CUB on NVIDIA, as hipCUB chooses between them; the only other file
// that names a platform is runtime.hpp.

#include <cstdint>

#include "idxplan/device/runtime.hpp"
#include "idxplan/plan/schedule.hpp"

#if defined(__HIP_PLATFORM_AMD__)
#include <rocprim/block/block_reduce.hpp>
#include <rocprim/block/block_scan.hpp>
#else
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#endif

namespace idxplan::device {

template <int kThreads>
struct BlockPrimitives {
#if defined(__HIP_PLATFORM_AMD__)
  using Scan = rocprim::block_scan<int32_t, kThreads>;
  using Reduce = rocprim::block_reduce<TileStats, kThreads>;
  union TempStorage {
    typename Scan::storage_type scan;
    typename Reduce::storage_type reduce;
  };

  // Exclusive prefix sum of `value` over the block; `total` gets the sum.
  __device__ static int32_t exclusive_sum(int32_t value, int32_t& total, TempStorage& temp) {
    int32_t out = 0;
    Scan().exclusive_scan(value, out, 0, total, temp.scan, rocprim::plus<int32_t>());
    return out;
  }
  // The block's combined stats, valid in thread 0.
  __device__ static TileStats reduce(const TileStats& value, TempStorage& temp) {
    TileStats out{};
    Reduce().reduce(value, out, temp.reduce, TileStats{});
    return out;
  }
#else
  using Scan = cub::BlockScan<int32_t, kThreads>;
  using Reduce = cub::BlockReduce<TileStats, kThreads>;
  union TempStorage {
    typename Scan::TempStorage scan;
    typename Reduce::TempStorage reduce;
  };

  __device__ static int32_t exclusive_sum(int32_t value, int32_t& total, TempStorage& temp) {
    int32_t out = 0;
    Scan(temp.scan).ExclusiveSum(value, out, total);
    return out;
  }
  __device__ static TileStats reduce(const TileStats& value, TempStorage& temp) {
    return Reduce(temp.reduce).Reduce(value, TileStats{});
  }
#endif
};

}  // namespace idxplan::device
