#include <gtest/gtest.h>

#include <stdexcept>

#include "core/errors.h"
#include "core/patch.h"

namespace ncclguard::test {
namespace {

using core::Json;
using core::JsonPointer;
using core::PatchPlan;

TEST(PatchPlan, AddCreatesMissingParentsInOneOperationWithEscapedPath) {
  const Json pod = {{"spec", {{"containers", Json::array({{{"name", "c"}}})}}}};
  PatchPlan plan(pod);
  plan.Add(JsonPointer("/spec/containers/0/resources/limits") / "vpc.amazonaws.com/efa", "32");
  plan.Add(JsonPointer("/spec/containers/0/resources/requests") / "vpc.amazonaws.com/efa", "32");
  ASSERT_EQ(plan.ops().size(), 2u);
  EXPECT_EQ(plan.ops()[0], Json({{"op", "add"},
                                 {"path", "/spec/containers/0/resources"},
                                 {"value", {{"limits", {{"vpc.amazonaws.com/efa", "32"}}}}}}));
  // The second sees the first's "resources" and adds only what is missing.
  EXPECT_EQ(plan.ops()[1], Json({{"op", "add"},
                                 {"path", "/spec/containers/0/resources/requests"},
                                 {"value", {{"vpc.amazonaws.com/efa", "32"}}}}));
  const Json patched = pod.patch(Json(plan.ops()));
  EXPECT_EQ(patched["spec"]["containers"][0]["resources"]["requests"]["vpc.amazonaws.com/efa"],
            "32");
  EXPECT_EQ(pod["spec"]["containers"][0].size(), 1u) << "the base object is never modified";
}

TEST(PatchPlan, AppendCreatesTheListOnceThenAppends) {
  const Json container = {{"name", "c"}};
  PatchPlan plan(container);
  plan.Append(JsonPointer("/env"), Json{{"name", "A"}});
  plan.Append(JsonPointer("/env"), Json{{"name", "B"}});
  ASSERT_EQ(plan.ops().size(), 2u);
  EXPECT_EQ(plan.ops()[0]["path"], "/env");
  EXPECT_EQ(plan.ops()[1]["path"], "/env/-");
  EXPECT_TRUE(plan.Exists(JsonPointer("/env/1/name")));
  EXPECT_EQ(container.patch(Json(plan.ops()))["env"].size(), 2u);
}

TEST(PatchPlan, AppendToAnExistingListUsesDash) {
  const Json container = {
      {"securityContext", {{"capabilities", {{"add", Json::array({"NET_ADMIN"})}}}}}};
  PatchPlan plan(container);
  plan.Append(JsonPointer("/securityContext/capabilities/add"), "IPC_LOCK");
  EXPECT_EQ(plan.ops().at(0), Json({{"op", "add"},
                                    {"path", "/securityContext/capabilities/add/-"},
                                    {"value", "IPC_LOCK"}}));
}

TEST(PatchPlan, NeverReplacesAnExistingValue) {
  const Json container = {{"env", Json::array()}, {"image", "x"}};
  PatchPlan plan(container);
  EXPECT_THROW(plan.Add(JsonPointer("/image"), "y"), std::logic_error);
  // A fix that needs an object or a list where the input has something else: the input's fault.
  EXPECT_THROW(plan.Append(JsonPointer("/image"), "y"), core::InputError);
  EXPECT_THROW(plan.Add(JsonPointer("/image/tag"), "y"), core::InputError);
  EXPECT_THROW(plan.Add(JsonPointer("/env/name"), "y"), core::InputError);
  EXPECT_TRUE(plan.empty());
}

TEST(PatchPlan, NullCountsAsAbsent) {
  const Json container = {{"env", nullptr}};
  PatchPlan plan(container);
  EXPECT_FALSE(plan.Exists(JsonPointer("/env")));
  plan.Append(JsonPointer("/env"), Json{{"name", "A"}});
  EXPECT_EQ(container.patch(Json(plan.ops()))["env"], Json::array({{{"name", "A"}}}));
}

}  // namespace
}  // namespace ncclguard::test
