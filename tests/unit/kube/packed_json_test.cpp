// PackedJson, how an informer stores its objects: what is packed unpacks to the same Json (types,
// key order), keys are stored once, the dictionary is bounded, and bytes it did not make are an
// error, never a crash.
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
  for (const Json& value : values) {
    const Json back = packed.Unpack(packed.Pack(value));
    EXPECT_EQ(back, value) << value.dump();
    EXPECT_EQ(back.type(), value.type()) << value.dump();
    EXPECT_EQ(back.dump(), value.dump()) << "the keys keep their order";
  }
}

TEST(PackedJsonTest, EachKeyIsStoredOnceForEveryObject) {
  PackedJson packed;
  const auto first = packed.Pack(CachedPod(1));
  const std::size_t keys = packed.dictionary_keys();
  const auto second = packed.Pack(CachedPod(2));
  EXPECT_EQ(packed.dictionary_keys(), keys) << "the second pod has no key the first lacked";
  EXPECT_LT(second.size() * 2, Json::to_msgpack(CachedPod(2)).size())
      << "less than half of its MessagePack";
  EXPECT_EQ(packed.Pack(CachedPod(2)), second) << "the same object, the same bytes";
  EXPECT_EQ(packed.Unpack(first), CachedPod(1)) << "bytes packed earlier still unpack";
}

TEST(PackedJsonTest, TheDictionaryStopsGrowingAndLaterKeysAreWrittenInFull) {
  PackedJson packed;
  std::vector<std::vector<std::uint8_t>> all;
  for (std::size_t i = 0; i < PackedJson::kMaxKeys + 100; ++i) {
    all.push_back(packed.Pack(Json{{"unique-label-key-" + std::to_string(i), "v"}}));
  }
  EXPECT_EQ(packed.dictionary_keys(), PackedJson::kMaxKeys);
  const Json long_key{{std::string(PackedJson::kMaxKeyLength + 1, 'k'), 1}};
  EXPECT_EQ(packed.Unpack(packed.Pack(long_key)), long_key);
  for (std::size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ(packed.Unpack(all[i]), (Json{{"unique-label-key-" + std::to_string(i), "v"}}));
  }
  EXPECT_LE(packed.dictionary_bytes(), 2 * 1024 * 1024u);
}

TEST(PackedJsonTest, BytesItDidNotMakeAreAnErrorNeverACrash) {
  PackedJson packed;
  const auto bytes = packed.Pack(CachedPod(3));
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
  // A count of 2^63 items in 10 bytes is refused before anything is reserved.
  const std::vector<std::uint8_t> huge = {7, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f};
  EXPECT_THROW(packed.Unpack(huge), std::runtime_error);
  const std::vector<std::uint8_t> unknown_key = {8, 1, 0xff, 0x01, 0};
  EXPECT_THROW(packed.Unpack(unknown_key), std::runtime_error);
  EXPECT_THROW(packed.Unpack(std::vector<std::uint8_t>{3, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80,
                                                       0x80, 0x80, 0x80, 0x01}),
               std::runtime_error);
}

TEST(PackedJsonTest, NestingPastTheLimitIsRefusedBothWays) {
  PackedJson packed;
  Json deep = Json::array();
  for (int i = 0; i < PackedJson::kMaxDepth + 5; ++i) deep = Json::array({deep});
  EXPECT_THROW(packed.Pack(deep), std::runtime_error);
  // The same nesting written by hand: one byte per level, refused without exhausting the stack.
  std::vector<std::uint8_t> bytes;
  for (int i = 0; i < 100000; ++i) bytes.insert(bytes.end(), {7, 1});
  EXPECT_THROW(packed.Unpack(bytes), std::runtime_error);
}

}  // namespace
}  // namespace ncclguard::kube
