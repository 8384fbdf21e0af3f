// How an informer stores its cached objects (kube/informer.h): a compact binary form of a Json in
// which each object key is written once, in a dictionary the cache's objects share, and referred
// to by number. Half of a projected pod's bytes are its keys ("batch.kubernetes.io/controller-uid",
// "vpc.amazonaws.com/efa", "volumeMounts", ...), and every pod has the same ones: at 100,000 pods
// that half is ~50 MB written once per pod. Values are written in full (a uid, a name).
//
// Not thread-safe: the informer packs and unpacks under its lock. The dictionary only grows, so
// what was packed earlier always unpacks to what was packed, and the same object packs to the same
// bytes. It stops growing at kMaxKeys keys or kMaxKeyBytes bytes, and keys longer than
// kMaxKeyLength are not in it: keys a cluster's users make unique (label keys) cost their bytes in
// each object, as before, never an unbounded dictionary.
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
  static constexpr std::size_t kMaxKeys = 8192;
  static constexpr std::size_t kMaxKeyBytes = 256 * 1024;
  static constexpr std::size_t kMaxKeyLength = 128;
  // Deeper values are not packed (Pack throws): the API server's objects are far shallower.
  static constexpr int kMaxDepth = 256;

  std::vector<std::uint8_t> Pack(const core::Json& value);
  // Throws std::runtime_error on bytes Pack did not make (truncated, an unknown key number).
  core::Json Unpack(std::span<const std::uint8_t> bytes) const;

  std::size_t dictionary_keys() const { return keys_.size(); }
  // The keys' bytes and what holding them costs (strings and the lookup table), roughly.
  std::size_t dictionary_bytes() const;

 private:
  void PackValue(const core::Json& value, int depth, std::vector<std::uint8_t>& out);
  void PackKey(const std::string& key, std::vector<std::uint8_t>& out);

  std::deque<std::string> keys_;  // a deque: the views in ids_ stay valid as it grows
  std::unordered_map<std::string_view, std::uint32_t> ids_;
  std::size_t key_bytes_ = 0;
};

}  // namespace ncclguard::kube
