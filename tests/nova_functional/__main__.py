# SPDX-License-Identifier: Apache-2.0

"""nova's evacuate and rebuild functional tests, stock and on our manager.

``tox -e nova-functional-mixin [-- OPTIONS]`` runs this: it selects, in
the installed nova, the tests of the modules below whose ids match
``--regex``, runs them twice, one process after the other (``run.py``):
on stock nova, then with every compute service on this project's manager
through ``EvacuateCleanupFixture``; and prints, per side, the tests
passed, failed and skipped and the time taken, then each test whose result
differs. It fails if a test passing on stock does not pass with the
manager, unless ``EXPECTED`` names it (the tests that assert the very bug
fixed here), or if the manager side started a compute service on another
manager (or none at all on ours).
"""

import argparse
import glob
from importlib import metadata
import json
import os
import subprocess
import sys
import tarfile
import tempfile
import time

import subunit
import testtools

# The modules of nova/tests/functional that evacuate or rebuild (found with
# grep in nova 34.0.0); a package stands for its modules.
MODULES = (
    'nova.tests.functional.test_servers',
    'nova.tests.functional.libvirt.test_evacuate',
    'nova.tests.functional.regressions',
    'nova.tests.functional.api_sample_tests.test_evacuate',
    'nova.tests.functional.api_sample_tests.test_servers',
    'nova.tests.functional.api_sample_tests.test_preserve_ephemeral_rebuild',
)
REGEX = '(evacuat|rebuild)'
MANAGER = 'nova_evac_cleanup.manager.ComputeManager'

# Tests that pass on stock nova and not with the manager because they
# assert the bug this project fixes: {test id: where nova asserts it}.
EXPECTED = {}

PASSED = ('success', 'xfail')
SKIPPED = ('skip',)


def _worker(args):
    return [sys.executable, '-m', 'tests.nova_functional.run'] + args


def read_results(path):
    """{test id: (status, seconds, traceback text)} of a subunit stream.

    The runner first lists the tests it will run (status ``exists``); one
    never run after that is ``not run``, unless it ran under testscenarios'
    ids, ``TEST_ID(SCENARIO)``.
    """
    results = {}

    def on_test(test):
        start, stop = (test['timestamps'] + [None, None])[:2]
        secs = (stop - start).total_seconds() if start and stop else 0.0
        details = test['details']
        trace = ''
        if 'traceback' in details:
            trace = details['traceback'].as_text()
        results[test['id']] = (test['status'], secs, trace)

    stream = testtools.StreamToDict(on_test)
    with open(path, 'rb') as f:
        stream.startTestRun()
        subunit.ByteStreamToStreamResult(
            f, non_subunit_name='stdout').run(stream)
        stream.stopTestRun()
    for test_id, (status, _secs, _trace) in list(results.items()):
        if status in ('exists', 'inprogress'):
            if any(i.startswith(test_id + '(') for i in results):
                del results[test_id]
            else:
                results[test_id] = ('not run', 0.0, '')
    return results


def api_samples(sdist_dir, work_dir):
    """Extract doc/api_samples of the installed nova's sdist; its doc dir.

    The sdist is downloaded into sdist_dir (pip's cache serves it when tox
    built nova from it) unless it is there already.
    """
    version = metadata.version('nova')
    found = glob.glob(os.path.join(sdist_dir, 'nova-%s.tar.gz' % version))
    if not found:
        subprocess.check_call(
            [sys.executable, '-m', 'pip', 'download', '--quiet', '--no-deps',
             '--no-binary', ':all:', '-d', sdist_dir, 'nova==' + version])
        found = glob.glob(os.path.join(sdist_dir, 'nova-%s.tar.gz' % version))
    prefix = 'nova-%s/doc/api_samples/' % version
    with tarfile.open(found[0]) as sdist:
        sdist.extractall(
            work_dir, filter='data',
            members=[m for m in sdist if m.name.startswith(prefix)])
    return os.path.join(work_dir, 'nova-%s' % version, 'doc')


def run_side(side, work_dir, id_file, modules, doc):
    """Run the selection on one side; its exit code.

    The side's subunit stream, the worker's stderr and a JSON summary (the
    compute services per manager class, the wall time) are kept in
    work_dir, where report_side reads them.
    """
    stream = os.path.join(work_dir, side + '.subunit')
    services = os.path.join(work_dir, side + '-services.json')
    args = ['--json', services, '--load-list', id_file, '--api-samples', doc]
    if side == 'manager':
        args.insert(0, '--manager')
    start = time.monotonic()
    with open(stream, 'wb') as out, \
            open(os.path.join(work_dir, side + '.stderr'), 'wb') as err:
        rc = subprocess.call(_worker(args + list(modules)),
                             stdout=out, stderr=err)
    with open(os.path.join(work_dir, side + '-time.json'), 'w') as f:
        json.dump({'seconds': time.monotonic() - start, 'exit': rc}, f)
    return rc


