# SPDX-License-Identifier: Apache-2.0

"""The real libvirt driver on nova's fakelibvirt, stock and fixed.

Regression test for the nova bug "instance artefacts are not removed by
libvirt driver if it fails to spawn", with nova's own ``LibvirtDriver``
and image backends (flat, qcow2, rbd) instead of this project's fake
driver, built on nova's ``nova/tests/functional/libvirt/test_evacuate.py``.
compute0 is the source, which dies; compute1 is the destination, where
spawn fails at a point libvirt does not clean up after itself: in
``_get_guest_xml`` (the instance directory and disks exist) or right after
the guest was launched (``_register_undefined_instance_details``).

On stock nova compute1 keeps the guest or the instance directory: the
retry then fails with ``InstanceExists``, or nova takes the leftover
directory for shared storage and evacuates "using existing disk". After
the bug is fixed, compute1 has neither, and the retry rebuilds from the
image on non-shared storage.
"""

import contextlib
import os
from unittest import mock

from nova import test
from nova.tests.fixtures import libvirt as fakelibvirt
from nova.tests.functional.libvirt import test_evacuate as nova_evacuate
from nova.virt.libvirt import driver as libvirt_driver

from nova_evac_cleanup import fixture as evac_fixture
from tests.harness import functional

# Failure points after the disks exist where libvirt leaves debris.
BEFORE_GUEST = '_get_guest_xml'
AFTER_LAUNCH = '_register_undefined_instance_details'

STALE_DISK_LOG = 'disk on shared storage, evacuating using existing disk'
FRESH_DISK_LOG = 'disk not on shared storage, evacuating from image'


class _LibvirtSpawnFailureTest(nova_evacuate._LibvirtEvacuateTest):
    """Evacuate an image-backed server to compute1 with a spawn failure."""

    FIXED = True

    # nova's own tests of this base class run in nova's tree, not here.
    test_evacuate_failure_nonshared_instancedir = None
    test_evacuate_failure_shared_instancedir = None

    def setUp(self):
        # The API fixture loads nova's paste pipeline from this file.
        self.flags(api_paste_config=functional.api_paste_config(),
                   group='wsgi')
        super().setUp()
        if self.FIXED and functional.fix_mode() == functional.FIX_PATCH:
            # nova's own manager has the fix (NOVA_EVAC_CLEANUP_FIX=patch).
            if not functional.nova_is_patched():
                self.fail('NOVA_EVAC_CLEANUP_FIX=patch but the installed '
                          'nova is not patched with patches/')
        elif self.FIXED:
            # compute1, started after the source fails, runs the cleanup.
            self.useFixture(evac_fixture.EvacuateCleanupFixture())

    def _boot_and_fail_source(self):
        """Boot on compute0, then force it down and start compute1.

        Not in setUp: the image backend mixins configure the backend after
        this class's setUp has run.
        """
        compute0 = self._start_compute('compute0')
        server = self.api.post_server(
            {'server': dict(nova_evacuate.SERVER_FIXTURES[0])})
        self.server = self._wait_for_state_change(server, 'ACTIVE',
                                                  max_retries=30)
        self.compute1 = self._swap_computes(compute0)
        self.source_path = self.source_instance_path(self.server)

    def _dest_domain(self):
        connection = self.compute1.driver._host.get_connection()
        try:
            return connection.lookupByUUIDString(self.server['id'])
        except fakelibvirt.libvirtError:
            return None

    def _evacuate(self, fail_at=None, non_shared=False):
        """Evacuate to compute1, failing in LibvirtDriver.<fail_at>.

        :param non_shared: give compute1 its own instance directory, as
            nova's test does, so the storage is not shared
        """
        dest_path = self.dest_instance_path(self.server)

        def get_instance_path(instance, relative=False):
            return instance.uuid if relative else dest_path

        # compute1 gets its own instance directory only when not shared.
        own_dir = (mock.patch('nova.virt.libvirt.utils.get_instance_path',
                              side_effect=get_instance_path)
                   if non_shared else contextlib.nullcontext())
        with own_dir:
            if fail_at is None:
                return self._evacuate_server(
                    self.server, {'host': 'compute1'},
                    expected_state='ACTIVE', expected_host='compute1',
                    expected_migration_status='done')
            with mock.patch.object(libvirt_driver.LibvirtDriver, fail_at,
                                   side_effect=test.TestingException) as m:
                server = self._evacuate_server(
                    self.server, {'host': 'compute1'},
                    expected_state='ERROR', expected_task_state=None,
                    expected_migration_status='failed')
                # Meta-test: the failure happened where it was injected.
                m.assert_called()
        self.assertEqual('compute0', server['OS-EXT-SRV-ATTR:host'])
        return server


