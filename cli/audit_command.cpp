// `ncclguard audit`: the background audit's scan, run once against a live cluster through a
// kubeconfig, before anything is installed: every object of every kind ncclguard knows, listed
// page by page, its results printed (or the PolicyReports the controller would write), then the
// nodes' topology labelling problems; exit 1 when any result is fail.
#include <CLI/CLI.hpp>

#include <functional>
#include <iostream>
#include <memory>
#include <optional>
#include <string>

#include "cli/cluster_audit.h"
#include "cli/commands.h"
#include "cli/exit_code.h"
#include "cli/policy_flags.h"
#include "controllers/policy_object.h"
#include "core/errors.h"
#include "core/kinds.h"
#include "core/kueue.h"
#include "kube/client.h"
#include "kube/config.h"
#include "manager/cache.h"

namespace ncclguard::cli {
namespace {

// Objects per list request, as kubectl pages: the most a page holds in memory at once.
constexpr long kAuditPageSize = 500;

struct AuditOptions {
  std::string kubeconfig;
  std::string context;
  std::string namespace_;
  bool all_namespaces = false;
  std::string output = "text";
  PolicyOptions policy;
};

int AuditError(const std::string& message) {
  std::cerr << "ncclguard audit: " << message << "\n";
  return kExitInputError;
}

void Note(const std::string& message) { std::cerr << "ncclguard audit: " << message << "\n"; }

kube::ResourceRef ResourceOf(const core::KindInfo& info, const AuditScope& scope) {
  kube::ResourceRef resource = info.kind == core::WorkloadKind::Pod
                                   ? kube::resources::Pods()
                                   : manager::watched::ForKind(info.kind);
  if (resource.namespaced && !scope.all_namespaces) resource = resource.In(scope.namespace_);
  return resource;
}

std::string KindName(const core::KindInfo& info) {
  return std::string(info.kind_name) + " " + std::string(info.api_version);
}

// Hands every object of `resource` to `each`, a page at a time (one page in memory at most).
// False when the server does not serve the resource (404: its CRD is not installed).
bool ListEach(kube::Client& client, const kube::ResourceRef& resource,
              const std::function<void(core::Json&&)>& each) {
  kube::ListOptions options;
  options.limit = kAuditPageSize;
  do {
    kube::ListPage page;
    try {
      page = client.ListOnePage(resource, options, each);
    } catch (const kube::ApiError& e) {
      if (e.code() == kube::ErrorCode::kNotFound && options.continue_token.empty()) return false;
      if (e.code() == kube::ErrorCode::kGone) {
        // What was printed cannot be taken back, so the list is not restarted.
        throw kube::ApiError(e.code(),
                             std::string(e.what()) + " (the list of " + resource.resource +
                                 " expired between two pages: run the audit again)",
                             e.http_status(), e.reason());
      }
      throw;
    }
    options.continue_token = std::move(page.continue_token);
  } while (!options.continue_token.empty());
  return true;
}

kube::ResourceRef KueueResource(std::string_view plural) {
  return {.group = std::string(core::kKueueGroup),
          .version = "v1beta2",
          .resource = std::string(plural),
          .namespaced = false,
          .namespace_ = "",
          .name = ""};
}

// Kueue's Topologies and ResourceFlavors (none without Kueue: 404), then the nodes, for the
// topology warnings (core/topology_audit.h); only counts and a few names of each are kept. A user
// who may not list them (403) gets the rest of the audit and a note.
void CheckTopologyLabels(kube::Client& client, ClusterAudit& audit) {
  core::TopologyAudit& topology = audit.topology();
  try {
    if (ListEach(client, KueueResource(core::kKueueTopologies),
                 [&](core::Json&& object) { topology.AddTopology(object); })) {
      ListEach(client, KueueResource(core::kKueueResourceFlavors),
               [&](core::Json&& object) { topology.AddResourceFlavor(object); });
    }
    ListEach(client, kube::resources::Nodes(),
             [&](core::Json&& object) { topology.AddNode(object); });
  } catch (const kube::ApiError& e) {
    if (e.code() != kube::ErrorCode::kForbidden) throw;
    topology = core::TopologyAudit();  // half the picture would warn wrongly
    Note(std::string("topology labels not checked (needs list nodes, and Kueue's topologies and "
                     "resourceflavors): ") +
         e.what());
  }
}

// --policy if given, else the cluster's NcclPolicy default if it exists (as the controller reads
// it), else the built-in defaults; then --catalog and --guide-base-url. `source` says which.
core::Policy AuditPolicyFor(kube::Client& client, const PolicyOptions& options,
                            std::string& source) {
  if (options.policy_file) {
    source = "--policy " + *options.policy_file;
    return LoadPolicy(options);
  }
  std::optional<core::Json> object;
  try {
    object = client.Get(
        kube::resources::NcclPolicies().Named(std::string(controllers::kPolicyObjectName)));
  } catch (const kube::ApiError& e) {
    if (e.code() != kube::ErrorCode::kNotFound) throw;
  }
  if (!object) {
    source = "built-in defaults (the cluster has no NcclPolicy default)";
    return LoadPolicy(options);
  }
  try {
    core::Policy policy = controllers::PolicyFromObject(*object);
    source = "the cluster's NcclPolicy default";
    return LoadPolicy(options, std::move(policy));
  } catch (const core::PolicyError& e) {
    // The controller does not apply it either: it keeps the policy it had (at start, its own).
    Note(std::string("the cluster's ") + e.what() + ": not used");
    source = "built-in defaults (the cluster's NcclPolicy default is invalid)";
    return LoadPolicy(options);
  }
}

std::string Describe(const kube::ApiError& e, const kube::ClientConfig& config) {
  if (e.code() == kube::ErrorCode::kTransport) {
    return "cannot reach the API server " + config.server + " (" + config.source + "): " + e.what();
  }
  return std::string(e.what()) + " (" + config.source + ")";
}

int RunAudit(const AuditOptions& options) {
  const AuditOutput output = options.output == "json" ? AuditOutput::Json : AuditOutput::Text;
  kube::ClientConfig config;
  try {
    kube::KubeConfigOptions kubeconfig_options;
    kubeconfig_options.context = options.context;
    config = kube::LoadClientConfig(options.kubeconfig, kubeconfig_options);
  } catch (const kube::ConfigError& e) {
    return AuditError(e.what());
  }
  kube::Client client(config);
  try {
    std::string policy_source;
    core::Policy policy = AuditPolicyFor(client, options.policy, policy_source);
    Note("policy: " + policy_source);
    AuditScope scope;
    scope.all_namespaces = options.all_namespaces;
    if (!scope.all_namespaces) {
      scope.namespace_ = ScopeNamespace(options.namespace_, config.default_namespace);
      if (!policy.audit.Audits(scope.namespace_)) {
        Note("the background audit does not audit namespace " + scope.namespace_ +
             " (a system namespace, or excluded by the policy's spec.audit); auditing it as asked");
      }
    }
    ClusterAudit audit(std::move(policy), scope, output);
    audit.SetPolicySource(policy_source);

    // The runtimes first: the TrainJobs listed later are checked with them.
    for (const core::KindInfo& info : core::TemplateKinds()) {
      if (!ListEach(client, ResourceOf(info, scope),
                    [&](core::Json&& runtime) { audit.AddRuntime(std::move(runtime)); })) {
        audit.NotServed(KindName(info));
      }
    }
    auto audit_kind = [&](const core::KindInfo& info) {
      const kube::ResourceRef resource = ResourceOf(info, scope);
      return ListEach(client, resource, [&](core::Json&& object) {
        // The items of a built-in type's list carry no apiVersion and kind (a CRD's do).
        if (!object.contains("kind")) {
          object["apiVersion"] = resource.ApiVersion();
          object["kind"] = info.kind_name;
        }
        std::cout << audit.Add(object);
      });
    };
    for (const core::KindInfo& info : core::ManagedKinds()) {
      if (!audit_kind(info)) audit.NotServed(KindName(info));
    }
    audit_kind(core::KindInfoOf(core::WorkloadKind::Pod));
    CheckTopologyLabels(client, audit);
    audit.Finish(std::cout);
    return audit.ExitCode();
  } catch (const kube::ApiError& e) {
    std::cout.flush();
    return AuditError(Describe(e, config));
  }
}

}  // namespace

Command AddAuditCommand(CLI::App& app) {
  auto options = std::make_shared<AuditOptions>();
  CLI::App* command = app.add_subcommand(
      "audit",
      "audit a live cluster's training jobs and GPU pods as the background audit does (exit 1 on "
      "a fail)");
  command->add_option("--kubeconfig", options->kubeconfig,
                      "kubeconfig file (default: $KUBECONFIG, in-cluster, ~/.kube/config)");
  command->add_option("--context", options->context, "kubeconfig context (default: current)");
  CLI::Option* ns = command->add_option(
      "-n,--namespace", options->namespace_,
      "the namespace to audit (default: the context's namespace, else default)");
  command
      ->add_flag("-A,--all-namespaces", options->all_namespaces,
                 "every namespace the policy's audit covers (never kube-system, kube-public, "
                 "kube-node-lease)")
      ->excludes(ns);
  command
      ->add_option("-o,--output", options->output,
                   "text (each object's results, then a summary) or json (a v1 List of the "
                   "PolicyReports the controller writes)")
      ->check(CLI::IsMember({"text", "json"}));
  AddPolicyFlags(*command, options->policy);
  return {command, [options] { return RunAudit(*options); }};
}

}  // namespace ncclguard::cli
