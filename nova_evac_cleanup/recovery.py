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

"""End evacuations to this host that this host's death interrupted.

When the destination's nova-compute dies in the middle of an evacuation no
exception handler runs. The instance stays in a rebuild task state on its
source host, the migration stays ``pre-migrating`` (or a source that came
back first marks it ``completed``), and the destination keeps the guest,
the instance files and its placement allocation.

The rule here is *when in doubt, report and keep*: nothing is changed
without proof, taken at the moment of acting, that it belongs to the
interrupted evacuation and to nothing else.

* Only evacuations that left a :mod:`~nova_evac_cleanup.journal` entry on
  this host are candidates: an entry exists only while this host runs the
  evacuation, so one found at start-up is an evacuation its death cut. Old
  migration records, however many, are never read by the sweep.
* :func:`classify` then requires the instance's current state to still name
  that evacuation: not hosted here, its migration context naming the
  migration, its task state one of the evacuation's rebuild states, the
  migration ``pre-migrating`` or ``completed`` and the instance's newest
  move, and no other migration of the instance in progress.
  Only such a finding is :data:`INTERRUPTED`; every other kind is reported
  with the commands an operator would run, and kept.
* :func:`recover` reads and classifies the finding again right before it
  acts, then writes the instance with a compare-and-swap on the task state
  it classified, before anything else is touched. It never rewrites a
  ``completed`` migration, and removes disks only if
  :func:`~nova_evac_cleanup.journal.owns_directory` proves the instance
  directory is the evacuation's own at that moment.
* Allocations are not healed here: a simplified copy of ``nova-manage
  placement heal_allocations`` would miss port resource requests and PCI
  devices, so the exact command is reported instead.

The same code serves the start-up sweep of
:class:`nova_evac_cleanup.manager.EvacuateCleanupMixin` and the
``nova-evac-cleanup audit`` command; both pass a compute manager, whose
``host``, ``driver`` and ``reportclient`` are used.
"""

from nova.compute import power_state
from nova.compute import task_states
from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova import exception
from nova import objects
from nova.objects import fields
from oslo_config import cfg
from oslo_log import log as logging

from nova_evac_cleanup import journal
from nova_evac_cleanup import nova_support
from nova_evac_cleanup import runbook
from nova_evac_cleanup import unwind

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

#: The only kind that is acted on.
INTERRUPTED = 'interrupted'
#: Reported and kept.
RESET = 'interrupted-reset'
MOVED_ON = 'moved-on'
IN_PROGRESS = 'other-operation-in-progress'
NOT_CLAIMED = 'not-claimed'
FAILED = 'failed-leftover'
DELETED = 'instance-deleted'
LIVES_HERE = 'lives-here'
FOREIGN_GUEST = 'foreign-guest'
UNJOURNALED = 'unjournaled'

_EVACUATION = fields.MigrationType.EVACUATION
#: Statuses of a migration that is over, whatever its type.
_OVER = frozenset(['confirmed', 'reverted', 'error', 'failed', 'completed',
                   'cancelled', 'done'])
_CLAIMED = ('pre-migrating', 'completed')
_INSTANCE_ATTRS = ['info_cache', 'flavor', 'migration_context']


class EvacuationInterrupted(exception.NovaException):
    msg_fmt = ('The evacuation to %(host)s was interrupted: nova-compute on '
               '%(host)s stopped before the guest was spawned. The guest '
               'there was cleaned up when it started again.')


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
        #: whether :func:`recover` ended the evacuation
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

    def as_dict(self):
        instance, migration = self.instance, self.migration
        return {
            'instance': self.instance_uuid,
            'kind': self.kind,
            'reason': self.reason,
            'journaled': self.entry is not None,
            'instance_exists': bool(instance and not instance.deleted),
            'instance_host': instance.host if instance else None,
            'vm_state': instance.vm_state if instance else None,
            'task_state': instance.task_state if instance else None,
            'migration': self.migration_uuid,
            'migration_status': migration.status if migration else None,
            'source_compute': migration.source_compute if migration else None,
            'guest': self.guest,
            'files': self.files,
            'files_shared': self.files_shared,
            'allocation_here': self.allocation_here,
            'disks': self.disks,
            'actions': self.actions,
            'commands': self.commands,
            'done': self.done,
            'errors': self.errors,
            'ended': self.ended,
        }


