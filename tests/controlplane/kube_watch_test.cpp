// Watches and informers against the real kube-apiserver: events in order, prompt stop,
// informer convergence with projection and indexes, 410 Gone after etcd compaction, and
// informers that ride out a kube-apiserver restart (resuming, or re-listing after 410).
#include <curl/curl.h>
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <atomic>
#include <chrono>
#include <fstream>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "kube/informer.h"
#include "kube_test_support.h"

namespace ncclguard::testenv {
namespace {

using kube::ErrorCode;
using kube::WatchEvent;
using kube::WatchEventType;
using namespace std::chrono_literals;

TEST_F(KubeClientTest, WatchDeliversEventsInOrderAndStopsPromptly) {
  std::string rv = client_->List(ConfigMaps()).resource_version;
  std::mutex mutex;
  std::vector<std::pair<WatchEventType, std::string>> seen;
  kube::StopToken stop;
  std::promise<void> ended;
  std::thread watcher([&] {
    kube::WatchOptions options;
    options.resource_version = rv;
    try {
      client_->Watch(
          ConfigMaps(), options,
          [&](WatchEvent&& event) {
            if (event.type == WatchEventType::kBookmark) return;
            std::lock_guard lock(mutex);
            seen.emplace_back(event.type, event.object["data"].value("k", ""));
          },
          stop);
    } catch (const std::exception& error) {
      ADD_FAILURE() << error.what();
    }
    ended.set_value();
  });
  client_->Create(ConfigMaps(), ConfigMap("w", {{"k", "1"}}));
  client_->Patch(ConfigMaps().Named("w"), kube::PatchType::kMerge, {{"data", {{"k", "2"}}}});
  client_->Patch(ConfigMaps().Named("w"), kube::PatchType::kMerge, {{"data", {{"k", "3"}}}});
  client_->Delete(ConfigMaps().Named("w"));
  EXPECT_TRUE(Eventually(
      [&] {
        std::lock_guard lock(mutex);
        return seen.size() >= 4;
      },
      10s));
  // Idle now: Stop must end the blocked stream at once, not at the server's timeout.
  auto stop_time = std::chrono::steady_clock::now();
  stop.Stop();
  EXPECT_EQ(ended.get_future().wait_for(2s), std::future_status::ready);
  watcher.join();
  EXPECT_LT(std::chrono::steady_clock::now() - stop_time, 2s);
  std::lock_guard lock(mutex);
  std::vector<std::pair<WatchEventType, std::string>> expected = {{WatchEventType::kAdded, "1"},
                                                                  {WatchEventType::kModified, "2"},
                                                                  {WatchEventType::kModified, "3"},
                                                                  {WatchEventType::kDeleted, "3"}};
  EXPECT_EQ(seen, expected);
}

struct Recorded {
  std::mutex mutex;
  int adds = 0;
  int updates = 0;
  int deletes = 0;
};

kube::InformerHandlers Count(Recorded& recorded) {
  return {[&](const kube::CachedObject&) {
            std::lock_guard lock(recorded.mutex);
            ++recorded.adds;
          },
          [&](const kube::CachedObject&, const kube::CachedObject&) {
            std::lock_guard lock(recorded.mutex);
            ++recorded.updates;
          },
          [&](const kube::CachedObject&) {
            std::lock_guard lock(recorded.mutex);
            ++recorded.deletes;
          }};
}

// The informer's cache holds exactly what the server lists, with the projected fields.
bool CacheMatchesServer(kube::Client& client, const kube::Informer& informer,
                        const kube::ResourceRef& ref) {
  kube::ListPage list = client.List(ref);
  if (list.items.size() != informer.size()) return false;
  for (const auto& item : list.items) {
    auto cached = informer.Get(kube::ObjectKey(item));
    if (!cached || kube::ResourceVersionOf(*cached) != kube::ResourceVersionOf(item)) return false;
  }
  return true;
}

// A resource the API server does not serve (a CRD not installed): the informer says so at once
// (a controller need not wait for it), and lists it once the CRD is established.
TEST_F(KubeClientTest, AnInformerOfAResourceNotServedSaysSoAtOnceAndSyncsOnceItIs) {
  const std::string group = namespace_ + ".ncclguard.test";
  const kube::ResourceRef widgets{group, "v1", "widgets", true, namespace_, ""};
  kube::InformerOptions options;
  options.resource = widgets;
  options.not_served_retry = 500ms;
  kube::Informer informer(client_, options);
  Recorded recorded;
  informer.AddHandlers(Count(recorded));
  informer.Start();
  ASSERT_TRUE(informer.WaitForSyncOrNotServed(10s));
  EXPECT_TRUE(informer.NotServed());
  EXPECT_FALSE(informer.HasSynced());

  const std::string crds = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";
  const core::Json crd{
      {"apiVersion", "apiextensions.k8s.io/v1"},
      {"kind", "CustomResourceDefinition"},
      {"metadata", {{"name", "widgets." + group}}},
      {"spec",
       {{"group", group},
        {"scope", "Namespaced"},
        {"names", {{"plural", "widgets"}, {"singular", "widget"}, {"kind", "Widget"}}},
        {"versions",
         {{{"name", "v1"},
           {"served", true},
           {"storage", true},
           {"schema",
            {{"openAPIV3Schema",
              {{"type", "object"}, {"x-kubernetes-preserve-unknown-fields", true}}}}}}}}}}};
  ASSERT_EQ(admin_->Post(crds, crd).status, 201);
  ASSERT_TRUE(Eventually(
      [&] {
        const KubeResponse got = admin_->Get(crds + "/widgets." + group);
        if (got.status != 200) return false;
        for (const auto& c : got.Json().value(core::Json::json_pointer("/status/conditions"),
                                              core::Json::array())) {
          if (c.value("type", "") == "Established" && c.value("status", "") == "True") return true;
        }
        return false;
      },
      30s));
  ASSERT_TRUE(Eventually(
      [&] {
        try {
          client_->Create(widgets, {{"apiVersion", group + "/v1"},
                                    {"kind", "Widget"},
                                    {"metadata", {{"name", "w1"}, {"namespace", namespace_}}}});
          return true;
        } catch (const kube::ApiError&) {
          return false;  // established, but not yet served by every handler
        }
      },
      30s));
  EXPECT_TRUE(informer.WaitForSync(30s));
  EXPECT_FALSE(informer.NotServed());
  EXPECT_TRUE(Eventually([&] { return informer.Get(namespace_ + "/w1") != nullptr; }, 30s));
  EXPECT_TRUE(Eventually(
      [&] {
        std::lock_guard lock(recorded.mutex);
        return recorded.adds == 1;
      },
      10s));
  informer.Stop();
  admin_->Delete(crds + "/widgets." + group);
}

TEST_F(KubeClientTest, InformerConvergesOnProjectedObjectsWithIndexes) {
  for (int i = 0; i < 30; ++i) {
    core::Json cm = ConfigMap("before-" + std::to_string(i), {{"big", std::string(2000, 'x')}});
    cm["metadata"]["labels"] = {{"job", i < 10 ? "a" : "b"}};
    client_->Create(ConfigMaps(), cm);
  }
  kube::InformerOptions options;
  options.resource = ConfigMaps();
  options.page_size = 7;  // the first list takes several pages
  options.projection = kube::KeepFields({"/metadata/labels"});
  kube::Informer informer(client_, options);
  Recorded recorded;
  informer.AddHandlers(Count(recorded));
  informer.AddIndex("job", kube::IndexByLabel("job"));
  EXPECT_FALSE(informer.HasSynced());
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(10s));
  EXPECT_EQ(informer.size(), 30u);
  EXPECT_EQ(informer.ByIndex("job", "a").size(), 10u);
  auto cached = informer.Get(namespace_ + "/before-3");
  ASSERT_TRUE(cached);
  EXPECT_FALSE(cached->contains("data")) << "the projection drops what controllers do not read";
  EXPECT_EQ((*cached)["metadata"]["name"], "before-3");
  // What an SRE reads of the caches' size: objects, and bytes as stored (projected: without the
  // 60 kB of data the server holds).
  const kube::Metrics::CacheSeries cache = client_->metrics().Cache("configmaps");
  EXPECT_EQ(cache.objects->Value(), 30.0);
  EXPECT_GT(cache.bytes->Value(), 30.0 * 20);
  EXPECT_LT(cache.bytes->Value(), 30.0 * 2000);

