# SPDX-License-Identifier: Apache-2.0

"""Run the benchmarks, stock nova against the fix, and write RESULTS.md.

``tox -e bench`` runs this. Each scenario of ``scenarios.py`` runs as a
test method of ``EvacuateTestCase`` twice, on stock nova and with the
cleanup manager, in fresh nova services (the start-up sweep with the
cleanup manager only); then the functional suite is timed with stestr in a
subprocess. The results and the machine go to ``benchmarks/RESULTS.md``
(``--output``) and, raw, to ``--json``. With ``--only``, the sections of
the benchmarks not run are kept from the existing ``--output``. With
``--pool``, nothing runs: the interleaved sections (6 and 7) of several
runs' ``--json`` files are pooled into one report, with bootstrap
intervals.
"""

import argparse
import collections
import json
import os
import platform
import random
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


#: The benchmarks, in the report's order.
SECTIONS = ('success', 'failure', 'host', 'suite', 'sweep', 'interleaved',
            'success-interleaved')
#: Those ``--pool`` pools: both sides ran in each run's one nova, so the
#: runs' samples are alike. With the key of their samples in the results.
POOLED = (('interleaved', 'interleaved'),
          ('success-interleaved', 'success_interleaved'))
#: Resamples of a bootstrap interval, and their seed: the same report from
#: the same raw results.
RESAMPLES = 2000
BOOTSTRAP_SEED = 41


def sizes(text):
    values = [int(value) for value in text.split(',')]
    if values != sorted(values) or values[0] < 0:
        raise argparse.ArgumentTypeError('ascending numbers >= 0')
    return values


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
    parser.add_argument('--sweep-records', type=sizes,
                        default=[0, 100, 10000],
                        help='old evacuation records to the restarted '
                        'host, comma-separated, ascending')
    parser.add_argument('--sweep-restarts', type=int, default=5,
                        help='restarts at each number of records')
    parser.add_argument('--sweep-guests', type=int, default=2,
                        help='servers evacuated to the restarted host')
    parser.add_argument('--interleaved-pairs', type=int, default=8,
                        help='failed evacuations to each destination per '
                        'round of the interleaved failure path')
    parser.add_argument('--success-pairs', type=int, default=8,
                        help='successful evacuations to each destination '
                        'per round of the interleaved success path, after '
                        'one pair not recorded')
    parser.add_argument('--only', action='append', choices=SECTIONS,
                        help='run only these benchmarks (repeatable); the '
                        'sections of the others are kept from --output')
    parser.add_argument('--output',
                        default=os.path.join(HERE, 'RESULTS.md'))
    parser.add_argument('--json', help='also write the raw results here')
    parser.add_argument('--from-json', metavar='FILE',
                        help='only rewrite the report from raw results '
                        'written by --json')
    parser.add_argument('--pool', metavar='FILE', nargs='+',
                        help='only rewrite sections 6 and 7 of the report '
                        'from the raw results of several runs (--json), '
                        'pooled')
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
        'date': time.strftime('%Y-%m-%d %H:%M:%S %Z'),
        'commit': commit()}


