#!/usr/bin/env bash
#
# Check that `git am -3` applies the series to refs of a nova git
# repository without falling back to a three-way merge, part one alone
# and the whole series.
#
# Usage:
#   tests/patches/check_am.sh NOVA_GIT REF...
#
# NOVA_GIT is a nova git repository (a clone of openstack/nova, or a
# repository of an unpacked sdist with its files committed); each REF (a
# tag, a commit) is checked out in a scratch worktree, and patches/series
# applied with `git am -3` twice: the changes of part one (those listed
# before the "# Part two" line), then every change. Any conflict, or
# "Falling back to patching base and 3-way merge" in git am's output,
# fails the check.
set -euo pipefail

[ $# -ge 2 ] || { sed -n '3,16p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
nova_git=$(cd "$1" && pwd)
shift
repo_root=$(cd "$(dirname "$0")/../.." && pwd)
series=$repo_root/patches/series
part_one=()
while read -r p; do part_one+=("$repo_root/patches/$p"); done < <(
    sed '/^# Part two/q' "$series" | grep -v '^#')
whole=()
while read -r p; do whole+=("$repo_root/patches/$p"); done < <(
    grep -v '^#' "$series")

scratch=$(mktemp -d "${TMPDIR:-/tmp}/nova-am.XXXXXX")
cleanup() {
    git -C "$nova_git" worktree remove --force "$scratch/tree" 2>/dev/null || true
    rm -rf "$scratch"
}
trap cleanup EXIT

rc=0
for ref in "$@"; do
    for part in part-one whole; do
        if [ "$part" = part-one ]; then
            patches=("${part_one[@]}")
        else
            patches=("${whole[@]}")
        fi
        git -C "$nova_git" worktree remove --force "$scratch/tree" \
            2>/dev/null || true
        git -C "$nova_git" worktree add -q --detach "$scratch/tree" "$ref"
        if out=$(git -C "$scratch/tree" -c user.name=check_am \
                -c user.email=check_am@localhost -c commit.gpgsign=false \
                am -3 "${patches[@]}" 2>&1) &&
                ! grep -q 'Falling back\|3-way merge' <<<"$out"; then
            echo "ok: $ref, $part: ${#patches[@]} change(s), no fallback"
        else
            echo "FAIL: $ref, $part" >&2
            echo "$out" >&2
            git -C "$scratch/tree" am --abort 2>/dev/null || true
            rc=1
        fi
    done
done
exit "$rc"
