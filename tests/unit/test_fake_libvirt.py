# SPDX-License-Identifier: Apache-2.0

"""Tests of the libvirt-like fake compute driver, driven directly."""

import os
import threading
from unittest import mock

import fixtures
from nova.compute import power_state
from nova import context as nova_context
from nova import exception
from nova import objects
from nova import test
from nova.tests.unit import fake_instance
from nova.virt import driver
from nova.virt import fake

from tests.harness import fake_libvirt

DISK = fake_libvirt.DISK_SIZE
PARTIAL = fake_libvirt.PARTIAL_DISK_SIZE
BFV_BDI = {'block_device_mapping': [
    {'boot_index': 0, 'mount_device': '/dev/vda', 'connection_info': {}}]}


class _Base(test.NoDBTestCase):
    """Two hosts, compute0 and compute1, on a fresh world."""

    storage = 'non-shared'

    def setUp(self):
        super().setUp()
        self.fixture = self.useFixture(
            fake_libvirt.FakeLibvirtFixture(storage=self.storage))
        self.world = self.fixture.world
        self.context = nova_context.get_admin_context()
        self.instance = fake_instance.fake_instance_obj(
            self.context, expected_attrs=['system_metadata'])
        self.uuid = self.instance.uuid
        # libvirt's cleanup records a removed instance directory on the
        # instance and saves it.
        self.mock_save = self.useFixture(fixtures.MockPatchObject(
            objects.Instance, 'save')).mock
        self.drv0 = self._driver('compute0')
        self.drv1 = self._driver('compute1')

    def _driver(self, host):
        drv = fake_libvirt.FakeLibvirtDriver(mock.Mock())
        drv.init_host(host)
        return drv

    def _spawn(self, drv, block_device_info=None, power_on=True):
        drv.spawn(self.context, self.instance, None, [], None, {},
                  network_info=[], block_device_info=block_device_info,
                  power_on=power_on)

    def _fail_spawn(self, drv, stage, **kwargs):
        host = drv._host
        exc = self.world.inject_spawn_fault(host, stage)
        raised = self.assertRaises(fake_libvirt.FakeLibvirtError,
                                   self._spawn, drv, **kwargs)
        self.assertIs(exc, raised)
        self.assertEqual(1, self.world.fired(host, stage))
        return raised

    def _files(self, host):
        return self.world.files(host, self.uuid)

    def _full(self):
        """What a complete spawn leaves in this storage mode."""
        if self.storage == 'rbd':
            return {'console.log': 0, fake_libvirt.RBD_DISK_KEY: DISK}
        return {'console.log': 0, 'disk': DISK}


