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

"""A nova compute manager that cleans up after a failed evacuation.

When an instance is evacuated to this host and ``driver.spawn`` fails, nova
puts the instance into ERROR on its source host, marks the migration failed
and removes this host's allocation, but leaves on this host what spawn had
made: the guest (defined, maybe running), the instance directory and its
disks. The next evacuation to this host then fails with ``InstanceExists``
or, on non-shared storage, takes the leftover directory for shared storage
and boots the stale, partial disk.

:class:`EvacuateCleanupMixin` destroys that guest right after the failed
spawn. It only hooks around nova's own methods: nova still runs every line
of its rebuild code, so fixes nova makes there are kept.
"""

import contextlib
import sys

from nova.compute import manager as nova_manager
from nova.compute import task_states
from nova.compute import utils as compute_utils
from nova.compute import vm_states
from nova import context as nova_context
from nova import exception
from nova import objects
from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import excutils

from nova_evac_cleanup import conf
from nova_evac_cleanup import finish
from nova_evac_cleanup import guest
from nova_evac_cleanup import host_lock
from nova_evac_cleanup import journal
from nova_evac_cleanup import leftovers
from nova_evac_cleanup import nova_support
from nova_evac_cleanup import ownership
from nova_evac_cleanup import shared_storage
from nova_evac_cleanup import spawn_failure
from nova_evac_cleanup import sweep
from nova_evac_cleanup import unwind

CONF = cfg.CONF
conf.register_opts(CONF)
LOG = logging.getLogger(__name__)


def _named(method, args, kwargs):
    """The arguments of a call of nova's ``method``, all by name.

    Only used once :func:`nova_support.problems` found nova's parameters
    to be the expected ones.
    """
    named = dict(zip(nova_support.OVERRIDDEN[method][1:], args))
    named.update(kwargs)
    return named


class _Evacuation(object):
    """One evacuation running on this host: what the cleanup needs."""

    def __init__(self, entry, migration):
        #: its journal entry, on this host's disk until it ends
        self.entry = entry
        self.migration = migration
        #: whether the driver's spawn returned, and what it was given: the
        #: guest then runs here and a later failure must destroy it
        self.spawned = False
        self.network_info = None
        self.block_device_info = None
        #: whether nova's _do_rebuild_instance returned
        self.rebuilt = False
        #: the error that failed the evacuation (spawn's, or a later
        #: step's), as first seen here: the one the fault must record
        self.error = None