# Reading.

def _load(context, finding):
    """Read the instance, the migration and the instance's moves anew."""
    try:
        finding.instance = objects.Instance.get_by_uuid(
            context, finding.instance_uuid, expected_attrs=_INSTANCE_ATTRS)
    except exception.InstanceNotFound:
        finding.instance = None
    if finding.entry is not None:
        try:
            finding.migration = objects.Migration.get_by_id(
                context, finding.entry.migration_id)
        except exception.MigrationNotFound:
            finding.migration = None
    elif finding.migration is not None:
        finding.migration = objects.Migration.get_by_id(
            context, finding.migration.id)
    finding.moves = list(objects.MigrationList.get_by_filters(
        context, {'instance_uuid': finding.instance_uuid},
        sort_keys=['created_at', 'id'], sort_dirs=['desc', 'desc']))


def classify(host, instance, migration, moves):
    """Whether the instance's state still names the evacuation to ``host``.

    :param moves: every migration record of the instance, of any type,
        newest first
    :returns: ``(kind, reason)``; the kind is :data:`INTERRUPTED` only when
        the evacuation may be ended
    """
    if instance is None or instance.deleted:
        return DELETED, 'the instance was deleted'
    if instance.host == host:
        return LIVES_HERE, 'the instance is hosted here'
    busy = [m for m in moves if m.status not in _OVER and (
        migration is None or m.id != migration.id)]
    if busy:
        return IN_PROGRESS, 'migration %s (%s, %s) of the instance is in ' \
            'progress' % (busy[0].uuid, busy[0].migration_type,
                          busy[0].status)
    if migration is None:
        return FOREIGN_GUEST, ('the instance is hosted on %s and no '
                               'evacuation of it to this host is known' %
                               instance.host)
    newest = moves[0] if moves else None
    if newest is None or newest.id != migration.id:
        return MOVED_ON, (
            'migration %s (%s, %s) of the instance is newer' % (
                newest.uuid, newest.migration_type, newest.status)
            if newest is not None else 'no migration of the instance is known')
    if migration.status == 'failed':
        return FAILED, 'the evacuation failed and its handler ran'
    if migration.status not in _CLAIMED:
        return NOT_CLAIMED, 'the migration is %s' % migration.status
    context = instance.migration_context
    if context is None or context.migration_id != migration.id:
        return NOT_CLAIMED, ("the instance's migration context does not "
                             "name the migration")
    if instance.task_state not in task_states.rebuild_states:
        return RESET, ('the instance is in task state %s, not the '
                       'evacuation\'s (reset by an operator?)' %
                       instance.task_state)
    return INTERRUPTED, 'this host died while running the evacuation'


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
    """The compute node uuids of this host, from the database.

    Not from the driver, which would need its ``init_host`` first.
    """
    try:
        return [node.uuid for node in objects.ComputeNodeList.get_all_by_host(
            context, manager.host)]
    except exception.ComputeHostNotFound:
        return []


def _allocations(manager, context, uuid):
    return manager.reportclient.get_allocs_for_consumer(
        context, uuid).get('allocations') or {}


def _describe(manager, context, finding, nodes):
    """Fill in what is on this host and what would be done about it.

    Reads only: the hypervisor, one listing of the instance directory and
    placement.
    """
    instance = finding.instance
    finding.kind, finding.reason = classify(
        finding.host, instance, finding.migration, finding.moves)
    finding.actions, finding.commands = [], []
    if instance is None:
        return
    finding.guest = _guest(manager, instance)
    path = journal.instance_path(finding.host, instance)
    finding.files = {
        '%s/%s' % (path, name): size for name, size in
        journal.directory_contents(path).items()}
    finding.allocation_here = {
        rp: alloc.get('resources', {}) for rp, alloc in
        _allocations(manager, context, instance.uuid).items() if rp in nodes}
    if finding.entry is not None:
        finding.owns_directory, why = journal.owns_directory(
            finding.entry, instance)
    elif finding.migration is not None and journal.shares_directory(
            finding.host, finding.migration.uuid, instance):
        finding.files_shared = True
        why = ('the instance\'s own files: the evacuation found them on '
               'storage shared with %s before spawn' % instance.host)
    else:
        why = ('no journal entry: this host has no record of the '
               'evacuation\'s storage')
    finding.disks = (
        'remove: the evacuation created %s, not on shared storage' % path
        if finding.owns_directory else 'keep: %s' % why)
    if finding.kind == INTERRUPTED:
        finding.actions = [
            'set the instance to ERROR with no task state (if still %s)' %
            instance.task_state]
        if finding.migration.status == 'pre-migrating':
            finding.actions.append('set migration %s to failed' %
                                   finding.migration.uuid)
        finding.actions.append('destroy the guest on %s and %s' % (
            finding.host, 'remove its disks' if finding.owns_directory
            else 'keep its disks'))
        if finding.allocation_here:
            finding.actions.append('remove the allocation against %s' %
                                   finding.host)
        return
    finding.commands = _commands(finding)


