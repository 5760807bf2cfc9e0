# SPDX-License-Identifier: Apache-2.0

"""The reports: stock nova and the fix side by side, in plain text.

One module renders what both ways of showing the bug print:

* ``tox -e reproduce`` (in-process nova, fake libvirt driver):
  :func:`story_text` narrates one run step by step and
  :func:`summary_text` puts the runs side by side; both take the dicts of
  :mod:`tests.reproduce.story` and
  :mod:`tests.reproduce.verdict`.
* the deployment tier (``tox -e deployment``: nova processes, real libvirtd
  and QEMU): :func:`deployment_text` puts the rows its scenarios recorded
  side by side, then the timings and the memory of the processes.

Both comparisons are :func:`comparison` tables (a row per fact, a column
per run), drawn by :func:`table` as reStructuredText grid tables, so that
the documentation can include a report as it is printed.
"""

import collections
import textwrap

from nova_evac_cleanup import runbook

STAGE_WORDS = {
    'create_instance_dir': 'creating the instance directory (before '
                           'anything exists on compute1)',
    'create_disks': 'copying the disk image (the copy stops half-way)',
    'get_guest_xml': 'building the guest definition, after the disk was '
                     'written',
    'define_domain': 'defining the guest in libvirt',
    'plug_vifs': 'plugging the network interfaces',
    'launch': 'starting the guest',
    'wait_for_boot': 'waiting for the guest to boot (it is already '
                     'running)',
}

STORAGE_WORDS = {
    'non-shared': "each host keeps its servers' disks on its own local "
                  'storage',
    'shared': 'all hosts share one instances directory (e.g. NFS), disks '
              'included',
    'rbd': "disks live in a Ceph RBD pool every host reaches; each host's "
           'own instance directory only holds small files like console.log',
}

RETRY_WORDS = {
    'failed': 'failed',
    'stale-disk': 'ACTIVE on compute1, but booted the disk left by the '
                  'failed attempt',
    'fresh-disk': 'ACTIVE on compute1 with a fresh disk',
    'shared-disk': 'ACTIVE on compute1 on the shared disk (unchanged)',
    'shared-disk-changed': 'ACTIVE on compute1, but the shared disk '
                           'changed',
    'not-run': 'not run',
}

DOMAIN_WORDS = {
    None: 'none',
    'defined': 'defined (shut off)',
    'running': 'running',
}

WIDTH = 78


def step_text(step):
    """A runbook step as one line: ``on HOST: COMMAND``, or the command."""
    return ('on %s: %s' % (step.host, step.command) if step.host
            else step.command)


def size(nbytes):
    """A byte count in words, e.g. ``1,048,576 bytes (1.0 MiB)``."""
    if nbytes is None:
        return 'missing'
    text = '{:,} bytes'.format(nbytes)
    if nbytes >= 1024 * 1024:
        text += ' (%.1f MiB)' % (nbytes / 1024.0 / 1024.0)
    elif nbytes >= 1024:
        text += ' (%.1f KiB)' % (nbytes / 1024.0)
    return text


def _wrap(text, indent):
    return textwrap.fill(text, WIDTH, initial_indent=indent,
                         subsequent_indent=indent + '  ')


def _files_lines(files, indent):
    if not files:
        return [indent + '(no files)']
    return ['%s%-14s %s' % (indent, name, size(nbytes))
            for name, nbytes in sorted(files.items())]


def _retry_text(story, verdict):
    retry = story['retry']
    outcome = verdict['retry']
    if outcome == 'failed':
        text = 'FAILED: the server is %s on %s' % (
            retry['status'], retry['host'])
        if retry['fault_message']:
            text += ', fault "%s"' % retry['fault_message']
        return text
    if outcome == 'stale-disk':
        return ('ACTIVE on %s, BUT it booted the disk the failed attempt '
                'left (written by spawn #%s, not by this evacuation, spawn '
                '#%s; %s): nova took the leftover directory for shared '
                'storage and did not copy the image again' % (
                    retry['host'], retry['disk_generation'],
                    retry['spawn_generation'],
                    'complete' if retry['disk_complete']
                    else 'only partially written'))
    if outcome == 'fresh-disk':
        return ('ACTIVE on %s with a fresh disk (written by this evacuation,'
                ' spawn #%s)' % (retry['host'], retry['spawn_generation']))
    return RETRY_WORDS[outcome].replace('compute1', retry['host'])


