# shellcheck shell=bash disable=SC2154 # root, kueue_src and work are set by the caller
# Shared by bench/kueue.sh and bench/kueue_write.sh (sourced): a fresh control plane with Kueue's
# CRDs from the Go module cache.

# kueue_control_plane EXTRA_CRD...: starts scripts/controlplane.sh in $NCCLGUARD_CONTROLPLANE_DIR
# (its log in $work/cp.log, shown when the start fails), sets $bin (the components' binaries) and
# $kubeconfig, defines k (kubectl on it), applies Kueue's CRDs and EXTRA_CRD... and waits until
# every CRD is established.
kueue_control_plane() {
  local crd
  "$root/scripts/controlplane.sh" start >"$work/cp.log" 2>&1 || { cat "$work/cp.log" >&2; return 1; }
  # shellcheck disable=SC2016 # a literal $PATH in the pattern
  bin=$(sed -n 's/^export PATH=\(.*\):"\$PATH"$/\1/p' "$work/cp.log")
  kubeconfig=$NCCLGUARD_CONTROLPLANE_DIR/kubeconfig
  k() { "$bin/kubectl" --kubeconfig "$kubeconfig" "$@"; }
  for crd in "$kueue_src"/config/components/crd/bases/kueue.x-k8s.io_*.yaml "$@"; do
    k apply --server-side -f "$crd" >/dev/null
  done
  k wait --for condition=established --timeout=60s crd --all >/dev/null
}
