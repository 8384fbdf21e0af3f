// core::Registry (core/registry.h), the one registry every rule, node check, diagnosis, log
// matcher and controller registers in, through entry types of this test's own: the real
// registries are not touched.
#include <gtest/gtest.h>

#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include "core/registry.h"

namespace ncclguard::test::registry_test {

// An entry base, as Rule or Check is: classes deriving from it register as a Widget.
class Widget {
 public:
  using RegistryEntry = Widget;
  Widget(std::string_view id, int order) : id_(id), order_(order) {}
  virtual ~Widget() = default;
  std::string_view Id() const { return id_; }
  int Order() const { return order_; }

 private:
  std::string_view id_;
  int order_;
};

class Sprocket final : public Widget {
 public:
  Sprocket() : Widget("sprocket", 2) {}
};
class Gear final : public Widget {
 public:
  Gear() : Widget("gear", 1) {}
};
class Cog final : public Widget {
 public:
  Cog() : Widget("cog", 2) {}  // the same order as sprocket's: the id breaks the tie
};

// A declaration made by a function, as a controller's ControllerModule is.
struct Plan {
  std::string name;
};
Plan DeclareBeta() { return {"beta"}; }
Plan DeclareAlpha() { return {"alpha"}; }

inline int widgets_seen_by_hook = 0;

}  // namespace ncclguard::test::registry_test

namespace ncclguard::core {

template <>
struct RegistryTraits<test::registry_test::Widget> {
  static constexpr std::string_view kKind = "widget";
  static std::string_view Id(const test::registry_test::Widget& w) { return w.Id(); }
  static int Order(const test::registry_test::Widget& w) { return w.Order(); }
  // As the Catalog registration of rules, checks and diagnoses: may refuse an entry.
  static void OnRegister(const test::registry_test::Widget& w) {
    if (w.Id() == "refused-by-hook") throw std::logic_error("the hook refuses it");
    ++test::registry_test::widgets_seen_by_hook;
  }
};

template <>
struct RegistryTraits<test::registry_test::Plan> {
  static constexpr std::string_view kKind = "plan";
  static std::string_view Id(const test::registry_test::Plan& plan) { return plan.name; }
};

}  // namespace ncclguard::core

namespace ncclguard::test::registry_test {
namespace {

NCCLGUARD_REGISTER(Sprocket);
NCCLGUARD_REGISTER(Gear);
NCCLGUARD_REGISTER(Cog);
NCCLGUARD_REGISTER(DeclareBeta);
NCCLGUARD_REGISTER(DeclareAlpha);

using Widgets = core::Registry<Widget>;
using Plans = core::Registry<Plan>;

std::vector<std::string_view> WidgetIds() {
  std::vector<std::string_view> ids;
  for (const Widget* w : Widgets::All()) ids.push_back(w->Id());
  return ids;
}

// The message of the std::logic_error that `add` throws, or "" if it does not throw.
template <typename Add>
std::string Refusal(Add&& add) {
  try {
    add();
  } catch (const std::logic_error& e) {
    return e.what();
  }
  return "";
}

TEST(Registry, KeepsEntriesSortedByOrderThenIdWhateverTheRegistrationOrder) {
  EXPECT_EQ(WidgetIds(), (std::vector<std::string_view>{"gear", "cog", "sprocket"}));
}

TEST(Registry, SortsByIdWithoutAnOrderAndRegistersWhatAFunctionDeclares) {
  ASSERT_EQ(Plans::All().size(), 2u);
  EXPECT_EQ(Plans::All()[0]->name, "alpha");
  EXPECT_EQ(Plans::All()[1]->name, "beta");
}

TEST(Registry, FindsAnEntryById) {
  EXPECT_EQ(Widgets::Find("cog"), Widgets::All()[1]);
  EXPECT_EQ(Widgets::Find("gear")->Order(), 1);
  EXPECT_EQ(Plans::Find("beta"), Plans::All()[1]);
  EXPECT_EQ(Widgets::Find("no-such-widget"), nullptr);
  EXPECT_EQ(Widgets::Find(""), nullptr);
  EXPECT_EQ(Widgets::Find("d"), nullptr) << "between two ids";
  EXPECT_EQ(Widgets::Find("zzz"), nullptr) << "after the last id";
  EXPECT_EQ(Widgets::Find("co"), nullptr) << "a prefix of an id";
}

TEST(Registry, FindsEveryEntryWhenItsOrderIsNotTheIdOrder) {
  for (const Widget* w : Widgets::All()) EXPECT_EQ(Widgets::Find(w->Id()), w) << w->Id();
}

TEST(Registry, RunsTheHookOnceForEachEntryItRegisters) { EXPECT_EQ(widgets_seen_by_hook, 3); }

TEST(Registry, RefusesADuplicateIdWithAClearMessageAndKeepsWhatWasRegistered) {
  const std::string message = Refusal([] { Widgets::Add(std::make_unique<Widget>("gear", 7)); });
  EXPECT_NE(message.find("widget \"gear\" registered twice"), std::string::npos) << message;
  EXPECT_EQ(WidgetIds(), (std::vector<std::string_view>{"gear", "cog", "sprocket"}));
  EXPECT_EQ(Widgets::Find("gear")->Order(), 1);
  EXPECT_EQ(widgets_seen_by_hook, 3) << "a refused entry never reaches the hook";

  const std::string plan = Refusal([] { Plans::Add(std::make_unique<Plan>(DeclareAlpha())); });
  EXPECT_NE(plan.find("plan \"alpha\" registered twice"), std::string::npos) << plan;
  EXPECT_EQ(Plans::All().size(), 2u);
}

TEST(Registry, AnEntryTheHookRefusesIsNotRegistered) {
  const std::string message =
      Refusal([] { Widgets::Add(std::make_unique<Widget>("refused-by-hook", 0)); });
  EXPECT_EQ(message, "the hook refuses it");
  EXPECT_EQ(Widgets::Find("refused-by-hook"), nullptr);
  EXPECT_EQ(Widgets::All().size(), 3u);
}

}  // namespace
}  // namespace ncclguard::test::registry_test