def commit():
    """The commit the code measured comes from, if in a git checkout."""
    try:
        head = subprocess.run(
            ['git', 'rev-parse', '--short', 'HEAD'], cwd=ROOT,
            capture_output=True, text=True, check=True).stdout.strip()
        changed = subprocess.run(
            ['git', 'status', '--porcelain', '--', 'nova_evac_cleanup'],
            cwd=ROOT, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return 'unknown'
    return head + (' with local changes to nova_evac_cleanup'
                   if changed.strip() else '')


def run_scenario(method, fixed, args, quiet=False):
    """Run one scenario method in fresh services; return its results."""
    import testtools

    import scenarios
    from tests.reproduce import cli as reproduce

    sink = {}
    cls = type('Bench%s%s' % ('Fixed' if fixed else 'Stock',
                              method.title().replace('_', '')),
               (scenarios.Scenarios,),
               {'FIXED': fixed, 'STORAGE': args.storage, 'sink': sink,
                'params': {'success_count': args.success_count,
                           'failure_repeat': args.failure_repeat,
                           'host_count': args.host_count,
                           'fail_ratio': args.fail_ratio,
                           'seed': args.seed,
                           'sweep_records': args.sweep_records,
                           'sweep_restarts': args.sweep_restarts,
                           'sweep_guests': args.sweep_guests,
                           'interleaved_pairs': args.interleaved_pairs,
                           'success_pairs': args.success_pairs}})
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
           'Written by `tox -e bench` (`benchmarks/run.py`); the numbers of '
           'each section come from one run, and the Machine table says '
           'which run (a run of some sections only, `--only`, keeps the '
           'others from the run before); sections 6 and 7 may pool several '
           'runs (`--pool`), and say so. Ratios are fixed / stock. Real '
           'nova in-process (API, conductor, scheduler, placement, '
           'computes) on the fake libvirt driver, %s storage; each scenario '
           'ran in fresh services for stock and for fixed, but sections 6 '
           'and 7, which run both in one nova. Times are '
           'measured from the API request to the state being visible '
           'through the API, polled every %.2f s. One run on a machine that '
           'may be doing other work: read ratios within about 0.85-1.15 as '
           'equal, unless a section gives an interval.' % (
               args.storage, scenarios.POLL), '',
           '## Machine', '',
           '| sections | nproc | CPU | Python | nova | placement | platform '
           '| date | commit |',
           '|---|---|---|---|---|---|---|---|---|',
           '| %s | %s | %s | %s | %s | %s | %s | %s | %s |' % (
               ', '.join(str(SECTIONS.index(key) + 1) for key in SECTIONS
                         if key in data),
               m['nproc'], m['cpu'], m['python'], m['nova'],
               m['placement'], m['platform'], m['date'],
               m.get('commit', 'not recorded')), '']

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
                '(`Evacuation.before_nova`, median), and what the '
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

    if 'sweep' in data:
        out += sweep_section(data['sweep']['fixed'], med)

    if 'interleaved' in data:
        out += interleaved_section(data['interleaved'], med)

    if 'success-interleaved' in data:
        out += success_interleaved_section(data['success-interleaved'], med)

    if data.get('errors'):
        out += ['## Errors', '', 'These runs failed; their numbers are '
                'missing or partial: %s.' % ', '.join(data['errors']), '']
    return '\n'.join(out)