  for (int i = 0; i < 10; ++i)
    client_->Create(ConfigMaps(), ConfigMap("after-" + std::to_string(i)));
  for (int i = 0; i < 5; ++i) {
    client_->Patch(ConfigMaps().Named("before-" + std::to_string(i)), kube::PatchType::kMerge,
                   {{"metadata", {{"labels", {{"job", "c"}}}}}});
  }
  for (int i = 20; i < 30; ++i) client_->Delete(ConfigMaps().Named("before-" + std::to_string(i)));
  EXPECT_TRUE(
      Eventually([&] { return CacheMatchesServer(*client_, informer, ConfigMaps()); }, 10s));
  EXPECT_EQ(informer.ByIndex("job", "a").size(), 5u);
  EXPECT_EQ(informer.ByIndex("job", "c").size(), 5u);
  EXPECT_EQ(informer.ByIndex("job", "b").size(), 0u + 10u);
  {
    std::lock_guard lock(recorded.mutex);
    EXPECT_EQ(recorded.adds, 40);
    EXPECT_EQ(recorded.updates, 5);
    EXPECT_EQ(recorded.deletes, 10);
  }
  // A change of what the projection drops (an annotation here; a pod's IP, a node's heartbeat in
  // a cluster) is stored, with its resourceVersion, but tells no handler.
  for (int i = 5; i < 10; ++i) {
    client_->Patch(ConfigMaps().Named("before-" + std::to_string(i)), kube::PatchType::kMerge,
                   {{"metadata", {{"annotations", {{"note", "dropped"}}}}}});
  }
  client_->Patch(ConfigMaps().Named("before-10"), kube::PatchType::kMerge,
                 {{"metadata", {{"labels", {{"job", "d"}}}}}});
  EXPECT_TRUE(
      Eventually([&] { return CacheMatchesServer(*client_, informer, ConfigMaps()); }, 10s));
  {
    std::lock_guard lock(recorded.mutex);
    EXPECT_EQ(recorded.updates, 6) << "the label change only";
  }
  EXPECT_EQ(cache.objects->Value(), static_cast<double>(informer.size()));
  {
    kube::Informer second(client_, options);
    second.Start();
    ASSERT_TRUE(second.WaitForSync(10s));
    EXPECT_EQ(cache.objects->Value(), 2.0 * static_cast<double>(informer.size()))
        << "informers of one resource add into its series";
  }
  EXPECT_EQ(cache.objects->Value(), static_cast<double>(informer.size()))
      << "an informer destroyed takes its objects out of the series";
  informer.Stop();
}

// An informer that keeps only some objects (the Events of a busy cluster): the others are not
// cached and raise no event; one that stops being kept is removed as a delete, one that starts is
// added.
TEST_F(KubeClientTest, AnInformerCachesOnlyTheObjectsItKeeps) {
  for (int i = 0; i < 12; ++i) {
    core::Json cm = ConfigMap("kept-" + std::to_string(i));
    cm["metadata"]["labels"] = {{"read", i % 3 == 0 ? "yes" : "no"}};
    client_->Create(ConfigMaps(), cm);
  }
  kube::InformerOptions options;
  options.resource = ConfigMaps();
  options.page_size = 5;
  options.keep = [](const core::Json& object) {
    return object["metadata"].value("labels", core::Json::object()).value("read", "") == "yes";
  };
  kube::Informer informer(client_, options);
  Recorded recorded;
  informer.AddHandlers(Count(recorded));
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(10s));
  EXPECT_EQ(informer.size(), 4u);
  EXPECT_FALSE(informer.Get(namespace_ + "/kept-1"));
  client_->Patch(ConfigMaps().Named("kept-0"), kube::PatchType::kMerge,
                 {{"metadata", {{"labels", {{"read", "no"}}}}}});
  client_->Patch(ConfigMaps().Named("kept-1"), kube::PatchType::kMerge,
                 {{"metadata", {{"labels", {{"read", "yes"}}}}}});
  client_->Patch(ConfigMaps().Named("kept-2"), kube::PatchType::kMerge,
                 {{"metadata", {{"annotations", {{"unread", "still not kept"}}}}}});
  client_->Delete(ConfigMaps().Named("kept-4"));  // never kept
  EXPECT_TRUE(Eventually(
      [&] { return informer.Get(namespace_ + "/kept-1") && !informer.Get(namespace_ + "/kept-0"); },
      10s));
  std::this_thread::sleep_for(500ms);  // the other two changes, had they raised anything
  EXPECT_EQ(informer.size(), 4u);
  std::set<std::string> visited;
  informer.ForEach([&](const core::Json& object) { visited.insert(object["metadata"]["name"]); });
  EXPECT_EQ(visited, (std::set<std::string>{"kept-1", "kept-3", "kept-6", "kept-9"}));
  std::lock_guard lock(recorded.mutex);
  EXPECT_EQ(recorded.adds, 5) << "four listed, kept-1 once kept";
  EXPECT_EQ(recorded.updates, 0);
  EXPECT_EQ(recorded.deletes, 1) << "kept-0, no longer kept";
}

