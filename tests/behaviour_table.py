# SPDX-License-Identifier: Apache-2.0

"""The behaviour table: the expected one, the observed ones, side by side.

``tests/functional/test_behaviour.py`` fails one evacuation per cell, a
(storage mode, failure point), and records a fixed set of facts about what
it left (:data:`FACTS`). Every run asserts each cell equal to the one
expected table, ``tests/functional/behaviour.json``, and writes what it saw
to the directory ``EVAC_BEHAVIOUR_DIR`` names, one file per test:
``<fix>-<nova version>.<storage>.json`` (``mixin-34.0.0.rbd.json``,
``patch-31.3.1.shared.json``).

This module reads and writes those files and, run as a program, prints
the runs side by side, one row per cell::

    python -m tests.behaviour_table DIR [--require mixin-34 patch-31 ...]
    python -m tests.behaviour_table DIR --write-expected mixin-34

It exits 1 if a required run is missing, a run lacks a cell, or a cell
differs from the expected table. It needs no nova (the package
``tests.functional`` imports nova first, so it lives here).
"""

import argparse
import json
import os
import sys
import time

#: The facts of one cell, in the order the table shows them, with what
#: each value means. Every value is a plain string.
FACTS = (
    ('server', 'vm_state[/task_state]@host after the failure, or '
               '"deleted"'),
    ('migration', "the evacuation's migration status"),
    ('fault', '"original" if the fault is the error that failed the '
              'evacuation, else "other: <message>"; "none"'),
    ('guest', 'the domain left on compute1: none, defined (off), running'),
    ('files', "the files of compute1's instance directory (on shared "
              'storage the shared one); "(partial)" marks a partly written '
              'disk; "(empty dir)", or "-" for no directory'),
    ('disk', 'the disk on shared storage or in the RBD pool against what '
             'the source wrote: intact (same bytes and inode), rewritten, '
             'replaced, gone; "-" on non-shared storage'),
    ('allocation', 'the hosts the server has allocations against'),
    ('port', "the hosts the server's port is bound to"),
    ('volume', "the data volume's attachments: the host each is connected "
               'to, or "reserved" (no connection)'),
    ('retry', 'the same evacuation again, without fault: the server state '
              'and the disk compute1 runs it on (fresh: written by that '
              "evacuation; own: the source's, on shared storage; stale: an "
              'earlier evacuation\'s); "-" once deleted'),
)
FACT_NAMES = tuple(name for name, _help in FACTS)

#: The storage modes, in the order of the table (fake_libvirt's).
STORAGES = ('non-shared', 'shared', 'rbd', 'shared-unwritable')

#: The environment variable naming the directory runs write into.
DIR_ENV = 'EVAC_BEHAVIOUR_DIR'

#: The expected table, committed beside the test module.
EXPECTED_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                             'functional', 'behaviour.json')

#: What CI runs (tox -m ci): the mixin on nova 34, the series on 31 to 34.
CI_RUNS = ('mixin-34', 'patch-31', 'patch-32', 'patch-33', 'patch-34')


def load_expected(path=EXPECTED_FILE):
    """The expected rows: ``{storage: {point: {fact: value}}}``."""
    with open(path) as f:
        return json.load(f)['rows']


def _dump(data):
    return json.dumps(data, indent=2) + '\n'


def write_expected(rows, path=EXPECTED_FILE):
    """Write the expected table: the facts' legend, then the rows."""
    rows = {storage: rows[storage]
            for storage in sorted(rows, key=_storage_order)}
    data = {'facts': {name: help_ for name, help_ in FACTS}, 'rows': rows}
    with open(path, 'w') as f:
        f.write(_dump(data))


def _storage_order(storage):
    return (STORAGES.index(storage) if storage in STORAGES
            else len(STORAGES), storage)


def observed_name(fix, version, storage):
    return '%s-%s.%s.json' % (fix, version, storage)


def write_observed(directory, fix, version, storage, rows):
    """Write one test's observed rows (``{point: {fact: value}}``).

    Written to a temporary file first, then renamed: a reader never sees
    half a file, and a new run of the same test replaces the old one.
    """
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, observed_name(fix, version, storage))
    data = {'fix': fix, 'nova': version, 'storage': storage,
            'written': time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime()),
            'rows': rows}
    tmp = '%s.%d.tmp' % (path, os.getpid())
    with open(tmp, 'w') as f:
        f.write(_dump(data))
    os.replace(tmp, path)
    return path


