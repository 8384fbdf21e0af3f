#!/usr/bin/env bash
# The tag resolver (webhook/digest_resolver.h) against the REAL registry: Debian's docker-registry
# (the CNCF distribution registry 2.8.2), each instance on a free port of 127.0.0.1 over one
# storage folder in a temporary directory, images pushed by its API (registry_standin.py push):
#   1. open, plain http (listed): a tag resolves to exactly the Docker-Content-Digest the
#      registry reports to curl, the second time from the cache; a tag of an OCI index to the
#      index's digest; an unknown tag or repository: NotFound
#   2. the same registry not listed as plain http: the resolver speaks only https: Unreachable
#   3. htpasswd (Basic) over TLS (a self-signed certificate, given as ca_file): Unauthorized
#      without credentials, Resolved with the pull secret's, refused with a wrong password, and
#      Unreachable without the CA (verification on)
#   4. token auth (Bearer): the registry verifies JWTs from a token server STAND-IN (Python and
#      openssl, registry_standin.py token: the Docker token protocol); with the credential, then
#      anonymously on a public repository (access_token) and on a private one (Unauthorized), a
#      wrong password, and a plain-http realm not listed: refused before any request is sent
#   5. a registry STAND-IN whose HEAD has no Docker-Content-Digest: the manifest fetched and
#      hashed; one with a sha512 digest: BadAnswer
#   6. a listener that accepts and never answers: TimedOut at the budget (the elapsed time is
#      printed, not asserted); a closed port: Unreachable
# Every process it starts is stopped by its pid on exit. Skipped (77) without docker-registry
# (scripts/bootstrap.sh installs it).
#   tests/scripts/digest_resolver_test.sh DIGEST_RESOLVER_CHECK
set -euo pipefail
check=${1:?usage: $0 DIGEST_RESOLVER_CHECK}
for tool in docker-registry openssl curl python3; do
  command -v "$tool" >/dev/null || { echo "SKIP: $tool is not installed (scripts/bootstrap.sh)"; exit 77; }
done
work=$(mktemp -d)
# shellcheck source=tests/scripts/registry_lib.sh
source "$(dirname "$0")/registry_lib.sh"
trap 'registry_stop_all; rm -rf "$work"' EXIT
failures=0
pass() { printf 'ok    %s\n' "$*"; }
fail() { printf 'FAIL  %s\n' "$*"; failures=$((failures + 1)); }

resolve() { # resolve ARGS...: the check's lines in `out` (one a tag), its exit code in rc
  rc=0
  out=$("$check" "$@" 2>&1) || rc=$?
  [[ -z ${DIGEST_RESOLVER_TEST_VERBOSE:-} ]] || printf "%s\n" "$out" >&2
}
# expect N STATUS DIGEST CACHED WHAT: line N of `out` says STATUS, DIGEST ("" for any) and CACHED
# ("" for any).
expect() {
  local line
  line=$(sed -n "$1p" <<<"$out")
  if [[ $rc == 0 && $line == "$2 "* && (-z $3 || $line == *" digest=$3 "*) &&
    (-z $4 || $line == *" cached=$4 "*) ]]; then
    pass "$5: ${line%% why=*}"
  else
    fail "$5: expected $2 ${3:+digest=$3 }${4:+cached=$4}, got (exit $rc): $line"
  fi
}
why_has() { # why_has N TEXT WHAT
  local line
  line=$(sed -n "$1p" <<<"$out")
  [[ $line == *"$2"* ]] && pass "$3" || fail "$3: no \"$2\" in: $line"
}

password=s3cret-$RANDOM$RANDOM

echo "== 1. open registry, plain http"
registry_start open
open=127.0.0.1:$registry_port
pushed=$(python3 "$registry_standin" push "$open" ml/train 2.4)
pushed_index=$(python3 "$registry_standin" push "$open" ml/train multi --index)
pushed_public=$(python3 "$registry_standin" push "$open" public/base 1)
reported=$(registry_digest "http://$open/v2/ml/train/manifests/2.4")
reported_index=$(registry_digest "http://$open/v2/ml/train/manifests/multi")
echo "pushed ml/train:2.4 $pushed, ml/train:multi $pushed_index; the registry reports $reported, $reported_index"
[[ -n $reported && $reported == "$pushed" && $reported_index == "$pushed_index" ]] ||
  fail "the registry's digests are not what was pushed"
resolve --plain-http "$open" "$open/ml/train:2.4" "$open/ml/train:2.4" "$open/ml/train:multi" \
  "$open/ml/train:nope" "$open/ml/nothing:1"
expect 1 Resolved "$reported" 0 "a tag: the registry's digest"
expect 2 Resolved "$reported" 1 "the same tag again: from the cache"
expect 3 Resolved "$reported_index" 0 "an OCI index's tag: the index's digest"
expect 4 NotFound "" 0 "an unknown tag"
expect 5 NotFound "" 0 "an unknown repository"

echo "== 2. the same registry, not listed as plain http"
resolve "$open/ml/train:2.4"
expect 1 Unreachable "" 0 "https only unless listed"
why_has 1 "HEAD https://$open/" "it asked over https"

echo "== 3. htpasswd (Basic) over TLS"
python3 -W ignore -c 'import crypt, sys; print("alice:" + crypt.crypt(sys.argv[1], crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16)))' \
  "$password" >"$work/htpasswd"