def _commands(finding):
    """What an operator would run to end a finding that is only reported."""
    instance = finding.instance
    if finding.kind in (IN_PROGRESS, LIVES_HERE, DELETED) or (
            not finding.left_here()):
        return []
    # Files this evacuation does not own are only ever reported: whether
    # they are on storage shared with the instance's host is for the
    # operator to check.
    steps = runbook.cleanup_steps(
        finding.host, instance.uuid, instance.name,
        task_stuck=(finding.kind == INTERRUPTED or
                    instance.task_state in task_states.rebuild_states),
        guest=finding.guest,
        instance_dir=(journal.instance_path(finding.host, instance)
                      if finding.files and not finding.files_shared
                      else None),
        shared_with=instance.host, providers=finding.allocation_here)
    return [step.command for step in steps]


# Finding.

def _examine_entry(manager, context, entry, nodes):
    finding = Finding(manager.host, entry.instance_uuid, entry=entry)
    _load(context, finding)
    _describe(manager, context, finding, nodes)
    return finding


def _foreign_guests(manager, context, known):
    """Guests on this hypervisor of instances hosted elsewhere.

    nova's start-up destroys the guests of instances evacuated from this
    host; the guest of an evacuation to this host that failed and kept it
    (the cleanup disabled, or its destroy failed) is left, and reported.
    Costs one hypervisor listing and one query, whatever the history.

    :param known: instance uuids already examined
    :returns: the findings to report, and the number of guests looked at
    """
    uuids = set(manager.driver.list_instance_uuids()) - set(known)
    if not uuids:
        return [], 0
    # Sorted by uuid, the query is served by the uuid index alone, whatever
    # the number of instances in the cell (nova's default sort, newest
    # first, walks them all).
    instances = objects.InstanceList.get_by_filters(
        context, {'uuid': sorted(uuids), 'deleted': False},
        expected_attrs=[], sort_keys=['uuid'], sort_dirs=['asc'])
    foreign = [i for i in instances if i.host != manager.host]
    nodes = _nodes(manager, context) if foreign else []
    findings = [_record_finding(manager, context, instance.uuid, nodes)
                for instance in foreign]
    return [f for f in findings if f is not None], len(uuids)


def find(manager, context, guests=True, history=False):
    """The evacuations to this host to end or report.

    :param guests: also report the guests of instances hosted elsewhere
    :param history: also report evacuation records to this host that left
        no journal entry (the audit); never acted on
    :returns: ``(findings, examined)``, examined being the number of
        journal entries, guests and records looked at
    """
    host = manager.host
    entries = journal.entries(host)
    nodes = _nodes(manager, context) if entries or history else []
    findings = [_examine_entry(manager, context, entry, nodes)
                for entry in entries]
    examined = len(entries)
    known = {f.instance_uuid for f in findings}
    if guests:
        reported, count = _foreign_guests(manager, context, known)
        examined += count
        findings.extend(reported)
        known.update(f.instance_uuid for f in reported)
    if history:
        migrations = objects.MigrationList.get_by_filters(
            context, {'host': host, 'migration_type': _EVACUATION},
            sort_keys=['created_at', 'id'], sort_dirs=['desc', 'desc'])
        for migration in migrations:
            examined += 1
            if (migration.dest_compute != host or
                    migration.instance_uuid in known):
                continue
            known.add(migration.instance_uuid)
            finding = _record_finding(manager, context,
                                      migration.instance_uuid, nodes,
                                      migration=migration)
            if finding is not None:
                findings.append(finding)
    return findings, examined


