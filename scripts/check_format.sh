#!/usr/bin/env bash
# check_format.sh — every C++ and CUDA source the repository tracks follows .clang-format
# (clang-format 14, Debian's; scripts/setup.sh --test installs it).
#
#   scripts/check_format.sh          check (no file is changed)
#   scripts/check_format.sh --fix    format them in place
#
# Prints "check_format: FAIL FILE" with clang-format's first complaint for each file that does
# not follow it, and last "check_format: P passed, F failed" (one check per file; scripts/test.sh
# counts these).
set -uo pipefail
cd "$(dirname "$0")/.."
format=$(command -v clang-format-14 || command -v clang-format) ||
    { echo "check_format: clang-format is missing (apt-get install clang-format)"; echo "check_format: 0 passed, 1 failed"; exit 1; }
mapfile -t files < <(git ls-files '*.cpp' '*.h' '*.cu' '*.cuh')
if [[ ${1:-} == --fix ]]; then
    "$format" -i "${files[@]}"
    echo "check_format: formatted ${#files[@]} files"
    exit 0
fi
passed=0 failed=0
for f in "${files[@]}"; do
    if out=$("$format" --dry-run -Werror "$f" 2>&1); then
        passed=$(( passed + 1 ))
    else
        echo "check_format: FAIL $f (scripts/check_format.sh --fix formats it)"
        echo "$out" | head -3 | sed 's/^/    /'
        failed=$(( failed + 1 ))
    fi
done
echo "check_format: $passed passed, $failed failed"
(( failed == 0 ))
