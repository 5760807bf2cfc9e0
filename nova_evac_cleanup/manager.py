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

import inspect
import sys

from nova.compute import manager as nova_manager
from nova import context as nova_context
from nova import exception
from nova import objects
from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import excutils

from nova_evac_cleanup import conf
from nova_evac_cleanup import host_lock
from nova_evac_cleanup import journal
from nova_evac_cleanup import nova_support
from nova_evac_cleanup import recovery
from nova_evac_cleanup import spawn_failure
from nova_evac_cleanup import unwind

CONF = cfg.CONF
conf.register_opts(CONF)
LOG = logging.getLogger(__name__)


def nova_has_the_fix():
    """Whether the installed nova carries this project's patch series.

    The series gives nova's ``_rebuild_default_impl`` its own
    ``on_shared_storage`` argument; the mixin and the patch must not be
    used together.
    """
    return 'on_shared_storage' in inspect.signature(
        nova_manager.ComputeManager._rebuild_default_impl).parameters


class _Evacuation(object):
    """One evacuation running on this host: what the cleanup needs."""

    def __init__(self, shared_storage, migration):
        #: True, False or None (unknown), found before spawn
        self.shared_storage = shared_storage
        self.migration = migration
        #: the journal entry, None if it could not be written
        self.entry = None
        #: whether the driver's spawn returned, and what it was given: the
        #: guest then runs here and a later failure must destroy it
        self.spawned = False
        self.network_info = None
        self.block_device_info = None
        #: whether nova's _do_rebuild_instance returned
        self.rebuilt = False

    def journal(self, host, instance, migration):
        """Journal the evacuation; a failure to do so never fails it."""
        if migration is None or not migration.obj_attr_is_set('uuid'):
            return
        entry = journal.Entry(host, instance.uuid, migration.uuid,
                              migration.id, self.shared_storage)
        try:
            journal.write(entry)
        except OSError:
            LOG.exception('Could not journal evacuation %s: should this '
                          'process die during it, the start-up sweep will '
                          'only report it', migration.uuid, instance=instance)
            return
        self.entry = entry

    def claim_directory(self, instance):
        """Create and mark the instance directory, just before spawn.

        Only when the files were found not to be on shared storage: the
        marker is the start-up sweep's proof that the directory is this
        evacuation's to delete.
        """
        if self.entry is None or self.shared_storage is not False:
            return
        try:
            journal.claim_directory(self.entry, instance)
        except OSError:
            LOG.exception('Could not mark the instance directory of '
                          'evacuation %s: should this process die during it, '
                          'the start-up sweep will keep its disks',
                          self.entry.migration_uuid, instance=instance)

    def forget(self, instance, succeeded):
        """nova's rebuild code returned or raised: nothing left to journal.

        :param succeeded: whether it returned; the directory is then the
            instance's own and loses its marker. Otherwise an empty
            directory it created is removed, and a directory found on
            shared storage is noted as the instance's own.
        """
        if self.entry is None:
            return
        if succeeded:
            journal.release_directory(self.entry)
        else:
            # A failure before spawn leaves the directory as it was made;
            # left there, it would pass for shared storage next time.
            journal.abandon_directory(self.entry)
            journal.note_shared_directory(self.entry, instance)
        journal.remove(self.entry)