def sweep_section(run, med):
    r = run['results'].get('sweep')
    if not r:
        return []
    weights = dict(scenarios_history())
    total = sum(weights.values())
    out = ['## 5. Start-up sweep', '',
           'The destination, with %d servers it got by evacuation (their '
           'records are the second column\'s extra ones) and no '
           'journal entry left (nothing to do), restarts %d times at each '
           'number of old evacuation records to it, added in bulk with '
           'their instances (%s; %d%% of the instances deleted since, the '
           'others hosted elsewhere); the sizes one after the other in one '
           'test, each adding records to those before. nova\'s own '
           '`ComputeManager.init_host` and the sweep (`sweep.on_start`, '
           'which the manager\'s `init_host` runs after it) are timed '
           'separately, medians of the restarts; SQL '
           'queries (transaction control left out) are counted on the '
           'thread that runs each, on nova\'s cell database (and, in '
           'brackets, on placement and the API database). nova\'s database '
           'is the functional tests\' in-memory SQLite. Goal (issue 10): '
           'the sweep under 5%% of nova\'s `init_host`.' % (
               r['guests'], r['restarts'],
               ', '.join('%s %d%%' % (status, 100 * weight / total)
                         for status, weight in scenarios_history()),
               100 * scenarios_deleted()), '',
           '| old evacuation records | evacuation records to the host | '
           'nova init_host ms | sweep ms | sweep / init_host | goal < 5% '
           '| sweep max ms | manager init_host ms | restart ms | examined '
           '| SQL nova init_host | SQL sweep | give-back ms | SQL give-back |',
           '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|']
    for size in r['sizes']:
        nova, sweep = med(size['nova_init_host']), med(size['sweep'])
        share = 100 * ratio(sweep, nova)
        out.append(
            '| %d | %d | %.1f | %.2f | %.1f%% | %s | %.2f | %.1f | %.1f '
            '| %s | %s (%s) | %s (%s) | %s | %s (%s) |' % (
                size['records'], size['records_in_db'], nova * 1000,
                sweep * 1000, share, 'met' if share < 5 else 'NOT met',
                max(size['sweep']) * 1000, med(size['init_host']) * 1000,
                med(size['restart']) * 1000,
                '/'.join(str(v) for v in sorted(set(size['examined']))),
                med(size['nova_init_host_queries']),
                med(size['nova_init_host_other_queries']),
                med(size['sweep_queries']),
                med(size['sweep_other_queries']),
                '%.2f' % (med(size['give_back']) * 1000)
                if size.get('give_back') else '-',
                med(size['give_back_queries'])
                if size.get('give_back_queries') else '-',
                med(size['give_back_other_queries'])
                if size.get('give_back_other_queries') else '-'))
    sizes = r['sizes']
    shares = [(size['records'],
               100 * ratio(med(size['sweep']), med(size['nova_init_host'])))
              for size in sizes]
    queries = sorted({q for size in sizes for q in size['sweep_queries']})
    out += ['', 'Goal met at %s; not met at %s. The sweep ran %s quer%s on '
            'nova\'s database per start at every size; its median time at '
            '%d records is %.1f times that at %d.' % (
                ', '.join('%d records' % n for n, share in shares
                          if share < 5) or 'no size',
                ', '.join('%d records' % n for n, share in shares
                          if not share < 5) or 'no size',
                '/'.join(map(str, queries)),
                'y' if queries == [1] else 'ies',
                sizes[-1]['records'],
                ratio(med(sizes[-1]['sweep']), med(sizes[0]['sweep'])),
                sizes[0]['records'])]
    out += ['', 'manager init_host: the whole of it (the host lock, nova\'s, '
            'the sweep); restart: stopping the service and starting a new '
            'one; examined: what the sweep logged it examined (journal '
            'entries and foreign guests). Each restart, ms, nova init_host '
            '/ sweep:', '']
    for size in r['sizes']:
        out.append('* %d records: %s; the sweep logged (%d of %d restarts): '
                   '%s' % (
                       size['records'], ', '.join(
                           '%.1f / %.2f' % (a * 1000, b * 1000) for a, b in
                           zip(size['nova_init_host'], size['sweep'])),
                       size['sweep_log_lines'], r['restarts'],
                       '`%s`' % size['sweep_log'][-1].split('] ', 1)[-1]
                       .strip() if size['sweep_log'] else 'nothing'))
    out += ['', 'The sweep\'s queries on nova\'s database at the last '
            'restart, with SQLite\'s query plan (`EXPLAIN QUERY PLAN`, '
            'run afterwards with the same parameters):', '']
    for size in r['sizes']:
        for query in size.get('sweep_plans', []):
            out.append('* %d records: `SELECT ... %s`: %s' % (
                size['records'], query['sql'],
                '; '.join('`%s`' % step for step in query['plan'])))
        if not size.get('sweep_plans'):
            out.append('* %d records: none' % size['records'])
    if any(step.endswith('(deleted=?)') for size in sizes
           for query in size.get('sweep_plans', []) for step in query['plan']):
        out += ['', 'An index searched with `deleted=?` alone reads every '
                'row not deleted, in the order of the index, each tested '
                'against the `WHERE` clause: every live instance of the '
                'cell (here those of about %d%% of the old records, and '
                'the guests).' % (
                    100 * (1 - scenarios_deleted()))]
    out += ['', 'nova\'s own `init_host` queries on its database that scan '
            'a whole table, at the last restart:', '']
    for size in r['sizes']:
        scans = [query for query in size.get('nova_init_host_plans', [])
                 if any(step.startswith('SCAN ') for step in query['plan'])]
        for query in scans:
            out.append('* %d records: `SELECT ... %s`: %s' % (
                size['records'], query['sql'],
                '; '.join('`%s`' % step for step in query['plan'])))
        if not scans:
            out.append('* %d records: none' % size['records'])
    out.append('')
    return out


