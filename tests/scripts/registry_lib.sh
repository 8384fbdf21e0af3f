# shellcheck shell=bash
# Sourced by tests/scripts/digest_resolver_test.sh and bench/digest_resolve.sh: real
# docker-registry processes (the CNCF distribution registry 2.8) and the Python stand-ins of
# tests/scripts/registry_standin.py, each on a free port of 127.0.0.1, in the caller's $work.
# The caller traps EXIT with registry_stop_all. Nothing here reaches beyond 127.0.0.1: the proxy
# variables are unset (libcurl and urllib would send even loopback requests to a proxy).
: "${work:?registry_lib.sh: set work (a temporary directory) before sourcing it}"
unset http_proxy https_proxy HTTP_PROXY HTTPS_PROXY all_proxy ALL_PROXY
export NO_PROXY=127.0.0.1 no_proxy=127.0.0.1

registry_standin=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/registry_standin.py
registry_pids=()
registry_accept=application/vnd.oci.image.index.v1+json,application/vnd.oci.image.manifest.v1+json,application/vnd.docker.distribution.manifest.list.v2+json,application/vnd.docker.distribution.manifest.v2+json

registry_stop_all() {
  local pid
  for pid in "${registry_pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${registry_pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  registry_pids=()
}

registry_free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# A self-signed certificate for 127.0.0.1 ($work/NAME.crt, $work/NAME.key): the TLS registry's
# and the token signer's.
registry_make_cert() {
  openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj "/CN=$1" \
    -addext "subjectAltName=IP:127.0.0.1" -keyout "$work/$1.key" -out "$work/$1.crt" 2>/dev/null
}

# registry_start NAME [tls] [AUTH_YAML]: a docker-registry over $work/storage (shared by all of
# them: pushed once to the open one, read by the others), its config in $work/NAME.yml. Sets
# registry_port once it answers /v2/.
registry_start() {
  local name=$1 tls=${2:-} auth=${3:-} scheme=http code pid
  local -a curl_tls=()
  if [[ $tls == tls ]]; then
    scheme=https
    curl_tls=(--cacert "$work/$name.crt")
    registry_make_cert "$name"
  fi
  for _ in 1 2 3; do  # another process may take the free port first
    registry_port=$(registry_free_port)
    {
      printf 'version: 0.1\nlog:\n  level: warn\n  accesslog:\n    disabled: true\n'
      printf 'storage:\n  filesystem:\n    rootdirectory: %s\n' "$work/storage"
      printf 'http:\n  addr: 127.0.0.1:%s\n' "$registry_port"
      if [[ $tls == tls ]]; then
        printf '  tls:\n    certificate: %s\n    key: %s\n' "$work/$name.crt" "$work/$name.key"
      fi
      [[ -z $auth ]] || printf 'auth:\n%s\n' "$auth"
    } >"$work/$name.yml"
    docker-registry serve "$work/$name.yml" >"$work/$name.log" 2>&1 &
    pid=$!
    registry_pids+=("$pid")
    for _ in $(seq 100); do
      code=$(curl -s -o /dev/null -w '%{http_code}' "${curl_tls[@]}" \
        "$scheme://127.0.0.1:$registry_port/v2/" || true)
      [[ $code != 000 ]] && return 0
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.1
    done
    kill "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
  cat "$work/$name.log" >&2
  echo "docker-registry $name did not start" >&2
  return 1
}

# standin_start NAME COMMAND ARGS...: registry_standin.py COMMAND on a port of its choosing; sets
# standin_port.
standin_start() {
  local name=$1 pid
  shift
  rm -f "$work/$name.port"
  python3 "$registry_standin" "$@" --port-file "$work/$name.port" 2>"$work/$name.log" &
  pid=$!
  registry_pids+=("$pid")
  for _ in $(seq 100); do
    if [[ -s $work/$name.port ]]; then
      # shellcheck disable=SC2034 # the caller's
      standin_port=$(cat "$work/$name.port")
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.05
  done
  cat "$work/$name.log" >&2
  echo "stand-in $name did not start" >&2
  return 1
}

# registry_digest URL [CURL_ARGS...]: the Docker-Content-Digest a registry answers a HEAD of the
# manifest URL with, asking for every manifest type.
registry_digest() {
  local url=$1
  shift
  curl -sfI "$@" -H "Accept: $registry_accept" "$url" |
    tr -d '\r' | awk -F': ' 'tolower($1) == "docker-content-digest" { print $2 }'
}

# A docker config (.dockerconfigjson) of one registry's user and password, as a pull Secret
# holds it: $work/NAME.json.
registry_docker_config() {
  local name=$1 registry=$2 user=$3 password=$4
  printf '{"auths":{"%s":{"auth":"%s"}}}\n' "$registry" \
    "$(printf '%s:%s' "$user" "$password" | base64 -w0)" >"$work/$name.json"
}