class _StorageTests(object):
    """Tests whose expectations follow from the storage layout."""

    def _debris(self, stage):
        """What a failure at a stage leaves on a host that had nothing."""
        rbd = self.storage == 'rbd'
        if stage in ('create_instance_dir',) + (
                fake_libvirt.SELF_CLEANING_STAGES):
            return {}
        if stage == 'create_disks':
            if rbd:
                return {fake_libvirt.RBD_DISK_KEY: PARTIAL}
            return {'disk': PARTIAL}
        return self._full()

    def _test_fault(self, stage):
        self._fail_spawn(self.drv1, stage)
        self.assertEqual(self._debris(stage), self._files('compute1'))
        expected_dir = stage not in ('create_instance_dir',) + (
            fake_libvirt.SELF_CLEANING_STAGES)
        self.assertEqual(expected_dir, os.path.isdir(
            self.world.instance_dir('compute1', self.uuid)))
        expected_state = 'running' if stage == 'wait_for_boot' else None
        self.assertEqual(expected_state,
                         self.world.domain_state('compute1', self.uuid))
        record, = self.world.spawns('compute1')
        self.assertEqual(stage, record.failed_stage)
        self.assertEqual(
            stage in fake_libvirt.SELF_CLEANING_STAGES, record.cleaned_up)
        self.assertEqual(list(fake_libvirt.STAGES).index(stage) + 1,
                         len(record.stages))
        self.assertFalse(record.succeeded)

    def test_fault_create_instance_dir(self):
        self._test_fault('create_instance_dir')

    def test_fault_create_disks(self):
        self._test_fault('create_disks')
        self.assertFalse(self.world.disk_is_complete('compute1', self.uuid))

    def test_fault_get_guest_xml(self):
        self._test_fault('get_guest_xml')

    def test_fault_define_domain(self):
        self._test_fault('define_domain')

    def test_fault_plug_vifs(self):
        self._test_fault('plug_vifs')

    def test_fault_launch(self):
        self._test_fault('launch')

    def test_fault_wait_for_boot(self):
        self._test_fault('wait_for_boot')

    def test_fault_is_one_shot(self):
        self._fail_spawn(self.drv1, 'launch')
        self._spawn(self.drv1)
        self.assertEqual('running',
                         self.world.domain_state('compute1', self.uuid))
        self.assertEqual(1, len(self.world.fired_faults))

    def test_fault_only_on_its_host(self):
        self.world.inject_spawn_fault('compute1', 'launch')
        self._spawn(self.drv0)
        self.assertEqual(0, self.world.fired('compute1', 'launch'))
        self.assertEqual(0, self.world.fired('compute0', 'launch'))

    def test_spawn(self):
        self._spawn(self.drv0)
        self.assertEqual(self._full(), self._files('compute0'))
        self.assertEqual('running',
                         self.world.domain_state('compute0', self.uuid))
        self.assertIsNone(self.world.domain_state('compute1', self.uuid))
        self.assertEqual({self.uuid: 'running'},
                         self.world.domains('compute0'))
        self.assertTrue(self.world.disk_is_complete('compute0', self.uuid))
        header = self.world.disk_header('compute0', self.uuid)
        self.assertEqual({'generation': 1, 'host': 'compute0',
                          'uuid': self.uuid}, header)
        record, = self.world.spawns()
        self.assertTrue(record.succeeded)
        self.assertTrue(record.created_instance_dir)
        self.assertTrue(record.created_disks)
        self.assertEqual(list(fake_libvirt.STAGES), record.stages)

    def test_spawn_power_off(self):
        self._spawn(self.drv0, power_on=False)
        self.assertEqual('defined',
                         self.world.domain_state('compute0', self.uuid))

    def test_spawn_volume_backed(self):
        self._spawn(self.drv0, block_device_info=BFV_BDI)
        self.assertEqual({'console.log': 0}, self._files('compute0'))
        self.assertIsNone(self.world.disk_checksum('compute0', self.uuid))
        self.assertFalse(self.world.spawns()[0].created_disks)

    def test_destroy_disks(self):
        self._spawn(self.drv0)
        self.drv0.destroy(self.context, self.instance, [],
                          destroy_disks=True)
        self.assertEqual({}, self._files('compute0'))
        self.assertFalse(os.path.exists(
            self.world.instance_dir('compute0', self.uuid)))
        self.assertIsNone(self.world.domain_state('compute0', self.uuid))
        self.assertFalse(os.path.exists(
            self.world.disk_path('compute0', self.uuid)))
        # Recorded on the instance and saved, like libvirt's cleanup.
        self.assertEqual('1', self.instance.system_metadata['clean_attempts'])
        self.assertTrue(self.instance.cleaned)
        self.mock_save.assert_called_once_with()

    def test_destroy_keep_disks(self):
        self._spawn(self.drv0)
        checksum = self.world.disk_checksum('compute0', self.uuid)
        self.drv0.destroy(self.context, self.instance, [],
                          destroy_disks=False)
        self.assertEqual(self._full(), self._files('compute0'))
        self.assertEqual(checksum,
                         self.world.disk_checksum('compute0', self.uuid))
        self.assertIsNone(self.world.domain_state('compute0', self.uuid))

    def test_cleanup_keep_disks(self):
        self._spawn(self.drv0)
        self.drv0.cleanup(self.context, self.instance, [],
                          destroy_disks=False)
        self.assertEqual(self._full(), self._files('compute0'))
        self.assertIsNone(self.world.domain_state('compute0', self.uuid))
        self.assertEqual(1, self.world.calls('compute0')['cleanup'])

    def test_destroy_without_domain(self):
        self.drv0.destroy(self.context, self.instance, [])
        self.assertEqual({}, self._files('compute0'))

    def test_stale_disk_reused(self):
        self._fail_spawn(self.drv1, 'wait_for_boot')
        checksum = self.world.disk_checksum('compute1', self.uuid)
        generation = self.world.disk_generation('compute1', self.uuid)
        self.drv1.destroy(self.context, self.instance, [],
                          destroy_disks=False)
        self._spawn(self.drv1)
        self.assertEqual(generation,
                         self.world.disk_generation('compute1', self.uuid))
        self.assertEqual(checksum,
                         self.world.disk_checksum('compute1', self.uuid))
        second = self.world.spawns('compute1')[-1]
        self.assertFalse(second.created_instance_dir)
        self.assertFalse(second.created_disks)
        self.assertEqual(2, second.generation)

    def test_fresh_disk_after_destroy_disks(self):
        self._spawn(self.drv1)
        checksum = self.world.disk_checksum('compute1', self.uuid)
        self.drv1.destroy(self.context, self.instance, [])
        self._spawn(self.drv1)
        self.assertEqual(2, self.world.disk_generation('compute1', self.uuid))
        self.assertNotEqual(checksum,
                            self.world.disk_checksum('compute1', self.uuid))
        self.assertTrue(self.world.spawns('compute1')[-1].created_disks)

    def test_partial_disk_reused(self):
        # An interrupted download leaves a truncated disk which the next
        # spawn finds and reuses, like libvirt's image backend.
        self._fail_spawn(self.drv1, 'create_disks')
        self._spawn(self.drv1)
        self.assertFalse(self.world.disk_is_complete('compute1', self.uuid))
        self.assertEqual(1, self.world.disk_generation('compute1', self.uuid))

    def test_destroy_fault(self):
        self._spawn(self.drv0)
        exc = self.world.inject_destroy_fault('compute0')
        raised = self.assertRaises(
            fake_libvirt.FakeLibvirtError, self.drv0.destroy,
            self.context, self.instance, [])
        self.assertIs(exc, raised)
        self.assertEqual(1, self.world.fired('compute0', 'destroy'))
        # Nothing was done.
        self.assertEqual(self._full(), self._files('compute0'))
        self.assertEqual('running',
                         self.world.domain_state('compute0', self.uuid))
        # One-shot.
        self.drv0.destroy(self.context, self.instance, [])
        self.assertEqual({}, self._files('compute0'))

    def test_cleanup_fault(self):
        self._spawn(self.drv0)
        self.world.inject_destroy_fault('compute0', method='cleanup')
        self.drv0.destroy(self.context, self.instance, [],
                          destroy_disks=False)
        self.assertRaises(fake_libvirt.FakeLibvirtError, self.drv0.cleanup,
                          self.context, self.instance, [])
        self.assertEqual(1, self.world.fired('compute0', 'cleanup'))
        self.assertEqual(self._full(), self._files('compute0'))

    def test_calls(self):
        self._spawn(self.drv0)
        self.drv0.instance_exists(self.instance)
        self.drv0.instance_on_disk(self.instance)
        self.drv0.destroy(self.context, self.instance, [])
        self.assertEqual({'spawn': 1, 'instance_exists': 1,
                          'instance_on_disk': 1, 'destroy': 1},
                         dict(self.world.calls('compute0')))
        self.assertEqual({}, dict(self.world.calls('compute1')))

    def test_queries(self):
        self.assertFalse(self.drv0.instance_exists(self.instance))
        self.assertRaises(exception.InstanceNotFound,
                          self.drv0.get_info, self.instance)
        self._spawn(self.drv0)
        self.assertTrue(self.drv0.instance_exists(self.instance))
        self.assertFalse(self.drv1.instance_exists(self.instance))
        self.assertEqual([self.instance.name], self.drv0.list_instances())
        self.assertEqual([self.uuid], self.drv0.list_instance_uuids())
        self.assertEqual([], self.drv1.list_instance_uuids())
        self.assertEqual(power_state.RUNNING,
                         self.drv0.get_info(self.instance).state)
        self.drv0.power_off(self.instance)
        self.assertEqual(power_state.SHUTDOWN,
                         self.drv0.get_info(self.instance).state)
        self.assertEqual('defined',
                         self.world.domain_state('compute0', self.uuid))
        self.drv0.power_on(self.context, self.instance, [])
        self.assertEqual('running',
                         self.world.domain_state('compute0', self.uuid))
        self.drv0.reboot(self.context, self.instance, [], 'SOFT')
        self.assertEqual('running',
                         self.world.domain_state('compute0', self.uuid))

    def test_hard_reboot_of_missing_domain_reuses_disk(self):
        self._spawn(self.drv0)
        self.world.remove_domain('compute0', self.uuid)
        self.drv0.reboot(self.context, self.instance, [], 'HARD')
        self.assertEqual('running',
                         self.world.domain_state('compute0', self.uuid))
        self.assertEqual(1, self.world.disk_generation('compute0', self.uuid))

    def test_domains_survive_new_driver(self):
        self._spawn(self.drv0)
        drv = self._driver('compute0')
        self.assertEqual([self.uuid], drv.list_instance_uuids())
        self.assertTrue(drv.instance_exists(self.instance))

    def _spawn_in_thread(self, drv):
        """Spawn on another thread, so a held spawn does not hold the test.

        :returns: the started thread and the list its spawn error, if any,
            is appended to
        """
        errors = []

        def spawn():
            try:
                self._spawn(drv)
            except Exception as exc:
                errors.append(exc)

        thread = threading.Thread(target=spawn)
        thread.start()
        return thread, errors

    def test_block_spawn(self):
        block = self.world.block_spawn('compute1', 'define_domain')
        thread, errors = self._spawn_in_thread(self.drv1)
        self.assertTrue(block.wait_reached(10))
        self.assertFalse(block.is_set())
        # Held after the disks, before the domain.
        self.assertEqual(self._full(), self._files('compute1'))
        self.assertIsNone(self.world.domain_state('compute1', self.uuid))
        block.release()
        thread.join(10)
        self.assertEqual([], errors)
        self.assertEqual('running',
                         self.world.domain_state('compute1', self.uuid))

    def test_block_spawn_released_by_reset(self):
        block = self.world.block_spawn('compute1', 'launch')
        thread, errors = self._spawn_in_thread(self.drv1)
        self.assertTrue(block.wait_reached(10))
        self.world.reset()
        thread.join(10)
        self.assertEqual(1, len(errors))
        self.assertIsInstance(errors[0], fake_libvirt.FakeLibvirtError)

    def test_capabilities_and_nodes(self):
        caps = self.drv0.capabilities
        self.assertTrue(caps['supports_evacuate'])
        for key, value in fake.FakeDriver.capabilities.items():
            self.assertEqual(value, caps[key])
        self.assertEqual(['compute0'], self.drv0.get_available_nodes())
        self.assertEqual(['fake-mini'],
                         self._driver('compute').get_available_nodes())

    def test_invalid_stage(self):
        self.assertRaises(ValueError, self.world.inject_spawn_fault,
                          'compute0', 'nope')
        self.assertRaises(ValueError, self.world.block_spawn,
                          'compute0', 'nope')