def interleaved_section(section, med):
    samples = section['fixed']['results'].get('interleaved')
    if not samples:
        return []
    out = ['## 6. Failure path, stock and fixed interleaved', '',
           'One nova, two destinations: one runs nova\'s own compute '
           'manager, the other this project\'s; evacuations whose spawn '
           'fails after the guest booted (`wait_for_boot`: the whole '
           'cleanup, guest, disks and directory) go to one and the other '
           'in turn, the order alternating, %d to each per round; then '
           'both are restarted with the managers swapped, and it goes '
           'again. %s Time: from the evacuate request to the server in '
           'ERROR with its fault, polled every 0.02 s. SQL: statements '
           '(transaction control left out) on the destination\'s '
           '`rebuild_instance` thread, nova\'s cell database and placement '
           '(in-process); cleanup: the fix\'s own code after the failure '
           '(`Evacuation.before_nova` and `Evacuation.after_nova`, the '
           'driver\'s destroy included); own: all '
           'of the project\'s code on that thread, the driver\'s destroy '
           'and nova\'s own methods it calls back into left out (below).' %
           (per_round(samples), pooled(section, samples)), '',
           '| round | fixed on | stock s | fixed s | ratio | cleanup ms '
           '| cleanup / time to ERROR | own ms | own / time to ERROR '
           '| SQL stock | SQL fixed | SQL of the cleanup | left, stock '
           '| left, fixed |',
           '|---|---|---|---|---|---|---|---|---|---|---|---|---|---|']
    ratios = []
    for number in sorted({s['round'] for s in samples}):
        here = [s for s in samples if s['round'] == number]
        stock = [s for s in here if not s['fixed']]
        fixed = [s for s in here if s['fixed']]
        ratios.append(ratio(med([s['seconds'] for s in fixed]),
                            med([s['seconds'] for s in stock])))
        cleanup = med([s['cleanup_seconds'] for s in fixed])
        if all('own_seconds' in s for s in fixed):
            own = med([s['own_seconds'] for s in fixed])
            own = '%.1f | %.1f%%' % (
                own * 1000, 100 * own / med([s['seconds'] for s in fixed]))
        else:
            own = 'not measured | -'
        out.append('| %d | %s | %.3f | %.3f | %.2f | %.1f | %.1f%% | %s '
                   '| %s | %s | %s | %d of %d | %d of %d |' % (
                       number + 1, fixed[0]['host'],
                       med([s['seconds'] for s in stock]),
                       med([s['seconds'] for s in fixed]), ratios[-1],
                       cleanup * 1000,
                       100 * cleanup / med([s['seconds'] for s in fixed]),
                       own,
                       med([s['sql'] for s in stock]),
                       med([s['sql'] for s in fixed]),
                       med([s['cleanup_sql'] for s in fixed]),
                       sum(s['left'] for s in stock), len(stock),
                       sum(s['left'] for s in fixed), len(fixed)))
    out += ['', 'Ratio fixed / stock, per round: %s (medians); the roles '
            'swapped between rounds, so a slower host shows as ratios on '
            'both sides of 1.' % ', '.join('%.2f' % r for r in ratios), '']
    return out + own_work([s for s in samples if s['fixed']], med)


def own_work(fixed, med):
    """The project's own work in a failed evacuation, against issue 41."""
    if not fixed or any('own_seconds' not in s for s in fixed):
        return ['The project\'s own work beyond the driver\'s destroy: not '
                'measured by the run(s) of this section (no `own_seconds` '
                'in their raw results).', '']
    shares = by_run(fixed, lambda s: s['own_seconds'] / s['seconds'])
    share = med(flat(shares))
    low, high = bootstrap(shares, lambda strata: med(flat(strata)))
    on_thread = [s['own_on_thread_seconds'] / s['seconds'] for s in fixed
                 if 'own_on_thread_seconds' in s]
    if high <= 0.01:
        verdict = 'met (the median and its interval)'
    elif share <= 0.01:
        verdict = 'the median met, not the interval\'s upper end'
    else:
        verdict = 'NOT met'
    return ['The project\'s own work in a failed evacuation, beyond the '
            'driver\'s destroy: the time on the fixed destination\'s '
            'handler thread in the project\'s code (the mixin\'s methods '
            'nova calls, and all they call: nova\'s objects, placement, '
            'the journal, the green threads that run while they wait), '
            'less nova\'s methods it calls back into (nova\'s rebuild, the '
            'driver\'s spawn and `instance_on_disk`, the resource tracker\'s '
            '`finish_evacuation`) and the driver\'s `destroy`: median %.1f '
            'ms per evacuation (the destroy: median %.2f ms), %.2f%% of the '
            'time to ERROR (95%% bootstrap interval %.2f-%.2f%%, largest '
            '%.2f%%; %d evacuations). It counts the green threads that run '
            'while the project\'s code waits, the conductor\'s saves for it '
            'and the benchmark\'s own polling alike: an upper bound. %s '
            'Goal (issue 41): at most 1%% of the time to ERROR: %s.' % (
                1000 * med([s['own_seconds'] for s in fixed]),
                1000 * med([s['destroy_seconds'] for s in fixed]),
                100 * share, 100 * low, 100 * high,
                100 * max(flat(shares)), len(fixed),
                'Only while its own thread ran (a lower bound): median '
                '%.2f%%.' % (100 * med(on_thread)) if on_thread else '',
                verdict), '']


