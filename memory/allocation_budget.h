// Memory budgets for work on untrusted input (an admission review): every allocation the C++
// code makes on the thread while a BudgetScope is alive counts against the scope's limit and
// against a BudgetPool shared by every scope in flight. The allocation that would cross either
// throws BudgetExceeded (a std::bad_alloc), so the work unwinds and fails alone instead of the
// process growing until it is killed. The counting lives in this library's replacement of the
// global operator new and delete; a program that links it counts, one that does not is unchanged.
#pragma once

#include <atomic>
#include <bit>
#include <cstddef>
#include <new>

namespace ncclguard::memory {

// Bytes that all the scopes using it may hold together. Taken in chunks, so the shared counter
// is touched once per chunk, not per allocation.
class BudgetPool {
 public:
  explicit BudgetPool(std::size_t capacity) : capacity_(capacity) {}
  BudgetPool(const BudgetPool&) = delete;
  BudgetPool& operator=(const BudgetPool&) = delete;

  // Takes `bytes` if they fit under the capacity.
  bool TryTake(std::size_t bytes);
  void Give(std::size_t bytes);
  std::size_t InUse() const { return in_use_.load(std::memory_order_relaxed); }
  std::size_t Capacity() const { return capacity_.load(std::memory_order_relaxed); }
  // A new capacity for what is taken from now on. What is held stays held: a capacity below it
  // refuses every take until enough is given back.
  void SetCapacity(std::size_t capacity) { capacity_.store(capacity, std::memory_order_relaxed); }

 private:
  std::atomic<std::size_t> capacity_;
  std::atomic<std::size_t> in_use_{0};
};

// The size class jemalloc (5.x, 16-byte quantum, as Debian builds it) serves `size` from: what
// malloc_usable_size reads back for a block it allocated of that size. On jemalloc the budget
// counts blocks by it (memory_tests holds it to jemalloc's own nallocx).
constexpr std::size_t JemallocSizeClass(std::size_t size) {
  if (size > std::size_t{1} << 62) return size;  // past any class: malloc refuses it anyway
  if (size <= 8) return 8;
  if (size <= 128) return (size + 15) & ~std::size_t{15};
  // Four classes for each doubling: (2^k, 2^(k+1)] is cut in steps of 2^(k-2).
  const std::size_t step = std::size_t{1} << (std::bit_width(size - 1) - 3);
  return (size + step - 1) & ~(step - 1);
}

class BudgetExceeded : public std::bad_alloc {
 public:
  explicit BudgetExceeded(bool pool) : pool_(pool) {}
  // True when the shared pool was spent (other work holds it), false when this scope's own
  // limit was reached.
  bool Pool() const { return pool_; }
  const char* what() const noexcept override;

 private:
  bool pool_;
};

// Counts this thread's allocations from construction to destruction. Once an allocation has
// been refused the scope stops refusing: what runs next unwinds the work and builds its error
// answer, and nlohmann::json's destructor allocates a stack as it frees a tree (a second throw
// there would end the process). At most one scope is active per thread; a nested one suspends
// the outer one until it ends.
class BudgetScope {
 public:
  // `pool` may be null (no shared bound).
  BudgetScope(std::size_t limit, BudgetPool* pool);
  ~BudgetScope();
  BudgetScope(const BudgetScope&) = delete;
  BudgetScope& operator=(const BudgetScope&) = delete;

  // Net bytes allocated on this thread since the scope began (frees of older memory count
  // against it, so it can be negative), and the highest it reached.
  std::ptrdiff_t Allocated() const { return allocated_; }
  std::size_t Peak() const { return peak_; }
  // True once an allocation was refused.
  bool Exceeded() const { return exceeded_; }

  // Called by operator new/delete with the usable size of each block.
  void Charge(std::size_t bytes);  // throws BudgetExceeded
  void Release(std::size_t bytes) noexcept { allocated_ -= static_cast<std::ptrdiff_t>(bytes); }
  // The system refused an allocation: the work is failing anyway, refuse nothing more.
  void StopRefusing() noexcept { exceeded_ = true; }

 private:
  std::size_t limit_;
  BudgetPool* pool_;
  BudgetScope* outer_;
  std::ptrdiff_t allocated_ = 0;
  std::size_t peak_ = 0;
  std::size_t taken_ = 0;  // from the pool, in chunks
  bool exceeded_ = false;
};

// Bytes of address space held back for unwinding after the system refuses an allocation (an
// address-space limit, overcommit off): the first refusal frees it and throws std::bad_alloc,
// so the destructors that run next can allocate. Taken again when the next scope begins.
inline constexpr std::size_t kEmergencyReserveBytes = std::size_t{64} << 20;

// What the replaced global operator new and delete call (memory/allocation_hooks.cpp, target
// ncclguard_allocation_hooks): the block charged to the thread's innermost BudgetScope and its
// pool (Allocate throws BudgetExceeded or std::bad_alloc; AllocateNoThrow returns null), and
// released from it. `alignment` 0: the default.
void* Allocate(std::size_t size, std::size_t alignment);
void* AllocateNoThrow(std::size_t size, std::size_t alignment) noexcept;
void Free(void* block) noexcept;
void FreeSized(void* block, std::size_t size) noexcept;

}  // namespace ncclguard::memory
