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

"""One evacuation running on this host: what the cleanup knows of it.

Kept in memory for the life of nova's ``rebuild_instance``, and journaled
(:mod:`nova_evac_cleanup.journal`) for a start that follows this
process's death. Should the journal be unusable, the evacuation goes on
from memory: the cleanup of a failed spawn never depends on a write.
"""

from nova.compute import vm_states
from nova import objects
from oslo_log import log as logging
from oslo_utils import excutils

from nova_evac_cleanup import ending
from nova_evac_cleanup import journal
from nova_evac_cleanup import leftovers
from nova_evac_cleanup import nova_support
from nova_evac_cleanup import ownership
from nova_evac_cleanup import ports
from nova_evac_cleanup import records
from nova_evac_cleanup import rule
from nova_evac_cleanup import sweep

LOG = logging.getLogger(__name__)


class Evacuation(object):
    """One evacuation running on this host: what the cleanup knows of it."""

    def __init__(self, manager, context, entry, migration,
                 may_journal=lambda: True):
        self.manager, self.context = manager, context
        #: whether the journal may be written now (this host's lock)
        self.may_journal = may_journal
        #: its journal entry, in memory whether or not the journal has it
        self.entry = entry
        self.migration = migration
        #: nova's answer to "shared?", seen as nova asked the driver
        self.shared = None
        #: None, then 'entered', 'returned' or 'raised': the driver's spawn
        self.spawn = None
        self.network_info = self.block_device_info = None
        #: whether a write of its entry failed (and was logged)
        self.unjournaled = False
        #: the error that failed it, as first seen here: the fault's
        self.error = None
        #: whether it failed in finish_evacuation, where no handler of
        #: nova's ends it
        self.in_finish = False

    def journal(self, durable=False):
        """Write the entry; on failure go on with it in memory only.

        Only while this host's lock is held: an evacuation run without it
        is not known to ``audit --delete``, which must not end it.
        """
        entry = self.entry
        if self.error is not None:
            entry.error = '%s: %s' % (type(self.error).__name__, self.error)
        if not self.may_journal():
            return
        try:
            journal.write(entry, durable=durable)
        except Exception as error:
            if not self.unjournaled:
                LOG.error('Could not journal evacuation %s (%s): its cleanup '
                          'runs from memory; should this process die, the '
                          'next start will not recover it, and what it '
                          'keeps refuses nothing', entry.migration_uuid,
                          error, instance_uuid=entry.instance_uuid)
            self.unjournaled = True

    def ending(self):
        """Its :class:`~nova_evac_cleanup.ending.Ending`, from memory."""
        return ending.Ending(
            self.manager, self.context, self.entry,
            lambda: self.journal(durable=True),
            network_info=self.network_info,
            block_device_info=self.block_device_info, error=self.error)

    # What nova's calls tell, as nova makes them.

    def spawned(self, real, *args, **kwargs):
        """The driver's spawn: journal the directory it makes, then run it."""
        call = nova_support.spawn_arguments(args, kwargs)
        if self.spawn is not None:
            return real(*args, **kwargs)
        self.network_info = call.get('network_info')
        self.block_device_info = call.get('block_device_info')
        self.entry.shared = self.shared
        ownership.claim(self.entry, call['instance'])
        self.journal(durable=True)
        self.spawn = 'entered'
        try:
            result = real(*args, **kwargs)
        except BaseException:
            self.spawn = 'raised'
            raise
        self.spawn = 'returned'
        return result

    def on_disk(self, real, instance):
        """nova's one answer to "are the files shared?", which it acts on."""
        answer = real(instance)
        if self.spawn is None:
            self.shared = answer
        return answer

    def detaching(self, bdm):
        """The source's attachment, journaled before nova deletes it."""
        if self.spawn is None:
            self.entry.detached[bdm.volume_id] = bdm.attachment_id
            self.journal(durable=True)

    def finishing(self, real, instance, *args, **kwargs):
        """The resource tracker's ``finish_evacuation``: end it if it fails."""
        try:
            return real(instance, *args, **kwargs)
        except Exception as error:
            with excutils.save_and_reraise_exception():
                self.failed(instance, error, finish=True)

    def failed(self, instance, error, finish=False):
        """nova's rebuild code raised: the guest, before nova's handler.

        A failure after spawn returned, or in ``finish_evacuation``, is
        read first: nova records the instance here only then, and the guest
        of an instance that lives here is its own. One that does not is
        read again (nova's handler must not save this host into it). Never
        raises.

        :param finish: it is ``finish_evacuation`` that raised
        """
        self.error, self.in_finish = error, finish
        self.journal()
        if not finish and self.spawn not in ('raised', 'returned'):
            return
        if (finish or self.spawn == 'returned') and self._lives_here(
                instance, finish):
            return
        if finish:
            try:
                instance.refresh()
            except Exception:
                LOG.exception('Could not read the instance again',
                              instance=instance)
        self.before_nova(instance)

    def before_nova(self, instance):
        """The guest, and the volumes while the evacuation is the newest move.

        While nova's claim still holds this host's resources and the server
        is in the evacuation's task state. Never raises.
        """
        steps, state = self.ending(), rule.State(instance, None, [])
        if 'destroy' not in self.entry.done:
            steps.step('destroy', state)
        if 'volumes' in self.entry.done:
            return
        try:
            newest = rule.newest_move(self.context, instance.uuid)
        except Exception:
            LOG.exception('Could not read the moves of %s', instance.uuid)
            return
        if getattr(newest, 'uuid', None) == self.entry.migration_uuid:
            steps.step('volumes', state)

    def _lives_here(self, instance, finish=False):
        """Whether the instance lives here; when in doubt, True.

        If the database cannot be read, the guest is powered off and left:
        running, it would be a second writer on the server's volumes and
        shared disks. With ``finish``, what nova's ``finish_evacuation``
        left of one that lives here is finished.
        """
        try:
            state = rule.read(self.context, instance.uuid,
                              self.entry.migration_uuid)
        except Exception:
            LOG.exception('Could not read the instance after its evacuation '
                          'to %s failed: powering its guest off',
                          self.entry.host, instance=instance)
            try:
                self.manager.driver.power_off(instance)
            except Exception:
                LOG.exception('Could not power off the guest either',
                              instance=instance)
            return True
        current = state.instance
        if current is None or current.host != self.entry.host:
            return False
        LOG.warning('Evacuation failed after the instance was recorded on '
                    '%s (%s): it lives here', self.entry.host, self.error,
                    instance=instance)
        if finish:
            records.finish(self.context, current, state.migration)
        return True

    def after_nova(self, instance, error):
        """nova's handler of the failure returned: end what it left.

        Through the one ending, on the rule's verdict: what nova's handler
        did is found done. Should it have ended with another error than
        the evacuation's, the evacuation's own is the fault. Never raises.
        """
        if self.error is None:
            self.error = error
            self.journal()
        # Never rebound from here: a dead source's agent refuses the binding.
        ports.report_away(self.manager, self.context, instance,
                          'evacuation to %s failed' % self.entry.host)
        try:
            if self.error is not error:
                LOG.error('Ending the failed evacuation to %s failed: %s',
                          self.entry.host, error, instance=instance)
                records.add_fault(self.context, instance, self.error)
            elif self._ended_by_nova():
                leftovers.end(self.manager.driver, self.entry, instance)
                return
            finding = sweep.settle(
                self.manager, self.context, self.entry,
                rule.nodes(self.context, self.entry.host),
                ending=self.ending())
            if finding.verdict.decision == rule.KEEP:
                leftovers.end(self.manager.driver, self.entry, instance)
        except Exception:
            LOG.exception('Could not end the failed evacuation to %s',
                          self.entry.host, instance=instance)

    def _ended_by_nova(self):
        """Whether nova's handler ended what this host had not, so far.

        nova's rebuild code raised the evacuation's own error once this
        host had destroyed the guest and released the volumes: its handler
        failed the migration, removed the allocation, dropped the claim and
        recorded the fault, or another error would have come out of it.
        The task state it reverts last, and only logs a failure to: the
        server is read. ``finish_evacuation`` has no such handler.
        """
        if self.in_finish or not {'destroy', 'volumes'} <= set(
                self.entry.done):
            return False
        current = objects.Instance.get_by_uuid(
            self.context, self.entry.instance_uuid, expected_attrs=[])
        return (current.task_state is None and
                current.vm_state == vm_states.ERROR and
                current.host != self.entry.host)

    def end(self, instance):
        """nova's rebuild code returned: end the journal entry.

        If the instance is recorded here, every entry of it here goes;
        otherwise :func:`nova_evac_cleanup.leftovers.end`. Never raises.
        """
        entry = self.entry
        if instance.host != entry.host:
            leftovers.end(self.manager.driver, entry, instance)
            return
        try:
            for other in journal.entries(entry.host, instance.uuid):
                journal.remove(other)
        except OSError:
            LOG.exception('Could not remove the journal entries of %s, '
                          'which lives on %s now', instance.uuid,
                          entry.host, instance=instance)