// etcd's own HTTP gateway, to change what the API server stores while it is down and to
// compact history the way the API server does every five minutes.
class Etcd {
 public:
  explicit Etcd(const std::string& state_dir) {
    std::ifstream env(state_dir + "/controlplane.env");
    for (std::string line; std::getline(env, line);) {
      if (line.starts_with("ETCD_URL=")) url_ = line.substr(9);
    }
  }
  nlohmann::json Post(const std::string& path, const nlohmann::json& body) {
    std::unique_ptr<CURL, decltype(&curl_easy_cleanup)> curl(curl_easy_init(), curl_easy_cleanup);
    std::string url = url_ + path, payload = body.dump(), response;
    curl_easy_setopt(curl.get(), CURLOPT_URL, url.c_str());
    curl_easy_setopt(curl.get(), CURLOPT_POSTFIELDS, payload.c_str());
    curl_easy_setopt(curl.get(), CURLOPT_TIMEOUT_MS, 10000L);
    curl_easy_setopt(
        curl.get(), CURLOPT_WRITEFUNCTION, +[](char* data, size_t size, size_t count, void* sink) {
          static_cast<std::string*>(sink)->append(data, size * count);
          return size * count;
        });
    curl_easy_setopt(curl.get(), CURLOPT_WRITEDATA, &response);
    EXPECT_EQ(curl_easy_perform(curl.get()), CURLE_OK) << url;
    return nlohmann::json::parse(response, nullptr, false);
  }
  // Deletes a stored object behind the API server's back.
  void DeleteKey(const std::string& key) { Post("/v3/kv/deleterange", {{"key", Base64(key)}}); }
  // Writes an unrelated key twice (moving the revision past whatever a client last saw plus
  // one, the first revision its watch would need) and compacts all history before that.
  void CompactEverything() {
    for (int i = 0; i < 2; ++i) {
      Post("/v3/kv/put", {{"key", Base64("/ncclguard-test/bump")}, {"value", Base64("x")}});
    }
    std::string revision = Post("/v3/kv/range", {{"key", Base64("/")}})["header"]["revision"];
    Post("/v3/kv/compaction", {{"revision", revision}, {"physical", true}});
  }