registry_start basic tls "$(printf '  htpasswd:\n    realm: ncclguard-test\n    path: %s' "$work/htpasswd")"
basic=127.0.0.1:$registry_port
registry_docker_config basic-alice "$basic" alice "$password"
registry_docker_config basic-wrong "https://$basic/v2/" alice "not-$password"
reported_basic=$(registry_digest "https://$basic/v2/ml/train/manifests/2.4" --cacert "$work/basic.crt" -u "alice:$password")
[[ $reported_basic == "$reported" ]] || fail "the Basic registry reports $reported_basic"
resolve --ca-file "$work/basic.crt" --docker-config "$work/basic-alice.json" "anon=$basic/ml/train:2.4" \
  "$basic/ml/train:2.4" "$basic/ml/train:2.4" "anon=$basic/ml/train:2.4"
expect 1 Unauthorized "" 0 "Basic, no credentials"
expect 2 Resolved "$reported_basic" 0 "Basic, the pull secret's credential (the cache keys them apart)"
expect 3 Resolved "$reported_basic" 1 "Basic, again: from the cache"
expect 4 Unauthorized "" 1 "Basic, no credentials again: the failure cached"
resolve --ca-file "$work/basic.crt" --docker-config "$work/basic-wrong.json" "$basic/ml/train:2.4"
expect 1 Unauthorized "" 0 "Basic, a wrong password"
resolve --docker-config "$work/basic-alice.json" "$basic/ml/train:2.4"
expect 1 Unreachable "" 0 "TLS without the registry's CA"
why_has 1 "certificate" "the certificate's verification is named"

echo "== 4. token auth (Bearer) with a token server stand-in"
registry_make_cert token-signer
standin_start token token --key "$work/token-signer.key" --cert "$work/token-signer.crt" \
  --issuer ncclguard-token-standin --service ncclguard-registry --user alice \
  --password "$password" --log "$work/token-requests.log"
token=127.0.0.1:$standin_port
registry_start bearer "" "$(printf '  token:\n    realm: http://%s/token\n    service: ncclguard-registry\n    issuer: ncclguard-token-standin\n    rootcertbundle: %s' "$token" "$work/token-signer.crt")"
bearer=127.0.0.1:$registry_port
registry_docker_config bearer-alice "$bearer" alice "$password"
registry_docker_config bearer-wrong "$bearer" alice "not-$password"
resolve --plain-http "$bearer" --plain-http "$token" --docker-config "$work/bearer-alice.json" \
  "$bearer/ml/train:2.4" "anon=$bearer/public/base:1" "anon=$bearer/ml/train:2.4"
expect 1 Resolved "$reported" 0 "Bearer, a token for the pull secret's credential"
expect 2 Resolved "$pushed_public" 0 "Bearer, an anonymous token (access_token) on a public repository"
expect 3 Unauthorized "" 0 "Bearer, an anonymous token that grants nothing"
if grep -q "scope=repository%3Aml%2Ftrain%3Apull auth=basic" "$work/token-requests.log" &&
  grep -q "scope=repository%3Apublic%2Fbase%3Apull auth=none" "$work/token-requests.log"; then
  pass "the token server was asked for pull on each repository, with and without the credential"
else
  fail "token requests: $(cat "$work/token-requests.log")"
fi
resolve --plain-http "$bearer" --plain-http "$token" --docker-config "$work/bearer-wrong.json" \
  "$bearer/ml/train:2.4"
expect 1 Unauthorized "" 0 "Bearer, the token server refuses a wrong password"
asked=$(wc -l <"$work/token-requests.log")
resolve --plain-http "$bearer" --docker-config "$work/bearer-alice.json" "$bearer/ml/train:2.4"
expect 1 BadAnswer "" 0 "Bearer, a plain-http realm whose host is not listed"
[[ $(wc -l <"$work/token-requests.log") == "$asked" ]] &&
  pass "no request (no credential) went to the unlisted realm" || fail "the unlisted realm was asked"

echo "== 5. registry stand-ins: no Docker-Content-Digest, a sha512 one"
printf '{"schemaVersion":2,"mediaType":"application/vnd.oci.image.manifest.v1+json","layers":[]}' \
  >"$work/manifest.json"
hashed=sha256:$(sha256sum "$work/manifest.json" | cut -d' ' -f1)
standin_start no-digest manifest --body "$work/manifest.json" --mode no-digest
resolve --plain-http "127.0.0.1:$standin_port" "127.0.0.1:$standin_port/ml/train:2.4"
expect 1 Resolved "$hashed" 0 "no Docker-Content-Digest: the manifest fetched and hashed"
standin_start sha512 manifest --body "$work/manifest.json" --mode sha512
resolve --plain-http "127.0.0.1:$standin_port" "127.0.0.1:$standin_port/ml/train:2.4"
expect 1 BadAnswer "" 0 "a sha512 Docker-Content-Digest"

echo "== 6. silent and down"
standin_start silent silent
resolve --plain-http "127.0.0.1:$standin_port" --budget-ms 1500 "127.0.0.1:$standin_port/ml/train:2.4"
expect 1 TimedOut "" 0 "a registry that never answers: it returned ($(grep -o 'ms=[0-9.]*' <<<"$out") for a budget of 1500 ms)"
down=$(registry_free_port)
resolve --plain-http "127.0.0.1:$down" "127.0.0.1:$down/ml/train:2.4"
expect 1 Unreachable "" 0 "a closed port ($(grep -o 'ms=[0-9.]*' <<<"$out"))"

if ((failures > 0)); then
  echo "$failures failed"
  exit 1
fi
echo "all passed"
