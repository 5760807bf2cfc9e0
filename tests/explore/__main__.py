# SPDX-License-Identifier: Apache-2.0

"""The fault-point explorer: ``tox -e explore [-- OPTIONS]``.

1. Record: each scenario of :mod:`tests.explore.scenario` runs once per
   storage mode without a fault; the tracer lists its points.
2. Explore: each point is run again with each fault kind (``raise``;
   ``die``, in both restart orders), each in a fresh nova.
3. Report: a table of points x fault kinds x storage modes, with what held
   or which invariant broke, written to ``--results``.

``--nova stock --nova fixed`` runs the evacuation's scenarios on nova's
own compute manager too, each fault beside the fixed one (its points are
recorded on stock nova's own calls): what stock breaks is reported, never a
failure. ``--point NAME#N --fault KIND --storage MODE --scenario NAME``
replays one cell and prints what broke. ``--sample ci`` runs the sample CI
runs. The exit code is 1 if any fixed cell broke an invariant or failed to
run.
"""

import argparse
import datetime
import json
import os
import subprocess
import sys
import tempfile
import time

from tests import functional  # noqa: monkey patching first

from importlib import metadata  # noqa: E402

from tests.explore import scenario as scenarios  # noqa: E402
from tests.explore import tracer as tracing  # noqa: E402
from tests.harness import fake_libvirt  # noqa: E402
from tests.harness import functional as base  # noqa: E402

#: The sample ``tox -m ci`` runs: every point of the evacuation with
#: *raise* on one storage mode, and every point of the recovery with *die*;
#: of the audit only the points the sweep's cells do not have (the audit
#: ends an evacuation with the sweep's own steps; the full run has them all);
#: of the source's give-back the first call of each neutron and cinder
#: method, with both (:func:`ci_points`); no death right after a call that
#: only reads, which leaves what the death at the call before it left
#: (:func:`ci_cells`).
CI_SAMPLE = (
    ('non-shared', 'evacuate', (tracing.RAISE,), ('dest-first',)),
    ('non-shared', 'spawn-fails', (tracing.RAISE,), ('dest-first',)),
    ('non-shared', 'sweep', (tracing.DIE,), ('dest-first',)),
    ('non-shared', 'audit', (tracing.DIE,), ('dest-first',)),
    ('non-shared', scenarios.GIVEBACK, tracing.FAULTS, ('dest-first',)),
)

_ROOT = {'evacuate': 'evacuate', 'spawn-fails': 'evacuate',
         'sweep': 'sweep', 'audit': 'audit',
         scenarios.GIVEBACK: scenarios.GIVEBACK}


def delivery():
    return 'patched nova' if base.fix_mode() == base.FIX_PATCH else 'mixin'


def scenarios_of(storage_modes, names):
    """The scenarios this delivery can run (patched nova: no recovery)."""
    result = []
    for storage in storage_modes:
        for name in names:
            if delivery() != 'mixin' and name in scenarios.RECOVERY + (
                    scenarios.GIVEBACK,):
                continue
            result.append((storage, name))
    return result


def record(storage, name, nova=scenarios.FIXED):
    """The points of one scenario, run without a fault.

    :returns: the points, and what the run without a fault gave (a
        scenario that breaks an invariant or fails with no fault at all
        is a finding too; its points up to there are explored)
    """
    outcome, broken, points, error = scenarios.run_cell(
        scenarios.Cell(storage, name, nova=nova))
    baseline = {'outcome': outcome, 'broken': broken, 'error': error}
    if nova == scenarios.FIXED and outcome not in ('held', scenarios.STOCK):
        print('%-9s %-11s %-45s %s' % (storage, name, '(no fault)',
                                       error or broken), flush=True)
    return _explored(name, points), baseline


def _explored(name, points):
    root = _ROOT[name]
    explored = [p for p in points if p[0] == root]
    if name in scenarios.RECOVERY + (scenarios.GIVEBACK,):
        return explored
    if name == 'spawn-fails':
        # Only what follows the spawn failure is new.
        failed = ('evacuate', 'driver.spawn:wait_for_boot', 1)
        if failed not in points:
            return []
        return [p for p in points[points.index(failed) + 1:]
                if p[0] == root]
    return explored


