#!/usr/bin/env bash
#
# Each change of the series on its own: its tests at its commit.
#
# Usage:
#   tests/patches/nova_per_commit.sh TREE BASE
#
# TREE is a nova git work tree whose commits BASE..HEAD are the series
# (git am of patches/), in a virtualenv with that nova's requirements.
# At each commit, in order, nova's tests of what the series touches are
# run with stestr from the tree (one run: the unit tests of the rebuild
# and evacuate code, the resource tracker's and the driver's new methods,
# and the regression module regressions/test_bug_NNNNNNN.py; the module
# asserts, at each commit, the bugs not fixed yet and the fixes of the
# changes before). A change whose tests fail at its commit fails the run:
# the series would not be bisectable. Prints one line per commit.
set -euo pipefail

[ $# -eq 2 ] || { sed -n '3,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
tree=$(cd "$1" && pwd)
base=$2
REGEX=${REGEX:-'unit\.compute\.test_compute_mgr\.ComputeManagerUnitTestCase\.test_(.*rebuild|.*evacuat)|unit\.compute\.test_resource_tracker\.TestFinishRecordedEvacuation|unit\.virt\..*\.test_instance_(on_disk|files_exist)|functional\.regressions\.test_bug_NNNNNNN\.'}
export OS_NOVA_DISABLE_EVENTLET_PATCHING=False
cd "$tree"
head=$(git rev-parse HEAD)
trap 'git checkout -q "$head"' EXIT
rc=0
for commit in $(git rev-list --reverse "$base..$head"); do
    git checkout -q "$commit"
    start=$(date +%s)
    if stestr --test-path ./nova/tests --top-dir ./ run --subunit "$REGEX" \
            > /tmp/per-commit.$$.subunit 2>/dev/null; then
        result=pass
    else
        result=FAIL
        rc=1
    fi
    counts=$(subunit2csv --no-passthrough < /tmp/per-commit.$$.subunit |
             python3 -c 'import csv,sys,collections;c=collections.Counter(r["status"] for r in csv.DictReader(sys.stdin));print("passed %d failed %d skipped %d" % (c["success"], c["fail"], c["skip"]))')
    echo "$result $(git log -1 --format='%h %s') :: $counts, $(( $(date +%s) - start ))s"
done
rm -f /tmp/per-commit.$$.subunit
exit "$rc"