 private:
  static std::string Base64(const std::string& data) {
    std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
    int length = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                 reinterpret_cast<const unsigned char*>(data.data()),
                                 static_cast<int>(data.size()));
    out.resize(static_cast<std::size_t>(length));
    return out;
  }
  std::string url_;
};

// Its own control plane, so stopping kube-apiserver does not disturb other tests. The watch
// cache is off: with it, the API server serves old resourceVersions from etcd history, and
// only reads straight from a compacted etcd make 410 Gone happen on demand.
class KubeApiServerRestart : public ::testing::Test {
 protected:
  void SetUp() override {
    instance_ = std::make_unique<ControlPlane>(
        MakeTempDir("ncclguard-cp-kube-restart"),
        std::map<std::string, std::string>{
            {"NCCLGUARD_CONTROLPLANE_EXTRA_APISERVER_ARGS", "--watch-cache=false"}});
    ProcessResult started = instance_->Start();
    ASSERT_EQ(started.exit_code, 0) << started.stderr_text;
    TestKubeClient admin(instance_->info());
    namespace_ = CreateTestNamespace(admin, "restart");
    client_ =
        std::make_shared<kube::Client>(kube::LoadKubeConfigFile(instance_->info().kubeconfig));
    etcd_ = std::make_unique<Etcd>(instance_->state_dir());
  }
  void TearDown() override {
    if (instance_) {
      EXPECT_EQ(instance_->Stop().exit_code, 0);
    }
  }
  kube::ResourceRef ConfigMaps() const { return kube::resources::ConfigMaps().In(namespace_); }
  void CreateConfigMap(const std::string& name) {
    client_->Create(ConfigMaps(),
                    {{"apiVersion", "v1"}, {"kind", "ConfigMap"}, {"metadata", {{"name", name}}}});
  }

  std::unique_ptr<ControlPlane> instance_;
  std::string namespace_;
  std::shared_ptr<kube::Client> client_;
  std::unique_ptr<Etcd> etcd_;
};