class NonSharedTestCase(_StorageTests, _Base):
    storage = 'non-shared'

    def test_layout(self):
        self._spawn(self.drv0)
        root = self.world.root
        self.assertEqual(os.path.join(root, 'compute0', 'instances'),
                         self.world.instances_path('compute0'))
        self.assertEqual(
            os.path.join(root, 'compute0', 'instances', self.uuid, 'disk'),
            self.world.disk_path('compute0', self.uuid))
        self.assertTrue(os.path.isfile(
            os.path.join(root, 'compute0', 'instances', self.uuid, 'disk')))
        self.assertEqual({}, self._files('compute1'))

    def test_instance_on_disk(self):
        self.assertFalse(self.drv1.instance_on_disk(self.instance))
        self._spawn(self.drv0)
        self.assertTrue(self.drv0.instance_on_disk(self.instance))
        self.assertFalse(self.drv1.instance_on_disk(self.instance))
        # Debris of a failed spawn makes it look shared.
        self._fail_spawn(self.drv1, 'create_disks')
        self.assertTrue(self.drv1.instance_on_disk(self.instance))

    def test_instance_files_exist(self):
        # The patch series' driver question, answered as libvirt does:
        # whether this host's instance directory exists
        self.assertFalse(self.drv1.instance_files_exist(self.instance))
        self._spawn(self.drv0)
        self.assertTrue(self.drv0.instance_files_exist(self.instance))
        self.assertFalse(self.drv1.instance_files_exist(self.instance))
        self._fail_spawn(self.drv1, 'create_disks')
        self.assertTrue(self.drv1.instance_files_exist(self.instance))

    def test_destroy_only_own_host(self):
        self._spawn(self.drv0)
        self._spawn(self.drv1)
        self.drv1.destroy(self.context, self.instance, [])
        self.assertEqual(self._full(), self._files('compute0'))
        self.assertEqual('running',
                         self.world.domain_state('compute0', self.uuid))
        self.assertEqual({}, self._files('compute1'))

    def test_shared_storage_check(self):
        self._spawn(self.drv0)
        data = self.drv0.check_instance_shared_storage_local(
            self.context, self.instance)
        self.assertFalse(self.drv1.check_instance_shared_storage_remote(
            self.context, data))
        self.assertTrue(self.drv0.check_instance_shared_storage_remote(
            self.context, data))
        self.drv0.check_instance_shared_storage_cleanup(self.context, data)
        self.assertEqual(self._full(), self._files('compute0'))
        self.assertIsNone(self.drv1.check_instance_shared_storage_local(
            self.context, self.instance))

    def test_fault_in_existing_dir_keeps_dir(self):
        # The instance directory is debris of a volume-backed spawn: a
        # failing spawn did not create it, so it stays, and with it the
        # disk this spawn created (libvirt only removes local disks with
        # the instance directory).
        self._fail_spawn(self.drv1, 'wait_for_boot',
                         block_device_info=BFV_BDI)
        self.drv1.destroy(self.context, self.instance, [],
                          destroy_disks=False)
        self._fail_spawn(self.drv1, 'launch')
        record = self.world.spawns('compute1')[-1]
        self.assertFalse(record.created_instance_dir)
        self.assertTrue(record.created_disks)
        self.assertEqual(self._full(), self._files('compute1'))
        self.assertIsNone(self.world.domain_state('compute1', self.uuid))


