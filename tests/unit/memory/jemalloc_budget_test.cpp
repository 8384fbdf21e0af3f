// The allocation budget on jemalloc, the allocator the ncclguard binary runs on: this test
// program links jemalloc as the binary does (the other unit tests run on glibc's malloc).
#include <malloc.h>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "memory/allocation_budget.h"

extern "C" std::size_t nallocx(std::size_t size, int flags);

namespace ncclguard::memory {
namespace {

// Sizes from 0 up to 64 MiB: every one to 64 KiB, then steps that land on and beside each class
// boundary.
std::vector<std::size_t> Sizes() {
  std::vector<std::size_t> sizes;
  for (std::size_t size = 0; size <= std::size_t{64} << 10; ++size) sizes.push_back(size);
  for (std::size_t power = std::size_t{64} << 10; power <= std::size_t{64} << 20; power <<= 1) {
    for (std::size_t quarter = 0; quarter < 4; ++quarter) {
      const std::size_t edge = power + quarter * (power / 4);
      for (std::size_t size : {edge - 1, edge, edge + 1}) sizes.push_back(size);
    }
  }
  return sizes;
}

TEST(JemallocBudget, SizeClassIsWhatJemallocServes) {
  for (const std::size_t size : Sizes()) {
    ASSERT_EQ(JemallocSizeClass(size), nallocx(size == 0 ? 1 : size, 0)) << "size " << size;
  }
  // And what a block of that size reads back.
  for (std::size_t size = 1; size <= std::size_t{1} << 20; size = size * 5 / 4 + 1) {
    std::unique_ptr<char[]> block(new char[size]);
    ASSERT_EQ(JemallocSizeClass(size), malloc_usable_size(block.get())) << "size " << size;
  }
}

// What a scope counts for a block comes back whole when it is freed, whichever delete frees it:
// a sized one (std::allocator's) or an unsized one.
TEST(JemallocBudget, EveryBlockIsReleasedAsItWasCharged) {
  BudgetScope scope(std::size_t{1} << 30, nullptr);
  {
    std::vector<std::string> strings;
    std::vector<std::unique_ptr<std::vector<char>>> vectors;
    for (std::size_t size = 1; size < 100'000; size = size * 3 / 2 + 1) {
      strings.emplace_back(size, 'x');
      vectors.push_back(std::make_unique<std::vector<char>>(size));
      void* unsized = ::operator new(size);
      ::operator delete(unsized);
    }
    EXPECT_GT(scope.Allocated(), 0);
  }
  EXPECT_EQ(scope.Allocated(), 0);
}

TEST(JemallocBudget, TheLimitRefusesTheBlockThatCrossesIt) {
  BudgetScope scope(std::size_t{1} << 20, nullptr);
  std::vector<std::unique_ptr<char[]>> blocks;
  EXPECT_THROW(
      {
        for (int i = 0; i < 64; ++i) blocks.emplace_back(new char[64 << 10]);
      },
      BudgetExceeded);
  EXPECT_TRUE(scope.Exceeded());
  EXPECT_LE(scope.Peak(), std::size_t{1} << 20);
  EXPECT_GE(blocks.size(), 14u);  // 64 KiB blocks, and the vector's own
}

}  // namespace
}  // namespace ncclguard::memory