def story_text(title, story, verdict):
    """Narrate one run."""
    out = ['', '=' * WIDTH, title, '=' * WIDTH]
    add = out.append
    if 'boot' not in story:
        add(_wrap('The story could not be played: %s' % story['error'],
                  ''))
        return '\n'.join(out)

    boot = story['boot']
    add('Step 1. Boot a server on compute0.')
    add(_wrap('Server %s is %s on %s.' % (
        story['server']['id'], boot['status'], boot['host']), '  '))
    add(_wrap('Storage: %s.' % STORAGE_WORDS[story['storage']], '  '))
    add('  Its disk: %s' % boot['disk_path'])
    add('            %s' % size(boot['disk_size']))
    add(_wrap('(The hosts are simulated: their disks and instance '
              'directories are real files under a temporary directory that '
              'is removed at the end.)', '  '))

    if 'source_failure' in story:
        failure = story['source_failure']
        add('')
        add('Step 2. compute0 fails.')
        add(_wrap('Its nova-compute service is stopped and an admin marks '
                  'it "forced down", as one must before evacuating: '
                  'state %s, forced down %s.' % (
                      failure['state'],
                      'yes' if failure['forced_down'] else 'no'), '  '))

    if 'failed_evacuation' in story:
        failed = story['failed_evacuation']
        add('')
        add('Step 3. Evacuate the server to compute1; creating it there '
            'fails.')
        add(_wrap('compute1 rebuilds the server from scratch ("spawn"). A '
                  'failure is injected at %s: %s.' % (
                      story['stage'], STAGE_WORDS[story['stage']]), '  '))
        add(_wrap('Result: the evacuation failed; the server is %s and '
                  'still recorded on %s (migration %s).' % (
                      failed['status'], failed['host'],
                      failed['migration_status']), '  '))
        add(_wrap('Error recorded on the server: %s' % (
            failed['fault_details'] or
            failed['fault_message']), '  '))
        if failed['driver_cleaned_up']:
            add(_wrap('(libvirt cleaned up after this failure by itself.)',
                      '  '))

    if 'after_failure' in story:
        after = story['after_failure']
        add('')
        add('Step 4. What the failed attempt left on compute1.')
        add('  libvirt guest (virsh list --all): %s' %
            DOMAIN_WORDS[after['domain']])
        if story['storage'] == 'shared':
            add('  instance directory (shared with compute0, not '
                "compute1's own):")
            add('    ' + after['instance_dir'])
            out.extend(_files_lines(after['files'], '      '))
        else:
            add("  instance directory on compute1's own storage:")
            add('    ' + after['instance_dir'])
            if after['own_dir_exists']:
                out.extend(_files_lines(after['own_files'], '      '))
            else:
                add('      (does not exist)')
        if story['storage'] != 'non-shared':
            add("  the shared disk (compute0's): %s" % (
                'unchanged' if after['shared_disk_unchanged']
                else 'CHANGED'))
            add('    ' + after['disk_path'])
        add("  bytes on compute1's own storage: %s" %
            size(after['own_bytes']))
        add('  placement allocation against compute1: %s' % (
            _resources(after['allocation'])))
        audit = after['placement_audit']
        add('  nova-manage placement audit (compute1): %s' % (
            'no orphaned allocations' if audit['exit_code'] == 0
            else 'orphaned allocations found (exit code %d)'
            % audit['exit_code']))
        for line in audit['output'].splitlines():
            add('    ' + line)

    if 'retry' in story:
        add('')
        add('Step 5. Evacuate to compute1 again, with no failure this time.')
        add(_wrap('Result: ' + _retry_text(story, verdict), '  '))
        retry = story['retry']
        if verdict['retry'] == 'failed' and retry['fault_details']:
            add(_wrap('Error recorded on the server: %s' %
                      retry['fault_details'], '  '))

    if story['error']:
        add('')
        add(_wrap('The story stopped early: %s' % story['error'], '  '))
    return '\n'.join(out)


def _resources(resources):
    if not resources:
        return 'none'
    return ', '.join('%s=%s' % item for item in sorted(resources.items()))


def _leftover_cell(story, verdict):
    if 'after_failure' not in story:
        return ['?']
    found = verdict['leftovers']
    lines = ['guest: %s' % DOMAIN_WORDS[found.get('domain')]]
    if story['storage'] == 'shared':
        lines.append("files: none of compute1's own (shared dir)")
    elif 'instance_dir' in found:
        lines.append('files: ' + (', '.join(sorted(found['files'])) or
                                  'empty directory'))
    else:
        lines.append('files: none')
    return lines


