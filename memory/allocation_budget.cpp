#include "memory/allocation_budget.h"

#include <malloc.h>

#include <cstdlib>

// Defined when the program runs on jemalloc (the ncclguard binary links it; the unit tests run
// on glibc's malloc, where it is null).
extern "C" std::size_t nallocx(std::size_t size, int flags) __attribute__((weak));

namespace ncclguard::memory {
namespace {

// Taken from the pool a mebibyte at a time, so scopes contend on it rarely.
constexpr std::size_t kPoolChunk = std::size_t{1} << 20;

constinit thread_local BudgetScope* t_scope = nullptr;

// True when malloc is jemalloc's and its size classes are the ones JemallocSizeClass computes:
// nallocx alone would also be found beside another malloc (gperftools exports one; a sanitizer or
// valgrind replaces malloc but leaves jemalloc's nallocx). Learnt from real blocks by the first
// BudgetScope, before it counts anything; read by every allocation inside a scope.
std::atomic<bool> g_size_classes_known{false};

// Once a process: later scopes find the answer already stored.
void LearnSizeClasses() {
  [[maybe_unused]] static const bool learnt = [] {
    bool known = nallocx != nullptr;
    for (const std::size_t size : {std::size_t{129}, std::size_t{4097}, std::size_t{70000}}) {
      if (!known) break;
      void* probe = std::malloc(size);
      known = probe != nullptr && malloc_usable_size(probe) == JemallocSizeClass(size) &&
              nallocx(size, 0) == JemallocSizeClass(size);
      std::free(probe);
    }
    g_size_classes_known.store(known, std::memory_order_relaxed);
    return true;
  }();
}

// The bytes a block of `size` (asked of malloc, no extra alignment) holds. On jemalloc, computed
// from the size: jemalloc's own answers (malloc_usable_size walks its page map, nallocx checks
// its state first) cost 35-40 instructions, and the webhook allocates ~1,200 blocks a review.
std::size_t UsableSize(void* block, std::size_t size) {
  return g_size_classes_known.load(std::memory_order_relaxed) ? JemallocSizeClass(size)
                                                              : malloc_usable_size(block);
}

std::atomic<void*> g_emergency_reserve{nullptr};

void TakeEmergencyReserve() {
  if (g_emergency_reserve.load(std::memory_order_relaxed) != nullptr) return;
  // Address space only: the block is never written, so it costs no resident memory.
  void* block = std::malloc(kEmergencyReserveBytes);
  void* expected = nullptr;
  if (block != nullptr && !g_emergency_reserve.compare_exchange_strong(expected, block)) {
    std::free(block);
  }
}

// The system refused an allocation: frees the reserve for the unwinding that follows. True when
// there was one to free.
bool ReleaseEmergencyReserve() {
  void* block = g_emergency_reserve.exchange(nullptr);
  std::free(block);
  return block != nullptr;
}

}  // namespace

void* Allocate(std::size_t size, std::size_t alignment) {
  if (size == 0) size = 1;
  while (true) {
    void* block = nullptr;
    if (alignment <= alignof(std::max_align_t)) {
      block = std::malloc(size);
    } else if (posix_memalign(&block, alignment, size) != 0) {
      block = nullptr;
    }
    if (block != nullptr) {
      if (BudgetScope* scope = t_scope) {
        const std::size_t usable = alignment <= alignof(std::max_align_t)
                                       ? UsableSize(block, size)
                                       : malloc_usable_size(block);
        try {
          scope->Charge(usable);
        } catch (...) {
          std::free(block);
          throw;
        }
      }
      return block;
    }
    if (std::new_handler handler = std::get_new_handler()) {
      handler();
      continue;
    }
    ReleaseEmergencyReserve();
    // Whatever budget applies, the unwinding that follows must be able to allocate.
    if (BudgetScope* scope = t_scope) scope->StopRefusing();
    throw std::bad_alloc();
  }
}

void* AllocateNoThrow(std::size_t size, std::size_t alignment) noexcept {
  try {
    return Allocate(size, alignment);
  } catch (...) {
    return nullptr;
  }
}

void Free(void* block) noexcept {
  if (block == nullptr) return;
  if (BudgetScope* scope = t_scope) scope->Release(malloc_usable_size(block));
  std::free(block);
}

// A delete that is told the size its new asked for (every std::allocator's): counted from the
// size, as Allocate counted it.
void FreeSized(void* block, std::size_t size) noexcept {
  if (block == nullptr) return;
  if (BudgetScope* scope = t_scope) scope->Release(UsableSize(block, size));
  std::free(block);
}

bool BudgetPool::TryTake(std::size_t bytes) {
  const std::size_t capacity = capacity_.load(std::memory_order_relaxed);
  std::size_t in_use = in_use_.load(std::memory_order_relaxed);
  do {
    if (bytes > capacity || in_use > capacity - bytes) return false;
  } while (!in_use_.compare_exchange_weak(in_use, in_use + bytes, std::memory_order_relaxed));
  return true;
}

void BudgetPool::Give(std::size_t bytes) { in_use_.fetch_sub(bytes, std::memory_order_relaxed); }

const char* BudgetExceeded::what() const noexcept {
  return pool_ ? "the memory budget shared by requests in flight is spent"
               : "the request's memory budget is spent";
}

BudgetScope::BudgetScope(std::size_t limit, BudgetPool* pool)
    : limit_(limit), pool_(pool), outer_(t_scope) {
  TakeEmergencyReserve();
  LearnSizeClasses();
  t_scope = this;
}

BudgetScope::~BudgetScope() {
  t_scope = outer_;
  if (pool_ != nullptr) pool_->Give(taken_);
}

void BudgetScope::Charge(std::size_t bytes) {
  allocated_ += static_cast<std::ptrdiff_t>(bytes);
  if (allocated_ <= static_cast<std::ptrdiff_t>(peak_)) return;
  const auto now = static_cast<std::size_t>(allocated_);
  if (exceeded_) {
    peak_ = now;
    return;
  }
  bool refused_by_pool = false;
  bool refused = now > limit_;
  if (!refused && pool_ != nullptr && now > taken_) {
    // A chunk ahead when the pool has room for one, else just what is needed.
    const std::size_t need = now - taken_;
    const std::size_t chunk = (need + kPoolChunk - 1) / kPoolChunk * kPoolChunk;
    if (pool_->TryTake(chunk)) {
      taken_ += chunk;
    } else if (pool_->TryTake(need)) {
      taken_ += need;
    } else {
      refused = refused_by_pool = true;
    }
  }
  if (refused) {
    allocated_ -= static_cast<std::ptrdiff_t>(bytes);
    exceeded_ = true;
    throw BudgetExceeded(refused_by_pool);
  }
  peak_ = now;
}

}  // namespace ncclguard::memory
