# Pinned versions of the test cluster's components. Sourced by controlplane.sh and the
# go.mod generator; bumping a version here and re-running scripts/controlplane/gen-gomods.sh
# is the whole upgrade.
#
# Every component but the training operator is built from ONE Go module
# (scripts/controlplane/components), so a dependency they share (client-go, apimachinery,
# grpc, ...) is compiled once. That needs one Kubernetes minor for all of them: the versions
# below are chosen so that each one's own go.mod asks for k8s.io/* v0.35 (Kueue v0.17.0's
# minor; helm v3.20 and CoreDNS v1.14.7 are the newest of their lines on v0.35). Moving the
# minor means moving them together (docs/controlplane.md).
# shellcheck shell=bash disable=SC2034 # used by the scripts that source this file
KUBERNETES_VERSION=v1.35.4
ETCD_VERSION=v3.6.16
HELM_VERSION=v3.20.2
# The node's cluster DNS (issue 14), built with only the plugins the node uses.
COREDNS_VERSION=v1.14.7
KUEUE_VERSION=v0.17.0
# Its own module (scripts/controlplane/training): v1.8.1 is built on k8s.io/* v0.29 and
# controller-runtime v0.17, six minors from the others; it is compiled apart.
TRAINING_OPERATOR_VERSION=v1.8.1
# JobSet and Kubeflow Trainer v2 (scripts/trainer.sh): the versions Kueue v0.17.0's go.mod pins
# (its JobSet and TrainJob integrations are built against their APIs). The Trainer's
# controller-manager builds in the components module (it is on controller-runtime v0.23, as
# Kueue); JobSet v0.11.1's manager needs controller-runtime v0.22 and is built in its own
# module (scripts/controlplane/jobset), on the same k8s.io/* and shared versions as components.
JOBSET_VERSION=v0.11.1
TRAINER_VERSION=v2.2.0
# On-demand modules: built only when named, and only their own build stamps hash these lines
# (controlplane.sh module_hash), so adding or bumping one rebuilds nothing else.
# kwok (sigs.k8s.io/kwok), the simulated nodes of the scale bench (bench/scale.sh,
# scripts/kwok.sh): v0.8.0's go.mod asks for k8s.io/* v0.36 and go 1.26, a minor above
# components', so it is its own module (scripts/controlplane/kwok). Built on demand only
# (`controlplane.sh build kwok`), not by `build all` nor scripts/test.sh: no CI test needs it.
KWOK_VERSION=v0.8.0
# on-demand modules end
# Modules whose files the tests only read (nothing built of them): left out of the build stamps'
# hash (controlplane.sh module_hash), so pinning one rebuilds nothing.
# The policy working group's PolicyReport CRD (wgpolicyk8s.io/v1alpha2), for the background
# audit's tests: Kyverno's module publishes it (config/crds/policyreport); the working group's
# own module (sigs.k8s.io/wg-policy-prototypes) is not served by the Go module proxy. Only its
# source is read (`controlplane.sh source-dir`); nothing of Kyverno is built.
KYVERNO_VERSION=v1.19.1
# read-only modules end