def _bytes_cell(story):
    after = story.get('after_failure')
    if after is None:
        return ['?']
    return ['{:,}'.format(after['own_bytes'])]


def _placement_cell(story):
    after = story.get('after_failure')
    if after is None:
        return ['?']
    return ['allocation: %s' % ('yes' if after['allocation'] else 'none'),
            'audit: %s' % ('clean' if after['placement_audit']['exit_code']
                           == 0 else 'orphans')]


def _retry_cell(story, verdict):
    outcome = verdict['retry']
    if outcome == 'failed':
        retry = story['retry']
        return ['FAILED (%s)' % retry['status'],
                retry['fault_message'] or '']
    return {
        'stale-disk': ['ACTIVE, on the STALE', 'leftover disk'],
        'fresh-disk': ['ACTIVE, fresh disk'],
        'shared-disk': ['ACTIVE, shared disk', 'unchanged'],
        'shared-disk-changed': ['ACTIVE, shared disk', 'CHANGED'],
        'not-run': ['not run'],
    }[outcome]


def _verdict_cell(name, verdict):
    if name == 'stock':
        if verdict['bug_reproduced']:
            return ['bug reproduced']
        if verdict['ok']:
            return ['no bug at this', 'stage (expected)']
        return ['bug NOT reproduced']
    return ['clean (as it should)' if verdict['ok'] else 'NOT clean']


def summary_text(stage, storage, stories, judgement):
    """The runs side by side, and what to make of them."""
    names = [name for name in ('stock', 'fixed') if name in stories]
    titles = {'stock': 'Stock nova', 'fixed': 'With the fix'}
    verdicts = judgement['verdicts']
    columns = collections.OrderedDict()
    for name in names:
        story, verdict = stories[name], verdicts[name]
        columns[titles[name]] = collections.OrderedDict([
            ('Left on compute1 after the failed evacuation',
             _leftover_cell(story, verdict)),
            ("Bytes left on compute1's own storage", _bytes_cell(story)),
            ('Placement (compute1)', _placement_cell(story)),
            ('Evacuating again', _retry_cell(story, verdict)),
            ('Manual steps still needed on compute1', _steps_cell(verdict)),
            ('Verdict', _verdict_cell(name, verdict)),
        ])
    out = ['', 'Summary (failure at %s, %s storage)' % (stage, storage),
           comparison(columns), '']
    if 'stock' in verdicts and not verdicts['stock']['bug_expected']:
        out.append(_wrap('Note: at this stage and storage %s.' %
                         verdicts['stock']['expectation'], ''))
    for name in names:
        for problem in verdicts[name]['problems']:
            out.append('%s: %s' % (titles[name], problem))
    steps = {name: verdicts[name]['manual_steps'] for name in names}
    for name in names:
        if steps[name]:
            out.append('%s, the operator\'s steps in full:' % titles[name])
            out.extend('  %d. %s' % (i, step_text(runbook.Step(**step)))
                       for i, step in enumerate(steps[name], 1))
    out.append('')
    out.append('Result: %s' % (
        'OK, everything behaved as expected (exit 0)' if judgement['ok']
        else 'NOT OK, see above (exit 1)'))
    return '\n'.join(out)


def _steps_cell(verdict):
    """The manual steps in a few words each, ending with the retry."""
    steps = [step['what'] for step in verdict['manual_steps']]
    if steps == ['evacuate again']:
        return ['none; just evacuate again']
    return steps or ['-']


# Tables, for both reports.

#: The widest a column of :func:`table` grows before its cells wrap.
CELL_WIDTH = 30
#: What a comparison shows for a fact one run did not record.
NOT_RECORDED = 'not run'


def _cell_lines(cell, width):
    """A cell's lines: a list is kept line by line, text is wrapped."""
    paragraphs = cell if isinstance(cell, (list, tuple)) else \
        str(cell).split('\n')
    lines = []
    for paragraph in paragraphs:
        lines.extend(textwrap.wrap(paragraph, width,
                                   break_on_hyphens=False) or [''])
    return lines