class _FixedChecks(object):

    def _check(self, fail_at, non_shared):
        self._boot_and_fail_source()
        dest_path = self.dest_instance_path(self.server)
        self._evacuate(fail_at, non_shared=non_shared)

        self.assertIsNone(self._dest_domain())
        if non_shared:
            self.assertFalse(os.path.exists(dest_path))
        # The source's copy is never touched.
        self.assertTrue(os.path.exists(self.source_path))
        self.assert_disks_shared_instancedir(self.server)

        self._evacuate(non_shared=non_shared)
        self.assertIsNotNone(self._dest_domain())
        if non_shared:
            self.assertIn(FRESH_DISK_LOG, self.stdlog.logger.output)
            self.assertNotIn(STALE_DISK_LOG, self.stdlog.logger.output)


class _StockChecks(object):

    FIXED = False

    def _check(self, fail_at, non_shared):
        self._boot_and_fail_source()
        dest_path = self.dest_instance_path(self.server)
        self._evacuate(fail_at, non_shared=non_shared)

        if fail_at == AFTER_LAUNCH:
            # FIXME(bug): the guest is left running on compute1 and the
            # retry fails with InstanceExists.
            self.assertIsNotNone(self._dest_domain())
            self._evacuate_server(
                self.server, {'host': 'compute1'}, expected_state='ERROR',
                expected_task_state=None,
                expected_migration_status='failed')
            server = self.api.get_server(self.server['id'])
            self.assertIn('already exists', server['fault']['message'])
            return
        self.assertIsNone(self._dest_domain())
        if non_shared:
            # FIXME(bug): the leftover directory makes nova take compute1's
            # storage for shared, and the retry uses the stale disk.
            self.assertTrue(os.path.exists(dest_path))
            self._evacuate(non_shared=True)
            self.assertIn(STALE_DISK_LOG, self.stdlog.logger.output)
        else:
            self._evacuate()


class _FileBackendChecks(object):
    """Flat and qcow2: shared and non-shared instance directories."""

    def test_fail_before_guest_non_shared(self):
        self._check(BEFORE_GUEST, non_shared=True)

    def test_fail_after_launch_non_shared(self):
        self._check(AFTER_LAUNCH, non_shared=True)

    def test_fail_before_guest_shared(self):
        self._check(BEFORE_GUEST, non_shared=False)

    def test_fail_after_launch_shared(self):
        self._check(AFTER_LAUNCH, non_shared=False)


class _RbdChecks(object):
    """RBD: the disk is shared block storage whatever the directory."""

    def test_fail_before_guest(self):
        self._check(BEFORE_GUEST, non_shared=False)

    def test_fail_after_launch(self):
        self._check(AFTER_LAUNCH, non_shared=False)


class FlatFixedTest(_FixedChecks, _FileBackendChecks, nova_evacuate._FlatTest,
                    _LibvirtSpawnFailureTest, test.TestCase):
    pass


class FlatStockTest(_StockChecks, _FileBackendChecks, nova_evacuate._FlatTest,
                    _LibvirtSpawnFailureTest, test.TestCase):
    pass


class Qcow2FixedTest(_FixedChecks, _FileBackendChecks,
                     nova_evacuate._Qcow2Test, _LibvirtSpawnFailureTest,
                     test.TestCase):
    pass


class Qcow2StockTest(_StockChecks, _FileBackendChecks,
                     nova_evacuate._Qcow2Test, _LibvirtSpawnFailureTest,
                     test.TestCase):
    pass


class RbdFixedTest(_FixedChecks, _RbdChecks, nova_evacuate._RbdTest,
                   _LibvirtSpawnFailureTest, test.TestCase):
    pass


class RbdStockTest(_StockChecks, _RbdChecks, nova_evacuate._RbdTest,
                   _LibvirtSpawnFailureTest, test.TestCase):
    pass
