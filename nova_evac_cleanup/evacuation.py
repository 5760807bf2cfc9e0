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

from nova_evac_cleanup import journal
from nova_evac_cleanup import leftovers
from nova_evac_cleanup import nova_support
from nova_evac_cleanup import ownership

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
        #: the identity of the instance directory it created here
        self.made = None
        #: None, then 'entered', 'returned' or 'raised': the driver's spawn
        self.spawn = None
        self.network_info = self.block_device_info = None
        #: whether its failure was ended where it was seen (finish_evacuation)
        self.ended = False
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

    def claim(self, instance):
        """Record nova's answer; create the directory if not shared.

        A directory that exists already although nova found the files not
        on shared storage (a share that was unreachable when nova looked,
        or a leftover) turns the answer into "unknown": its disks are kept
        whatever happens. Never raises.
        """
        entry = self.entry
        entry.shared_storage, entry.spawning = self.shared, True
        path = ownership.instance_path(instance.uuid)
        if entry.shared_storage is False and os.path.lexists(path):
            LOG.warning('The instance directory %s exists although nova found '
                        'the files not on shared storage: they are kept',
                        path, instance=instance)
            entry.shared_storage = None
        keep = None
        if entry.shared_storage is False:
            # On a nova that would delete the vTPM secret with the disks,
            # they are not the evacuation's to remove.
            keep = nova_support.vtpm_hazard(instance)
            entry.claim = {'path': path, 'keep': keep} if keep else {
                'path': path}
        self.journal(durable=True)
        if entry.claim and not keep:
            try:
                self.made = ownership.claim(entry)
            except Exception as error:
                LOG.warning('Could not create the instance directory %s (%s):'
                            ' it is not the evacuation\'s', path, error,
                            instance=instance)
                entry.claim, entry.shared_storage = None, None
                self.journal()

    def end(self, driver, instance):
        """nova's rebuild code returned: end the journal entry.

        If the instance is recorded here the directory is its own: the
        marker goes, and so does every journal entry of the instance
        here. Otherwise :func:`nova_evac_cleanup.leftovers.end` removes
        the entry or records what is kept. Never raises.
        """
        entry = self.entry
        if instance.host != entry.host:
            leftovers.end(driver, entry, instance, self.made)
            return
        try:
            ownership.release(entry)
            for other in journal.entries_of(entry.host, instance.uuid):
                journal.remove(other)
        except OSError:
            LOG.exception('Could not remove the journal entries of %s, '
                          'which lives on %s now', instance.uuid,
                          entry.host, instance=instance)
