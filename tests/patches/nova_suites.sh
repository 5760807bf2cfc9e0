#!/usr/bin/env bash
#
# nova's own test suites on stock and patched nova, side by side.
#
# Usage (tox -e nova-suites runs it; not part of CI):
#   tests/patches/nova_suites.sh VERSION WORKDIR SDIST_CACHE [SUITE...]
#
# VERSION is a nova release (its sdist is downloaded into SDIST_CACHE
# once), or GIT_TREE@REF for a commit of a nova git checkout (master).
# It is extracted three times under WORKDIR: one tree left stock, one with
# part one of patches/series (the changes before its "# Part two" line)
# and one with the whole series applied (patch -p1 --fuzz=0), and each
# SUITE is run with stestr in the trees, one at a time, in the current
# virtualenv (which must have that nova's requirements installed: the tree
# run from is the one imported). TREES (default "stock part-one patched")
# chooses the trees run.
# SUITE is NAME=TEST_PATH:REGEX, or one of two presets:
#
#   subsets (the default): the evacuate/rebuild subsets
#     unit-compute   nova/tests/unit/compute, tests matching rebuild|evacuat
#     unit-driver    nova/tests/unit/virt, the tests of instance_on_disk
#                    and of the new instance_files_exist
#     functional     nova/tests/functional, libvirt.test_evacuate, the
#                    series' regression modules, the regressions matching
#                    evacuat|rebuild, test_servers evacuate and rebuild tests
#   whole: nova's whole unit suites the series touches
#     unit-compute   nova/tests/unit/compute, every test
#     unit-libvirt   nova/tests/unit/virt/libvirt, every test
#
# Prints one line per suite and tree: passed, failed, skipped, seconds;
# and, per suite and patched tree, the tests that pass stock and fail
# patched (the series
# may change a test that asserts the behaviour it fixes: those are listed
# too, and the change that does it says so). Exits 1 if any test passing
# on stock fails when patched and is not a test the series itself adds or
# changes. STESTR_CONCURRENCY sets the workers (default: the CPUs).
set -euo pipefail

[ $# -ge 3 ] || { sed -n '3,32p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
version=$1
workdir=$2
cache=$3
shift 3
repo_root=$(cd "$(dirname "$0")/../.." && pwd)
PYTHON=${PYTHON:-python}
subsets=(
    'unit-compute=./nova/tests/unit/compute:(rebuild|evacuat)'
    'unit-driver=./nova/tests/unit/virt:test_instance_(on_disk|files_exist)'
    'functional=./nova/tests/functional:(libvirt\.test_evacuate|regressions\.test_bug_(NNNNNNN|MMMMMMM)\.|regressions\.test_bug_[0-9]+\..*(evacuat|rebuild)|regressions\.test_evacuate|test_servers\..*(evacuat|rebuild))')
whole=(
    'unit-compute=./nova/tests/unit/compute:.'
    'unit-libvirt=./nova/tests/unit/virt/libvirt:.')
if [ $# -eq 0 ] || [ "$*" = subsets ]; then
    set -- "${subsets[@]}"
elif [ "$*" = whole ]; then
    set -- "${whole[@]}"
fi

mkdir -p "$workdir" "$cache"
workdir=$(cd "$workdir" && pwd)
case "$version" in
*@*)
    for tree in stock part-one patched; do
        rm -rf "${workdir:?}/$tree"
        mkdir -p "$workdir/$tree"
        git -C "${version%@*}" archive --prefix=nova-git/ "${version#*@}" |
            tar --no-same-owner -x -C "$workdir/$tree"
    done
    ;;
*)
    sdist=$cache/nova-$version.tar.gz
    if [ ! -f "$sdist" ]; then
        "$PYTHON" -m pip download --quiet --no-deps --no-binary :all: \
            -d "$cache" "nova==$version"
    fi
    for tree in stock part-one patched; do
        rm -rf "${workdir:?}/$tree"
        mkdir -p "$workdir/$tree"
        tar --no-same-owner -xzf "$sdist" -C "$workdir/$tree"
    done
    ;;
