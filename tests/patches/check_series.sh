#!/usr/bin/env bash
#
# Check that the nova patch series applies cleanly to a nova release.
#
# Usage:
#   tests/patches/check_series.sh VERSION [SERIES_DIR]
#   tests/patches/check_series.sh /path/to/nova-VERSION.tar.gz [SERIES_DIR]
#
# VERSION (e.g. 34.0.0) is downloaded as an sdist with
# `pip download --no-deps --no-binary :all:` into a temporary directory; a
# path to an already downloaded sdist is used as is. SERIES_DIR defaults to
# the most specific of patches/<VERSION>, patches/<MAJOR>.x and patches/
# that has a `series` file.
#
# The sdist is extracted and every patch listed in SERIES_DIR/series is, in
# order, checked with `git apply --check` and `patch -p1 --fuzz=0 --dry-run`
# and then applied with `patch -p1 --fuzz=0`. Offsets are accepted; fuzz,
# rejects or any failure make the script exit non-zero. The unpacked sdist
# is also committed to a scratch git repository and the series applied
# there with `git am`, which must succeed and give the same tree as
# `patch` (nova's own git history is not needed).
set -euo pipefail

usage() {
    sed -n '3,21p' "$0" | sed 's/^# \{0,1\}//'
    exit 2
}

[ $# -ge 1 ] && [ $# -le 2 ] || usage
case "$1" in -h|--help) usage ;; esac

repo_root=$(cd "$(dirname "$0")/../.." && pwd)
PIP=${PIP:-pip}

workdir=$(mktemp -d "${TMPDIR:-/tmp}/nova-series.XXXXXX")
trap 'rm -rf "$workdir"' EXIT

if [ -f "$1" ]; then
    sdist=$(cd "$(dirname "$1")" && pwd)/$(basename "$1")
    version=$(basename "$sdist" | sed -E 's/^nova-(.*)\.tar\.gz$/\1/')
else
    version=$1
    echo "== downloading nova $version sdist"
    "$PIP" download --quiet --no-deps --no-binary :all: \
        -d "$workdir/sdist" "nova==$version"
    sdist=$(ls "$workdir"/sdist/nova-*.tar.gz)
fi

if [ $# -eq 2 ]; then
    series_dir=$2
else
    series_dir=
    for d in "$repo_root/patches/$version" "$repo_root/patches/${version%%.*}.x" \
             "$repo_root/patches"; do
        if [ -f "$d/series" ]; then
            series_dir=$d
            break
        fi
    done
fi
if [ -z "$series_dir" ] || [ ! -f "$series_dir/series" ]; then
    echo "FAIL: no series file found (looked for ${series_dir:-patches/...})" >&2
    exit 1
fi
series_dir=$(cd "$series_dir" && pwd)

mkdir -p "$workdir/src"
tar --no-same-owner -xzf "$sdist" -C "$workdir/src"
tree=$(ls -d "$workdir"/src/*/)
cd "$tree"
# make sure git does not pick up an enclosing repository
export GIT_CEILING_DIRECTORIES=$workdir

# a scratch repository of the pristine sdist, for the `git am` check; it
# tracks only the files the series touches, which is all `git am` needs
# (the whole tree would take seconds to hash)
sgit() {
    git -c user.name=check_series -c user.email=check_series@localhost \
        -c commit.gpgsign=false -c core.autocrlf=false "$@"
}
patches=()
while read -r p || [ -n "$p" ]; do
    case "$p" in ''|'#'*) continue ;; esac
    patches+=("$series_dir/$p")
done < "$series_dir/series"
touched=()
if [ "${#patches[@]}" -gt 0 ]; then
    while read -r f; do
        touched+=("$f")
    done < <(cat "${patches[@]}" 2>/dev/null |
             sed -n 's|^diff --git a/\([^ ]*\) b/.*|\1|p' | sort -u)
fi
sgit init -q .
for f in "${touched[@]}"; do
    if [ -e "$f" ]; then
        sgit add -f -- "$f"
    fi
done
sgit commit -q --no-verify --allow-empty -m "nova $version sdist"

echo "== applying $series_dir/series to $(basename "$sdist")"
rc=0
n=0
while read -r p || [ -n "$p" ]; do
    case "$p" in ''|'#'*) continue ;; esac
    n=$((n + 1))
    patch_file=$series_dir/$p
    if [ ! -f "$patch_file" ]; then
        echo "FAIL: $p: listed in series but missing" >&2
        rc=1
        break
    fi
    if ! out=$(git apply --check "$patch_file" 2>&1); then
        echo "FAIL: $p: git apply --check" >&2
        echo "$out" >&2
        rc=1
        break
    fi
    if ! out=$(patch -p1 --fuzz=0 --dry-run --batch < "$patch_file" 2>&1) ||
            grep -Eqi 'fuzz|reject|FAILED|malformed' <<<"$out"; then
        echo "FAIL: $p: patch -p1 --fuzz=0 --dry-run" >&2
        echo "$out" >&2
        rc=1
        break
    fi
    if ! out=$(patch -p1 --fuzz=0 --batch --no-backup-if-mismatch \
            < "$patch_file" 2>&1) ||
            grep -Eqi 'fuzz|reject|FAILED|malformed' <<<"$out"; then
        echo "FAIL: $p: patch -p1 --fuzz=0" >&2
        echo "$out" >&2
        rc=1
        break
    fi
    offsets=$(grep -Ec 'offset -?[0-9]+ lines?' <<<"$out" || true)
    echo "ok: $p (${offsets} hunk(s) applied with offset)"
done < "$series_dir/series"

if [ "$rc" -eq 0 ] && [ "$n" -eq 0 ]; then
    echo "FAIL: empty series" >&2
    rc=1
fi
if [ "$rc" -eq 0 ] && find . -name '*.rej' -o -name '*.orig' | grep -q .; then
    echo "FAIL: reject/orig files left behind" >&2
    rc=1
fi
if [ "$rc" -eq 0 ]; then
    # the same series with `git am`, on the pristine sdist commit
    sgit add -f -A -- "${touched[@]}"
    patched_tree=$(sgit write-tree)
    sgit reset -q --hard HEAD
    if ! out=$(sgit am --quiet "${patches[@]}" 2>&1); then
        echo "FAIL: git am" >&2
        echo "$out" >&2
        rc=1
    elif [ "$(sgit rev-parse 'HEAD^{tree}')" != "$patched_tree" ]; then
        echo "FAIL: git am gives a different tree than patch -p1" >&2
        rc=1
    else
        echo "ok: git am: $n commit(s), same tree as patch -p1"
    fi
fi
if [ "$rc" -eq 0 ]; then
    echo "PASS: nova $version: $n patch(es) apply with no fuzz and no rejects"
else
    echo "FAIL: nova $version" >&2
fi
exit "$rc"
