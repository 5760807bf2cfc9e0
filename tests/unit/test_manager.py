# SPDX-License-Identifier: Apache-2.0

"""Tests of the evacuation cleanup in nova's rebuild code path.

They drive nova's real ``rebuild_instance`` and everything it calls
(through the mixin) with the driver, the resource tracker and the services
around them mocked, in the style of nova's ``test_compute_mgr.py`` rebuild
tests.
"""

import datetime
import errno
import functools
from importlib import metadata
import json
import os
import threading
import traceback
from unittest import mock

import fixtures
from neutronclient.v2_0 import client as neutron_client
from nova.compute import claims
from nova.compute import manager as nova_manager
from nova.compute import power_state
from nova.compute import resource_tracker
from nova.compute import task_states
from nova.compute import vm_states
import nova.conf
from nova import context as nova_context
from nova import exception
from nova.network import neutron
from nova import objects
from nova.scheduler.client import report
from nova import test
from nova.tests import fixtures as nova_fixtures
from nova.tests.unit import fake_instance
from nova.virt import driver as virt_driver
from nova.volume import cinder
import oslo_messaging as messaging
from oslo_utils.fixture import uuidsentinel as uuids
from oslo_utils import uuidutils

from nova_evac_cleanup import ending
from nova_evac_cleanup import evacuation
from nova_evac_cleanup import guest
from nova_evac_cleanup import host_lock
from nova_evac_cleanup import journal
from nova_evac_cleanup import leftovers
from nova_evac_cleanup import manager
from nova_evac_cleanup import nova_support

CONF = nova.conf.CONF


