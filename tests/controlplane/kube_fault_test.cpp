// The kube/ client against a misbehaving server (a local HTTPS server that answers what the
// test says): malformed watch streams, servers that end every watch at once, 429 with
// Retry-After, and 5xx. The real API server cannot be made to do these on demand.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <mutex>
#include <string>
#include <vector>

#include "kube/client.h"
#include "kube/event_recorder.h"
#include "kube/informer.h"
#include "kube_test_support.h"
#include "test_https_server.h"

namespace ncclguard::testenv {
namespace {

using namespace std::chrono_literals;

kube::ClientConfig ConfigFor(const TestHttpsServer& server) {
  kube::ClientConfig config;
  config.server = server.Url("");
  while (config.server.ends_with('/')) config.server.pop_back();
  config.ca_data = server.ca_pem();
  return config;
}

std::string Event(const std::string& type, const std::string& name, int rv) {
  return R"({"type":")" + type + R"(","object":{"metadata":{"name":")" + name +
         R"(","namespace":"ns","resourceVersion":")" + std::to_string(rv) + R"("}}})" + "\n";
}

std::string List(const std::string& name, int rv) {
  return R"({"kind":"ConfigMapList","metadata":{"resourceVersion":")" + std::to_string(rv) +
         R"("},"items":[{"metadata":{"name":")" + name +
         R"(","namespace":"ns","resourceVersion":")" + std::to_string(rv) + R"("}}]})";
}

// A kube-apiserver Status answer.
HttpResponse StatusAnswer(int code, const std::string& reason) {
  HttpResponse response;
  response.status = code;
  response.body =
      R"({"kind":"Status","code":)" + std::to_string(code) + R"(,"reason":")" + reason + R"("})";
  return response;
}

// The gate's hold Event about a PyTorchJob, as the controller records it.
kube::EventSpec HoldEvent() {
  kube::EventSpec spec;
  spec.regarding = {{"apiVersion", "kubeflow.org/v1"},
                    {"kind", "PyTorchJob"},
                    {"namespace", "ns"},
                    {"name", "llama"},
                    {"uid", "u-1"}};
  spec.type = "Warning";
  spec.reason = "InsufficientValidatedNodes";
  spec.action = "Gate";
  spec.note = "held";
  return spec;
}

// The API server stores an Event but its answer is lost (it went away mid-request): the retry
// must find that Event, not write a second one. This server stores the first create and fails
// it, then answers like kube-apiserver: 409 for a stored name, 201 for a new one.
TEST(KubeFaults, AnEventWhoseCreateAnswerWasLostIsNotWrittenTwice) {
  std::mutex mutex;
  std::vector<std::string> stored;
  int posts = 0;
  std::string patched;
  TestHttpsServer server([&](const HttpRequest& request) {
    std::lock_guard lock(mutex);
    HttpResponse response;
    if (request.method == "POST") {
      const std::string name = nlohmann::json::parse(request.body)["metadata"]["name"];
      const bool known = std::find(stored.begin(), stored.end(), name) != stored.end();
      if (!known) stored.push_back(name);
      if (++posts == 1) {
        response = StatusAnswer(503, "ServiceUnavailable");
      } else if (known) {
        response = StatusAnswer(409, "AlreadyExists");
      } else {
        response.status = 201;
        response.body = request.body;
      }
    } else if (request.method == "PATCH") {
      patched = request.path;
      response.body = "{}";
    }
    return response;
  });
  kube::EventRecorder recorder(std::make_shared<kube::Client>(ConfigFor(server)),
                               "ncclguard.io/controller", "replica-a");
  const kube::EventSpec spec = HoldEvent();
  EXPECT_EQ(recorder.Record(spec), "") << "the first create's answer was lost";
  const std::string name = recorder.Record(spec);
  // Once confirmed, the Event is counted (a PATCH of its series), not created again.
  EXPECT_EQ(recorder.Record(spec), name);
  std::lock_guard lock(mutex);
  ASSERT_EQ(stored.size(), 1u) << "a second Event was written";
  EXPECT_EQ(name, stored[0]);
  EXPECT_EQ(posts, 2);
  EXPECT_EQ(patched, "/apis/events.k8s.io/v1/namespaces/ns/events/" + name);
}