class EvacuateCleanupMixin(object):
    """Destroy the guest of an evacuation whose spawn failed on this host.

    Mix this in before nova's ``ComputeManager``. On an evacuation
    (``rebuild_instance`` with ``recreate=True``) whose ``driver.spawn``
    raises in ``_rebuild_default_impl``, it calls ``driver.destroy`` with the
    block device info spawn was given, on this host's view of the instance
    (:mod:`nova_evac_cleanup.guest`), and with ``destroy_disks`` True only
    when nova had found, before spawning, that the disks are not on shared
    storage and the evacuation created their directory itself
    (:mod:`nova_evac_cleanup.ownership`). The spawn error is then re-raised
    unchanged; a failing destroy is logged and never replaces it.

    It does nothing for a plain rebuild, a failure before spawn (nova cleans
    those up), a driver that implements ``rebuild`` itself (ironic), a
    successful spawn, or when ``[evacuate_cleanup] enabled`` is False. On a
    nova it was not written for, it logs one error at start-up and behaves
    as nova's own manager (:mod:`nova_evac_cleanup.nova_support`).
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # The evacuations running on this host, by instance uuid. nova
        # never runs two rebuilds of one instance on one host at once (the
        # API sets the task state), so the uuid is a safe key for
        # concurrent evacuations.
        self._evacuations = {}
        problems = nova_support.problems()
        if problems:
            LOG.error('nova-evac-cleanup supports nova %s and cannot run on '
                      'this nova: %s. Running as nova\'s own compute '
                      'manager: no cleanup of failed evacuations, no '
                      'start-up sweep.', nova_support.supported_range(),
                      '; '.join(problems))
        #: whether the cleanup runs at all on this nova
        self._cleanup_runs = not problems

    def _cleanup_enabled(self):
        return self._cleanup_runs and CONF.evacuate_cleanup.enabled

    # Start and stop.

    def init_host(self, *args, **kwargs):
        """Start like nova, then end evacuations this host's death cut.

        The host's lock is taken first and held for the life of the
        process, so that ``nova-evac-cleanup audit --delete`` never acts
        while this service runs; an audit holding it is waited for a while
        only (:mod:`nova_evac_cleanup.host_lock`). After nova's own
        start-up, and before this host accepts requests, ``[evacuate_cleanup]
        sweep_on_start`` decides what happens to the evacuations this host
        journaled and did not finish: see :mod:`nova_evac_cleanup.sweep`.
        Nothing here stops the service from starting.
        """
        if not self._cleanup_runs:
            return super().init_host(*args, **kwargs)
        locked = self._lock_host()
        result = super().init_host(*args, **kwargs)
        if CONF.evacuate_cleanup.enabled:
            try:
                journal.ensure_writable(self.host)
            except OSError as error:
                LOG.error('Cannot journal evacuations to %s (%s): running '
                          'as nova\'s own compute manager, without the '
                          'evacuation cleanup', self.host, error)
                self._cleanup_runs = False
                return result
        mode = CONF.evacuate_cleanup.sweep_on_start
        if mode == 'clean' and not locked:
            mode = 'report'
        if (mode != 'off' and
                self.driver.capabilities.get('supports_evacuate', False)):
            sweep.sweep(self, nova_context.get_admin_context(), mode)
        return result

    def _lock_host(self):
        """Take this host's lock; whether it is held."""
        try:
            host_lock.acquire(self.host, timeout=host_lock.START_TIMEOUT)
        except host_lock.HostLockHeld as error:
            LOG.error('%s. nova-compute starts without it: the start-up '
                      'sweep only reports, and the lock is taken once it is '
                      'free.', error)
            nova_support.spawn(host_lock.acquire_when_free, self.host)
            return False
        return True

    def cleanup_host(self, *args, **kwargs):
        try:
            return super().cleanup_host(*args, **kwargs)
        finally:
            host_lock.release(self.host)

    # The evacuation.

    def _do_rebuild_instance(self, *args, **kwargs):
        """Journal an evacuation before nova's rebuild code runs.

        What an earlier evacuation of the instance left here is cleared
        first, or refuses it if it cannot be proven that evacuation's
        (:func:`nova_evac_cleanup.leftovers.clear_or_refuse`), before
        anything is created here. The journal entry then stays on
        this host's disk until the evacuation ended: an entry left behind
        is what the start-up sweep may act on. With the cleanup disabled
        nothing is journaled.
        """
        if not self._cleanup_enabled():
            return super()._do_rebuild_instance(*args, **kwargs)
        named = _named('_do_rebuild_instance', args, kwargs)
        instance, migration = named['instance'], named['migration']
        if not named['evacuate'] or migration is None or (
                not migration.obj_attr_is_set('uuid')):
            return super()._do_rebuild_instance(*args, **kwargs)
        leftovers.clear_or_refuse(self, named['context'], instance,
                                  migration.uuid)
        entry = journal.Entry(self.host, instance.uuid, migration.uuid,
                              migration.id)
        try:
            journal.write(entry)
        except OSError:
            LOG.exception('Could not journal evacuation %s: refusing it, '
                          'as a failure could then leave files nova would '
                          'boot', migration.uuid, instance=instance)
            raise
        evacuation = self._evacuations[instance.uuid] = _Evacuation(
            entry, migration)
        try:
            result = super()._do_rebuild_instance(*args, **kwargs)
        except Exception as error:
            if evacuation.error is None:
                self._note_error(evacuation, error)
            if evacuation.spawned:
                with excutils.save_and_reraise_exception():
                    self._destroy_after_spawn(named['context'], instance,
                                              evacuation, error)
            raise
        # Still journaled: nova's rebuild_instance has yet to record the
        # instance on this host (rt.finish_evacuation).
        evacuation.rebuilt = True
        return result

    def _rebuild_default_impl(self, *args, **kwargs):
        """Run nova's default rebuild; destroy the guest if spawn failed.

        nova's answer to "are the files shared?" is read here, from nova's
        own frame (:mod:`nova_evac_cleanup.shared_storage`), and the
        instance directory claimed just before spawn.
        """
        named = (_named('_rebuild_default_impl', args, kwargs)
                 if self._cleanup_enabled() else {})
        instance = named.get('instance')
        evacuation = (self._evacuations.get(instance.uuid)
                      if instance is not None and named.get('evacuate')
                      else None)
        if evacuation is None:
            return super()._rebuild_default_impl(*args, **kwargs)
        evacuation.entry.shared_storage = shared_storage.nova_answer()
        context = named['context']
        attach_block_devices = named['attach_block_devices']
        # The block device info spawn is given is what attach returns on
        # this host; keep it so destroy disconnects the same volumes.
        attached = []

        def attach_then_claim(*args, **kwargs):
            block_device_info = attach_block_devices(*args, **kwargs)
            attached.append(block_device_info)
            # The last step before nova saves the task state and spawns.
            self._claim_directory(instance, evacuation.entry)
            return block_device_info

        named['attach_block_devices'] = attach_then_claim
        try:
            result = super()._rebuild_default_impl(**named)
        except Exception as error:
            if spawn_failure.raised_by_spawn(sys.exc_info()[2]):
                self._note_error(evacuation, error)
                with excutils.save_and_reraise_exception():
                    self._destroy_failed_evacuation(
                        context, instance, evacuation,
                        named.get('network_info'), attached[-1], error,
                        source=instance.host)
            raise
        evacuation.spawned = True
        evacuation.network_info = named.get('network_info')
        evacuation.block_device_info = (
            attached[-1] if attached else named.get('block_device_info'))
        return result

    def _note_error(self, evacuation, error):
        """Remember, and journal, the error that failed the evacuation.

        A start that ends the evacuation after this process died records
        it as the fault. Never raises.
        """
        evacuation.error = error
        evacuation.entry.error = '%s: %s' % (type(error).__name__, error)
        try:
            journal.write(evacuation.entry)
        except Exception:
            LOG.exception('Could not journal the error of evacuation %s',
                          evacuation.entry.migration_uuid)

    def _claim_directory(self, instance, entry):
        """Record nova's answer; claim the directory if not shared.

        A directory that exists already although nova found the files not
        on shared storage (a share that was unreachable when nova looked,
        or a leftover) turns the answer into "unknown": its disks are kept
        whatever happens.

        :raises OSError: the journal or the directory could not be
            written; the evacuation fails before spawn
        """
        try:
            if entry.shared_storage is False and not ownership.claim(entry):
                LOG.warning('nova found the instance files not on shared '
                            'storage, but %s exists before spawn: its disks '
                            'are kept whatever happens',
                            ownership.instance_path(instance.uuid),
                            instance=instance)
                entry.shared_storage = None
            entry.spawning = True
            journal.write(entry)
        except OSError:
            LOG.exception('Could not record evacuation %s before spawn: '
                          'refusing it', entry.migration_uuid,
                          instance=instance)
            raise

    def _error_out_instance_on_exception(self, context, instance, *args,
                                         **kwargs):
        """nova's context manager, which ends a finish_evacuation failure.

        nova's ``rebuild_instance`` records the evacuated instance on this
        host (``rt.finish_evacuation``) inside it, after
        ``_do_rebuild_instance`` returned. A failure there is ended
        (:meth:`_end_unrecorded_evacuation`) before nova's handler puts the
        instance into ERROR and saves it. nova enters this context before
        the evacuation is journaled: the evacuation is looked up when the
        failure is seen.
        """
        handler = super()._error_out_instance_on_exception(
            context, instance, *args, **kwargs)
        if not self._cleanup_runs:
            return handler
        return self._ending_unrecorded_evacuation(handler, context, instance)

    @contextlib.contextmanager
    def _ending_unrecorded_evacuation(self, nova_handler, context, instance):
        with nova_handler:
            try:
                yield
            except Exception as error:
                evacuation = self._evacuations.get(instance.uuid)
                if evacuation is None:
                    raise
                if evacuation.rebuilt:
                    with excutils.save_and_reraise_exception():
                        self._end_unrecorded_evacuation(
                            context, instance, evacuation, error)
                original = evacuation.error
                if original is None or error is original:
                    raise
                # nova's own handling of the failure failed in turn (a
                # placement or database error while it removed this
                # host's allocation or failed the migration): finish it,
                # and let nova record the original error, not this one.
                LOG.error('Ending the failed evacuation to %s failed: %s',
                          self.host, error, instance=instance,
                          exc_info=True)
                self._fail_here(context, instance, evacuation)
                raise original

    def rebuild_instance(self, context, instance, *args, **kwargs):
        """Run nova's rebuild, then end the evacuation's journal entry.

        The evacuation is journaled before nova's code runs: a death at
        any point of it, even before nova's rebuild code began (the
        migration then stays ``accepted``), leaves an entry to the next
        start. It is ended only once nova's handlers have ended the
        evacuation (the instance recorded here, or put into ERROR on its
        source).
        """
        named = _named('rebuild_instance', (context, instance) + args,
                       kwargs)
        early = None
        try:
            early = self._journal_early(instance, named)
            result = super().rebuild_instance(context, instance, *args,
                                              **kwargs)
        except Exception:
            evacuation = self._evacuations.pop(instance.uuid, None)
            if evacuation is not None:
                with excutils.save_and_reraise_exception():
                    self._record_original_error(context, instance,
                                                evacuation)
                    self._release_if_held(context, instance, evacuation)
                    self._end_evacuation(context, instance, evacuation)
            elif self._cleanup_enabled() and named.get('recreate') and (
                    named.get('migration') is not None):
                # It failed before nova's rebuild code began (or could not
                # be journaled): nothing of it was made here.
                unstarted = _Evacuation(None, named['migration'])
                if early is None:
                    # Refused here, before nova's code could record it.
                    unstarted.error = sys.exc_info()[1]
                    self._record_original_error(context, instance, unstarted)
                with excutils.save_and_reraise_exception():
                    self._fail_here(context, instance, unstarted)
                    self._release_if_held(context, instance, unstarted)
                    if early is not None:
                        self._forget(early.entry, instance)
            raise
        evacuation = self._evacuations.pop(instance.uuid, None)
        if evacuation is not None:
            self._end_evacuation(context, instance, evacuation)
        elif early is not None:
            self._forget(early.entry, instance)
        return result

    def _journal_early(self, instance, named):
        """Journal an evacuation to this host before nova's code runs.

        :returns: the evacuation, or None if it is none to journal
        :raises OSError: it could not be journaled: refused, as a death
            during it would leave what no start could end
        """
        migration = named.get('migration')
        if not (self._cleanup_enabled() and named.get('recreate') and
                migration is not None and migration.obj_attr_is_set('uuid')
                and migration.obj_attr_is_set('id')):
            return None
        entry = journal.Entry(self.host, instance.uuid, migration.uuid,
                              migration.id)
        try:
            journal.write(entry)
        except Exception:
            LOG.exception('Could not journal evacuation %s: refusing it',
                          migration.uuid, instance=instance)
            raise
        return _Evacuation(entry, migration)

    def _forget(self, entry, instance):
        try:
            journal.remove(entry)
        except OSError:
            LOG.exception('Could not remove the journal entry of evacuation '
                          '%s', entry.migration_uuid, instance=instance)

    # Ending it.

    def _end_evacuation(self, context, instance, evacuation):
        """nova's rebuild code returned or raised: end the journal entry.

        If the instance is recorded here the directory is its own: the
        marker goes, and so does every journal entry of the instance
        here. Otherwise :func:`nova_evac_cleanup.leftovers.end` removes
        the entry or records what is kept. Never raises.
        """
        entry = evacuation.entry
        if instance.host == self.host:
            try:
                ownership.release(entry)
                for other in journal.entries_of(self.host, instance.uuid):
                    journal.remove(other)
            except OSError:
                LOG.exception('Could not remove the journal entries of %s, '
                              'which lives on %s now', instance.uuid,
                              self.host, instance=instance)
            return
        leftovers.end(self.driver, entry, instance)

    def _recorded_here(self, context, instance):
        """Whether the database records the instance on this host.

        :returns: True, False (also when it was deleted), or None when it
            could not be read
        """
        try:
            current = objects.Instance.get_by_uuid(
                context, instance.uuid, expected_attrs=[])
        except exception.InstanceNotFound:
            return False
        except Exception:
            LOG.exception('Could not read the instance after its evacuation '
                          'to %s failed', self.host, instance=instance)
            return None
        return current.host == self.host

    def _destroy_failed_evacuation(self, context, instance, evacuation,
                                   network_info, block_device_info,
                                   spawn_error, source):
        """Destroy the guest a failed evacuation left on this host.

        Its disks go only with proof, taken now, that their directory is
        the evacuation's own (:func:`nova_evac_cleanup.ownership.proof`).
        Once the guest is destroyed, the volume connections the evacuation
        made here are released (:mod:`nova_evac_cleanup.unwind`).

        Never raises: the caller re-raises the spawn error, which is the one
        the operator must see in the instance fault.

        :param source: the host the instance is on (nova has not moved it);
            None when it was deleted
        """
        destroy_disks, why = ownership.proof(evacuation.entry)
        try:
            guest.destroy(self.driver, context, instance, network_info,
                          block_device_info, destroy_disks)
        except Exception:
            LOG.error('Evacuation to %(host)s failed to spawn: %(error)s',
                      {'host': self.host, 'error': spawn_error},
                      instance=instance)
            LOG.exception('Failed to clean up the guest of the failed '
                          'evacuation on %s; it is kept, powered off, and the '
                          'next evacuation of the instance to %s destroys it '
                          'first', self.host, self.host, instance=instance)
            return
        if source is not None:
            self._unwind(context, instance, source)
        LOG.info('Evacuation failed: destroyed the guest on %s and %s',
                 self.host,
                 'removed its disks (not on shared storage)'
                 if destroy_disks else 'kept its disks: %s' % why,
                 instance=instance)

    def _unwind(self, context, instance, source):
        """Release the volume connections the evacuation made here.

        Never raises; see :mod:`nova_evac_cleanup.unwind`.
        """
        try:
            unwind.unwind(self, context, instance, source)
        except Exception:
            LOG.exception('Could not release the volume connections of the '
                          'failed evacuation on %s', self.host,
                          instance=instance)

    def _destroy_after_spawn(self, context, instance, evacuation, error):
        """Destroy the running guest of an evacuation failed after spawn.

        The guest was spawned, but the evacuation failed before nova
        recorded the instance on this host: saving it with its expected
        task state (an operator reset it, or it is being deleted), bringing
        a stopped instance back to its state, a notification, or
        ``finish_evacuation``. nova puts the instance into ERROR on its
        source (or finishes deleting it): left running here, the guest
        would be a second writer on the instance's volumes, and on shared
        storage its disks, should the source be brought back.

        Never raises. Nothing is done if the instance is recorded on this
        host after all.
        """
        recorded = self._recorded_here(context, instance)
        if recorded is None:
            return
        if recorded:
            LOG.warning('Evacuation failed after the instance was recorded '
                        'on %s: its guest there is left running', self.host,
                        instance=instance)
            return
        LOG.warning('Evacuation failed after spawn (%s): destroying the '
                    'running guest on %s', error, self.host,
                    instance=instance)
        self._destroy_failed_evacuation(
            context, instance, evacuation, evacuation.network_info,
            evacuation.block_device_info, error, source=instance.host)

    def _end_unrecorded_evacuation(self, context, instance, evacuation,
                                   error):
        """End an evacuation whose ``finish_evacuation`` failed.

        If it had already recorded the instance on this host, the instance
        lives here: its guest and this host's allocation are kept, and
        what ``finish_evacuation`` had left to do is done (the migration
        context dropped, the migration ``done``), so that the source's
        start-up reaps its own copy. Otherwise it is ended as nova ends
        one that failed inside ``_do_rebuild_instance``: the migration
        ``failed``, the guest destroyed and this host's allocation
        removed. The instance is first read again: what
        ``finish_evacuation`` changed in memory (this host, this host's
        resources) must not be saved by nova's handler, which then puts it
        into ERROR on its source. Never raises.
        """
        recorded = self._recorded_here(context, instance)
        if recorded is None:
            return
        if recorded:
            LOG.warning('Evacuation failed after the instance was recorded '
                        'on %s (%s): it lives here, its guest is kept',
                        self.host, error, instance=instance)
            self._finish_recorded(context, instance, evacuation)
            return
        try:
            instance.refresh()
        except Exception:
            LOG.exception('Could not read the instance again after its '
                          'evacuation to %s failed', self.host,
                          instance=instance)
            return
        # Failed first: the source's start-up then keeps its own copy.
        if self._fail_migration_here(context, instance, evacuation):
            self._destroy_after_spawn(context, instance, evacuation, error)
            self._remove_allocation_here(context, instance)

    def _finish_recorded(self, context, instance, evacuation):
        """Do what ``finish_evacuation`` left undone once it moved it here.

        Never raises.
        """
        try:
            finish.finish_recorded(context, instance.uuid,
                                   evacuation.migration.id)
        except Exception:
            LOG.exception('Could not finish recording the evacuation of the '
                          'instance on %s', self.host, instance=instance)

    def _fail_here(self, context, instance, evacuation):
        """The migration ``failed``, this host's allocation removed.

        What nova does for an evacuation that failed on this host; done
        again where nova's own attempt failed. Only while the instance is
        not recorded here; never raises.
        """
        if self._recorded_here(context, instance) is False and (
                self._fail_migration_here(context, instance, evacuation)):
            self._remove_allocation_here(context, instance)

    def _fail_migration_here(self, context, instance, evacuation):
        """A migration in progress to ``failed``; whether it is over."""
        try:
            migration = objects.Migration.get_by_id(
                context, evacuation.migration.id)
            if migration.status in ('accepted', 'pre-migrating'):
                self._set_migration_status(migration, 'failed')
        except Exception:
            LOG.exception('Could not set the evacuation to %s to failed',
                          self.host, instance=instance)
            return False
        return True

    def _remove_allocation_here(self, context, instance):
        try:
            node = self._get_compute_info(context, self.host)
            self.rt.delete_allocation_for_evacuated_instance(
                context, instance, node.hypervisor_hostname,
                node_type='destination')
        except Exception:
            LOG.exception('Could not remove the allocation of the failed '
                          'evacuation against %s', self.host,
                          instance=instance)

    def _record_original_error(self, context, instance, evacuation):
        """Record the error that failed the evacuation, if nova did not.

        nova records the instance fault of the exception its rebuild code
        ends with: when its own handling of the failure failed too (saving
        the instance in ERROR, recording the fault), that is not the error
        the operator must see. Never raises.
        """
        original = evacuation.error
        if original is None or (evacuation.entry is not None and
                                sys.exc_info()[1] is original):
            return
        try:
            compute_utils.add_instance_fault_from_exc(
                context, instance, original,
                (type(original), original, original.__traceback__))
        except Exception:
            LOG.exception('Could not record the error of the failed '
                          'evacuation to %s', self.host, instance=instance)

    def _release_if_held(self, context, instance, evacuation):
        """Put the server into ERROR if nova's handler could not.

        nova's handler of a failed evacuation saves the instance in ERROR
        with no task state as its last step; if that save failed, the
        server would stay in its rebuild task state with nothing running
        the evacuation any more. A compare-and-swap on the task state it
        still has, only while it is not recorded here and its migration
        is over; never raises.
        """
        try:
            current = objects.Instance.get_by_uuid(
                context, instance.uuid, expected_attrs=[])
            if (current.host == self.host or
                    current.task_state not in task_states.rebuild_states):
                return
            migration = objects.Migration.get_by_id(
                context, evacuation.migration.id)
            if migration.status not in ('failed', 'error'):
                return
            held = current.task_state
            current.vm_state = vm_states.ERROR
            current.task_state = None
            current.save(expected_task_state=[held])
        except Exception:
            LOG.exception('Could not put the instance into ERROR after its '
                          'evacuation to %s failed', self.host,
                          instance=instance)
            return
        LOG.warning('Evacuation to %s failed and nova could not put the '
                    'instance into ERROR: done (it was %s)', self.host, held,
                    instance=instance)


class ComputeManager(EvacuateCleanupMixin, nova_manager.ComputeManager):
    """nova's compute manager with the evacuation cleanup."""