esac
patched=$(ls -d "$workdir"/patched/nova-*/)
part_one=$(ls -d "$workdir"/part-one/nova-*/)
while read -r p || [ -n "$p" ]; do
    case "$p" in ''|'#'*) continue ;; esac
    patch -d "$patched" -p1 --fuzz=0 --batch --quiet < "$repo_root/patches/$p"
done < "$repo_root/patches/series"
while read -r p || [ -n "$p" ]; do
    case "$p" in ''|'#'*) continue ;; esac
    patch -d "$part_one" -p1 --fuzz=0 --batch --quiet < "$repo_root/patches/$p"
done < <(sed '/^# Part two/q' "$repo_root/patches/series")
# nova's test requirements (not its linters, whose pins conflict with
# this project's), with the release's upper-constraints if given.
if [ -n "${NOVA_CONSTRAINTS_FILE:-}" ]; then
    grep -vE '^(hacking|bandit)' "$patched/test-requirements.txt" \
        > "$workdir/nova-test-requirements.txt"
    "$PYTHON" -m pip install --quiet -c "$NOVA_CONSTRAINTS_FILE" \
        -r "$workdir/nova-test-requirements.txt"
fi
# The series' own diff: a test whose definition it adds or changes may
# assert stock's behaviour.
series_diff=$(cat "$repo_root"/patches/0*.patch)

export OS_NOVA_DISABLE_EVENTLET_PATCHING=False
rc=0
for suite in "$@"; do
    name=${suite%%=*}
    rest=${suite#*=}
    path=${rest%%:*}
    regex=${rest#*:}
    for tree in ${TREES:-stock part-one patched}; do
        dir=$(ls -d "$workdir/$tree"/nova-*/)
        start=$(date +%s)
        (cd "$dir" && stestr --test-path "$path" --top-dir ./ run \
            ${STESTR_CONCURRENCY:+--concurrency "$STESTR_CONCURRENCY"} \
            --subunit "$regex" > "$workdir/$tree-$name.subunit" 2>/dev/null) || true
        secs=$(( $(date +%s) - start ))
        subunit2csv --no-passthrough < "$workdir/$tree-$name.subunit" \
            > "$workdir/$tree-$name.csv" 2>/dev/null || true
        "$PYTHON" - "$workdir/$tree-$name.csv" "$name" "$tree" "$secs" <<'PY'
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
count = {}
for row in rows:
    count[row['status']] = count.get(row['status'], 0) + 1
print('%-14s %-8s passed %4d  failed %3d  skipped %3d  %5ss' % (
    sys.argv[2], sys.argv[3], count.get('success', 0),
    count.get('fail', 0), count.get('skip', 0), sys.argv[4]))
PY
    done
    for tree in ${TREES:-stock part-one patched}; do
        [ "$tree" != stock ] || continue
        regressions=$("$PYTHON" - "$workdir/stock-$name.csv" \
            "$workdir/$tree-$name.csv" <<'PY'
import csv, sys
def status(path):
    return {r['test'].split('[')[0]: r['status'] for r in csv.DictReader(open(path))}
stock, patched = status(sys.argv[1]), status(sys.argv[2])
for test in sorted(stock):
    if stock[test] == 'success' and patched.get(test) not in ('success', 'skip'):
        print(test, patched.get(test))
PY
)
        if [ -n "$regressions" ]; then
            while read -r test status; do
                if grep -qE "^[-+].*def ${test##*.}\(" <<<"$series_diff"; then
                    echo "  changed by the series, passes stock, $status $tree: $test"
                else
                    echo "  REGRESSION: passes stock, $status $tree: $test"
                    rc=1
                fi
            done <<<"$regressions"
        else
            echo "  $name: no test passing on stock fails on $tree"
        fi
    done
done
exit "$rc"
