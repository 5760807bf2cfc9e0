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

"""The deployment tier's report: stock nova and the fix side by side.

:func:`render` takes the rows the scenarios recorded, each a dict with
``scenario`` (a title), ``storage``, ``mode`` (``stock`` or ``fixed``)
and ``facts`` (an ordered {label: text}), plus the deployment's timings
and RSS samples, and returns plain text: one grid table per scenario and
storage mode, then the timings and the memory.
"""

import collections
import textwrap

WIDTH = 30


def _cell_lines(text, width):
    lines = []
    for para in str(text).split('\n'):
        lines.extend(textwrap.wrap(para, width) or [''])
    return lines


def grid(header, rows, widths=None):
    """A reStructuredText grid table of ``header`` and ``rows``."""
    ncols = len(header)
    widths = widths or [26] + [WIDTH] * (ncols - 1)
    sep = '+' + '+'.join('-' * (w + 2) for w in widths) + '+'
    head_sep = sep.replace('-', '=')
    out = [sep]

    def emit(cells):
        split = [_cell_lines(c, w) for c, w in zip(cells, widths)]
        for i in range(max(len(s) for s in split)):
            out.append('|' + '|'.join(
                ' %-*s ' % (w, s[i] if i < len(s) else '')
                for s, w in zip(split, widths)) + '|')

    emit(header)
    out.append(head_sep)
    for row in rows:
        emit(row)
        out.append(sep)
    return '\n'.join(out)


def _stats(values):
    if isinstance(values, (int, float)):
        return '%.1f s' % values
    values = list(values)
    if not values:
        return '-'
    if len(values) == 1:
        return '%.1f s' % values[0]
    return '%.1f s mean, %.1f-%.1f s (%d runs)' % (
        sum(values) / len(values), min(values), max(values), len(values))


def render(results, timings=None, rss_samples=None):
    out = ['Deployment tier report: stock nova-compute vs '
           'nova-compute-evac-cleanup',
           '(real nova 34 processes, MariaDB, RabbitMQ, libvirtd and QEMU '
           'TCG per host)', '']
    groups = collections.OrderedDict()
    for row in results:
        groups.setdefault((row['scenario'], row['storage']), {})[
            row['mode']] = row['facts']
    for (scenario, storage), modes in sorted(groups.items(),
                                             key=lambda kv: kv[0]):
        title = '%s (%s)' % (scenario, storage)
        out += [title, '~' * len(title), '']
        labels = []
        for facts in modes.values():
            for label in facts:
                if label not in labels:
                    labels.append(label)
        rows = [[label] + [modes.get(m, {}).get(label, 'not run')
                           for m in ('stock', 'fixed')]
                for label in labels]
        out += [grid(['', 'Stock nova-compute', 'nova-compute-evac-cleanup'],
                     rows), '']
    if timings:
        out += ['Timings', '~~~~~~~', '']
        out += [grid(['Step', 'Time'],
                     [[k, _stats(v)] for k, v in timings.items()],
                     widths=[40, 44]), '']
    if rss_samples:
        out += ['Memory (RSS)', '~~~~~~~~~~~~', '']
        for when, sample in rss_samples.items():
            rows = [[name, '%.0f MiB' % (kb / 1024.0)]
                    for name, kb in sorted(sample.items())]
            rows.append(['total', '%.0f MiB' % (
                sum(sample.values()) / 1024.0)])
            out += [when, '', grid(['Process', 'RSS'], rows,
                                   widths=[40, 12]), '']
    return '\n'.join(out) + '\n'