def _running_until_powered_off(driver):
    """The guest runs until the driver powers it off (its destroy fails)."""
    state = [power_state.RUNNING]

    def power_off(instance, *args, **kwargs):
        state[0] = power_state.SHUTDOWN

    return mock.patch.multiple(
        driver, get_info=mock.Mock(
            side_effect=lambda instance: mock.Mock(state=state[0])),
        power_off=mock.Mock(side_effect=power_off))


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
        # A manager built on a nova changed by a test leaves its check.
        self.addCleanup(nova_support.changed.cache_clear)
        self.compute = manager.ComputeManager()
        self.driver = self.compute.driver
        self.context = nova_context.RequestContext(
            'fake-user', 'fake-project')
        self.instance = self._instance()
        self.network_info = mock.sentinel.network_info
        # What attach returns on this host: spawn and destroy must get it.
        self.new_bdi = {'block_device_mapping': [mock.sentinel.attached]}
        self.old_bdi = {'block_device_mapping': [{
            'volume_id': uuids.volume, 'attachment_id': uuids.source}]}

        self.useFixture(test.nova_fixtures.SpawnIsSynchronousFixture())
        for target in ('nova.compute.utils.notify_usage_exists',
                       'nova.compute.utils.notify_about_instance_rebuild',
                       'nova.compute.utils.notify_about_instance_usage',
                       'nova.objects.InstanceActionEvent.event_start',
                       'nova.objects.InstanceActionEvent.'
                       'event_finish_with_failure'):
            self.useFixture(test.fixtures.MockPatch(target))
        self.mock_fault = self.useFixture(test.fixtures.MockPatch(
            'nova.compute.utils.add_instance_fault_from_exc')).mock
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
        # rebuild_instance's claim, allocations and resource tracking.
        self.compute.reportclient = mock.Mock()
        self.compute.reportclient.get_allocs_for_consumer.return_value = {
            'allocations': {}}
        # No provider below the nodes.
        self.compute.reportclient.get_providers_in_tree.side_effect = (
            lambda context, rp: [{'uuid': rp}])
        patch(test.fixtures.MockPatchObject(
            self.compute.rt, 'rebuild_claim',
            side_effect=lambda *args, **kwargs: claims.NopClaim()))
        self.mock_finish = patch(test.fixtures.MockPatchObject(
            self.compute.rt, 'finish_evacuation',
            side_effect=lambda instance, node, migration: setattr(
                instance, 'host', self.compute.host))).mock
        self.mock_deallocate = patch(test.fixtures.MockPatchObject(
            self.compute.rt, 'delete_allocation_for_evacuated_instance')).mock
        patch(test.fixtures.MockPatchObject(
            self.compute, '_get_compute_info',
            return_value=objects.ComputeNode(hypervisor_hostname='node')))
        # The instance as the database has it once nova's handler ended a
        # failed evacuation: on its source, no task state.
        self.current = objects.Instance(
            uuid=self.instance.uuid, host='compute0', task_state=None,
            vm_state=vm_states.ERROR, migration_context=None,
            deleted=False, launched_at=None, id=1)
        self.mock_get = patch(test.fixtures.MockPatchObject(
            objects.Instance, 'get_by_uuid',
            side_effect=lambda *args, **kwargs: self.current)).mock
        self.mock_migration_save = patch(test.fixtures.MockPatchObject(
            objects.Migration, 'save')).mock
        # The journal's writes: the one just before spawn is durable.
        self.written = []
        real_write = journal.write

        def write(entry, *args, **kwargs):
            durable = (args or [kwargs.get('durable', False)])[0]
            self.written.append((durable, entry.as_dict()))
            return real_write(entry, *args, **kwargs)

        self.mock_write = patch(test.fixtures.MockPatch(
            'nova_evac_cleanup.journal.write', side_effect=write)).mock

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
        # What the database says of the evacuation once nova's handler ran
        # (tests/unit/test_ending.py has the ending on nova's database).
        self.mock_migrations = patch(test.fixtures.MockPatchObject(
            objects.MigrationList, 'get_by_filters',
            side_effect=lambda context, filters, **kwargs: [
                migration for uuid, migration in self.migrations.items()
                if uuid == filters.get('instance_uuid')])).mock
        self.mock_nodes = patch(test.fixtures.MockPatchObject(
            objects.ComputeNodeList, 'get_all_by_host',
            return_value=[])).mock
        # nova's handler records the fault of the error it ends with.
        patch(test.fixtures.MockPatchObject(
            objects.InstanceFault, 'get_latest_for_instance',
            return_value=objects.InstanceFault(
                created_at=datetime.datetime(2100, 1, 1))))
        # A volume, whose attachment nova's detach_block_devices replaces by
        # one of this host's (nova's _detach_volume deletes the source's).
        self.bdms = objects.BlockDeviceMappingList(objects=[
            objects.BlockDeviceMapping(
                volume_id=uuids.volume, attachment_id=uuids.source,
                source_type='volume', destination_type='volume',
                instance_uuid=uuids.instance)])
        patch(test.fixtures.MockPatchObject(
            objects.BlockDeviceMappingList, 'get_by_instance_uuid',
            return_value=self.bdms))
        patch(test.fixtures.MockPatchObject(objects.BlockDeviceMapping,
                                            'save'))
        patch(fixtures.MonkeyPatch(
            'nova.compute.manager.ComputeManager._detach_volume',
            lambda self, context, bdm, instance, destroy_bdm=True,
            attachment_id=None: None))
        self.compute.volume_api = mock.create_autospec(cinder.API,
                                                       instance=True)
        made = iter([uuids.dest, uuids.reserved])
        self.compute.volume_api.attachment_create.side_effect = (
            lambda *args, **kwargs: {'id': next(made)})
        # What the evacuation connected here is released after a destroy:
        # cinder deletes its attachment, a reserved one takes its place.
        self.mock_unwind = self.compute.volume_api.attachment_delete

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
        return self.compute.rebuild_instance(
            self.context, instance, uuids.image, None, injected_files=[],
            new_pass=None, orig_sys_metadata={},
            bdms=self.bdms, recreate=evacuate,
            on_shared_storage=on_shared_storage, preserve_ephemeral=False,
            migration=self._migration(instance) if evacuate else None,
            scheduled_node='node', limits={}, request_spec=None,
            accel_uuids=[], reimage_boot_volume=False, target_state=None)

    def _migration(self, instance):
        """The evacuation's migration record, one per instance."""
        if instance.uuid not in self.migrations:
            self.migrations[instance.uuid] = objects.Migration(
                id=len(self.migrations) + 1,
                uuid=uuidutils.generate_uuid(), status='pre-migrating',
                created_at=datetime.datetime(2026, 1, 1))
        return self.migrations[instance.uuid]

    def _fail_spawn(self):
        error = SpawnFailed('spawn failed')
        self.mock_spawn.side_effect = error
        return error

    def assert_destroyed(self, destroy_disks):
        self.mock_destroy.assert_called_once_with(
            mock.ANY, mock.ANY, self.network_info,
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

    def before_spawn(self, instance=None):
        """The journal entry written just before spawn."""
        uuid = (instance or self.instance).uuid
        return [entry for durable, entry in self.written
                if durable and entry['spawned'] and
                entry['instance_uuid'] == uuid][0]

    def _init_host(self):
        """The manager's start-up, nova's own mocked.

        :returns: the journal's log, and whether the sweep would act on
            the entry it finds
        """
        self.flags(lock_path=self.useFixture(fixtures.TempDir()).path,
                   group='oslo_concurrency')
        self.addCleanup(lambda: host_lock.release(self.compute._host_lock))
        directory = os.path.join(CONF.evacuate_cleanup.journal_path,
                                 self.compute.host)
        os.makedirs(directory)
        with open(os.path.join(directory, uuids.swept + '.json'),
                  'w') as stream:
            json.dump(journal.Entry(self.compute.host, uuids.instance,
                                    uuids.swept).as_dict(), stream)
        with mock.patch.object(nova_manager.ComputeManager,
                               'init_host'), \
                mock.patch('nova_evac_cleanup.sweep.settle') as settle, \
                mock.patch.object(journal, 'LOG') as log:
            self.compute.init_host(None)
        return log, settle.call_args.kwargs['act']

    def _claimed(self):
        """Whether the evacuation created the instance directory."""
        return bool(self.before_spawn()['claim'])


class TestEvacuateSpawnFailure(RebuildTestCase):
    """An evacuation whose spawn fails gets its guest destroyed."""

    def test_the_driver_creates_the_instance_directory(self):
        """As on stock nova: the driver knows it may clean it up.

        Issue 41, item 4: the manager created the directory just before
        spawn, so nova's libvirt driver found it existing, returned
        ``created_instance_dir`` False and skipped its own cleanup of it
        (nova's ``test_evacuate_failure_nonshared_instancedir``). Its
        disks are still the evacuation's: the directory was absent before
        spawn, on the filesystem it is on now.
        """
        path = os.path.join(self.instances, self.instance.uuid)
        found = []

        def spawn(*args, **kwargs):
            found.append(os.path.lexists(path))
            os.mkdir(path)
            raise SpawnFailed('spawn failed')

        self.mock_spawn.side_effect = spawn
        self.assertRaises(SpawnFailed, self._rebuild)
        self.assertEqual([False], found)
        self.assert_destroyed(destroy_disks=True)

    def test_non_shared_storage_destroys_guest_and_disks(self):
        error = self._fail_spawn()

        raised = self.assertRaises(SpawnFailed, self._rebuild)

        self.assertIs(error, raised)
        self.mock_spawn.assert_called_once()
        self.assertEqual(self.new_bdi,
                         self.mock_spawn.call_args.kwargs['block_device_info'])
        self.assert_destroyed(destroy_disks=True)
        # Then this host's volume connections are released: the mapping
        # whose attachment the evacuation made here.
        self.mock_unwind.assert_called_once_with(mock.ANY, uuids.dest)
        self.assertEqual(uuids.reserved, self.bdms[0].attachment_id)

    def test_no_volume_no_unwind(self):
        """Issue 27, item 4: no SQL the cleanup does not need.

        Spawn was given no volume: nothing was connected here, and the
        block device mappings are not read.
        """
        self.new_bdi['block_device_mapping'] = []
        self._fail_spawn()

        self.assertRaises(SpawnFailed, self._rebuild)

        self.assert_destroyed(destroy_disks=True)
        self.mock_unwind.assert_not_called()

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
        """Issue 41, item 3: the answer nova evacuates on, observed.

        nova asks its driver once; the manager watches that call as it
        watches spawn, and keeps or removes disks by that answer alone.
        Shared: the disks are the server's own, kept.
        """
        self.mock_on_disk.return_value = True
        self._fail_spawn()

        self.assertRaises(SpawnFailed, self._rebuild)

        self.assertEqual(1, self.mock_on_disk.call_count)
        self.assert_destroyed(destroy_disks=False)
        self.assertTrue(self.before_spawn()['shared'])

    def test_directory_found_before_spawn_keeps_disks(self):
        """Issue 19, item 1: nova said not shared, the directory exists.

        A share that was unreachable when nova looked: what is in the
        directory may be the only copy of the disks.
        """
        path = os.path.join(self.instances, self.instance.uuid)
        os.makedirs(path)
        open(os.path.join(path, 'disk'), 'w').close()
        self._fail_spawn()

        self.assertRaises(SpawnFailed, self._rebuild)

        self.assert_destroyed(destroy_disks=False)
        self.assertIsNone(self.before_spawn()['shared'])
        # Kept, with the journal entry that says so.
        self.assertTrue(os.path.exists(os.path.join(path, 'disk')))
        [entry] = journal.entries(self.compute.host)
        self.assertIsNone(entry.shared)

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

        during = []

        def destroy(context, instance, *args, **kwargs):
            self.destroyed.append(instance)
            self.saving = instance
            instance.save()
            # The driver still sees this host's topology after it saved.
            during.extend([saved[-1], instance.numa_topology])
            self.saving = self.instance

        self.mock_destroy.side_effect = destroy

        self.assertRaises(SpawnFailed, self._rebuild)

        self.assertIsNone(during[0])
        self.assertEqual(self.instance.migration_context.new_numa_topology
                         .obj_to_primitive(), during[1].obj_to_primitive())
        self.assertIsNone(self.instance.numa_topology)

    def test_destroy_failure_reraises_spawn_error(self):
        error = self._fail_spawn()
        self.mock_destroy.side_effect = DestroyFailed('destroy failed')

        with mock.patch.object(guest, 'LOG') as mock_log:
            raised = self.assertRaises(SpawnFailed, self._rebuild)

        self.assertIs(error, raised)
        # The traceback is spawn's, not destroy's.
        frames = [f.name for f in traceback.extract_tb(raised.__traceback__)]
        self.assertIn('_rebuild_default_impl', frames)
        self.assertNotIn('_destroy', frames)
        self.mock_destroy.assert_called_once()
        # Its volume connections are released even so (issue 40, item 4).
        self.mock_unwind.assert_called_once()
        # Both errors are logged at ERROR with the instance, once.
        [logged] = [call for call in mock_log.exception.call_args_list
                    if 'could not destroy' in call.args[0]]
        self.assertIn('SpawnFailed: spawn failed', logged.args)
        self.assertEqual(self.instance.uuid, logged.kwargs['instance_uuid'])
        mock_log.error.assert_not_called()

    def test_cleanup_is_logged(self):
        self._fail_spawn()

        with mock.patch.object(ending, 'LOG') as mock_log:
            self.assertRaises(SpawnFailed, self._rebuild)

        [message] = [call.args[0] % call.args[1:]
                     for call in mock_log.info.call_args_list
                     if 'its disks' in call.args[0] % call.args[1:]]
        self.assertIn(self.compute.host, message)
        self.assertIn('removed its disks', message)

    def test_shared_storage_cleanup_says_disks_kept(self):
        self._fail_spawn()
        self.mock_on_disk.return_value = True

        with mock.patch.object(ending, 'LOG') as mock_log:
            self.assertRaises(SpawnFailed, self._rebuild)

        [message] = [call.args[0] % call.args[1:]
                     for call in mock_log.info.call_args_list
                     if 'its disks' in call.args[0] % call.args[1:]]
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
            uuid: self.before_spawn(instance)['shared']
            for uuid, instance in ((first.uuid, first),
                                   (second.uuid, second))})