def success_interleaved_section(section, med):
    samples = section['fixed']['results'].get('success_interleaved')
    if not samples:
        return []
    stock = [s for s in samples if not s['fixed']]
    fixed = [s for s in samples if s['fixed']]
    out = ['## 7. Success path, stock and fixed interleaved', '',
           'One nova, two destinations: one runs nova\'s own compute '
           'manager, the other this project\'s; successful evacuations, '
           'each of a fresh server from the dead source, go to one and the '
           'other in turn, the order alternating, %d to each per round '
           'after a pair not recorded (the first after a start); then both '
           'are restarted with the managers swapped, and it goes again. '
           '%s Wall: from the evacuate request to the server ACTIVE on the '
           'destination, polled every 0.02 s; CPU: the process\'s '
           '(`time.process_time()`: all of nova, placement and the polling) '
           'over the same span; "handler returned": to the destination\'s '
           '`rebuild_instance` returning, taken there and not polled (so '
           'usually before ACTIVE is seen; the fix ends its journal entry '
           'after nova made the server ACTIVE). Ratio: the pooled median '
           'fixed over the pooled median stock; interval: 95%% bootstrap '
           'percentile interval, %d resamples of the evacuations with '
           'replacement within each run and side, seed %d. Goal (issue '
           '41): the ratio at most 1.02 and the interval covering 1.' % (
               per_round(samples), pooled(section, samples), RESAMPLES,
               BOOTSTRAP_SEED), '',
           '| measure | stock median | fixed median | ratio | 95% interval '
           '| goal |', '|---|---|---|---|---|---|']
    per_run = {}
    for label, key, goal in (
            ('wall to ACTIVE, s', 'seconds', True),
            ('CPU to ACTIVE, s', 'cpu', True),
            ('wall to the handler returned, s', 'ended_seconds', False),
            ('CPU to the handler returned, s', 'ended_cpu', False)):
        a, b = by_run(stock, key), by_run(fixed, key)
        value, (low, high) = ratio_of_medians(a, b, med)
        per_run[key] = [ratio(med(y), med(x)) for x, y in zip(a, b)]
        if not goal:
            verdict = '-'
        elif value <= 1.02 and low <= 1 <= high:
            verdict = 'met'
        else:
            verdict = 'NOT met (%s)' % ' and '.join(
                why for why, bad in (('ratio above 1.02', value > 1.02),
                                     ('1 outside the interval',
                                      not low <= 1 <= high)) if bad)
        out.append('| %s | %.3f | %.3f | %.3f | %.3f-%.3f | %s |' % (
            label, med(flat(a)), med(flat(b)), value, low, high, verdict))
    out += ['', 'Per run, fixed / stock of the medians: wall %s; CPU %s.' % (
        ', '.join('%.3f' % r for r in per_run['seconds']),
        ', '.join('%.3f' % r for r in per_run['cpu']))]
    unended = sum(1 for s in samples if s['ended_seconds'] is None)
    if unended:
        out += ['', '%d handlers had not returned 20 s after the server was '
                'ACTIVE: left out of the "handler returned" rows.' % unended]
    out += ['', 'Driver calls per evacuation on the destination: %s' %
            same_calls(stock, fixed), '',
            'SQL statements on the destination\'s `rebuild_instance` '
            'thread (transaction control left out; nova\'s cell database '
            'and placement), median: stock %s, fixed %s. The project\'s own '
            'code on it (as in section 6, its calls to nova\'s objects and '
            'the journal included, nova\'s rebuild and the driver left '
            'out): median %.1f ms per evacuation, %.2f%% of the wall time '
            'to ACTIVE (the upper bound; while its own thread ran, %.1f ms).'
            % (med([s['sql'] for s in stock]), med([s['sql'] for s in fixed]),
               1000 * med([s['own_seconds'] for s in fixed]),
               100 * med([s['own_seconds'] / s['seconds'] for s in fixed]),
               1000 * med([s.get('own_on_thread_seconds', float('nan'))
                           for s in fixed])),
            '']
    return out


