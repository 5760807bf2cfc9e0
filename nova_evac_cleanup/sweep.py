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

"""The verdict on each evacuation this host journaled, turned into action.

At start-up, after nova's own ``init_host`` and before the host takes
requests, ``[evacuate_cleanup] sweep_on_start`` decides: ``clean`` settles
each evacuation this host journaled (:func:`settle`), ``report`` only logs,
``off`` does nothing. ``nova-evac-cleanup audit --delete`` and the failure
handler, once nova's own handler returned, settle through the same
:func:`settle`: the rule's verdict (:mod:`nova_evac_cleanup.rule`) read
then, and one action for it: the ending (:mod:`nova_evac_cleanup.ending`)
then the entry's end (:mod:`nova_evac_cleanup.leftovers`), the entry
forgotten, or nothing but a report.
"""

from nova.compute import task_states
from nova import objects
from oslo_config import cfg
from oslo_log import log as logging

from nova_evac_cleanup import ending as endings
from nova_evac_cleanup import journal
from nova_evac_cleanup import leftovers
from nova_evac_cleanup import ports
from nova_evac_cleanup import rule
from nova_evac_cleanup import runbook

CONF = cfg.CONF
LOG = logging.getLogger(__name__)


class Finding(object):
    """One evacuation to this host: what is known of it, and what was done.

    :param entry: this host's journal entry, None for what only the
        database shows (never acted on)
    """

    def __init__(self, host, entry, state, left, verdict):
        self.host, self.entry, self.state = host, entry, state
        self.left, self.verdict = left, verdict
        #: what was done and what failed, as sentences
        self.done, self.errors = [], []
        #: whether the ending released the server
        self.ended = False

    def leaves_something(self):
        """Whether anything of it is here, but the server's own files."""
        left, entry = self.left, self.entry
        return bool(left.guest or left.allocations or (
            left.files and not (entry is not None and entry.shared)))

    def refuses(self):
        """Whether it makes the next evacuation of the server here fail."""
        entry, left, instance = self.entry, self.left, self.state.instance
        return bool(entry is not None and not entry.shared and
                    (left.guest or (left.files and entry.spawned)) and
                    instance is not None and not instance.deleted and
                    instance.host != self.host)

    def reported(self):
        """Whether the audit reports it."""
        return (self.ended or self.leaves_something() or self.refuses() or
                self.verdict.decision == rule.END)


def examine(manager, context, host_nodes, entry=None, instance_uuid=None,
            migration_uuid=None):
    """A :class:`Finding`: the state read, what is left here, the verdict."""
    uuid = instance_uuid or entry.instance_uuid
    state = rule.read(context, uuid,
                      entry.migration_uuid if entry else migration_uuid)
    # A deleted instance is looked for here by its uuid.
    left = rule.left_here(manager, context, state.instance or
                          objects.Instance(uuid=uuid), entry, host_nodes)
    return Finding(manager.host, entry, state, left,
                   rule.decide(manager.host, entry, state, left))


def on_start(manager, context, locked):
    """The sweep at start-up, as ``sweep_on_start`` and this host allow.

    ``clean`` only reports without this host's lock (an audit may hold it)
    or a journal to record each step in; the journal is not touched while
    the cleanup is disabled (:func:`sweep` then only reports).

    :param locked: whether this process holds this host's lock
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

    :param mode: ``clean``, ``report`` or ``off``
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
        host_nodes = rule.nodes(context, manager.host) if entries else []
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
    :returns: the :class:`Finding`
    """
    finding = examine(manager, context, host_nodes, entry)
    decision, state = finding.verdict.decision, finding.state
    if not act or decision == rule.KEEP:
        _log(finding, act)
    elif decision == rule.FORGET:
        leftovers.forget(context, entry, state)
    else:
        ending = ending or endings.Ending(
            manager, context, entry,
            lambda: journal.write(entry, durable=True))
        try:
            finding.ended = ending.end(state)
        finally:
            finding.done, finding.errors = ending.done, ending.errors
        if finding.ended:
            leftovers.end(manager.driver, entry, state.instance)
            ports.report_away(manager, context, state.instance,
                              'evacuation to %s ended' % manager.host)
    return finding


def survey(manager, context, entries, host_nodes, act):
    """What evacuations left here, and with ``act`` ended: the audit's.

    Each of ``entries``, settled as at start-up, then what only the
    database shows (:func:`unjournaled`).

    :returns: the findings to report, and how many evacuations were
        examined
    """
    found = [settle(manager, context, entry, host_nodes, act=act)
             for entry in entries]
    others, examined = unjournaled(
        manager, context, {entry.instance_uuid for entry in entries},
        host_nodes)
    return ([f for f in found + others if f.reported()],
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
    records = objects.MigrationList.get_by_filters(
        context, {'host': manager.host, 'migration_type': rule.EVACUATION},
        sort_keys=['created_at', 'id'], sort_dirs=['desc', 'desc'])
    newest = {}
    for migration in records:
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
        finding = examine(manager, context, host_nodes, instance_uuid=uuid,
                          migration_uuid=migration and migration.uuid)
        instance = finding.state.instance
        if (finding.verdict.decision == rule.KEEP and
                finding.leaves_something() and instance is not None and
                instance.host != manager.host and not any(
                    m.status not in rule.OVER for m in finding.state.moves
                    if migration is None or m.id != migration.id)):
            found.append(finding)
    return found, len(guests) + len(records)


def commands(finding):
    """What an operator would run to end what a finding kept here."""
    instance, left, entry = finding.state.instance, finding.left, finding.entry
    if instance is None or instance.deleted or (
            finding.verdict.decision == rule.FORGET):
        return []
    shared = entry is not None and entry.shared
    steps = runbook.cleanup_steps(
        finding.host, instance.uuid, instance.name,
        task_stuck=instance.task_state in task_states.rebuild_states,
        guest=left.guest,
        instance_dir=left.path if left.files and not shared else None,
        shared_with=instance.host, providers=left.allocations)
    return [step.command for step in steps]


def _log(finding, act):
    verdict, entry = finding.verdict, finding.entry
    if verdict.decision == rule.END:
        LOG.warning('Evacuation %s to %s is interrupted (%s); '
                    'sweep_on_start=clean would end it', entry.migration_uuid,
                    finding.host, verdict.reason,
                    instance_uuid=entry.instance_uuid)
    elif verdict.decision == rule.KEEP:
        LOG.warning('Evacuation %s to %s left %s here, kept: %s (%s). By '
                    'hand, once checked: %s', entry.migration_uuid,
                    finding.host, _summary(finding.left), verdict.reason,
                    verdict.kind, ' && '.join(commands(finding)) or
                    'nothing to do', instance_uuid=entry.instance_uuid)


def _summary(left):
    parts = []
    if left.guest:
        parts.append('a %s guest' % left.guest)
    if left.files:
        parts.append('%d files' % len(left.files))
    if left.allocations:
        parts.append('an allocation')
    return ', '.join(parts) or 'nothing'