// A repeated Event whose count (a PATCH of its series) fails while the server is away: the Event
// is still there, so the next occurrence counts it again instead of writing a second Event with
// the same note (kubectl describe would show the message twice). An Event that is gone (404)
// starts a new one.
TEST(KubeFaults, AnEventWhoseCountFailedIsCountedAgainNotWrittenTwice) {
  std::mutex mutex;
  int posts = 0;
  int patches = 0;
  bool gone = false;
  TestHttpsServer server([&](const HttpRequest& request) {
    std::lock_guard lock(mutex);
    HttpResponse response;
    if (request.method == "POST") {
      ++posts;
      response.status = 201;
      response.body = request.body;
    } else if (request.method == "PATCH") {
      if (++patches == 1) {
        response = StatusAnswer(503, "ServiceUnavailable");
      } else if (gone) {
        response = StatusAnswer(404, "NotFound");
      } else {
        response.body = "{}";
      }
    }
    return response;
  });
  kube::EventRecorder recorder(std::make_shared<kube::Client>(ConfigFor(server)),
                               "ncclguard.io/controller", "replica-a");
  const kube::EventSpec spec = HoldEvent();
  const std::string name = recorder.Record(spec);
  ASSERT_FALSE(name.empty());
  EXPECT_EQ(recorder.Record(spec), "") << "the count's answer was a 503";
  EXPECT_EQ(recorder.Record(spec), name) << "counted again, on the same Event";
  {
    std::lock_guard lock(mutex);
    EXPECT_EQ(posts, 1) << "a second Event was written";
    EXPECT_EQ(patches, 2);
    gone = true;
  }
  const std::string again = recorder.Record(spec);
  EXPECT_FALSE(again.empty());
  EXPECT_NE(again, name);
  std::lock_guard lock(mutex);
  EXPECT_EQ(posts, 2) << "the deleted Event is replaced";
}

TEST(KubeFaults, MalformedWatchLinesLeadToAResyncNotACrash) {
  std::atomic<int> watches{0};
  std::atomic<int> lists{0};
  TestHttpsServer server([&](const HttpRequest& request) {
    HttpResponse response;
    if (request.target.find("watch=true") == std::string::npos) {
      ++lists;
      response.body = List("listed", 10);
    } else if (++watches == 1) {
      // One good event, then garbage: the good one counts, the rest is resynced.
      response.body = Event("ADDED", "watched", 11) + "{\"type\":\"ADDED\",\"object\":tru\n";
    } else {
      response.body = Event("ADDED", "after-resync", 12);
    }
    return response;
  });
  kube::InformerOptions options;
  options.resource = kube::resources::ConfigMaps().In("ns");
  options.backoff = {20ms, 100ms, 2.0, 0.5};
  kube::Informer informer(std::make_shared<kube::Client>(ConfigFor(server)), options);
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(10s));
  EXPECT_TRUE(Eventually([&] { return informer.Get("ns/after-resync") != nullptr; }, 10s));
  kube::InformerStats stats = informer.stats();
  EXPECT_EQ(stats.resyncs_after_bad_stream, 1);
  EXPECT_GE(stats.lists, 2) << "a malformed stream is followed by a fresh list";
  // The second list did not contain "watched": it is gone from the cache again.
  EXPECT_FALSE(informer.Get("ns/watched"));
  EXPECT_TRUE(informer.Get("ns/listed"));
  informer.Stop();
}

TEST(KubeFaults, AServerThatEndsEveryWatchAtOnceIsAskedWithBackoff) {
  std::atomic<int> watches{0};
  TestHttpsServer server([&](const HttpRequest& request) {
    HttpResponse response;
    if (request.target.find("watch=true") == std::string::npos) {
      response.body = List("listed", 10);
    } else {
      ++watches;
      response.body = "";
    }
    return response;
  });
  kube::InformerOptions options;
  options.resource = kube::resources::ConfigMaps().In("ns");
  options.backoff = {100ms, 400ms, 2.0, 0.0};
  kube::Informer informer(std::make_shared<kube::Client>(ConfigFor(server)), options);
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(10s));
  std::this_thread::sleep_for(2s);
  informer.Stop();
  // Without backoff this would be thousands; with 100, 200, 400, 400 ms waits, a handful.
  EXPECT_LE(watches.load(), 10);
  EXPECT_GE(informer.stats().short_watches, 2);
}