class SharedTestCase(_StorageTests, _Base):
    storage = 'shared'

    def test_layout(self):
        self._spawn(self.drv0)
        shared = os.path.join(self.world.root, 'shared', 'instances')
        self.assertEqual(shared, self.world.instances_path('compute0'))
        self.assertEqual(shared, self.world.instances_path('compute1'))
        self.assertEqual(self._full(), self._files('compute1'))

    def test_instance_on_disk(self):
        self.assertFalse(self.drv1.instance_on_disk(self.instance))
        self._spawn(self.drv0)
        self.assertTrue(self.drv1.instance_on_disk(self.instance))

    def test_instance_files_exist(self):
        # The source's files, on the shared directory
        self.assertFalse(self.drv1.instance_files_exist(self.instance))
        self._spawn(self.drv0)
        self.assertTrue(self.drv1.instance_files_exist(self.instance))

    def test_evacuate_fault_keeps_shared_files(self):
        self._spawn(self.drv0)
        checksum = self.world.disk_checksum('compute0', self.uuid)
        self._fail_spawn(self.drv1, 'launch')
        record = self.world.spawns('compute1')[-1]
        self.assertFalse(record.created_instance_dir)
        self.assertFalse(record.created_disks)
        self.assertEqual(self._full(), self._files('compute0'))
        self.assertEqual(checksum,
                         self.world.disk_checksum('compute1', self.uuid))
        self.assertEqual('running',
                         self.world.domain_state('compute0', self.uuid))

    def test_shared_storage_check(self):
        self._spawn(self.drv0)
        data = self.drv0.check_instance_shared_storage_local(
            self.context, self.instance)
        self.assertTrue(self.drv1.check_instance_shared_storage_remote(
            self.context, data))
        self.drv0.check_instance_shared_storage_cleanup(self.context, data)
        self.assertEqual(self._full(), self._files('compute0'))

    def test_destroy_disks_removes_shared_files(self):
        # The caller must never do this on shared storage; libvirt would.
        self._spawn(self.drv0)
        self.drv1.destroy(self.context, self.instance, [])
        self.assertEqual({}, self._files('compute0'))
        self.assertEqual('running',
                         self.world.domain_state('compute0', self.uuid))