def report_side(side, work_dir):
    """The results, compute services, seconds and exit code of a side."""
    with open(os.path.join(work_dir, side + '-services.json')) as f:
        seen = json.load(f)
    with open(os.path.join(work_dir, side + '-time.json')) as f:
        timing = json.load(f)
    stream = os.path.join(work_dir, side + '.subunit')
    return read_results(stream), seen, timing['seconds'], timing['exit']


def count(results, ids):
    statuses = [results.get(i, ('missing',))[0] for i in ids]
    return (sum(s in PASSED for s in statuses),
            sum(s in SKIPPED for s in statuses),
            sum(s not in PASSED + SKIPPED for s in statuses))


def main(argv=None):
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0],
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog='\n'.join(__doc__.splitlines()[2:]))
    parser.add_argument('--regex', default=REGEX,
                        help='the test ids to run (default: %(default)s)')
    parser.add_argument('--work-dir',
                        help='where the subunit streams and logs are kept '
                             '(default: a new temporary directory)')
    parser.add_argument('--sdist-dir',
                        help="where nova's sdist is (or is downloaded to), "
                             'for its API samples (default: the work dir)')
    parser.add_argument('--report-only', action='store_true',
                        help='run nothing: report on the streams already '
                             'in --work-dir')
    parser.add_argument('--side', choices=('stock', 'manager'),
                        action='append',
                        help='run only this side (may be repeated)')
    args = parser.parse_args(argv)
    # Each side takes minutes: say what is done as soon as it is.
    sys.stdout.reconfigure(line_buffering=True)
    if args.report_only and not args.work_dir:
        parser.error('--report-only needs --work-dir')
    work_dir = args.work_dir or tempfile.mkdtemp(prefix='nova-functional-')
    os.makedirs(work_dir, exist_ok=True)
    sides = args.side or ['stock', 'manager']
    if not args.report_only:
        run(args, work_dir, sides)
    return report(work_dir, sides)


def run(args, work_dir, sides):
    """Select the tests, then run them on each side, one after the other."""
    doc = api_samples(args.sdist_dir or work_dir, work_dir)

    selection = os.path.join(work_dir, 'selection.json')
    subprocess.check_call(
        _worker(['--select', args.regex, '--json', selection] +
                list(MODULES)),
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    with open(selection) as f:
        selected = json.load(f)
    id_file = os.path.join(work_dir, 'ids.txt')
    with open(id_file, 'w') as f:
        for ids in selected.values():
            f.writelines(i + '\n' for i in ids)
    print('nova functional tests matching %s: %d in %d modules; results '
          'in %s' % (args.regex, sum(map(len, selected.values())),
                     len(selected), work_dir))

    for side in sides:
        run_side(side, work_dir, id_file, selected, doc)


def report(work_dir, sides):
    """Print each side's counts and the tests that differ; 1 if failed."""
    ran = {}
    failed = False
    for side in sides:
        results, seen, secs, rc = report_side(side, work_dir)
        ran[side] = results
        passed, skipped, fails = count(results, results)
        print('%-8s %4d passed %4d failed %4d skipped in %5.0f s '
              '(compute services: %s)' % (
                  side, passed, fails, skipped, secs,
                  ', '.join('%d %s' % (n, c) for c, n in sorted(
                      seen.items())) or 'none'))
        ours = seen.get(MANAGER, 0)
        others = sum(seen.values()) - ours
        if side == 'manager' and (not ours or others):
            print('  ERROR: the manager side did not run every compute on '
                  '%s' % MANAGER)
            failed = True
        if side == 'stock' and ours:
            print('  ERROR: the stock side ran %s' % MANAGER)
            failed = True
        if not passed:
            print('  ERROR: no test passed (see %s.stderr), exit code %d' % (
                os.path.join(work_dir, side), rc))
            failed = True
        if side == 'stock' and fails:
            print('  WARNING: nova fails %d of its own tests on stock: the '
                  'comparison cannot vouch for them' % fails)
    if len(ran) < 2:
        return 1 if failed else 0

    stock, ours = ran['stock'], ran['manager']
    differ = sorted(i for i in set(stock) | set(ours)
                    if stock.get(i, ('missing',))[0] !=
                    ours.get(i, ('missing',))[0])
    print('%d tests differ (stock -> manager)%s' % (
        len(differ), ':' if differ else ''))
    for test_id in differ:
        before = stock.get(test_id, ('missing',))[0]
        after, _secs, trace = ours.get(test_id, ('missing', 0, ''))
        regression = before in PASSED and after not in PASSED
        note = ''
        if regression and test_id in EXPECTED:
            note = ' (expected: asserts the bug, %s)' % EXPECTED[test_id]
        elif regression:
            failed = True
        print('  %s: %s -> %s%s' % (test_id, before, after, note))
        if regression and trace:
            print('    ' + '\n    '.join(trace.strip().splitlines()[-6:]))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
