// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
#include "idxplan/contracts/flydsl_fp4.hpp"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "test_support.hpp"

namespace idxplan::flydsl_fp4 {
namespace {

using Words = std::vector<int32_t>;

struct Decode {
  Words cta_info;
  int32_t safe = -1;
};

Decode varctx(const Words& contexts, int64_t block_k, int64_t ctas, int64_t max_seq_len, int64_t next_n = 1) {
  const VarctxShape s = varctx_shape(static_cast<int64_t>(contexts.size()), block_k, ctas, max_seq_len, next_n);
  Decode d;
  d.cta_info.assign(static_cast<std::size_t>(s.words()), -7);
  fill_varctx_schedule(s, contexts, d.cta_info, &d.safe);
  return d;
}

Decode prefill(const Words& batches, const Words& starts, const Words& ends, int64_t block_k, int64_t ctas,
               int64_t max_seq_len) {
  const PrefillShape s = prefill_shape(static_cast<int64_t>(ends.size()), block_k, ctas, max_seq_len);
  Decode d;
  d.cta_info.assign(static_cast<std::size_t>(s.words()), -7);
  fill_prefill_schedule(s, batches, starts, ends, d.cta_info, &d.safe);
  return d;
}

TEST(VarctxSchedule, GivesEveryChunkItsOwnCtaWhereTheGridHoldsThem) {
  // Chunks of 256 keys: 2, 0 and 4; six splits of one chunk fit 8 CTAs.
  const Decode d = varctx({300, 0, 1000}, 256, 8, 1024);
  EXPECT_EQ(d.safe, 1);
  EXPECT_EQ(d.cta_info, (Words{0, 0, 1, 300, 0, 1, 1, 300,                            // batch 0
                               2, 0, 1, 1000, 2, 1, 1, 1000, 2, 2, 1, 1000, 2, 3, 1, 1000,  // batch 2
                               0, 0, 1, 0, 0, 0, 1, 0}));                                 // idle
}

TEST(VarctxSchedule, TakesTheFewestChunksACtaThatFitTheGrid) {
  // Four CTAs: one chunk a CTA makes six splits, two make 1 + 2.
  const Decode d = varctx({300, 0, 1000}, 256, 4, 1024);
  EXPECT_EQ(d.safe, 2);
  EXPECT_EQ(d.cta_info, (Words{0, 0, 2, 300, 2, 0, 2, 1000, 2, 2, 2, 1000, 0, 0, 1, 0}));
}

TEST(VarctxSchedule, RepeatsASplitForEachOfNextNRows) {
  // 600 keys, 3 chunks; two slots of two rows each: two chunks a slot.
  const Decode d = varctx({600}, 256, 4, 512, 2);
  EXPECT_EQ(d.safe, 2);
  EXPECT_EQ(d.cta_info, (Words{0, 0, 2, 600, 1, 0, 2, 600, 0, 2, 1, 600, 1, 2, 1, 600}));
}

TEST(VarctxSchedule, GivesAContextPastMaxSeqLenOneCta) {
  // max_seq_len 256 caps a CTA at 1 chunk: 8 + 1 splits for 2 CTAs do not
  // fit, so every batch takes one CTA of the longest batch's 8 chunks.
  const Decode d = varctx({2000, 10}, 256, 2, 256);
  EXPECT_EQ(d.safe, 8);
  EXPECT_EQ(d.cta_info, (Words{0, 0, 8, 2000, 1, 0, 1, 10}));
}

TEST(VarctxSchedule, WritesOnlyIdleCtasForEmptyBatches) {
  const Decode d = varctx({0, 0}, 256, 3, 0);
  EXPECT_EQ(d.safe, 1);
  EXPECT_EQ(d.cta_info, (Words{0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1, 0}));
  const Decode none = varctx({}, 64, 2, 4096);
  EXPECT_EQ(none.safe, 1);
  EXPECT_EQ(none.cta_info, (Words{0, 0, 1, 0, 0, 0, 1, 0}));
}

TEST(VarctxSchedule, RefusesWhatAiterRefusesByName) {
  const auto error = [](auto f) { return test::error_of<StepError>(f); };
  EXPECT_EQ(error([] { varctx_shape(2, 256, 5, 1024, 2); }),
            "compute_varctx_schedule: parallel_unit_num=5 must be a multiple of next_n=2");
  EXPECT_EQ(error([] { varctx_shape(3, 256, 4, 1024, 2); }),
            "compute_varctx_schedule: parallel_unit_num // next_n = 2 < batches=3 would drop batches; pass "
            "parallel_unit_num >= batches * next_n = 6");
  EXPECT_EQ(error([] { varctx_shape(1, 0, 4, 1024, 1); }), "compute_varctx_schedule: block_k=0 is not a positive int32");
  EXPECT_EQ(error([] { varctx_shape(1, 256, 4, 1024, 0); }), "compute_varctx_schedule: next_n=0 is not a positive int32");
  EXPECT_EQ(error([] { varctx_shape(1, 256, int64_t{1} << 31, 1024, 1); }),
            "compute_varctx_schedule: parallel_unit_num=2147483648 is not an int32 CTA count");
  const VarctxShape s = varctx_shape(2, 256, 4, 1024, 1);
  Words small(15);
  int32_t safe = 0;
  const Words two{1, 2};
  const Words one{1};
  EXPECT_EQ(error([&] { fill_varctx_schedule(s, two, small, &safe); }),
            "compute_varctx_schedule: cta_info holds 15 words, and the schedule writes 16");
  Words enough(16);
  EXPECT_EQ(error([&] { fill_varctx_schedule(s, one, enough, &safe); }),
            "compute_varctx_schedule: context_lens has 1 entries, not 2");
}

TEST(VarctxSchedule, DefaultsToACtaForEveryChunkARowCanHave) {
  EXPECT_EQ(varctx_default_ctas(3, 256, 1000, 2), 3 * 2 * 4);
  EXPECT_EQ(varctx_default_ctas(3, 256, 0, 1), 3);    // at least a chunk a row
  EXPECT_EQ(varctx_default_ctas(3, 256, -9, 1), 3);   // Python's floor division
}

TEST(PrefillSchedule, CopiesEachRowsBatchAndWindow) {
  // Chunks 0, 2 and 3; four CTAs: one chunk a CTA makes 5 splits, two 1 + 2.
  const Decode d = prefill({3, 3, 4}, {0, 5, 7}, {0, 300, 513}, 256, 4, 1024);
  EXPECT_EQ(d.safe, 2);
  EXPECT_EQ(d.cta_info, (Words{1, 3, 0, 2, 5, 300, 2, 4, 0, 2, 7, 513, 2, 4, 2, 1, 7, 513, 0, 0, 0, 1, 0, 0}));
}

TEST(PrefillSchedule, CountsNoChunkForANegativeEndAndWritesIdleCtasForNoRows) {
  const Decode d = prefill({1}, {0}, {-300}, 256, 2, 512);
  EXPECT_EQ(d.safe, 1);
  EXPECT_EQ(d.cta_info, (Words{0, 0, 0, 1, 0, 0, 0, 0, 0, 1, 0, 0}));
  // aiter raises on no rows (a max over nothing); the schedule is all idle.
  const Decode none = prefill({}, {}, {}, 256, 1, 512);
  EXPECT_EQ(none.safe, 1);
  EXPECT_EQ(none.cta_info, (Words{0, 0, 0, 1, 0, 0}));
}

TEST(PrefillSchedule, RefusesAGridOfFewerCtasThanRows) {
  EXPECT_EQ(test::error_of<StepError>([] { prefill_shape(5, 256, 4, 1024); }),
            "compute_prefill_schedule: parallel_unit_num=4 < rows=5 would drop rows past slot 4; pass "
            "parallel_unit_num >= the rows");
  const PrefillShape s = prefill_shape(2, 256, 4, 1024);
  Words info(24);
  int32_t safe = 0;
  const Words batches{0, 0};
  const Words starts{0};
  const Words ends{1, 2};
  EXPECT_EQ(test::error_of<StepError>([&] { fill_prefill_schedule(s, batches, starts, ends, info, &safe); }),
            "compute_prefill_schedule: local_starts has 1 entries, not 2");
}

// The schedule's definition, checked on its words rather than restated:
// `safe` fits the splits in the slots and one less does not (or every row
// takes one CTA where the cap does not fit); every chunk of every row is in
// exactly one live CTA, rows in order, at most `safe` chunks a CTA, split
// after split; the CTAs past the last live one are idle.
TEST(Schedules, KeepTheirDefinitionOnRandomLengths) {
  std::mt19937_64 rng(4949);
  auto uniform = [&](int64_t lo, int64_t hi) { return std::uniform_int_distribution<int64_t>(lo, hi)(rng); };
  int fallback = 0, searched = 0;
  for (int i = 0; i < 3000; ++i) {
    const int64_t rows = uniform(0, i % 10 == 0 ? 2000 : 40);
    const int64_t block_k = uniform(0, 3) == 0 ? uniform(1, 512) : 256;
    const int64_t max_seq_len = uniform(-10, 300000);
    const int64_t cap = std::max<int64_t>(1, (max_seq_len + block_k - 1) / block_k);
    Words ends(static_cast<std::size_t>(rows));
    for (int32_t& e : ends) {
      const bool past = uniform(0, i % 4 == 0 ? 1 : 6) == 0;  // a context past max_seq_len
      e = static_cast<int32_t>(uniform(0, 4) == 0 ? 0 : uniform(-5, past ? 2 * max_seq_len + 10 : max_seq_len));
    }
    const int64_t ctas = rows + uniform(0, i % 4 == 0 ? 2 : (uniform(0, 1) ? 8 : 3000));
    const Decode d = prefill(Words(ends.size(), 7), Words(ends.size(), 3), ends, block_k, ctas, max_seq_len);
    SCOPED_TRACE(::testing::Message() << "case " << i << ": " << rows << " rows, block_k " << block_k << ", "
                                      << ctas << " CTAs, max_seq_len " << max_seq_len);
    const auto splits = [&](int64_t safe) {
      int64_t n = 0;
      for (const int32_t e : ends) n += splits_of(chunks_of(e, static_cast<int32_t>(block_k)), static_cast<int32_t>(safe));
      return n;
    };
    if (splits(cap) > ctas) {
      int32_t longest = 1;
      for (const int32_t e : ends) longest = std::max(longest, chunks_of(e, static_cast<int32_t>(block_k)));
      ASSERT_EQ(d.safe, longest);
      ++fallback;
    } else {
      ASSERT_LE(splits(d.safe), ctas);
      ASSERT_TRUE(d.safe == 1 || splits(d.safe - 1) > ctas) << d.safe;
      ASSERT_LE(d.safe, cap);
      ++searched;
    }
    // The first splits(safe) CTAs are live: rows with chunks in order, each
    // cut into CTAs of `safe` chunks and the rest; the others are idle.
    const int64_t live = splits(d.safe);
    const auto chunks = [&](int64_t r) { return chunks_of(ends[static_cast<std::size_t>(r)], static_cast<int32_t>(block_k)); };
    int64_t row = -1;
    int32_t next_chunk = 0;
    for (int64_t cta = 0; cta < ctas; ++cta) {
      const Words w(d.cta_info.begin() + cta * kPrefillWords, d.cta_info.begin() + (cta + 1) * kPrefillWords);
      if (cta >= live) {
        ASSERT_EQ(w, (Words{0, 0, 0, 1, 0, 0})) << "CTA " << cta;
        continue;
      }
      if (row < 0 || next_chunk == chunks(row)) {
        do ++row; while (chunks(row) == 0);
        next_chunk = 0;
      }
      const int32_t count = std::min(static_cast<int32_t>(d.safe), chunks(row) - next_chunk);
      ASSERT_EQ(w, (Words{static_cast<int32_t>(row), 7, next_chunk, count, 3, ends[static_cast<std::size_t>(row)]}))
          << "CTA " << cta;
      next_chunk += count;
    }
    // Every row with chunks was walked to its end.
    if (row >= 0) {
      ASSERT_EQ(next_chunk, chunks(row));
    }
    for (int64_t r = row + 1; r < rows; ++r) ASSERT_EQ(chunks(r), 0) << r;
  }
  EXPECT_GT(fallback, 100);
  EXPECT_GT(searched, 1000);
}

}  // namespace
}  // namespace idxplan::flydsl_fp4
