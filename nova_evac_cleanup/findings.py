# SPDX-License-Identifier: Apache-2.0

"""What an evacuation to this host left here, as found: a :class:`Finding`.

The state the database gives, what is on this host and the rule's verdict
(:mod:`nova_evac_cleanup.rule`), for each evacuation this host journaled
(:func:`examine`) and for those only the database shows
(:func:`unjournaled`), and the commands that would end what is kept.
"""

from nova.compute import task_states
from nova import objects

from nova_evac_cleanup import records
from nova_evac_cleanup import rule
from nova_evac_cleanup import runbook


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

    @property
    def uuid(self):
        """The instance's uuid."""
        instance = self.state.instance
        return instance.uuid if instance is not None else (
            self.entry.instance_uuid)

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

    def commands(self):
        """What an operator would run to end what it kept here."""
        instance, left, entry = self.state.instance, self.left, self.entry
        if instance is None or instance.deleted or (
                self.verdict.decision == rule.FORGET):
            return []
        shared = entry is not None and entry.shared
        steps = runbook.cleanup_steps(
            self.host, instance.uuid, instance.name,
            task_stuck=instance.task_state in task_states.rebuild_states,
            guest=left.guest,
            instance_dir=left.path if left.files and not shared else None,
            shared_with=instance.host, providers=left.allocations)
        return [step.command for step in steps]

    def summary(self):
        """What is left here, in a few words."""
        left = self.left
        parts = []
        if left.guest:
            parts.append('a %s guest' % left.guest)
        if left.files:
            parts.append('%d files' % len(left.files))
        if left.allocations:
            parts.append('an allocation')
        return ', '.join(parts) or 'nothing'


def examine(manager, context, host_nodes, entry=None, instance_uuid=None,
            migration_uuid=None):
    """A :class:`Finding`: the state read, what is left here, the verdict."""
    uuid = instance_uuid or entry.instance_uuid
    state = records.read(context, uuid,
                         entry.migration_uuid if entry else migration_uuid)
    # A deleted instance is looked for here by its uuid.
    left = rule.left_here(manager, context, state.instance or
                          objects.Instance(uuid=uuid), entry, host_nodes)
    return Finding(manager.host, entry, state, left,
                   rule.decide(manager.host, entry, state, left))


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
