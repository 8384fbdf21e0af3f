# Pinned versions of the test control plane. Sourced by controlplane.sh and the
# go.mod generators; bumping a version here and re-running
# scripts/controlplane/gen-gomods.sh is the whole upgrade.
# shellcheck shell=bash disable=SC2034 # used by the scripts that source this file
KUBERNETES_VERSION=v1.34.4
ETCD_VERSION=v3.6.16
HELM_VERSION=v3.22.0
