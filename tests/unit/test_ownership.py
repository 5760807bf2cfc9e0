# SPDX-License-Identifier: Apache-2.0

"""The proof that an instance directory is an evacuation's own."""

import os
from unittest import mock

from nova_evac_cleanup import journal
from nova_evac_cleanup import ownership
from tests.unit import test_journal

HOST = test_journal.HOST


class TestProof(test_journal.JournalTestCase):

    def claimed(self):
        """What the manager records just before spawn, then spawn's mkdir."""
        entry = self.entry()
        entry.claim, entry.fsid = self.path, ownership.filesystem(self.path)
        journal.write(entry, durable=True)
        os.makedirs(self.path)
        return entry

    def test_directory_absent_before_spawn_is_owned(self):
        self.assertEqual(os.statvfs(self.instances).f_fsid,
                         ownership.filesystem(self.path))
        entry = self.claimed()
        # The entry on disk proves it, without memory.
        [read] = journal.entries(HOST)
        self.assertEqual((entry.claim, entry.fsid), (read.claim, read.fsid))
        self.assertEqual((True, None), ownership.proof(read))

    def test_shared_unknown_or_unclaimed_never_owned(self):
        entry = self.claimed()
        for shared in (True, None):
            entry.shared = shared
            self.assertFalse(ownership.proof(entry)[0])
        entry.shared = False
        # An entry of an earlier version: no filesystem recorded.
        entry.fsid = None
        owns, why = ownership.proof(entry)
        self.assertFalse(owns)
        self.assertIn('not absent before', why)

    def test_another_filesystem(self):
        """A share mounted over the instances path since spawn."""
        entry = self.claimed()
        real_statvfs = os.statvfs

        def statvfs(path):
            result = real_statvfs(path)
            return mock.Mock(f_fsid=result.f_fsid + 1)

        with mock.patch('os.statvfs', side_effect=statvfs):
            owns, why = ownership.proof(entry)
        self.assertFalse(owns)
        self.assertIn('not on the filesystem it was absent from', why)

    def test_a_symbolic_link_is_not_the_directory(self):
        entry = self.claimed()
        os.rename(self.path, self.path + '.away')
        os.symlink(self.path + '.away', self.path)
        self.assertFalse(ownership.proof(entry)[0])

    def test_the_instances_path_moved(self):
        entry = self.claimed()
        self.flags(instances_path=self.instances + '/elsewhere')
        owns, why = ownership.proof(entry)
        self.assertFalse(owns)
        self.assertIn('is now', why)

    def test_filesystem_of_a_relative_path(self):
        """A relative instances path: its filesystem, not a loop for ever."""
        os.chdir(self.instances)
        self.addCleanup(os.chdir, os.path.dirname(os.path.abspath(__file__)))
        self.assertEqual(os.statvfs(self.instances).f_fsid,
                         ownership.filesystem('instances/x/y'))

    def test_contents_without_a_walk(self):
        os.makedirs(os.path.join(self.path, 'sub'))
        with open(os.path.join(self.path, 'disk'), 'w') as f:
            f.write('12345')
        contents = ownership.contents(self.path)
        self.assertEqual(5, contents['disk'])
        self.assertEqual({'disk', 'sub'}, set(contents))
        self.assertEqual({}, ownership.contents(self.path + 'x'))
