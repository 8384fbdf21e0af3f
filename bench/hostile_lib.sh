# shellcheck shell=bash disable=SC2154 # work is set by the caller
# Shared by bench/hostile.sh and bench/webhook_memory.sh (sourced): reviews sent together.
# The caller defines `post PATH FILE`, printing the HTTP code first on its line, and $work.

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
