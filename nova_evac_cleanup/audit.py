# SPDX-License-Identifier: Apache-2.0

"""The report of ``nova-evac-cleanup audit``, in the runbook's order.

1. the leftovers of failed or interrupted evacuations to this host;
2. for each, whether the instance exists and where it is hosted;
3. the allocations against this host's nodes nothing accounts for, and
   the instances of the findings that have none left;
4. what ``--delete`` does (or did): what the start-up sweep's ``clean``
   does (:func:`nova_evac_cleanup.sweep.settle`);
5. the ports and volumes failed evacuations from this host have not
   given back to it yet (:func:`nova_evac_cleanup.giveback.left`).

Without ``delete`` nothing is written anywhere.
"""

from nova import objects

from nova_evac_cleanup import giveback
from nova_evac_cleanup import journal
from nova_evac_cleanup import records
from nova_evac_cleanup import rule
from nova_evac_cleanup import sweep


def report(manager, context, delete=False):
    """Find, and with ``delete`` settle, what evacuations left here.

    With ``delete`` the caller holds the host's lock
    (:mod:`nova_evac_cleanup.host_lock`).

    :returns: a dict, the report
    """
    nodes = records.nodes(context, manager.host)
    found, examined = sweep.survey(manager, context, nodes, delete)
    result = {
        'host': manager.host,
        'delete': delete,
        'compute_service_up': records.service_up(context, manager.host),
        'examined': examined,
        'evacuations': [_as_dict(f) for f in found],
        'orphaned_allocations': _orphaned(manager, context, nodes, found),
        'missing_allocations': [],
        'not_given_back': giveback.left(manager, context),
    }
    for finding in found:
        instance = finding.state.instance
        if instance is None or instance.deleted:
            continue
        # Without delete: what ending the evacuation would leave.
        left = set(manager.reportclient.get_allocs_for_consumer(
            context, instance.uuid).get('allocations') or {})
        if not delete and finding.verdict.decision == rule.END:
            left -= set(nodes)
        if not left:
            result['missing_allocations'].append(instance.uuid)
    return result


def _disks(finding):
    entry, instance = finding.entry, finding.state.instance
    path = finding.left.path
    if finding.left.owned:
        return ('remove: the evacuation created %s, not on shared storage' %
                path)
    if entry is None:
        return ('keep: no journal entry: this host has no record of the '
                'evacuation\'s storage')
    if entry.shared:
        return ('keep: the instance\'s own files: the evacuation found them '
                'on storage shared with %s before spawn' % instance.host)
    return 'keep: %s' % finding.left.why


def _actions(finding):
    """What ending the evacuation does, in order."""
    instance, migration = finding.state.instance, finding.state.migration
    actions = []
    if migration.status in rule.RUNNING:
        actions.append('set migration %s to failed' % migration.uuid)
    actions.append('destroy the guest on %s and %s' % (
        finding.host, 'remove its disks' if finding.left.owned
        else 'keep its disks'))
    if finding.left.allocations:
        actions.append('remove the allocation against %s' % finding.host)
    actions.append('set the instance to ERROR with no task state (if still '
                   '%s)' % instance.task_state)
    return actions


def _as_dict(finding):
    """The finding in the report."""
    entry, left, verdict = finding.entry, finding.left, finding.verdict
    instance, migration = finding.state.instance, finding.state.migration
    path = left.path
    to_end = verdict.decision == rule.END and not finding.ended
    result = {
        'kind': verdict.kind, 'reason': verdict.reason, 'guest': left.guest,
        'files': {'%s/%s' % (path, name): size
                  for name, size in left.files.items()},
        'files_shared': bool(entry is not None and entry.shared),
        'allocation_here': left.allocations,
        'disks': _disks(finding) if instance is not None else '',
        'actions': _actions(finding) if to_end and not finding.done else [],
        'commands': finding.commands() if not to_end else [],
        'done': [str(fact) for fact in finding.done],
        'errors': finding.errors,
        'ended': finding.ended, 'instance': finding.uuid,
        'journaled': entry is not None,
        'kept': entry is not None and entry.phase == journal.KEPT,
        'refuses_evacuations': finding.refuses(),
        'instance_exists': bool(instance and not instance.deleted),
        'migration': migration.uuid if migration else (
            entry and entry.migration_uuid),
    }
    for key, obj, name in (
            ('instance_host', instance, 'host'),
            ('vm_state', instance, 'vm_state'),
            ('task_state', instance, 'task_state'),
            ('migration_status', migration, 'status'),
            ('source_compute', migration, 'source_compute')):
        result[key] = getattr(obj, name) if obj else None
    return result


def _orphaned(manager, context, nodes, found):
    """Allocations against this host nothing here accounts for."""
    handled = {f.uuid for f in found}
    result = []
    for node_uuid in nodes:
        node = objects.ComputeNode.get_by_uuid(context, node_uuid)
        instances = {i.uuid for i in objects.InstanceList.get_by_host_and_node(
            context, node.host, node.hypervisor_hostname, expected_attrs=[])}
        migrations = objects.MigrationList.get_in_progress_by_host_and_node(
            context, node.host, node.hypervisor_hostname)
        migrating = {m.uuid for m in migrations} | {
            m.instance_uuid for m in migrations
            if m.instance_uuid not in handled}
        get = manager.reportclient.get_allocations_for_resource_provider
        allocations = get(context, node_uuid).allocations
        for consumer in allocations:
            if consumer in instances or consumer in migrating:
                continue
            result.append({
                'consumer': consumer,
                'provider': node_uuid,
                'resources': allocations[consumer].get('resources', {}),
                'evacuation_finding': consumer in handled,
            })
    return result


def text(report):
    """The report as text, in the runbook's order."""
    host, delete, found = (report['host'], report['delete'],
                           report['evacuations'])
    allocations = report['orphaned_allocations'] + [
        dict(missing=uuid) for uuid in report['missing_allocations']]
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
            a['missing'], 'has' if delete else 'would have', a['missing'])
        if 'missing' in a else
        '  orphaned: consumer %s on %s: %s%s' % (
            a['consumer'], a['provider'], a['resources'],
            ' (an evacuation above)' if a['evacuation_finding'] else
            '; check it, then: nova-manage placement audit --delete '
            '--resource_provider %s' % a['provider'])
        for a in allocations] or ['  none orphaned or missing'])
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
