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

from oslo_log import log as logging

from nova_evac_cleanup import ending
from nova_evac_cleanup import journal
from nova_evac_cleanup import leftovers
from nova_evac_cleanup import ownership
from nova_evac_cleanup import ports
from nova_evac_cleanup import records
from nova_evac_cleanup import rule
from nova_evac_cleanup import sweep

LOG = logging.getLogger(__name__)


class Evacuation(object):
    """One evacuation running on this host: what the cleanup knows of it."""

    def __init__(self, context, entry, migration, may_journal=lambda: True):
        self.context = context
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

    def ending(self, manager):
        """Its :class:`~nova_evac_cleanup.ending.Ending`, from memory."""
        return ending.Ending(
            manager, self.context, self.entry,
            lambda: self.journal(durable=True),
            network_info=self.network_info,
            block_device_info=self.block_device_info, error=self.error)

    # What nova's calls tell, as nova makes them.

    def spawned(self, real, call, args, kwargs):
        """The driver's spawn: journal the directory it makes, then run it.

        :param call: its arguments by name
        """
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

    def failed(self, manager, instance, error):
        """nova's rebuild code raised: the guest, before nova's handler.

        While nova's claim still holds what the guest was made with. A
        failure after spawn returned is read first: nova records the
        instance here only once it returned, and the guest of an instance
        that lives here is its own. Never raises.
        """
        self.error = error
        self.journal()
        if self.spawn not in ('raised', 'returned'):
            return
        if self.spawn == 'returned' and self._lives_here(manager, instance):
            return
        self.before_nova(manager, instance)

    def finish_failed(self, manager, instance, error):
        """nova's ``finish_evacuation`` raised.

        If it had recorded the instance here, the instance lives here:
        what it left is finished. Otherwise the instance is read again
        (nova's handler must not save this host into it) and the guest
        destroyed before nova's handler releases the server. Never raises.
        """
        self.error = error
        self.journal()
        if self._lives_here(manager, instance, finish=True):
            return
        try:
            instance.refresh()
        except Exception:
            LOG.exception('Could not read the instance again',
                          instance=instance)
        self.before_nova(manager, instance)

    def before_nova(self, manager, instance):
        """The guest and the volumes, before nova's handler runs.

        While nova's claim still holds this host's resources and the
        server is still in the evacuation's task state. The volumes only
        while the evacuation is still the server's newest move. Never
        raises.
        """
        steps, state = self.ending(manager), rule.State(instance, None, [])
        if 'destroy' not in self.entry.done:
            steps.step('destroy', state)
        if 'volumes' in self.entry.done:
            return
        try:
            moves = rule.read(self.context, instance.uuid).moves
        except Exception:
            LOG.exception('Could not read the moves of %s', instance.uuid)
            return
        if moves and moves[0].uuid == self.entry.migration_uuid:
            steps.step('volumes', state)

    def _lives_here(self, manager, instance, finish=False):
        """Whether the instance lives here; when in doubt, True.

        If the database cannot be read, the guest is powered off and left:
        left running while its source runs the server again, it would be a
        second writer on its volumes and shared disks.

        :param finish: end what nova's ``finish_evacuation`` left of one
            that lives here
        """
        try:
            state = rule.read(self.context, instance.uuid,
                              self.entry.migration_uuid)
        except Exception:
            LOG.exception('Could not read the instance after its evacuation '
                          'to %s failed: powering its guest off',
                          self.entry.host, instance=instance)
            try:
                manager.driver.power_off(instance)
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

    def after_nova(self, manager, instance, error):
        """nova's handler of the failure returned: end what it left.

        Through the one ending, on the rule's verdict: what nova's handler
        did is found done. Should it have ended with another error than
        the evacuation's, the evacuation's own is the fault. Never raises.
        """
        if self.error is None:
            self.error = error
            self.journal()
        # Never rebound from here: a dead source's agent refuses the binding.
        ports.report_away(manager, self.context, instance,
                          'evacuation to %s failed' % self.entry.host)
        try:
            if self.error is not error:
                LOG.error('Ending the failed evacuation to %s failed: %s',
                          self.entry.host, error, instance=instance)
                records.add_fault(self.context, instance, self.error)
            finding = sweep.settle(
                manager, self.context, self.entry,
                rule.nodes(self.context, self.entry.host),
                ending=self.ending(manager))
            if finding.verdict.decision == rule.KEEP:
                leftovers.end(manager.driver, self.entry, instance)
        except Exception:
            LOG.exception('Could not end the failed evacuation to %s',
                          self.entry.host, instance=instance)

    def end(self, driver, instance):
        """nova's rebuild code returned: end the journal entry.

        If the instance is recorded here, every entry of it here goes;
        otherwise :func:`nova_evac_cleanup.leftovers.end`. Never raises.
        """
        entry = self.entry
        if instance.host != entry.host:
            leftovers.end(driver, entry, instance)
            return
        try:
            for other in journal.entries(entry.host, instance.uuid):
                journal.remove(other)
        except OSError:
            LOG.exception('Could not remove the journal entries of %s, '
                          'which lives on %s now', instance.uuid,
                          entry.host, instance=instance)
