# SPDX-License-Identifier: Apache-2.0

"""The failure handler of an evacuation running on this host.

Once nova's rebuild code raised, the guest and the volumes are ended before
nova's handler, while nova's claim still holds what the guest was made
with; what nova's handler left, after it. Neither raises. Mixed into
:class:`~nova_evac_cleanup.evacuation.Evacuation`, whose state it reads.
"""

from nova.compute import vm_states
from oslo_log import log as logging

from nova_evac_cleanup import leftovers
from nova_evac_cleanup import ports
from nova_evac_cleanup import records
from nova_evac_cleanup import rule
from nova_evac_cleanup import sweep
from nova_evac_cleanup import updates

LOG = logging.getLogger(__name__)


class FailureHandler(object):
    """What an evacuation whose rebuild code raised does about it."""

    def failed(self, instance, error, finish=False):
        """nova's rebuild code raised: the guest, before nova's handler.

        Before spawn, nova cleans up. After spawn returned, or in
        ``finish_evacuation`` (``finish``), the instance is read first:
        one nova recorded here keeps its guest, one that it did not is read
        again (nova's handler must not save this host into it).
        """
        self.error = error
        self.journal()
        if not (finish or self.entry.spawned):
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
        """The guest, and the volumes while the evacuation is the newest move.

        While nova's claim still holds this host's resources.
        """
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

    def _lives_here(self, instance):
        """Whether the instance lives here; when in doubt, True.

        If it cannot be read, the guest is powered off and left: running, it
        would be a second writer on the server's volumes and shared disks.
        One that does is finished after nova's handler, by the rule.
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

        Returns the error to raise: the evacuation's own, which is also the
        fault, should nova's handler have raised another.
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
        """Whether nova's handler ended what this host had not, so far.

        It raised the evacuation's own error once the guest and the volumes
        were done here: it failed the migration, dropped the claim and
        recorded the fault. Its decorators saved the server in ERROR with no
        task state (a failed save is only logged: then the fields are still
        changed). Its removal of the allocation only logs a failure: its
        answer was seen for each of this host's nodes, which also tells it
        ran (``finish_evacuation`` has no such handler).
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