def same_calls(stock, fixed):
    """The driver calls per evacuation of each side; whether they match."""
    totals = []
    for side in (stock, fixed):
        total = collections.Counter()
        for sample in side:
            total.update(sample['calls'])
        totals.append({name: count / len(side)
                       for name, count in total.items()})
    difference = {name: totals[1].get(name, 0) - totals[0].get(name, 0)
                  for name in set(totals[0]) | set(totals[1])}
    difference = {name: d for name, d in difference.items() if abs(d) > 1e-9}
    return 'stock %s; fixed %s. %s' % (
        fmt_calls(totals[0], 1), fmt_calls(totals[1], 1),
        'The same on both sides.' if not difference else
        'They differ, fixed - stock: %s.' % ', '.join(
            '%s %+.2f' % kv for kv in sorted(difference.items())))


def per_round(samples):
    """Evacuations to each side per round, in one run."""
    first = min(s.get('run', 0) for s in samples)
    return sum(1 for s in samples if s.get('run', 0) == first and
               s['round'] == 0 and s['fixed'])


def pooled(section, samples):
    """Which runs the samples come from: a sentence."""
    runs = section.get('runs')
    if not runs:
        return 'One run, %d evacuations to each side.' % (
            sum(1 for s in samples if s['fixed']))
    dates = sorted(run['date'] for run in runs)
    commits = sorted({run['commit'] for run in runs})
    return ('Pooled: %d runs, each its own process, %s to %s, commit%s %s; '
            '%d evacuations to each side.' % (
                len(runs), dates[0], dates[-1],
                '' if len(commits) == 1 else 's (NOT one)',
                ', '.join(commits), sum(1 for s in samples if s['fixed'])))


def by_run(samples, value):
    """The values of the samples, a list per run, in the runs' order.

    :param value: a key of the samples, or a function of one; samples
        without a value (None) are left out
    """
    get = value if callable(value) else (lambda sample: sample[value])
    runs = {}
    for sample in samples:
        if get(sample) is not None:
            runs.setdefault(sample.get('run', 0), []).append(get(sample))
    return [runs[number] for number in sorted(runs)]


def flat(strata):
    return [value for values in strata for value in values]


def bootstrap(strata, statistic):
    """The 95% percentile bootstrap interval of ``statistic``.

    Each resample draws every stratum (a run's evacuations to one side)
    with replacement to its own size: as many evacuations per run and
    side as were measured, a slower run weighing as much as it did.

    :param statistic: of the strata, a list of lists of values
    """
    rng = random.Random(BOOTSTRAP_SEED)
    estimates = sorted(
        statistic([rng.choices(values, k=len(values)) for values in strata])
        for _ in range(RESAMPLES))
    return (estimates[int(0.025 * RESAMPLES)],
            estimates[int(0.975 * RESAMPLES) - 1])


def ratio_of_medians(stock, fixed, med):
    """The pooled median of fixed over that of stock, and its interval.

    :param stock: and ``fixed``: the values of each side, by run
    """
    def statistic(strata):
        return ratio(med(flat(strata[len(stock):])),
                     med(flat(strata[:len(stock)])))
    return statistic(stock + fixed), bootstrap(stock + fixed, statistic)


def scenarios_history():
    import scenarios
    return scenarios.HISTORY


def scenarios_deleted():
    import scenarios
    return scenarios.DELETED_SHARE


def pool(paths, args):
    """The raw results of several runs, their interleaved sections pooled.

    Each sample is marked with its run; each section keeps the date and
    commit of the runs it pools, the Machine table the first run's
    machine with the dates and commits of all.

    :returns: the results, and the first run's arguments (its sizes and
        storage) with this one's ``--output``
    """
    runs = []
    for path in paths:
        with open(path) as raw:
            runs.append(json.load(raw))
    data = {'machine': dict(runs[0]['machine']), 'errors': []}
    for key, name in POOLED:
        samples, machines = [], []
        for run in runs:
            if key not in run:
                continue
            samples += [dict(sample, run=len(machines)) for sample in
                        run[key]['fixed']['results'].get(name, [])]
            machines.append(run['machine'])
            data['errors'] += ['%s, run of %s' % (error,
                                                  run['machine']['date'])
                               for error in run.get('errors', [])
                               if error.split(' (')[0] == key]
        if machines:
            data[key] = {'fixed': {'results': {name: samples}},
                         'runs': [{'date': m['date'],
                                   'commit': m.get('commit', 'not recorded')}
                                  for m in machines]}
    dates = sorted(run['machine']['date'] for run in runs)
    data['machine']['date'] = dates[0] if len(set(dates)) == 1 else (
        '%s to %s' % (dates[0], dates[-1]))
    data['machine']['commit'] = ', '.join(sorted(
        {run['machine'].get('commit', 'not recorded') for run in runs}))
    return data, argparse.Namespace(**dict(runs[0]['args'],
                                           output=args.output))


