# Copyright 2026 nova-evac-cleanup developers
#
#    Licensed under the Apache License, Version 2.0 (the "License"); you may
#    not use this file except in compliance with the License. You may obtain
#    a copy of the License at
#
#         http://www.apache.org/licenses/LICENSE-2.0
#
#    Unless required by applicable law or agreed to in writing, software
#    distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
#    WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
#    License for the specific language governing permissions and limitations
#    under the License.

"""Run the benchmarks, stock nova against the fix, and write RESULTS.md.

``tox -e bench`` runs this. Each scenario of ``scenarios.py`` runs as a
test method of ``EvacuateTestCase`` twice, on stock nova and with the
cleanup manager, in fresh nova services; then the functional suite is timed
with stestr in a subprocess. The results and the machine go to
``benchmarks/RESULTS.md`` (``--output``) and, raw, to ``--json``.
"""

import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--success-count', type=int, default=50,
                        help='evacuations and rebuilds in the success path')
    parser.add_argument('--failure-repeat', type=int, default=5,
                        help='failed evacuations per spawn stage')
    parser.add_argument('--host-count', type=int, default=40,
                        help='instances on the host that dies')
    parser.add_argument('--fail-ratio', type=float, default=0.3)
    parser.add_argument('--seed', type=int, default=6)
    parser.add_argument('--storage', default='non-shared',
                        choices=('non-shared', 'shared', 'rbd'))
    parser.add_argument('--only', action='append',
                        choices=('success', 'failure', 'host', 'suite'),
                        help='run only these benchmarks (repeatable)')
    parser.add_argument('--output',
                        default=os.path.join(HERE, 'RESULTS.md'))
    parser.add_argument('--json', help='also write the raw results here')
    parser.add_argument('--from-json', metavar='FILE',
                        help='only rewrite the report from raw results '
                        'written by --json')
    return parser.parse_args(argv)


def machine():
    from importlib import metadata
    cpu = platform.processor() or 'unknown'
    try:
        with open('/proc/cpuinfo') as cpuinfo:
            for line in cpuinfo:
                if line.startswith('model name'):
                    cpu = line.split(':', 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        'nproc': os.cpu_count(), 'cpu': cpu,
        'python': platform.python_version(),
        'platform': platform.platform(),
        'nova': metadata.version('nova'),
        'placement': metadata.version('openstack-placement'),
        'date': time.strftime('%Y-%m-%d %H:%M:%S %Z')}


def run_scenario(method, fixed, args, quiet=False):
    """Run one scenario method in fresh services; return its results."""
    import testtools

    from nova_evac_cleanup import reproduce
    import scenarios

    sink = {}
    cls = type('Bench%s%s' % ('Fixed' if fixed else 'Stock',
                              method.title().replace('_', '')),
               (scenarios.Scenarios,),
               {'FIXED': fixed, 'STORAGE': args.storage, 'sink': sink,
                'params': {'success_count': args.success_count,
                           'failure_repeat': args.failure_repeat,
                           'host_count': args.host_count,
                           'fail_ratio': args.fail_ratio,
                           'seed': args.seed}})
    test = cls(method)
    result = testtools.TestResult()
    started = time.perf_counter()
    test.run(result)
    elapsed = time.perf_counter() - started
    # Records logged while the services shut down are not the test's.
    reproduce.quiet_logging()
    problems = result.errors + result.failures
    if problems:
        sys.stderr.write('%s (%s) failed:\n%s\n' % (
            method, 'fixed' if fixed else 'stock', problems[0][1]))
    if not quiet:
        sys.stderr.write('  %s %s: %.1f s\n' % (
            method, 'fixed' if fixed else 'stock', elapsed))
    return {'results': sink,
            'error': bool(problems), 'elapsed': elapsed}


def run_suite():
    """Time the functional suite with stestr, in a scratch repository."""
    env = dict(os.environ, OS_NOVA_DISABLE_EVENTLET_PATCHING='False',
               OS_TEST_TIMEOUT='160', OS_STDOUT_CAPTURE='1',
               OS_STDERR_CAPTURE='1', OS_LOG_CAPTURE='1')
    with tempfile.TemporaryDirectory() as scratch:
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, '-m', 'stestr',
             '--test-path', os.path.join(ROOT, 'tests', 'functional'),
             '--top-dir', ROOT, 'run'],
            cwd=scratch, env=env, capture_output=True, text=True)
        elapsed = time.perf_counter() - started
    summary = {'seconds': elapsed, 'returncode': proc.returncode}
    for line in proc.stdout.splitlines():
        line = line.strip()
        for key in ('Ran:', ' - Passed:', ' - Failed:', ' - Skipped:'):
            if line.startswith(key.strip()):
                summary[key.strip(' -:').lower()] = (
                    line.split(':', 1)[1].split()[0])
        if line.startswith('Sum of execute time'):
            summary['sum'] = line.split(':', 1)[1].strip()
    return summary


def ratio(fixed, stock):
    return fixed / stock if stock else float('nan')


