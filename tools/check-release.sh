#!/usr/bin/env bash
# The release check (tox -e release): what a deployer would install.
#
#   tools/check-release.sh WORKDIR CONSTRAINTS
#
# 1. python -m build: an sdist and a wheel, versioned by pbr from git;
# 2. twine check --strict: the metadata and README render for PyPI;
# 3. the version: the tag on HEAD if there is one, else a .devN version
#    (0.0.1.devN with no tag at all);
# 4. the wheel installed into a clean virtualenv with nova 34.0.0 (its
#    wheel, pinned by CONSTRAINTS), and the three console scripts run with
#    --help from there;
# 5. a clone of HEAD tagged 0.1.0 (and no other tag) builds as 0.1.0, so a release tag gives
#    the release's version whether or not this checkout has tags.
set -euo pipefail

work=$1
constraints=$2
root=$(cd "$(dirname "$0")/.." && pwd)
nova=nova==34.0.0
scripts="nova-compute-evac-cleanup nova-evac-cleanup nova-evac-reproduce"

step() { echo "== $*"; }
fail() { echo "release check FAILED: $*" >&2; exit 1; }

rm -rf "$work/dist" "$work/clean" "$work/tagged" "$work/tagged-dist"

step "python -m build"
python -m build --outdir "$work/dist" "$root"
sdist=$(ls "$work"/dist/nova_evac_cleanup-*.tar.gz)
wheel=$(ls "$work"/dist/nova_evac_cleanup-*-py3-none-any.whl)

step "twine check --strict"
twine check --strict "$sdist" "$wheel"

step "version"
version=$(basename "$wheel" | cut -d- -f2)
if tag=$(git -C "$root" describe --tags --exact-match HEAD 2>/dev/null); then
    [ "$version" = "$tag" ] || fail "HEAD is tagged $tag, built $version"
else
    case $version in
        *.dev*) ;;
        *) fail "HEAD has no tag, but the version $version is no .devN" ;;
    esac
fi
[ "$(basename "$sdist")" = "nova_evac_cleanup-$version.tar.gz" ] ||
    fail "sdist $(basename "$sdist") is not version $version"
echo "built version $version"

step "the wheel in a clean virtualenv with $nova"
python -m venv "$work/clean"
"$work/clean/bin/python" -m pip install --quiet -c "$constraints" \
    "$nova" "$wheel"
installed=$("$work/clean/bin/python" -c \
    'from importlib import metadata; print(metadata.version("nova-evac-cleanup"))')
[ "$installed" = "$version" ] || fail "installed $installed, built $version"
for script in $scripts; do
    "$work/clean/bin/$script" --help > "$work/$script.help" ||
        fail "$script --help failed"
    head -n 1 "$work/$script.help"
done

step "a clone tagged 0.1.0 builds as 0.1.0"
git clone --quiet --no-hardlinks "$root" "$work/tagged"
# Without the checkout's own tags, whatever they are.
git -C "$work/tagged" tag -l | xargs -r git -C "$work/tagged" tag -d > /dev/null
git -C "$work/tagged" -c user.name='release check' \
    -c user.email='release-check@localhost' \
    tag -a 0.1.0 -m 'release check'
python -m build --sdist --outdir "$work/tagged-dist" "$work/tagged"
[ -f "$work/tagged-dist/nova_evac_cleanup-0.1.0.tar.gz" ] ||
    fail "the tagged clone built $(ls "$work/tagged-dist")"

echo "release check passed: version $version; a 0.1.0 tag builds 0.1.0"