def merge(text, previous, run):
    """Keep the sections of ``previous`` this run did not produce.

    :param run: the keys of SECTIONS this run ran
    :returns: the report, its sections in order, with a Machine row per
        run the sections come from
    """
    new, old = split(text), split(previous)
    kept = {number: lines for number, lines in old.items()
            if isinstance(number, int) and number not in new and
            SECTIONS[number - 1] not in run}
    if not kept:
        return text
    rows = [line for line in new['Machine'] if line.startswith('|')][:3]
    table = [line for line in old.get('Machine', [])
             if line.startswith('|')]
    old_format = not table or not table[0].startswith('| sections ')
    for row in table[2:]:
        if old_format:
            numbers = sorted(kept)
            cells = row.split('|')[1:-1] + [' not recorded ']
        else:
            cells = row.split('|')[1:-1]
            numbers = [int(n) for n in cells.pop(0).split(',')
                       if n.strip() and int(n) in kept]
        if numbers:
            rows.append('| %s |%s|' % (', '.join(map(str, numbers)),
                                       '|'.join(cells)))
    out = new['preamble'] + new['Machine'][:2] + rows + ['']
    for number in sorted(set(kept) | {n for n in new if isinstance(n, int)}):
        lines = new.get(number) or kept[number]
        while lines and not lines[-1].strip():
            lines = lines[:-1]
        out += lines + ['']
    if 'Errors' in new:
        out += new['Errors']
    while out and not out[-1].strip():
        out.pop()
    return '\n'.join(out)


def split(text):
    """The report by section: its number, 'Machine', 'Errors', 'preamble'.

    Each with its lines, the heading included.
    """
    sections = {'preamble': []}
    current = sections['preamble']
    for line in text.splitlines():
        if line.startswith('## '):
            title = line[3:].strip()
            number = title.split('.', 1)[0]
            key = int(number) if number.isdigit() else title
            current = sections[key] = []
        current.append(line)
    return sections


def write(path, text, run):
    """Write the report, merged with the sections kept from ``path``."""
    try:
        with open(path) as stream:
            text = merge(text, stream.read(), run)
    except FileNotFoundError:
        pass
    with open(path, 'w') as output:
        output.write(text + '\n')
    return text


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
    only = set(args.only or SECTIONS)
    # No test timeout for the scenarios: 50 evacuations take longer than
    # the functional tests' 160 s.
    os.environ['OS_TEST_TIMEOUT'] = '0'
    # The harness and the reproduction are modules of the test tree.
    sys.path[:0] = [HERE, ROOT]
    from tests.reproduce import cli as reproduce
    reproduce.bootstrap()
    if args.pool:
        data, args = pool(args.pool, args)
        write(args.output, report(data, args),
              {key for key in SECTIONS if key in data})
        return 0
    if args.from_json:
        with open(args.from_json) as raw:
            data = json.load(raw)
        if 'suite' in data:
            data['suite']['ran'] = data['suite'].get('ran', '?').split()[0]
        write(args.output, report(data, args),
              {key for key in SECTIONS if key in data})
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
                        ('host', 'test_host_evacuation'),
                        ('sweep', 'test_sweep_startup'),
                        ('interleaved', 'test_failure_interleaved'),
                        ('success-interleaved', 'test_success_interleaved')):
        if key not in only:
            continue
        data[key] = {}
        # Stock nova has no start-up sweep to measure; the interleaved
        # scenarios run both in one nova.
        for fixed in ((True,) if key in ('sweep', 'interleaved',
                                         'success-interleaved')
                      else (False, True)):
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

    text = write(args.output, report(data, args), only)
    if args.json:
        with open(args.json, 'w') as output:
            json.dump(data, output, indent=1, sort_keys=True, default=str)
    sys.stdout.write(text + '\n')
    return 1 if data['errors'] else 0


if __name__ == '__main__':
    sys.exit(main())
