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
# run from the tree: the unit tests of the rebuild and evacuate code, of
# the task state revert, of the resource tracker's new method and of the
# port binding update (test_compute_mgr, test_resource_tracker and
# test_neutron, by name), those of the new driver method once they exist
# (by name), the regression modules regressions/test_bug_NNNNNNN.py,
# which asserts at each commit the bugs not fixed yet and the fixes of the
# changes before, and test_bug_MMMMMMM.py once it exists, and nova's
# libvirt/test_evacuate.py (LIBVIRT_EVACUATE=0 leaves it out).
# A change whose tests fail at its commit fails the run: the series would
# not be bisectable. Prints one line per commit and suite.
set -euo pipefail

[ $# -eq 2 ] || { sed -n '3,17p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
tree=$(cd "$1" && pwd)
base=$2
PYTHON=${PYTHON:-python}
UNIT_REGEX='test_compute_mgr\.ComputeManagerUnitTestCase\.test_(.*rebuild|.*evacuat|.*given_back|reverts_task_state|error_out_instance_on_exception)|test_resource_tracker\.TestFinishRecordedEvacuation|test_neutron\.TestAPI\.test_update_port_binding'
DRIVER_TESTS='nova.tests.unit.virt.test_virt_drivers.AbstractDriverTestCase.test_instance_files_exist nova.tests.unit.virt.libvirt.test_driver.LibvirtDriverTestCase.test_instance_files_exist nova.tests.unit.virt.libvirt.test_driver.LibvirtDriverTestCase.test_instance_files_exist_no_instance_dir nova.tests.unit.virt.libvirt.test_driver.LibvirtDriverTestCase.test_instance_files_exist_rbd nova.tests.unit.virt.libvirt.test_driver.LibvirtDriverTestCase.test_instance_files_exist_unknown'
export OS_NOVA_DISABLE_EVENTLET_PATCHING=False
cd "$tree"
head=$(git rev-parse HEAD)
trap 'git checkout -q "$head"' EXIT
out=$(mktemp)
rc=0
summary() {
    subunit2csv --no-passthrough < "$out" | "$PYTHON" -c '
import csv, collections, sys
c = collections.Counter(r["status"] for r in csv.DictReader(sys.stdin))
print("passed %d failed %d" % (c["success"], c["fail"]), end="")'
}
suite() {
    local name=$1
    shift
    local start result
    start=$(date +%s)
    if "$@" > "$out" 2>/dev/null; then result=pass; else result=FAIL; rc=1; fi
    echo "  $result $name: $(summary), $(( $(date +%s) - start ))s"
}
# An stestr run, its results read back from its repository: the stream
# `stestr run --subunit` prints can miss the results of a worker on a
# loaded machine.
stestr_run() {
    local path=$1 regex=$2 status=0
    stestr --test-path "$path" --top-dir ./ run "$regex" > /dev/null 2>&1 ||
        status=$?
    stestr --test-path "$path" --top-dir ./ last --subunit
    return "$status"
}
for commit in $(git rev-list --reverse "$base..$head"); do
    git checkout -q "$commit"
    echo "$(git log -1 --format='%h %s')"
    # The ids of the two modules' tests the regex selects: discovering
    # nova/tests/unit/compute would take minutes per commit.
    ids=$("$PYTHON" - "$UNIT_REGEX" <<'PY'
import re
import sys
import unittest

def walk(suite):
    for test in suite:
        if isinstance(test, unittest.TestSuite):
            yield from walk(test)
        else:
            yield test.id()

suite = unittest.defaultTestLoader.loadTestsFromNames([
    'nova.tests.unit.compute.test_compute_mgr',
    'nova.tests.unit.compute.test_resource_tracker',
    'nova.tests.unit.network.test_neutron'])
print(' '.join(i for i in walk(suite) if re.search(sys.argv[1], i)))
PY
)
    # shellcheck disable=SC2086
    suite unit "$PYTHON" -m subunit.run $ids
    if grep -q 'def test_instance_files_exist' \
            nova/tests/unit/virt/test_virt_drivers.py; then
        # shellcheck disable=SC2086
        suite driver "$PYTHON" -m subunit.run $DRIVER_TESTS
    fi
    suite regressions stestr_run ./nova/tests/functional/regressions \
        'test_bug_(NNNNNNN|MMMMMMM)\.'
    if [ "${LIBVIRT_EVACUATE:-1}" = 1 ]; then
        suite libvirt-evacuate stestr_run ./nova/tests/functional/libvirt \
            'test_evacuate\.'
    fi
done
rm -f "$out"
exit "$rc"
