#include "manager/executor.h"

#include <variant>

namespace ncclguard::manager {

kube::ResourceRef ResourceFor(const core::ObjectRef& target) {
  kube::ResourceRef ref;
  const auto slash = target.api_version.find('/');
  if (slash == std::string::npos) {
    ref.version = target.api_version;
  } else {
    ref.group = target.api_version.substr(0, slash);
    ref.version = target.api_version.substr(slash + 1);
  }
  ref.resource = target.resource;
  ref.namespaced = !target.namespace_.empty();
  ref.namespace_ = target.namespace_;
  ref.name = target.name;
  return ref;
}

namespace {

core::Json Regarding(const core::ObjectRef& r) {
  core::Json regarding{{"apiVersion", r.api_version}, {"kind", r.kind}, {"name", r.name}};
  if (!r.namespace_.empty()) regarding["namespace"] = r.namespace_;
  if (!r.uid.empty()) regarding["uid"] = r.uid;
  return regarding;
}

}  // namespace

Outcome Executor::Apply(const std::vector<controllers::Action>& actions,
                        const kube::StopToken& leading, std::string* error,
                        std::vector<controllers::Action>* unsent, std::size_t* applied) {
  std::size_t done = 0;
  if (applied == nullptr) applied = &done;
  *applied = 0;
  bool events_failed = false;
  // The gate's release, then its status patch: the second names the version the first made.
  controllers::PatchVersions versions;
  for (const controllers::Action& action : actions) {
    if (leading.stopped()) return Outcome::kStopped;
    try {
      if (const auto* create = std::get_if<controllers::CreateObject>(&action)) {
        kube::ResourceRef ref = ResourceFor(create->target);
        ref.name.clear();
        try {
          client_->Create(ref, create->object);
          ++stats_.creates;
        } catch (const kube::ApiError& e) {
          // Another writer (or our own earlier attempt whose answer was lost) made it first; the
          // next reconcile compares what is there.
          if (e.code() != kube::ErrorCode::kAlreadyExists) throw;
          ++stats_.already_existed;
        }
      } else if (const auto* patch = std::get_if<controllers::MergePatch>(&action)) {
        const kube::ResourceRef ref = ResourceFor(patch->target);
        const core::Json body = versions.Resolve(*patch);
        const core::Json answer = patch->status_subresource
                                      ? client_->PatchStatus(ref, kube::PatchType::kMerge, body)
                                      : client_->Patch(ref, kube::PatchType::kMerge, body);
        versions.Wrote(*patch, kube::ResourceVersionOf(answer));
        ++stats_.patches;
      } else if (const auto* apply = std::get_if<controllers::ApplyObject>(&action)) {
        const kube::ResourceRef ref = ResourceFor(apply->target);
        if (apply->status_subresource) {
          client_->ApplyStatus(ref, apply->object, apply->field_manager, true);
        } else {
          client_->Apply(ref, apply->object, apply->field_manager, true);
        }
        ++stats_.patches;
      } else if (const auto* event = std::get_if<controllers::RecordEvent>(&action)) {
        kube::EventSpec spec;
        spec.regarding = Regarding(event->regarding);
        spec.type = event->type;
        spec.reason = event->reason;
        spec.action = event->action;
        spec.note = event->note;
        spec.annotations = event->annotations;
        // Record never throws; "" means the Event was not written.
        if (recorder_->Record(spec).empty()) {
          if (error != nullptr) *error = "Event " + event->reason + " not recorded";
          ++stats_.errors;
          events_failed = true;
          if (unsent != nullptr) unsent->push_back(action);
          ++*applied;
          continue;
        }
        ++stats_.events;
      }
      ++*applied;
    } catch (const kube::ApiError& e) {
      if (error != nullptr) *error = e.what();
      if (e.code() == kube::ErrorCode::kNotFound) {
        // The job (or its namespace) is gone: nothing left to do for it.
        return Outcome::kDropped;
      }
      if (e.code() == kube::ErrorCode::kConflict) {
        ++stats_.conflicts;
        return Outcome::kConflict;
      }
      ++stats_.errors;
      return Outcome::kRetry;
    }
  }
  return events_failed ? Outcome::kRetry : Outcome::kDone;
}

}  // namespace ncclguard::manager
