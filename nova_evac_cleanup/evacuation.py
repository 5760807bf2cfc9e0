# SPDX-License-Identifier: Apache-2.0

"""One evacuation running on this host: what the cleanup knows of it.

In memory for the life of nova's ``rebuild_instance``, and journaled for a
start after this process's death; the cleanup of a failed spawn never
depends on a write. Its failure handler is
:class:`~nova_evac_cleanup.handler.FailureHandler`.
"""

from oslo_log import log as logging
from oslo_utils import excutils

from nova_evac_cleanup import ending
from nova_evac_cleanup import handler
from nova_evac_cleanup import journal
from nova_evac_cleanup import nova_support
from nova_evac_cleanup import ownership

LOG = logging.getLogger(__name__)


class Evacuation(handler.FailureHandler):
    """One evacuation running on this host: what the cleanup knows of it."""

    def __init__(self, manager, context, entry, may_journal):
        self.manager, self.context, self.entry = manager, context, entry
        #: whether the journal may be written now (this host's lock)
        self.may_journal = may_journal
        #: nova's answer to "shared?", seen as nova asked the driver
        self.shared = None
        #: the driver's spawn call by argument name, and whether it returned
        self.spawn, self.returned = {}, False
        #: whether a write of its entry failed (and was logged)
        self.unjournaled = False
        #: the error that failed it, as first seen here: the fault's
        self.error = None
        #: the providers nova removed its allocation from, as it did
        self.removed = set()

    def journal(self, durable=False):
        """Write the entry, if this host's lock is held; else memory only.

        One run without the lock is not ``audit --delete``'s to end.
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
            network_info=self.spawn.get('network_info'),
            block_device_info=self.spawn.get('block_device_info'),
            error=self.error)

    # What nova's calls tell, as nova makes them: each hook is given the
    # call's arguments by name and ``run``, which makes the call.

    def spawning(self, call, run):
        """The driver's spawn: journal the directory it makes, then run it."""
        if self.entry.spawned:
            return run()
        self.spawn = call
        self.entry.shared = self.shared
        ownership.claim(self.entry, call['instance'])
        self.journal(durable=True)
        result = run()
        self.returned = True
        return result

    def on_disk(self, call, run):
        """nova's one answer to "are the files shared?", which it acts on."""
        answer = run()
        if not self.entry.spawned:
            self.shared = answer
        return answer

    def removing(self, call, run):
        """nova's removal of its allocation, whose failure it only logs."""
        removed = run()
        if removed is True:
            self.removed.add(call['root_rp_uuid'])
        return removed

    def finishing(self, call, run):
        """The resource tracker's ``finish_evacuation``: end it if it fails."""
        try:
            return run()
        except Exception as error:
            with excutils.save_and_reraise_exception():
                self.failed(call['instance'], error, finish=True)

    def detaching(self, bdms):
        """The source's attachments, journaled before cinder makes ours.

        A death in between leaves the proof of whose the new one is.
        """
        attachments = {bdm.volume_id: bdm.attachment_id for bdm in bdms
                       if bdm.is_volume and bdm.attachment_id}
        if attachments:
            self.entry.detached.update(attachments)
            self.journal(durable=True)


#: nova's calls an evacuation watches: the cost of a change
#: (:mod:`~nova_evac_cleanup.nova_support`), the manager's attribute that
#: makes it, its name, and the hook.
WATCHED = (
    (nova_support.HOOK, 'driver', 'spawn', Evacuation.spawning),
    (nova_support.HOOK, 'driver', 'instance_on_disk', Evacuation.on_disk),
    (nova_support.FINISH, 'rt', 'finish_evacuation', Evacuation.finishing),
    (nova_support.SEEN, 'rt.reportclient',
     'remove_provider_tree_from_instance_allocation', Evacuation.removing))
