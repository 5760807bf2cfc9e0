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

"""Recover evacuations to this host that this host's death interrupted.

When the destination's nova-compute dies in the middle of an evacuation no
exception handler runs. The instance stays in a rebuild task state on its
source host, the migration stays ``pre-migrating`` (or a source that came
back first marks it ``completed``: ``_destroy_evacuated_instances`` takes it
for done), and the destination keeps the guest, the instance files and its
placement allocation. nova's start-up checks only look at instances whose
host is the starting host, so nothing ever ends that evacuation.

:func:`find` looks, for one host, at the evacuation migration records whose
destination is that host and sorts them, one instance at a time, by what
the newest evacuation of the instance says:

:data:`INTERRUPTED`
    the instance's current evacuation is to this host, it was claimed here
    (``pre-migrating``, or ``completed`` by its source) and the instance is
    still in a rebuild task state on another host. It is ended as nova ends
    an evacuation whose spawn raised: guest destroyed here, this host's
    allocation removed, instance ERROR with no task state, migration
    ``failed``.
:data:`RESET`
    the same, but an operator already reset the instance's state: its state
    is kept, the rest is done.
:data:`FAILED`
    the evacuation failed already but left a guest, files or an allocation
    here: those are removed.
:data:`STALE`
    the record of an interrupted evacuation (``accepted`` or
    ``pre-migrating``) of an instance that has moved on: it is closed as
    ``failed`` so that no resource tracker counts it, and what it left here
    is removed.
:data:`QUEUED` and :data:`ELSEWHERE`
    only reported: the evacuation was never claimed here (its request may
    still be queued for this host), or another evacuation of the instance is
    in progress to another host.

An instance whose host is this host is never touched.

Disks are removed only when the storage is *known* not to be shared with
the instance's host: the evacuating compute records, before spawn, whether
the instance files were on shared storage (:func:`record_shared_storage`),
for the migration it ran and so against that migration's source host. When
there is no record, or the instance is now on another host, the disks are
kept and the report says so; a leftover directory is never taken as proof of
anything. A source that came back first (``completed``) keeps its own disks:
nova's ``_destroy_evacuated_instances`` only removes them once it has
confirmed, by asking this host, that the storage is not shared, and this
host does not answer before this sweep has closed the evacuation. So the
copy removed here, made from the image for the evacuation, is never the
last one.

The same code serves the start-up sweep of
:class:`nova_evac_cleanup.manager.EvacuateCleanupMixin` and the
``nova-evac-cleanup audit`` command; both pass a compute manager, whose
``host``, ``driver`` and ``reportclient`` are used.
"""

import os

from nova.compute import power_state
from nova.compute import task_states
from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova import exception
from nova import objects
from nova.objects import fields
from nova.scheduler import utils as scheduler_utils
from oslo_config import cfg
from oslo_log import log as logging

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

#: The system metadata key holding, for the evacuation a compute ran, what
#: it found before spawn: ``<migration uuid>:<shared|not-shared|unknown>``.
SHARED_STORAGE_KEY = 'evacuate_cleanup_shared_storage'

INTERRUPTED = 'interrupted'
RESET = 'interrupted-reset'
FAILED = 'failed-leftover'
STALE = 'stale-record'
QUEUED = 'not-claimed'
ELSEWHERE = 'in-progress-elsewhere'

#: The kinds :func:`recover` acts on.
ACTIONABLE = (INTERRUPTED, RESET, FAILED, STALE)

_EVACUATION = fields.MigrationType.EVACUATION
_OPEN = ('accepted', 'pre-migrating')
_CANDIDATE_STATUSES = ['accepted', 'pre-migrating', 'completed', 'failed']
_INSTANCE_ATTRS = ['info_cache', 'system_metadata', 'flavor',
                   'migration_context']
_STORAGE_VALUES = {True: 'shared', False: 'not-shared', None: 'unknown'}


class EvacuationInterrupted(exception.NovaException):
    msg_fmt = ('The evacuation to %(host)s was interrupted: nova-compute on '
               '%(host)s stopped before the guest was spawned. The guest '
               'there was cleaned up when it started again.')


# The decision recorded before spawn.

def record_shared_storage(instance, migration, on_shared_storage):
    """Record in the instance whether its files were on shared storage.

    Only sets the system metadata key: nova saves the instance right after,
    before spawning, so recording costs no database call.

    :param on_shared_storage: True, False or None (unknown)
    """
    if migration is None or not migration.obj_attr_is_set('uuid'):
        return
    instance.system_metadata[SHARED_STORAGE_KEY] = '%s:%s' % (
        migration.uuid, _STORAGE_VALUES[on_shared_storage])