class TestEvacuateFailureAfterSpawn(RebuildTestCase):
    """An evacuation that fails after spawn returned: the guest runs here.

    nova puts the instance into ERROR on its source (or finishes deleting
    it); the guest spawned here is destroyed, as after a failed spawn.
    """

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

        # nova's rebuild_instance ends a deleted instance's quietly.
        self._rebuild()

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
        self.current.host = self.compute.host

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
            mock.ANY, self.instance, network_info=mock.ANY,
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
            # nova's BuildAbortException, an expected one of its RPC API.
            self.assertRaises(messaging.ExpectedException, self._rebuild)

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

    def test_evacuate_makes_stock_driver_calls(self):
        """Issue 41, item 3: nova's answer observed, not asked again.

        nova asks instance_on_disk once; the manager watches that call as
        it watches spawn, and takes nova's answer from it.
        """
        self._rebuild()

        self.mock_spawn.assert_called_once()
        self.mock_destroy.assert_not_called()
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


class TestFailureCost(RebuildTestCase):
    """What ending a failed evacuation reads once nova's handler ran."""

    def setUp(self):
        super().setUp()
        # The node nova's handler removes the allocation against, through
        # its own resource tracker and report client.
        self.compute.rt.compute_nodes['node'] = objects.ComputeNode(
            uuid=uuids.node, host=self.compute.host)
        self.mock_deallocate.side_effect = functools.partial(
            resource_tracker.ResourceTracker.
            delete_allocation_for_evacuated_instance, self.compute.rt)
        # On the class, as nova's own method; given, not autospecced:
        # oslotest's autospec takes the client for an argument too many.
        self.mock_remove = mock.Mock(return_value=True)
        self.useFixture(test.fixtures.MockPatchObject(
            report.SchedulerReportClient,
            'remove_provider_tree_from_instance_allocation',
            self.mock_remove))

    def test_nova_ended_it_nothing_read_again(self):
        """Issue 41: nova's handler raised the spawn's own error.

        This host had destroyed the guest and released the volumes before
        it; nova's handler then failed the migration, removed the
        allocation, dropped the claim and recorded the fault, or it would
        have raised another error, and saved the server in ERROR with no
        task state: nothing is read again, not placement, not the server.
        """
        self._fail_spawn()

        with self._saves_as_nova():
            self.assertRaises(SpawnFailed, self._rebuild)

        self.mock_destroy.assert_called_once()
        self.mock_unwind.assert_called_once()
        # nova's removal of the allocation only logs a failure: its answer
        # is seen as it is made. Placement, the server and the rest of the
        # state are not read again.
        self.mock_remove.assert_called_once_with(
            self.compute.rt.reportclient, mock.ANY, self.instance.uuid,
            uuids.node)
        self.compute.reportclient.get_allocs_for_consumer.assert_not_called()
        self.mock_get.assert_not_called()
        self.mock_nodes.assert_not_called()
        self.assertEqual(1, self.mock_migrations.call_count)
        self.assertEqual([], journal.entries(self.compute.host))

    def _fail_spawn_nova_keeps_the_allocation(self):
        """nova's handler will fail to remove the allocation here."""
        self._fail_spawn()
        self.mock_remove.return_value = False
        self.compute.reportclient.get_allocs_for_consumer.return_value = {
            'allocations': {uuids.node: {'resources': {'VCPU': 1}},
                            uuids.source_node: {'resources': {'VCPU': 1}}}}
        self.mock_nodes.return_value = [mock.Mock(uuid=uuids.node)]

    def test_an_allocation_nova_could_not_remove_is_removed(self):
        """nova's handler logs a failed removal and raises the spawn's."""
        self._fail_spawn_nova_keeps_the_allocation()

        with self._saves_as_nova():
            self.assertRaises(SpawnFailed, self._rebuild)

        self.compute.reportclient.\
            remove_provider_tree_from_instance_allocation.\
            assert_called_once_with(mock.ANY, self.instance.uuid, uuids.node)

    def test_a_port_bound_here_is_reported_once(self):
        """Ended by the rule after nova's handler: one WARNING per port."""
        self._fail_spawn_nova_keeps_the_allocation()
        client = mock.create_autospec(neutron_client.Client, instance=True)
        client.list_ports.return_value = {'ports': [{
            'id': uuids.port, 'binding:host_id': self.compute.host,
            'binding:vif_type': 'ovs'}]}

        with self._saves_as_nova(), mock.patch.object(
                neutron, 'get_client', autospec=True, return_value=client):
            self.assertRaises(SpawnFailed, self._rebuild)

        self.assertIn('ended; the server is ERROR', self.stdlog.logger.output)
        self.assertEqual(1, self.stdlog.logger.output.count(
            'Port %s of the server is bound to' % uuids.port))

    def test_without_volumes_no_move_is_read(self):
        """Spawn was given no volume: none to release, no move to read."""
        self._fail_spawn()
        self.mock_attach.return_value = {'block_device_mapping': []}

        with self._saves_as_nova():
            self.assertRaises(SpawnFailed, self._rebuild)

        self.mock_destroy.assert_called_once()
        self.mock_unwind.assert_not_called()
        self.mock_migrations.assert_not_called()
        self.assertEqual([], journal.entries(self.compute.host))

    def _saves_as_nova(self):
        """Instance.save as nova's: what it saved is no change any more."""
        return mock.patch.object(
            objects.Instance, 'save',
            lambda instance, *args, **kwargs: instance.obj_reset_changes())

    def test_a_task_state_nova_could_not_revert_is_ended(self):
        """nova's reverts_task_state only logs a failed save."""
        self._fail_spawn()
        self.current.task_state = task_states.REBUILD_SPAWNING
        self.current.migration_context = self.instance.migration_context

        self.assertRaises(SpawnFailed, self._rebuild)

        self.compute.reportclient.get_allocs_for_consumer.assert_called()
        self.assertIn(mock.call(expected_task_state=[
            task_states.REBUILD_SPAWNING]), self.mock_save.call_args_list)


