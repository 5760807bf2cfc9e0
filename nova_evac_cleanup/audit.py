# SPDX-License-Identifier: Apache-2.0

"""The report of ``nova-evac-cleanup audit``, in the runbook's order.

What evacuations to this host left, the instances, their allocations,
what ``--delete`` does (the start-up sweep's ``clean``:
:func:`nova_evac_cleanup.sweep.settle`) and what failed evacuations from
this host have not given back to it yet. Without ``delete`` nothing is
written anywhere. Allocations no evacuation accounts for are nova-manage's
to find: the report names its command.
"""

import contextlib

from nova import exception
from nova import objects
from nova import servicegroup

from nova_evac_cleanup import giveback
from nova_evac_cleanup import journal
from nova_evac_cleanup import rule
from nova_evac_cleanup import sweep


def report(manager, context, delete=False):
    """Find, and with ``delete`` settle, what evacuations left here.

    With ``delete`` the caller holds the host's lock
    (:mod:`nova_evac_cleanup.host_lock`).

    :returns: a dict, the report
    """
    host, service, nodes = manager.host, None, []
    # What nova knows of this host, read here: only the report needs it.
    with contextlib.suppress(exception.ComputeHostNotFound):
        service = objects.Service.get_by_compute_host(context, host)
    with contextlib.suppress(exception.ComputeHostNotFound):
        nodes = objects.ComputeNodeList.get_all_by_host(context, host)
    found, examined = _survey(manager, context, delete)
    result = {
        'host': host,
        'delete': delete,
        'compute_service_up': bool(service and not service.forced_down and
                                   servicegroup.API().service_is_up(service)),
        'examined': examined,
        'evacuations': [_as_dict(f) for f in found],
        'providers': sorted(node.uuid for node in nodes),
        'missing_allocations': [],
        'not_given_back': giveback.left(manager, context),
    }
    for finding in found:
        instance, left = finding.state.instance, finding.left
        if not instance or instance.deleted or left.elsewhere:
            continue
        if delete and 'allocation' in getattr(finding.entry, 'done', ()):
            # What its ending did: move the one here, or remove them.
            missing = not any(fact.step == 'moved' for fact in finding.done)
        else:
            # What it would do: move the one here or remove them.
            missing = not left.allocations or (
                not delete and finding.verdict.decision == rule.END and
                not rule.moves_home(left.allocations, left.elsewhere))
        if missing:
            result['missing_allocations'].append(instance.uuid)
    return result


def _survey(manager, context, act):
    """Each journal entry settled, then what only nova shows; and a count.

    Reported, never acted on: the guest here of an instance hosted
    elsewhere (nova's start-up destroys only those evacuated from here),
    and evacuation records to this host from before it journaled (stock
    nova, the patch series). One hypervisor listing and two queries.
    """
    entries = journal.entries(manager.host)
    found = [sweep.settle(manager, context, entry, act=act)
             for entry in entries]
    known = {entry.instance_uuid for entry in entries}
    guests = set(manager.driver.list_instance_uuids()) - known
    migrations = objects.MigrationList.get_by_filters(
        context, {'host': manager.host, 'migration_type': rule.EVACUATION},
        sort_keys=['created_at', 'id'], sort_dirs=['desc', 'desc'])
    newest = {}
    for migration in migrations:
        if migration.dest_compute == manager.host:
            newest.setdefault(migration.instance_uuid, migration)
    # Sorted by uuid, the query is served by the uuid index alone, whatever
    # the number of instances in the cell.
    elsewhere = {instance.uuid for instance in (
        objects.InstanceList.get_by_filters(
            context, {'uuid': sorted(guests), 'deleted': False},
            expected_attrs=[], sort_keys=['uuid'], sort_dirs=['asc'])
        if guests else []) if instance.host != manager.host}
    for uuid in elsewhere | (set(newest) - known - guests):
        finding = sweep.examine(
            manager, context, uuid,
            migration_uuid=getattr(newest.get(uuid), 'uuid', None))
        state = finding.state
        # Hosted here (forgotten), deleted or in another operation: not a
        # leftover of an evacuation.
        if (finding.verdict.decision == rule.KEEP and state.instance and
                not any(m.status not in rule.OVER for m in state.moves
                        if m is not state.migration)):
            found.append(finding)
    return ([f for f in found if f.ended or f.leaves_something() or
             f.refuses() or f.verdict.decision == rule.END],
            len(entries) + len(guests) + len(migrations))


