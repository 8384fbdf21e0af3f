#!/usr/bin/env bash
# What resolving an image tag at admission costs (webhook/digest_resolver.h), as latency of
# DigestResolver::Resolve against real registries on 127.0.0.1 (Debian's docker-registry, the
# setup of tests/scripts/digest_resolver_test.sh): median, p99 and max of each case.
#   warm        the tag in the cache: what every pod after a job's first adds to its admission
#               (1 thread, then 8 at once on one resolver; with a credential, whose hash is
#               part of the cache key)
#   cold        every call asks the registry: open over plain http on a kept-alive connection,
#               then a new connection a call; Basic over TLS (new connection: TCP + TLS handshake
#               + 401 + retry); Bearer (HEAD, 401, a token from the Python token server stand-in,
#               which signs with an `openssl` process a token, HEAD again)
#   slow        a registry that accepts and never answers: bounded by the budget (1500 ms)
# WARM_RUNS (default 200000), COLD_RUNS (300), SLOW_RUNS (5) calls a case.
#   bench/digest_resolve.sh [BUILD_DIR]
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-${NCCLGUARD_BUILD_DIR:-$root/build}}
cmake --build "$build" --target ncclguard_digest_resolve_bench >/dev/null
bench=$build/bench/resolver/ncclguard_digest_resolve_bench
work=$(mktemp -d)
# shellcheck source=tests/scripts/registry_lib.sh
source "$root/tests/scripts/registry_lib.sh"
trap 'registry_stop_all; rm -rf "$work"' EXIT
warm=${WARM_RUNS:-200000} cold=${COLD_RUNS:-300} slow=${SLOW_RUNS:-5}
password=bench-$RANDOM$RANDOM

registry_start open
open=127.0.0.1:$registry_port
python3 "$registry_standin" push "$open" ml/train 2.4 >/dev/null
python3 -W ignore -c 'import crypt, sys; print("alice:" + crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))' \
  "$password" >"$work/htpasswd"
registry_start basic tls "$(printf '  htpasswd:\n    realm: ncclguard-bench\n    path: %s' "$work/htpasswd")"
basic=127.0.0.1:$registry_port
registry_docker_config basic "$basic" alice "$password"
registry_make_cert token-signer
standin_start token token --key "$work/token-signer.key" --cert "$work/token-signer.crt" \
  --issuer ncclguard-bench --service ncclguard-registry --user alice --password "$password" \
  --log "$work/token-requests.log"
token=127.0.0.1:$standin_port
registry_start bearer "" "$(printf '  token:\n    realm: http://%s/token\n    service: ncclguard-registry\n    issuer: ncclguard-bench\n    rootcertbundle: %s' "$token" "$work/token-signer.crt")"
bearer=127.0.0.1:$registry_port
registry_docker_config bearer "$bearer" alice "$password"
standin_start silent silent
silent=127.0.0.1:$standin_port

echo "$(nproc) CPUs, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
"$bench" warm "$warm" --plain-http "$open" "$open/ml/train:2.4"
"$bench" warm-8-threads "$warm" --threads 8 --plain-http "$open" "$open/ml/train:2.4"
"$bench" warm-with-credential "$warm" --ca-file "$work/basic.crt" --docker-config "$work/basic.json" \
  "$basic/ml/train:2.4"
"$bench" cold-open-keepalive "$cold" --no-cache --plain-http "$open" "$open/ml/train:2.4"
"$bench" cold-open-new-connection "$cold" --fresh --plain-http "$open" "$open/ml/train:2.4"
"$bench" cold-basic-tls-new-connection "$cold" --fresh --ca-file "$work/basic.crt" \
  --docker-config "$work/basic.json" "$basic/ml/train:2.4"
"$bench" cold-basic-tls-keepalive "$cold" --no-cache --ca-file "$work/basic.crt" \
  --docker-config "$work/basic.json" "$basic/ml/train:2.4"
"$bench" cold-bearer-keepalive "$cold" --no-cache --plain-http "$bearer" --plain-http "$token" \
  --docker-config "$work/bearer.json" "$bearer/ml/train:2.4"
"$bench" slow-budget-1500ms "$slow" --no-cache --plain-http "$silent" "$silent/ml/train:2.4"