class TestOverriddenSignatures(test.NoDBTestCase):
    """Fail when nova changes a method the mixin overrides.

    The mixin relies on the arguments nova's methods were written with; a
    nova release that renames, adds or reorders them must be reviewed. At
    run time such a nova gets nova's own behaviour, never a refusal to
    start.
    """

    def setUp(self):
        super().setUp()
        nova_support.changed.cache_clear()
        self.addCleanup(nova_support.changed.cache_clear)

    def test_every_override_is_checked_at_start_up(self):
        """nova_support checks each method the mixin overrides."""
        overridden = {
            name for name, value in vars(manager.EvacuateCleanupMixin).items()
            if callable(value) and hasattr(nova_manager.ComputeManager, name)
        } - {'__init__'}
        self.assertEqual(sorted(overridden), sorted(
            name for (owner, name), (cost, _) in nova_support.NAMES.items()
            if owner is nova_manager.ComputeManager and
            cost == nova_support.HOOK))
        self.assertEqual({}, nova_support.changed())

    def _manager_on(self, name, replacement):
        """A manager built on a nova whose ``name`` is ``replacement``."""
        with mock.patch.object(nova_manager.ComputeManager, name,
                               replacement), \
                mock.patch.object(nova_support, 'LOG') as log:
            compute = manager.ComputeManager()
        return compute, log

    def assert_runs_as_nova(self, compute, log, text):
        """Issue 19, item 11: one ERROR naming it, and nova's behaviour."""
        log.error.assert_called_once()
        message = log.error.call_args.args[0] % log.error.call_args.args[1:]
        self.assertIn(text, message)
        # The line the operator guide tells to look for after an upgrade.
        self.assertIn('nova-evac-cleanup cannot trust its hooks on this nova',
                      message)
        self.assertFalse(compute._runs[nova_support.HOOK])
        with mock.patch.object(nova_manager.ComputeManager,
                               'init_host') as init_host, \
                mock.patch('nova_evac_cleanup.sweep.on_start') as sweep, \
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
                context=None, instance=objects.Instance(uuid=uuids.instance),
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
        error = self._fail_spawn()
        real_scandir = os.scandir

        def scandir(path):
            if str(path).startswith(self.instances):
                raise OSError(errno.ESTALE, 'Stale file handle')
            return real_scandir(path)

        with mock.patch('os.scandir', side_effect=scandir):
            self.assertIs(error, self.assertRaises(SpawnFailed,
                                                   self._rebuild))
        [entry] = journal.entries(self.compute.host)
        self.assertEqual(journal.BEGUN, entry.phase)
        self.assertTrue(entry.shared)

    def _guest_left_undestroyable(self):
        """Spawn defines the guest, then fails; its destroy fails too."""
        self.mock_destroy.side_effect = DestroyFailed('destroy failed')

        def spawn(*args, **kwargs):
            self.mock_exists.return_value = True
            raise SpawnFailed('spawn failed')

        self.mock_spawn.side_effect = spawn

    def test_kept_leftover_recorded(self):
        self._guest_left_undestroyable()
        with _running_until_powered_off(self.driver):
            self.assertRaises(SpawnFailed, self._rebuild)
            [entry] = journal.entries(self.compute.host)
            self.assertEqual(journal.KEPT, entry.phase)
            # The next evacuation of the instance here tries to destroy
            # the guest first; that failing too, it is refused.
            self.migrations.clear()
            self.assertRaises(leftovers.EvacuationLeftoverKept,
                              self._rebuild)
        self.assertEqual(1, self.mock_spawn.call_count)

    def test_kept_leftover_recorded_whatever_the_instance_in_memory_says(
            self):
        """The entry's end goes by what nova saved, not by its object.

        ``finish_evacuation`` names this host in the instance before its
        save: should that save fail, and the read that follows, the object
        names this host while the server is still its source's. What is
        kept here keeps its record, and the next evacuation is refused.
        """
        self._guest_left_undestroyable()
        with _running_until_powered_off(self.driver), mock.patch.object(
                self.compute, '_do_rebuild_instance',
                side_effect=self._rebuild_naming_this_host()):
            self.assertRaises(SpawnFailed, self._rebuild)
        self.assertNotEqual(self.compute.host, objects.Instance.get_by_uuid(
            self.context, self.instance.uuid).host)
        [entry] = journal.entries(self.compute.host)
        self.assertEqual(journal.KEPT, entry.phase)

    def _rebuild_naming_this_host(self):
        real = self.compute._do_rebuild_instance

        def rebuild(context, instance, *args, **kwargs):
            try:
                return real(context, instance, *args, **kwargs)
            finally:
                # Unsaved, as a failed save in finish_evacuation leaves it.
                instance.host = self.compute.host

        return rebuild

    def test_a_guest_that_still_runs_is_never_released_over(self):
        """Neither destroyed nor powered off: the ending keeps its hold."""
        self._guest_left_undestroyable()
        with mock.patch.object(self.driver, 'get_info', return_value=mock.Mock(
                state=power_state.RUNNING)):
            self.assertRaises(SpawnFailed, self._rebuild)
        [entry] = journal.entries(self.compute.host)
        self.assertEqual(journal.ENDING, entry.phase)
        self.assertNotIn('destroy', entry.done)
        self.assertIn('migration', entry.done)

    def test_nothing_left_forgets_the_entry(self):
        """The directory it made goes with its marker, then the entry."""
        self._fail_spawn()
        self.assertRaises(SpawnFailed, self._rebuild)
        self.assertTrue(self._claimed())
        self.assertEqual([], journal.entries(self.compute.host))
        self.assertFalse(os.path.exists(
            os.path.join(self.instances, self.instance.uuid)))


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

    def test_spawn_error_journaled(self):
        """spawn-fails, any point after the spawn failure, die.

        A start that ends the evacuation records the spawn error, not only
        that the destination died.
        """
        self._fail_spawn()
        self.assertRaises(SpawnFailed, self._rebuild)
        self.assertEqual('SpawnFailed: spawn failed',
                         self.written[-1][1]['error'])

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
        with mock.patch.object(self.driver, 'rebuild',
                               side_effect=SpawnFailed('rebuild')):
            self.assertRaises(SpawnFailed, self._rebuild)
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
        guest = {'here': False}
        self.mock_exists.side_effect = lambda instance: guest['here']

        def spawn(*args, **kwargs):
            guest['here'] = True
            path = os.path.join(self.instances, self.instance.uuid)
            os.mkdir(path)
            open(os.path.join(path, 'disk'), 'w').close()
            raise SpawnFailed('spawn failed')

        self.mock_spawn.side_effect = spawn
        self.mock_destroy.side_effect = DestroyFailed('destroy failed')
        with _running_until_powered_off(self.driver):
            self.assertRaises(SpawnFailed, self._rebuild)
            [entry] = journal.entries(self.compute.host)
            self.assertEqual(journal.KEPT, entry.phase)

            def destroy(*args, **kwargs):
                guest['here'] = False
                path = os.path.join(self.instances, self.instance.uuid)
                for name in os.listdir(path):
                    os.unlink(os.path.join(path, name))
                os.rmdir(path)

            self.mock_destroy.side_effect = destroy
            leftovers.clear_or_refuse(self.compute, self.context,
                                      self.instance, uuids.next_migration)
        self.assertEqual(True,
                         self.mock_destroy.call_args.kwargs['destroy_disks'])
        self.assertEqual([], journal.entries(self.compute.host))

    def test_nova_handler_failure_keeps_the_spawn_error(self):
        """spawn-fails, placement.PUT /allocations/{uuid}#1, raise."""
        spawn_error = self._fail_spawn()
        # nova's handler removes this host's allocation: fails.
        self.mock_deallocate.side_effect = exception.AllocationDeleteFailed(
            consumer_uuid=self.instance.uuid, error='503')
        self.mock_nodes.return_value = [mock.Mock(uuid=uuids.node)]
        self.compute.reportclient.get_allocs_for_consumer.return_value = {
            'allocations': {uuids.node: {}, uuids.source_node: {}}}

        raised = self.assertRaises(SpawnFailed, self._rebuild)

        self.assertIs(spawn_error, raised)
        self.assertEqual('failed', self.migration.status)
        # The ending removes it, through placement's client.
        self.compute.reportclient.\
            remove_provider_tree_from_instance_allocation.\
            assert_called_once_with(mock.ANY, self.instance.uuid, uuids.node)

    def test_original_error_recorded_if_nova_could_not(self):
        """spawn-fails, InstanceFault.create#1 and Instance.save#6, raise."""
        spawn_error = self._fail_spawn()
        self.mock_fault.side_effect = [DestroyFailed('fault'), None]
        raised = self.assertRaises(SpawnFailed, self._rebuild)
        self.assertIs(spawn_error, raised)
        self.mock_fault.assert_called_with(
            mock.ANY, self.instance, spawn_error, mock.ANY)

    def test_server_left_in_its_task_state_put_into_error(self):
        """spawn-fails, Instance.save#7, raise: stuck before.

        nova's handler failed the migration but could not save the
        server: it is held, ended and released from the hold.
        """
        self.useFixture(nova_fixtures.IndirectionAPIFixture(mock.Mock()))
        self._fail_spawn()
        self.current.task_state = task_states.REBUILD_SPAWNING
        self.current.vm_state = vm_states.ACTIVE

        self.assertRaises(SpawnFailed, self._rebuild)

        self.assertEqual('failed', self.migration.status)
        self.assertEqual(
            [mock.call(expected_task_state=[task_states.REBUILD_SPAWNING]),
             mock.call(expected_task_state=[ending.rule.HOLD])],
            self.mock_save.call_args_list[-2:])
        self.assertEqual((vm_states.ERROR, None),
                         (self.current.vm_state, self.current.task_state))
        self.mock_destroy.assert_called_once()

    def test_recorded_here_finishes_finish_evacuation(self):
        """evacuate, Migration.save#2, raise: pre-migrating before."""
        self.useFixture(nova_fixtures.IndirectionAPIFixture(mock.Mock()))
        self.current.host = self.compute.host
        self.current.migration_context = objects.MigrationContext(
            migration_id=self.migration.id)

        def finish(instance, node, migration):
            instance.host = self.compute.host
            raise DestroyFailed('the migration save failed')

        self.mock_finish.side_effect = finish
        with mock.patch.object(
                self.current, 'drop_migration_context',
                side_effect=lambda: setattr(self.current,
                                            'migration_context', None)
        ) as drop:
            self.assertRaises(DestroyFailed, self._rebuild)
        drop.assert_called_once_with()
        self.assertEqual('done', self.migration.status)
        self.mock_deallocate.assert_not_called()
        self.mock_destroy.assert_not_called()

    def test_finish_evacuation_failed_before_recording(self):
        """evacuate, Instance.save#6 (finish_evacuation's), raise.

        The guest runs here, the instance stays on its source: the guest
        is destroyed, the migration failed and this host's allocation
        removed, and nova's handler saves the instance as it is in the
        database (on its source), not as finish_evacuation changed it.
        """
        def finish(instance, node, migration):
            instance.host = self.compute.host
            raise DestroyFailed('finish_evacuation')

        self.useFixture(nova_fixtures.IndirectionAPIFixture(mock.Mock()))
        self.mock_finish.side_effect = finish
        self.compute.reportclient.get_allocs_for_consumer.return_value = {
            'allocations': {uuids.node: {}, uuids.source_node: {}}}
        self.mock_nodes.return_value = [mock.Mock(uuid=uuids.node)]
        with mock.patch.object(objects.Instance, 'refresh') as refresh:
            refresh.side_effect = lambda *args, **kwargs: setattr(
                self.instance, 'host', 'compute0')
            self.assertRaises(DestroyFailed, self._rebuild)
        self.assertEqual('compute0', self.instance.host)
        self.assertEqual('failed', self.migration.status)
        self.compute.reportclient.\
            remove_provider_tree_from_instance_allocation.\
            assert_called_once_with(mock.ANY, self.instance.uuid, uuids.node)
        self.assert_destroyed(destroy_disks=True)

    def test_a_retry_accepted_meanwhile_is_never_put_into_error(self):
        """Issue 40, item 4: an HA retry is never released by this host.

        nova's handler could not save the server (it stays in its
        evacuation's task state) and nova's evacuate API, which checks no
        task state, accepted an HA tool's retry meanwhile. Before, the
        failure handler put the server into ERROR over the retry's
        ``rebuilding``, reading only that the old migration had failed.
        """
        self._fail_spawn()
        retry = objects.Migration(
            id=99, uuid=uuids.retry, status='accepted',
            migration_type='evacuation',
            created_at=datetime.datetime(2026, 1, 2))
        ours = self.migration
        self.mock_migrations.side_effect = (
            lambda context, filters, **kwargs: [retry, ours])
        self.current.task_state = task_states.REBUILDING
        self.current.vm_state = vm_states.ACTIVE

        self.assertRaises(SpawnFailed, self._rebuild)

        self.assertEqual((vm_states.ACTIVE, task_states.REBUILDING),
                         (self.current.vm_state, self.current.task_state))

    def test_unreadable_leftovers_refuse_the_evacuation(self):
        """Issue 40, item 4: when in doubt, keep and refuse.

        What earlier evacuations of the server left here cannot be read
        (the journal is writable, its listing fails). Before, the error
        was logged and the evacuation went on over whatever was kept.
        """
        real = os.listdir

        def listdir(path):
            if str(path).startswith(CONF.evacuate_cleanup.journal_path):
                raise OSError(errno.EIO, 'Input/output error')
            return real(path)

        with mock.patch('os.listdir', side_effect=listdir):
            self.assertRaises(leftovers.EvacuationLeftoverKept,
                              self._rebuild)
        self.mock_spawn.assert_not_called()

    def test_read_error_after_spawn_powers_the_guest_off(self):
        """Issue 40, item 4: a running guest is never left running.

        finish_evacuation failed and the instance cannot be read to tell
        whether it was recorded here. Before, the guest was left running.
        """
        self.mock_finish.side_effect = DestroyFailed('finish_evacuation')
        self.mock_get.side_effect = exception.InstanceNotFound(
            instance_id=self.instance.uuid)
        self.mock_migrations.side_effect = DestroyFailed('database down')
        with mock.patch.object(self.driver, 'power_off') as power_off:
            self.assertRaises(DestroyFailed, self._rebuild)
        power_off.assert_called_once_with(self.instance)
        self.mock_destroy.assert_not_called()

    def test_failure_before_the_rebuild_began(self):
        """evacuate, InstanceActionEvent.event_start#1, raise.

        The migration stayed ``accepted``: the conductor took it for the
        next evacuation's, which then never ended.
        """
        self.useFixture(nova_fixtures.IndirectionAPIFixture(mock.Mock()))
        self.migration.status = 'accepted'
        self.compute.reportclient.get_allocs_for_consumer.return_value = {
            'allocations': {uuids.node: {}, uuids.source_node: {}}}
        self.mock_nodes.return_value = [mock.Mock(uuid=uuids.node)]
        with mock.patch.object(nova_manager.ComputeManager,
                               'rebuild_instance',
                               side_effect=DestroyFailed('event_start')):
            self.assertRaises(DestroyFailed, self._rebuild)
        self.assertEqual('failed', self.migration.status)
        self.compute.reportclient.\
            remove_provider_tree_from_instance_allocation.\
            assert_called_once_with(mock.ANY, self.instance.uuid, uuids.node)
        self.assertEqual([], journal.entries(self.compute.host))