def ci_points(name, points):
    """The points the CI sample explores of the give-back: see CI_SAMPLE."""
    if name != scenarios.GIVEBACK:
        return points
    seen, chosen = set(), []
    for point in points:
        if point[1].split('.')[0] in ('neutron', 'volume', 'cinder') and (
                point[1] not in seen):
            seen.add(point[1])
            chosen.append(point)
    return chosen


def ci_cells(cells):
    """The sample's cells: no death right after a read (see CI_SAMPLE)."""
    return [cell for cell in cells if cell.fault.kind != tracing.DIE or
            not tracing.changes_nothing(cell.fault.name)]


def cells_for(storage, name, points, kinds, orders, nova=scenarios.FIXED):
    if name == scenarios.GIVEBACK:
        # The evacuation ended before: no restart order to choose.
        orders = orders[:1]
    cells = []
    for root, point, occurrence in points:
        for kind in kinds:
            for order in (orders if kind == tracing.DIE else orders[:1]):
                cells.append(scenarios.Cell(
                    storage, name, tracing.Fault(root, point, occurrence,
                                                 kind), order, nova))
    return cells


def _cell_json(cell):
    fault = cell.fault
    return {'storage': cell.storage, 'scenario': cell.scenario,
            'order': cell.order, 'nova': cell.nova,
            'fault': fault and [fault.root, fault.name, fault.occurrence,
                                fault.kind]}


def _cell_from(data):
    fault = data['fault'] and tracing.Fault(*data['fault'])
    return scenarios.Cell(data['storage'], data['scenario'], fault,
                          data['order'], data.get('nova', scenarios.FIXED))


def run_cells(cells, workers):
    """Run cells in ``workers`` processes; the results, in cell order."""
    if workers <= 1 or len(cells) < 2:
        return [run_one(cell) for cell in cells]
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for index in range(workers):
            share = cells[index::workers]
            cells_file = os.path.join(tmp, 'cells-%d.json' % index)
            out_file = os.path.join(tmp, 'out-%d.json' % index)
            with open(cells_file, 'w') as stream:
                json.dump([_cell_json(c) for c in share], stream)
            procs.append((index, out_file, subprocess.Popen(
                [sys.executable, '-m', 'tests.explore', '--worker',
                 cells_file, out_file])))
        results = [None] * len(cells)
        for index, out_file, proc in procs:
            proc.wait()
            with open(out_file) as stream:
                for offset, item in enumerate(json.load(stream)):
                    results[index + offset * workers] = item
    return results


def _scenario_name(cell):
    """The cell's scenario, and ``(stock)`` on nova's own manager."""
    return cell.scenario + (' (stock)' if cell.nova != scenarios.FIXED
                            else '')


def _fixed(cells, results):
    """The cells on this project's manager, and their results."""
    return [(c, r) for c, r in zip(cells, results)
            if c.nova == scenarios.FIXED]


def _stock_twin(cell, by_key):
    """The stock cell's result for ``cell``'s fault on stock nova, or None."""
    return by_key.get(cell.key()[:-1] + (scenarios.STOCK_NOVA,))


def run_one(cell):
    started = time.monotonic()
    outcome, broken, _points, error = scenarios.run_cell(cell)
    result = {'outcome': outcome, 'broken': broken, 'error': error,
              'seconds': round(time.monotonic() - started, 1)}
    print('%-9s %-11s %-45s %-5s %-12s %5.1fs %s' % (
        cell.storage, _scenario_name(cell),
        '%s#%d' % (cell.fault.name, cell.fault.occurrence),
        cell.fault.kind, cell.order, result['seconds'], error or outcome),
        flush=True)
    return result


def _versions():
    return {name: metadata.version(name)
            for name in ('nova', 'openstack-placement', 'nova-evac-cleanup')}