class RbdTestCase(_StorageTests, _Base):
    storage = 'rbd'

    def test_layout(self):
        self._spawn(self.drv0)
        root = self.world.root
        self.assertEqual(os.path.join(root, 'rbd', '%s_disk' % self.uuid),
                         self.world.disk_path('compute0', self.uuid))
        self.assertEqual(os.path.join(root, 'compute0', 'instances'),
                         self.world.instances_path('compute0'))
        self.assertEqual(['console.log'], os.listdir(
            self.world.instance_dir('compute0', self.uuid)))
        # The pool is reachable from every host.
        self.assertEqual({fake_libvirt.RBD_DISK_KEY: DISK},
                         self._files('compute1'))

    def test_spawn_volume_backed_no_image(self):
        self._spawn(self.drv0, block_device_info=BFV_BDI)
        self.assertEqual([], os.listdir(self.world.rbd_pool_path())
                         if os.path.isdir(self.world.rbd_pool_path())
                         else [])

    def test_instance_on_disk(self):
        self.assertTrue(self.drv0.instance_on_disk(self.instance))
        self.assertTrue(self.drv1.instance_on_disk(self.instance))

    def test_shared_storage_check(self):
        self._spawn(self.drv0)
        self.assertIsNone(self.drv0.check_instance_shared_storage_local(
            self.context, self.instance))

    def test_evacuate_fault_keeps_image(self):
        # compute1 creates its own instance directory but reuses the image:
        # a failure it cleans up removes the directory, never the image.
        self._spawn(self.drv0)
        checksum = self.world.disk_checksum('compute0', self.uuid)
        self._fail_spawn(self.drv1, 'launch')
        record = self.world.spawns('compute1')[-1]
        self.assertTrue(record.created_instance_dir)
        self.assertFalse(record.created_disks)
        self.assertEqual(checksum,
                         self.world.disk_checksum('compute1', self.uuid))
        self.assertFalse(os.path.exists(
            self.world.instance_dir('compute1', self.uuid)))
        self.assertEqual(self._full(), self._files('compute0'))

    def test_source_destroy_keep_disks_keeps_image(self):
        # After an evacuation the source destroys with destroy_disks=False:
        # the image the destination runs from must stay.
        self._spawn(self.drv0)
        checksum = self.world.disk_checksum('compute0', self.uuid)
        self._spawn(self.drv1)
        self.drv0.destroy(self.context, self.instance, [],
                          destroy_disks=False)
        self.assertEqual(checksum,
                         self.world.disk_checksum('compute1', self.uuid))
        self.assertEqual(self._full(), self._files('compute1'))
        self.assertEqual({'console.log': 0, fake_libvirt.RBD_DISK_KEY: DISK},
                         self._files('compute0'))
        self.assertEqual('running',
                         self.world.domain_state('compute1', self.uuid))

    def test_source_destroy_disks_removes_image(self):
        # destroy_disks=True on rbd removes the shared image, as libvirt's
        # _cleanup_rbd does: the caller must not ask for it.
        self._spawn(self.drv0)
        self._spawn(self.drv1)
        self.drv0.destroy(self.context, self.instance, [])
        self.assertIsNone(self.world.disk_checksum('compute1', self.uuid))
        self.assertEqual({'console.log': 0}, self._files('compute1'))

    def test_workaround_removes_instance_dir_only(self):
        self.flags(ensure_libvirt_rbd_instance_dir_cleanup=True,
                   group='workarounds')
        self._spawn(self.drv0)
        self.drv0.destroy(self.context, self.instance, [],
                          destroy_disks=False)
        self.assertEqual({fake_libvirt.RBD_DISK_KEY: DISK},
                         self._files('compute0'))