class _Helpers(object):
    """Something of nova's, other than its driver, with a ``spawn``."""

    def __init__(self):
        self.spawned = []

    def spawn(self, func, *args):
        self.spawned.append(func)
        return func(*args)


class TestChangedNova(RebuildTestCase):
    """Issue 27, items 1 and 2: a nova that reorders or wraps its calls.

    The cleanup knows that the driver's spawn failed from the spawn call
    itself (the mixin watches its own driver's ``spawn``), not from nova's
    bytecode or frames: another ``.spawn`` in nova's rebuild, a spawn error
    nova wraps, or ``finish_evacuation`` called elsewhere get the fix; a
    nova whose hooked methods changed gets one ERROR at start-up and
    nova's own behaviour, never another error.
    """

    def _nova_rebuild(self, before_attach=None, wrap=False, finish=False):
        """A ``_rebuild_default_impl`` of a changed nova (evacuation only)."""
        test_case = self

        def rebuild(self, context, instance, image_meta, injected_files,
                    admin_password, allocations, bdms, detach_block_devices,
                    attach_block_devices, network_info=None, evacuate=False,
                    block_device_info=None, preserve_ephemeral=False,
                    accel_uuids=None, reimage_boot_volume=False):
            if before_attach is not None:
                before_attach.spawn(lambda: None)
            detach_block_devices(context, bdms)
            attached = attach_block_devices(context, instance, bdms)
            instance.task_state = task_states.REBUILD_SPAWNING
            try:
                self.driver.spawn(context, instance, image_meta,
                                  injected_files, admin_password,
                                  allocations, network_info=network_info,
                                  block_device_info=attached)
            except Exception as error:
                if not wrap:
                    raise
                raise exception.BuildAbortException(
                    instance_uuid=instance.uuid, reason=str(error)) from error
            if finish:
                self.rt.finish_evacuation(instance, 'node', None)
            test_case.rebuilt = True

        return self.useFixture(fixtures.MockPatchObject(
            nova_manager.ComputeManager, '_rebuild_default_impl', rebuild))

    def test_another_spawn_first(self):
        """Before: the bytecode took the helpers' spawn for the driver's.

        The driver's spawn error then went uncleaned, and an error of the
        helpers' spawn raised IndexError in place of nova's.
        """
        helpers = _Helpers()
        self._nova_rebuild(before_attach=helpers)
        error = self._fail_spawn()

        self.assertIs(error, self.assertRaises(SpawnFailed, self._rebuild))

        self.assertEqual(1, len(helpers.spawned))
        self.assert_destroyed(destroy_disks=True)

    def test_another_spawn_fails_first(self):
        helpers = _Helpers()
        error = SpawnFailed('a helper failed')
        helpers.spawn = mock.Mock(side_effect=error)
        self._nova_rebuild(before_attach=helpers)

        self.assertIs(error, self.assertRaises(SpawnFailed, self._rebuild))

        self.mock_spawn.assert_not_called()
        self.mock_destroy.assert_not_called()

    def test_wrapped_spawn_error(self):
        """Before: nova's wrapper of the spawn error hid it: no cleanup."""
        self._nova_rebuild(wrap=True)
        error = self._fail_spawn()

        raised = self.assertRaises(messaging.ExpectedException,
                                   self._rebuild)

        self.assertIsInstance(raised.exc_info[1],
                              exception.BuildAbortException)
        self.assertIs(error, raised.exc_info[1].__cause__)
        self.assert_destroyed(destroy_disks=True)

    def test_moved_finish_evacuation(self):
        """finish_evacuation called from the rebuild itself, and failing."""
        self._nova_rebuild(finish=True)
        error = DestroyFailed('finish_evacuation')
        self.mock_finish.side_effect = error
        migration = self._migration(self.instance)
        self.useFixture(test.fixtures.MockPatchObject(
            objects.Migration, 'get_by_id', return_value=migration))

        self.assertIs(error, self.assertRaises(DestroyFailed, self._rebuild))

        self.mock_destroy.assert_called_once_with(
            mock.ANY, mock.ANY, self.network_info,
            block_device_info=self.new_bdi, destroy_disks=True)
        self.assertEqual('failed', migration.status)
        self.mock_deallocate.assert_called()

    def _manager_with_log(self):
        with mock.patch.object(nova_support, 'LOG') as log:
            compute = manager.ComputeManager()
        return compute, log

    def test_changed_finish_evacuation(self):
        """One ERROR at start-up; the cleanup of a failed spawn runs."""
        def finish_evacuation(self, instance, node, migration, more=None):
            pass

        with mock.patch.object(resource_tracker.ResourceTracker,
                               'finish_evacuation', finish_evacuation):
            self.compute, log = self._manager_with_log()
        log.error.assert_called_once()
        message = log.error.call_args.args[0] % log.error.call_args.args[1:]
        self.assertIn('finish_evacuation', message)
        self.assertIn('the cleanup of a failed spawn still runs', message)
        self.assertTrue(self.compute._runs[nova_support.HOOK])
        self.assertFalse(self.compute._runs[nova_support.FINISH])

    def test_changed_driver_spawn(self):
        """nova's drivers' spawn lost block_device_info: nova's own."""
        def spawn(self, context, instance, image_meta, injected_files,
                  admin_password, allocations, network_info=None):
            pass

        with mock.patch.object(virt_driver.ComputeDriver, 'spawn', spawn):
            compute, log = self._manager_with_log()
        log.error.assert_called_once()
        message = log.error.call_args.args[0] % log.error.call_args.args[1:]
        self.assertIn('block_device_info', message)
        self.assertFalse(compute._runs[nova_support.HOOK])


