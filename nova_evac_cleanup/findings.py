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

"""What evacuations to this host left: the reads.

Reads only: the journal, the database, placement and the hypervisor. The
start-up sweep and ``nova-evac-cleanup audit`` find the same things here
(:func:`find`); each finding is classified by
:func:`nova_evac_cleanup.classification.classify`, and
:mod:`nova_evac_cleanup.recovery` ends what it says may be ended, and
nothing else.
"""

from nova.compute import task_states
from nova import exception
from nova import objects
from oslo_log import log as logging

from nova_evac_cleanup import classification
from nova_evac_cleanup import journal
from nova_evac_cleanup import leftovers
from nova_evac_cleanup import ownership
from nova_evac_cleanup import runbook

LOG = logging.getLogger(__name__)

_INSTANCE_ATTRS = ['info_cache', 'flavor', 'migration_context']


class Finding(object):
    """One evacuation to this host to report on, or to end."""

    def __init__(self, host, instance_uuid, entry=None, migration=None):
        self.host = host
        self.instance_uuid = instance_uuid
        #: the journal entry, None for what only the database shows
        self.entry = entry
        self.migration = migration
        self.instance = None
        self.moves = []
        self.kind = None
        self.reason = ''
        self.guest = None
        self.files = {}
        self.allocation_here = {}
        self.owns_directory = False
        #: the files are the instance's own, on storage shared with its
        #: host, as the evacuation found before spawn
        self.files_shared = False
        self.disks = ''
        self.actions = []
        self.commands = []
        self.done = []
        self.errors = []
        #: whether :func:`nova_evac_cleanup.recovery.recover` ended it
        self.ended = False

    @property
    def migration_uuid(self):
        if self.migration is not None:
            return self.migration.uuid
        return self.entry.migration_uuid if self.entry else None

    def left_here(self):
        """Whether anything of it is on this host."""
        return bool(self.guest or (self.files and not self.files_shared) or
                    self.allocation_here)

    def refuses_evacuations(self):
        """Whether it makes the next evacuation of the server here fail."""
        return bool(self.entry is not None and not self.files_shared and
                    (self.guest or (self.files and self.entry.spawning)) and
                    self.kind not in (classification.LIVES_HERE,
                                      classification.DELETED))

    def as_dict(self):
        """The finding in the audit's JSON report."""
        instance, migration, entry = self.instance, self.migration, self.entry
        result = {name: getattr(self, name) for name in (
            'kind', 'reason', 'guest', 'files', 'files_shared',
            'allocation_here', 'disks', 'actions', 'commands', 'done',
            'errors', 'ended')}
        result.update(
            instance=self.instance_uuid, journaled=entry is not None,
            kept=entry.kept if entry is not None else None,
            refuses_evacuations=self.refuses_evacuations(),
            instance_exists=bool(instance and not instance.deleted),
            migration=self.migration_uuid)
        for key, obj, name in (
                ('instance_host', instance, 'host'),
                ('vm_state', instance, 'vm_state'),
                ('task_state', instance, 'task_state'),
                ('migration_status', migration, 'status'),
                ('source_compute', migration, 'source_compute')):
            result[key] = getattr(obj, name) if obj else None
        return result


# Reading.

def load(context, finding):
    """Read the instance, the migration and the instance's moves anew.

    A deleted instance is read too: what its evacuation left here is
    reported (nova's ``running_deleted_instance_action`` reaps its guest).
    """
    try:
        finding.instance = objects.Instance.get_by_uuid(
            context.elevated(read_deleted='yes'), finding.instance_uuid,
            expected_attrs=_INSTANCE_ATTRS)
    except exception.InstanceNotFound:
        finding.instance = None
    migration_id = (finding.entry.migration_id if finding.entry is not None
                    else finding.migration.id if finding.migration is not None
                    else None)
    if migration_id is not None:
        try:
            finding.migration = objects.Migration.get_by_id(
                context, migration_id)
        except exception.MigrationNotFound:
            finding.migration = None
    finding.moves = list(objects.MigrationList.get_by_filters(
        context, {'instance_uuid': finding.instance_uuid},
        sort_keys=['created_at', 'id'], sort_dirs=['desc', 'desc']))


