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

"""The one ending of an evacuation to this host that did not move the server.

The failure handler, the start-up sweep, ``audit --delete`` and the
refusal of kept leftovers all end an evacuation here: the server held (a
compare-and-swap of its task state to :data:`~nova_evac_cleanup.rule.HOLD`,
once the entry records the ending), then :data:`STEPS`, each safe to run
again and recorded in the entry when done, then the server released last,
from the hold. Before each step the server is read again and must still be
held (:func:`~nova_evac_cleanup.rule.held`): an HA tool's evacuation since
(nova's API checks no task state) is left alone. A process that dies after
any step is finished by the next start; a required step that fails keeps
the hold. What nova's own handler already did is found done by reading.
"""

import collections

from nova.compute import resource_tracker
from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova.db.main import api as db_api
from nova.db.main import models
from nova import exception
from nova import objects
from nova.objects import base as objects_base
from nova import utils
from oslo_log import log as logging

from nova_evac_cleanup import guest
from nova_evac_cleanup import journal
from nova_evac_cleanup import nova_support
from nova_evac_cleanup import ownership
from nova_evac_cleanup import rule
from nova_evac_cleanup import runbook

LOG = logging.getLogger(__name__)


class EvacuationFailedThenInterrupted(exception.NovaException):
    msg_fmt = ('%(error)s (the evacuation to %(host)s failed so, and '
               'nova-compute on %(host)s stopped before it had ended it; it '
               'was ended when it started again)')


class EvacuationInterrupted(exception.NovaException):
    msg_fmt = ('The evacuation to %(host)s was interrupted: nova-compute on '
               '%(host)s stopped before the guest was spawned. The guest '
               'there was cleaned up when it started again.')


def set_status(context, migration, expected, status):
    """The migration from one of ``expected`` to ``status``; whether it was.

    A compare-and-swap in the database where this process reaches it (the
    audit, nova's functional tests). Through nova-conductor, which has no
    conditional update of a migration, the record is read right before it
    is written.
    """
    if objects_base.NovaObject.indirection_api is None:
        with db_api.get_context_manager(context).writer.using(context):
            return bool(context.session.query(models.Migration).filter_by(
                id=migration.id, deleted=0).filter(
                models.Migration.status.in_(expected)).update(
                {'status': status}, synchronize_session=False))
    current = objects.Migration.get_by_id(context, migration.id)
    if current.status not in expected:
        return False
    current.status = status
    current.save()
    return True


@utils.synchronized(resource_tracker.COMPUTE_RESOURCE_SEMAPHORE, fair=True)
def finish(context, instance, migration):
    """What nova's ``finish_evacuation`` left of one that moved it here.

    The migration context dropped, the migration ``done``, under the
    resource tracker's lock as nova does it: its periodic update never
    sees the context gone and the migration in progress.
    """
    _drop_context(instance, migration)
    if migration.status == 'pre-migrating' and set_status(
            context, migration, ('pre-migrating',), 'done'):
        LOG.info('Evacuation %s to %s: migration set to done',
                 migration.uuid, instance.host, instance=instance)


def _drop_context(instance, migration):
    if instance.migration_context is not None and (
            instance.migration_context.migration_id == migration.id):
        instance.drop_migration_context()
        return True
    return False


