#!/usr/bin/env bash
#
# Install the Debian packages bindep.txt lists for a profile, if missing.
#
# Usage: tools/install-bindep.sh PROFILE
#
# Lets tox -e deployment (and so tox -m ci) run on a fresh Debian machine:
# as root it installs what is missing with apt-get; otherwise it names the
# missing packages and fails.
set -euo pipefail

profile=${1:?usage: $0 PROFILE}
cd "$(dirname "$0")/.."

missing=()
for package in $(grep -v '^#' bindep.txt | grep -w "$profile" |
                 awk 'NF {print $1}'); do
    if ! dpkg-query -W -f='${Status}' "$package" 2>/dev/null |
            grep -q 'install ok installed'; then
        missing+=("$package")
    fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
    echo "install-bindep: missing Debian packages: ${missing[*]}" >&2
    echo "install-bindep: run as root, or install them first" >&2
    exit 1
fi
echo "install-bindep: installing ${missing[*]}"
apt-get update -q
DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${missing[@]}"
