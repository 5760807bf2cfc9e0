# SPDX-License-Identifier: Apache-2.0

"""Evacuations whose spawn fails on the destination, stock nova and fixed.

Regression test for the nova bug "instance artefacts are not removed by
libvirt driver if it fails to spawn". compute0 is the source host, which
dies; compute1 is the destination, where ``driver.spawn`` fails at one of
the stages of the fake libvirt driver. nova then puts the server into ERROR
on compute0 and marks the migration failed.

On stock nova compute1 keeps what spawn had made. Depending on the stage and
the storage, the next evacuation to compute1 then fails with
``InstanceExists`` (a domain was left), or, on non-shared storage, takes the
leftover instance directory for shared storage and boots the stale, partial
disk; the stock tests assert exactly that, so the harness proves it
reproduces the bug.

After the bug is fixed (the computes run this project's manager), nothing
of the server is left on compute1 but what lives on shared storage, whose
bytes are unchanged, and the same evacuation succeeds with a fresh disk.
"""

import os

import testscenarios

from tests.harness import fake_libvirt
from tests.harness import functional as base

load_tests = testscenarios.load_tests_apply_scenarios

DEST = base.DEST


class _SpawnFailureTest(base.EvacuateTestCase):
    """Boot on compute0, kill it, evacuate to compute1 with a failure.

    Each test boots an image-backed and a volume-backed server and fails
    the evacuation of both at the scenario's stage, sharing the set-up of
    nova's services between the two.
    """

    scenarios = [(stage, {'stage': stage}) for stage in fake_libvirt.STAGES]

    def setUp(self):
        super().setUp()
        self.servers = [self._boot(), self._boot(volume_backed=True)]
        # On shared storage the disk the source wrote must survive it all.
        self.disks_before = {
            server['id']: self.world.disk_checksum(DEST, server['id'])
            for server in self.servers}
        self._fail_source()

    def local_disk(self, server):
        """Whether compute1's spawn writes the root disk in its own dir."""
        return self.STORAGE == 'non-shared' and bool(server['image'])

    def has_dir(self, server):
        return os.path.isdir(self.world.instance_dir(DEST, server['id']))

    def assert_shared_disk_intact(self, server):
        if self.STORAGE != 'non-shared' and server['image']:
            before = self.disks_before[server['id']]
            self.assertIsNotNone(before)
            self.assertEqual(
                before, self.world.disk_checksum(DEST, server['id']))


class _FixedChecks(object):
    """With the fix: compute1 is clean and the retry succeeds."""

    FIXED = True

    def test_failed_evacuation_is_cleaned_up(self):
        for server in self.servers:
            self._check_cleaned_up(server)

    def _check_cleaned_up(self, server):
        uuid = server['id']
        server, error = self._fail_evacuation(server, self.stage)

        # nova's part: ERROR on the source, with the spawn error as fault.
        self.assertEqual('ERROR', server['status'])
        self.assertEqual(base.SOURCE, server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual('FakeLibvirtError', server['fault']['message'])
        self.assertIn(str(error), server['fault']['details'])
        # The fix's part: no guest, and no instance directory or disk on
        # compute1's own storage; on shared storage the disk is untouched.
        self.assertIsNone(self.world.domain_state(DEST, uuid))
        if self.STORAGE == 'non-shared':
            self.assertFalse(self.has_dir(server))
            self.assertEqual({}, self.world.files(DEST, uuid))
        self.assert_shared_disk_intact(server)
        # Placement: nothing against compute1, nothing orphaned.
        self.assertIsNone(self._dest_allocation(server))
        code, output = self._placement_audit()
        self.assertEqual(0, code, output)

        # The same evacuation now succeeds, on a fresh disk where it is
        # compute1's own.
        server = self._evacuate(server)
        self.assertEqual('running', self.world.domain_state(DEST, uuid))
        if self.local_disk(server):
            last_spawn = self.world.spawns(DEST, uuid)[-1]
            self.assertTrue(self.world.disk_is_complete(DEST, uuid))
            self.assertEqual(last_spawn.generation,
                             self.world.disk_generation(DEST, uuid))
        self.assert_shared_disk_intact(server)
        self.assertIsNotNone(self._dest_allocation(server))


class _StockChecks(object):
    """Stock nova: assert the bug where the stage and storage make it."""

    FIXED = False

    def test_failed_evacuation_leaves_debris(self):
        for server in self.servers:
            self._check_debris(server)

    def _expected_debris(self, server):
        """What the failed spawn leaves on compute1, libvirt-style.

        :returns: (domain state, whether compute1 has an instance dir it
            did not have before, whether it has a local disk)
        """
        stages = fake_libvirt.STAGES
        reached = stages.index(self.stage)
        if self.stage in fake_libvirt.SELF_CLEANING_STAGES:
            # libvirt's own failure handling undefines the guest and removes
            # what this spawn created (bug 1550919).
            return None, False, False
        domain = 'running' if self.stage == 'wait_for_boot' else None
        own_dir = (self.STORAGE != 'shared' and
                   reached > stages.index('create_instance_dir'))
        disk = (self.local_disk(server) and
                reached >= stages.index('create_disks'))
        return domain, own_dir, disk

    def _check_debris(self, server):
        uuid = server['id']
        server, error = self._fail_evacuation(server, self.stage)
        domain, own_dir, disk = self._expected_debris(server)

        self.assertEqual('ERROR', server['status'])
        self.assertEqual(domain, self.world.domain_state(DEST, uuid))
        if self.STORAGE != 'shared':
            self.assertEqual(own_dir, self.has_dir(server))
        if self.STORAGE == 'non-shared':
            self.assertEqual(disk, 'disk' in self.world.files(DEST, uuid))
        self.assert_shared_disk_intact(server)
        # nova itself removes the destination allocation.
        self.assertIsNone(self._dest_allocation(server))

        if domain:
            # FIXME(bug): the domain left on compute1 makes the retry fail
            # with InstanceExists.
            server = self._evacuate(server, expected_state='ERROR',
                                    expected_migration_status='failed')
            self.assertIn('already exists', server['fault']['message'])
        elif disk:
            # FIXME(bug): the leftover directory makes nova take compute1's
            # storage for shared, and the retry boots the stale disk.
            stale = self.world.disk_generation(DEST, uuid)
            self._evacuate(server)
            self.assertEqual(stale, self.world.disk_generation(DEST, uuid))
            if self.stage == 'create_disks':
                self.assertFalse(self.world.disk_is_complete(DEST, uuid))
        else:
            # No bug at this stage and storage: the retry works on stock.
            self._evacuate(server)


class NonSharedFixedTest(_FixedChecks, _SpawnFailureTest):
    STORAGE = 'non-shared'


class SharedDirFixedTest(_FixedChecks, _SpawnFailureTest):
    STORAGE = 'shared'


class RbdFixedTest(_FixedChecks, _SpawnFailureTest):
    STORAGE = 'rbd'


class NonSharedStockTest(_StockChecks, _SpawnFailureTest):
    STORAGE = 'non-shared'


class SharedDirStockTest(_StockChecks, _SpawnFailureTest):
    STORAGE = 'shared'


class RbdStockTest(_StockChecks, _SpawnFailureTest):
    STORAGE = 'rbd'
