#!/usr/bin/env bash
# scripts/lib/test-failures.sh on a ctest log of three tests (one passed, one with two failed
# GoogleTest assertions, one that crashed): one line per failed assertion with its file:line and
# message, the crashed test's last line, nothing of the passing test, and the line cap.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=../../scripts/lib/test-failures.sh
source "$root/scripts/lib/test-failures.sh"
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
mkdir -p "$dir/Testing/Temporary"
printf '2:controller_tests\n3:node_tests\n' >"$dir/Testing/Temporary/LastTestsFailed.log"
cat >"$dir/Testing/Temporary/LastTest.log" <<'LOG'
1/3 Testing: unit_ok
1/3 Test: unit_ok
Output:
----------------------------------------------------------
/src/tests/a_test.cpp:9: Failure
not counted: this test passed
<end of output>
Test Passed.
2/3 Testing: controller_tests
2/3 Test: controller_tests
Output:
----------------------------------------------------------
[ RUN      ] ControllerTest.Holds
/src/tests/controlplane/controller_test.cpp:741: Failure
Value of: Eventually(admitted_once, 60s)
  Actual: false
Expected: true
2 held jobs without exactly one Admitted Event
/src/tests/controlplane/controller_test.cpp:750: Failure
Expected: (retries) <= (bound), actual: 700 vs 626
[  FAILED  ] ControllerTest.Holds (5 ms)
<end of output>
Test Failed.
3/3 Testing: node_tests
3/3 Test: node_tests
Output:
----------------------------------------------------------
node_test: starting the node
node_test: helm install timed out after 300 s

<end of output>
Test Failed.
LOG
got=$(failed_assertions "$dir")
want="controller_tests: controller_test.cpp:741: Value of: Eventually(admitted_once, 60s) | Actual: false | Expected: true | 2 held jobs without exactly one Admitted Event
controller_tests: controller_test.cpp:750: Expected: (retries) <= (bound), actual: 700 vs 626
node_tests: no assertion failed; its last line: node_test: helm install timed out after 300 s"
if [[ $got != "$want" ]]; then
  printf 'failed_assertions printed:\n%s\n\nexpected:\n%s\n' "$got" "$want" >&2
  exit 1
fi
capped=$(failed_assertions "$dir" 1)
[[ $capped == *"... and 2 more failed assertions" && $(wc -l <<<"$capped") == 2 ]] ||
  { printf 'with a cap of 1 line:\n%s\n' "$capped" >&2; exit 1; }
# No log (ctest never ran): nothing printed, no error.
[[ -z $(failed_assertions "$dir/none") ]]
echo "test_failures_test: ok"
