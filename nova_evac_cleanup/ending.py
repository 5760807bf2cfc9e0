# SPDX-License-Identifier: Apache-2.0

"""The one ending of an evacuation to this host that did not move the server.

The server is held (task state :data:`~nova_evac_cleanup.rule.HOLD`) from
the first of :data:`STEPS` to the release; one evacuated since is left alone.
Each step returns what it did, a :class:`Fact` put in words in one place.
"""

import collections

from nova.compute import vm_states
from nova import exception
from oslo_log import log as logging

from nova_evac_cleanup import guest
from nova_evac_cleanup import journal
from nova_evac_cleanup import records
from nova_evac_cleanup import rule
from nova_evac_cleanup import runbook
from nova_evac_cleanup import updates
from nova_evac_cleanup import volumes

LOG = logging.getLogger(__name__)


class Fact(collections.namedtuple('Fact', 'step subject')):
    """What step ``step`` did; ``subject``: the value it returned."""

    __slots__ = ()

    def __str__(self):
        step, subject = self
        if step != 'destroy':
            return _WORDS[step].format(
                ', '.join(subject) if isinstance(subject, list) else subject)
        state, kept = subject  # guest.end's
        return '%s; %s' % (
            'kept the guest, powered off' if state == guest.POWERED_OFF else
            'destroyed the %s guest' % state if state else
            'no guest was defined; disconnected what spawn connected',
            'kept its disks: %s' % kept if kept else
            'removed its disks (not on shared storage)')


class Ending(object):
    """One evacuation to this host being ended, with what spawn was given."""

    def __init__(self, manager, context, entry, record=None,
                 network_info=None, block_device_info=None, error=None):
        self.manager, self.context, self.entry = manager, context, entry
        self.host = manager.host
        self.record = record or (lambda: journal.write(entry, durable=True))
        self.network_info = network_info
        self.block_device_info = block_device_info
        self.error, self.done, self.errors = error, [], []

    def _log(self, text, *args, level='info', instance=None):
        getattr(LOG, level)('Evacuation %s to %s: ' + text,
                            self.entry.migration_uuid, self.host, *args,
                            instance=instance,
                            instance_uuid=self.entry.instance_uuid)

    def step(self, name, state):
        """Run step ``name``, recorded once done: whether it succeeded."""
        try:
            what = getattr(self, STEPS[name])(state)
        except Exception as error:
            self._log('(%s) ending it, %s failed', self.entry.error or
                      'interrupted', name, level='exception')
            self.errors.append('%s: %s' % (name, error))
            return False
        if what:
            fact = what if isinstance(what, Fact) else Fact(name, what)
            self._log('%s', fact)
            self.done.append(fact)
        self.entry.done.append(name)
        self.record()
        return True

    # The steps, each safe to run again, return what they did, or nothing.

    def fail_migration(self, state):
        if state.migration.status in rule.RUNNING and updates.set_status(
                self.context, state.migration, rule.RUNNING, 'failed'):
            return state.migration.status

    def destroy_guest(self, state):
        # Before spawn nothing here is its own.
        return self.entry.spawned and guest.end(
            self.manager, self.context, state.instance, self.entry,
            self.network_info, self.block_device_info)

    def release_volumes(self, state):
        return volumes.release(self.manager, self.context, state.instance,
                               self.entry, self.record)

    def remove_allocation(self, state):
        uuid, client = self.entry.instance_uuid, self.manager.reportclient
        here, others = records.allocations(client, self.context, uuid,
                                           self.host)
        if rule.moves_home(here, others) and updates.move_allocation(
                self.context, client, state.instance, *here):
            return Fact('moved', sorted(here))
        roots = set(here) & set(records.nodes(self.context, self.host))
        for rp in sorted(roots or here):  # nova's removal takes the tree
            if not client.remove_provider_tree_from_instance_allocation(
                    self.context, uuid, rp):
                raise exception.AllocationDeleteFailed(
                    consumer_uuid=uuid,
                    error='could not remove the allocation against %s' % rp)
        if not others:
            self._log('the instance has no allocation left; run: %s',
                      runbook.heal_allocations(uuid).command, level='warning')
        return sorted(here)

    def drop_context(self, state):
        return updates.drop_context(state.instance, state.migration)

    def record_fault(self, state):
        if not state.faulted:
            updates.add_fault(self.context, state.instance, self.error or (
                updates.EvacuationFailedThenInterrupted(
                    host=self.host, error=self.entry.error)
                if self.entry.error else
                updates.EvacuationInterrupted(host=self.host)))
            return True

    def end(self, state):
        """Hold, end and release the server: whether it did."""
        entry, instance = self.entry, state.instance
        if entry.phase == journal.RELEASING:
            # Only the release, or only the entry, was left.
            return instance.task_state != rule.HOLD or self._release(instance)
        if entry.phase != journal.ENDING:
            # Write-ahead: from here on, the task state is this host's.
            entry.phase, entry.held_from = journal.ENDING, instance.task_state
            self.record()
        if not self._hold(instance):
            return False
        failed = []
        for name in [name for name in STEPS if name not in entry.done]:
            state = records.read(self.context, entry.instance_uuid,
                                 entry.migration_uuid)
            if not rule.held(self.host, state):
                self._log('changed while this host ended it (task state %s); '
                          'left alone from here on',
                          getattr(state.instance, 'task_state', None),
                          level='warning')
                return False
            if not self.step(name, state) and name in REQUIRED:
                failed.append(name)
        if failed:
            self._log('%s failed: the server stays in task state %s until '
                      'the next start of nova-compute or nova-evac-cleanup '
                      'audit --delete ends it', ', '.join(failed), rule.HOLD,
                      level='error')
            return False
        entry.phase = journal.RELEASING
        self.record()
        return self._release(state.instance)

    def _hold(self, instance):
        # Given back at once if a newer operation shares the task state it
        # was found in (nova's API sets ``rebuilding`` whatever it was).
        if instance.task_state == rule.HOLD:
            return True
        found = self.entry.held_from
        try:
            updates.set_task_state(self.context, instance, found, rule.HOLD)
            state = records.read(self.context, instance.uuid,
                                 self.entry.migration_uuid)
            if not rule.held(self.host, state):
                updates.set_task_state(self.context, instance, rule.HOLD,
                                       found)
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
            updates.set_task_state(self.context, instance, rule.HOLD, None,
                                   vm_state=vm_states.ERROR)
        except Exception as error:
            self.errors.append('release: %s' % error)
            self._log('could not release the server (%s)', error,
                      level='warning', instance=instance)
            return False
        self.done.append(Fact('release', previous))
        self._log('ended; the server is ERROR on %s', instance.host,
                  level='warning', instance=instance)
        return True


#: The steps after the hold, in order, by the names the entry records.
STEPS = {'migration': 'fail_migration', 'destroy': 'destroy_guest',
         'volumes': 'release_volumes', 'allocation': 'remove_allocation',
         'context': 'drop_context', 'fault': 'record_fault'}
#: Those whose failure keeps the hold (the rest still run): a migration
#: left running makes the source destroy its guest when it starts; a guest
#: or a connection here is a second writer on the server's disks; an
#: allocation here fails the next evacuation here.
REQUIRED = ('migration', 'destroy', 'volumes', 'allocation')
_WORDS = {'migration': 'migration set from {} to failed',
          'volumes': 'released the connections of volumes {} here',
          'allocation': 'removed the allocation against {}',
          'moved': 'moved the allocation against {} to the server\'s node',
          'context': 'dropped the migration context',
          'fault': 'recorded the fault',
          'release': 'set the instance from {}/%s to error/None' % rule.HOLD}