def table(cells, results):
    """The results as an RST grid: a row per point, a column per fault."""
    columns = []
    rows = {}
    for cell, result in zip(cells, results):
        column = '%s %s%s%s' % (cell.storage, cell.fault.kind,
                                '' if cell.fault.kind == tracing.RAISE
                                else ' ' + cell.order,
                                '' if cell.nova == scenarios.FIXED
                                else ' stock')
        if column not in columns:
            columns.append(column)
        row = (cell.scenario, '%s#%d' % (cell.fault.name,
                                         cell.fault.occurrence))
        rows.setdefault(row, {})[column] = (
            'error' if result['error'] else result['outcome'])
    # Each fault's stock column beside its fixed one.
    bases = [c[:-len(' stock')] if c.endswith(' stock') else c
             for c in columns]
    columns.sort(key=lambda c: (bases.index(
        c[:-len(' stock')] if c.endswith(' stock') else c),
        c.endswith(' stock')))
    header = ['scenario', 'point'] + columns
    lines = [header] + [
        [scenario, point] + [rows[(scenario, point)].get(c, '-')
                             for c in columns]
        for scenario, point in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]

    def rule(char):
        return '+' + '+'.join(char * (w + 2) for w in widths) + '+'

    out = [rule('-')]
    for number, line in enumerate(lines):
        out.append('| ' + ' | '.join(
            text.ljust(w) for text, w in zip(line, widths)) + ' |')
        out.append(rule('=' if number == 0 else '-'))
    return '\n'.join(out)


def _shown(argv):
    """The command line, without where the report was written."""
    shown, skip = [], False
    for arg in argv:
        if skip:
            skip = False
        elif arg == '--results':
            skip = True
        elif not arg.startswith('--results='):
            shown.append(arg)
    return shown


def write_results(path, cells, results, counts, baselines, seconds, argv):
    all_cells, all_results = cells, results
    by_key = {c.key(): r for c, r in zip(cells, results)}
    stock_cells = [(c, r) for c, r in zip(cells, results)
                   if c.nova != scenarios.FIXED]
    cells, results = [list(x) for x in zip(*_fixed(cells, results))] or (
        [], [])
    held = sum(1 for r in results if r['outcome'] in ('held', 'kept'))
    unreached = sum(1 for r in results
                    if r['outcome'] == scenarios.NOT_REACHED)
    stock = sum(1 for r in results if r['outcome'] == scenarios.STOCK)
    opened = [(c, r) for c, r in zip(cells, results)
              if r['outcome'] == scenarios.OPEN]
    lines = [
        'Fault-point explorer: %s' % delivery(),
        '=' * len('Fault-point explorer: %s' % delivery()),
        '',
        'Run on %s with %s, %d cells in %d s (``%s``).' % (
            datetime.date.today().isoformat(),
            ', '.join('%s %s' % item for item in sorted(_versions().items())),
            len(all_cells), seconds,
            ' '.join(['tox -e explore --'] + _shown(argv))),
        '',
        'Points per storage mode and scenario: %s.' % '; '.join(
            '%s %s: %d' % (storage, name, count)
            for (storage, name), count in counts.items()),
        '',
        'Each scenario without a fault: %s.' % '; '.join(
            '%s %s: %s' % (storage, name, result['error'] or
                           result['outcome'])
            for (storage, name), result in baselines.items()),
        '',
        '%d cells held or kept, %d broke only what stock nova breaks '
        'itself (``stock``, listed below), %d broke only an open finding '
        '(``open``, listed below), %d whose fault point was never '
        'reached (``not-reached``: they test nothing), %d broke an '
        'invariant or failed to run. ``kept``: %s. ``stock``: every '
        'invariant held but one stock nova breaks by itself: %s' % (
            held, stock, len(opened), unreached,
            len(cells) - held - unreached - stock - len(opened),
            scenarios.KEPT, scenarios.STOCK_PREFIX.rstrip(': ')),
        '',
    ]
    if stock_cells:
        lines += [
            'The same faults on nova\'s own compute manager (columns '
            '``stock``; it has no sweep, audit or give-back, and its points '
            'are counted on its own calls): %d cells, %d held, %d broke an '
            'invariant, %d failed to run, %d not reached.' % (
                len(stock_cells),
                sum(1 for _, r in stock_cells
                    if r['outcome'] in ('held', 'kept', scenarios.STOCK)),
                sum(1 for _, r in stock_cells if not r['error'] and
                    r['outcome'] not in scenarios.PASSED),
                sum(1 for _, r in stock_cells if r['error']),
                sum(1 for _, r in stock_cells
                    if r['outcome'] == scenarios.NOT_REACHED)), '']
    lines += ['Invariants:', '']
    lines += ['* ``%s``: %s' % item for item in scenarios.INVARIANTS]
    lines += ['', table(all_cells, all_results), '']

    def listed(title, chosen, words, intro=()):
        """A section of ``chosen`` cells, each with ``words(result, cell)``."""
        if not chosen:
            return []
        return [title, '-' * len(title), '', *intro] + [
            '* %s %s ``%s#%d`` %s %s: %s' % (
                cell.storage, cell.scenario, cell.fault.name,
                cell.fault.occurrence, cell.fault.kind, cell.order,
                words(result, cell)) for cell, result in chosen] + ['']

    def details(result, prefix=''):
        return '; '.join('%s: %s' % (invariant, detail[len(prefix):])
                         for invariant, detail in result['broken']
                         if detail.startswith(prefix))

    def broke(result, cell):
        twin = _stock_twin(cell, by_key)
        text = result['error'] or details(result)
        if twin is None:
            return text
        return '%s (the same fault on stock nova: %s)' % (
            text, twin['error'] or twin['outcome'])

    lines += listed('What broke', [
        (c, r) for c, r in zip(cells, results)
        if r['outcome'] not in scenarios.PASSED], broke)
    lines += listed('Open findings', opened,
                    lambda result, cell: details(result))
    lines += listed('What stock nova breaks itself', [
        (c, r) for c, r in zip(cells, results) if any(
            detail.startswith(scenarios.STOCK_PREFIX)
            for _, detail in r['broken'])],
        lambda result, cell: details(result, prefix=scenarios.STOCK_PREFIX),
        intro=[scenarios.STOCK_PREFIX.rstrip(': ') + '.', ''])
    with open(path, 'w') as stream:
        stream.write('\n'.join(lines))


