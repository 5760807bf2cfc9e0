#!/usr/bin/env bash
# No path of a machine in a tracked file (tox -e pep8).
#
# Files are named by their path in the repository: a home directory, a
# build machine's work tree or a user's checkout means nothing to a reader,
# and tells the world about the machine it came from. The tier's own
# run directory (/var/tmp) and system paths (/etc, /usr, /var/lib) are not
# machine paths.
set -euo pipefail
cd "$(dirname "$0")/.."

pattern='(^|[^A-Za-z0-9_.~-])/(work|farm|home|root|Users|builds|opt/stack)/'
if found=$(git grep -nI -E "$pattern" -- . ':!tools/check-no-machine-paths.sh'); then
    echo "Paths of a machine in tracked files (name files by their path in" \
         "the repository instead):" >&2
    echo "$found" >&2
    exit 1
fi
echo "no machine path in $(git ls-files | wc -l) tracked files"
