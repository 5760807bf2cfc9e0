#!/usr/bin/env bash
#
# Check the nova patch series on one nova release, in the current
# virtualenv: apply it, install the patched nova, run its tests and this
# project's functional suite against it without the mixin.
#
# Usage (tox runs it in the release-<MAJOR>-patched environments):
#   tests/patches/check_release.sh VERSION CONSTRAINTS WORKDIR [SDIST_CACHE]
#
# VERSION is a nova release (e.g. 31.3.1), CONSTRAINTS its release's
# upper-constraints file, WORKDIR an empty scratch directory (the tree is
# extracted and the test repositories are created there) and SDIST_CACHE
# where the sdist is downloaded once (default WORKDIR/sdist).
#
# Steps, each timed:
#   1. download the nova sdist (tox -e patches checks that the series
#      applies, with patch and git am, on every release: not again here);
#   2. extract it, apply the series (patch -p1 --fuzz=0, which fails on
#      fuzz or a reject) and `pip install` the patched tree (pbr reads the
#      sdist's PKG-INFO) and nova's test-requirements, then this project
#      (its nova requirement met by the patched release), with
#      CONSTRAINTS: nova is installed once;
#   3. nova's unit tests of the rebuild/evacuate code in test_compute_mgr,
#      of the resource tracker's and the driver's new methods (which hold
#      the new tests) in the patched tree;
#   4. nova's functional evacuate tests: the series' regression test
#      module (regressions/test_bug_NNNNNNN.py) and libvirt/test_evacuate.py
#      (every image backend), in the patched tree;
#   5. this project's fixed-behaviour functional tests, with
#      NOVA_EVAC_CLEANUP_FIX=patch: nova's own manager, no mixin.
set -euo pipefail

usage() {
    sed -n '3,30p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
}

[ $# -ge 3 ] && [ $# -le 4 ] || usage
version=$1
constraints=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
workdir=$3
cache=${4:-$workdir/sdist}
repo_root=$(cd "$(dirname "$0")/../.." && pwd)
PYTHON=${PYTHON:-python}

# nova's unit tests of the touched test classes: its rebuild and evacuate
# tests, the new ones among them, and the resource tracker's new ones.
NOVA_UNIT_REGEX=${NOVA_UNIT_REGEX:-'test_compute_mgr\.ComputeManagerUnitTestCase\.test_(.*rebuild|.*evacuat|.*given_back|reverts_task_state|error_out_instance_on_exception)|test_resource_tracker\.TestFinishRecordedEvacuation'}
# The tests of the new driver method (its default and libvirt's), by name:
# discovering nova/tests/unit/virt would take minutes.
NOVA_DRIVER_TESTS=${NOVA_DRIVER_TESTS:-'nova.tests.unit.virt.test_virt_drivers.AbstractDriverTestCase.test_instance_files_exist nova.tests.unit.virt.libvirt.test_driver.LibvirtDriverTestCase.test_instance_files_exist nova.tests.unit.virt.libvirt.test_driver.LibvirtDriverTestCase.test_instance_files_exist_no_instance_dir nova.tests.unit.virt.libvirt.test_driver.LibvirtDriverTestCase.test_instance_files_exist_rbd nova.tests.unit.virt.libvirt.test_driver.LibvirtDriverTestCase.test_instance_files_exist_unknown'}
# The series' regression test modules (the main bug's, and the retry
# window's) and nova's libvirt evacuate tests.
NOVA_FUNCTIONAL_REGEX=${NOVA_FUNCTIONAL_REGEX:-'(libvirt\.test_evacuate|regressions\.test_bug_(NNNNNNN|MMMMMMM))\.'}
# This project's tests that assert the fixed behaviour. The others assert
# stock nova's bug and cannot pass on a patched nova: the *StockTest
# classes, the smoke test of the debris (test_failed_evacuate_leaves_debris)
# and the reproduction, whose stock run would be patched too.
# AuditCommandTest starts nova-evac-cleanup audit on this release;
# BehaviourTest fails one evacuation per cell of the behaviour table and
# asserts each cell equal to tests/functional/behaviour.json, as the
# mixin's run does.
OUR_REGEX=${OUR_REGEX:-'(FixedTest|EdgeCasesTest|AuditCommandTest|BehaviourTest)'}
# Fixed-behaviour tests to leave out (a regex; none by default: the series
# handles the failures after spawn too, test_evacuate_after_spawn).
OUR_EXCLUDE=${OUR_EXCLUDE:-}

step_start=0
step() {
    step_start=$(date +%s)
    echo
    echo "== [nova $version] $*"
}
step_done() {
    local t=$(( $(date +%s) - step_start ))
    echo "-- [nova $version] took ${t}s"
    timings+=("$1: ${t}s")
}
timings=()
total_start=$(date +%s)

mkdir -p "$workdir" "$cache"
workdir=$(cd "$workdir" && pwd)
cache=$(cd "$cache" && pwd)

step "download the sdist"
sdist=$cache/nova-$version.tar.gz
if [ ! -f "$sdist" ]; then
    "$PYTHON" -m pip download --quiet --no-deps --no-binary :all: \
        -d "$cache" "nova==$version"
fi
step_done download

step "apply the series and install the patched tree"
rm -rf "$workdir/src"
mkdir -p "$workdir/src"
tar --no-same-owner -xzf "$sdist" -C "$workdir/src"
tree=$(ls -d "$workdir"/src/nova-*/)
tree=${tree%/}
series_dir=$repo_root/patches
for d in "$repo_root/patches/$version" "$repo_root/patches/${version%%.*}.x"; do
    if [ -f "$d/series" ]; then series_dir=$d; break; fi
done
while read -r p || [ -n "$p" ]; do
    case "$p" in ''|'#'*) continue ;; esac
    patch -d "$tree" -p1 --fuzz=0 --batch --no-backup-if-mismatch --quiet \
        < "$series_dir/$p"
