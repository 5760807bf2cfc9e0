# SPDX-License-Identifier: Apache-2.0

"""Evacuation cleanup around the main path: what it must not change.

compute0 is the source, compute1 the destination; the computes run this
project's manager (restarted ones too) on non-shared storage, or nova's
own manager when nova is patched (``NOVA_EVAC_CLEANUP_FIX=patch``).
"""

import logging
import os

import fixtures
from nova.compute import manager as nova_manager

from nova_evac_cleanup import manager
from tests.harness import functional as base

SOURCE = base.SOURCE
DEST = base.DEST


class EvacuateCleanupEdgeCasesTest(base.EvacuateTestCase):

    STORAGE = 'non-shared'
    FIXED = True

    def setUp(self):
        super().setUp()
        self.server = self._boot()
        self.uuid = self.server['id']

    def test_plain_rebuild_spawn_failure_keeps_guest(self):
        """A plain rebuild keeps nova's behaviour.

        The guest of a failed rebuild on its own host is kept for the
        operator to debug.
        """
        self.world.inject_spawn_fault(SOURCE, 'wait_for_boot')
        self.api.post_server_action(
            self.uuid, {'rebuild': {'imageRef': self.server['image']['id']}})
        server = self._wait_for_state_change(self.server, 'ERROR')

        self.assertEqual(1, self.world.fired(SOURCE, 'wait_for_boot'))
        self.assertEqual(SOURCE, server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual('running', self.world.domain_state(SOURCE, self.uuid))
        self.assertTrue(self.world.disk_is_complete(SOURCE, self.uuid))

    def test_destroy_failure_keeps_spawn_error(self):
        """The fault is the spawn error even when the cleanup fails too."""
        self._fail_source()
        self.world.inject_destroy_fault(DEST)

        server, error = self._fail_evacuation(self.server, 'wait_for_boot')

        self.assertEqual(1, self.world.fired(DEST, 'destroy'))
        self.assertEqual('FakeLibvirtError', server['fault']['message'])
        self.assertIn(str(error), server['fault']['details'])
        self.assertNotIn('failure at destroy', server['fault']['details'])
        # The cleanup failed: the guest is kept, powered off, for the next
        # evacuation to destroy (issue 18, spawn-fails driver.destroy#1).
        self.assertEqual('defined', self.world.domain_state(DEST, self.uuid))

    def test_old_on_shared_storage_form(self):
        """The old API form with onSharedStorage=False (microversion 2.1).

        nova checks the admin's answer against the driver, so a leftover
        directory on compute1 would refuse the retry.
        """
        self._fail_source()

        server, error = self._fail_evacuation(
            self.server, 'get_guest_xml', on_shared_storage=False)

        self.assertFalse(self.world.files(DEST, self.uuid))
        server = self._evacuate(server, on_shared_storage=False)
        self.assertEqual('running', self.world.domain_state(DEST, self.uuid))
        self.assertTrue(self.world.disk_is_complete(DEST, self.uuid))

    def test_restart_and_periodics_change_nothing(self):
        """Restarts and periodic tasks delete nothing of the instance.

        After a cleaned-up evacuation failure, compute0 comes back and both
        computes restart and run their periodic tasks: the instance keeps
        its guest and disk on compute0 and compute1 stays empty.
        """
        self._fail_source()
        server, error = self._fail_evacuation(self.server, 'wait_for_boot')
        source_disk = self.world.disk_checksum(SOURCE, self.uuid)
        allocations = self._get_allocations_by_server_uuid(self.uuid)

        service = self.admin_api.get_services(
            binary='nova-compute', host=SOURCE)[0]
        self.admin_api.put_service_force_down(service['id'], False)
        self.compute0 = self.restart_compute_service(self.compute0)
        self.compute1 = self.restart_compute_service(self.compute1)
        self._run_periodics()

        # The restarted computes run the cleanup manager too (nova's own,
        # patched, with NOVA_EVAC_CLEANUP_FIX=patch).
        expected = (nova_manager.ComputeManager
                    if base.fix_mode() == base.FIX_PATCH
                    else manager.ComputeManager)
        for compute in (self.compute0, self.compute1):
            self.assertIs(expected, type(compute.manager))
        self.assertEqual(source_disk,
                         self.world.disk_checksum(SOURCE, self.uuid))
        self.assertIsNotNone(self.world.domain_state(SOURCE, self.uuid))
        self.assertIsNone(self.world.domain_state(DEST, self.uuid))
        self.assertFalse(self.world.files(DEST, self.uuid))
        self.assertEqual(allocations,
                         self._get_allocations_by_server_uuid(self.uuid))
        server = self.api.get_server(self.uuid)
        self.assertEqual(SOURCE, server['OS-EXT-SRV-ATTR:host'])


class WithoutJournalTest(base.EvacuateTestCase):
    """Issue 27, item 3: ``[evacuate_cleanup] journal_path`` unusable.

    Before, the evacuation ran as nova's own (or was refused): the guest of
    the failed spawn kept running on compute1 and its disk stayed for the
    next evacuation to boot (seen failing on 31.3.1, 32.2.1, 33.0.2 and
    34.0.0). Now the cleanup of the failed spawn runs from what the
    evacuation knows in memory; only the recovery after a crash and the
    refusal of kept leftovers are lost, which one ERROR says.
    """

    STORAGE = 'non-shared'
    FIXED = True

    def setUp(self):
        super().setUp()
        # Every write there fails: it is a path under a regular file.
        blocker = self.useFixture(fixtures.TempDir()).join('a-file')
        open(blocker, 'w').close()
        self.flags(journal_path=os.path.join(blocker, 'journal'),
                   group='evacuate_cleanup')
        self.log = self.useFixture(fixtures.FakeLogger(
            name='nova_evac_cleanup', level=logging.ERROR))
        self.compute1 = self.restart_compute_service(self.compute1)
        self.server = self._boot()
        self.uuid = self.server['id']
        self._fail_source()

    def test_failed_spawn_cleaned_up(self):
        self.assertIn('the cleanup of a failed spawn still runs',
                      self.log.output)

        server, error = self._fail_evacuation(self.server, 'wait_for_boot')

        self.assert_failed_and_cleaned(server, error)
        self.assertIn('its cleanup runs from memory', self.log.output)

        # The retry builds a fresh disk from the image.
        self._evacuate(server)
        self.assertEqual('running', self.world.domain_state(DEST, self.uuid))
        self.assertTrue(self.world.disk_is_complete(DEST, self.uuid))
        self.assertEqual(self.world.spawns(DEST, self.uuid)[-1].generation,
                         self.world.disk_generation(DEST, self.uuid))
