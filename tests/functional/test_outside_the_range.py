# SPDX-License-Identifier: Apache-2.0

"""Regression test for issue 27, item 3: a nova outside the range.

compute0 is the source, which dies; compute1 the destination, where
``driver.spawn`` fails. compute1 runs a nova release outside the range
``requirements.txt`` states (35.0.0, 30.2.0), or cannot read this
project's package metadata. Its manager's hooks check out on all of them.

Before, such a compute ran as nova's own manager: the guest of the failed
spawn kept running on compute1 and its disk stayed for the next
evacuation to boot, which is the bug itself. After the fix it logs one
ERROR naming what differs and cleans up as on the releases of the range.

On 30.x, 31.x before 31.3.0 and 32.x before 32.2.0 nova's libvirt driver
deletes the instance's vTPM secret when it removes its disks (bug
2125030): there the guest of a server with a vTPM is destroyed and its
disks are kept, which refuses the next evacuation of it to compute1.
"""

from importlib import metadata
import logging

import fixtures
from nova import context as nova_context
from nova import objects
import testscenarios

from tests.harness import functional as base

load_tests = testscenarios.load_tests_apply_scenarios

DEST = base.DEST


class _OtherReleaseTest(base.EvacuateTestCase):
    """compute1 restarted on another nova release."""

    STORAGE = 'non-shared'
    FIXED = True
    release = '34.0.0'
    metadata_readable = True

    def setUp(self):
        super().setUp()
        if base.fix_mode() == base.FIX_PATCH:
            self.skipTest('the start-up checks are the manager\'s')
        self.useFixture(fixtures.MockPatch(
            'nova.version.version_string', return_value=self.release))
        self.log = self.useFixture(fixtures.FakeLogger(
            name='nova_evac_cleanup', level=logging.ERROR))
        requires = fixtures.MockPatchObject(metadata, 'requires',
                                            wraps=metadata.requires)
        if not self.metadata_readable:
            requires = fixtures.MockPatchObject(
                metadata, 'requires',
                side_effect=metadata.PackageNotFoundError('nova-evac-cleanup'))
        with requires:
            self.compute1 = self.restart_compute_service(self.compute1)
        self.server = self._boot()
        self.uuid = self.server['id']
        self._fail_source()


class OutsideTheRangeTest(_OtherReleaseTest):

    scenarios = [
        ('newer', {'release': '35.0.0', 'names': 'nova 35.0.0 is not one'}),
        ('older', {'release': '30.2.0', 'names': 'nova 30.2.0 is not one'}),
        ('unreadable-metadata', {
            'metadata_readable': False,
            'names': 'cannot be read from its package metadata'}),
    ]

    def test_failed_spawn_cleaned_up(self):
        [line] = self.log.output.splitlines()
        self.assertIn(self.names, line)
        self.assertIn('the cleanup of a failed spawn still runs', line)

        server, error = self._fail_evacuation(self.server, 'wait_for_boot')

        self.assert_failed_and_cleaned(server, error)

        # The retry builds a fresh disk from the image.
        self._evacuate(server)
        self.assertEqual('running', self.world.domain_state(DEST, self.uuid))
        self.assertTrue(self.world.disk_is_complete(DEST, self.uuid))


class VtpmSecretTest(_OtherReleaseTest):
    """nova 31.2.0, whose destroy with the disks deletes the vTPM secret."""

    release = '31.2.0'

    def setUp(self):
        super().setUp()
        # The secret nova made for the server's vTPM when it booted it.
        context = nova_context.get_admin_context()
        instance = objects.Instance.get_by_uuid(context, self.uuid)
        instance.system_metadata['vtpm_secret_uuid'] = 'its-secret'
        instance.save()

    def test_disks_kept_and_refused(self):
        server, error = self._fail_evacuation(self.server, 'wait_for_boot')

        self.assertEqual('ERROR', server['status'])
        self.assertEqual('FakeLibvirtError', server['fault']['message'])
        self.assertIn(str(error), server['fault']['details'])
        # The guest is gone, the disks kept: never destroy_disks=True.
        self.assertIsNone(self.world.domain_state(DEST, self.uuid))
        files = self.world.files(DEST, self.uuid)
        self.assertNotEqual({}, files)

        # The next evacuation to compute1 is refused before spawning.
        spawns = len(self.world.spawns(DEST, self.uuid))
        server = self._evacuate(server, expected_state='ERROR',
                                expected_migration_status='failed')
        self.assertIn(self.world.instance_dir(DEST, self.uuid),
                      server['fault']['message'])
        self.assertEqual(spawns, len(self.world.spawns(DEST, self.uuid)))
        self.assertEqual(files, self.world.files(DEST, self.uuid))
