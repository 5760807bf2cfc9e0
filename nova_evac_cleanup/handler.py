# SPDX-License-Identifier: Apache-2.0

"""The failure handler of an evacuation running on this host.

The guest and the volumes are ended before nova's handler, while nova's
claim still holds what the guest was made with; what nova's handler left,
after it. Mixed into :class:`~nova_evac_cleanup.evacuation.Evacuation`.
"""

from nova.compute import vm_states
from oslo_log import log as logging

from nova_evac_cleanup import leftovers
from nova_evac_cleanup import ports
from nova_evac_cleanup import records
from nova_evac_cleanup import rule
from nova_evac_cleanup import sweep
from nova_evac_cleanup import updates
from nova_evac_cleanup import volumes

LOG = logging.getLogger(__name__)


class FailureHandler(object):
    """What an evacuation whose rebuild code raised does about it."""

    def failed(self, instance, error, finish=False):
        """nova's rebuild code raised: the guest, before nova's handler.

        Before spawn, nova cleans up, but for a replacement of a volume's
        attachment its detach began (:func:`volumes.finish_detach`). Once
        spawn returned, or in ``finish_evacuation`` (``finish``), a server
        nova saved here keeps its guest; one it did not is read again, lest
        nova's handler save this host into it.
        """
        self.error = error
        self.journal()
        if not (finish or self.entry.spawned):
            if self.entry.detached:
                self._finish_detach(instance)
            return
        if (finish or self.returned) and self._lives_here(instance):
            return
        if finish:
            try:
                instance.refresh()
            except Exception:
                LOG.exception('Could not read the instance again',
                              instance=instance)
        self.before_nova(instance)

    def before_nova(self, instance):
        """The guest, and the volumes while the evacuation is the newest."""
        steps, state = self.ending(), records.State(instance, None, [])
        done = self.entry.done
        given = self.spawn.get('block_device_info')
        if given is not None and not given.get('block_device_mapping'):
            done.append('volumes')  # spawn was given none: none to release
        if 'destroy' not in done:
            steps.step('destroy', state)
        if 'volumes' in done:
            return
        try:
            # A retry accepted meanwhile has made attachments of its own.
            newest = records.newest_move(self.context, instance.uuid)
        except Exception:
            LOG.exception('Could not read the moves of %s', instance.uuid)
            return
        if getattr(newest, 'uuid', None) == self.entry.migration_uuid:
            steps.step('volumes', state)

    def _finish_detach(self, instance):
        """nova's handler leaves an attachment its detach made unnamed."""
        try:
            volumes.finish_detach(self.manager, self.context, self.entry,
                                  lambda: self.journal(durable=True))
        except Exception:
            LOG.exception('Could not end the replacement of the volume '
                          'attachments', instance=instance)

    def _lives_here(self, instance):
        """Whether the instance lives here; when in doubt, True.

        If it cannot be read, the guest is powered off: running, it would be
        a second writer on the server's volumes and shared disks.
        """
        host = self.entry.host
        try:
            state = records.read(self.context, instance.uuid,
                                 self.entry.migration_uuid)
        except Exception:
            LOG.exception('Could not read the instance after its evacuation '
                          'to %s failed: powering its guest off', host,
                          instance=instance)
            try:
                self.manager.driver.power_off(instance)
            except Exception:
                LOG.exception('Could not power off the guest either',
                              instance=instance)
            return True
        if getattr(state.instance, 'host', None) != host:
            return False
        LOG.warning('Evacuation failed after the instance was recorded on '
                    '%s (%s): it lives here', host, self.error,
                    instance=instance)
        return True

    def after_nova(self, instance, error):
        """nova's handler raised ``error``: end what it left, by the rule.

        Returns the error to raise: the evacuation's own, also the fault.
        """
        manager, context, entry = self.manager, self.context, self.entry
        if self.error is None:
            self.error = error
            self.journal()
        ended = False
        try:
            if self.error is not error:
                LOG.error('Ending the failed evacuation to %s failed: %s',
                          entry.host, error, instance=instance)
                updates.add_fault(context, instance, self.error)
            if self.error is error and self._ended_by_nova(instance):
                leftovers.end(manager.driver, entry, instance)
            else:
                finding = sweep.settle(manager, context, entry,
                                       ending=self.ending())
                ended = finding.ended
                if finding.verdict.decision == rule.KEEP:
                    leftovers.end(manager.driver, entry, instance)
        except Exception:
            LOG.exception('Could not end the failed evacuation to %s',
                          entry.host, instance=instance)
        if not ended:
            # Never rebound from here: a dead source's agent refuses the
            # binding. An ending that ran has reported them.
            ports.report_away(manager, context, instance,
                              'evacuation to %s failed' % entry.host)
        return self.error

    def _ended_by_nova(self, instance):
        """Whether nova's handler ended all this host had not.

        Raising the evacuation's own error, it failed the migration, dropped
        the claim and recorded the fault; its decorators saved ERROR with no
        task state (a failed save leaves the fields changed). Its removal
        of the allocation only logs a failure: its answer, seen for each of
        this host's nodes, also tells it ran.
        """
        # nova's own nodes of this host; none known: the rule reads them.
        nodes = {node.uuid for node in getattr(
            self.manager.rt, 'compute_nodes', {}).values()}
        return bool(
            nodes and nodes <= self.removed and
            {'destroy', 'volumes'} <= set(self.entry.done) and
            instance.task_state is None and
            instance.vm_state == vm_states.ERROR and
            not {'task_state', 'vm_state'} & instance.obj_what_changed() and
            instance.host != self.entry.host)
