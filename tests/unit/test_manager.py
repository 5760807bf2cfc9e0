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

"""Tests of the evacuation cleanup in nova's rebuild code path.

They drive nova's real ``_do_rebuild_instance`` and ``_rebuild_default_impl``
(through the mixin) with the driver and the services around it mocked, in
the style of nova's ``test_compute_mgr.py`` rebuild tests.
"""

import errno
import os
import threading
import traceback
from unittest import mock

import fixtures
from nova.compute import manager as nova_manager
from nova.compute import task_states
from nova.compute import vm_states
from nova import context as nova_context
from nova import exception
from nova import objects
from nova import test
from nova.tests.unit import fake_instance
from oslo_utils.fixture import uuidsentinel as uuids
from oslo_utils import uuidutils

from nova_evac_cleanup import journal
from nova_evac_cleanup import leftovers
from nova_evac_cleanup import manager
from nova_evac_cleanup import nova_support


class SpawnFailed(Exception):
    """The error the driver's spawn raises in these tests."""


class DestroyFailed(Exception):
    """The error the driver's destroy raises in these tests."""


class RebuildTestCase(test.NoDBTestCase):
    """Drive nova's rebuild through the mixin with a mocked driver."""

    def setUp(self):
        super().setUp()
        # Where an evacuation journals itself and creates the instance
        # directory it marks as its own.
        self.instances = self.useFixture(fixtures.TempDir()).path
        self.flags(instances_path=self.instances)
        self.flags(journal_path=self.useFixture(fixtures.TempDir()).path,
                   group='evacuate_cleanup')
        self.compute = manager.ComputeManager()
        self.driver = self.compute.driver
        self.context = nova_context.RequestContext(
            'fake-user', 'fake-project')
        self.instance = self._instance()
        self.network_info = mock.sentinel.network_info
        # What attach returns on this host: spawn and destroy must get it.
        self.new_bdi = {'block_device_mapping': [mock.sentinel.attached]}
        self.old_bdi = {'block_device_mapping': [mock.sentinel.source]}

        self.useFixture(test.nova_fixtures.SpawnIsSynchronousFixture())
        for target in ('nova.compute.utils.notify_usage_exists',
                       'nova.compute.utils.notify_about_instance_rebuild',
                       'nova.compute.utils.notify_about_instance_usage'):
            self.useFixture(test.fixtures.MockPatch(target))
        self.compute.network_api = mock.Mock()
        self.compute.network_api.get_instance_nw_info.return_value = (
            self.network_info)
        self.compute.image_api = mock.Mock()
        patch = self.useFixture
        self.mock_save = patch(test.fixtures.MockPatchObject(
            objects.Instance, 'save')).mock
        patch(test.fixtures.MockPatchObject(
            self.compute, '_get_power_state', return_value=1))
        patch(test.fixtures.MockPatchObject(
            self.compute, '_update_instance_after_spawn'))
        patch(test.fixtures.MockPatchObject(
            self.compute, '_update_scheduler_instance_info'))
        patch(test.fixtures.MockPatchObject(
            self.compute, '_get_instance_block_device_info',
            return_value=self.old_bdi))
        self.mock_attach = patch(test.fixtures.MockPatchObject(
            self.compute, '_prep_block_device',
            return_value=self.new_bdi)).mock
        self.mock_power_off = patch(test.fixtures.MockPatchObject(
            self.compute, '_power_off_instance')).mock
        patch(test.fixtures.MockPatchObject(
            self.compute, '_get_accel_info', return_value=[]))

        # The driver: a successful spawn, instance files not shared.
        self.mock_exists = patch(test.fixtures.MockPatchObject(
            self.driver, 'instance_exists', return_value=False)).mock
        self.mock_on_disk = patch(test.fixtures.MockPatchObject(
            self.driver, 'instance_on_disk', return_value=False)).mock
        self.mock_spawn = patch(test.fixtures.MockPatchObject(
            self.driver, 'spawn', side_effect=self._record_spawn)).mock
        self.mock_destroy = patch(test.fixtures.MockPatchObject(
            self.driver, 'destroy', side_effect=self._record_destroy)).mock
        self.spawn_numa = []
        self.destroyed = []
        self.migrations = {}
        # What the evacuation moved here is put back after a destroy
        # (tests/unit/test_unwind.py).
        self.mock_unwind = patch(test.fixtures.MockPatch(
            'nova_evac_cleanup.unwind.unwind', return_value=([], []))).mock

    def _instance(self):
        instance = fake_instance.fake_instance_obj(
            self.context, vm_state=vm_states.ACTIVE,
            task_state=task_states.REBUILDING, host='compute0',
            expected_attrs=['system_metadata', 'info_cache'])
        instance.trusted_certs = None
        instance.pci_requests = None
        instance.pci_devices = None
        instance.resources = None
        instance.flavor.extra_specs = {}
        # The migration context of an evacuation: the NUMA topology on this
        # host differs from the source's, so the tests can tell whether a
        # driver call ran inside the mutated migration context.
        instance.numa_topology = None
        instance.migration_context = objects.MigrationContext(
            instance_uuid=instance.uuid, migration_id=1,
            old_numa_topology=None,
            new_numa_topology=objects.InstanceNUMATopology(cells=[]),
            old_pci_devices=None, new_pci_devices=None,
            old_pci_requests=None, new_pci_requests=None,
            old_resources=None, new_resources=None)
        return instance

    def _record_spawn(self, *args, **kwargs):
        self.spawn_numa.append(self.instance.numa_topology)

    def _record_destroy(self, context, instance, *args, **kwargs):
        self.destroyed.append(instance)

    def _rebuild(self, evacuate=True, on_shared_storage=None,
                 instance=None):
        instance = instance or self.instance
        return self.compute._do_rebuild_instance(
            self.context, instance, uuids.image, instance.image_meta,
            injected_files=[], new_pass=None, orig_sys_metadata={},
            bdms=objects.BlockDeviceMappingList(), evacuate=evacuate,
            on_shared_storage=on_shared_storage, preserve_ephemeral=False,
            migration=self._migration(instance), request_spec=None,
            allocations={}, request_group_resource_providers_mapping=None,
            accel_uuids=[], reimage_boot_volume=False, target_state=None)

    def _migration(self, instance):
        """The evacuation's migration record, one per instance."""
        if instance.uuid not in self.migrations:
            self.migrations[instance.uuid] = objects.Migration(
                id=len(self.migrations) + 1,
                uuid=uuidutils.generate_uuid(), status='pre-migrating')
        return self.migrations[instance.uuid]

    def _fail_spawn(self):
        error = SpawnFailed('spawn failed')
        self.mock_spawn.side_effect = error
        return error

    def assert_destroyed(self, destroy_disks):
        self.mock_destroy.assert_called_once_with(
            self.context, mock.ANY, self.network_info,
            block_device_info=self.new_bdi, destroy_disks=destroy_disks)
        # The cleanup ran on this host's view of the instance, a copy: the
        # instance itself keeps its own NUMA topology.
        [destroyed] = self.destroyed
        self.assertEqual(self.instance.uuid, destroyed.uuid)
        self.assertEqual(self.instance.migration_context.new_numa_topology
                         .obj_to_primitive(),
                         destroyed.numa_topology.obj_to_primitive())
        self.assertIsNone(self.instance.numa_topology)
        # What is left, if anything, is on this host's disk as spawn made
        # it, and the directory goes only with the disks.
        self.assertEqual(destroy_disks, self._claimed())

    def _claimed(self):
        """Whether the evacuation created the instance directory."""
        [entry] = journal.entries(self.compute.host)
        return bool(entry.claim and entry.claim.get('inode'))


