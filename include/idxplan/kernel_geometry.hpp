// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#pragma once

// Facts about aiter's paged MXFP4 MQA-logits kernel that the planner needs:
// the cache format a page is stored in and the launch config the kernel picks
// for a given rows-per-sequence (docs/design.md section 4).

#include <cstdint>

#include <fmt/format.h>

#include "idxplan/error.hpp"

namespace idxplan {

// How aiter lays out one page of the MXFP4 indexer cache.
struct CacheLayout {
  int32_t n_per_tile = 0;   // entries a shuffle group holds
  int32_t d_per_tile = 16;  // bytes of K a value chunk holds
  int32_t scale_lanes = 0;  // 64 / n_per_tile
  int32_t block_kv = 0;     // compressed entries one KV tile walks: min(64, P)
  int32_t value_bytes = 0;  // D / 2: fp4 values of one entry
  int32_t scale_bytes = 0;  // D / 32: e8m0 scales of one entry
};

// The kernel's launch config for sequences of `rows` query rows.
struct LaunchConfig {
  int32_t block_m = 1;              // rows a workgroup scores together
  int32_t row_blocks = 1;           // ceil(rows / block_m)
  int32_t waves_per_eu = 2;         // occupancy aiter asks for
  int32_t target_wgs = 0;           // workgroups that fill the GPU
  int32_t max_tiles_per_split = 0;  // KV tiles one slice walks at most
};

inline constexpr int32_t kDPerTile = 16;
inline constexpr int32_t kMaxBlockKv = 64;

// The cache format for (heads, head dim, page entries), checked against every
// rule aiter's preshuffled layout has.
inline CacheLayout cache_layout(int32_t num_heads, int32_t head_dim, int32_t page_entries) {
  if (num_heads <= 0 || head_dim <= 0 || page_entries <= 0) {
    throw ConfigError(fmt::format(
        "cache layout needs positive sizes, got num_heads={} head_dim={} page_entries={}",
        num_heads, head_dim, page_entries));
  }
  CacheLayout layout;
  layout.n_per_tile = (head_dim <= 64 || num_heads >= 32) ? 32 : 16;
  layout.d_per_tile = kDPerTile;
  layout.scale_lanes = 64 / layout.n_per_tile;
  layout.block_kv = page_entries < kMaxBlockKv ? page_entries : kMaxBlockKv;
  layout.value_bytes = head_dim / 2;
  layout.scale_bytes = head_dim / 32;
  if (page_entries % layout.n_per_tile != 0 || page_entries % layout.block_kv != 0) {
    throw ConfigError(fmt::format(
        "the paged MXFP4 cache needs page_entries (block_size / compress_ratio) to be a "
        "multiple of the {}-entry shuffle group and of the {}-entry KV tile, got {}",
        layout.n_per_tile, layout.block_kv, page_entries));
  }
  if (head_dim % 32 != 0 || layout.value_bytes % layout.d_per_tile != 0 ||
      layout.scale_bytes % layout.scale_lanes != 0) {
    throw ConfigError(fmt::format(
        "the paged MXFP4 cache cannot store head_dim={} with num_heads={}: it needs head_dim % 32 "
        "== 0, (head_dim / 2) % {} == 0 and (head_dim / 32) % {} == 0",
        head_dim, num_heads, layout.d_per_tile, layout.scale_lanes));
  }
  return layout;
}

namespace detail {

// aiter's rows-per-workgroup choice before clamping to `rows`.
constexpr int32_t preferred_block_m(int32_t num_heads, int32_t rows) {
  const bool few_heads = num_heads <= 32;
  if (rows >= 512) return few_heads ? 3 : 1;
  if (rows >= 2 && rows <= 8) {
    const int32_t cap = few_heads ? 7 : (rows <= 6 ? 3 : 2);
    // Fewest row blocks first, then the least padded rows, then the smallest b.
    int32_t best = 1;
    int32_t best_blocks = rows;
    int32_t best_padded = rows;
    for (int32_t b = 2; b <= cap; ++b) {
      const int32_t blocks = (rows + b - 1) / b;
      const int32_t padded = b * blocks;
      if (blocks < best_blocks || (blocks == best_blocks && padded < best_padded)) {
        best = b;
        best_blocks = blocks;
        best_padded = padded;
      }
    }
    return best;
  }
  if (few_heads && rows > 8) return rows < 64 ? 3 : 4;
  if (!few_heads && rows >= 2) return rows < 2 ? rows : 2;
  return 1;
}

}  // namespace detail

// The launch config aiter's kernel uses for `rows` query rows per sequence on
// a GPU of `num_compute_units` CUs, preshuffled cache.
constexpr LaunchConfig launch_config(int32_t num_heads, int32_t rows, int32_t num_compute_units) {
  LaunchConfig config;
  const int32_t bm = detail::preferred_block_m(num_heads, rows);
  config.block_m = bm < rows ? bm : rows;
  if (config.block_m < 1) config.block_m = 1;
  config.row_blocks = (rows + config.block_m - 1) / config.block_m;
  config.waves_per_eu = (rows >= 512 || (num_heads > 32 && rows == 1)) ? 3 : 2;
  // Saturated rather than overflowed: make_geometry refuses a GPU whose
  // workgroups pass what the schedule holds, long before int32.
  const int64_t wgs = int64_t{4} * num_compute_units * config.waves_per_eu;
  config.target_wgs = wgs < 0x7FFFFFFF ? static_cast<int32_t>(wgs) : 0x7FFFFFFF;
  config.max_tiles_per_split = rows == 1 ? 128 : 64;
  return config;
}

}  // namespace idxplan