def recorded_shared_storage(instance, migration):
    """What the compute running ``migration`` found before spawn.

    :returns: True, False, or None when nothing was recorded for that
        migration
    """
    value = (instance.system_metadata or {}).get(SHARED_STORAGE_KEY) or ''
    uuid, _, answer = value.partition(':')
    if uuid != migration.uuid:
        return None
    return {'shared': True, 'not-shared': False}.get(answer)


# What is on this host.

def instance_path(manager, instance):
    """The instance directory on this host, in the libvirt layout.

    nova's libvirt driver keeps an instance's files in
    ``[DEFAULT] instances_path/<uuid>``; the tests replace this function.
    """
    return os.path.join(CONF.instances_path, instance.uuid)


def _files(manager, instance):
    top = instance_path(manager, instance)
    result = {}
    for dirpath, _dirnames, filenames in os.walk(top):
        for name in filenames:
            path = os.path.join(dirpath, name)
            try:
                result[path] = os.path.getsize(path)
            except OSError:
                pass
    return result


def _guest(manager, instance):
    """None, ``'running'`` or ``'defined'``."""
    try:
        if not manager.driver.instance_exists(instance):
            return None
        state = manager.driver.get_info(instance).state
    except exception.InstanceNotFound:
        return None
    return 'running' if state == power_state.RUNNING else 'defined'


def _nodes(manager, context):
    """The compute node uuids of this host."""
    return list(manager._get_nodes(context))


def _allocations(manager, context, uuid):
    return manager.reportclient.get_allocs_for_consumer(
        context, uuid).get('allocations') or {}


# Finding.

class Finding(object):
    """One instance with an evacuation to this host to deal with."""

    def __init__(self, kind, instance, migration, stale=()):
        self.kind = kind
        self.instance = instance
        self.migration = migration
        #: older open evacuation records of the instance to this host
        self.stale = list(stale)
        self.guest = None
        self.files = {}
        self.allocation_here = {}
        self.allocations_elsewhere = []
        self.destroy_disks = False
        self.disks = ''
        self.actions = []
        self.done = []
        self.notes = []
        self.errors = []

    @property
    def uuid(self):
        return self.migration.instance_uuid

    def as_dict(self):
        instance = self.instance
        return {
            'instance': self.uuid,
            'kind': self.kind,
            'instance_exists': instance is not None,
            'instance_host': instance.host if instance else None,
            'vm_state': instance.vm_state if instance else None,
            'task_state': instance.task_state if instance else None,
            'migration': self.migration.uuid,
            'migration_status': self.migration.status,
            'source_compute': self.migration.source_compute,
            'stale_migrations': [m.uuid for m in self.stale],
            'guest': self.guest,
            'files': self.files,
            'allocation_here': self.allocation_here,
            'allocations_elsewhere': self.allocations_elsewhere,
            'disks': self.disks,
            'actions': self.actions,
            'done': self.done,
            'notes': self.notes,
            'errors': self.errors,
        }


def _latest_evacuation(context, instance_uuid):
    migrations = objects.MigrationList.get_by_filters(
        context, {'instance_uuid': instance_uuid,
                  'migration_type': _EVACUATION},
        sort_keys=['created_at', 'id'], sort_dirs=['desc', 'desc'], limit=1)
    return migrations[0] if migrations else None


def _claimed_here(instance, migration):
    """Whether the claim of this host for ``migration`` is still current."""
    context = instance.migration_context
    if context is not None:
        return context.migration_id == migration.id
    return migration.status in ('pre-migrating', 'completed')


def _classify(host, instance, latest, ours):
    """The kind of the instance's newest evacuation to this host."""
    if latest is None or latest.id != ours.id:
        if latest is not None and latest.status in _OPEN:
            return ELSEWHERE
        return STALE
    rebuilding = instance.task_state in task_states.rebuild_states
    if ours.status == 'failed':
        return FAILED
    if ours.status == 'accepted' and not (
            instance.migration_context is not None and
            instance.migration_context.migration_id == ours.id):
        # Never claimed here: nova may still deliver the request.
        return QUEUED if rebuilding else STALE
    if rebuilding and _claimed_here(instance, ours):
        return INTERRUPTED
    return RESET