def load_runs(directory):
    """Every run written into ``directory``.

    :returns: ``{run: {'written': ..., 'rows': {storage: {point: facts}}}}``
        where run is ``<fix>-<nova version>``, sorted mixin first, then by
        version
    """
    runs = {}
    for name in sorted(os.listdir(directory)):
        if not name.endswith('.json'):
            continue
        with open(os.path.join(directory, name)) as f:
            data = json.load(f)
        run = runs.setdefault('%s-%s' % (data['fix'], data['nova']),
                              {'written': data['written'], 'rows': {}})
        run['written'] = max(run['written'], data['written'])
        run['rows'][data['storage']] = data['rows']

    def key(run):
        fix, version = run.split('-', 1)
        return (fix != 'mixin', [int(p) if p.isdigit() else p
                                 for p in version.split('.')])
    return {run: runs[run] for run in sorted(runs, key=key)}


def _matches(run, wanted):
    """Whether run ``patch-31.3.1`` is the wanted ``patch-31``."""
    return run == wanted or run.startswith(wanted + '.')


def compare(expected, runs, required=()):
    """Compare the runs with the expected table.

    :returns: ``(marks, problems)``: marks maps (storage, point) to the
        mark of each run (``=`` as expected, ``?`` missing, else the names
        of the facts that differ); problems is a list of sentences, empty
        if everything is as expected
    """
    problems = []
    for wanted in required:
        if not any(_matches(run, wanted) for run in runs):
            problems.append('run %s is missing' % wanted)
    marks = {}
    for storage, points in expected.items():
        for point, facts in points.items():
            row = marks[(storage, point)] = {}
            seen = {run: data['rows'].get(storage, {}).get(point)
                    for run, data in runs.items()}
            missing = [run for run in runs if seen[run] is None]
            if missing:
                problems.append('%s %s: not run by %s' % (
                    storage, point, ', '.join(missing)))
            for run in runs:
                row[run] = '?' if seen[run] is None else ','.join(
                    name for name in facts
                    if seen[run].get(name) != facts[name]) or '='
            for name in facts:
                differ = ['%s %r' % (run, seen[run].get(name))
                          for run in runs if seen[run] is not None and
                          seen[run].get(name) != facts[name]]
                if differ:
                    problems.append('%s %s %s: expected %r; %s' % (
                        storage, point, name, facts[name],
                        ', '.join(differ)))
    for run, data in runs.items():
        for storage, points in data['rows'].items():
            for point in points:
                if point not in expected.get(storage, {}):
                    problems.append('%s: %s %s is not in the expected '
                                    'table' % (run, storage, point))
    return marks, problems


def render(expected, runs, marks, out=sys.stdout):
    """Print one row per cell: each run's mark, then the expected facts.

    A row where a run differs starts with ``*``.
    """
    names = list(runs)
    header = ['', 'storage', 'point'] + names + list(FACT_NAMES)
    lines = []
    for storage, points in expected.items():
        for point, facts in points.items():
            row = marks[(storage, point)]
            flag = '*' if any(row[run] != '=' for run in names) else ''
            lines.append([flag, storage, point] +
                         [row[run] for run in names] +
                         [facts[name] for name in FACT_NAMES])
    widths = [max(len(str(line[i])) for line in [header] + lines)
              for i in range(len(header))]
    for line in [header] + lines:
        out.write('  '.join(str(cell).ljust(width)
                            for cell, width in zip(line, widths)).rstrip() +
                  '\n')


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog='python -m tests.behaviour_table',
        description='Print the behaviour table of the runs written into '
                    'DIR beside the expected one (tests/functional/'
                    'behaviour.json): a run column shows "=" where the '
                    "run's facts are the expected ones, the facts that "
                    'differ, or "?" if the run lacks the cell. Exits 1 on '
                    'any difference or missing run.')
    parser.add_argument('directory', metavar='DIR',
                        help='where the runs wrote their tables '
                             '(EVAC_BEHAVIOUR_DIR)')
    parser.add_argument('--require', nargs='*', default=(), metavar='RUN',
                        help='runs that must be there: <fix>-<nova major> '
                             'or <fix>-<nova version>, e.g. %s' %
                             ' '.join(CI_RUNS))
    parser.add_argument('--expected', default=EXPECTED_FILE,
                        help='the expected table (default: %(default)s)')
    parser.add_argument('--write-expected', metavar='RUN',
                        help="replace the expected table's rows by that "
                             "run's and exit")
    args = parser.parse_args(argv)

    runs = load_runs(args.directory) if os.path.isdir(args.directory) else {}
    if args.write_expected:
        [run] = [run for run in runs if _matches(run, args.write_expected)]
        write_expected(runs[run]['rows'], args.expected)
        print('wrote %s from %s' % (args.expected, run))
        return 0
    expected = load_expected(args.expected)
    marks, problems = compare(expected, runs, args.require)
    print('Behaviour table: %s' % os.path.relpath(args.expected))
    for run, data in runs.items():
        print('  %s written %s' % (run, data['written']))
    print()
    render(expected, runs, marks)
    print()
    if problems:
        print('%d difference(s) from the expected table:' % len(problems))
        for problem in problems:
            print('  ' + problem)
        return 1
    print('Every run has every cell as expected.')
    return 0


if __name__ == '__main__':
    sys.exit(main())
