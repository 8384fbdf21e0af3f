// One registry for everything that registers itself from its own file: rules (core/rules/), node
// checks (probes/checks/), diagnoses and log matchers (controllers/diagnoses/) and controllers
// (manager/). An entry file ends with
//
//   NCCLGUARD_REGISTER(MyRule);           // a class: registered as its base's entry
//   NCCLGUARD_REGISTER(DeclareMyThing);   // a function returning an entry by value
//
// and adding one is that file and nothing else to edit.
//
// Registration happens during static initialisation, into a function-local static (so the order
// in which files are initialised does not matter); afterwards a registry is read-only. The
// libraries holding entries are linked whole (WHOLE_ARCHIVE), or no entry would be linked in.
#pragma once

#include <algorithm>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace ncclguard::core {

// How the registry of `Entry` reads its entries; specialised next to each entry type:
//   static constexpr std::string_view kKind;      // "rule": names the entry in messages
//   static std::string_view Id(const Entry&);      // unique within the registry
// and optionally
//   static auto Order(const Entry&);               // sorted by (Order, Id); else by Id
//   static void OnRegister(const Entry&);          // e.g. core::Catalog::Register; may throw
//   template <typename T> static std::unique_ptr<Entry> Make();  // else std::make_unique<T>()
template <typename Entry>
struct RegistryTraits;

// The registered entries of one type, sorted, owned for the life of the process.
template <typename Entry>
class Registry {
 public:
  using Traits = RegistryTraits<Entry>;

  static std::span<const Entry* const> All() { return Store().sorted; }

  // A binary search of the id index: the webhook looks a rule up for every finding it reports.
  static const Entry* Find(std::string_view id) {
    const std::vector<const Entry*>& by_id = Store().by_id;
    const auto at = std::lower_bound(by_id.begin(), by_id.end(), id, IdBefore);
    return at != by_id.end() && Traits::Id(**at) == id ? *at : nullptr;
  }

  // Throws std::logic_error for an id registered twice (or whatever OnRegister rejects): a
  // programming error, caught at start-up. A refused entry is not registered.
  static const Entry& Add(std::unique_ptr<Entry> entry) {
    const std::string_view id = Traits::Id(*entry);
    if (Find(id) != nullptr) {
      throw std::logic_error(std::string(Traits::kKind) + " \"" + std::string(id) +
                             "\" registered twice: ids must be unique (is an id copied, or "
                             "NCCLGUARD_REGISTER written twice?)");
    }
    if constexpr (requires { Traits::OnRegister(*entry); }) Traits::OnRegister(*entry);
    Data& store = Store();
    const Entry* raw = entry.get();
    store.owned.push_back(std::move(entry));
    store.sorted.insert(std::upper_bound(store.sorted.begin(), store.sorted.end(), raw, Before),
                        raw);
    store.by_id.insert(std::lower_bound(store.by_id.begin(), store.by_id.end(), id, IdBefore), raw);
    return *raw;
  }

 private:
  struct Data {
    std::vector<std::unique_ptr<Entry>> owned;
    std::vector<const Entry*> sorted;  // the registry's order: All()
    std::vector<const Entry*> by_id;   // by id alone: Find()
  };

  static Data& Store() {
    static Data data;
    return data;
  }

  static bool IdBefore(const Entry* entry, std::string_view id) { return Traits::Id(*entry) < id; }

  static bool Before(const Entry* a, const Entry* b) {
    if constexpr (requires { Traits::Order(*a); }) {
      return std::pair(Traits::Order(*a), Traits::Id(*a)) <
             std::pair(Traits::Order(*b), Traits::Id(*b));
    } else {
      return Traits::Id(*a) < Traits::Id(*b);
    }
  }
};

namespace detail {

// The entry type a class registers as: its base's `RegistryEntry` (Rule, Check, ...), else the
// class itself.
template <typename T>
struct EntryOf {
  using type = T;
};
template <typename T>
requires requires { typename T::RegistryEntry; }
struct EntryOf<T> {
  using type = typename T::RegistryEntry;
};

}  // namespace detail

// NCCLGUARD_REGISTER(T) for a class T: one instance (or what the traits' Make<T> builds).
template <typename T>
bool Register() {
  using Entry = typename detail::EntryOf<T>::type;
  using Traits = RegistryTraits<Entry>;
  if constexpr (requires { Traits::template Make<T>(); }) {
    Registry<Entry>::Add(Traits::template Make<T>());
  } else {
    Registry<Entry>::Add(std::make_unique<T>());
  }
  return true;
}

// NCCLGUARD_REGISTER(F) for a function F returning an entry by value (a controller's
// declaration).
template <auto Declare>
requires requires { Declare(); }
bool Register() {
  using Entry = decltype(Declare());
  Registry<Entry>::Add(std::make_unique<Entry>(Declare()));
  return true;
}

}  // namespace ncclguard::core

// At namespace scope in the entry's .cpp; the variable is named after the entry, so entries
// compiled together (a unity build) do not collide.
#define NCCLGUARD_REGISTER(Entry) \
  [[maybe_unused]] static const bool kRegistered##Entry = ::ncclguard::core::Register<Entry>()