def nodes(manager, context):
    """The compute node uuids of this host, from the database.

    Not from the driver, which would need its ``init_host`` first.
    """
    try:
        return [node.uuid for node in objects.ComputeNodeList.get_all_by_host(
            context, manager.host)]
    except exception.ComputeHostNotFound:
        return []


def allocations(manager, context, uuid):
    return manager.reportclient.get_allocs_for_consumer(
        context, uuid).get('allocations') or {}


def describe(manager, context, finding, host_nodes):
    """Fill in what is on this host and what would be done about it.

    Reads only: the hypervisor, one listing of the instance directory and
    placement.
    """
    instance, entry = finding.instance, finding.entry
    finding.kind, finding.reason = classification.classify(
        finding.host, instance, finding.migration, finding.moves, entry)
    finding.actions, finding.commands = [], []
    if instance is None:
        return
    finding.guest = leftovers.guest_state(manager.driver, instance)
    path = ownership.instance_path(instance.uuid)
    finding.files = {
        '%s/%s' % (path, name): size for name, size in
        ownership.contents(path).items()}
    finding.allocation_here = {
        rp: alloc.get('resources', {}) for rp, alloc in
        allocations(manager, context, instance.uuid).items()
        if rp in host_nodes}
    if entry is not None:
        finding.owns_directory, why = ownership.proof(entry)
        finding.files_shared = bool(entry.shared_storage)
        if finding.files_shared:
            why = ('the instance\'s own files: the evacuation found them on '
                   'storage shared with %s before spawn' % instance.host)
    else:
        why = ('no journal entry: this host has no record of the '
               'evacuation\'s storage')
    finding.disks = (
        'remove: the evacuation created %s, not on shared storage' % path
        if finding.owns_directory else 'keep: %s' % why)
    if finding.kind == classification.INTERRUPTED:
        finding.actions = _actions(finding)
        return
    finding.commands = commands(finding)


def _actions(finding):
    """What ending the interrupted evacuation does, in order."""
    instance, migration = finding.instance, finding.migration
    actions = []
    if migration.status in classification.RUNNING_STATUSES:
        actions.append('set migration %s to failed' % migration.uuid)
    actions.append('destroy the guest on %s and %s' % (
        finding.host, 'remove its disks' if finding.owns_directory
        else 'keep its disks'))
    if finding.allocation_here:
        actions.append('remove the allocation against %s' % finding.host)
    actions.append('set the instance to ERROR with no task state (if still '
                   '%s)' % instance.task_state)
    return actions


def commands(finding):
    """What an operator would run to end a finding that is only reported."""
    instance = finding.instance
    if finding.kind in classification.NOVAS_OWN or not finding.left_here():
        return []
    # Files this evacuation does not own are only ever reported: whether
    # they are on storage shared with the instance's host is for the
    # operator to check.
    steps = runbook.cleanup_steps(
        finding.host, instance.uuid, instance.name,
        task_stuck=(finding.kind == classification.INTERRUPTED or
                    instance.task_state in task_states.rebuild_states),
        guest=finding.guest,
        instance_dir=(ownership.instance_path(instance.uuid)
                      if finding.files and not finding.files_shared
                      else None),
        shared_with=instance.host, providers=finding.allocation_here)
    return [step.command for step in steps]


# Finding.

def examine(manager, context, host_nodes, entry=None, instance_uuid=None,
            migration=None):
    """What is known now of a journal entry's, or a migration's, evacuation."""
    finding = Finding(manager.host, instance_uuid or entry.instance_uuid,
                      entry=entry, migration=migration)
    load(context, finding)
    describe(manager, context, finding, host_nodes)
    return finding


def find(manager, context):
    """The evacuations this host journaled: to end, or to report.

    :returns: ``(findings, examined)``, examined being the number of
        journal entries looked at
    """
    entries = journal.entries(manager.host)
    host_nodes = nodes(manager, context) if entries else []
    return ([examine(manager, context, host_nodes, entry)
             for entry in entries], len(entries))
