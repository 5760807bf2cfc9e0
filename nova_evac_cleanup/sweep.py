# SPDX-License-Identifier: Apache-2.0

"""The verdict on each evacuation this host journaled, turned into action.

The start-up sweep (``[evacuate_cleanup] sweep_on_start``), ``audit
--delete`` and the failure handler once nova's own returned all
:func:`settle` an evacuation the same way: the rule's verdict, read then,
and one action for it: the ending then the entry's end, the entry
forgotten, or nothing but a report.
"""

from nova import objects
from oslo_config import cfg
from oslo_log import log as logging

from nova_evac_cleanup import ending as endings
from nova_evac_cleanup import journal
from nova_evac_cleanup import leftovers
from nova_evac_cleanup import ports
from nova_evac_cleanup import records
from nova_evac_cleanup import rule

CONF = cfg.CONF
LOG = logging.getLogger(__name__)


def on_start(manager, context, locked):
    """The sweep at start-up, as ``sweep_on_start`` and this host allow.

    ``clean`` only reports without this host's lock (an audit may hold it)
    or a journal to record each step in; the journal is not touched while
    the cleanup is disabled (:func:`sweep` then only reports).
    """
    mode = CONF.evacuate_cleanup.sweep_on_start
    if mode == 'clean' and CONF.evacuate_cleanup.enabled and not (
            locked and journal.usable(manager.host)):
        mode = 'report'
    return sweep(manager, context, mode)


def sweep(manager, context, mode):
    """Find, log and, with ``mode`` ``clean``, settle what was journaled.

    With ``report``, nothing is written anywhere. Never raises: a failure
    is logged and the compute service starts.

    :returns: the findings
    """
    if mode == 'off':
        return []
    if mode == 'clean' and not CONF.evacuate_cleanup.enabled:
        LOG.info('[evacuate_cleanup] enabled is False: the start-up sweep '
                 'only reports')
        mode = 'report'
    try:
        entries = journal.entries(manager.host)
        host_nodes = records.nodes(context, manager.host) if entries else []
    except Exception:
        LOG.exception('Could not look for interrupted evacuations to %s',
                      manager.host)
        return []
    if not entries:
        LOG.info('No interrupted evacuation to %s', manager.host)
    found = []
    for entry in entries:
        try:
            found.append(settle(manager, context, entry, host_nodes,
                                act=mode == 'clean'))
        except Exception:
            LOG.exception('Could not deal with evacuation %s to %s',
                          entry.migration_uuid, manager.host,
                          instance_uuid=entry.instance_uuid)
    return found


def settle(manager, context, entry, host_nodes, act=True, ending=None):
    """Read, decide and, with ``act``, do what the verdict says.

    :param ending: the :class:`~nova_evac_cleanup.ending.Ending` to end it
        with; by default one that journals each step durably
    :returns: the :class:`~nova_evac_cleanup.rule.Finding`
    """
    finding = rule.examine(manager, context, host_nodes, entry)
    decision, state = finding.verdict.decision, finding.state
    instance = state.instance
    if not act or decision == rule.KEEP:
        _log(finding)
        return finding
    if decision == rule.FORGET and getattr(instance, 'host', None) == (
            entry.host):
        # What nova's finish_evacuation left (this host may have died in
        # it) is done.
        records.finish(context, instance, state.migration)
    elif decision == rule.END:
        ending = ending or endings.Ending(manager, context, entry)
        try:
            finding.ended = ending.end(state)
        finally:
            finding.done, finding.errors = ending.done, ending.errors
        if not finding.ended:
            return finding
        ports.report_away(manager, context, instance,
                          'evacuation to %s ended' % manager.host)
    leftovers.end(manager.driver, entry, instance,
                  forget=decision == rule.FORGET)
    return finding


def survey(manager, context, host_nodes, act):
    """The audit's: each journal entry settled, then :func:`unjournaled`.

    :returns: the findings to report, and how many evacuations were
        examined
    """
    entries = journal.entries(manager.host)
    found = [settle(manager, context, entry, host_nodes, act=act)
             for entry in entries]
    others, examined = unjournaled(
        manager, context, {entry.instance_uuid for entry in entries},
        host_nodes)
    return ([f for f in found + others if f.ended or f.leaves_something() or
             f.refuses() or f.verdict.decision == rule.END],
            len(entries) + examined)


def unjournaled(manager, context, known, host_nodes):
    """Evacuations to this host that left something and no journal entry.

    Reported, never acted on: the guest here of an instance hosted
    elsewhere (nova's start-up destroys those of instances evacuated from
    this host, not the guest a failed evacuation to it kept, the cleanup
    disabled or its destroy failed), and evacuation records to this host
    from before it journaled evacuations (stock nova, the patch series).
    One hypervisor listing and two queries, whatever the history.

    :param known: instance uuids already examined
    :returns: the findings, and how many guests and records were looked at
    """
    guests = set(manager.driver.list_instance_uuids()) - set(known)
    migrations = objects.MigrationList.get_by_filters(
        context, {'host': manager.host, 'migration_type': rule.EVACUATION},
        sort_keys=['created_at', 'id'], sort_dirs=['desc', 'desc'])
    newest = {}
    for migration in migrations:
        if migration.dest_compute == manager.host:
            newest.setdefault(migration.instance_uuid, migration)
    candidates = {}
    if guests:
        # Sorted by uuid, the query is served by the uuid index alone,
        # whatever the number of instances in the cell.
        candidates = {instance.uuid: newest.get(instance.uuid)
                      for instance in objects.InstanceList.get_by_filters(
                          context, {'uuid': sorted(guests), 'deleted': False},
                          expected_attrs=[], sort_keys=['uuid'],
                          sort_dirs=['asc'])
                      if instance.host != manager.host}
    for uuid, migration in newest.items():
        if uuid not in known and uuid not in guests:
            candidates[uuid] = migration
    found = []
    for uuid, migration in candidates.items():
        finding = rule.examine(manager, context, host_nodes,
                               instance_uuid=uuid,
                               migration_uuid=migration and migration.uuid)
        instance = finding.state.instance
        if (finding.verdict.decision == rule.KEEP and
                finding.leaves_something() and instance is not None and
                instance.host != manager.host and not any(
                    m.status not in rule.OVER for m in finding.state.moves
                    if migration is None or m.id != migration.id)):
            found.append(finding)
    return found, len(guests) + len(migrations)


def _log(finding):
    verdict, entry = finding.verdict, finding.entry
    if verdict.decision == rule.END:
        LOG.warning('Evacuation %s to %s is interrupted (%s); '
                    'sweep_on_start=clean would end it', entry.migration_uuid,
                    finding.host, verdict.reason,
                    instance_uuid=entry.instance_uuid)
    elif verdict.decision == rule.KEEP:
        left = finding.left
        LOG.warning('Evacuation %s to %s left %s here, kept: %s (%s). By '
                    'hand, once checked: %s', entry.migration_uuid,
                    finding.host, ', '.join(filter(None, (
                        left.guest and 'a %s guest' % left.guest,
                        left.files and '%d files' % len(left.files),
                        left.allocations and 'an allocation'))) or 'nothing',
                    verdict.reason, verdict.kind,
                    ' && '.join(finding.commands()) or 'nothing to do',
                    instance_uuid=entry.instance_uuid)