class VolumeConnectionsTestCase(_Base):
    """The volume connections, where LibvirtDriver makes and drops them."""

    def setUp(self):
        super().setUp()
        self.calls = []
        for name, kind in (('_connect_volume', 'connect'),
                           ('_disconnect_volume', 'disconnect')):
            self.useFixture(fixtures.MockPatchObject(
                self.drv1, name, side_effect=lambda ctxt, info, inst, kind=(
                    kind): self.calls.append((kind, info['data']['id']))))
        self.bdi = {'block_device_mapping': [
            {'mount_device': '/dev/vdb', 'boot_index': None,
             'connection_info': {'data': {'id': 'vol-b'}}},
            {'mount_device': '/dev/vdc', 'boot_index': None,
             'connection_info': {}},
            {'mount_device': '/dev/vdd', 'boot_index': None,
             'connection_info': {'data': {'id': 'vol-d'}}}]}

    def test_spawn_connects_each_volume_with_connection_info(self):
        self._spawn(self.drv1, block_device_info=self.bdi)
        self.assertEqual([('connect', 'vol-b'), ('connect', 'vol-d')],
                         self.calls)

    def test_spawn_failing_before_the_guest_xml_connects_nothing(self):
        self._fail_spawn(self.drv1, 'get_guest_xml',
                         block_device_info=self.bdi)
        self.assertEqual([], self.calls)

    def test_spawn_that_cleans_up_disconnects_what_it_connected(self):
        self._fail_spawn(self.drv1, 'launch', block_device_info=self.bdi)
        self.assertEqual([('connect', 'vol-b'), ('connect', 'vol-d'),
                          ('disconnect', 'vol-b'), ('disconnect', 'vol-d')],
                         self.calls)

    def test_spawn_failing_in_wait_for_boot_stays_connected(self):
        self._fail_spawn(self.drv1, 'wait_for_boot',
                         block_device_info=self.bdi)
        self.assertEqual([('connect', 'vol-b'), ('connect', 'vol-d')],
                         self.calls)

    def test_destroy_and_cleanup_disconnect_what_they_are_given(self):
        self.drv1.destroy(self.context, self.instance, [],
                          block_device_info=self.bdi)
        self.drv1.cleanup(self.context, self.instance, [],
                          block_device_info=self.bdi)
        self.drv1.destroy(self.context, self.instance, [])
        self.assertEqual([('disconnect', 'vol-b'), ('disconnect', 'vol-d')] *
                         2, self.calls)

    def test_hard_reboot_disconnects_then_connects(self):
        self._spawn(self.drv1, block_device_info=self.bdi)
        del self.calls[:]
        self.drv1.reboot(self.context, self.instance, [], 'SOFT',
                         block_device_info=self.bdi)
        self.assertEqual([], self.calls)
        for missing in (False, True):
            if missing:
                self.world.remove_domain('compute1', self.uuid)
            self.drv1.reboot(self.context, self.instance, [], 'HARD',
                             block_device_info=self.bdi)
            self.assertEqual(
                [('disconnect', 'vol-b'), ('disconnect', 'vol-d'),
                 ('connect', 'vol-b'), ('connect', 'vol-d')], self.calls)
            del self.calls[:]

    def test_attach_and_detach_volume(self):
        info = {'data': {'id': 'vol-e'}}
        self.drv1.attach_volume(self.context, info, self.instance,
                                '/dev/vde')
        self.drv1.detach_volume(self.context, info, self.instance,
                                '/dev/vde')
        self.assertEqual([('connect', 'vol-e'), ('disconnect', 'vol-e')],
                         self.calls)