def table(header, rows, widths=None):
    """A reStructuredText grid table of ``header`` and ``rows``.

    A cell is text (wrapped to its column, ``\\n`` starts a new line) or
    a list of lines. A column is as wide as its longest line, at most
    :data:`CELL_WIDTH`, unless ``widths`` says otherwise.
    """
    rows = [list(row) for row in rows]
    if widths is None:
        widths = []
        for col in range(len(header)):
            longest = max(len(line) for row in [header] + rows
                          for line in _cell_lines(row[col], 10 ** 6))
            widths.append(max(1, min(longest, CELL_WIDTH)))
    rule = '+' + '+'.join('-' * (width + 2) for width in widths) + '+'
    out = [rule]

    def emit(row):
        cells = [_cell_lines(cell, width)
                 for cell, width in zip(row, widths)]
        for i in range(max(len(cell) for cell in cells)):
            out.append('| ' + ' | '.join(
                (cell[i] if i < len(cell) else '').ljust(width)
                for cell, width in zip(cells, widths)) + ' |')

    emit(header)
    out.append(rule.replace('-', '='))
    for row in rows:
        emit(row)
        out.append(rule)
    return '\n'.join(out)


def comparison(columns):
    """Runs side by side: a row per fact, a column per run.

    :param columns: an ordered {run title: an ordered {fact: cell}}; the
        facts appear in the order they are first met, and a fact a run
        did not record reads :data:`NOT_RECORDED`
    """
    labels = []
    for facts in columns.values():
        labels.extend(label for label in facts if label not in labels)
    rows = [[label] + [facts.get(label, NOT_RECORDED)
                       for facts in columns.values()]
            for label in labels]
    return table([''] + list(columns), rows)


# The deployment tier's report.

#: The columns of the deployment report: a scenario row's ``mode``, and
#: its title.
DEPLOYMENT_MODES = collections.OrderedDict([
    ('stock', 'Stock nova-compute'),
    ('fixed', 'nova-compute-evac-cleanup'),
])


def _seconds(values):
    if isinstance(values, (int, float)):
        return '%.1f s' % values
    values = list(values)
    if not values:
        return '-'
    if len(values) == 1:
        return '%.1f s' % values[0]
    return '%.1f s mean, %.1f-%.1f s (%d runs)' % (
        sum(values) / len(values), min(values), max(values), len(values))


def _mib(kib):
    return '%.0f MiB' % (kib / 1024.0)


def deployment_text(results, timings=None, rss_samples=None,
                    software=None):
    """The deployment tier's report.

    :param results: the rows the scenarios recorded, each a dict with
        ``scenario`` (a title), ``storage``, ``mode`` (a key of
        :data:`DEPLOYMENT_MODES`) and ``facts`` (an ordered {label: text})
    :param timings: {step: seconds, or a list of them}
    :param rss_samples: {when: {process: RSS in KiB}}
    :param software: what ran, e.g. ``['nova 34.0.0', 'libvirt 9.0.0']``
    :returns: one comparison per scenario and storage, in scenario order,
        then the timings and the memory
    """
    out = ['Deployment tier report: stock nova-compute vs '
           'nova-compute-evac-cleanup',
           '(real nova processes, MariaDB, RabbitMQ, libvirtd and QEMU '
           'TCG per host)']
    if software:
        out.append(_wrap('Software: %s' % ', '.join(software), ''))
    out.append('')
    groups = collections.OrderedDict()
    for row in results:
        groups.setdefault((row['scenario'], row['storage']), {})[
            row['mode']] = row['facts']
    for (scenario, storage), modes in sorted(groups.items()):
        title = '%s (%s)' % (scenario, storage)
        columns = collections.OrderedDict(
            (heading, modes.get(mode, {}))
            for mode, heading in DEPLOYMENT_MODES.items())
        out += [title, '~' * len(title), '', comparison(columns), '']
    if timings:
        out += ['Timings', '~~~~~~~', '',
                table(['Step', 'Time'],
                      [[step, _seconds(values)]
                       for step, values in timings.items()],
                      widths=[40, 44]), '']
    if rss_samples:
        out += ['Memory (RSS)', '~~~~~~~~~~~~', '']
        for when, sample in rss_samples.items():
            rows = [[name, _mib(kib)] for name, kib in sorted(sample.items())]
            rows.append(['total', _mib(sum(sample.values()))])
            out += [when, '', table(['Process', 'RSS'], rows,
                                    widths=[40, 12]), '']
    return '\n'.join(out) + '\n'
