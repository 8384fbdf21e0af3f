#include "cli/policy_flags.h"

#include <CLI/CLI.hpp>

#include <utility>

#include "cli/input.h"
#include "core/documents.h"
#include "core/errors.h"

namespace ncclguard::cli {

void AddPolicyFlags(CLI::App& command, PolicyOptions& options) {
  command.add_option("--policy", options.policy_file,
                     "NcclPolicy YAML file overriding the defaults");
  command.add_option("--catalog", options.catalog_file,
                     "the instance types a cluster learned from its nodes: `kubectl get ncclpolicy "
                     "default -o yaml` saved to a file");
  command.add_option("--guide-base-url", options.guide_base_url, "base URL of the debugging guide");
}

namespace {

// The NcclPolicy (or its list of learned types) in the catalog file.
core::Json CatalogDocument(const std::string& text) {
  const core::DocumentSet set = core::ParseDocuments(text);
  if (set.json_array) return core::Json(set.documents);  // a jsonpath of the list
  if (set.documents.empty()) return nullptr;
  if (set.documents.size() > 1) throw core::PolicyError("expected one NcclPolicy, found several");
  const core::Json& document = set.documents.front();
  const auto items = document.find("items");
  if (items == document.end() || !items->is_array()) return document;
  // `kubectl get ncclpolicies -o yaml`: the one named "default".
  for (const core::Json& item : *items) {
    if (item.is_object() && item.contains("metadata") && item["metadata"].is_object() &&
        item["metadata"].value("name", "") == "default") {
      return item;
    }
  }
  throw core::PolicyError("no NcclPolicy named default in the list");
}

}  // namespace

core::Policy LoadPolicy(const PolicyOptions& options) {
  return LoadPolicy(options, core::Policy::Defaults());
}

core::Policy LoadPolicy(const PolicyOptions& options, core::Policy base) {
  core::Policy policy = std::move(base);
  if (options.policy_file) {
    policy = core::Policy::Defaults();
    const std::string text = ReadInput(*options.policy_file);
    try {
      policy = core::ParsePolicy(text, policy);
    } catch (const core::PolicyError& e) {
      throw core::PolicyError(*options.policy_file + ": " + e.what());
    }
  }
  if (options.catalog_file) {
    const std::string text = ReadInput(*options.catalog_file);
    try {
      policy.Learn(core::ParseObservedCatalog(CatalogDocument(text)));
    } catch (const core::PolicyError& e) {
      throw core::PolicyError(*options.catalog_file + ": " + e.what());
    } catch (const core::InputError& e) {
      throw core::PolicyError(*options.catalog_file + ": " + e.what());
    }
  }
  if (options.guide_base_url) {
    if (options.guide_base_url->empty())
      throw core::PolicyError("--guide-base-url must not be empty");
    policy.guide_base_url = *options.guide_base_url;
  }
  return policy;
}

}  // namespace ncclguard::cli
