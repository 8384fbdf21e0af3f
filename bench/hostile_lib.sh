# shellcheck shell=bash disable=SC2154 # work is set by the caller
# Shared by bench/hostile.sh and bench/webhook_memory.sh (sourced): the server's certificate and
# reviews sent together. The caller sets $work and defines `post PATH FILE`, printing the HTTP
# code first on its line.

# loopback_certificate: a self-signed certificate for 127.0.0.1, $work/tls.crt and $work/tls.key.
loopback_certificate() {
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -days 1 \
    -keyout "$work/tls.key" -out "$work/tls.crt" -subj /CN=127.0.0.1 \
    -addext "subjectAltName=IP:127.0.0.1" 2>/dev/null
}

# post_together N PATH FILE: N clients post FILE to PATH at once and wait for every answer; prints
# the codes counted, as "1x413, 3x503".
post_together() {
  local n=$1 path=$2 file=$3 i clients=()
  for i in $(seq "$n"); do
    post "$path" "$file" >"$work/client$i" &
    clients+=($!)
  done
  wait "${clients[@]}"
  cat "$work"/client* | cut -d' ' -f1 | sort | uniq -c | awk '{printf "%s%sx%s", s, $1, $2; s=", "}'
  rm -f "$work"/client*
}
