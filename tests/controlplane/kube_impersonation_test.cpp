// Impersonation from a kubeconfig (users[].user.as / as-groups) against the real API server's
// RBAC: without a binding the impersonated identity is Forbidden, with one it is allowed, for
// plain requests and for watches alike.
#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <fstream>

#include "kube/client.h"
#include "kube_test_support.h"

namespace ncclguard::testenv {
namespace {

using nlohmann::json;

class KubeImpersonationTest : public KubeClientTest {
 protected:
  // The shared kubeconfig (admin credentials) with impersonation fields added to its user.
  std::string ImpersonatingKubeconfig(const std::string& user,
                                      const std::vector<std::string>& groups = {}) {
    YAML::Node root = YAML::LoadFile(info_.kubeconfig);
    for (YAML::Node entry : root["users"]) {
      entry["user"]["as"] = user;
      if (!groups.empty()) entry["user"]["as-groups"] = groups;
    }
    const std::string path = MakeTempDir("impersonation") + "/kubeconfig";
    std::ofstream(path) << YAML::Dump(root);
    return path;
  }

  void Bind(const std::string& name, const json& subject) {
    json role = {{"apiVersion", "rbac.authorization.k8s.io/v1"},
                 {"kind", "Role"},
                 {"metadata", {{"name", name}}},
                 {"rules",
                  {{{"apiGroups", {""}},
                    {"resources", {"configmaps"}},
                    {"verbs", {"get", "list", "watch", "create"}}}}}};
    json binding = {
        {"apiVersion", "rbac.authorization.k8s.io/v1"},
        {"kind", "RoleBinding"},
        {"metadata", {{"name", name}}},
        {"roleRef", {{"apiGroup", "rbac.authorization.k8s.io"}, {"kind", "Role"}, {"name", name}}},
        {"subjects", {subject}}};
    const std::string prefix = "/apis/rbac.authorization.k8s.io/v1/namespaces/" + namespace_;
    ASSERT_EQ(admin_->Post(prefix + "/roles", role).status, 201);
    ASSERT_EQ(admin_->Post(prefix + "/rolebindings", binding).status, 201);
  }
};

TEST_F(KubeImpersonationTest, ServiceAccountIsForbiddenWithoutRbacAndAllowedWithARoleBinding) {
  const std::string user = "system:serviceaccount:" + namespace_ + ":ncclguard-controller";
  kube::ClientConfig config = kube::LoadKubeConfigFile(ImpersonatingKubeconfig(user));
  ASSERT_EQ(config.impersonate_user, user);
  kube::Client as_sa(config);

  std::string message;
  EXPECT_EQ(ErrorCodeOf([&] { as_sa.List(ConfigMaps()); }, &message), kube::ErrorCode::kForbidden);
  // The API server judged the impersonated identity, not the admin behind it.
  EXPECT_NE(message.find(user), std::string::npos) << message;
  kube::StopToken never;
  EXPECT_EQ(ErrorCodeOf([&] {
              as_sa.Watch(
                  ConfigMaps(), {}, [](kube::WatchEvent&&) {}, never);
            }),
            kube::ErrorCode::kForbidden);

  Bind("impersonated-sa",
       {{"kind", "ServiceAccount"}, {"name", "ncclguard-controller"}, {"namespace", namespace_}});
  ASSERT_TRUE(Eventually(
      [&] {
        try {
          as_sa.List(ConfigMaps());
          return true;
        } catch (const kube::ApiError&) {
          return false;
        }
      },
      std::chrono::seconds(10)));
  as_sa.Create(ConfigMaps(), ConfigMap("made-as-sa"));

  // Watches carry the same headers: the stream opens and delivers the object.
  kube::StopToken stop;
  bool seen = false;
  kube::WatchOptions options;
  options.timeout_seconds = 10;
  as_sa.Watch(
      ConfigMaps(), options,
      [&](kube::WatchEvent&& event) {
        if (event.object["metadata"].value("name", "") == "made-as-sa") {
          seen = true;
          stop.Stop();
        }
      },
      stop);
  EXPECT_TRUE(seen);
  // Still not more than the Role grants.
  EXPECT_EQ(ErrorCodeOf([&] { as_sa.List(kube::resources::Pods().In(namespace_)); }),
            kube::ErrorCode::kForbidden);
}

TEST_F(KubeImpersonationTest, ImpersonatedGroupsAreAuthorized) {
  kube::Client as_alice(
      kube::LoadKubeConfigFile(ImpersonatingKubeconfig("alice", {"ncclguard-testers"})));
  EXPECT_EQ(ErrorCodeOf([&] { as_alice.List(ConfigMaps()); }), kube::ErrorCode::kForbidden);
  Bind("impersonated-group", {{"kind", "Group"},
                              {"apiGroup", "rbac.authorization.k8s.io"},
                              {"name", "ncclguard-testers"}});
  EXPECT_TRUE(Eventually(
      [&] {
        try {
          as_alice.List(ConfigMaps());
          return true;
        } catch (const kube::ApiError&) {
          return false;
        }
      },
      std::chrono::seconds(10)));
}

}  // namespace
}  // namespace ncclguard::testenv