def fmt_calls(calls, count):
    names = sorted(calls)
    return ', '.join('%s %.2f' % (name, calls[name] / count)
                     for name in names)


def report(data, args):
    import scenarios
    med = scenarios.median
    m = data['machine']
    out = ['# Benchmarks: stock nova vs nova-evac-cleanup', '',
           'Written by `tox -e bench` (`benchmarks/run.py`); numbers from '
           'one run, ratios are fixed / stock. Real nova in-process (API, '
           'conductor, scheduler, placement, computes) on the fake libvirt '
           'driver, %s storage; each scenario ran in fresh services for '
           'stock and for fixed. Times are measured from the API request '
           'to the state being visible through the API, polled every '
           '%.2f s. One run on a machine that may be doing other work: '
           'read ratios within about 0.85-1.15 as equal.' % (
               args.storage, scenarios.POLL), '',
           '## Machine', '',
           '| nproc | CPU | Python | nova | placement | platform | date |',
           '|---|---|---|---|---|---|---|',
           '| %s | %s | %s | %s | %s | %s | %s |' % (
               m['nproc'], m['cpu'], m['python'], m['nova'],
               m['placement'], m['platform'], m['date']), '']

    if 'success' in data:
        s, f = data['success']['stock'], data['success']['fixed']
        out += ['## 1. Success path', '',
                '%d evacuations, then %d rebuilds of the same servers, one '
                'at a time, all succeeding.' % (
                    args.success_count, args.success_count), '',
                '| operation | stock median s | fixed median s | ratio '
                '(median) | stock total s | fixed total s | ratio (total) '
                '| driver calls/op stock | driver calls/op fixed | extra '
                'calls/op |',
                '|---|---|---|---|---|---|---|---|---|---|']
        for op in ('evacuate', 'rebuild'):
            if op not in s['results'] or op not in f['results']:
                out.append('| %s | (failed, see log) |' % op)
                continue
            a, b = s['results'][op], f['results'][op]
            n = a['count']
            extra = {k: (b['calls'].get(k, 0) - a['calls'].get(k, 0)) / n
                     for k in set(a['calls']) | set(b['calls'])}
            extra = {k: v for k, v in extra.items() if v}
            out.append('| %s | %.3f | %.3f | %.2f | %.1f | %.1f | %.2f '
                       '| %.2f | %.2f | %s |' % (
                           op, med(a['seconds']), med(b['seconds']),
                           ratio(med(b['seconds']), med(a['seconds'])),
                           sum(a['seconds']), sum(b['seconds']),
                           ratio(sum(b['seconds']), sum(a['seconds'])),
                           sum(a['calls'].values()) / n,
                           sum(b['calls'].values()) / n,
                           ', '.join('%s %+.2f' % kv
                                     for kv in sorted(extra.items()))
                           or 'none'))
        out += ['', 'Driver calls per operation on the destination:', '']
        for op in ('evacuate', 'rebuild'):
            for name, run in (('stock', s), ('fixed', f)):
                if op in run['results']:
                    r = run['results'][op]
                    out.append('* %s, %s: %s' % (
                        op, name, fmt_calls(r['calls'], r['count'])))
        out.append('')

    if 'failure' in data:
        s = data['failure']['stock']['results'].get('failure', {})
        f = data['failure']['fixed']['results'].get('failure', {})
        out += ['## 2. Failure path', '',
                'An evacuation whose spawn fails at each stage, %d times '
                'per stage: time from the evacuate request to the server '
                'in ERROR with its fault (median), the cleanup itself '
                '(`_destroy_failed_evacuation`, median), and what the '
                'failed evacuations left on the destination.' %
                args.failure_repeat, '',
                '| stage | stock s | fixed s | ratio | cleanup ms | '
                'cleanup share | left, stock | left, fixed |',
                '|---|---|---|---|---|---|---|---|']
        for stage in s:
            a, b = s[stage], f.get(stage)
            if b is None:
                continue
            cleanup = med(b['cleanup_seconds'])
            out.append('| %s | %.3f | %.3f | %.2f | %.2f | %.1f%% | %s | '
                       '%s |' % (
                           stage, med(a['seconds']), med(b['seconds']),
                           ratio(med(b['seconds']), med(a['seconds'])),
                           cleanup * 1000,
                           100 * cleanup / med(b['seconds']),
                           left(a['left']), left(b['left'])))
        out.append('')

    if 'host' in data:
        s = data['host']['stock']['results'].get('host')
        f = data['host']['fixed']['results'].get('host')
        if s and f:
            out += ['## 3. Host evacuation', '',
                    'A host with %d instances dies; all are evacuated to '
                    'one destination at once, with spawn failures '
                    'injected in %d of them (seed %d; stages: %s), then '
                    'the failed ones are evacuated again once, at once.' % (
                        f['count'], f['failing'], args.seed,
                        ', '.join('%s %d' % kv
                                  for kv in sorted(f['stages'].items()))),
                    '',
                    '| | stock | fixed |', '|---|---|---|']
            rows = [
                ('failed on the first evacuation', 'failed_first', '%d'),
                ('ACTIVE after one retry', 'active_after_retry', '%d'),
                ('... of which on a stale or partial disk', 'stale_disks',
                 '%d'),
                ('orphaned allocations on the destination (audit)',
                 'orphaned_allocations', '%d'),
                ('first evacuation, s', 'first_seconds', '%.1f'),
                ('retry, s', 'retry_seconds', '%.1f')]
            for label, key, form in rows:
                out.append('| %s | %s | %s |' % (
                    label, form % s[key], form % f[key]))
            for when in ('after_first', 'after_retry'):
                out.append('| domains left on the destination, %s | %d | '
                           '%d |' % (when.replace('_', ' '),
                                     len(s[when]['domains']),
                                     len(f[when]['domains'])))
                out.append('| bytes left on the destination, %s | %d | '
                           '%d |' % (when.replace('_', ' '),
                                     s[when]['bytes'], f[when]['bytes']))
            out.append('| total time (first + retry), s | %.1f | %.1f |' % (
                s['first_seconds'] + s['retry_seconds'],
                f['first_seconds'] + f['retry_seconds']))
            out.append('| manual steps still needed | %s | %s |' % (
                steps(s['manual_steps']), steps(f['manual_steps'])))
            out.append('')

    if 'suite' in data:
        r = data['suite']
        out += ['## 4. The functional suite', '',
                '`stestr --test-path tests/functional run` (the whole of '
                '`tox -e functional` less the virtualenv), %d workers:' %
                m['nproc'], '',
                '| wall time s | tests | passed | failed | sum of test '
                'times | exit code |', '|---|---|---|---|---|---|',
                '| %.1f | %s | %s | %s | %s | %d |' % (
                    r['seconds'], r.get('ran', '?'), r.get('passed', '?'),
                    r.get('failed', '0'), r.get('sum', '?'),
                    r['returncode']), '']

    if data.get('errors'):
        out += ['## Errors', '', 'These runs failed; their numbers are '
                'missing or partial: %s.' % ', '.join(data['errors']), '']
    return '\n'.join(out)