def _record_finding(manager, context, instance_uuid, nodes, migration=None):
    """A finding for what the database alone shows; reported, never acted on.

    :returns: a Finding, or None when nothing of it is left on this host
    """
    finding = Finding(manager.host, instance_uuid)
    if migration is None:
        evacuations = objects.MigrationList.get_by_filters(
            context, {'instance_uuid': instance_uuid,
                      'migration_type': _EVACUATION, 'host': manager.host},
            sort_keys=['created_at', 'id'], sort_dirs=['desc', 'desc'])
        migration = next((m for m in evacuations
                          if m.dest_compute == manager.host), None)
    finding.migration = migration
    _load(context, finding)
    _describe(manager, context, finding, nodes)
    if finding.kind in (LIVES_HERE, DELETED, IN_PROGRESS):
        # nova's own: an incoming operation, or a guest nova reaps.
        if finding.kind != IN_PROGRESS and migration is not None:
            journal.forget_shared_directory(manager.host, migration.uuid)
        return None
    if not finding.left_here():
        return None
    if finding.kind == INTERRUPTED:
        # Interrupted before this host journaled evacuations (stock nova,
        # the patch series, or the cleanup disabled): no proof to act on.
        finding.kind = UNJOURNALED
        finding.reason = ('interrupted, but this host holds no journal entry '
                          'of it')
        finding.actions = []
        finding.commands = _commands(finding)
    return finding


# Acting.

def recover(manager, context, finding):
    """End one interrupted evacuation, if it still is one.

    The finding is read and classified again first. Every step is tried;
    the errors are logged and kept in ``finding.errors``.

    :returns: True if the evacuation was ended and its journal entry removed
    """
    if finding.kind != INTERRUPTED:
        return False
    classified = finding.instance.task_state
    nodes = _nodes(manager, context)
    _load(context, finding)
    _describe(manager, context, finding, nodes)
    instance, migration = finding.instance, finding.migration
    if finding.kind != INTERRUPTED or instance.task_state != classified:
        LOG.warning('Evacuation %s to %s changed since it was examined (%s: '
                    '%s); left alone', finding.migration_uuid, finding.host,
                    finding.kind, finding.reason,
                    instance_uuid=finding.instance_uuid)
        if finding.kind == INTERRUPTED:
            finding.kind = RESET
        finding.commands = _commands(finding)
        return False
    # Taken before the instance is written: what the guest here was made
    # with.
    network_info = instance.get_network_info()
    block_device_info = manager._get_instance_block_device_info(
        context, instance)

    if not _step(finding, 'error', _error_instance, manager, context,
                 classified):
        return False
    if migration.status == 'pre-migrating':
        _step(finding, 'fail-migration', _fail_migration, context)
    else:
        LOG.info('Evacuation %s to %s: migration left %s', migration.uuid,
                 finding.host, migration.status, instance=instance)
    if _step(finding, 'destroy', _destroy, manager, context, network_info,
             block_device_info):
        _step(finding, 'unwind', _unwind, manager, context, network_info)
    if finding.allocation_here:
        _step(finding, 'deallocate', _deallocate, manager, context)
    _step(finding, 'heal', _report_missing_allocation, manager, context)
    if finding.errors:
        return False
    journal.note_shared_directory(finding.entry, finding.instance)
    journal.remove(finding.entry)
    finding.ended = True
    return True


def _step(finding, name, step, *args):
    try:
        step(finding, *args)
    except Exception as error:
        LOG.exception('Ending evacuation %s to %s: %s failed',
                      finding.migration_uuid, finding.host, name,
                      instance_uuid=finding.instance_uuid)
        finding.errors.append('%s: %s' % (name, error))
        return False
    return True


