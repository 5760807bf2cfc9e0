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

"""The steps that end an interrupted evacuation, each one that can run again.

:func:`nova_evac_cleanup.recovery.recover` runs them in the order of
:data:`STEPS`, the server held, reading it again before each, then
:func:`release`. Each takes the manager, the context, the finding and
what the guest here was made with.
"""

from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova import exception
from nova import objects
from oslo_log import log as logging

from nova_evac_cleanup import classification
from nova_evac_cleanup import guest
from nova_evac_cleanup import leftovers
from nova_evac_cleanup import ownership
from nova_evac_cleanup import unwind

LOG = logging.getLogger(__name__)


class EvacuationFailedThenInterrupted(exception.NovaException):
    msg_fmt = ('%(error)s (the evacuation to %(host)s failed so, and '
               'nova-compute on %(host)s stopped before it had ended it; it '
               'was ended when it started again)')


class EvacuationInterrupted(exception.NovaException):
    msg_fmt = ('The evacuation to %(host)s was interrupted: nova-compute on '
               '%(host)s stopped before the guest was spawned. The guest '
               'there was cleaned up when it started again.')


def fail_migration(manager, context, finding, network_info,
                   block_device_info):
    """A migration in progress to ``failed``; nothing else is rewritten.

    ``accepted`` or ``pre-migrating``: the evacuation died before or
    during its rebuild code.

    nova's objects have no conditional update of a migration: it is read
    again right before it is written, and left alone if it moved on.
    """
    migration = objects.Migration.get_by_id(context, finding.migration.id)
    finding.migration = migration
    if migration.status not in ('accepted', 'pre-migrating'):
        LOG.info('Evacuation %s to %s: migration left %s', migration.uuid,
                 finding.host, migration.status,
                 instance_uuid=finding.instance_uuid)
        return
    previous = migration.status
    migration.status = 'failed'
    migration.save()
    LOG.info('Evacuation %s to %s: migration set from %s to failed',
             migration.uuid, finding.host, previous,
             instance_uuid=finding.instance_uuid)
    finding.done.append('set migration %s from %s to failed' % (
        migration.uuid, previous))


def destroy(manager, context, finding, network_info, block_device_info):
    instance = finding.instance
    present = leftovers.guest_state(manager.driver, instance)
    # Proof of ownership, taken now.
    owns, why = ownership.proof(finding.entry)
    path = ownership.instance_path(instance.uuid)
    files = ownership.contents(path) if owns else {}
    guest.destroy(manager.driver, context, instance, network_info,
                  block_device_info, owns)
    what = ('destroyed the %s guest' % present if present else
            'no guest was defined; disconnected what spawn had connected')
    if owns:
        removed = 'removed %s: %d files, %d bytes' % (
            path, len(files), sum(size or 0 for size in files.values()))
    else:
        removed = 'kept the instance files: %s' % why
    LOG.info('Evacuation %s to %s: %s; %s', finding.migration_uuid,
             finding.host, what, removed, instance=instance)
    finding.done.append('%s; %s' % (what, removed))


def unwind_volumes(manager, context, finding, network_info, block_device_info):
    """This host's volume connections released."""
    done, commands = unwind.unwind(manager, context, finding.instance,
                                   finding.instance.host, finding.entry)
    finding.done.extend(done)
    finding.commands.extend(commands)


def deallocate(manager, context, finding, network_info=None,
               block_device_info=None):
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


def drop_context(manager, context, finding, network_info,
                 block_device_info):
    """The migration context dropped, as nova's ``MoveClaim.abort`` does.

    Only while it names the migration: the server is held, and a newer
    move's context is another's.
    """
    instance = finding.instance
    if instance.migration_context is not None and (
            instance.migration_context.migration_id == finding.migration.id):
        instance.drop_migration_context()
        finding.done.append('dropped the migration context')


def record_fault(manager, context, finding, network_info,
                 block_device_info):
    """The fault: the evacuation's own error if it had one, or its death."""
    error = finding.entry.error
    compute_utils.add_instance_fault_from_exc(
        context, finding.instance,
        EvacuationFailedThenInterrupted(host=finding.host, error=error)
        if error else EvacuationInterrupted(host=finding.host))


#: The steps that end an interrupted evacuation, in order: name, function,
#: and whether the server must stay claimed when it fails.
STEPS = (
    ('migration', fail_migration, True),
    ('destroy', destroy, True),
    ('volumes', unwind_volumes, False),
    ('allocation', deallocate, True),
    ('context', drop_context, False),
    ('fault', record_fault, False),
)


def release(manager, context, finding, classified):
    """ERROR with no task state, if the task state is still ``classified``.

    The last write: a compare-and-swap, so that an operator's action since
    the instance was read is never overwritten.
    """
    instance = finding.instance
    previous = instance.vm_state
    instance.vm_state = vm_states.ERROR
    instance.task_state = None
    try:
        instance.save(expected_task_state=[classified])
    except (exception.UnexpectedTaskStateError,
            exception.InstanceNotFound) as error:
        finding.kind = classification.RESET
        finding.reason = 'changed while being ended: %s' % error
        raise
    LOG.warning('Evacuation %s to %s was interrupted by the death of its '
                'compute service: instance set from %s/%s to ERROR on %s',
                finding.migration_uuid, finding.host, previous, classified,
                instance.host, instance=instance)
    finding.done.append('set the instance from %s/%s to error/None' % (
        previous, classified))