class TestEvacuateSpawnFailure(RebuildTestCase):
    """An evacuation whose spawn fails gets its guest destroyed."""

    def test_non_shared_storage_destroys_guest_and_disks(self):
        error = self._fail_spawn()

        raised = self.assertRaises(SpawnFailed, self._rebuild)

        self.assertIs(error, raised)
        self.mock_spawn.assert_called_once()
        self.assertEqual(self.new_bdi,
                         self.mock_spawn.call_args.kwargs['block_device_info'])
        self.assert_destroyed(destroy_disks=True)
        # Then this host's volume connections are released.
        self.mock_unwind.assert_called_once_with(
            self.compute, self.context, self.instance, 'compute0')

    def test_unwind_failure_keeps_the_spawn_error(self):
        error = self._fail_spawn()
        self.mock_unwind.side_effect = DestroyFailed('neutron is down')

        raised = self.assertRaises(SpawnFailed, self._rebuild)

        self.assertIs(error, raised)
        self.assert_destroyed(destroy_disks=True)

    def test_shared_storage_keeps_disks(self):
        self._fail_spawn()
        self.mock_on_disk.return_value = True

        self.assertRaises(SpawnFailed, self._rebuild)

        self.assert_destroyed(destroy_disks=False)

    def test_admin_said_shared_keeps_disks(self):
        # The admin passed onSharedStorage=True and nova checked it against
        # the driver: that answer is used, without another driver call.
        self._fail_spawn()
        self.mock_on_disk.return_value = True

        self.assertRaises(SpawnFailed, self._rebuild, on_shared_storage=True)

        self.assert_destroyed(destroy_disks=False)
        self.mock_on_disk.assert_called_once_with(self.instance)

    def test_admin_said_not_shared_removes_disks(self):
        self._fail_spawn()

        self.assertRaises(SpawnFailed, self._rebuild,
                          on_shared_storage=False)

        self.assert_destroyed(destroy_disks=True)
        self.mock_on_disk.assert_called_once_with(self.instance)

    def test_answer_taken_before_spawn(self):
        # Spawn creates the instance directory, after which the driver says
        # "on disk" on any storage: that later answer must not be used.
        answers = iter([False, False])

        def on_disk(instance):
            return next(answers, True)

        self.mock_on_disk.side_effect = on_disk
        self._fail_spawn()

        self.assertRaises(SpawnFailed, self._rebuild)

        self.assert_destroyed(destroy_disks=True)

    def test_one_answer_nova_s(self):
        """Issue 19, item 1: the mixin asks the driver nothing itself.

        On an NFS hiccup a second question could get another answer than
        nova's; nova's is the one its rebuild acted on.
        """
        self.mock_on_disk.side_effect = [True, False]
        self._fail_spawn()

        self.assertRaises(SpawnFailed, self._rebuild)

        self.mock_on_disk.assert_called_once_with(self.instance)
        self.assert_destroyed(destroy_disks=False)

    def test_directory_found_before_spawn_keeps_disks(self):
        """Issue 19, item 1: nova said not shared, the directory exists.

        A share that was unreachable when nova looked: what is in the
        directory may be the only copy of the disks.
        """
        os.makedirs(os.path.join(self.instances, self.instance.uuid))
        self._fail_spawn()

        self.assertRaises(SpawnFailed, self._rebuild)

        self.assert_destroyed(destroy_disks=False)
        [entry] = journal.entries(self.compute.host)
        self.assertIsNone(entry.shared_storage)

    def test_destroy_saves_the_instance_with_its_own_resources(self):
        """Issue 19, item 2: libvirt's cleanup saves the instance.

        Inside the mutated migration context that save would write this
        host's NUMA topology onto an instance that stays on its source.
        """
        self._fail_spawn()
        saved = []
        self.saving = self.instance
        self.mock_save.side_effect = lambda *args, **kwargs: saved.append(
            self.saving.numa_topology)

        def destroy(context, instance, *args, **kwargs):
            self.destroyed.append(instance)
            self.saving = instance
            instance.save()
            # The driver still sees this host's topology after it saved.
            saved.append(instance.numa_topology)

        self.mock_destroy.side_effect = destroy

        self.assertRaises(SpawnFailed, self._rebuild)

        self.assertIsNone(saved[-2])
        self.assertEqual(self.instance.migration_context.new_numa_topology
                         .obj_to_primitive(), saved[-1].obj_to_primitive())
        self.assertIsNone(self.instance.numa_topology)

    def test_destroy_failure_reraises_spawn_error(self):
        error = self._fail_spawn()
        self.mock_destroy.side_effect = DestroyFailed('destroy failed')

        with mock.patch.object(manager, 'LOG') as mock_log:
            raised = self.assertRaises(SpawnFailed, self._rebuild)

        self.assertIs(error, raised)
        # The traceback is spawn's, not destroy's.
        frames = [f.name for f in traceback.extract_tb(raised.__traceback__)]
        self.assertIn('_rebuild_default_impl', frames)
        self.assertNotIn('_destroy_failed_evacuation', frames)
        self.mock_destroy.assert_called_once()
        # A guest that may still run keeps its ports and volumes.
        self.mock_unwind.assert_not_called()
        # Both errors are logged at ERROR with the instance.
        mock_log.error.assert_called_once()
        self.assertIn(error, mock_log.error.call_args.args[1].values())
        mock_log.exception.assert_called_once()
        for call in (mock_log.error.call_args, mock_log.exception.call_args):
            self.assertIs(self.instance, call.kwargs['instance'])
        mock_log.info.assert_not_called()

    def test_cleanup_is_logged(self):
        self._fail_spawn()

        with mock.patch.object(manager, 'LOG') as mock_log:
            self.assertRaises(SpawnFailed, self._rebuild)

        mock_log.info.assert_called_once()
        message = mock_log.info.call_args.args[0] % (
            mock_log.info.call_args.args[1:])
        self.assertIn('destroyed the guest', message)
        self.assertIn('removed its disks', message)

    def test_shared_storage_cleanup_says_disks_kept(self):
        self._fail_spawn()
        self.mock_on_disk.return_value = True

        with mock.patch.object(manager, 'LOG') as mock_log:
            self.assertRaises(SpawnFailed, self._rebuild)

        message = mock_log.info.call_args.args[0] % (
            mock_log.info.call_args.args[1:])
        self.assertIn('kept its disks', message)
        self.assertIn('(shared)', message)

    def test_concurrent_evacuations_use_their_own_answers(self):
        # Two evacuations on this host at once, one of disks on shared
        # storage and one not. Both have taken their answer and wait for
        # the network (nova asks neutron before it rebuilds) together, then
        # both are inside spawn together; the shared one fails and is
        # cleaned up while the other is still spawning, which fails next.
        # Each cleanup must use its own instance's answer, not the other's
        # nor none.
        first, second = self._instance(), self.instance
        shared = {first.uuid: True, second.uuid: False}
        self.mock_on_disk.side_effect = lambda inst: shared[inst.uuid]
        in_network = {uuid: threading.Event() for uuid in shared}
        in_spawn = {uuid: threading.Event() for uuid in shared}
        first_cleaned = threading.Event()
        # Whether the other evacuation had got as far while this one was
        # waiting there.
        overlapped = {}
        destroyed = {}

        def other(instance):
            return first if instance is second else second

        def get_instance_nw_info(context, instance, **kwargs):
            in_network[instance.uuid].set()
            overlapped['network', instance.uuid] = in_network[
                other(instance).uuid].wait(10)
            return self.network_info

        def spawn(context, instance, *args, **kwargs):
            in_spawn[instance.uuid].set()
            overlapped['spawn', instance.uuid] = in_spawn[
                other(instance).uuid].wait(10)
            if instance is second:
                # Still spawning while the first evacuation is cleaned up.
                overlapped['cleanup', instance.uuid] = first_cleaned.wait(10)
            raise SpawnFailed(instance.uuid)

        def destroy(context, instance, network_info, block_device_info,
                    destroy_disks):
            destroyed[instance.uuid] = destroy_disks
            if instance.uuid == first.uuid:
                first_cleaned.set()

        self.compute.network_api.get_instance_nw_info.side_effect = (
            get_instance_nw_info)
        self.mock_spawn.side_effect = spawn
        self.mock_destroy.side_effect = destroy
        errors = {}

        def evacuate(instance):
            try:
                self._rebuild(instance=instance)
            except Exception as error:
                errors[instance.uuid] = error

        threads = [threading.Thread(target=evacuate, args=(instance,))
                   for instance in (first, second)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(60)
            self.assertFalse(thread.is_alive())

        # The two really ran at once, as described above.
        self.assertEqual({('network', first.uuid): True,
                          ('network', second.uuid): True,
                          ('spawn', first.uuid): True,
                          ('spawn', second.uuid): True,
                          ('cleanup', second.uuid): True}, overlapped)
        # Each failed with its own spawn error...
        self.assertEqual({uuid: 'SpawnFailed(%r)' % uuid for uuid in shared},
                         {uuid: repr(error)
                          for uuid, error in errors.items()})
        # ... and was cleaned up once, its disks kept only if shared.
        self.assertEqual(2, self.mock_destroy.call_count)
        self.assertEqual({first.uuid: False, second.uuid: True}, destroyed)
        self.assertEqual(shared, {
            entry.instance_uuid: entry.shared_storage
            for entry in journal.entries(self.compute.host)})


class TestEvacuateFailureAfterSpawn(RebuildTestCase):
    """An evacuation that fails after spawn returned: the guest runs here.

    nova puts the instance into ERROR on its source (or finishes deleting
    it); the guest spawned here is destroyed, as after a failed spawn.
    """

    def setUp(self):
        super().setUp()
        self.mock_get = self.useFixture(test.fixtures.MockPatchObject(
            objects.Instance, 'get_by_uuid',
            return_value=objects.Instance(host='compute0'))).mock

    def _fail_save(self, error):
        """The save nova makes right after spawn raises ``error``."""
        def save(*args, **kwargs):
            if kwargs.get('expected_task_state') == [
                    task_states.REBUILD_SPAWNING]:
                raise error

        self.mock_save.side_effect = save
        return error

    def _reset_by_operator(self):
        return self._fail_save(exception.UnexpectedTaskStateError(
            instance_uuid=self.instance.uuid,
            expected=task_states.REBUILD_SPAWNING, actual=None))

    def test_task_state_reset_destroys_guest_and_disks(self):
        error = self._reset_by_operator()

        raised = self.assertRaises(exception.UnexpectedTaskStateError,
                                   self._rebuild)

        self.assertIs(error, raised)
        self.mock_spawn.assert_called_once()
        self.assert_destroyed(destroy_disks=True)

    def test_shared_storage_keeps_disks(self):
        self._reset_by_operator()
        self.mock_on_disk.return_value = True

        self.assertRaises(exception.UnexpectedTaskStateError, self._rebuild)

        self.assert_destroyed(destroy_disks=False)

    def test_deleted_meanwhile(self):
        self._fail_save(exception.UnexpectedDeletingTaskStateError(
            instance_uuid=self.instance.uuid,
            expected=task_states.REBUILD_SPAWNING,
            actual=task_states.DELETING))
        self.mock_get.side_effect = exception.InstanceNotFound(
            instance_id=self.instance.uuid)

        self.assertRaises(exception.UnexpectedDeletingTaskStateError,
                          self._rebuild)

        self.assert_destroyed(destroy_disks=True)

    def test_stopped_instance_not_stopped_again(self):
        """Bringing a stopped instance back to its state fails."""
        self.instance.vm_state = vm_states.STOPPED
        error = SpawnFailed('power off failed')
        self.useFixture(test.fixtures.MockPatchObject(
            self.compute, 'stop_instance', side_effect=error))

        raised = self.assertRaises(SpawnFailed, self._rebuild)

        self.assertIs(error, raised)
        self.assert_destroyed(destroy_disks=True)

    def test_recorded_on_this_host_left_running(self):
        self._reset_by_operator()
        self.mock_get.return_value = objects.Instance(host=self.compute.host)

        self.assertRaises(exception.UnexpectedTaskStateError, self._rebuild)

        self.mock_destroy.assert_not_called()

    def test_destroy_failure_keeps_the_error(self):
        error = self._reset_by_operator()
        self.mock_destroy.side_effect = DestroyFailed('destroy failed')

        raised = self.assertRaises(exception.UnexpectedTaskStateError,
                                   self._rebuild)

        self.assertIs(error, raised)
        self.mock_destroy.assert_called_once()

    def test_plain_rebuild_untouched(self):
        self._reset_by_operator()

        self.assertRaises(exception.UnexpectedTaskStateError, self._rebuild,
                          evacuate=False)

        # Only nova's own destroy before the rebuild's spawn.
        self.assertEqual(1, self.mock_destroy.call_count)
        self.assertNotIn('destroy_disks', self.mock_destroy.call_args.kwargs)

    def test_disabled(self):
        self.flags(enabled=False, group='evacuate_cleanup')
        self._reset_by_operator()

        self.assertRaises(exception.UnexpectedTaskStateError, self._rebuild)

        self.mock_destroy.assert_not_called()


class TestNoCleanup(RebuildTestCase):
    """Everything but a failed evacuation spawn keeps nova's behaviour."""

    def test_plain_rebuild_spawn_failure_keeps_guest(self):
        self._fail_spawn()

        self.assertRaises(SpawnFailed, self._rebuild, evacuate=False)

        # Only nova's own destroy before spawn, which keeps the disks.
        self.mock_power_off.assert_called_once()
        self.mock_destroy.assert_called_once_with(
            self.context, self.instance, network_info=mock.ANY,
            block_device_info=self.old_bdi)
        self.mock_on_disk.assert_not_called()

    def test_attach_failure_before_spawn(self):
        self.mock_attach.side_effect = exception.InvalidBDM()

        self.assertRaises(exception.InvalidBDM, self._rebuild)

        self.mock_spawn.assert_not_called()
        self.mock_destroy.assert_not_called()

    def test_save_failure_before_spawn(self):
        # The task state save between attach and spawn fails: nothing was
        # spawned, so there is nothing to destroy.
        def save(expected_task_state=None, **kwargs):
            if expected_task_state == [
                    task_states.REBUILD_BLOCK_DEVICE_MAPPING]:
                raise exception.UnexpectedTaskStateError(
                    instance_uuid=self.instance.uuid, expected='x',
                    actual='y')

        self.mock_save.side_effect = save

        self.assertRaises(exception.UnexpectedTaskStateError, self._rebuild)

        self.mock_attach.assert_called_once()
        self.mock_spawn.assert_not_called()
        self.mock_destroy.assert_not_called()

    def test_accelerator_failure_before_spawn(self):
        self.instance.flavor.extra_specs = {
            'accel:device_profile': 'fake-profile'}

        with mock.patch.object(
                self.compute, '_get_bound_arq_resources',
                side_effect=exception.AcceleratorRequestOpFailed(
                    op='bind', msg='')), \
                mock.patch.object(self.compute, '_build_resources_cleanup'):
            self.assertRaises(exception.BuildAbortException, self._rebuild)

        self.mock_spawn.assert_not_called()
        self.mock_destroy.assert_not_called()

    def test_driver_with_own_rebuild(self):
        # ironic implements driver.rebuild: nova never reaches the default
        # implementation, and the mixin leaves its failures alone.
        with mock.patch.object(self.driver, 'rebuild',
                               side_effect=SpawnFailed('ironic')):
            self.assertRaises(SpawnFailed, self._rebuild)

        self.mock_spawn.assert_not_called()
        self.mock_destroy.assert_not_called()

    def test_disabled(self):
        self.flags(enabled=False, group='evacuate_cleanup')
        self._fail_spawn()

        self.assertRaises(SpawnFailed, self._rebuild)

        self.mock_destroy.assert_not_called()
        # And no extra driver call: exactly nova's own.
        self.mock_on_disk.assert_called_once_with(self.instance)


class TestSuccessCost(RebuildTestCase):
    """What the fix costs an operation that succeeds."""

    def test_evacuate_costs_no_driver_call(self):
        self._rebuild()

        self.mock_spawn.assert_called_once()
        self.mock_destroy.assert_not_called()
        # nova calls instance_on_disk once; the mixin reads its answer.
        self.assertEqual(1, self.mock_on_disk.call_count)
        self.assertEqual(1, self.mock_exists.call_count)
        self.assertEqual(
            [self.instance.migration_context.new_numa_topology],
            self.spawn_numa)

    def test_evacuate_with_admin_answer_costs_nothing(self):
        self._rebuild(on_shared_storage=False)

        self.assertEqual(1, self.mock_on_disk.call_count)
        self.mock_destroy.assert_not_called()

    def test_rebuild_costs_nothing(self):
        self._rebuild(evacuate=False)

        self.mock_on_disk.assert_not_called()
        self.mock_spawn.assert_called_once()
        # nova's own destroy of the old guest, nothing more.
        self.mock_destroy.assert_called_once()


class TestOverriddenSignatures(test.NoDBTestCase):
    """Fail when nova changes a method the mixin overrides.

    The mixin relies on the arguments nova's methods were written with; a
    nova release that renames, adds or reorders them must be reviewed. At
    run time such a nova gets nova's own behaviour, never a refusal to
    start.
    """

    def test_every_override_is_checked_at_start_up(self):
        """nova_support checks each method the mixin overrides."""
        overridden = {
            name for name, value in vars(manager.EvacuateCleanupMixin).items()
            if callable(value) and hasattr(nova_manager.ComputeManager, name)
        } - {'__init__'}
        self.assertEqual(sorted(nova_support.OVERRIDDEN), sorted(overridden))
        self.assertEqual([], nova_support.mismatches())

    def _manager_on(self, name, replacement):
        """A manager built on a nova whose ``name`` is ``replacement``."""
        with mock.patch.object(nova_manager.ComputeManager, name,
                               replacement), \
                mock.patch.object(manager, 'LOG') as log:
            compute = manager.ComputeManager()
        return compute, log

    def assert_runs_as_nova(self, compute, log, text):
        """Issue 19, item 11: one ERROR naming it, and nova's behaviour."""
        log.error.assert_called_once()
        message = log.error.call_args.args[0] % log.error.call_args.args[1:]
        self.assertIn(text, message)
        self.assertFalse(compute._cleanup_runs)
        with mock.patch.object(nova_manager.ComputeManager,
                               'init_host') as init_host, \
                mock.patch('nova_evac_cleanup.sweep.sweep') as sweep, \
                mock.patch('nova_evac_cleanup.host_lock.acquire') as lock:
            compute.init_host(mock.sentinel.service_ref)
        init_host.assert_called_once_with(mock.sentinel.service_ref)
        sweep.assert_not_called()
        lock.assert_not_called()

    def test_patched_nova_runs_as_nova(self):
        # With the patch series nova passes on_shared_storage to
        # _rebuild_default_impl: the mixin passes it through, and cleans
        # nothing up itself.
        calls = []

        def patched(self, context, instance, image_meta, injected_files,
                    admin_password, allocations, bdms, detach_block_devices,
                    attach_block_devices, network_info=None, evacuate=False,
                    block_device_info=None, preserve_ephemeral=False,
                    accel_uuids=None, reimage_boot_volume=False,
                    on_shared_storage=None):
            calls.append(on_shared_storage)

        compute, log = self._manager_on('_rebuild_default_impl', patched)
        self.assert_runs_as_nova(compute, log, 'patch series is applied')
        with mock.patch.object(nova_manager.ComputeManager,
                               '_rebuild_default_impl', patched):
            compute._rebuild_default_impl(
                context=None, instance=mock.sentinel.instance,
                image_meta=None, injected_files=[], admin_password=None,
                allocations={}, bdms=[], detach_block_devices=None,
                attach_block_devices=None, evacuate=True,
                on_shared_storage=False)
        self.assertEqual([False], calls)

    def test_drifted_nova_runs_as_nova(self):
        """A nova update added an argument to an overridden method."""
        def drifted(self, context, instance, orig_image_ref, image_meta,
                    injected_files, new_pass, orig_sys_metadata, bdms,
                    evacuate, on_shared_storage, preserve_ephemeral,
                    migration, request_spec, allocations,
                    request_group_resource_providers_mapping, accel_uuids,
                    reimage_boot_volume, target_state, something_new=None):
            pass

        compute, log = self._manager_on('_do_rebuild_instance', drifted)
        self.assert_runs_as_nova(compute, log, '_do_rebuild_instance')

    def test_nova_that_deletes_the_vtpm_secret_runs_as_nova(self):
        """Before the fix of bug 2125030 destroy deletes the vTPM secret.

        nova 31 before 31.3.0 and 32 before 32.2.0 delete the instance's
        vTPM secret in Barbican when the libvirt driver's destroy removes
        its disks: on a failed evacuation the instance, still on its
        source, would lose it.
        """
        with mock.patch('nova.version.version_string',
                        return_value='32.1.0'):
            compute, log = self._manager_on('init_host',
                                            nova_manager.ComputeManager.
                                            init_host)
        self.assert_runs_as_nova(compute, log, 'vTPM secret')

    def test_mro(self):
        self.assertEqual(
            (manager.ComputeManager, manager.EvacuateCleanupMixin,
             nova_manager.ComputeManager),
            manager.ComputeManager.__mro__[:3])


class TestEndEvacuation(RebuildTestCase):
    """What is left once nova's rebuild code returned or raised."""

    def test_unreadable_share_keeps_the_entry(self):
        """Issue 19, item 10: ESTALE on the share never raises.

        The spawn error stays the one nova records; the journal entry is
        kept, which keeps everything.
        """
        self.mock_on_disk.return_value = True
        self._fail_spawn()
        self.assertRaises(SpawnFailed, self._rebuild)
        evacuation = manager._Evacuation(
            journal.entries(self.compute.host)[0], None)
        real_scandir = os.scandir

        def scandir(path):
            if str(path).startswith(self.instances):
                raise OSError(errno.ESTALE, 'Stale file handle')
            return real_scandir(path)

        with mock.patch('os.scandir', side_effect=scandir):
            self.compute._end_evacuation(self.context, self.instance,
                                         evacuation)
        [entry] = journal.entries(self.compute.host)
        self.assertIsNone(entry.kept)

    def test_kept_leftover_recorded(self):
        self.mock_destroy.side_effect = DestroyFailed('destroy failed')
        self._fail_spawn()
        self.assertRaises(SpawnFailed, self._rebuild)
        self.mock_exists.return_value = True
        evacuation = manager._Evacuation(
            journal.entries(self.compute.host)[0], None)
        with mock.patch.object(self.driver, 'get_info',
                               return_value=mock.Mock(state=1)):
            self.compute._end_evacuation(self.context, self.instance,
                                         evacuation)
            [entry] = journal.entries(self.compute.host)
            self.assertIn('could not be destroyed', entry.kept)
            # The next evacuation of the instance here tries to destroy
            # the guest first; that failing too, it is refused.
            self.migrations.clear()
            self.assertRaises(leftovers.EvacuationLeftoverKept,
                              self._rebuild)
        self.assertEqual(1, self.mock_spawn.call_count)

    def test_nothing_left_forgets_the_entry(self):
        self._fail_spawn()
        self.assertRaises(SpawnFailed, self._rebuild)
        evacuation = manager._Evacuation(
            journal.entries(self.compute.host)[0], None)
        # The fake driver here removed nothing: remove what spawn made.
        path = os.path.join(self.instances, self.instance.uuid)
        for name in os.listdir(path):
            os.unlink(os.path.join(path, name))
        self.compute._end_evacuation(self.context, self.instance, evacuation)
        self.assertEqual([], journal.entries(self.compute.host))
        self.assertFalse(os.path.exists(path))


class TestWhatTheExplorerFound(RebuildTestCase):
    """Regressions for the cells the fault-point explorer broke.

    Each test names its cell of ``tox -e explore`` (scenario, point, fault)
    on non-shared storage; ``tests/explore/RESULTS.rst`` has the table.
    """

    def setUp(self):
        super().setUp()
        self.migration = self._migration(self.instance)
        self.useFixture(test.fixtures.MockPatchObject(
            objects.Migration, 'get_by_id', return_value=self.migration))
        self.mock_migration_save = self.useFixture(
            test.fixtures.MockPatchObject(objects.Migration, 'save')).mock
        self.current = objects.Instance(
            uuid=self.instance.uuid, host='compute0',
            task_state=task_states.REBUILD_SPAWNING,
            vm_state=vm_states.ACTIVE, migration_context=None)
        self.useFixture(test.fixtures.MockPatchObject(
            objects.Instance, 'get_by_uuid', return_value=self.current))
        self.mock_deallocate = self.useFixture(
            test.fixtures.MockPatchObject(
                self.compute.rt,
                'delete_allocation_for_evacuated_instance')).mock
        self.useFixture(test.fixtures.MockPatchObject(
            self.compute, '_get_compute_info',
            return_value=objects.ComputeNode(hypervisor_hostname='node')))

    def _evacuating(self, error=None):
        """The evacuation as the mixin holds it while nova handles it."""
        evacuation = manager._Evacuation(None, self.migration)
        evacuation.error = error
        self.compute._evacuations[self.instance.uuid] = evacuation
        return evacuation

    def test_spawn_error_journaled(self):
        """spawn-fails, any point after the spawn failure, die.

        A start that ends the evacuation records the spawn error, not only
        that the destination died.
        """
        self._fail_spawn()
        self.assertRaises(SpawnFailed, self._rebuild)
        [entry] = journal.entries(self.compute.host)
        self.assertEqual('SpawnFailed: spawn failed', entry.error)

    def test_failure_before_spawn_claims_no_files(self):
        """shared, evacuate driver.rebuild#1 raise.

        The evacuation failed before nova answered "shared?": the shared
        directory's files were taken for its leftovers, the next
        evacuation refused, with ``rm -rf`` of the server's only disk.
        """
        path = os.path.join(self.instances, self.instance.uuid)
        os.makedirs(path)
        disk = os.path.join(path, 'disk')
        open(disk, 'w').close()
        entry = journal.Entry(self.compute.host, self.instance.uuid,
                              self.migration.uuid, self.migration.id)
        journal.write(entry)
        self.compute._end_evacuation(
            self.context, self.instance,
            manager._Evacuation(entry, self.migration))
        self.assertEqual([], journal.entries(self.compute.host))
        self.assertTrue(os.path.exists(disk))

    def test_destroy_failure_powers_the_guest_off(self):
        """spawn-fails, driver.destroy#1, raise: split brain before."""
        self._fail_spawn()
        self.mock_destroy.side_effect = DestroyFailed('destroy failed')
        with mock.patch.object(self.driver, 'power_off') as power_off:
            self.assertRaises(SpawnFailed, self._rebuild)
        power_off.assert_called_once_with(mock.ANY)
        self.assertEqual(self.instance.uuid,
                         power_off.call_args.args[0].uuid)

    def test_next_evacuation_destroys_the_kept_guest(self):
        """spawn-fails, driver.destroy#1, raise: refused forever before."""
        self._fail_spawn()
        self.mock_destroy.side_effect = DestroyFailed('destroy failed')
        self.assertRaises(SpawnFailed, self._rebuild)
        [entry] = journal.entries(self.compute.host)
        self.compute._end_evacuation(
            self.context, self.instance,
            manager._Evacuation(entry, self.migration))
        guest = {'here': True}
        self.mock_exists.side_effect = lambda instance: guest['here']

        def destroy(*args, **kwargs):
            guest['here'] = False
            path = os.path.join(self.instances, self.instance.uuid)
            for name in os.listdir(path):
                os.unlink(os.path.join(path, name))
            os.rmdir(path)

        self.mock_destroy.side_effect = destroy
        self.mock_spawn.side_effect = None
        with mock.patch.object(self.driver, 'get_info',
                               return_value=mock.Mock(state=1)):
            leftovers.clear_or_refuse(self.compute, self.context,
                                      self.instance, uuids.next_migration)
        self.assertEqual(True,
                         self.mock_destroy.call_args.kwargs['destroy_disks'])
        self.assertEqual([], journal.entries(self.compute.host))

    def test_nova_handler_failure_keeps_the_spawn_error(self):
        """spawn-fails, placement.PUT /allocations/{uuid}#1, raise."""
        spawn_error = SpawnFailed('spawn failed')
        self._evacuating(spawn_error)

        def handled():
            with self.compute._error_out_instance_on_exception(
                    self.context, self.instance):
                try:
                    raise spawn_error
                except SpawnFailed:
                    # nova's handler removes this host's allocation: fails.
                    raise exception.AllocationDeleteFailed(
                        consumer_uuid=self.instance.uuid, error='503')

        raised = self.assertRaises(SpawnFailed, handled)
        self.assertIs(spawn_error, raised)
        self.assertEqual('failed', self.migration.status)
        self.mock_deallocate.assert_called_once_with(
            self.context, self.instance, 'node', node_type='destination')

    def test_original_error_recorded_if_nova_could_not(self):
        """spawn-fails, InstanceFault.create#1 and Instance.save#6, raise."""
        spawn_error = SpawnFailed('spawn failed')
        evacuation = self._evacuating(spawn_error)
        with mock.patch('nova.compute.utils.add_instance_fault_from_exc'
                        ) as add_fault:
            try:
                raise DestroyFailed('saving the instance in ERROR failed')
            except DestroyFailed:
                self.compute._record_original_error(
                    self.context, self.instance, evacuation)
        add_fault.assert_called_once_with(
            self.context, self.instance, spawn_error, mock.ANY)

    def test_server_left_in_its_task_state_put_into_error(self):
        """spawn-fails, Instance.save#7, raise: stuck before."""
        self.migration.status = 'failed'
        self.mock_save.reset_mock()
        self.compute._release_if_held(self.context, self.instance,
                                      self._evacuating())
        self.mock_save.assert_called_once_with(
            expected_task_state=[task_states.REBUILD_SPAWNING])
        self.assertEqual(vm_states.ERROR, self.current.vm_state)
        self.assertIsNone(self.current.task_state)

    def test_recorded_here_finishes_finish_evacuation(self):
        """evacuate, Migration.save#2, raise: pre-migrating before."""
        self.current.host = self.compute.host
        self.current.migration_context = objects.MigrationContext(
            migration_id=self.migration.id)
        with mock.patch.object(self.current,
                               'drop_migration_context') as drop:
            self.compute._end_unrecorded_evacuation(
                self.context, self.instance, self._evacuating(),
                DestroyFailed('the migration save failed'))
        drop.assert_called_once_with()
        self.assertEqual('done', self.migration.status)
        self.mock_deallocate.assert_not_called()
        self.mock_destroy.assert_not_called()

    def test_failure_before_the_rebuild_began(self):
        """evacuate, InstanceActionEvent.event_start#1, raise.

        The migration stayed ``accepted``: the conductor took it for the
        next evacuation's, which then never ended.
        """
        self.migration.status = 'accepted'
        with mock.patch.object(nova_manager.ComputeManager,
                               'rebuild_instance',
                               side_effect=DestroyFailed('event_start')):
            self.assertRaises(
                DestroyFailed, self.compute.rebuild_instance, self.context,
                self.instance, None, None, None, None, None, None,
                recreate=True, on_shared_storage=None,
                preserve_ephemeral=False, migration=self.migration,
                scheduled_node='node', limits={}, request_spec=None,
                accel_uuids=[], reimage_boot_volume=False,
                target_state=None)
        self.assertEqual('failed', self.migration.status)
        self.mock_deallocate.assert_called_once()