def find(manager, context):
    """Find the evacuations to this host to deal with.

    :returns: a list of :class:`Finding`, one per instance, described
        (guest, files, allocations, what :func:`recover` would do)
    """
    host = manager.host
    migrations = objects.MigrationList.get_by_filters(
        context, {'host': host, 'migration_type': _EVACUATION,
                  'status': _CANDIDATE_STATUSES},
        sort_keys=['created_at', 'id'], sort_dirs=['desc', 'desc'])
    by_instance = {}
    for migration in migrations:
        if migration.dest_compute == host:
            by_instance.setdefault(migration.instance_uuid, []).append(
                migration)
    nodes = None
    findings = []
    for uuid, ours in by_instance.items():
        try:
            instance = objects.Instance.get_by_uuid(
                context, uuid, expected_attrs=_INSTANCE_ATTRS)
        except exception.InstanceNotFound:
            instance = None
        if instance is not None and instance.host == host:
            LOG.debug('Evacuation %s to this host: the instance lives here, '
                      'nothing to do', ours[0].uuid, instance=instance)
            continue
        newest = ours[0]
        stale = [m for m in ours[1:] if m.status in _OPEN]
        if instance is None:
            open_ = [m for m in ours if m.status in _OPEN]
            if open_:
                finding = Finding(STALE, None, open_[0], open_[1:])
                finding.actions = [
                    'set migration %s (%s) of the deleted instance to failed'
                    % (m.uuid, m.status) for m in open_]
                findings.append(finding)
            continue
        kind = _classify(host, instance, _latest_evacuation(context, uuid),
                         newest)
        if kind == STALE and newest.status not in _OPEN:
            # Nothing open to close; what it left is looked at below.
            kind = FAILED if newest.status == 'failed' else STALE
        finding = Finding(kind, instance, newest, stale)
        if nodes is None:
            nodes = _nodes(manager, context)
        _describe(manager, context, finding, nodes)
        if finding.actions or kind in (QUEUED, ELSEWHERE):
            findings.append(finding)
    return findings


def _describe(manager, context, finding, nodes):
    """Fill in what is here and what :func:`recover` would do."""
    instance, migration = finding.instance, finding.migration
    finding.guest = _guest(manager, instance)
    finding.files = _files(manager, instance)
    allocations = _allocations(manager, context, instance.uuid)
    finding.allocation_here = {
        rp: alloc.get('resources', {}) for rp, alloc in allocations.items()
        if rp in nodes}
    finding.allocations_elsewhere = sorted(
        rp for rp in allocations if rp not in nodes)

    shared = recorded_shared_storage(instance, migration)
    if instance.host != migration.source_compute:
        # The record is about the source; ask the instance's host now, as
        # nova's _destroy_evacuated_instances does. Any failure says shared.
        if finding.guest or finding.files:
            finding.destroy_disks = not manager._is_instance_storage_shared(
                context, instance, host=instance.host)
        finding.disks = ('%s: %s on storage shared with %s (asked it)' % (
            'remove' if finding.destroy_disks else 'keep',
            'not' if finding.destroy_disks else 'maybe', instance.host))
    elif shared is False:
        finding.destroy_disks = True
        finding.disks = 'remove: not on shared storage (checked before spawn)'
    elif shared:
        finding.disks = 'keep: on shared storage (checked before spawn)'
    else:
        finding.disks = ('keep: unknown whether they are on shared storage '
                         '(nothing recorded before spawn)')

    if finding.kind in (QUEUED, ELSEWHERE):
        return
    actions = finding.actions
    # A failed evacuation's files on storage shared with the instance are
    # the instance's own: only a guest, or files known to be this host's,
    # are leftovers.
    leftover_files = bool(finding.files) and finding.destroy_disks
    if (finding.kind in (INTERRUPTED, RESET) or finding.guest or
            leftover_files):
        actions.append('destroy the guest on %s and %s' % (
            manager.host, 'remove its disks' if finding.destroy_disks
            else 'keep its disks'))
    if finding.allocation_here:
        actions.append('remove the allocation against %s' % manager.host)
    if finding.kind == INTERRUPTED:
        actions.append('set the instance to ERROR with no task state')
    if finding.kind in (INTERRUPTED, RESET, STALE) and (
            migration.status != 'failed'):
        actions.append('set migration %s (%s) to failed' % (
            migration.uuid, migration.status))
    for stale in finding.stale:
        actions.append('set stale migration %s (%s) to failed' % (
            stale.uuid, stale.status))
    if not finding.allocations_elsewhere:
        actions.append('heal the allocation against %s if nova allows' %
                       instance.node)


# Recovering.