class TestWithoutJournal(RebuildTestCase):
    """Issue 27, item 3: a journal that cannot be written.

    Before, the evacuation ran as nova's own (the guest of a failed spawn
    kept running, its disk stayed for the next evacuation to boot), or was
    refused. Now the in-process cleanup runs from what it knows in memory;
    only the crash recovery and the refusal of kept leftovers are lost.
    """

    def setUp(self):
        super().setUp()
        full = OSError(errno.ENOSPC, 'No space left on device')
        self.mock_write.side_effect = full

    def test_failed_spawn_cleaned_up(self):
        error = self._fail_spawn()

        with mock.patch.object(evacuation, 'LOG') as log:
            self.assertIs(error, self.assertRaises(SpawnFailed,
                                                   self._rebuild))

        self.mock_destroy.assert_called_once_with(
            mock.ANY, mock.ANY, self.network_info,
            block_device_info=self.new_bdi, destroy_disks=True)
        self.assertFalse(os.path.exists(
            os.path.join(self.instances, self.instance.uuid)))
        # One ERROR for the evacuation's journal.
        log.error.assert_called_once()
        self.assertIn('No space left', str(log.error.call_args.args))

    def test_shared_storage_keeps_disks(self):
        self.mock_on_disk.return_value = True
        self._fail_spawn()

        self.assertRaises(SpawnFailed, self._rebuild)

        self.mock_destroy.assert_called_once_with(
            mock.ANY, mock.ANY, self.network_info,
            block_device_info=self.new_bdi, destroy_disks=False)

    def test_any_journal_error(self):
        """Explorer cell ``evacuate journal.write#1 raise``.

        Not only an OSError: whatever the write raises, the evacuation
        goes on from memory, and nova's error (none here) is the one seen.
        """
        self.mock_write.side_effect = ValueError('not an OSError')

        self._rebuild()

        self.mock_spawn.assert_called_once()
        self.mock_destroy.assert_not_called()

    def test_start_up_says_so(self):
        log, act = self._init_host()
        log.error.assert_called_once()
        message = log.error.call_args.args[0] % log.error.call_args.args[1:]
        self.assertIn('the cleanup of a failed spawn still runs', message)
        self.assertIn('No space left', message)
        self.assertFalse(act)


