#!/usr/bin/env bash
#
# Measure what one cleanup design leaves on an evacuation's destination:
# every failure point x storage mode of tests/patches/test_design_matrix.py,
# one JSON line per case appended to OUT.
#
# Usage, in a virtualenv with nova and this project installed (e.g.
# .tox/functional for stock nova, .tox/release-34-patched after a run of it
# for the patched nova):
#   tests/patches/measure_designs.sh NAME OUT [all]
#
# NAME labels the design in OUT; "all" adds a driver that cleans up what
# its spawn created after a failure at any stage (see the test module).
# Then: python tests/patches/design_matrix_report.py OUT
set -euo pipefail

[ $# -ge 2 ] && [ $# -le 3 ] || { sed -n '3,15p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
repo_root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
workdir=$(mktemp -d "${TMPDIR:-/tmp}/design-matrix.XXXXXX")
trap 'rm -rf "$workdir"' EXIT

export DESIGN_MATRIX_DESIGN=$1 DESIGN_MATRIX_OUT=$out
export DESIGN_MATRIX_DRIVER_CLEANUP=${3:-}
export OS_NOVA_DISABLE_EVENTLET_PATCHING=False
cd "$workdir"
"${PYTHON:-python}" -m stestr init > /dev/null
"${PYTHON:-python}" -m stestr --test-path "$repo_root/tests/patches" --top-dir "$repo_root" \
    run test_design_matrix