def recover(manager, context, finding):
    """End one evacuation as nova would have had spawn raised here.

    Every step is tried; their errors are logged and kept in
    ``finding.errors``.
    """
    instance, migration = finding.instance, finding.migration
    if finding.kind not in ACTIONABLE:
        return finding
    steps = []
    if instance is not None:
        if any(a.startswith('destroy') for a in finding.actions):
            steps.append(('destroy', _destroy))
        if finding.allocation_here:
            steps.append(('deallocate', _deallocate))
        if finding.kind == INTERRUPTED:
            steps.append(('error', _error_instance))
    if finding.kind in (INTERRUPTED, RESET, STALE):
        steps.append(('fail-migration', _fail_migration))
    steps.append(('close-stale', _close_stale))
    if instance is not None:
        steps.append(('heal', _heal))
    for name, step in steps:
        try:
            step(manager, context, finding)
        except Exception as error:
            LOG.exception('Recovering evacuation %s to %s: %s failed',
                          migration.uuid, manager.host, name,
                          instance=instance)
            finding.errors.append('%s: %s' % (name, error))
    return finding


def _destroy(manager, context, finding):
    instance = finding.instance
    network_info = instance.get_network_info()
    block_device_info = manager._get_instance_block_device_info(
        context, instance)
    if (instance.migration_context is not None and
            instance.migration_context.migration_id ==
            finding.migration.id):
        # The guest here was made with the claimed (new) resources.
        with instance.mutated_migration_context():
            manager.driver.destroy(context, instance, network_info,
                                   block_device_info=block_device_info,
                                   destroy_disks=finding.destroy_disks)
    else:
        manager.driver.destroy(context, instance, network_info,
                               block_device_info=block_device_info,
                               destroy_disks=finding.destroy_disks)
    LOG.info('Evacuation %s to %s: destroyed the guest and %s',
             finding.migration.uuid, manager.host,
             'removed its disks' if finding.destroy_disks else
             'kept its disks (%s)' % finding.disks,
             instance=instance)
    finding.done.append('destroyed the guest, disks: %s' % finding.disks)


def _deallocate(manager, context, finding):
    remove = manager.reportclient.remove_provider_tree_from_instance_allocation
    for rp in finding.allocation_here:
        if not remove(context, finding.instance.uuid, rp):
            raise exception.AllocationDeleteFailed(
                consumer_uuid=finding.instance.uuid,
                error='could not remove the allocation against %s' % rp)
        finding.done.append('removed the allocation against %s' % rp)


def _error_instance(manager, context, finding):
    instance = finding.instance
    error = EvacuationInterrupted(host=manager.host)
    instance.drop_migration_context()
    instance.vm_state = vm_states.ERROR
    instance.task_state = None
    instance.save(expected_task_state=list(task_states.rebuild_states))
    compute_utils.add_instance_fault_from_exc(context, instance, error)
    LOG.warning('Evacuation %s to %s was interrupted by the death of its '
                'compute service: instance set to ERROR on %s',
                finding.migration.uuid, manager.host, instance.host,
                instance=instance)
    finding.done.append('set the instance to ERROR')


def _fail_migration(manager, context, finding):
    migration = finding.migration
    if migration.status == 'failed':
        return
    previous = migration.status
    migration.status = 'failed'
    migration.save()
    finding.done.append('set migration %s from %s to failed' % (
        migration.uuid, previous))


def _close_stale(manager, context, finding):
    for migration in finding.stale:
        previous = migration.status
        migration.status = 'failed'
        migration.save()
        finding.done.append('set stale migration %s from %s to failed' % (
            migration.uuid, previous))


def _healable(instance):
    """Whether nova's ``heal_allocations`` would create the allocation."""
    if instance.task_state is not None or not instance.node:
        return 'the instance is in task state %s or on no node' % (
            instance.task_state,)
    specs = instance.flavor.extra_specs or {}
    if 'accel:device_profile' in specs or any(
            'VGPU' in key for key in specs if key.startswith('resources')):
        return 'the flavor requests accelerators or vGPUs'
    return None


def _heal(manager, context, finding):
    """Heal the instance's allocation if it was left without any.

    As ``nova-manage placement heal_allocations`` does: against its node,
    from its flavor, when it is in no task state. Otherwise the instance is
    reported.
    """
    instance = finding.instance
    if instance.deleted or _allocations(manager, context, instance.uuid):
        return
    reason = _healable(instance)
    if reason is None:
        node = objects.ComputeNode.get_by_host_and_nodename(
            context, instance.host, instance.node)
        payload = {
            'allocations': {node.uuid: {
                'resources': scheduler_utils.resources_from_flavor(
                    instance, instance.flavor)}},
            'project_id': instance.project_id,
            'user_id': instance.user_id,
            'consumer_generation': None,
        }
        if manager.reportclient.put_allocations(
                context, instance.uuid, payload):
            LOG.warning('Instance had no allocation left: created one '
                        'against %s from its flavor', instance.node,
                        instance=instance)
            finding.done.append('healed the allocation against %s' %
                                instance.node)
            return
        reason = 'placement refused the allocation'
    LOG.error('Instance has no allocation and it could not be healed (%s); '
              'run nova-manage placement heal_allocations --instance %s',
              reason, instance.uuid, instance=instance)
    finding.errors.append('no allocation, not healed: %s' % reason)