class TestDisabled(RebuildTestCase):
    """``enabled = False`` is hands off: the start writes no journal."""

    def test_start_up_writes_nothing(self):
        self.flags(enabled=False, group='evacuate_cleanup')
        _log, act = self._init_host()
        self.assertFalse(act)
        self.mock_write.assert_not_called()


class TestJournalOnASharedFilesystem(RebuildTestCase):
    """Issue 27, item 6: a journal other hosts may mount is told."""

    def test_start_up_warns(self):
        with mock.patch('nova_evac_cleanup.journal.shared_filesystem',
                        return_value='nfs4'):
            log, act = self._init_host()
        log.warning.assert_called_once()
        message = (log.warning.call_args.args[0] %
                   log.warning.call_args.args[1:])
        self.assertIn('nfs4', message)
        self.assertIn('must be local', message)
        log.error.assert_not_called()
        self.assertTrue(act)


class _OutsideTheRange(object):
    """Issue 27, item 3: a nova outside the range still cleans up.

    Before, a release outside the range ``requirements.txt`` states, or
    package metadata that could not be read, made the manager run as
    nova's own: the guest of a failed spawn kept running and its disk
    stayed for the next evacuation to boot. Its hooks check out there, so
    now it logs one ERROR naming what differs and cleans up as on the
    releases of the range.
    """

    release = '34.0.0'
    #: what the start-up ERROR must name
    names = None
    #: whether this release deletes the vTPM secret with the disks
    deletes_vtpm_secret = False

    def setUp(self):
        with mock.patch('nova.version.version_string',
                        return_value=self.release), \
                self._metadata(), \
                mock.patch.object(nova_support, 'LOG') as log:
            # The manager is built here.
            super().setUp()
        self.start_log = log
        # Still this release when the evacuation runs.
        self.useFixture(test.fixtures.MockPatch(
            'nova.version.version_string', return_value=self.release))

    def _metadata(self):
        return mock.patch.object(metadata, 'requires', wraps=metadata.requires)

    def test_start_up_says_so(self):
        self.start_log.error.assert_called_once()
        message = (self.start_log.error.call_args.args[0] %
                   self.start_log.error.call_args.args[1:])
        self.assertIn(self.names, message)
        self.assertIn('the cleanup of a failed spawn still runs', message)
        self.assertEqual(self.deletes_vtpm_secret,
                         'bug 2125030' in message, message)

    def test_failed_spawn_cleaned_up(self):
        error = self._fail_spawn()

        self.assertIs(error, self.assertRaises(SpawnFailed, self._rebuild))

        self.assert_destroyed(destroy_disks=True)
        self.assertFalse(os.path.exists(
            os.path.join(self.instances, self.instance.uuid)))
        self.assertEqual([], journal.entries(self.compute.host))