TEST_F(KubeApiServerRestart, CompactedResourceVersionsAreGoneForWatchesAndContinueTokens) {
  for (int i = 0; i < 5; ++i) CreateConfigMap("cm-" + std::to_string(i));
  kube::ListOptions paged;
  paged.limit = 2;
  kube::ListPage first = client_->ListOnePage(ConfigMaps(), paged);
  ASSERT_FALSE(first.continue_token.empty());
  etcd_->CompactEverything();

  kube::WatchOptions old;
  old.resource_version = first.resource_version;
  old.timeout_seconds = 10;  // a failure, not a hang, if the server accepted it
  kube::StopToken stop;
  std::string message;
  EXPECT_EQ(ErrorCodeOf(
                [&] {
                  client_->Watch(
                      ConfigMaps(), old, [](WatchEvent&&) {}, stop);
                },
                &message),
            ErrorCode::kGone);
  EXPECT_NE(message.find("too old"), std::string::npos) << message;

  paged.continue_token = first.continue_token;
  EXPECT_EQ(ErrorCodeOf([&] { client_->ListOnePage(ConfigMaps(), paged); }), ErrorCode::kGone);
  // List() starts over in one request when its continue token expires.
  EXPECT_EQ(client_->List(ConfigMaps(), paged).items.size(), 5u);
}

TEST_F(KubeApiServerRestart, InformerReconnectsWithBackoffAndRelistsAfter410) {
  CreateConfigMap("kept");
  CreateConfigMap("deleted-while-away");
  kube::InformerOptions options;
  options.resource = ConfigMaps();
  options.backoff = {200ms, 1000ms, 2.0, 0.5};
  kube::Informer informer(client_, options);
  Recorded recorded;
  informer.AddHandlers(Count(recorded));
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(10s));

  ProcessResult stopped = instance_->StopApiServer();
  ASSERT_EQ(stopped.exit_code, 0) << stopped.stderr_text;
  // The watch broke; reconnects fail while the server is away, backing off.
  EXPECT_TRUE(Eventually([&] { return informer.stats().reconnects_after_error >= 2; }, 20s))
      << "reconnects: " << informer.stats().reconnects_after_error;
  // While it is away the stored state changes and history is compacted: the informer's
  // resourceVersion is gone, so only a fresh list can show it the deletion.
  etcd_->DeleteKey("/registry/configmaps/" + namespace_ + "/deleted-while-away");
  etcd_->CompactEverything();
  ProcessResult restarted = instance_->StartApiServer();
  ASSERT_EQ(restarted.exit_code, 0) << restarted.stderr_text;

  EXPECT_TRUE(Eventually([&] { return informer.stats().relists_after_gone >= 1; }, 20s));
  EXPECT_TRUE(
      Eventually([&] { return informer.Get(namespace_ + "/deleted-while-away") == nullptr; }, 10s));
  CreateConfigMap("created-after");
  EXPECT_TRUE(
      Eventually([&] { return CacheMatchesServer(*client_, informer, ConfigMaps()); }, 10s));
  EXPECT_TRUE(informer.Get(namespace_ + "/created-after"));
  EXPECT_TRUE(informer.Get(namespace_ + "/kept"));
  {
    std::lock_guard lock(recorded.mutex);
    EXPECT_EQ(recorded.deletes, 1);
    EXPECT_EQ(recorded.adds, 3);
  }
  kube::InformerStats stats = informer.stats();
  EXPECT_GE(stats.lists, 2);
  informer.Stop();
}

TEST_F(KubeApiServerRestart, WatchResumesFromTheLastResourceVersionAfterARestart) {
  kube::InformerOptions options;
  options.resource = ConfigMaps();
  options.backoff = {200ms, 1000ms, 2.0, 0.5};
  kube::Informer informer(client_, options);
  Recorded recorded;
  informer.AddHandlers(Count(recorded));
  informer.Start();
  ASSERT_TRUE(informer.WaitForSync(10s));
  CreateConfigMap("before");
  ASSERT_TRUE(Eventually([&] { return informer.Get(namespace_ + "/before") != nullptr; }, 10s));

  ASSERT_EQ(instance_->StopApiServer().exit_code, 0);
  ASSERT_EQ(instance_->StartApiServer().exit_code, 0);
  CreateConfigMap("after");
  EXPECT_TRUE(
      Eventually([&] { return CacheMatchesServer(*client_, informer, ConfigMaps()); }, 20s));
  kube::InformerStats stats = informer.stats();
  // Nothing was compacted: the watch picked up where it was, without a second list.
  EXPECT_EQ(stats.lists, 1);
  EXPECT_EQ(stats.relists_after_gone, 0);
  EXPECT_GE(stats.watches, 2);
  std::lock_guard lock(recorded.mutex);
  EXPECT_EQ(recorded.adds, 2);
  EXPECT_EQ(recorded.updates, 0);
}

}  // namespace
}  // namespace ncclguard::testenv