done < "$series_dir/series"
# hacking and bandit are nova's linters, not needed to run its tests, and
# hacking's pin conflicts with this project's.
grep -vE '^(hacking|bandit)' "$tree/test-requirements.txt" \
    > "$workdir/nova-test-requirements.txt"
"$PYTHON" -m pip install --quiet -c "$constraints" "$tree" \
    -r "$workdir/nova-test-requirements.txt"
"$PYTHON" -m pip install --quiet -c "$constraints" -e "$repo_root"
"$PYTHON" - <<EOF
import inspect
from importlib import metadata
from nova.compute import manager
assert metadata.version('nova') == '$version', metadata.version('nova')
params = inspect.signature(
    manager.ComputeManager._rebuild_default_impl).parameters
assert 'on_shared_storage' in params, 'nova is not patched'
assert hasattr(manager.ComputeManager, '_release_failed_evacuation_volumes'), \
    'nova is not patched with the whole series'
print('installed patched nova', metadata.version('nova'), 'from', manager.__file__)
EOF
step_done install

# stestr keeps its repository in the current directory: use our own.
export OS_NOVA_DISABLE_EVENTLET_PATCHING=False
export NOVA_RAISE_ON_GREENLET_LEAK=True

step "nova unit tests: $NOVA_UNIT_REGEX"
(cd "$tree" && stestr --test-path ./nova/tests/unit/compute --top-dir ./ \
    run "$NOVA_UNIT_REGEX")
# shellcheck disable=SC2086
(cd "$tree" && "$PYTHON" -m testtools.run $NOVA_DRIVER_TESTS)
step_done nova-unit

step "nova functional tests: $NOVA_FUNCTIONAL_REGEX"
(cd "$tree" && stestr --test-path ./nova/tests/functional \
    --top-dir ./ run "$NOVA_FUNCTIONAL_REGEX")
step_done nova-functional

step "nova-evac-cleanup functional tests on patched nova, no mixin: $OUR_REGEX"
mkdir -p "$workdir/ours"
# The behaviour tables this release's run wrote before: a run that no
# longer writes one must show up as missing, not as its old table.
if [ -n "${EVAC_BEHAVIOUR_DIR:-}" ]; then
    rm -f "$EVAC_BEHAVIOUR_DIR/patch-$version".*.json
fi
(
    cd "$workdir/ours"
    export NOVA_EVAC_CLEANUP_FIX=patch
    stestr init > /dev/null
    stestr --test-path "$repo_root/tests/functional" --top-dir "$repo_root" \
        list > all.txt
    exclude=()
    if [ -n "$OUR_EXCLUDE" ]; then
        exclude=(--exclude-regex "$OUR_EXCLUDE")
    fi
    stestr --test-path "$repo_root/tests/functional" --top-dir "$repo_root" \
        list ${exclude[@]+"${exclude[@]}"} "$OUR_REGEX" > selected.txt
    echo "selected $(wc -l < selected.txt) of $(wc -l < all.txt) tests;" \
         "not run (they assert stock nova's bug${OUR_EXCLUDE:+, or match $OUR_EXCLUDE}):"
    grep -vxF -f selected.txt all.txt | sed 's/^/  /' || true
    stestr --test-path "$repo_root/tests/functional" --top-dir "$repo_root" \
        run ${exclude[@]+"${exclude[@]}"} "$OUR_REGEX"
)
step_done our-functional

echo
echo "PASS: nova $version patched: ${timings[*]};" \
     "total $(( $(date +%s) - total_start ))s"
