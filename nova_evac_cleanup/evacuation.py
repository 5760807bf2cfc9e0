# SPDX-License-Identifier: Apache-2.0

"""One evacuation running on this host: what the cleanup knows of it.

Kept in memory for the life of nova's ``rebuild_instance``, and journaled
(:mod:`nova_evac_cleanup.journal`) for a start that follows this
process's death. Should the journal be unusable, the evacuation goes on
from memory: the cleanup of a failed spawn never depends on a write.
"""

from oslo_log import log as logging
from oslo_utils import excutils

from nova_evac_cleanup import ending
from nova_evac_cleanup import handler
from nova_evac_cleanup import journal
from nova_evac_cleanup import nova_support
from nova_evac_cleanup import ownership

LOG = logging.getLogger(__name__)


class Evacuation(object):
    """One evacuation running on this host: what the cleanup knows of it."""

    def __init__(self, manager, context, entry, may_journal=lambda: True):
        self.manager, self.context = manager, context
        #: whether the journal may be written now (this host's lock)
        self.may_journal = may_journal
        #: its journal entry, in memory whether or not the journal has it
        self.entry = entry
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
        #: the providers nova removed its allocation from, as it did
        self.removed = set()

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
        if self.spawn is not None:
            return real(*args, **kwargs)
        call = nova_support.named('spawn', args, kwargs)
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

    def removing(self, real, *args, **kwargs):
        """nova's removal of its allocation, whose failure it only logs."""
        removed = real(*args, **kwargs)
        if removed is True:
            self.removed.add(nova_support.named(
                'remove_provider_tree_from_instance_allocation', args,
                kwargs)['root_rp_uuid'])
        return removed

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
                handler.failed(self, instance, error, finish=True)


#: nova's calls an evacuation watches: the cost of a nova that changed
#: them (:mod:`~nova_evac_cleanup.nova_support`), whose (an attribute of
#: the compute manager), which, and the hook.
WATCHED = (
    (nova_support.HOOK, 'driver', 'spawn', Evacuation.spawned),
    (nova_support.HOOK, 'driver', 'instance_on_disk', Evacuation.on_disk),
    (nova_support.FINISH, 'rt', 'finish_evacuation', Evacuation.finishing),
    (nova_support.SEEN, 'rt.reportclient',
     'remove_provider_tree_from_instance_allocation', Evacuation.removing))
