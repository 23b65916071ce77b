// SPDX-License-Identifier: Apache-2.0
// SPDX-FileCopyrightText: Copyright idxplan contributors
// The plan structs' equality and printing (plan/types.hpp): every struct's
// tie() names each of its fields, so two plans that differ in any field
// compare unequal (the tests compare whole plans with ==), and a plan
// prints its fields by name.

#include <cstddef>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "idxplan/idxplan.hpp"

namespace idxplan {
namespace {

// Stands for any field in an aggregate initialisation; never called.
struct AnyField {
  template <class T>
  constexpr operator T() const;  // NOLINT: implicit, to any field's type
};

template <class T, class Indices, class = void>
struct InitialisesFrom : std::false_type {};
template <class T, std::size_t... I>
struct InitialisesFrom<T, std::index_sequence<I...>, std::void_t<decltype(T{(void(I), AnyField{})...})>>
    : std::true_type {};

// The fields of aggregate T: the most initialisers T{...} takes. Each
// initialiser converts to its field's type, so none is spent on a nested
// aggregate's fields.
template <class T, std::size_t N = 0>
constexpr std::size_t field_count() {
  static_assert(std::is_aggregate_v<T>, "an aggregate");
  if constexpr (InitialisesFrom<T, std::make_index_sequence<N + 1>>::value) {
    return field_count<T, N + 1>();
  } else {
    return N;
  }
}

template <class T>
constexpr std::size_t tied_fields() {
  return std::tuple_size_v<decltype(std::declval<const T&>().tie())>;
}

struct Counted {  // the counting itself, on a struct of known fields
  int32_t a = 0;
  bool b = false;
  NativeDecode nested{};
  std::vector<RequestRows> list;
};

TEST(PlanStructs, FieldCountingCountsEachField) {
  EXPECT_EQ(field_count<Counted>(), 4u);
  EXPECT_EQ(field_count<NativeDecode>(), 2u);
}

TEST(PlanStructs, EachTieNamesEveryField) {
  EXPECT_EQ(tied_fields<ChunkSplit>(), field_count<ChunkSplit>());
  EXPECT_EQ(tied_fields<RequestRows>(), field_count<RequestRows>());
  EXPECT_EQ(tied_fields<PrefillPlan>(), field_count<PrefillPlan>());
  EXPECT_EQ(tied_fields<ChunkGroup>(), field_count<ChunkGroup>());
  EXPECT_EQ(tied_fields<GatherLaunch>(), field_count<GatherLaunch>());
  EXPECT_EQ(tied_fields<NativeDecode>(), field_count<NativeDecode>());
  EXPECT_EQ(tied_fields<ScheduleShape>(), field_count<ScheduleShape>());
  EXPECT_EQ(tied_fields<DecodePlan>(), field_count<DecodePlan>());
  EXPECT_EQ(tied_fields<StepPlan>(), field_count<StepPlan>());
  EXPECT_EQ(tied_fields<BatchSplit>(), field_count<BatchSplit>());
  EXPECT_EQ(tied_fields<Descriptor>(), field_count<Descriptor>());
}

TEST(PlanStructs, EqualityComparesNestedFieldsAndLists) {
  StepPlan a;
  StepPlan b;
  EXPECT_EQ(a, b);
  b.decode.schedule.max_tiles = 3;  // a nested struct's field
  EXPECT_NE(a, b);
  b = a;
  b.prefill.push_back(PrefillPlan{});  // a list's length
  EXPECT_NE(a, b);
  a.prefill.push_back(PrefillPlan{});
  EXPECT_EQ(a, b);
  b.prefill[0].use_gather = true;  // a list element's field
  EXPECT_NE(a, b);
}

TEST(PlanStructs, PrintByFieldNameThroughFmtAndStreams) {
  const ChunkSplit s{2, 5, 10, 40};
  EXPECT_EQ(fmt::format("{}", s), "ChunkSplit{requests=[2, 5), rows=[10, 40)}");
  std::ostringstream os;
  os << s;  // GoogleTest prints a failing comparison this way
  EXPECT_EQ(os.str(), fmt::format("{}", s));
  StepPlan p;
  p.num_reqs = 7;
  p.decode.native.next_n = 2;
  const std::string text = fmt::format("{}", p);
  EXPECT_NE(text.find("num_reqs=7"), std::string::npos) << text;
  EXPECT_NE(text.find("next_n=2"), std::string::npos) << text;
}

}  // namespace
}  // namespace idxplan
