// The cluster contract (docs/contract.md): every name ncclguard reads from or writes to cluster
// objects under ncclguard.io, and its condition types, defined once. The chart's templates, the
// scripts and the docs spell these names literally (Helm cannot include C++);
// tests/unit/contract_test.cpp fails when they spell an ncclguard.io name not listed here.
#pragma once

#include <array>
#include <string_view>

namespace ncclguard::core {

// The API group of ncclguard's own kinds (NodeValidation, NcclPolicy).
inline constexpr std::string_view kApiGroup = "ncclguard.io";
inline constexpr std::string_view kApiGroupVersion = "v1alpha1";
inline constexpr std::string_view kApiVersion =
    "ncclguard.io/v1alpha1";  // apiVersion of its objects

// Namespace opt-in: the webhook configurations' namespaceSelector; the controllers ignore other
// namespaces.
inline constexpr std::string_view kEnabledNamespaceLabel = "ncclguard.io/enabled";
// On a namespace: "audit" or "enforce", overriding the NcclPolicy's spec.mode there (core::ModeIn).
// The webhook configurations route audit namespaces to /validate/audit, enforce ones to
// /mutate/enforce and /validate/enforce.
inline constexpr std::string_view kModeNamespaceLabel = "ncclguard.io/mode";
// A batch/v1 Job is managed only with this label set to "true".
inline constexpr std::string_view kManagedJobLabel = "ncclguard.io/managed";
// The gate: the webhook marks a managed job pending on CREATE, the controller admits it.
inline constexpr std::string_view kGateAnnotation = "ncclguard.io/gate";
inline constexpr std::string_view kGatePending = "pending";
inline constexpr std::string_view kGateAdmitted = "admitted";
// The pod scheduling gate that holds the pods of a job kind without a suspend field
// (HyperPodPyTorchJob) while its gate is pending (core/gate.h).
inline constexpr std::string_view kSchedulingGate = "ncclguard.io/validated-nodes";
// On a node: "true" when its NodeValidation passed (Pass or Warn), "false" on any Fail.
inline constexpr std::string_view kValidatedNodeLabel = "ncclguard.io/validated";
// On a NodeValidation, any value: the probe runs again and removes it.
inline constexpr std::string_view kProbeRequestedAnnotation = "ncclguard.io/probe-requested";
// On a NodeValidation: the group its probe runs the checks between nodes with (the instance type,
// and the network block where the node has one; core/peer_status.h PeerGroupOf).
inline constexpr std::string_view kPeerGroupLabel = "ncclguard.io/peer-group";
// On the one pod of a running job whose network namespace the probe on its node reads NCCL's RAS
// from ("true"; the controller picks it, core/ras.h): one RAS query per job per interval.
inline constexpr std::string_view kRasReaderLabel = "ncclguard.io/ras-reader";
// On a managed job: the image digest each container of its first pods ran (core/image_pin.h), a
// JSON object by container name; the webhook pins the job's later pods to it.
inline constexpr std::string_view kImageDigestsAnnotation = "ncclguard.io/image-digests";
// On a namespace: "pin", "warn" or "off", overriding the NcclPolicy's spec.imagePin there.
inline constexpr std::string_view kImagePinNamespaceLabel = "ncclguard.io/image-pin";
// On a namespace: "preferred", "required" or "off", overriding the NcclPolicy's spec.placement
// there (core/placement_request.h).
inline constexpr std::string_view kPlacementNamespaceLabel = "ncclguard.io/placement";
// On the rendezvous Service the controller makes: the job's MASTER_ADDR.
inline constexpr std::string_view kMasterAddrAnnotation = "ncclguard.io/master-addr";
// On a diagnosis' Event: the diagnosis id (kebab-case), since the reason is its UpperCamelCase
// form (core/reason.h).
inline constexpr std::string_view kDiagnosisAnnotation = "ncclguard.io/diagnosis";
// reportingController of the controller's Events.
inline constexpr std::string_view kReportingController = "ncclguard.io/controller";
// spec.controllerName of the Kueue AdmissionChecks the controller answers (core/kueue.h).
inline constexpr std::string_view kPreflightCheckController = "ncclguard.io/preflight";

// The manager of ncclguard's entry in a TrainJob's spec.runtimePatches (core/trainjob.h).
inline constexpr std::string_view kRuntimePatchManager = "ncclguard.io/webhook";

// The field manager of the PolicyReports the background audit applies (core/policy_report.h).
inline constexpr std::string_view kPolicyReportManager = "ncclguard.io/audit";

// Every ncclguard.io name above, for the test that checks what the chart and docs spell.
inline constexpr std::array<std::string_view, 20> kContractNames{kApiVersion,
                                                                 kEnabledNamespaceLabel,
                                                                 kManagedJobLabel,
                                                                 kGateAnnotation,
                                                                 kSchedulingGate,
                                                                 kValidatedNodeLabel,
                                                                 kProbeRequestedAnnotation,
                                                                 kMasterAddrAnnotation,
                                                                 kDiagnosisAnnotation,
                                                                 kReportingController,
                                                                 kApiGroup,
                                                                 kPreflightCheckController,
                                                                 kRuntimePatchManager,
                                                                 kModeNamespaceLabel,
                                                                 kPolicyReportManager,
                                                                 kPeerGroupLabel,
                                                                 kRasReaderLabel,
                                                                 kImageDigestsAnnotation,
                                                                 kImagePinNamespaceLabel,
                                                                 kPlacementNamespaceLabel};

// Condition types: on training jobs (status.conditions) and on nodes.
inline constexpr std::string_view kPreflightCondition = "NcclPreflight";
inline constexpr std::string_view kDiagnosisCondition = "NcclDiagnosis";
// What the training pods' logs say NCCL moves data over: reason EFA, Socket or Unknown.
inline constexpr std::string_view kTransportCondition = "NcclTransport";
// What NCCL's RAS says of a running job (core/ras.h): True while it reports every rank healthy.
inline constexpr std::string_view kHealthCondition = "NcclHealth";
// Where a running job's pods landed in the network (core/placement.h): True OneBlock when they
// share one closest network block, False Spread when they span several, Unknown NoTopologyLabels
// when their nodes carry no topology.k8s.aws/network-node-layer-N labels.
inline constexpr std::string_view kPlacementCondition = "NcclPlacement";
inline constexpr std::string_view kNodeReadyCondition = "NcclReady";

}  // namespace ncclguard::core