# The start-up sweep.

def sweep(manager, context, mode):
    """Find, log and, with ``mode`` ``clean``, recover.

    Never raises: a failure is logged and the compute service starts.

    :param mode: ``clean``, ``report`` or ``off``
    :returns: the findings
    """
    if mode == 'off':
        return []
    try:
        findings = find(manager, context)
    except Exception:
        LOG.exception('Could not look for interrupted evacuations to %s',
                      manager.host)
        return []
    for finding in findings:
        if finding.kind not in ACTIONABLE:
            LOG.warning('Evacuation %s (%s) of the instance to %s: %s; left '
                        'alone', finding.migration.uuid,
                        finding.migration.status, manager.host,
                        _REASONS[finding.kind], instance=finding.instance)
        elif mode != 'clean':
            LOG.warning('Evacuation %s (%s) to %s is %s; '
                        'sweep_on_start=clean would: %s',
                        finding.migration.uuid, finding.migration.status,
                        manager.host, finding.kind,
                        '; '.join(finding.actions),
                        instance=finding.instance)
        else:
            recover(manager, context, finding)
    return findings


_REASONS = {
    QUEUED: 'it was never claimed here and its request may still be queued',
    ELSEWHERE: 'another evacuation of the instance is in progress',
}


# The audit.

def _service_up(context, host):
    from nova import servicegroup

    try:
        service = objects.Service.get_by_compute_host(context, host)
    except exception.ComputeHostNotFound:
        return False
    return (not service.forced_down and
            servicegroup.API().service_is_up(service))


def audit(manager, context, delete=False):
    """What ``nova-evac-cleanup audit`` reports, in the runbook's order.

    1. the leftovers of failed or interrupted evacuations to this host;
    2. for each, whether the instance exists and where it is hosted;
    3. the allocations against this host's nodes that are orphaned (no
       instance here, no migration in progress here, no finding), and the
       instances of the findings that have no allocation left;
    4. what ``delete`` does (or did) about them.

    Nothing is changed unless ``delete`` is True.

    :returns: a dict, the report
    """
    findings = find(manager, context)
    nodes = _nodes(manager, context)
    # nova-compute may be running an evacuation that looks interrupted.
    running = _service_up(context, manager.host)
    for finding in findings:
        if running and finding.kind in (INTERRUPTED, RESET):
            (finding.errors if delete else finding.notes).append(
                'left alone: nova-compute on %s is up and may be running '
                'this evacuation; restart it (sweep_on_start=clean) or stop '
                'it and run this again' % manager.host)
        elif delete:
            recover(manager, context, finding)
    report = {
        'host': manager.host,
        'delete': delete,
        'compute_service_up': running,
        'evacuations': [f.as_dict() for f in findings],
        'orphaned_allocations': _orphaned(manager, context, nodes, findings,
                                          delete),
        'missing_allocations': [],
    }
    for finding in findings:
        if finding.instance is None or finding.instance.deleted:
            continue
        # Without delete: what removing this host's allocation would leave.
        left = set(_allocations(manager, context, finding.uuid))
        if not delete:
            left -= set(nodes)
        if not left:
            report['missing_allocations'].append(finding.uuid)
    return report


def _orphaned(manager, context, nodes, findings, delete):
    """Allocations against this host nothing here accounts for."""
    handled = {f.uuid for f in findings}
    result = []
    for node_uuid in nodes:
        node = objects.ComputeNode.get_by_uuid(context, node_uuid)
        instances = {i.uuid for i in objects.InstanceList.get_by_host_and_node(
            context, node.host, node.hypervisor_hostname, expected_attrs=[])}
        migrations = objects.MigrationList.get_in_progress_by_host_and_node(
            context, node.host, node.hypervisor_hostname)
        migrating = {m.uuid for m in migrations} | {
            m.instance_uuid for m in migrations
            if not (m.dest_compute == manager.host and
                    m.migration_type == _EVACUATION and
                    m.instance_uuid in handled)}
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