def _error_instance(finding, manager, context, classified):
    """ERROR with no task state, if the task state is still ``classified``.

    The compare-and-swap is the first write: if anything else changed the
    instance since it was read, nothing at all is done.
    """
    instance = finding.instance
    previous = instance.vm_state
    instance.vm_state = vm_states.ERROR
    instance.task_state = None
    try:
        instance.save(expected_task_state=[classified])
    except (exception.UnexpectedTaskStateError,
            exception.InstanceNotFound) as error:
        finding.kind = RESET
        finding.reason = 'changed while being ended: %s' % error
        raise
    compute_utils.add_instance_fault_from_exc(
        context, instance, EvacuationInterrupted(host=finding.host))
    LOG.warning('Evacuation %s to %s was interrupted by the death of its '
                'compute service: instance set from %s/%s to ERROR on %s',
                finding.migration_uuid, finding.host, previous, classified,
                instance.host, instance=instance)
    finding.done.append('set the instance from %s/%s to error/None' % (
        previous, classified))


def _fail_migration(finding, context):
    """``pre-migrating`` to ``failed``; nothing else is ever rewritten.

    nova's objects have no conditional update of a migration: it is read
    again right before it is written, and left alone if it moved on.
    """
    migration = objects.Migration.get_by_id(context, finding.migration.id)
    if migration.status != 'pre-migrating':
        LOG.info('Evacuation %s to %s: migration is now %s, left so',
                 migration.uuid, finding.host, migration.status,
                 instance_uuid=finding.instance_uuid)
        return
    migration.status = 'failed'
    migration.save()
    finding.migration = migration
    LOG.info('Evacuation %s to %s: migration set from pre-migrating to '
             'failed', migration.uuid, finding.host,
             instance_uuid=finding.instance_uuid)
    finding.done.append('set migration %s from pre-migrating to failed' %
                        migration.uuid)


def _destroy(finding, manager, context, network_info, block_device_info):
    instance = finding.instance
    guest = _guest(manager, instance)
    # Proof of ownership, taken now.
    owns, why = journal.owns_directory(finding.entry, instance)
    path = journal.instance_path(finding.host, instance)
    files = journal.directory_contents(path) if owns else {}
    with instance.mutated_migration_context():
        manager.driver.destroy(context, instance, network_info,
                               block_device_info=block_device_info,
                               destroy_disks=owns)
    what = ('destroyed the %s guest' % guest if guest else
            'no guest was defined; disconnected what spawn had connected')
    if owns:
        removed = 'removed %s: %d files, %d bytes' % (
            path, len(files), sum(size or 0 for size in files.values()))
    else:
        removed = 'kept the instance files: %s' % why
    LOG.info('Evacuation %s to %s: %s; %s', finding.migration_uuid,
             finding.host, what, removed, instance=instance)
    finding.done.append('%s; %s' % (what, removed))


def _unwind(finding, manager, context, network_info):
    """Ports back to the source, this host's volume connections released."""
    done, commands = unwind.unwind(manager, context, finding.instance,
                                   finding.instance.host,
                                   network_info=network_info)
    finding.done.extend(done)
    finding.commands.extend(commands)


def _deallocate(finding, manager, context):
    remove = manager.reportclient.remove_provider_tree_from_instance_allocation
    for rp, resources in sorted(finding.allocation_here.items()):
        if not remove(context, finding.instance_uuid, rp):
            raise exception.AllocationDeleteFailed(
                consumer_uuid=finding.instance_uuid,
                error='could not remove the allocation against %s' % rp)
        LOG.info('Evacuation %s to %s: removed the allocation against %s '
                 '(%s)', finding.migration_uuid, finding.host, rp,
                 resources, instance_uuid=finding.instance_uuid)
        finding.done.append('removed the allocation against %s' % rp)


def _report_missing_allocation(finding, manager, context):
    """Say how to heal the instance's allocation if none is left.

    A source that came back first removed its own allocation, taking the
    evacuation for done. Only ``nova-manage placement heal_allocations``
    knows every resource an instance consumes; it needs the API database,
    which a compute host does not reach.
    """
    if _allocations(manager, context, finding.instance_uuid):
        return
    command = runbook.heal_allocations(finding.instance_uuid).command
    LOG.warning('Evacuation %s to %s: the instance has no allocation left; '
                'run: %s', finding.migration_uuid, finding.host, command,
                instance_uuid=finding.instance_uuid)
    finding.commands.append(command)


# The start-up sweep.

