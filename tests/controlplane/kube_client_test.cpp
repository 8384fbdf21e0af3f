// The kube/ client's REST verbs against the real kube-apiserver: CRUD on ConfigMaps and a
// CRD, typed errors, pagination, every patch flavour, the status subresource, and the
// credentials a kubeconfig can carry.
#include <gtest/gtest.h>
#include <openssl/evp.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "kube/client.h"
#include "kube_test_support.h"
#include "manifests.h"

namespace ncclguard::testenv {
namespace {

using kube::ErrorCode;
using kube::PatchType;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string Base64(const std::string& data) {
  std::string out(4 * ((data.size() + 2) / 3) + 1, '\0');
  int length = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                               reinterpret_cast<const unsigned char*>(data.data()),
                               static_cast<int>(data.size()));
  out.resize(static_cast<std::size_t>(length));
  return out;
}

TEST_F(KubeClientTest, ConfigMapCrudWithTypedErrors) {
  core::Json created = client_->Create(ConfigMaps(), ConfigMap("cm"));
  EXPECT_FALSE(kube::ResourceVersionOf(created).empty());
  core::Json got = client_->Get(ConfigMaps().Named("cm"));
  EXPECT_EQ(got["data"]["k"], "v");

  EXPECT_EQ(ErrorCodeOf([&] { client_->Create(ConfigMaps(), ConfigMap("cm")); }),
            ErrorCode::kAlreadyExists);
  std::string message;
  EXPECT_EQ(ErrorCodeOf([&] { client_->Get(ConfigMaps().Named("absent")); }, &message),
            ErrorCode::kNotFound);
  EXPECT_NE(message.find("configmaps \"absent\" not found"), std::string::npos) << message;
  EXPECT_EQ(
      ErrorCodeOf([&] { client_->Create(ConfigMaps(), ConfigMap("Not_A_Valid_Name")); }, &message),
      ErrorCode::kInvalid);
  EXPECT_NE(message.find("Not_A_Valid_Name"), std::string::npos) << message;

  core::Json updated = got;
  updated["data"]["k"] = "v2";
  core::Json stored = client_->Update(ConfigMaps().Named("cm"), updated);
  EXPECT_EQ(stored["data"]["k"], "v2");
  // `got` carries the old resourceVersion: a second writer with it loses.
  got["data"]["k"] = "stale";
  EXPECT_EQ(ErrorCodeOf([&] { client_->Update(ConfigMaps().Named("cm"), got); }),
            ErrorCode::kConflict);

  kube::DeleteOptions wrong_uid;
  wrong_uid.precondition_uid = "00000000-0000-0000-0000-000000000000";
  EXPECT_EQ(ErrorCodeOf([&] { client_->Delete(ConfigMaps().Named("cm"), wrong_uid); }),
            ErrorCode::kConflict);
  kube::DeleteOptions right_uid;
  right_uid.precondition_uid = stored["metadata"]["uid"];
  right_uid.propagation_policy = "Background";
  client_->Delete(ConfigMaps().Named("cm"), right_uid);
  EXPECT_EQ(ErrorCodeOf([&] { client_->Get(ConfigMaps().Named("cm")); }), ErrorCode::kNotFound);
  EXPECT_EQ(ErrorCodeOf([&] { client_->Delete(ConfigMaps().Named("cm")); }), ErrorCode::kNotFound);
}

TEST_F(KubeClientTest, ListFollowsContinueTokensAcrossPages) {
  for (int i = 0; i < 25; ++i) {
    core::Json cm = ConfigMap("page-" + std::to_string(i));
    cm["metadata"]["labels"] = {{"set", i % 5 == 0 ? "fives" : "rest"}};
    client_->Create(ConfigMaps(), cm);
  }
  kube::ListOptions options;
  options.limit = 10;
  kube::ListPage first = client_->ListOnePage(ConfigMaps(), options);
  EXPECT_EQ(first.items.size(), 10u);
  EXPECT_FALSE(first.continue_token.empty());

  kube::ListPage all = client_->List(ConfigMaps(), options);
  std::set<std::string> names;
  for (const auto& item : all.items) names.insert(item["metadata"]["name"].get<std::string>());
  EXPECT_EQ(names.size(), 25u);
  EXPECT_FALSE(all.resource_version.empty());
  EXPECT_TRUE(all.continue_token.empty());

  options.label_selector = "set=fives";
  EXPECT_EQ(client_->List(ConfigMaps(), options).items.size(), 5u);
}

TEST_F(KubeClientTest, EveryPatchFlavour) {
  client_->Create(ConfigMaps(), ConfigMap("p", {{"a", "1"}, {"b", "2"}}));
  kube::ResourceRef ref = ConfigMaps().Named("p");

  core::Json merged =
      client_->Patch(ref, PatchType::kMerge, {{"data", {{"a", nullptr}, {"c", "3"}}}});
  EXPECT_EQ(merged["data"], (core::Json{{"b", "2"}, {"c", "3"}}));

  core::Json patched = client_->Patch(
      ref, PatchType::kJson,
      core::Json::array({{{"op", "test"}, {"path", "/data/b"}, {"value", "2"}},
                         {{"op", "replace"}, {"path", "/data/b"}, {"value", "20"}}}));
  EXPECT_EQ(patched["data"]["b"], "20");
  // A failing JSON Patch test is refused whole.
  EXPECT_EQ(ErrorCodeOf([&] {
              client_->Patch(
                  ref, PatchType::kJson,
                  core::Json::array({{{"op", "test"}, {"path", "/data/b"}, {"value", "2"}},
                                     {{"op", "remove"}, {"path", "/data/c"}}}));
            }),
            ErrorCode::kInvalid);
  EXPECT_EQ(client_->Get(ref)["data"]["c"], "3");

  core::Json strategic =
      client_->Patch(ref, PatchType::kStrategic, {{"metadata", {{"labels", {{"x", "y"}}}}}});
  EXPECT_EQ(strategic["metadata"]["labels"]["x"], "y");

  // Server-side apply: each manager owns its fields; taking another's needs force.
  core::Json applied_by_a = {{"apiVersion", "v1"},
                             {"kind", "ConfigMap"},
                             {"metadata", {{"name", "applied"}, {"namespace", namespace_}}},
                             {"data", {{"owner", "a"}}}};
  client_->Apply(ConfigMaps().Named("applied"), applied_by_a, "manager-a");
  core::Json by_b = applied_by_a;
  by_b["data"]["owner"] = "b";
  std::string message;
  EXPECT_EQ(ErrorCodeOf([&] { client_->Apply(ConfigMaps().Named("applied"), by_b, "manager-b"); },
                        &message),
            ErrorCode::kConflict);
  EXPECT_NE(message.find("manager-a"), std::string::npos) << message;
  core::Json forced = client_->Apply(ConfigMaps().Named("applied"), by_b, "manager-b", true);
  EXPECT_EQ(forced["data"]["owner"], "b");
  EXPECT_THROW(client_->Apply(ConfigMaps().Named("applied"), by_b, ""), std::invalid_argument);
}

TEST_F(KubeClientTest, CustomResourceWithStatusSubresource) {
  ApplyCrds(*admin_, JobCrd("PyTorchJob"));
  kube::ResourceRef jobs = kube::resources::PyTorchJobs().In(namespace_);
  core::Json job = {{"apiVersion", "kubeflow.org/v1"},
                    {"kind", "PyTorchJob"},
                    {"metadata", {{"name", "train"}}},
                    {"spec", {{"pytorchReplicaSpecs", {{"Worker", {{"replicas", 2}}}}}}},
                    {"status", {{"ignored", true}}}};
  core::Json created = client_->Create(jobs, job);
  EXPECT_FALSE(created.contains("status")) << "status is only written through /status";

  core::Json condition = {{"type", "NcclPreflight"}, {"status", "False"}, {"reason", "Held"}};
  core::Json with_status = created;
  with_status["status"] = {{"conditions", core::Json::array({condition})}};
  core::Json updated = client_->UpdateStatus(jobs.Named("train"), with_status);
  EXPECT_EQ(updated["status"]["conditions"][0]["reason"], "Held");

  // startTime: a field of the training operator's status schema (the real CRD prunes others).
  const std::string start = "2026-12-03T12:00:00Z";
  core::Json patched = client_->PatchStatus(jobs.Named("train"), PatchType::kMerge,
                                            {{"status", {{"startTime", start}}}});
  EXPECT_EQ(patched["status"]["startTime"], start);
  EXPECT_EQ(client_->GetStatus(jobs.Named("train"))["status"]["startTime"], start);

  // A write to the main resource leaves the status alone.
  core::Json spec_change = client_->Get(jobs.Named("train"));
  spec_change["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = 4;
  spec_change["status"] = core::Json::object();
  core::Json after = client_->Update(jobs.Named("train"), spec_change);
  EXPECT_EQ(after["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"], 4);
  EXPECT_EQ(after["status"]["startTime"], start);

  client_->Delete(jobs.Named("train"));
  EXPECT_EQ(ErrorCodeOf([&] { client_->Get(jobs.Named("train")); }), ErrorCode::kNotFound);
}

TEST_F(KubeClientTest, InlineCertificateDataInAKubeconfig) {
  std::string dir = MakeTempDir("kube-inline");
  std::ofstream(dir + "/config") << "apiVersion: v1\nkind: Config\n"
                                 << "clusters:\n- name: c\n  cluster:\n    server: "
                                 << info_.apiserver_url << "\n    certificate-authority-data: "
                                 << Base64(ReadAll(info_.ca_file))
                                 << "\nusers:\n- name: u\n  user:\n    client-certificate-data: "
                                 << Base64(ReadAll(info_.admin_cert_file))
                                 << "\n    client-key-data: "
                                 << Base64(ReadAll(info_.admin_key_file))
                                 << "\ncontexts:\n- name: x\n  context: {cluster: c, user: u, "
                                    "namespace: "
                                 << namespace_ << "}\ncurrent-context: x\n";
  kube::Client inline_client(kube::LoadKubeConfigFile(dir + "/config"));
  EXPECT_EQ(inline_client.default_namespace(), namespace_);
  EXPECT_EQ(inline_client.Get(kube::resources::Namespaces().Named(namespace_))["metadata"]["name"],
            namespace_);
  std::filesystem::remove_all(dir);
}

TEST_F(KubeClientTest, WrongServerCertificateIsATransportError) {
  kube::ClientConfig config = client_->config();
  config.ca_file.clear();
  config.ca_data = ReadAll(info_.admin_cert_file);  // not the CA that signed the server
  kube::Client untrusting(config);
  std::string message;
  EXPECT_EQ(ErrorCodeOf([&] { untrusting.Get(ConfigMaps().Named("x")); }, &message),
            ErrorCode::kTransport);
  EXPECT_NE(message.find(info_.apiserver_url), std::string::npos) << message;
}

TEST_F(KubeClientTest, BearerTokensFromAFileAreReadAgainWhenTheyRotate) {
  // A service account with a real token, allowed to read ConfigMaps and nothing else.
  admin_->Post("/api/v1/namespaces/" + namespace_ + "/serviceaccounts",
               {{"metadata", {{"name", "reader"}}}});
  admin_->Post(
      "/apis/rbac.authorization.k8s.io/v1/namespaces/" + namespace_ + "/roles",
      {{"metadata", {{"name", "reader"}}},
       {"rules",
        {{{"apiGroups", {""}}, {"resources", {"configmaps"}}, {"verbs", {"get", "list"}}}}}});
  admin_->Post("/apis/rbac.authorization.k8s.io/v1/namespaces/" + namespace_ + "/rolebindings",
               {{"metadata", {{"name", "reader"}}},
                {"roleRef",
                 {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", "reader"}}},
                {"subjects",
                 {{{"kind", "ServiceAccount"}, {"name", "reader"}, {"namespace", namespace_}}}}});
  KubeResponse token_response =
      admin_->Post("/api/v1/namespaces/" + namespace_ + "/serviceaccounts/reader/token",
                   {{"apiVersion", "authentication.k8s.io/v1"},
                    {"kind", "TokenRequest"},
                    {"spec", nlohmann::json::object()}});
  ASSERT_EQ(token_response.status, 201) << token_response.body;
  std::string token = token_response.Json()["status"]["token"];
  client_->Create(ConfigMaps(), ConfigMap("readable"));

  std::string dir = MakeTempDir("kube-token");
  std::string token_file = dir + "/token";
  std::ofstream(token_file) << "not-a-valid-token\n";
  kube::ClientConfig config;
  config.server = info_.apiserver_url;
  config.ca_file = info_.ca_file;
  config.token_file = token_file;
  kube::Client reader(config);
  EXPECT_EQ(ErrorCodeOf([&] { reader.Get(ConfigMaps().Named("readable")); }),
            ErrorCode::kUnauthorized);

  // The kubelet rotates the projected token: the next request uses the new one.
  std::ofstream(token_file) << token << "\n";
  std::filesystem::last_write_time(
      token_file, std::filesystem::last_write_time(token_file) + std::chrono::seconds(2));
  EXPECT_EQ(reader.Get(ConfigMaps().Named("readable"))["metadata"]["name"], "readable");
  std::string message;
  EXPECT_EQ(ErrorCodeOf([&] { reader.Create(ConfigMaps(), ConfigMap("not-allowed")); }, &message),
            ErrorCode::kForbidden);
  EXPECT_NE(message.find("system:serviceaccount:" + namespace_ + ":reader"), std::string::npos)
      << message;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace ncclguard::testenv
