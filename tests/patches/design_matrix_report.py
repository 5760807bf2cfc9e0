# SPDX-License-Identifier: Apache-2.0

"""Tabulate what ``test_design_matrix`` recorded, per design.

Usage: ``python design_matrix_report.py RESULTS.jsonl [...]``; prints an
RST table (a row per failure point, a column per design, in the order the
designs first appear) and the totals. A cell holds one code per storage
mode, non-shared / shared instance directory / RBD:

* ``ok``: nothing of the server on compute1;
* ``log``: only ``console.log`` in compute1's own instance directory
  (RBD, where the disks are in the pool);
* ``files``: the instance directory with a disk (or part of one);
* ``def`` / ``run``: a guest, defined or running, whatever the files;

followed by ``!`` when evacuating again did not end ACTIVE on compute1
with a fresh disk (``InstanceExists``, or the stale disk booted).
"""

import collections
import json
import sys

STORAGE = ('non-shared', 'shared', 'rbd')
POINTS = ('create_instance_dir', 'create_disks', 'get_guest_xml',
          'define_domain', 'plug_vifs', 'launch', 'wait_for_boot',
          'save', 'delete', 'power', 'notify', 'finish')
POINT_NAMES = {
    'save': 'save (state reset)',
    'delete': 'deleted meanwhile',
    'power': 'power off (stopped)',
    'notify': 'rebuild.end',
    'finish': 'finish_evacuation',
}


def code(record):
    if record['guest'] == 'running':
        result = 'run'
    elif record['guest']:
        result = 'def'
    elif not record['files']:
        result = 'ok'
    elif record['files'] == ['console.log']:
        result = 'log'
    else:
        result = 'files'
    if record['retry'] is not None and record['retry'] != 'ACTIVE':
        result += '!'
    return result


def clean(record):
    return (not record['guest'] and record['files'] in ([], ['console.log'])
            and record['shared_disk_intact'] is not False)


def table(rows):
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    line = '  '.join('=' * w for w in widths)
    out = [line]
    for n, row in enumerate(rows):
        out.append('  '.join(cell.ljust(w) for cell, w in
                             zip(row, widths)).rstrip())
        if n == 0:
            out.append(line)
    out.append(line)
    return '\n'.join(out)


def main(paths):
    designs = []
    results = collections.defaultdict(dict)
    for path in paths:
        with open(path) as f:
            for line in f:
                record = json.loads(line)
                if record['design'] not in designs:
                    designs.append(record['design'])
                results[record['design']][
                    (record['point'], record['storage'])] = record
    rows = [['failure point'] + designs]
    for point in POINTS:
        row = [POINT_NAMES.get(point, point)]
        for design in designs:
            row.append(' / '.join(
                code(results[design][(point, storage)])
                if (point, storage) in results[design] else '?'
                for storage in STORAGE))
        rows.append(row)
    totals = [['total'] + designs]
    for label, test in (
            ('nothing left but a console.log', clean),
            ('no guest left', lambda r: not r['guest']),
            ('shared disk changed',
             lambda r: r['shared_disk_intact'] is False),
            ('allocation left on compute1', lambda r: r['dest_allocation']),
            ('retry ACTIVE, fresh disk', lambda r: r['retry'] == 'ACTIVE')):
        row = [label]
        for design in designs:
            records = list(results[design].values())
            counted = [r for r in records
                       if label[:5] != 'retry' or r['retry'] is not None]
            row.append('%d of %d' % (sum(1 for r in counted if test(r)),
                                     len(counted)))
        totals.append(row)
    print(table(rows))
    print()
    print(table(totals))
    retries = collections.Counter(
        (design, r['retry']) for design in designs
        for r in results[design].values()
        if r['retry'] not in (None, 'ACTIVE'))
    if retries:
        print()
        for (design, retry), n in sorted(retries.items()):
            print('%s: retry %s: %d' % (design, retry, n))


if __name__ == '__main__':
    main(sys.argv[1:])
