#pragma once

#include <string_view>
#include <vector>

#include "core/finding.h"
#include "core/image_pin.h"
#include "core/json.h"
#include "core/placement_request.h"
#include "core/policy.h"
#include "core/trainjob.h"
#include "core/workload.h"

namespace ncclguard::core {

struct EvaluateOptions {
  bool pod_rules = true;
  bool job_rules = true;
  // The deny and warn rules; off where only the fixes are wanted (the mutating webhook: its
  // validating twin checks the fixed object).
  bool check_rules = true;
  // Where a TrainJob's runtime is found (core/trainjob.h); none: it is judged by itself.
  RuntimeLookup runtimes{};
  // The digests recorded for a Pod's job (core/image_pin.h): what rules image-pin and
  // image-unpinned read; null where no cluster is known (the CLI) or the pod has no job.
  const JobImagePins* image_pins = nullptr;
  // Where the object's pods are asked to go (core/placement_request.h): what rule
  // topology-placement reads; null where no cluster is known.
  const PlacementRequest* placement = nullptr;
  // Only this fix rule runs (the mutating webhook on a job, whose other fixes happen to its pods);
  // empty: every rule.
  std::string_view only_rule{};
};

struct Evaluation {
  std::vector<Finding> findings;
  Json patch = Json::array();  // RFC 6902 operations, in order
  Json fixed;                  // the object with the patch applied
  bool recognized = false;     // a kind ncclguard models; others pass through untouched

  bool HasDeny() const;
};

// Runs every enabled rule over `object`: first the fix rules, each seeing the fixes before it,
// then the deny and warn rules over the fixed object. Throws InputError when a field the rules
// read has the wrong type; nothing is half-applied because the caller's object is never
// modified. Taken by value: a caller done with the object moves it in and saves a deep copy.
Evaluation Evaluate(Json object, const Policy& policy, const EvaluateOptions& options = {});
// The same for a caller that has already parsed `object` into `workload` (the webhook, which
// routes on the kind first): the object is not parsed twice.
Evaluation Evaluate(Json object, const Workload& workload, const Policy& policy,
                    const EvaluateOptions& options = {});

}  // namespace ncclguard::core
