// The replaceable global allocation functions ([new.delete]), routed through the allocation
// budget (memory/allocation_budget.h): their own target, ncclguard_allocation_hooks, linked by the
// ncclguard binary and the tests of the budget only. A program without it (the fuzzers, under
// ASan's allocator) keeps its own operator new, and a BudgetScope there counts nothing.
#include <cstddef>
#include <new>

#include "memory/allocation_budget.h"

// The replaceable global allocation functions ([new.delete]): every form routes through
// Allocate and Free above.
using ncclguard::memory::Allocate;
using ncclguard::memory::AllocateNoThrow;
using ncclguard::memory::Free;
using ncclguard::memory::FreeSized;

void* operator new(std::size_t size) { return Allocate(size, 0); }
void* operator new[](std::size_t size) { return Allocate(size, 0); }
void* operator new(std::size_t size, const std::nothrow_t&) noexcept {
  return AllocateNoThrow(size, 0);
}
void* operator new[](std::size_t size, const std::nothrow_t&) noexcept {
  return AllocateNoThrow(size, 0);
}
void* operator new(std::size_t size, std::align_val_t alignment) {
  return Allocate(size, static_cast<std::size_t>(alignment));
}
void* operator new[](std::size_t size, std::align_val_t alignment) {
  return Allocate(size, static_cast<std::size_t>(alignment));
}
void* operator new(std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  return AllocateNoThrow(size, static_cast<std::size_t>(alignment));
}
void* operator new[](std::size_t size, std::align_val_t alignment, const std::nothrow_t&) noexcept {
  return AllocateNoThrow(size, static_cast<std::size_t>(alignment));
}

void operator delete(void* block) noexcept { Free(block); }
void operator delete[](void* block) noexcept { Free(block); }
void operator delete(void* block, std::size_t size) noexcept { FreeSized(block, size); }
void operator delete[](void* block, std::size_t size) noexcept { FreeSized(block, size); }
void operator delete(void* block, const std::nothrow_t&) noexcept { Free(block); }
void operator delete[](void* block, const std::nothrow_t&) noexcept { Free(block); }
void operator delete(void* block, std::align_val_t) noexcept { Free(block); }
void operator delete[](void* block, std::align_val_t) noexcept { Free(block); }
void operator delete(void* block, std::size_t, std::align_val_t) noexcept { Free(block); }
void operator delete[](void* block, std::size_t, std::align_val_t) noexcept { Free(block); }
void operator delete(void* block, std::align_val_t, const std::nothrow_t&) noexcept { Free(block); }
void operator delete[](void* block, std::align_val_t, const std::nothrow_t&) noexcept {
  Free(block);
}
