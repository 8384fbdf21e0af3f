# shellcheck shell=bash disable=SC2154 # root is set by the caller
# Shared by bench/webhook.sh and bench/webhook_profile.sh (sourced after `root` is set): a work
# directory with the server's self-signed certificate for 127.0.0.1, the review both send, and
# the cleanup that stops the server they started (by its pid) and removes the directory.
work=$(mktemp -d)
server_pid=""
cleanup() {
  # Every step, whatever the one before returned: under errexit a `wait` answering a killed
  # child's status would end the trap here and leave the rest running.
  set +e
  [[ -n $server_pid ]] && kill "$server_pid" 2>/dev/null && wait "$server_pid" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
  -keyout "$work/tls.key" -out "$work/tls.crt" -subj /CN=127.0.0.1 \
  -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null
# shellcheck disable=SC2034 # used by the scripts that source this file
review=$root/bench/webhook/worker-pod-review.json