def sweep(manager, context, mode):
    """Find, log and, with ``mode`` ``clean``, end interrupted evacuations.

    Never raises: a failure is logged and the compute service starts.

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
        findings, examined = find(manager, context, guests=False)
    except Exception:
        LOG.exception('Could not look for interrupted evacuations to %s',
                      manager.host)
        return []
    if not findings:
        LOG.info('No interrupted evacuation to %s: examined %d journal '
                 'entries', manager.host, examined)
    for finding in findings:
        try:
            _sweep_one(manager, context, finding, mode)
        except Exception:
            LOG.exception('Could not deal with evacuation %s to %s',
                          finding.migration_uuid, manager.host,
                          instance_uuid=finding.instance_uuid)
    # Only reported, so not worth delaying the start: the database is
    # asked about the guests on this hypervisor once the service runs.
    known = {f.instance_uuid for f in findings}
    nova_support.spawn(_report_guests, manager, context, known)
    return findings


def _report_guests(manager, context, known):
    """Report the guests of instances hosted elsewhere, left here.

    The guest of an evacuation that failed while the cleanup was disabled,
    or whose cleanup failed: nothing journaled, so only reported.
    """
    try:
        findings, count = _foreign_guests(manager, context, known)
        for finding in findings:
            _sweep_one(manager, context, finding, 'report')
        LOG.info('Guests on %s of instances hosted elsewhere: %d of %d '
                 'guests, reported', manager.host, len(findings), count)
    except Exception:
        LOG.exception('Could not look at the guests on %s', manager.host)


def _sweep_one(manager, context, finding, mode):
    if finding.kind == INTERRUPTED and mode == 'clean':
        recover(manager, context, finding)
        return
    if finding.entry is not None and (
            finding.kind in (LIVES_HERE, DELETED) or
            (finding.kind != INTERRUPTED and not finding.left_here())):
        LOG.info('Evacuation %s to %s: %s and nothing of it is left here; '
                 'forgotten', finding.migration_uuid, manager.host,
                 finding.reason, instance_uuid=finding.instance_uuid)
        journal.remove(finding.entry)
        return
    if finding.kind == INTERRUPTED:
        LOG.warning('Evacuation %s to %s is interrupted; '
                    'sweep_on_start=clean would: %s',
                    finding.migration_uuid, manager.host,
                    '; '.join(finding.actions),
                    instance_uuid=finding.instance_uuid)
        return
    LOG.warning('Evacuation %s to %s left %s here, kept: %s (%s). By hand, '
                'once checked: %s', finding.migration_uuid, manager.host,
                _summary(finding), finding.reason, finding.kind,
                ' && '.join(finding.commands) or 'nothing to do',
                instance_uuid=finding.instance_uuid)


def _summary(finding):
    parts = []
    if finding.guest:
        parts.append('a %s guest' % finding.guest)
    if finding.files:
        parts.append('%d files' % len(finding.files))
    if finding.allocation_here:
        parts.append('an allocation')
    return ', '.join(parts) or 'nothing'


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

    Nothing is written unless ``delete`` is True; the caller then holds the
    host's lock (:mod:`nova_evac_cleanup.host_lock`).

    :returns: a dict, the report
    """
    findings, examined = find(manager, context, history=True)
    nodes = _nodes(manager, context)
    if delete:
        for finding in findings:
            if finding.kind == INTERRUPTED:
                recover(manager, context, finding)
    report = {
        'host': manager.host,
        'delete': delete,
        'compute_service_up': _service_up(context, manager.host),
        'examined': examined,
        'evacuations': [f.as_dict() for f in findings],
        'orphaned_allocations': _orphaned(manager, context, nodes, findings),
        'missing_allocations': [],
    }
    for finding in findings:
        instance = finding.instance
        if instance is None or instance.deleted:
            continue
        # Without delete: what ending the evacuation would leave.
        left = set(_allocations(manager, context, finding.instance_uuid))
        if not delete and finding.kind == INTERRUPTED:
            left -= set(nodes)
        if not left:
            report['missing_allocations'].append(finding.instance_uuid)
    return report


def _orphaned(manager, context, nodes, findings):
    """Allocations against this host nothing here accounts for."""
    handled = {f.instance_uuid for f in findings}
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
