#!/usr/bin/env bash
# The release check (tox -e release): what a deployer would install.
#
#   tools/check-release.sh WORKDIR CONSTRAINTS
#
# 1. python -m build: an sdist and a wheel, versioned by pbr from git;
# 2. twine check --strict: the metadata and README render for PyPI;
# 3. the version: the tag on HEAD if there is one, else a .devN version
#    (0.0.1.devN with no tag at all);
# 4. the wheel's files listed, and its console scripts read from its
#    entry_points.txt;
# 5. the wheel installed into a clean virtualenv with nova 34.0.0 (its
#    wheel, pinned by CONSTRAINTS), and from there each console script's
#    --help (exit 0) and --version (this project's version and nova's)
#    run, and each configuration error of nova-evac-cleanup produced and
#    checked: its exit code and its one line on standard error;
# 6. a clone of HEAD tagged 0.1.0 (and no other tag) builds as 0.1.0, so a
#    release tag gives the release's version whether or not this checkout
#    has tags.
set -euo pipefail

work=$1
constraints=$2
root=$(cd "$(dirname "$0")/.." && pwd)
nova_version=34.0.0
nova=nova==$nova_version
# nova-evac-cleanup's exit codes (nova_evac_cleanup/cmd/audit.py).
usage_error=2
config_error=5

step() { echo "== $*"; }
fail() { echo "release check FAILED: $*" >&2; exit 1; }

rm -rf "$work/dist" "$work/clean" "$work/tagged" "$work/tagged-dist" \
    "$work/cli"

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

step "the wheel's files"
python -m zipfile -l "$wheel"
# The console scripts the wheel declares, whichever they are.
scripts=$(python - "$wheel" <<'EOF'
import configparser
import sys
import zipfile

with zipfile.ZipFile(sys.argv[1]) as wheel:
    [name] = [n for n in wheel.namelist()
              if n.endswith('.dist-info/entry_points.txt')]
    parser = configparser.ConfigParser(interpolation=None)
    parser.optionxform = str
    parser.read_string(wheel.read(name).decode())
print(' '.join(sorted(parser['console_scripts'])))
EOF
)
[ -n "$scripts" ] || fail "the wheel declares no console script"
echo "console scripts: $scripts"

step "the wheel in a clean virtualenv with $nova"
python -m venv "$work/clean"
"$work/clean/bin/python" -m pip install --quiet -c "$constraints" \
    "$nova" "$wheel"
installed=$("$work/clean/bin/python" -c \
    'from importlib import metadata; print(metadata.version("nova-evac-cleanup"))')
[ "$installed" = "$version" ] || fail "installed $installed, built $version"

# The commands run in an empty directory with an empty HOME: nova's search
# finds no ~/.nova/nova.conf of whoever runs the check.
cli=$work/cli
mkdir -p "$cli/home"
run() {
    local script=$1
    shift
    (cd "$cli" && HOME="$cli/home" "$work/clean/bin/$script" "$@")
}

step "each console script's --help and --version"
for script in $scripts; do
    run "$script" --help > "$cli/$script.help" 2> "$cli/err" ||
        fail "$script --help failed: $(cat "$cli/err")"
    grep -q 'evacuation' "$cli/$script.help" ||
        fail "$script --help does not say what it is"
    head -n 1 "$cli/$script.help"
    line=$(run "$script" --version) || fail "$script --version failed"
    [ "$line" = "$script $version (nova $nova_version)" ] ||
        fail "$script --version printed '$line'"
    echo "$line"
done
for code in 0 1 2 3 4 5; do
    tr -s ' \n' '  ' < "$cli/nova-evac-cleanup.help" | grep -q " $code [a-z]" ||
        fail "nova-evac-cleanup --help does not document exit code $code"
done

# expect CODE TEXT ARGS...: nova-evac-cleanup ARGS exits CODE and prints
# one line on standard error, containing TEXT, and no traceback.
expect() {
    local code=$1 text=$2 rc=0
    shift 2
    run nova-evac-cleanup "$@" > "$cli/out" 2> "$cli/err" || rc=$?
    echo "\$ nova-evac-cleanup $*"
    cat "$cli/err"
    echo "(exit $rc)"
    [ "$rc" = "$code" ] || fail "nova-evac-cleanup $*: exit $rc, not $code"
    [ "$(wc -l < "$cli/err")" = 1 ] ||
        fail "nova-evac-cleanup $*: not one line on standard error"
    grep -qF -- "$text" "$cli/err" ||
        fail "nova-evac-cleanup $*: '$text' not on standard error"
}

step "nova-evac-cleanup's configuration errors"
missing=$cli/missing.conf
# oslo.config's own words, which name the file.
expect $config_error "Failed to find some config files: $missing" \
    --config-file "$missing" audit
expect $config_error "Failed to find some config files: $missing" \
    audit --config-file "$missing"
# nova's own search: ~/.nova/, ~/, /etc/nova/, /etc/.
if ls /etc/nova/nova.conf /etc/nova.conf /etc/nova/nova-evac-cleanup.conf \
        /etc/nova-evac-cleanup.conf /etc/nova/nova.conf.d \
        /etc/nova/nova-evac-cleanup.conf.d > /dev/null 2>&1; then
    echo "this machine has a nova configuration in /etc: the error when" \
        "none is found is not checked"
else
    expect $config_error "no configuration file: none given" audit
fi
noplacement=$cli/noplacement.conf
printf '[DEFAULT]\n[database]\nconnection = sqlite:///%s/nova.sqlite\n' \
    "$cli" > "$noplacement"
expect $config_error "[placement] auth_type is not set in $noplacement" \
    audit --config-file "$noplacement"
nodatabase=$cli/nodatabase.conf
printf '[DEFAULT]\n[placement]\nauth_type = none\nendpoint_override = %s\n' \
    http://127.0.0.1:9/placement > "$nodatabase"
expect $config_error \
    "no database: neither [database] connection nor [DEFAULT] transport_url" \
    --config-file "$nodatabase" audit
rc=0
run nova-evac-cleanup audit --bogus > /dev/null 2> "$cli/err" || rc=$?
cat "$cli/err"
[ "$rc" = "$usage_error" ] && [ "$(wc -l < "$cli/err")" = 2 ] ||
    fail "audit --bogus: exit $rc, not the usage and the error in 2 lines"

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
