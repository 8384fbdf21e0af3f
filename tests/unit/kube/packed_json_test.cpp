// PackedJson, how an informer stores its objects: what is packed unpacks to the same Json (types,
// key order), shared strings are stored once, the dictionary holds only what stored objects refer
// to, and bytes it did not make are an error, never a crash.
#include "kube/packed_json.h"

#include <gtest/gtest.h>

#include <limits>
#include <stdexcept>
#include <string>

namespace ncclguard::kube {
namespace {

using core::Json;

// A pod as the controller caches it (the job labels, the node, what the audit reads).
Json CachedPod(int index) {
  const std::string n = std::to_string(index);
  return Json::parse(R"({
    "metadata": {"name": "train-)" +
                     n + R"(", "namespace": "team-a",
                 "uid": "0b4f8a3c-1d2e-4f5a-9b8c-7d6e5f4a3b)" +
                     n + R"(", "resourceVersion": "12)" + n + R"(",
                 "labels": {"batch.kubernetes.io/job-name": "train",
                            "batch.kubernetes.io/job-completion-index": ")" +
                     n + R"("},
                 "ownerReferences": [{"kind": "Job", "controller": true}]},
    "apiVersion": "v1", "kind": "Pod",
    "spec": {"nodeName": "node-)" +
                     n + R"(",
             "containers": [{"name": "pytorch", "image": "registry.invalid/trainer:1",
               "env": [{"name": "NCCL_DEBUG", "value": "INFO"}],
               "resources": {"limits": {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32},
                             "requests": {"nvidia.com/gpu": 8, "vpc.amazonaws.com/efa": 32}},
               "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm", "readOnly": false}]}],
             "nodeSelector": {"node.kubernetes.io/instance-type": "p5.48xlarge"}},
    "status": {"phase": "Running"}})");
}

TEST(PackedJsonTest, WhatIsPackedUnpacksToTheSameValueTypesAndKeyOrder) {
  PackedJson packed;
  const Json values[] = {
      nullptr,
      true,
      false,
      Json(static_cast<Json::number_unsigned_t>(0)),
      Json(std::numeric_limits<std::uint64_t>::max()),
      Json(static_cast<Json::number_integer_t>(5)),
      Json(std::numeric_limits<std::int64_t>::min()),
      Json(std::numeric_limits<std::int64_t>::max()),
      Json(-1),
      Json(0.1),
      Json(-1e308),
      "",
      std::string("nul\0inside", 10),
      Json::array(),
      Json::object(),
      Json::parse(R"({"z": 1, "a": [1, "x", {"": null}], "m": {"k": -2.5}})"),
      CachedPod(7),
  };
  int owner = 0;
  for (const Json& value : values) {
    // Each value twice, by two owners: the second time its strings are shared.
    for (int twice = 0; twice < 2; ++twice) {
      const Json back = packed.Unpack(packed.Pack(value, "ns/object-" + std::to_string(++owner)));
      EXPECT_EQ(back, value) << value.dump();
      EXPECT_EQ(back.type(), value.type()) << value.dump();
      EXPECT_EQ(back.dump(), value.dump()) << "the keys keep their order";
    }
  }
}

TEST(PackedJsonTest, KeysAndTheValuesOfASecondObjectAreStoredOnce) {
  PackedJson packed;
  const auto first = packed.Pack(CachedPod(1), "team-a/train-1");
  const std::size_t keys = packed.dictionary_entries();
  const auto second = packed.Pack(CachedPod(2), "team-a/train-2");
  EXPECT_GT(packed.dictionary_entries(), keys)
      << "the values both pods have, shared from the second";
  const auto third = packed.Pack(CachedPod(3), "team-a/train-3");
  EXPECT_LT(third.size() * 3, Json::to_msgpack(CachedPod(3)).size())
      << "a third of its MessagePack, or less";
  EXPECT_EQ(packed.Unpack(first), CachedPod(1)) << "bytes packed earlier still unpack";
  EXPECT_EQ(packed.Unpack(second), CachedPod(2));
  EXPECT_EQ(packed.Unpack(third), CachedPod(3));

  // A value only one object has stays in its bytes, however often that object is packed.
  const std::size_t entries = packed.dictionary_entries();
  for (int update = 0; update < 5; ++update) {
    packed.Release(packed.Pack(Json{{"name", "only-mine-x7k2q"}}, "team-a/lonely"));
  }
  EXPECT_EQ(packed.dictionary_entries(), entries);
}

