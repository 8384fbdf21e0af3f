# Pinned versions of the test control plane. Sourced by controlplane.sh and the
# go.mod generators; bumping a version here and re-running
# scripts/controlplane/gen-gomods.sh is the whole upgrade.
# shellcheck shell=bash disable=SC2034 # used by the scripts that source this file
KUBERNETES_VERSION=v1.34.4
ETCD_VERSION=v3.6.16
HELM_VERSION=v3.22.0
# Components the node and its tests run beside the control plane (issues 14-15):
# built from the Go module proxy like the rest; their CRDs and manifests are read
# from the module cache (scripts/controlplane.sh source-dir), never copied here.
TRAINING_OPERATOR_VERSION=v1.8.1
# The node's cluster DNS (issue 14), built with only the plugins the node uses.
COREDNS_VERSION=v1.15.0
KUEUE_VERSION=v0.17.0
