#!/usr/bin/env bash
# Fails when a tracked C++ file differs from clang-format's output (.clang-format at the root).
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(git ls-files '*.cpp' '*.h' 2>/dev/null || find core cli tests -name '*.cpp' -o -name '*.h')
clang-format --dry-run -Werror "${files[@]}"
echo "clang-format: ${#files[@]} files formatted"
