#!/usr/bin/env bash
#
# Check what part one of the series (the changes listed before the
# "# Part two" line of patches/series, proposed upstream) adds outside
# nova/tests/: no new virt driver method, no instance.refresh(), no new
# resource tracker method, no object surgery.
#
# Usage:
#   tests/patches/check_part_one.sh [SERIES_DIR]
#
# Reads the patches only (no nova needed). Fails, naming the line, if an
# added line outside nova/tests/ of a part one change
#   * is in nova/virt/ (a new or changed driver method),
#   * is in nova/compute/resource_tracker.py,
#   * calls refresh(), obj_reset_changes() or obj_clone(), or assigns a
#     save method.
set -euo pipefail

series_dir=${1:-$(cd "$(dirname "$0")/../.." && pwd)/patches}
mapfile -t part_one < <(sed '/^# Part two/q' "$series_dir/series" |
                        grep -v '^#')
[ "${#part_one[@]}" -gt 0 ] || { echo "FAIL: no part one" >&2; exit 1; }
grep -q '^# Part two' "$series_dir/series" ||
    { echo "FAIL: series has no '# Part two' line" >&2; exit 1; }

rc=0
for p in "${part_one[@]}"; do
    # file:line for each added line, outside nova/tests/
    found=$(awk -v patch="$p" '
        /^diff --git a\// { file = $3; sub(/^a\//, "", file); next }
        /^\+\+\+ / { next }
        /^\+/ && file !~ /^nova\/tests\// {
            line = substr($0, 2)
            bad = ""
            if (file ~ /^nova\/virt\//) bad = "virt driver"
            else if (file == "nova/compute/resource_tracker.py")
                bad = "resource tracker"
            else if (line ~ /\.refresh\(/) bad = "refresh()"
            else if (line ~ /obj_reset_changes\(|obj_clone\(/)
                bad = "object surgery"
            else if (line ~ /\.save *= /) bad = "assigned save"
            if (bad != "") print patch ": " file ": " bad ": " line
        }' "$series_dir/$p")
    if [ -n "$found" ]; then
        echo "$found" >&2
        rc=1
    fi
done
if [ "$rc" -eq 0 ]; then
    echo "PASS: part one (${#part_one[@]} changes) adds no virt driver" \
         "or resource tracker line, no refresh(), no object surgery" \
         "outside nova/tests/"
fi
exit "$rc"
