// What the webhook's reviews in flight may hold under the container's memory limit, which they
// share with the controller's caches (memory/headroom.h).
#include "memory/headroom.h"
#include "memory/resident.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <memory>

namespace ncclguard::test {
namespace {

constexpr std::size_t Mebibytes(std::size_t n) { return n << 20; }

TEST(MemoryHeadroom, ReviewsGetTheWholeBudgetWhileTheProcessIsSmall) {
  // The chart's 256Mi with a 40 MiB process: 256 - 32 reserved - 40 leaves more than 128.
  EXPECT_EQ(memory::InFlightCapacity(Mebibytes(256), Mebibytes(40), 0, Mebibytes(128)),
            Mebibytes(128));
}

TEST(MemoryHeadroom, TheControllersCachesCutWhatTheReviewsMayHold) {
  // At 5,000 nodes and 100k pods the controller holds about 150 MiB at its peak: 256 - 32 - 150.
  EXPECT_EQ(memory::InFlightCapacity(Mebibytes(256), Mebibytes(150), 0, Mebibytes(128)),
            Mebibytes(74));
  // What the reviews allocated is theirs, not the rest of the process's.
  EXPECT_EQ(memory::InFlightCapacity(Mebibytes(256), Mebibytes(190), Mebibytes(40), Mebibytes(128)),
            Mebibytes(74));
  // A larger limit reserves an eighth of itself.
  EXPECT_EQ(memory::InFlightCapacity(Mebibytes(1024), Mebibytes(800), 0, Mebibytes(128)),
            Mebibytes(96));
}

TEST(MemoryHeadroom, AProcessAtItsLimitStillTakesOrdinaryReviews) {
  EXPECT_EQ(memory::InFlightCapacity(Mebibytes(256), Mebibytes(250), 0, Mebibytes(128)),
            memory::kInFlightFloor);
  EXPECT_EQ(memory::InFlightCapacity(Mebibytes(256), Mebibytes(900), 0, Mebibytes(128)),
            memory::kInFlightFloor);
  EXPECT_EQ(memory::InFlightCapacity(Mebibytes(1), 0, 0, Mebibytes(128)), memory::kInFlightFloor);
  // Never above what was configured, the floor included.
  EXPECT_EQ(memory::InFlightCapacity(Mebibytes(256), Mebibytes(250), 0, Mebibytes(1)),
            Mebibytes(1));
  // Nor below zero when the reviews allocated more than is resident yet (blocks not touched).
  EXPECT_EQ(memory::InFlightCapacity(Mebibytes(256), Mebibytes(10), Mebibytes(60), Mebibytes(128)),
            Mebibytes(128));
}

TEST(MemoryHeadroom, TheLimitIsReadAsTheDownwardApiWritesIt) {
  EXPECT_EQ(memory::ParseMemoryLimit("268435456"), Mebibytes(256));
  EXPECT_EQ(memory::ParseMemoryLimit("1"), 1u);
  EXPECT_EQ(memory::ParseMemoryLimit("1125899906842624"), std::size_t{1} << 50);
  for (const char* bad : {"", "0", "256Mi", "-1", "+5", "1.5", " 5", "5 ", "1125899906842625",
                          "99999999999999999999999", "0x10"}) {
    EXPECT_EQ(memory::ParseMemoryLimit(bad), std::nullopt) << '"' << bad << '"';
  }
}

TEST(MemoryHeadroom, TheResidentSizeGrowsWithTouchedMemory) {
  const std::optional<std::size_t> before = memory::ResidentBytes();
  ASSERT_TRUE(before.has_value());
  EXPECT_GT(*before, Mebibytes(1));
  constexpr std::size_t kTouched = Mebibytes(64);
  auto block = std::make_unique<char[]>(kTouched);
  std::memset(block.get(), 1, kTouched);
  const std::optional<std::size_t> after = memory::ResidentBytes();
  ASSERT_TRUE(after.has_value());
  EXPECT_GE(*after, *before + kTouched / 2);
  EXPECT_EQ(block[kTouched - 1], 1);
}

}  // namespace
}  // namespace ncclguard::test