def parse(argv):
    parser = argparse.ArgumentParser(prog='tox -e explore --',
                                     description=__doc__.split('\n\n')[0])
    parser.add_argument('--storage', action='append',
                        choices=fake_libvirt.STORAGE_MODES,
                        help='storage mode (repeatable; default: all)')
    parser.add_argument('--scenario', action='append',
                        choices=scenarios.SCENARIOS,
                        help='scenario (repeatable; default: all)')
    parser.add_argument('--fault', action='append',
                        choices=tracing.FAULTS,
                        help='fault kind (repeatable; default: both)')
    parser.add_argument('--order', action='append',
                        choices=scenarios.ORDERS,
                        help='restart order of die cells (default: both)')
    parser.add_argument('--nova', action='append', choices=scenarios.NOVAS,
                        help='the computes\' manager: this project\'s '
                        '(fixed, the default) or nova\'s own (stock: the '
                        'evacuation\'s scenarios only); repeatable')
    parser.add_argument('--point', help='replay one point, NAME#N')
    parser.add_argument('--sample', choices=['ci'],
                        help='run the sample CI runs instead')
    parser.add_argument('--record', action='store_true',
                        help='only list the points')
    parser.add_argument('--no-junk', action='store_true',
                        help='no foreign files in the journal directory')
    parser.add_argument('--boot-from-volume', action='store_true',
                        help='the target boots from a volume (it always '
                        'has a port and a data volume)')
    # A cell waits on its in-process services about a quarter of the
    # time: one worker more than the cores keeps them busy.
    parser.add_argument('--workers', type=int,
                        default=(os.cpu_count() or 1) + 1,
                        help='processes running cells (default: the '
                        'cores and one)')
    parser.add_argument('--results', help='write the report there')
    parser.add_argument('--worker', nargs=2, help=argparse.SUPPRESS)
    return parser.parse_args(argv)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    args = parse(argv)
    if args.worker:
        with open(args.worker[0]) as stream:
            cells = [_cell_from(c) for c in json.load(stream)]
        results = [run_one(cell) for cell in cells]
        with open(args.worker[1], 'w') as stream:
            json.dump(results, stream)
        return 0
    started = time.monotonic()
    if args.no_junk:
        # Read by the scenarios, here and in the workers.
        os.environ['EXPLORE_NO_JUNK'] = '1'
    if args.boot_from_volume:
        os.environ['EXPLORE_BOOT_FROM_VOLUME'] = '1'
    if args.sample == 'ci':
        plan = [(s, n, k, o, scenarios.FIXED) for s, n, k, o in CI_SAMPLE
                if (s, n) in scenarios_of([s], [n])]
    else:
        plan = [(s, n, tuple(args.fault or tracing.FAULTS),
                 tuple(args.order or scenarios.ORDERS), nova)
                for nova in args.nova or [scenarios.FIXED]
                for s, n in scenarios_of(
                    args.storage or fake_libvirt.STORAGE_MODES,
                    args.scenario or scenarios.SCENARIOS)
                if nova == scenarios.FIXED or n in scenarios.ON_STOCK]
    cells, counts, baselines = [], {}, {}
    swept = set()
    for storage, name, kinds, orders, nova in plan:
        title = name + ('' if nova == scenarios.FIXED else ' (stock)')
        points, baselines[(storage, title)] = record(storage, name, nova)
        counts[(storage, title)] = len(points)
        if name == 'sweep':
            swept.update((storage, p[1:]) for p in points)
        elif name == 'audit' and args.sample == 'ci':
            points = [p for p in points if (storage, p[1:]) not in swept]
        if args.sample == 'ci':
            points = ci_points(name, points)
        if args.record:
            print('%s %s: %d points' % (storage, title, len(points)))
            for root, point, occurrence in points:
                print('  %s#%d' % (point, occurrence))
            continue
        if args.point:
            points = [p for p in points
                      if '%s#%d' % (p[1], p[2]) == args.point]
        cells.extend(cells_for(storage, name, points, kinds, orders, nova))
    if args.record:
        return 0
    if args.sample == 'ci':
        cells = ci_cells(cells)
    if not cells:
        print('No cell to run: unknown point?', file=sys.stderr)
        return 2
    results = run_cells(cells, 1 if args.point else args.workers)
    seconds = time.monotonic() - started
    for cell, result in zip(cells, results):
        if args.point or result['outcome'] not in ('held', 'kept',
                                                   scenarios.STOCK):
            print('%s %s %s#%d %s %s: %s' % (
                cell.storage, _scenario_name(cell), cell.fault.name,
                cell.fault.occurrence, cell.fault.kind, cell.order,
                result['error'] or result['outcome']))
            for invariant, detail in result['broken']:
                print('  broke %s: %s' % (invariant, detail))
    if args.results:
        write_results(args.results, cells, results, counts, baselines,
                      seconds, argv)
    explored = len(results)
    # What breaks on nova's own manager is what the fix is for: reported,
    # never a failure of the run.
    cells, results = [list(x) for x in zip(*_fixed(cells, results))] or (
        [], [])
    baselines = {k: v for k, v in baselines.items()
                 if not k[1].endswith(' (stock)')}
    failed = sum(1 for r in results + list(baselines.values())
                 if r['outcome'] not in scenarios.PASSED)
    unreached = sum(1 for r in results
                    if r['outcome'] == scenarios.NOT_REACHED)
    stock = sum(1 for r in results + list(baselines.values())
                if r['outcome'] == scenarios.STOCK)
    opened = sum(1 for r in results if r['outcome'] == scenarios.OPEN)
    print('explore: %d passed, %d of them broke only what stock nova '
          'breaks itself, %d only an open finding (OPEN_FINDINGS: listed '
          'above), %d not reached (they test nothing), %d failed' % (
              len(results) + len(baselines) - failed - unreached, stock,
              opened, unreached, failed))
    print('Explored %d cells in %d s' % (explored, seconds))
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
