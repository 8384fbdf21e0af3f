// How an informer stores its cached objects (kube/informer.h): a compact binary form of a Json in
// which strings the cache's objects share are written once, in a dictionary, and referred to by
// number. Every pod has the same keys ("batch.kubernetes.io/controller-uid",
// "vpc.amazonaws.com/efa", "volumeMounts", ...), and a job's pods the same values (its uid, its
// image, the mount paths): at 100,000 pods those are most of a pod's bytes.
//
// What is shared: every object key (up to kMaxKeyLength bytes), and a value string (kMinValueLength
// to kMaxValueLength bytes) once a second object has it. A value only one object has (a pod's name,
// its uid) stays in that object's bytes: a dictionary entry costs more than it. Entries are
// counted: Release says that bytes Pack made are no longer stored, and an entry no stored object
// refers to is dropped, so the dictionary holds what the cache holds, never more, whatever the
// cluster's users name their labels.
//
// Not thread-safe: the informer packs, unpacks and releases under its lock, so an entry a stored
// object refers to is never dropped while it is read.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "core/json.h"

namespace ncclguard::kube {

class PackedJson {
 public:
  static constexpr std::size_t kMaxKeyLength = 128;
  static constexpr std::size_t kMinValueLength = 4;
  static constexpr std::size_t kMaxValueLength = 256;
  // A bound of its own, far above what a cache holds (keys and values shared by two objects).
  static constexpr std::size_t kMaxEntries = 1 << 20;
  // Deeper values are not packed (Pack throws): the API server's objects are far shallower.
  static constexpr int kMaxDepth = 256;

  // `owner` names the stored object (its cache key): a value is shared once an object other than
  // its first owner has it.
  std::vector<std::uint8_t> Pack(const core::Json& value, std::string_view owner);
  // The bytes Pack made are no longer stored: the entries they referred to are released.
  void Release(std::span<const std::uint8_t> bytes);
  // Throws std::runtime_error on bytes Pack did not make (truncated, an unknown entry).
  core::Json Unpack(std::span<const std::uint8_t> bytes) const;

  std::size_t dictionary_entries() const { return ids_.size(); }
  // The entries' bytes and what holding them costs (strings and the lookup table), roughly.
  std::size_t dictionary_bytes() const;

 private:
  struct Entry {
    std::string text;
    std::uint32_t refs = 0;
  };
  // A value string last seen, by its hash: in which object (the hash of its key).
  struct Seen {
    std::uint64_t value = 0;
    std::uint64_t owner = 0;
  };
  static constexpr std::size_t kSeenSlots = 1024;  // 16 KiB: pods of a job come together

  class Packer;
  // The entry for `text`, one more reference taken; kNone when it is written in full.
  std::uint32_t Take(const std::string& text, bool key, std::uint64_t owner);
  void Drop(std::uint32_t id);

  std::deque<Entry> entries_;  // a deque: the views in ids_ stay valid as it grows
  std::vector<std::uint32_t> free_;
  std::unordered_map<std::string_view, std::uint32_t> ids_;
  std::vector<Seen> seen_;  // kSeenSlots, allocated with the first value
  std::size_t text_bytes_ = 0;
};

}  // namespace ncclguard::kube
