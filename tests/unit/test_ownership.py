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

"""The proof that an instance directory is an evacuation's own."""

import os
from unittest import mock

from oslo_utils.fixture import uuidsentinel as uuids

from nova_evac_cleanup import journal
from nova_evac_cleanup import ownership
from tests.unit import test_journal

HOST = test_journal.HOST


class TestClaim(test_journal.JournalTestCase):

    def claim(self, entry):
        """What the manager does just before spawn."""
        entry.claim = self.path
        journal.write(entry, durable=True)
        return ownership.claim(entry)

    def test_claimed_directory_is_owned(self):
        entry = self.entry()
        made = self.claim(entry)
        self.assertEqual(ownership.identity(self.path), made)
        self.assertEqual([ownership.MARKER], os.listdir(self.path))
        # The entry on disk and the marker prove it, without memory.
        [read] = journal.entries(HOST)
        self.assertEqual(entry.claim, read.claim)
        self.assertEqual((True, None), ownership.proof(read))

    def test_claim_is_durable(self):
        """Issue 19, item 4: the marker and both directories fsynced."""
        synced = []
        real_fsync = os.fsync

        def fsync(descriptor):
            synced.append(os.readlink('/proc/self/fd/%d' % descriptor))
            return real_fsync(descriptor)

        with mock.patch('os.fsync', side_effect=fsync):
            self.claim(self.entry())
        marker = os.path.join(self.path, ownership.MARKER)
        for path in (marker, self.path, self.instances):
            self.assertIn(path, synced)
        self.assertLess(synced.index(marker), synced.index(self.path))

    def test_existing_directory_is_not_claimed(self):
        os.makedirs(self.path)
        entry = self.entry()
        self.assertRaises(FileExistsError, self.claim, entry)
        self.assertEqual([], os.listdir(self.path))
        entry.claim = None
        owns, why = ownership.proof(entry)
        self.assertFalse(owns)
        self.assertIn('did not create the instance directory', why)

    def test_marker_not_written(self):
        """Issue 27, item 3: a full disk, the proof kept in memory.

        This process created the directory; only it may remove it then,
        while it is still the directory it created.
        """
        entry = self.entry()
        real_open = open

        def full(path, *args, **kwargs):
            if str(path).endswith(ownership.MARKER):
                raise OSError(28, 'No space left on device')
            return real_open(path, *args, **kwargs)

        with mock.patch('builtins.open', side_effect=full):
            made = self.claim(entry)
        self.assertEqual([], os.listdir(self.path))
        self.assertEqual((True, None), ownership.proof(entry, made))
        self.assertFalse(ownership.proof(entry)[0])
        # Another directory there now (the one made still exists: its
        # inode is not reused).
        os.rename(self.path, self.path + '.away')
        os.makedirs(self.path)
        self.assertFalse(ownership.proof(entry, made)[0])

    def test_shared_or_unknown_never_owned(self):
        entry = self.entry()
        self.claim(entry)
        for shared in (True, None):
            entry.shared = shared
            self.assertFalse(ownership.proof(entry)[0])

    def test_marker_gone_or_another(self):
        """The path now shows another directory."""
        entry = self.entry()
        self.claim(entry)
        os.rename(self.path, self.path + '.away')
        os.makedirs(self.path)
        owns, why = ownership.proof(entry)
        self.assertFalse(owns)
        self.assertIn('no ownership marker', why)
        other = self.entry(migration=uuids.other)
        other.claim = entry.claim
        os.rmdir(self.path)
        os.rename(self.path + '.away', self.path)
        owns, why = ownership.proof(other)
        self.assertFalse(owns)
        self.assertIn('names migration %s' % uuids.migration, why)

    def test_marker_copied_elsewhere(self):
        """A copy of the directory, marker included, is not the one made."""
        entry = self.entry()
        self.claim(entry)
        os.rename(self.path, self.path + '.away')
        os.makedirs(self.path)
        os.rename(os.path.join(self.path + '.away', ownership.MARKER),
                  os.path.join(self.path, ownership.MARKER))
        owns, why = ownership.proof(entry)
        self.assertFalse(owns)
        self.assertIn('not the directory the evacuation created', why)

    def test_identity_survives_a_reboot(self):
        """Issue 19, item 4: a new device number proves nothing wrong.

        ``st_dev`` changes across reboots on some layouts (device-mapper
        minors, btrfs); the filesystem id and the inode do not.
        """
        entry = self.entry()
        self.claim(entry)
        real_stat = os.stat

        def stat(path, *args, **kwargs):
            result = real_stat(path, *args, **kwargs)
            if str(path) == self.path:
                return mock.Mock(st_dev=result.st_dev + 7,
                                 st_ino=result.st_ino)
            return result

        with mock.patch('os.stat', side_effect=stat):
            self.assertEqual((True, None), ownership.proof(entry))

    def test_another_filesystem(self):
        """A share mounted over the instances path, a marker on it."""
        entry = self.entry()
        self.claim(entry)
        real_statvfs = os.statvfs

        def statvfs(path):
            result = real_statvfs(path)
            return mock.Mock(f_fsid=result.f_fsid + 1)

        with mock.patch('os.statvfs', side_effect=statvfs):
            owns, why = ownership.proof(entry)
        self.assertFalse(owns)
        self.assertIn('another filesystem', why)

    def test_remove_only_an_empty_directory(self):
        entry = self.entry()
        self.claim(entry)
        with open(os.path.join(self.path, 'disk'), 'w') as f:
            f.write('x')
        self.assertFalse(ownership.release(entry))
        self.assertEqual(sorted(['disk', ownership.MARKER]),
                         sorted(os.listdir(self.path)))
        os.unlink(os.path.join(self.path, 'disk'))
        self.assertTrue(ownership.release(entry))
        self.assertFalse(os.path.exists(self.path))
        self.assertTrue(ownership.release(entry))

    def test_died_between_mkdir_and_marker(self):
        """An empty directory the claim recorded goes; nothing else."""
        entry = self.entry()
        entry.claim = self.path
        os.makedirs(self.path)
        self.assertTrue(ownership.release(entry))
        self.assertFalse(os.path.exists(self.path))
        unclaimed = self.entry()
        os.makedirs(self.path)
        self.assertTrue(ownership.release(unclaimed))
        self.assertTrue(os.path.exists(self.path))

    def test_release_keeps_the_directory(self):
        entry = self.entry()
        self.claim(entry)
        with open(os.path.join(self.path, 'disk'), 'w') as f:
            f.write('x')
        self.assertTrue(ownership.release(entry, lives_here=True))
        self.assertEqual(['disk'], os.listdir(self.path))

    def test_contents_without_a_walk(self):
        os.makedirs(os.path.join(self.path, 'sub'))
        with open(os.path.join(self.path, 'disk'), 'w') as f:
            f.write('12345')
        contents = ownership.contents(self.path)
        self.assertEqual(5, contents['disk'])
        self.assertEqual({'disk', 'sub'}, set(contents))
        self.assertEqual({}, ownership.contents(self.path + 'x'))
