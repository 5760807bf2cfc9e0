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

"""The journal, the ownership marker and the host lock."""

import os
from unittest import mock

import fixtures
import nova.conf
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_evac_cleanup import conf
from nova_evac_cleanup import host_lock
from nova_evac_cleanup import journal
from nova_evac_cleanup import nova_support

HOST = 'compute1'


class JournalTestCase(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        conf.register_opts(nova.conf.CONF)
        self.instances = self.useFixture(fixtures.TempDir()).path
        self.flags(instances_path=self.instances)
        self.flags(journal_path=self.useFixture(fixtures.TempDir()).path,
                   group='evacuate_cleanup')
        self.instance = objects.Instance(uuid=uuids.instance)
        self.path = os.path.join(self.instances, uuids.instance)

    def entry(self, shared=False, migration=uuids.migration):
        return journal.Entry(HOST, uuids.instance, migration, 1, shared)


class TestEntries(JournalTestCase):

    def test_round_trip(self):
        self.assertEqual([], journal.entries(HOST))
        entry = self.entry()
        journal.write(entry)
        [read] = journal.entries(HOST)
        self.assertEqual(entry.as_dict(), read.as_dict())
        # Per host: another host's journal is not this one's.
        self.assertEqual([], journal.entries('compute2'))
        journal.remove(entry)
        self.assertEqual([], journal.entries(HOST))
        journal.remove(entry)

    def test_unreadable_entry_proves_nothing(self):
        journal.write(self.entry())
        directory = os.path.dirname(journal._path(HOST, uuids.migration))
        with open(os.path.join(directory, 'broken.json'), 'w') as f:
            f.write('{not json')
        self.assertEqual([uuids.migration],
                         [e.migration_uuid for e in journal.entries(HOST)])


class TestOwnership(JournalTestCase):

    def test_claimed_directory_is_owned(self):
        entry = self.entry()
        self.assertTrue(journal.claim_directory(entry, self.instance))
        self.assertTrue(entry.created_dir)
        self.assertEqual(self.path, entry.dir_path)
        # The entry on disk says so too.
        [read] = journal.entries(HOST)
        self.assertTrue(read.created_dir)
        self.assertEqual((True, None),
                         journal.owns_directory(read, self.instance))

    def test_existing_directory_is_not_claimed(self):
        os.makedirs(self.path)
        entry = self.entry()
        self.assertFalse(journal.claim_directory(entry, self.instance))
        self.assertEqual([], os.listdir(self.path))
        owns, why = journal.owns_directory(entry, self.instance)
        self.assertFalse(owns)
        self.assertIn('existed before', why)

    def test_shared_or_unknown_never_owned(self):
        for shared in (True, None):
            entry = self.entry(shared=shared)
            entry.created_dir = True
            entry.dir_path = self.path
            self.assertFalse(journal.owns_directory(entry, self.instance)[0])

    def test_marker_gone_or_another(self):
        """Scenario 3: the path now shows another directory."""
        entry = self.entry()
        journal.claim_directory(entry, self.instance)
        os.rename(self.path, self.path + '.away')
        os.makedirs(self.path)
        owns, why = journal.owns_directory(entry, self.instance)
        self.assertFalse(owns)
        self.assertIn('no ownership marker', why)
        other = self.entry(migration=uuids.other)
        other.created_dir, other.dir_path = True, self.path
        os.rmdir(self.path)
        os.rename(self.path + '.away', self.path)
        owns, why = journal.owns_directory(other, self.instance)
        self.assertFalse(owns)
        self.assertIn('names %s' % uuids.migration, why)

    def test_another_filesystem(self):
        """Scenario 3: a share mounted over the instances path."""
        entry = self.entry()
        journal.claim_directory(entry, self.instance)
        entry.dir_device += 1
        owns, why = journal.owns_directory(entry, self.instance)
        self.assertFalse(owns)
        self.assertIn('another filesystem', why)

    def test_abandon_only_an_empty_directory(self):
        entry = self.entry()
        journal.claim_directory(entry, self.instance)
        with open(os.path.join(self.path, 'disk'), 'w') as f:
            f.write('x')
        journal.abandon_directory(entry)
        self.assertEqual(sorted(['disk', journal.MARKER]),
                         sorted(os.listdir(self.path)))
        os.unlink(os.path.join(self.path, 'disk'))
        journal.abandon_directory(entry)
        self.assertFalse(os.path.exists(self.path))

    def test_release_keeps_the_directory(self):
        entry = self.entry()
        journal.claim_directory(entry, self.instance)
        journal.release_directory(entry)
        self.assertEqual([], os.listdir(self.path))

    def test_contents_without_a_walk(self):
        os.makedirs(os.path.join(self.path, 'sub'))
        with open(os.path.join(self.path, 'disk'), 'w') as f:
            f.write('12345')
        contents = journal.directory_contents(self.path)
        self.assertEqual(5, contents['disk'])
        self.assertEqual({'disk', 'sub'}, set(contents))
        self.assertEqual({}, journal.directory_contents(self.path + 'x'))


class TestSharedDirectoryNote(JournalTestCase):
    """What the audit reads to tell the instance's files from leftovers."""

    def test_noted_only_for_shared_storage(self):
        os.mkdir(self.path)
        for shared in (False, None):
            journal.note_shared_directory(self.entry(shared), self.instance)
            self.assertFalse(journal.shares_directory(
                HOST, uuids.migration, self.instance))
        journal.note_shared_directory(self.entry(True), self.instance)
        self.assertTrue(journal.shares_directory(
            HOST, uuids.migration, self.instance))
        # Per migration, and not an entry of the journal.
        self.assertFalse(journal.shares_directory(
            HOST, uuids.other_migration, self.instance))
        self.assertEqual([], journal.entries(HOST))
        journal.forget_shared_directory(HOST, uuids.migration)
        self.assertFalse(journal.shares_directory(
            HOST, uuids.migration, self.instance))
        journal.forget_shared_directory(HOST, uuids.migration)

    def test_another_directory_or_filesystem_is_not_covered(self):
        os.mkdir(self.path)
        journal.note_shared_directory(self.entry(True), self.instance)
        real_stat = os.stat

        def stat(path, *args, **kwargs):
            result = real_stat(path, *args, **kwargs)
            if path == self.path:
                return mock.Mock(st_dev=result.st_dev + 1)
            return result

        with mock.patch('os.stat', side_effect=stat):
            self.assertFalse(journal.shares_directory(
                HOST, uuids.migration, self.instance))
        self.flags(instances_path=os.path.join(self.instances, 'moved'))
        os.makedirs(os.path.join(self.instances, 'moved', uuids.instance))
        self.assertFalse(journal.shares_directory(
            HOST, uuids.migration, self.instance))

    def test_no_directory_no_note(self):
        journal.note_shared_directory(self.entry(True), self.instance)
        self.assertFalse(journal.shares_directory(
            HOST, uuids.migration, self.instance))


class TestHostLock(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.flags(lock_path=self.useFixture(fixtures.TempDir()).path,
                   group='oslo_concurrency')
        self.addCleanup(host_lock.release_all)

    def test_one_holder(self):
        host_lock.acquire(HOST)
        self.assertTrue(host_lock.held(HOST))
        self.assertRaises(host_lock.HostLockHeld, host_lock.acquire, HOST)
        # Another host's lock is another lock.
        host_lock.acquire('compute2')
        host_lock.release(HOST)
        host_lock.acquire(HOST)

    def test_held_by_another_process(self):
        with mock.patch('fasteners.InterProcessLock.acquire',
                        return_value=False):
            error = self.assertRaises(host_lock.HostLockHeld,
                                      host_lock.acquire, HOST)
        self.assertIn('nova-compute is running', str(error))
        self.assertFalse(host_lock.held(HOST))

    def test_no_lock_path(self):
        self.flags(lock_path=None, group='oslo_concurrency')
        error = self.assertRaises(host_lock.HostLockHeld,
                                  host_lock.acquire, HOST)
        self.assertIn('lock_path', str(error))


class TestNovaSupport(test.NoDBTestCase):

    def test_installed_nova_matches(self):
        self.assertEqual([], nova_support.mismatches())
        nova_support.check()

    def test_changed_signature_refused(self):
        class Drifted(object):
            def init_host(self, service_ref):
                pass

            def cleanup_host(self):
                pass

            def _do_rebuild_instance(self, context, instance):
                pass

        problems = nova_support.mismatches(Drifted)
        self.assertEqual(['_do_rebuild_instance', '_rebuild_default_impl',
                          'rebuild_instance'],
                         [name for name, _expected, _found in problems])
        error = self.assertRaises(nova_support.UnsupportedNova,
                                  nova_support.check, Drifted)
        self.assertIn('no such method', str(error))
        self.assertIn('(self, context, instance) found', str(error))
        self.assertIn(nova_support.SUPPORTED, str(error))

    def test_manager_refuses_a_drifted_nova(self):
        from nova_evac_cleanup import manager

        with mock.patch.object(nova_support, 'OVERRIDDEN',
                               dict(nova_support.OVERRIDDEN,
                                    init_host=('self',))):
            self.assertRaises(nova_support.UnsupportedNova,
                              manager.ComputeManager)