TEST(PackedJsonTest, TheDictionaryHoldsOnlyWhatStoredObjectsReferTo) {
  PackedJson packed;
  std::vector<std::vector<std::uint8_t>> stored;
  for (int i = 0; i < 20000; ++i) {
    // Unique label keys and values a second object shares: each its own entries.
    const std::string n = std::to_string(i / 2);
    stored.push_back(packed.Pack(Json{{"labels", {{"user.example/key-" + n, "value-" + n}}}},
                                 "ns/pod-" + std::to_string(i)));
  }
  EXPECT_GE(packed.dictionary_entries(), 10000u);
  for (std::size_t i = 0; i < stored.size(); ++i) {
    const std::string n = std::to_string(i / 2);
    ASSERT_EQ(packed.Unpack(stored[i]),
              (Json{{"labels", {{"user.example/key-" + n, "value-" + n}}}}));
  }
  for (const auto& bytes : stored) packed.Release(bytes);
  EXPECT_EQ(packed.dictionary_entries(), 0u) << "every entry dropped with its last object";
  // Dropped entries are used again, not grown past.
  const auto again = packed.Pack(CachedPod(1), "team-a/train-1");
  EXPECT_EQ(packed.Unpack(again), CachedPod(1));
  const Json long_key{{std::string(PackedJson::kMaxKeyLength + 1, 'k'), 1}};
  EXPECT_EQ(packed.Unpack(packed.Pack(long_key, "ns/long")), long_key);
}

// An object of 100,000 keys (about 1 MB as JSON) and a list of 10,000 items: packed in bytes that
// grow with the input, not more, and every entry given back when the object goes.
TEST(PackedJsonTest, AHundredThousandKeysAndTenThousandItemsCostWhatTheyHold) {
  PackedJson packed;
  Json big = Json::object();
  // Built as the vector it is (ordered_json's operator[] searches first: quadratic here).
  auto& fields = static_cast<Json::object_t::Container&>(big.get_ref<Json::object_t&>());
  for (int i = 0; i < 100000; ++i) fields.emplace_back("annotation-" + std::to_string(i), i);
  Json items = Json::array();
  for (int i = 0; i < 10000; ++i) items.push_back({{"name", "item-" + std::to_string(i)}});
  big["items"] = items;
  const std::size_t text = big.dump().size();
  const auto bytes = packed.Pack(big, "ns/big");
  EXPECT_LT(bytes.size(), text) << "no more bytes than the JSON text";
  EXPECT_LT(packed.dictionary_bytes(), 100 * text) << "the entries grow with the keys, linearly";
  EXPECT_EQ(packed.Unpack(bytes), big);
  packed.Release(bytes);
  EXPECT_EQ(packed.dictionary_entries(), 0u);
}

TEST(PackedJsonTest, BytesItDidNotMakeAreAnErrorNeverACrash) {
  PackedJson packed;
  (void)packed.Pack(CachedPod(2), "team-a/train-2");
  const auto bytes = packed.Pack(CachedPod(3), "team-a/train-3");
  // Every truncation.
  for (std::size_t length = 0; length < bytes.size(); ++length) {
    EXPECT_THROW(packed.Unpack(std::span(bytes.data(), length)), std::runtime_error) << length;
  }
  // Every single byte changed to every value: an error or some other value, never a crash.
  for (std::size_t at = 0; at < bytes.size(); ++at) {
    for (int value : {0x00, 0x07, 0x08, 0x0a, 0x7f, 0x80, 0xff}) {
      auto changed = bytes;
      changed[at] = static_cast<std::uint8_t>(value);
      try {
        (void)packed.Unpack(changed);
      } catch (const std::runtime_error&) {
      }
    }
  }
  const std::vector<std::uint8_t> trailing = {0, 0};
  EXPECT_THROW(packed.Unpack(trailing), std::runtime_error);
  EXPECT_THROW(packed.Release(trailing), std::runtime_error);
  // A count of 2^63 items in 10 bytes is refused before anything is reserved.
  const std::vector<std::uint8_t> huge = {7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
  EXPECT_THROW(packed.Unpack(huge), std::runtime_error);
  const std::vector<std::uint8_t> unknown_entry = {8, 1, 0xff, 0x01, 0};
  EXPECT_THROW(packed.Unpack(unknown_entry), std::runtime_error);
  EXPECT_THROW(packed.Release(unknown_entry), std::runtime_error);
  EXPECT_THROW(packed.Unpack(std::vector<std::uint8_t>{3, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                                       0x80, 0x80, 0x80, 0x01}),
               std::runtime_error);
  EXPECT_EQ(packed.Unpack(bytes), CachedPod(3)) << "what was stored is unharmed";
}

TEST(PackedJsonTest, NestingPastTheLimitIsRefusedBothWaysAndTakesNoEntry) {
  PackedJson packed;
  Json deep = Json::array();
  for (int i = 0; i < PackedJson::kMaxDepth + 5; ++i) deep = Json::array({deep});
  deep = Json{{"a-key-of-its-own", deep}};
  EXPECT_THROW(packed.Pack(deep, "ns/deep"), std::runtime_error);
  EXPECT_EQ(packed.dictionary_entries(), 0u) << "the entries it had taken are given back";
  // The same nesting written by hand: two bytes per level, refused without exhausting the stack.
  std::vector<std::uint8_t> bytes;
  for (int i = 0; i < 100000; ++i) bytes.insert(bytes.end(), {7, 1});
  EXPECT_THROW(packed.Unpack(bytes), std::runtime_error);
  EXPECT_THROW(packed.Release(bytes), std::runtime_error);
}

}  // namespace
}  // namespace ncclguard::kube