def _as_dict(finding):
    """The finding in the report: what is here, and what ending it does."""
    entry, left, verdict = finding.entry, finding.left, finding.verdict
    instance, migration = finding.state.instance, finding.state.migration
    if left.owned:
        disks = 'remove: the evacuation created %s, not on shared storage' % (
            left.path)
    elif entry is None:
        disks = ('keep: no journal entry: this host has no record of the '
                 'evacuation\'s storage')
    elif entry.shared:
        disks = ('keep: the instance\'s own files: the evacuation found them '
                 'on storage shared with %s before spawn' % instance.host)
    else:
        disks = 'keep: %s' % left.why
    to_end = verdict.decision == rule.END and not finding.ended
    actions = [] if not to_end or finding.done else filter(None, [
        migration.status in rule.RUNNING and
        'set migration %s to failed' % migration.uuid,
        'destroy the guest on %s and %s its disks' % (
            finding.host, 'remove' if left.owned else 'keep'),
        left.allocations and (
            'move the allocation against %s to the server\'s node'
            if rule.moves_home(left.allocations, left.elsewhere) else
            'remove the allocation against %s') % finding.host,
        'set the instance to ERROR with no task state (if still %s)' %
        instance.task_state])
    return {
        'kind': verdict.kind, 'reason': verdict.reason, 'guest': left.guest,
        'files': {'%s/%s' % (left.path, name): size
                  for name, size in left.files.items()},
        'files_shared': bool(entry is not None and entry.shared),
        'allocation_here': left.allocations,
        'disks': disks if instance is not None else '',
        'actions': list(actions),
        'commands': finding.commands() if not to_end else [],
        'done': [str(fact) for fact in finding.done],
        'errors': finding.errors, 'ended': finding.ended,
        'instance': finding.uuid, 'journaled': entry is not None,
        'kept': entry is not None and entry.phase == journal.KEPT,
        'refuses_evacuations': finding.refuses(),
        'instance_exists': bool(instance and not instance.deleted),
        'migration': migration.uuid if migration else (
            entry and entry.migration_uuid),
        'instance_host': getattr(instance, 'host', None),
        'vm_state': getattr(instance, 'vm_state', None),
        'task_state': getattr(instance, 'task_state', None),
        'migration_status': getattr(migration, 'status', None),
        'source_compute': getattr(migration, 'source_compute', None),
    }


def text(report):
    """The report as text, in the runbook's order."""
    host, delete, found = (report['host'], report['delete'],
                           report['evacuations'])
    lines = ['Evacuations to %s (nova-compute there is %s)' % (
        host, 'up' if report['compute_service_up'] else 'down')]
    lines += [] if found else [
        '  nothing left by failed or interrupted evacuations']
    lines += ['', '1. Leftovers of failed or interrupted evacuations on %s' %
              host]
    for e in found:
        lines += ['  instance %(instance)s: %(kind)s, migration %(migration)s '
                  '(%(migration_status)s) from %(source_compute)s' % e,
                  '    %s' % e['reason'],
                  '    guest: %s' % (e['guest'] or 'none')]
        lines += ['    file: %s (%d bytes)' % item
                  for item in sorted(e['files'].items())]
        lines.append('    disks: %s' % e['disks'])
        lines += ['    refuses the next evacuation of this server to %s '
                  'until it is removed' % host] * e['refuses_evacuations']
        lines += ['    allocation against %s: %s' % item
                  for item in sorted(e['allocation_here'].items())]
    lines += ['', '2. Instances'] + [
        '  %(instance)s: on %(instance_host)s, %(vm_state)s, task state '
        '%(task_state)s' % e if e['instance_exists'] else
        '  %s: deleted' % e['instance'] for e in found]
    lines += ['', '3. Allocations'] + ([
        '  missing: instance %s %s no allocation; nova-manage placement '
        'heal_allocations --instance %s' % (
            uuid, 'has' if delete else 'would have', uuid)
        for uuid in report['missing_allocations']] or ['  none missing'])
    lines += ['  orphaned, not by an evacuation: nova-manage placement audit '
              '--verbose --resource_provider %s' % node
              for node in report['providers']]
    lines += ['', '4. %s' % ('Done (--delete)' if delete else
                             'What --delete would do')]
    for e in found:
        lines += ['  %s: %s%s' % (e['instance'], prefix, item)
                  for prefix, items in (
                      ('', e['done'] if delete else e['actions']),
                      ('by hand, once checked: ', e['commands']),
                      ('NOT DONE: ', e['errors'])) for item in items]
    if report.get('not_given_back'):
        lines += ['', '5. Failed evacuations from %s: not given back to it '
                  '(its nova-compute tries %d times, every %d seconds)' % (
                      host, giveback.TRIES, giveback.SPACING)]
    for left in report.get('not_given_back', []):
        lines += ['  %(instance)s: evacuation %(migration)s' % left]
        lines += ['    port %s: %s' % item
                  for item in sorted(left['ports'].items())]
        lines += ['    volume %s: not connected' % volume
                  for volume in left['volumes']]
        lines += ['    by hand, once checked: %s' % command
                  for command in left['commands']]
    return '\n'.join(lines) + '\n'
