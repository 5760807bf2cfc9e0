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
with what it knows in memory: its cleanup of a failed spawn never depends
on a write to disk.
"""

import os

from oslo_log import log as logging

from nova_evac_cleanup import ending
from nova_evac_cleanup import journal
from nova_evac_cleanup import leftovers
from nova_evac_cleanup import nova_support
from nova_evac_cleanup import ownership
from nova_evac_cleanup import ports
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
        #: nova's answer to "shared?", handed to nova, which checks it
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

    # The failure handler: what the manager calls when it failed.

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
        self.ending(manager).before_nova(instance)

    def finish_failed(self, manager, instance, error):
        """nova's ``finish_evacuation`` raised.

        If it had recorded the instance here, the instance lives here:
        what it left is finished. Otherwise the evacuation failed after
        spawn: the instance is read again (nova's handler must not save
        this host into it) and the guest destroyed before nova's handler
        releases the server. Never raises.
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
        self.ending(manager).before_nova(instance)

    def _lives_here(self, manager, instance, finish=False):
        """Whether the instance lives here; when in doubt, True.

        The database says so; if it cannot be read, the guest is powered
        off and left. An evacuation that failed after spawn returned has a
        running guest here: left running while its source runs the server
        again, it would be a second writer on its volumes and shared disks.

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
            ending.finish(self.context, current, state.migration)
        return True

    def after_nova(self, manager, instance, error):
        """nova's handler of the failure returned: end what it left.

        Through the one ending, on the rule's verdict: what nova's handler
        did is found done. Should it have ended with another error than
        the evacuation's, the evacuation's own is recorded as the fault.
        Never raises.
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
                ending.add_fault(self.context, instance, self.error)
            finding = sweep.settle(
                manager, self.context, self.entry,
                rule.nodes(self.context, self.entry.host),
                ending=self.ending(manager))
            if finding.verdict.decision == rule.KEEP:
                leftovers.end(manager.driver, self.entry, instance)
        except Exception:
            LOG.exception('Could not end the failed evacuation to %s',
                          self.entry.host, instance=instance)

    def claim(self, instance):
        """Record nova's answer, and the directory spawn makes if its own.

        Journaled, fsynced, before spawn (:mod:`nova_evac_cleanup.ownership`).
        A directory that exists already although nova found the files not
        on shared storage (a share that was unreachable when nova looked,
        or a leftover) turns the answer into "unknown": its disks are kept
        whatever happens. Never raises.
        """
        entry = self.entry
        entry.shared, entry.spawned = self.shared, True
        path = ownership.instance_path(instance.uuid)
        if entry.shared is False and os.path.lexists(path):
            LOG.warning('The instance directory %s exists although nova found '
                        'the files not on shared storage: they are kept',
                        path, instance=instance)
            entry.shared = None
        # On a nova that would delete the vTPM secret with the disks, they
        # are not the evacuation's to remove.
        keep = entry.shared is False and nova_support.vtpm_hazard(instance)
        if keep:
            LOG.warning('The disks of the evacuation to %s are kept whatever '
                        'happens: %s', entry.host, keep, instance=instance)
        elif entry.shared is False:
            try:
                entry.claim, entry.fsid = path, ownership.filesystem(path)
            except OSError as error:
                LOG.warning('Could not read where %s will be (%s): its disks '
                            'are kept', path, error, instance=instance)
                entry.claim, entry.shared = None, None
        self.journal(durable=True)

    def end(self, driver, instance):
        """nova's rebuild code returned: end the journal entry.

        If the instance is recorded here, every journal entry of the
        instance here goes. Otherwise :func:`nova_evac_cleanup.leftovers.end`
        removes the entry or records what is kept. Never raises.
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
