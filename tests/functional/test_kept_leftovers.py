# SPDX-License-Identifier: Apache-2.0

"""A leftover the cleanup keeps is never booted by the next evacuation.

Issue 19, items 1 and 3. compute0, the source, dies and the server's
evacuation to compute1 fails or is interrupted. The cleanup keeps what it
cannot prove is its own: the guest and files when ``destroy`` fails, the
files when the instance directory no longer carries the evacuation's
ownership marker, the files when the directory existed already although
nova found the instance files not on shared storage (a share that was
unreachable when nova asked).

Before the fix, the next evacuation of the server to compute1 then found
the leftover directory, took it for shared storage and booted the stale
disk (the original bug), or failed on the leftover guest with
``InstanceExists``; and, when nova's answer and the manager's own question
disagreed on an NFS hiccup, the failed spawn removed the only copy of the
disks on the share.

After the fix there is one answer to "shared?", nova's, and a directory
found when the evacuation claims it makes the answer "unknown": the disks
are kept. A kept leftover of an evacuation that found the files not on
shared storage (or could not tell) makes the next evacuation of that
server to compute1 fail at once, before anything is created there, with a
fault that names the leftover and the command that clears it; once the
operator has removed it, the evacuation goes ahead on a fresh disk. Files
found on shared storage are the server's own: the next evacuation uses
them, as before.
"""

import shutil

import fixtures

from nova_evac_cleanup import journal
from tests.functional import test_interrupted_evacuation as interrupted
from tests.harness import fake_libvirt

SOURCE = interrupted.SOURCE
DEST = interrupted.DEST


class _KeptLeftoverTest(interrupted._InterruptedEvacuationTest):

    def assert_refused(self, server):
        """The next evacuation to compute1 fails before spawning.

        :returns: the fault's message
        """
        spawns = len(self.world.spawns(DEST, server['id']))
        files = self.world.files(DEST, server['id'])
        guest = self.world.domain_state(DEST, server['id'])
        server = self._evacuate(server, expected_state='ERROR',
                                expected_migration_status='failed')
        self.assertEqual(SOURCE, server['OS-EXT-SRV-ATTR:host'])
        message = server['fault']['message']
        path = self.world.instance_dir(DEST, server['id'])
        self.assertIn(path, message)
        # The whole message, with every command, is in the details.
        self.assertIn('rm -rf %s' % path, server['fault']['details'])
        # Nothing was attempted on compute1, nothing changed there.
        self.assertEqual(spawns, len(self.world.spawns(DEST, server['id'])))
        self.assertEqual(files, self.world.files(DEST, server['id']))
        self.assertEqual(guest, self.world.domain_state(DEST, server['id']))
        self.assertIsNone(self._dest_allocation(server))
        return message

    def assert_evacuates_on_a_fresh_disk(self, server):
        generations = {r.generation for r in self.world.spawns()}
        self._evacuate(server)
        self.assertEqual('running',
                         self.world.domain_state(DEST, server['id']))
        self.assertTrue(self.world.disk_is_complete(DEST, server['id']))
        self.assertNotIn(self.world.disk_generation(DEST, server['id']),
                         generations)

    def _operator_removes_the_leftover(self, server):
        """What the fault says to run, done by hand on compute1."""
        self.world.remove_domain(DEST, server['id'])
        shutil.rmtree(self.world.instance_dir(DEST, server['id']))


class NonSharedTest(_KeptLeftoverTest):

    STORAGE = 'non-shared'

    def test_destroy_failed(self):
        """The spawn fails, then destroy fails: the guest is kept, off.

        Issue 18, cell ``spawn-fails driver.destroy#1 raise``: the guest
        left running there was a second writer on the server's disks once
        its source ran it again, and the leftover refused every later
        evacuation to compute1 though it is provably the evacuation's own.
        Now the guest is at least powered off, and the next evacuation to
        compute1 destroys it, with the disks the evacuation created, first.
        """
        server = self._boot()
        self._fail_source()
        self.world.inject_destroy_fault(DEST)
        server, _error = self._fail_evacuation(server, 'wait_for_boot')
        self.assertEqual('defined',
                         self.world.domain_state(DEST, server['id']))
        self.assertIn('disk', self.world.files(DEST, server['id']))
        self.world.clear_faults()

        self.assert_evacuates_on_a_fresh_disk(server)

    def test_sweep_without_proof(self):
        """Another filesystem: the sweep destroys the guest, keeps files.

        The journal says the directory was absent before spawn from
        another filesystem than the one it is on now (a share mounted
        over the instances path since).
        """
        server = self._boot()
        self._fail_source()
        server, migration, block = self._interrupt_evacuation(
            server, 'wait_for_boot')
        self._end_held_spawn(block)
        [entry] = journal.entries(DEST)
        entry.fsid += 1
        journal.write(entry)

        self._restart_dest()

        self.assertIsNone(self.world.domain_state(DEST, server['id']))
        self.assertIn('disk', self.world.files(DEST, server['id']))
        server = self.api.get_server(server['id'])
        self.assertEqual('ERROR', server['status'])
        self.assertIsNone(server['OS-EXT-STS:task_state'])
        self.assert_refused(server)
        self._operator_removes_the_leftover(server)
        self.assert_evacuates_on_a_fresh_disk(server)


class SharedTest(_KeptLeftoverTest):

    STORAGE = 'shared'

    def test_shared_files_are_the_servers_own(self):
        """Found on shared storage: kept, and the retry boots them."""
        server = self._boot()
        disk = self.world.disk_checksum(SOURCE, server['id'])
        self._fail_source()
        server, _error = self._fail_evacuation(server, 'wait_for_boot')
        self.assertEqual(disk, self.world.disk_checksum(DEST, server['id']))

        self._evacuate(server)
        self.assertEqual('running',
                         self.world.domain_state(DEST, server['id']))

    def test_share_unreachable_when_nova_asked(self):
        """The share's answer flaps: an NFS hiccup when nova asks.

        The instance directory is on the share, but nova's one
        ``instance_on_disk`` on compute1 answers False: nova evacuates
        "from the image", as stock nova does, and the manager takes nova's
        answer from that call (issue 41: it no longer asks a second time).
        The directory exists, so the manager counts the answer as unknown:
        the disks would be kept whatever happened. The driver, as libvirt's
        image backend does, reuses the disk it finds: the server runs on
        its own disk, the only copy, byte-identical.
        """
        server = self._boot()
        disk = self.world.disk_checksum(SOURCE, server['id'])
        self._fail_source()
        real = fake_libvirt.FakeLibvirtDriver.instance_on_disk
        answers = []

        def hiccup(driver, instance):
            answer = real(driver, instance)
            if driver._host == DEST and not answers:
                answer = False
            answers.append(answer)
            return answer

        self.useFixture(fixtures.MonkeyPatch(
            'tests.harness.fake_libvirt.FakeLibvirtDriver.'
            'instance_on_disk', hiccup))
        server = self._evacuate(server)

        self.assertEqual([False], answers)
        self.assertEqual('running',
                         self.world.domain_state(DEST, server['id']))
        self.assertEqual(disk, self.world.disk_checksum(DEST, server['id']))
        self.assertEqual(disk, self.world.disk_checksum(SOURCE, server['id']))