class EvacuateCleanupMixin(object):
    """Destroy the guest of an evacuation whose spawn failed on this host.

    Mix this in before nova's ``ComputeManager``. On an evacuation
    (``rebuild_instance`` with ``recreate=True``) whose ``driver.spawn``
    raises in ``_rebuild_default_impl``, it calls ``driver.destroy`` with the
    block device info spawn was given, inside the instance's mutated
    migration context, and with ``destroy_disks`` True only when nova had
    found, before spawning, that the disks are not on shared storage. The
    spawn error is then re-raised unchanged; a failing destroy is logged and
    never replaces it.

    It does nothing for a plain rebuild, a failure before spawn (nova cleans
    those up), a driver that implements ``rebuild`` itself (ironic), a
    successful spawn, or when ``[evacuate_cleanup] enabled`` is False.
    """

    def __init__(self, *args, **kwargs):
        if nova_has_the_fix():
            # nova would pass on_shared_storage to our _rebuild_default_impl
            # and every rebuild on this host would fail with a TypeError.
            raise RuntimeError(
                'This nova already destroys the guest of a failed '
                'evacuation (the nova-evac-cleanup patch series is '
                'applied): run nova-compute, not the nova-evac-cleanup '
                'compute manager.')
        # Refuse a nova whose methods this class overrides have changed.
        nova_support.check()
        super().__init__(*args, **kwargs)
        # The evacuations running on this host, by instance uuid: the
        # shared-storage answer and the journal entry. nova never runs two
        # rebuilds of one instance on one host at once (the API sets the
        # task state), so the uuid is a safe key for concurrent
        # evacuations.
        self._evacuations = {}

    def init_host(self, service_ref):
        """Start like nova, then end evacuations this host's death cut.

        The host's lock is taken first and held for the life of the
        process, so that ``nova-evac-cleanup audit --delete`` never acts
        while this service runs. After nova's own start-up, and before this
        host accepts requests, ``[evacuate_cleanup] sweep_on_start`` decides
        what happens to the evacuations this host journaled and did not
        finish: see :mod:`nova_evac_cleanup.recovery`.
        """
        try:
            host_lock.acquire(self.host, blocking=True)
        except host_lock.HostLockHeld as error:
            LOG.warning('%s; nova-evac-cleanup audit --delete will refuse '
                        'to run on this host', error)
        super().init_host(service_ref)
        if (CONF.evacuate_cleanup.sweep_on_start != 'off' and
                self.driver.capabilities.get('supports_evacuate', False)):
            recovery.sweep(self, nova_context.get_admin_context(),
                           CONF.evacuate_cleanup.sweep_on_start)

    def cleanup_host(self):
        try:
            super().cleanup_host()
        finally:
            host_lock.release(self.host)

    def _do_rebuild_instance(
            self, context, instance, orig_image_ref, image_meta,
            injected_files, new_pass, orig_sys_metadata, bdms, evacuate,
            on_shared_storage, preserve_ephemeral, migration, request_spec,
            allocations, request_group_resource_providers_mapping,
            accel_uuids, reimage_boot_volume, target_state):
        """Remember whether the disks are shared before nova spawns.

        nova decides here, before anything exists on this host, whether the
        instance files are on shared storage: the admin's
        ``onSharedStorage``, which nova then checks against
        ``driver.instance_on_disk``, or that driver call's answer. Spawn
        then creates the instance directory, after which the same driver
        call would answer True on any storage, so the answer is taken now.

        The evacuation is journaled on this host until nova's code returns
        or raises: an entry left behind is what the start-up sweep may act
        on. With the cleanup disabled nothing is journaled.
        """
        evacuation = None
        if evacuate and CONF.evacuate_cleanup.enabled:
            evacuation = _Evacuation(self._shared_storage_before_spawn(
                instance, on_shared_storage), migration)
            evacuation.journal(self.host, instance, migration)
            self._evacuations[instance.uuid] = evacuation
        try:
            result = super()._do_rebuild_instance(
                context, instance, orig_image_ref, image_meta,
                injected_files, new_pass, orig_sys_metadata, bdms, evacuate,
                on_shared_storage, preserve_ephemeral, migration,
                request_spec, allocations,
                request_group_resource_providers_mapping, accel_uuids,
                reimage_boot_volume, target_state)
        except Exception as error:
            # nova's handlers end the evacuation: nothing for the sweep.
            # Not on a BaseException (the process going down), which leaves
            # the entry for the next start.
            if evacuation is not None:
                with excutils.save_and_reraise_exception():
                    self._evacuations.pop(instance.uuid, None)
                    if evacuation.spawned:
                        self._destroy_after_spawn(context, instance,
                                                  evacuation, error)
                    evacuation.forget(instance, succeeded=False)
            raise
        if evacuation is not None:
            # Still journaled: nova's rebuild_instance has yet to record
            # the instance on this host (rt.finish_evacuation).
            evacuation.rebuilt = True
        return result

    def rebuild_instance(self, context, instance, *args, **kwargs):
        """Run nova's rebuild; end an evacuation that failed after spawn.

        nova records the evacuated instance on this host only after
        ``_do_rebuild_instance`` returns (``rt.finish_evacuation``); a
        failure there leaves the guest running here while the database
        says the source. It is destroyed, the migration set to ``failed``
        and this host's allocation removed, as nova does for a failure
        inside ``_do_rebuild_instance``.
        """
        try:
            result = super().rebuild_instance(context, instance, *args,
                                              **kwargs)
        except Exception as error:
            evacuation = self._evacuations.pop(instance.uuid, None)
            if evacuation is not None:
                with excutils.save_and_reraise_exception():
                    if evacuation.rebuilt:
                        self._end_unrecorded_evacuation(
                            context, instance, evacuation, error)
                    evacuation.forget(instance, succeeded=False)
            raise
        evacuation = self._evacuations.pop(instance.uuid, None)
        if evacuation is not None:
            evacuation.forget(instance, succeeded=True)
        return result

    def _shared_storage_before_spawn(self, instance, on_shared_storage):
        """Return nova's answer to "are the instance files shared?".

        When the admin passed ``onSharedStorage`` nova refuses the
        evacuation unless ``driver.instance_on_disk`` agrees, so that value
        is nova's answer and costs nothing. Otherwise this makes the one
        extra ``instance_on_disk`` call the fix costs an evacuation, just
        before nova makes the same call.

        :returns: True, False, or None when the driver could not tell; None
            keeps the disks.
        """
        if on_shared_storage is not None:
            return on_shared_storage
        try:
            return self.driver.instance_on_disk(instance)
        except Exception:
            # nova's own call will raise the same error and fail the
            # evacuation; it is not ours to report.
            LOG.debug('Could not tell whether the instance files are on '
                      'shared storage', instance=instance, exc_info=True)
            return None

    def _rebuild_default_impl(
            self, context, instance, image_meta, injected_files,
            admin_password, allocations, bdms, detach_block_devices,
            attach_block_devices, network_info=None, evacuate=False,
            block_device_info=None, preserve_ephemeral=False,
            accel_uuids=None, reimage_boot_volume=False):
        """Run nova's default rebuild; destroy the guest if spawn failed."""
        evacuation = self._evacuations.get(instance.uuid)
        on_shared_storage = (
            evacuation.shared_storage if evacuation is not None else None)
        cleanup = evacuate and CONF.evacuate_cleanup.enabled
        # The block device info spawn is given is what attach returns on this
        # host; keep it so destroy disconnects the same volumes.
        attached = []

        def attach_and_remember(*args, **kwargs):
            block_device_info = attach_block_devices(*args, **kwargs)
            attached.append(block_device_info)
            # The last step before nova saves the task state and spawns.
            if evacuation is not None:
                evacuation.claim_directory(instance)
            return block_device_info

        try:
            result = super()._rebuild_default_impl(
                context=context, instance=instance, image_meta=image_meta,
                injected_files=injected_files, admin_password=admin_password,
                allocations=allocations, bdms=bdms,
                detach_block_devices=detach_block_devices,
                attach_block_devices=(
                    attach_and_remember if cleanup else attach_block_devices),
                network_info=network_info, evacuate=evacuate,
                block_device_info=block_device_info,
                preserve_ephemeral=preserve_ephemeral,
                accel_uuids=accel_uuids,
                reimage_boot_volume=reimage_boot_volume)
        except Exception as error:
            if cleanup and spawn_failure.raised_by_spawn(sys.exc_info()[2]):
                with excutils.save_and_reraise_exception():
                    self._destroy_failed_evacuation(
                        context, instance, network_info, attached[-1],
                        on_shared_storage, error, source=instance.host)
            raise
        if cleanup and evacuation is not None:
            evacuation.spawned = True
            evacuation.network_info = network_info
            evacuation.block_device_info = (
                attached[-1] if attached else block_device_info)
        return result

    def _destroy_failed_evacuation(self, context, instance, network_info,
                                   block_device_info, on_shared_storage,
                                   spawn_error, source):
        """Destroy the guest a failed evacuation left on this host.

        Once it is destroyed, the ports and volume attachments the
        evacuation moved here are put back (:mod:`nova_evac_cleanup.unwind`).

        Never raises: the caller re-raises the spawn error, which is the one
        the operator must see in the instance fault.

        :param source: the host to put the ports back on, the instance's
            (nova has not moved it yet); None when it was deleted
        """
        destroy_disks = on_shared_storage is False
        try:
            with instance.mutated_migration_context():
                self.driver.destroy(context, instance, network_info,
                                    block_device_info=block_device_info,
                                    destroy_disks=destroy_disks)
        except Exception:
            LOG.error('Evacuation to %(host)s failed to spawn: %(error)s',
                      {'host': self.host, 'error': spawn_error},
                      instance=instance)
            LOG.exception('Failed to clean up the guest of the failed '
                          'evacuation on %s; it may need manual cleanup',
                          self.host, instance=instance)
            return
        if source is not None:
            self._unwind(context, instance, network_info, source)
        if destroy_disks:
            disks = 'removed its disks (not on shared storage)'
        elif on_shared_storage:
            disks = 'kept its disks (on shared storage)'
        else:
            disks = ('kept its disks (could not tell whether they are on '
                     'shared storage)')
        LOG.info('Evacuation failed to spawn: destroyed the guest on %s and '
                 '%s', self.host, disks, instance=instance)

    def _unwind(self, context, instance, network_info, source):
        """Put back the ports and volumes the evacuation moved here.

        Never raises; see :mod:`nova_evac_cleanup.unwind`.
        """
        try:
            unwind.unwind(self, context, instance, source,
                          network_info=network_info)
        except Exception:
            LOG.exception('Could not put the ports and volume attachments '
                          'of the failed evacuation back on %s', source,
                          instance=instance)

    def _destroy_after_spawn(self, context, instance, evacuation, error):
        """Destroy the running guest of an evacuation failed after spawn.

        The guest was spawned, but the evacuation failed before nova
        recorded the instance on this host: saving it with its expected
        task state (an operator reset it, or it is being deleted), bringing
        a stopped instance back to its state, or a notification. nova puts
        the instance into ERROR on its source (or finishes deleting it):
        left running here, the guest would be a second writer on the
        instance's volumes, and on shared storage its disks, should the
        source be brought back.

        Never raises. Nothing is done if the instance is recorded on this
        host after all.
        """
        try:
            current = objects.Instance.get_by_uuid(
                context, instance.uuid, expected_attrs=[])
        except exception.InstanceNotFound:
            current = None
        except Exception:
            LOG.exception('Could not read the instance after its evacuation '
                          'failed: its guest on %s is left running',
                          self.host, instance=instance)
            return
        if current is not None and current.host == self.host:
            LOG.warning('Evacuation failed after the instance was recorded '
                        'on %s: its guest there is left running', self.host,
                        instance=instance)
            return
        LOG.warning('Evacuation failed after spawn (%s): destroying the '
                    'running guest on %s', error, self.host,
                    instance=instance)
        # A deleted instance's ports and volumes were released by nova.
        self._destroy_failed_evacuation(
            context, instance, evacuation.network_info,
            evacuation.block_device_info, evacuation.shared_storage, error,
            source=current.host if current is not None else None)

    def _end_unrecorded_evacuation(self, context, instance, evacuation,
                                   error):
        """End an evacuation whose ``finish_evacuation`` failed.

        As nova ends one that failed inside ``_do_rebuild_instance``: the
        guest destroyed, the migration ``failed`` and this host's
        allocation removed; nova has already put the instance into ERROR.
        Never raises.
        """
        self._destroy_after_spawn(context, instance, evacuation, error)
        try:
            node = self._get_compute_info(context, self.host)
            self.rt.delete_allocation_for_evacuated_instance(
                context, instance, node.hypervisor_hostname,
                node_type='destination')
            migration = evacuation.migration
            if migration is not None:
                migration = objects.Migration.get_by_id(context,
                                                        migration.id)
            if migration is not None and migration.status == 'pre-migrating':
                self._set_migration_status(migration, 'failed')
        except Exception:
            LOG.exception('Could not end the evacuation to %s after it '
                          'failed to record the instance here', self.host,
                          instance=instance)


class ComputeManager(EvacuateCleanupMixin, nova_manager.ComputeManager):
    """nova's compute manager with the evacuation cleanup."""
