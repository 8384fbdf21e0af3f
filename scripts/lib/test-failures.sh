# Sourced by scripts/test.sh: after a failed ctest run, one line per failed assertion of the
# failed tests (GoogleTest's "file:line: Failure" and the message after it, joined; for a test
# that crashed or timed out, its last line of output), so the last lines of a CI log say what
# failed, not only which executable.
# shellcheck shell=bash

# failed_assertions <build dir> [max lines]: reads ctest's LastTest.log and LastTestsFailed.log.
failed_assertions() {
  local dir="$1/Testing/Temporary" max="${2:-10}"
  [[ -r $dir/LastTestsFailed.log && -r $dir/LastTest.log ]] || return 0
  awk -v max="$max" '
    FNR == NR { sub(/^[0-9]+:/, ""); failed[$0] = 1; next }
    /^[0-9]+\/[0-9]+ Test: / { test = $0; sub(/^[0-9]+\/[0-9]+ Test: /, "", test); next }
    !(test in failed) { next }
    / Failure$/ { flush(); where = $0; sub(/: Failure$/, "", where); sub(/.*\//, "", where); text = ""; next }
    /^<end of output>$/ {
      flush()
      if (!(test in asserted) && ++printed <= max) printf "%s: no assertion failed; its last line: %s\n", test, substr(last, 1, 200)
      next
    }
    /^\[ +(RUN|OK|FAILED) +\]/ { flush(); next }
    where != "" { gsub(/^ +/, ""); text = text (text == "" ? "" : " | ") $0; next }
    NF { last = $0 }
    function flush() {
      if (where == "") return
      asserted[test] = 1
      if (++printed <= max) printf "%s: %s: %s\n", test, where, substr(text, 1, 240)
      where = ""
    }
    END { flush(); if (printed > max) printf "... and %d more failed assertions\n", printed - max }
  ' "$dir/LastTestsFailed.log" "$dir/LastTest.log"
}