class Ending(object):
    """One evacuation to this host being ended.

    :param record: writes the entry, after each step; raises if it could
        not (the sweep), or logs it (the failure handler, which goes on
        from memory)
    :param network_info: and ``block_device_info``: what spawn was given;
        None for what the database says (the instance's info cache, the
        volumes the evacuation attached here)
    :param error: the error that failed it, in the process that saw it:
        the fault; None for one found in the journal
    """

    def __init__(self, manager, context, entry, record, network_info=None,
                 block_device_info=None, error=None):
        self.manager, self.context, self.entry = manager, context, entry
        self.host = manager.host
        self.record = record
        self.network_info = network_info
        self.block_device_info = block_device_info
        self.error = error
        #: what was done, and what failed: sentences
        self.done, self.errors = [], []

    def _log(self, text, *args, level='info', instance=None):
        getattr(LOG, level)('Evacuation %s to %s: ' + text,
                            self.entry.migration_uuid, self.host, *args,
                            instance=instance,
                            instance_uuid=self.entry.instance_uuid)

    def _step(self, name, *args):
        """Run step ``name``; record it done. Whether it succeeded."""
        try:
            fact = getattr(self, STEPS[name])(*args)
        except Exception as error:
            LOG.exception('Evacuation %s to %s (%s): ending it, %s failed',
                          self.entry.migration_uuid, self.host,
                          self.entry.error or 'interrupted', name,
                          instance_uuid=self.entry.instance_uuid)
            self.errors.append('%s: %s' % (name, error))
            return False
        if fact:
            self._log('%s', fact)
            self.done.append(fact)
        self.entry.done.append(name)
        self.record()
        return True

    # The steps: each returns what it did, or None.

    def fail_migration(self, state):
        if state.migration.status in rule.RUNNING and set_status(
                self.context, state.migration, rule.RUNNING, 'failed'):
            return 'migration set from %s to failed' % state.migration.status
        return None

    def destroy_guest(self, state, resources_known=True):
        """The guest here destroyed; its disks only with proof, taken now.

        Should the destroy fail, the guest is powered off
        (:func:`nova_evac_cleanup.guest.destroy`) and kept: the step is
        done; one that still runs fails it, and the next start tries again.
        """
        instance = state.instance
        if not self.entry.spawned:
            # Before spawn nothing here is its own.
            return None
        present = guest.state(self.manager.driver, instance)
        owns, why = ownership.proof(self.entry)
        network_info = self.network_info
        if network_info is None:
            network_info = instance.get_network_info()
        try:
            guest.destroy(self.manager.driver, self.context, instance,
                          network_info, self.block_device_info or
                          self._block_device_info(instance), owns,
                          resources_known)
        except Exception:
            if guest.state(self.manager.driver, instance) == 'running':
                raise
            LOG.exception('Evacuation %s to %s (%s): could not destroy its '
                          'guest; it is kept, powered off, and the next '
                          'evacuation of the server here destroys it first',
                          self.entry.migration_uuid, self.host,
                          self.entry.error or 'interrupted',
                          instance_uuid=self.entry.instance_uuid)
            return 'kept the guest, powered off: it could not be destroyed'
        return '%s; %s' % (
            'destroyed the %s guest' % present if present else
            'no guest was defined; disconnected what spawn connected',
            'removed its disks (not on shared storage)' if owns else
            'kept its disks: %s' % why)

    def release_volumes(self, state):
        """This host's connections of the volumes it attached, released.

        Their attachments replaced by reserved ones, as nova's
        ``revert_resize`` does on a resize's destination: the source
        connects them for itself (:mod:`nova_evac_cleanup.giveback`).
        """
        if self.block_device_info is not None and not (
                self.block_device_info.get('block_device_mapping')):
            # Spawn was given no volume: none was connected here.
            return None
        bdms = made_here(self.entry, objects.BlockDeviceMappingList.
                         get_by_instance_uuid(self.context,
                                              self.entry.instance_uuid))
        if not bdms:
            return None
        commands = ' && '.join(runbook.refresh_volumes(
            state.instance.host, state.instance.uuid,
            [bdm.volume_id for bdm in bdms]))
        try:
            terminate = nova_support.helper(self.manager,
                                            '_terminate_volume_connections')
        except nova_support.HelperChanged as error:
            self._log('cannot release the connections of its volumes here '
                      '(%s); once checked, run: %s', error, commands,
                      level='error', instance=state.instance)
            return None
        terminate(self.context, state.instance, bdms)
        self._log('its volumes are reserved for the server; nova-evac-'
                  'cleanup on %s connects them there again as it runs; '
                  'without it, run: %s', state.instance.host, commands,
                  level='warning', instance=state.instance)
        return 'released the connections of volumes %s here' % ', '.join(
            bdm.volume_id for bdm in bdms)

    def remove_allocation(self, state):
        here = rule.allocations_here(self.manager, self.context,
                                     self.entry.instance_uuid,
                                     rule.nodes(self.context, self.host))
        remove = (self.manager.reportclient.
                  remove_provider_tree_from_instance_allocation)
        for rp in sorted(here):
            if not remove(self.context, self.entry.instance_uuid, rp):
                raise exception.AllocationDeleteFailed(
                    consumer_uuid=self.entry.instance_uuid,
                    error='could not remove the allocation against %s' % rp)
        if not here:
            return None
        return 'removed the allocation against %s' % ', '.join(sorted(here))

    def drop_context(self, state):
        if _drop_context(state.instance, state.migration):
            return 'dropped the migration context'
        return None

    def record_fault(self, state):
        if state.faulted:
            return None
        error = self.entry.error
        add_fault(self.context, state.instance, self.error or (
            EvacuationFailedThenInterrupted(host=self.host, error=error)
            if error else EvacuationInterrupted(host=self.host)))
        return 'recorded the fault'

    # The ending.

    def before_nova(self, instance):
        """The failure handler, before nova's: the guest and the volumes.

        While nova's claim still holds this host's resources (the guest
        is destroyed as it was made) and the server is still in the
        evacuation's task state. Never raises.
        """
        state = rule.State(instance, None, [])
        if 'destroy' not in self.entry.done:
            self._step('destroy', state)
        if 'volumes' in self.entry.done:
            return
        # Proof that the evacuation is still the server's newest move.
        try:
            moves = rule.read(self.context, instance.uuid).moves
        except Exception:
            LOG.exception('Could not read the moves of %s', instance.uuid)
            return
        if moves and moves[0].uuid == self.entry.migration_uuid:
            self._step('volumes', state)

    def end(self, state):
        """Hold the server, end it step by step, release it.

        :param state: read after the verdict to end it
        :returns: whether it was ended and the server released: the entry
            is then ended (:func:`nova_evac_cleanup.leftovers.end`)
        """
        entry, instance = self.entry, state.instance
        if entry.phase == journal.RELEASING:
            # Only the release, or only the entry, was left.
            return instance.task_state != rule.HOLD or self._release(
                instance)
        if entry.phase != journal.ENDING:
            # Write-ahead: from here on, the task state is this host's.
            entry.phase, entry.held_from = journal.ENDING, instance.task_state
            self.record()
        if not self._hold(instance):
            return False
        failed = []
        for name in STEPS:
            if name in entry.done:
                continue
            state = rule.read(self.context, entry.instance_uuid,
                              entry.migration_uuid)
            if not rule.held(self.host, state):
                self._log('changed while this host ended it (task state %s); '
                          'left alone from here on',
                          getattr(state.instance, 'task_state', None),
                          level='warning')
                return False
            if not self._step(name, state) and name in REQUIRED:
                failed.append(name)
        if failed:
            self._log('%s failed: the server stays in task state %s until '
                      'the next start of nova-compute or nova-evac-cleanup '
                      'audit --delete ends it', ', '.join(failed), rule.HOLD,
                      level='error')
            return False
        entry.phase = journal.RELEASING
        self.record()
        if not self._release(state.instance):
            return False
        self._report_missing_allocation()
        return True

    def _save(self, instance, expected, task_state, **changes):
        """The server's task state, a compare-and-swap; nothing else.

        Saved through a copy that holds only what changes: the instance
        read before may carry fields nova saves again whatever changed
        (its migration context), which are a newer operation's by now.
        """
        changes['task_state'] = task_state
        server = objects.Instance(context=self.context, uuid=instance.uuid)
        server.obj_reset_changes()
        server.update(changes)
        server.save(expected_task_state=[expected])
        instance.update(changes)

    def _hold(self, instance):
        """The server from the task state it was found in to the hold.

        A compare-and-swap on the task state, which a newer evacuation
        can share (nova's API sets ``rebuilding`` whatever the task
        state): the evacuation is read again right after, and a hold
        taken over a newer one's task state is given back at once.
        """
        found = self.entry.held_from
        if instance.task_state == rule.HOLD:
            return True
        try:
            self._save(instance, found, rule.HOLD)
            state = rule.read(self.context, instance.uuid,
                              self.entry.migration_uuid)
            if not rule.held(self.host, state):
                self._save(instance, rule.HOLD, found)
                raise exception.UnexpectedTaskStateError(
                    instance_uuid=instance.uuid, expected=found,
                    actual='that of a newer operation')
        except Exception as error:
            self.errors.append('hold: %s' % error)
            self._log('could not hold the server (%s); left alone', error,
                      level='warning', instance=instance)
            return False
        self._log('holding the server in task state %s while it is ended',
                  rule.HOLD, instance=instance)
        return True

    def _release(self, instance):
        """ERROR with no task state, if it is still held: the last write."""
        previous = instance.vm_state
        try:
            self._save(instance, rule.HOLD, None, vm_state=vm_states.ERROR)
        except Exception as error:
            self.errors.append('release: %s' % error)
            self._log('could not release the server (%s)', error,
                      level='warning', instance=instance)
            return False
        self.done.append('set the instance from %s/%s to error/None' % (
            previous, rule.HOLD))
        self._log('ended; the server is ERROR on %s', instance.host,
                  level='warning', instance=instance)
        return True

    def _report_missing_allocation(self):
        """Say how to heal the instance's allocation if none is left.

        A source that came back first removed its own, taking the
        evacuation for done. Only ``nova-manage placement
        heal_allocations`` knows every resource an instance consumes; it
        needs the API database.
        """
        uuid = self.entry.instance_uuid
        try:
            if self.manager.reportclient.get_allocs_for_consumer(
                    self.context, uuid).get('allocations'):
                return
        except Exception:
            LOG.exception('Could not read the allocations of %s', uuid)
            return
        self._log('the instance has no allocation left; run: %s',
                  runbook.heal_allocations(uuid).command, level='warning')

    def _block_device_info(self, instance):
        """The database's block device info of what spawn here was given.

        Without the volumes the evacuation did not attach here: their
        connection info is the source's.
        """
        try:
            info = nova_support.helper(
                self.manager, '_get_instance_block_device_info')(
                    self.context, instance)
        except nova_support.HelperChanged as error:
            LOG.error('Destroying the guest without its volumes: %s', error,
                      instance=instance)
            return None
        return dict(info, block_device_mapping=[
            bdm for bdm in info['block_device_mapping']
            if self.entry.spawned and _made(self.entry, bdm['volume_id'],
                                            bdm['attachment_id'])])