class FixtureTestCase(test.NoDBTestCase):

    def test_installs_and_restores(self):
        outer = self.useFixture(fake_libvirt.FakeLibvirtFixture())
        self.assertIs(outer.world, fake_libvirt.get_world())
        inner = fake_libvirt.FakeLibvirtFixture(storage='shared')
        inner.setUp()
        root = inner.world.root
        self.assertIs(inner.world, fake_libvirt.get_world())
        self.assertEqual('shared', inner.world.storage)
        inner.world.inject_spawn_fault('compute0', 'launch')
        inner.world._count('compute0', 'spawn')
        inner.cleanUp()
        self.assertIs(outer.world, fake_libvirt.get_world())
        self.assertFalse(os.path.exists(root))
        self.assertEqual({}, dict(inner.world.calls('compute0')))
        self.assertEqual({}, inner.world._spawn_faults)

    def test_root(self):
        root = self.useFixture(fixtures.TempDir()).path
        fix = self.useFixture(fake_libvirt.FakeLibvirtFixture(
            storage='rbd', root=root))
        self.assertEqual(root, fix.world.root)

    def test_driver_loader(self):
        original = driver.load_compute_driver
        fix = fake_libvirt.FakeLibvirtFixture()
        fix.setUp()
        self.assertIsInstance(
            driver.load_compute_driver(mock.Mock(), fake_libvirt.DRIVER),
            fake_libvirt.FakeLibvirtDriver)
        self.flags(compute_driver=fake_libvirt.DRIVER)
        self.assertIsInstance(driver.load_compute_driver(mock.Mock()),
                              fake_libvirt.FakeLibvirtDriver)
        # Any other driver is nova's business.
        self.assertIsInstance(
            driver.load_compute_driver(mock.Mock(), 'fake.SmallFakeDriver'),
            fake.SmallFakeDriver)
        fix.cleanUp()
        self.assertIs(original, driver.load_compute_driver)

    def test_bad_storage(self):
        self.assertRaises(ValueError, fake_libvirt.FakeLibvirtFixture,
                          storage='nfs')
