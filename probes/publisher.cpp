#include "probes/publisher.h"

#include <algorithm>
#include <exception>
#include <utility>

#include "core/contract.h"
#include "core/json_access.h"
#include "log/log.h"
#include "probes/node_validation.h"

namespace ncclguard::probes {
namespace {

using core::Json;

// The error, and for an API error its code and HTTP status, as log fields.
log::Fields ErrorFields(const std::exception& error) {
  log::Fields fields{{"error", error.what()}};
  if (const auto* api = dynamic_cast<const kube::ApiError*>(&error)) {
    fields.push_back({"code", kube::ErrorCodeName(api->code())});
    if (api->http_status() != 0) fields.push_back({"httpStatus", api->http_status()});
  }
  return fields;
}

// "/metadata/annotations/ncclguard.io~1probe-requested" (RFC 6901 escaping).
std::string AnnotationPointer(std::string_view key) {
  return "/metadata/annotations/" + core::EscapePointerToken(key);
}

std::string AnnotationOf(const Json& object, std::string_view key) {
  const Json* annotations = nullptr;
  if (object.is_object() && object.contains("metadata") && object["metadata"].is_object() &&
      object["metadata"].contains("annotations"))
    annotations = &object["metadata"]["annotations"];
  if (annotations == nullptr || !annotations->is_object()) return "";
  const auto found = annotations->find(std::string(key));
  if (found == annotations->end() || !found->is_string()) return "";
  return found->get<std::string>();
}

}  // namespace

kube::ResourceRef NodeValidations() { return kube::resources::NodeValidations(); }

NodePublisher::NodePublisher(std::shared_ptr<kube::Client> client, ProbeFunction probe,
                             PublisherOptions options)
    : client_(std::move(client)), probe_(std::move(probe)), options_(std::move(options)) {
  if (options_.node_name.empty())
    throw std::invalid_argument("probe publisher: no node name (--node-name or $NODE_NAME)");
  if (!options_.clock) options_.clock = [] { return std::chrono::system_clock::now(); };
}

void NodePublisher::Publish(const ProbeReport& report, const std::string& request) {
  ProbeReport named = report;
  named.node_name = options_.node_name;
  const kube::WriteOptions write{options_.field_manager, false};
  const kube::ResourceRef validation = NodeValidations().Named(options_.node_name);

  // The object first (status is ignored on create: it has its own subresource).
  try {
    client_->Get(validation);
  } catch (const kube::ApiError& error) {
    if (error.code() != kube::ErrorCode::kNotFound) throw;
    Json object = NodeValidationObject(named);
    object.erase("status");
    try {
      client_->Create(NodeValidations(), object, write);
    } catch (const kube::ApiError& create_error) {
      if (create_error.code() != kube::ErrorCode::kAlreadyExists) throw;
    }
  }
  // A merge patch replaces status wholesale (checks is a list): no resourceVersion, no conflict.
  Json status = NodeValidationStatus(named);
  if (!options_.peer_checks) status["peer"] = nullptr;
  if (!options_.ras_reads) status["ras"] = nullptr;
  client_->PatchStatus(validation, kube::PatchType::kMerge, Json{{"status", std::move(status)}},
                       write);

  const kube::ResourceRef node = kube::resources::Nodes().Named(options_.node_name);
  const Json patched = client_->Patch(node, kube::PatchType::kMerge, NodeLabelPatch(named), write);
  const Json condition = NcclReadyCondition(
      named, FindNodeCondition(patched, core::kNodeReadyCondition), options_.clock());
  client_->PatchStatus(node, kube::PatchType::kStrategic, NodeConditionPatch(condition), write);

  Count(&PublisherStats::publishes);
  log::Info("published node validation", {{"node", options_.node_name},
                                          {"summary", StatusName(named.summary)},
                                          {"validated", ValidatedLabelValue(named)},
                                          {"ncclReady", condition["status"]}});
  if (!request.empty()) ClearRequest(request);
}

void NodePublisher::ClearRequest(const std::string& request) {
  // test-then-remove: a request made while this run was going stays for the next one.
  const std::string pointer = AnnotationPointer(core::kProbeRequestedAnnotation);
  const Json patch = Json::array({Json{{"op", "test"}, {"path", pointer}, {"value", request}},
                                  Json{{"op", "remove"}, {"path", pointer}}});
  try {
    client_->Patch(NodeValidations().Named(options_.node_name), kube::PatchType::kJson, patch,
                   {options_.field_manager, false});
    Count(&PublisherStats::requests_cleared);
  } catch (const kube::ApiError& error) {
    // 422: the value changed (a newer request) or is gone; anything else: the next poll sees the
    // annotation again and runs once more, which is harmless.
    log::Write(error.code() == kube::ErrorCode::kInvalid ? log::Level::Debug : log::Level::Warn,
               "request annotation not cleared", ErrorFields(error));
  }
}

std::string NodePublisher::PendingRequest() {
  try {
    return AnnotationOf(client_->Get(NodeValidations().Named(options_.node_name)),
                        core::kProbeRequestedAnnotation);
  } catch (const kube::ApiError& error) {
    if (error.code() == kube::ErrorCode::kNotFound) return "";
    throw;
  }
}

std::optional<ProbeReport> NodePublisher::RunOnce(const kube::StopToken& stop) {
  // The request this run answers, read before probing; best effort (the server may be away).
  std::string request;
  try {
    request = PendingRequest();
  } catch (const std::exception& error) {
    log::Write(log::Level::Debug, "could not read the probe request annotation",
               ErrorFields(error));
  }

  ProbeReport report;
  try {
    report = probe_();
    Count(&PublisherStats::probes);
  } catch (const std::exception& error) {
    log::Write(log::Level::Error, "probe failed to run", ErrorFields(error));
    return std::nullopt;
  }
  report.node_name = options_.node_name;
  if (options_.metrics) options_.metrics->RecordRun(report, options_.clock());
  if (report.timed_out) log::Warn("a check timed out and is still running on a detached thread");

  kube::Backoff backoff(options_.retry);
  while (!stop.stopped()) {
    try {
      Publish(report, request);
      if (options_.metrics) options_.metrics->CountPublication(true);
      return report;
    } catch (const std::exception& error) {
      Count(&PublisherStats::publish_failures);
      if (options_.metrics) options_.metrics->CountPublication(false);
      const auto delay = backoff.Next();
      log::Fields fields = ErrorFields(error);
      fields.push_back({"node", options_.node_name});
      fields.push_back({"attempt", backoff.attempts()});
      fields.push_back({"retryInMs", delay.count()});
      log::Write(log::Level::Warn, "publishing failed; retrying", fields);
      if (stop.WaitFor(delay)) break;
    }
  }
  return std::nullopt;
}

void NodePublisher::Run(const kube::StopToken& stop) {
  int failed_polls = 0;
  while (!stop.stopped()) {
    RunOnce(stop);
    const auto due = std::chrono::steady_clock::now() + options_.interval;
    while (!stop.stopped()) {
      const auto now = std::chrono::steady_clock::now();
      if (now >= due) break;
      const auto wait =
          std::min<std::chrono::steady_clock::duration>(due - now, options_.request_poll);
      if (stop.WaitFor(wait)) return;
      if (std::chrono::steady_clock::now() >= due) break;
      try {
        if (!PendingRequest().empty()) {
          Count(&PublisherStats::requested_runs);
          log::Info("probe requested", {{"annotation", core::kProbeRequestedAnnotation}});
          break;
        }
        failed_polls = 0;
      } catch (const std::exception& error) {
        // The next run retries with backoff anyway; warn once per outage, not every poll.
        log::Write(failed_polls++ == 0 ? log::Level::Warn : log::Level::Debug,
                   "could not poll for a probe request", ErrorFields(error));
      }
    }
  }
}

PublisherStats NodePublisher::stats() const {
  std::lock_guard lock(mutex_);
  return stats_;
}

void NodePublisher::Count(int PublisherStats::*counter) {
  std::lock_guard lock(mutex_);
  ++(stats_.*counter);
}

ResolvedInstanceType WithNodeLabelFallback(ResolvedInstanceType resolved, kube::Client& client,
                                           const std::string& node_name) {
  if (resolved.name || node_name.empty()) return resolved;
  try {
    ResolvedInstanceType from_node =
        InstanceTypeFromNode(client.Get(kube::resources::Nodes().Named(node_name)));
    if (from_node.name) return from_node;
    return {std::nullopt, resolved.source + "; " + from_node.source};
  } catch (const std::exception& e) {
    return {std::nullopt, resolved.source + "; reading Node " + node_name + ": " + e.what()};
  }
}

}  // namespace ncclguard::probes