#: The steps after the hold, in order, by the names the entry records.
STEPS = collections.OrderedDict([
    ('migration', 'fail_migration'), ('destroy', 'destroy_guest'),
    ('volumes', 'release_volumes'), ('allocation', 'remove_allocation'),
    ('context', 'drop_context'), ('fault', 'record_fault')])
#: Those whose failure keeps the hold (the other steps still run): a
#: running migration would make the source destroy its own guest as it
#: starts, a guest still running here be a second writer on the server's
#: disks and volumes, a connection left here be taken for the source's,
#: an allocation left here fail the next evacuation here. A guest that
#: could not be destroyed but is powered off is kept: it refuses the next
#: evacuation of the server here, which destroys it first
#: (:mod:`nova_evac_cleanup.leftovers`).
REQUIRED = ('migration', 'destroy', 'volumes', 'allocation')


def add_fault(context, instance, error):
    """``error`` as the instance's fault, with its traceback if it has one."""
    compute_utils.add_instance_fault_from_exc(
        context, instance, error, (type(error), error, error.__traceback__))


def made_here(entry, bdms):
    """The volume mappings whose attachment the evacuation replaced.

    Those whose attachment is still the one ``entry.detached`` noted
    before nova's ``detach_block_devices`` deleted it are the source's.
    """
    return [bdm for bdm in bdms if bdm.is_volume and
            _made(entry, bdm.volume_id, bdm.attachment_id)]


def _made(entry, volume_id, attachment_id):
    return entry.detached.get(volume_id, attachment_id) != attachment_id
