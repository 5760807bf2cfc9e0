#!/usr/bin/env bash
#
# nova's flake8 (with its hacking rules and local checks, as configured in
# the tree's tox.ini) on the Python files the series touches, in a patched
# nova tree.
#
# Usage:
#   tests/patches/nova_flake8.sh TREE [SERIES_DIR]
#
# TREE is a nova tree with the series applied; flake8 is the one on PATH,
# which must come with the hacking version the release's
# test-requirements.txt pins (6.1.0 for 31.x to 33.x, 8.0.0 for 34.x and
# master). Only the files the series changes can gain a finding: the
# others are nova's own, unchanged. Exits non-zero on any finding.
set -euo pipefail

[ $# -ge 1 ] && [ $# -le 2 ] || { sed -n '3,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
tree=$(cd "$1" && pwd)
repo_root=$(cd "$(dirname "$0")/../.." && pwd)
series_dir=${2:-$repo_root/patches}
files=()
while read -r f; do
    files+=("$f")
done < <(cd "$series_dir" && grep -h '^diff --git a/' $(grep -v '^#' series) |
         sed -n 's|^diff --git a/\([^ ]*\.py\) b/.*|\1|p' | sort -u)
echo "flake8 $(flake8 --version | head -1) on ${#files[@]} file(s) in $tree"
cd "$tree"
flake8 "${files[@]}"
echo "PASS: no finding"
