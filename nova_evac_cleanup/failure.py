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

"""The failure handler: what a failed evacuation leaves, ended on this host.

Called by the compute manager (:mod:`nova_evac_cleanup.manager`) with what
it knows of the evacuation in memory: the guest of a failed spawn
destroyed (:func:`destroy`), or of one that failed after spawn
(:func:`destroy_after_spawn`), and what nova's own handler of the failure
could not do done again (:func:`after_nova`). Nothing here raises: the
error the operator must see is the evacuation's own.
"""

import functools

from nova.compute import task_states
from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova import exception
from nova import objects
from oslo_log import log as logging

from nova_evac_cleanup import guest
from nova_evac_cleanup import leftovers
from nova_evac_cleanup import ownership
from nova_evac_cleanup import ports
from nova_evac_cleanup import unwind

LOG = logging.getLogger(__name__)


def after_nova(manager, context, instance, evacuation, error):
    """nova's rebuild code raised: finish what nova's handler did not.

    nova's handler fails the migration, removes this host's allocation,
    puts the server into ERROR and records the fault of the error its
    rebuild code ended with. When that handling failed in turn (or
    came too early: the evacuation failed before nova's code began),
    it is done here: the original error recorded as the fault, the
    migration ``failed``, this host's allocation removed, the server
    released. Never raises.
    """
    end = functools.partial(leftovers.end, manager.driver, evacuation.entry,
                            instance, evacuation.made)
    # Never rebound from here: a dead source's agent refuses the binding.
    ports.report_away(manager, context, instance,
                      'evacuation to %s failed' % manager.host)
    # A save of nova's handler failed if its changes are still unsaved.
    held = {'vm_state', 'task_state'} & instance.obj_what_changed()
    if evacuation.error is error:
        if held:
            release_if_held(manager, context, instance, evacuation)
        return end()
    original = evacuation.error or error
    if evacuation.error is not None:
        LOG.error('Ending the failed evacuation to %s failed: %s',
                  manager.host, error, instance=instance)
        try:
            compute_utils.add_instance_fault_from_exc(
                context, instance, original,
                (type(original), original, original.__traceback__))
        except Exception:
            LOG.exception('Could not record the error of the failed '
                          'evacuation to %s', manager.host,
                          instance=instance)
    if recorded_here(manager, context, instance) is False and (
            fail_migration(manager, context, instance, evacuation)):
        remove_allocation(manager, context, instance)
    release_if_held(manager, context, instance, evacuation)
    end()


def destroy(manager, context, instance, evacuation):
    """Destroy the guest a failed evacuation left on this host.

    Its disks go only with proof, taken now, that their directory is
    the evacuation's own. Once the guest is destroyed, the volume
    connections the evacuation made here are released. Never raises:
    the caller re-raises the error the operator must see.
    """
    destroy_disks, why = ownership.proof(evacuation.entry,
                                         evacuation.made)
    try:
        guest.destroy(manager.driver, context, instance,
                      evacuation.network_info,
                      evacuation.block_device_info, destroy_disks)
    except Exception:
        LOG.exception('Evacuation to %s failed (%s), and so did the '
                      'cleanup of its guest; the guest is kept, powered '
                      'off, and the next evacuation of the instance to '
                      '%s destroys it first', manager.host,
                      evacuation.error, manager.host, instance=instance)
        return
    attached = evacuation.block_device_info
    try:
        # Only what spawn was given was connected here: without a volume
        # there, there is nothing to release (and nothing to read).
        if attached is None or attached.get('block_device_mapping'):
            unwind.unwind(manager, context, instance, instance.host,
                          evacuation.entry)
    except Exception:
        LOG.exception('Could not release the volume connections of the '
                      'failed evacuation on %s', manager.host,
                      instance=instance)
    LOG.info('Evacuation failed: destroyed the guest on %s and %s',
             manager.host, 'removed its disks (not on shared storage)'
             if destroy_disks else 'kept its disks: %s' % why,
             instance=instance)


def destroy_after_spawn(manager, context, instance, evacuation):
    """Destroy the running guest of an evacuation failed after spawn.

    It failed before nova recorded the instance here: saving it with
    its expected task state (reset by an operator, being deleted),
    bringing a stopped instance back to its state, a notification or
    ``finish_evacuation``. nova puts the instance into ERROR on its
    source: left running here, the guest would be a second writer on
    its volumes, and on shared storage its disks. Never raises.
    """
    recorded = recorded_here(manager, context, instance)
    if recorded is False:
        LOG.warning('Evacuation failed after spawn (%s): destroying the '
                    'running guest on %s', evacuation.error, manager.host,
                    instance=instance)
        destroy(manager, context, instance, evacuation)
    elif recorded:
        LOG.warning('Evacuation failed after the instance was recorded '
                    'on %s: its guest there is left running', manager.host,
                    instance=instance)


def recorded_here(manager, context, instance):
    """True, False (also when deleted), or None when it cannot be read."""
    try:
        return objects.Instance.get_by_uuid(
            context, instance.uuid, expected_attrs=[]).host == manager.host
    except exception.InstanceNotFound:
        return False
    except Exception:
        LOG.exception('Could not read the instance after its evacuation '
                      'to %s failed', manager.host, instance=instance)
        return None


def fail_migration(manager, context, instance, evacuation):
    """A migration in progress to ``failed``; whether it is over."""
    try:
        migration = objects.Migration.get_by_id(
            context, evacuation.migration.id)
        if migration.status in ('accepted', 'pre-migrating'):
            manager._set_migration_status(migration, 'failed')
    except Exception:
        LOG.exception('Could not set the evacuation to %s to failed',
                      manager.host, instance=instance)
        return False
    return True


def remove_allocation(manager, context, instance):
    try:
        node = manager._get_compute_info(context, manager.host)
        manager.rt.delete_allocation_for_evacuated_instance(
            context, instance, node.hypervisor_hostname,
            node_type='destination')
    except Exception:
        LOG.exception('Could not remove the allocation of the failed '
                      'evacuation against %s', manager.host,
                      instance=instance)


def release_if_held(manager, context, instance, evacuation):
    """Put the server into ERROR if nova's handler could not.

    A compare-and-swap on the task state it still has, only while it
    is not recorded here and its migration is over. Never raises.
    """
    try:
        current = objects.Instance.get_by_uuid(
            context, instance.uuid, expected_attrs=[])
        if (current.host == manager.host or
                current.task_state not in task_states.rebuild_states):
            return
        migration = objects.Migration.get_by_id(
            context, evacuation.migration.id)
        if migration.status not in ('failed', 'error'):
            return
        held = current.task_state
        current.vm_state, current.task_state = vm_states.ERROR, None
        current.save(expected_task_state=[held])
    except Exception:
        LOG.exception('Could not put the instance into ERROR after its '
                      'evacuation to %s failed', manager.host,
                      instance=instance)
        return
    LOG.warning('Evacuation to %s failed and nova could not put the '
                'instance into ERROR: done (it was %s)', manager.host, held,
                instance=instance)