def left(debris):
    if not debris['domains'] and not debris['bytes']:
        return 'nothing'
    states = sorted(set(debris['domains'].values()))
    parts = []
    if debris['domains']:
        parts.append('%d domains (%s)' % (len(debris['domains']),
                                          ', '.join(states)))
    if debris['bytes']:
        parts.append('%d bytes in %d dirs' % (debris['bytes'],
                                              len(debris['files'])))
    return ', '.join(parts)


def steps(counts):
    if not counts:
        return 'none'
    return '%d: %s' % (sum(counts.values()), '; '.join(
        '%s x%d' % kv for kv in sorted(counts.items())))


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    only = set(args.only or ('success', 'failure', 'host', 'suite'))
    # No test timeout for the scenarios: 50 evacuations take longer than
    # the functional tests' 160 s.
    os.environ['OS_TEST_TIMEOUT'] = '0'
    sys.path.insert(0, HERE)
    from nova_evac_cleanup import reproduce
    reproduce.bootstrap()
    if args.from_json:
        with open(args.from_json) as raw:
            data = json.load(raw)
        if 'suite' in data:
            data['suite']['ran'] = data['suite'].get('ran', '?').split()[0]
        with open(args.output, 'w') as output:
            output.write(report(data, args) + '\n')
        return 0

    data = {'machine': machine(), 'args': vars(args), 'errors': []}
    sys.stderr.write('benchmarks on %(nproc)s CPUs, nova %(nova)s\n' %
                     data['machine'])
    if only - {'suite'}:
        # Stock runs first in each pair: warm the process up (imports,
        # first database and placement set-up) so it does not pay for it.
        run_scenario('test_success_path', False, argparse.Namespace(
            **dict(vars(args), success_count=2)), quiet=True)
    for key, method in (('success', 'test_success_path'),
                        ('failure', 'test_failure_path'),
                        ('host', 'test_host_evacuation')):
        if key not in only:
            continue
        data[key] = {}
        for fixed in (False, True):
            name = 'fixed' if fixed else 'stock'
            run = run_scenario(method, fixed, args)
            data[key][name] = run
            if run['error']:
                data['errors'].append('%s (%s)' % (key, name))
    if 'suite' in only:
        sys.stderr.write('  timing the functional suite ...\n')
        data['suite'] = run_suite()
        sys.stderr.write('  functional suite: %.1f s\n' %
                         data['suite']['seconds'])

    text = report(data, args)
    with open(args.output, 'w') as output:
        output.write(text + '\n')
    if args.json:
        with open(args.json, 'w') as output:
            json.dump(data, output, indent=1, sort_keys=True, default=str)
    sys.stdout.write(text + '\n')
    return 1 if data['errors'] else 0


if __name__ == '__main__':
    sys.exit(main())
