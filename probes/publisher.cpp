#include "probes/publisher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <exception>
#include <utility>

#include "core/contract.h"
#include "core/json_access.h"
#include "probes/node_validation.h"

namespace ncclguard::probes {
namespace {

using core::Json;

// Structured log lines: cli/json_log.h turns a JSON-object message into fields.
void Log(spdlog::level::level_enum level, Json fields) {
  if (!spdlog::should_log(level)) return;
  spdlog::log(level, "{}", fields.dump(-1, ' ', false, Json::error_handler_t::replace));
}

Json ErrorFields(const std::exception& error) {
  Json fields{{"error", error.what()}};
  if (const auto* api = dynamic_cast<const kube::ApiError*>(&error)) {
    fields["code"] = kube::ErrorCodeName(api->code());
    if (api->http_status() != 0) fields["httpStatus"] = api->http_status();
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
  client_->PatchStatus(validation, kube::PatchType::kMerge,
                       Json{{"status", NodeValidationStatus(named)}}, write);

  const kube::ResourceRef node = kube::resources::Nodes().Named(options_.node_name);
  const Json patched = client_->Patch(node, kube::PatchType::kMerge, NodeLabelPatch(named), write);
  const Json condition = NcclReadyCondition(
      named, FindNodeCondition(patched, core::kNodeReadyCondition), options_.clock());
  client_->PatchStatus(node, kube::PatchType::kStrategic, NodeConditionPatch(condition), write);

  Count(&PublisherStats::publishes);
  Log(spdlog::level::info, Json{{"msg", "published node validation"},
                                {"node", options_.node_name},
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
    Json fields = ErrorFields(error);
    fields["msg"] = "request annotation not cleared";
    Log(error.code() == kube::ErrorCode::kInvalid ? spdlog::level::debug : spdlog::level::warn,
        std::move(fields));
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
    Json fields = ErrorFields(error);
    fields["msg"] = "could not read the probe request annotation";
    Log(spdlog::level::debug, std::move(fields));
  }

  ProbeReport report;
  try {
    report = probe_();
    Count(&PublisherStats::probes);
  } catch (const std::exception& error) {
    Json fields = ErrorFields(error);
    fields["msg"] = "probe failed to run";
    Log(spdlog::level::err, std::move(fields));
    return std::nullopt;
  }
  if (report.timed_out)
    Log(spdlog::level::warn,
        Json{{"msg", "a check timed out and is still running on a detached thread"}});

  kube::Backoff backoff(options_.retry);
  while (!stop.stopped()) {
    try {
      Publish(report, request);
      return report;
    } catch (const std::exception& error) {
      Count(&PublisherStats::publish_failures);
      const auto delay = backoff.Next();
      Json fields = ErrorFields(error);
      fields["msg"] = "publishing failed; retrying";
      fields["node"] = options_.node_name;
      fields["attempt"] = backoff.attempts();
      fields["retryInMs"] = delay.count();
      Log(spdlog::level::warn, std::move(fields));
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
          Log(spdlog::level::info,
              Json{{"msg", "probe requested"},
                   {"annotation", std::string(core::kProbeRequestedAnnotation)}});
          break;
        }
        failed_polls = 0;
      } catch (const std::exception& error) {
        // The next run retries with backoff anyway; warn once per outage, not every poll.
        Json fields = ErrorFields(error);
        fields["msg"] = "could not poll for a probe request";
        Log(failed_polls++ == 0 ? spdlog::level::warn : spdlog::level::debug, std::move(fields));
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

}  // namespace ncclguard::probes
