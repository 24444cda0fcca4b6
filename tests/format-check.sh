#!/usr/bin/env bash
# format-check.sh - every C/CUDA source in git is formatted as .clang-format says (`make format`
# fixes it). Prints "N passed, N failed" (a file each); without clang-format it says so and
# counts nothing.
set -u
cd "$(dirname "$0")/.."
if ! command -v clang-format >/dev/null; then
  echo "SKIP: clang-format not installed (apt-get install clang-format)"
  echo "0 passed, 0 failed"
  exit 0
fi
passed=0
failed=0
while IFS= read -r f; do
  if clang-format --style=file "$f" | cmp -s - "$f"; then
    passed=$((passed + 1))
  else
    failed=$((failed + 1))
    echo "FAIL $f differs from .clang-format (run: make format)"
  fi
done < <(git ls-files '*.c' '*.h' '*.cu' '*.cuh')
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