class TestNewerNova(_OutsideTheRange, RebuildTestCase):
    release = '35.0.0'
    names = 'nova 35.0.0 is not one of the releases'


class TestOlderNova(_OutsideTheRange, RebuildTestCase):
    """30.2.0 deletes the vTPM secret with the disks: none here."""

    release = '30.2.0'
    names = 'nova 30.2.0 is not one of the releases'
    deletes_vtpm_secret = True


class TestUnreadableMetadata(_OutsideTheRange, RebuildTestCase):
    names = 'cannot be read from its package metadata'

    def _metadata(self):
        return mock.patch.object(
            metadata, 'requires',
            side_effect=metadata.PackageNotFoundError('nova-evac-cleanup'))


class TestVtpmHazard(_OutsideTheRange, RebuildTestCase):
    """Bug 2125030: 31.x before 31.3.0 deletes the vTPM secret with disks.

    nova's libvirt driver of those releases (and of 32.x before 32.2.0,
    and 30.x) deletes the instance's vTPM secret in the key manager when
    its ``_cleanup`` removes the instance's disks, that is on ``destroy``
    with ``destroy_disks=True``; the instance, still on its source, would
    lose it. So the guest is destroyed without its disks, which are kept
    and refuse the next evacuation of the server here.
    """

    release = '31.2.0'
    names = 'nova 31.2.0 is not one of the releases'
    deletes_vtpm_secret = True

    def setUp(self):
        super().setUp()
        self.instance.flavor.extra_specs = {'hw:tpm_version': '2.0',
                                            'hw:tpm_model': 'tpm-crb'}

    def test_failed_spawn_cleaned_up(self):
        """Without a vTPM, as on any release."""
        self.instance.flavor.extra_specs = {}
        super().test_failed_spawn_cleaned_up()

    def test_vtpm_disks_kept_and_refused(self):
        path = os.path.join(self.instances, self.instance.uuid)

        def spawn(*args, **kwargs):
            os.makedirs(path, exist_ok=True)
            open(os.path.join(path, 'disk'), 'w').close()
            raise SpawnFailed('spawn failed')

        self.mock_spawn.side_effect = spawn

        self.assertRaises(SpawnFailed, self._rebuild)

        self.mock_destroy.assert_called_once_with(
            mock.ANY, mock.ANY, self.network_info,
            block_device_info=self.new_bdi, destroy_disks=False)
        self.assertTrue(os.path.exists(os.path.join(path, 'disk')))
        [entry] = journal.entries(self.compute.host)
        self.assertEqual((journal.KEPT, None), (entry.phase, entry.claim))
        refused = self.assertRaises(
            leftovers.EvacuationLeftoverKept, leftovers.clear_or_refuse,
            self.compute, self.context, self.instance, uuids.next_migration)
        self.assertIn(path, str(refused))
        self.mock_destroy.assert_called_once()
        self.assertTrue(os.path.exists(os.path.join(path, 'disk')))