TEST(KubeFaults, TooManyRequestsIsRetriedAfterRetryAfterThenThrown) {
  std::atomic<int> calls{0};
  std::atomic<int> throttle_first{1};
  TestHttpsServer server([&](const HttpRequest&) {
    HttpResponse response;
    if (++calls <= throttle_first.load()) {
      response.status = 429;
      response.body =
          R"({"kind":"Status","status":"Failure","reason":"TooManyRequests","code":429,)"
          R"("message":"slow down","details":{"retryAfterSeconds":1}})";
    } else {
      response.body = R"({"kind":"ConfigMap","metadata":{"name":"x"}})";
    }
    return response;
  });
  kube::ClientOptions options;
  options.max_retries_on_429 = 1;
  kube::Client client(ConfigFor(server), options);
  kube::ResourceRef ref = kube::resources::ConfigMaps().In("ns").Named("x");
  EXPECT_EQ(client.Get(ref)["metadata"]["name"], "x");
  EXPECT_EQ(calls.load(), 2);

  calls = 0;
  throttle_first = 100;
  kube::ApiError error(kube::ErrorCode::kUnknown, "");
  try {
    client.Get(ref);
  } catch (const kube::ApiError& thrown) {
    error = thrown;
  }
  EXPECT_EQ(error.code(), kube::ErrorCode::kTooManyRequests);
  EXPECT_EQ(error.retry_after(), 1s);
  EXPECT_NE(std::string(error.what()).find("slow down"), std::string::npos);
  EXPECT_EQ(calls.load(), 2);
}

TEST(KubeFaults, ServerErrorsAndNonJsonBodiesAreTypedErrors) {
  std::atomic<int> calls{0};
  TestHttpsServer server([&](const HttpRequest&) {
    HttpResponse response;
    if (++calls == 1) {
      response.status = 503;
      response.content_type = "text/plain";
      response.body = "upstream unavailable";
    } else {
      response.body = "<html>not json</html>";
    }
    return response;
  });
  kube::Client client(ConfigFor(server));
  kube::ResourceRef ref = kube::resources::ConfigMaps().In("ns").Named("x");
  std::string message;
  EXPECT_EQ(ErrorCodeOf([&] { client.Get(ref); }, &message), kube::ErrorCode::kServerError);
  EXPECT_NE(message.find("upstream unavailable"), std::string::npos) << message;
  EXPECT_EQ(ErrorCodeOf([&] { client.Get(ref); }, &message), kube::ErrorCode::kDecode);
  EXPECT_NE(message.find("not JSON"), std::string::npos) << message;
}

TEST(KubeFaults, MalformedListBodiesAreDecodeErrors) {
  std::vector<std::string> bodies = {
      R"({"items":5})",
      R"({"items":[1]})",
      R"([1,2])",
      "not json",
      R"({"metadata":{"resourceVersion":"1"},"items":[{"metadata":{"name":"a"}})",
  };
  std::atomic<std::size_t> next{0};
  TestHttpsServer server([&](const HttpRequest&) {
    HttpResponse response;
    response.body = bodies[next++ % bodies.size()];
    return response;
  });
  kube::Client client(ConfigFor(server));
  for (const auto& body : bodies) {
    std::string message;
    EXPECT_EQ(
        ErrorCodeOf([&] { client.ListOnePage(kube::resources::ConfigMaps().In("ns")); }, &message),
        kube::ErrorCode::kDecode)
        << body;
    EXPECT_NE(message.find("list configmaps in ns"), std::string::npos) << message;
  }
}

}  // namespace
}  // namespace ncclguard::testenv
