# SPDX-License-Identifier: Apache-2.0

"""The journal, the host lock and the nova releases supported."""

import collections
import errno
import json
import os
from unittest import mock

import fixtures
from nova.compute import manager as nova_manager
import nova.conf
from nova import context
from nova.network import neutron
from nova import objects
from nova import test
from nova.tests.unit import fake_instance
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
        self.journal = self.useFixture(fixtures.TempDir()).path
        self.flags(journal_path=self.journal, group='evacuate_cleanup')
        self.instance = objects.Instance(uuid=uuids.instance)
        self.path = os.path.join(self.instances, uuids.instance)

    def entry(self, shared=False, migration=uuids.migration):
        return journal.Entry(HOST, uuids.instance, migration, spawned=True,
                             shared=shared)


class TestEntries(JournalTestCase):

    def test_round_trip(self):
        self.assertEqual([], journal.entries(HOST))
        entry = self.entry()
        entry.phase, entry.held_from = journal.ENDING, 'rebuild_spawning'
        entry.done = ['migration']
        journal.write(entry)
        [read] = journal.entries(HOST)
        self.assertEqual(entry.as_dict(), read.as_dict())
        # At most thirteen fields (twelve, and since issue 42 the reserved
        # attachments), nothing nested but flat maps and lists of names.
        self.assertLessEqual(len(journal.FIELDS), 13)
        # Per host: another host's journal is not this one's.
        self.assertEqual([], journal.entries('compute2'))
        self.assertEqual([read.as_dict()], [
            e.as_dict() for e in journal.entries(HOST, uuids.instance)])
        self.assertEqual([], journal.entries(HOST, uuids.other))
        journal.remove(entry)
        self.assertEqual([], journal.entries(HOST))
        journal.remove(entry)

    def test_entries_of_the_previous_format(self):
        """Issue 40, item 3: deployments upgrade with entries on disk."""
        directory = os.path.join(self.journal, HOST)
        os.makedirs(directory)
        old = {
            # An evacuation running, spawned, its directory made.
            uuids.running: dict(shared_storage=False, spawning=True,
                                claim={'path': '/i/x'}),
            # An ending half-way.
            uuids.ending: dict(shared_storage=True, spawning=True,
                               ending={'task_state': 'rebuild_spawning',
                                       'from': 'rebuilding',
                                       'done': ['migration']}),
            uuids.releasing: dict(ending={'task_state': 'x', 'done': [],
                                          'releasing': True}),
            # Kept: a vTPM instance's disks, no directory made.
            uuids.kept: dict(shared_storage=False, spawning=True,
                             kept='its files: vTPM',
                             claim={'path': '/i/x', 'keep': 'vTPM'}),
        }
        for migration, fields in old.items():
            data = dict(host=HOST, instance_uuid=uuids.instance,
                        migration_uuid=migration, migration_id=1,
                        shared_storage=None, claim=None, ending=None,
                        kept=None, error=None, spawning=False,
                        detached={uuids.volume: uuids.attachment})
            data.update(fields)
            with open(os.path.join(directory, migration + '.json'),
                      'w') as stream:
                json.dump(data, stream)

        read = {e.migration_uuid: e for e in journal.entries(HOST)}
        self.assertEqual(
            (True, False, '/i/x', journal.BEGUN),
            (read[uuids.running].spawned, read[uuids.running].shared,
             read[uuids.running].claim, read[uuids.running].phase))
        ending = read[uuids.ending]
        self.assertEqual(
            (journal.ENDING, 'rebuilding', ['migration'], True),
            (ending.phase, ending.held_from, ending.done, ending.shared))
        self.assertEqual(journal.RELEASING, read[uuids.releasing].phase)
        self.assertEqual((journal.KEPT, None),
                         (read[uuids.kept].phase, read[uuids.kept].claim))
        self.assertEqual({uuids.volume: uuids.attachment},
                         read[uuids.kept].detached)

    def test_anything_else_is_skipped(self):
        """Issue 19, item 9: one bad file does not stop the others."""
        journal.write(self.entry())
        directory = os.path.join(self.journal, HOST)
        bad = {'list.json': '[1, 2]', 'empty.json': '',
               'truncated.json': '{"host": "compute1", "inst',
               'number.json': '7', 'fields.json': '{"host": "compute1"}',
               'claim.json': json.dumps(dict(
                   self.entry(migration=uuids.claim).as_dict(), claim=3)),
               'done.json': json.dumps(dict(
                   self.entry(migration=uuids.ending).as_dict(),
                   done='x')),
               'phase.json': json.dumps(dict(
                   self.entry(migration=uuids.phase).as_dict(),
                   phase='spawning'))}
        for name, text in bad.items():
            with open(os.path.join(directory, name), 'w') as stream:
                stream.write(text)
        os.mkdir(os.path.join(directory, 'directory.json'))
        # Another host's entry, or one under another name.
        other = journal.Entry('compute2', uuids.instance, uuids.other)
        with open(os.path.join(directory, uuids.other + '.json'),
                  'w') as stream:
            json.dump(other.as_dict(), stream)
        with open(os.path.join(directory, 'renamed.json'), 'w') as stream:
            json.dump(self.entry(migration=uuids.renamed).as_dict(), stream)
        self.assertEqual([uuids.migration],
                         [e.migration_uuid for e in journal.entries(HOST)])

    def test_only_durable_writes_are_fsynced(self):
        """Issue 27, item 4: fsync only where a crash needs it.

        The entry written before the instance directory is created is
        fsynced, with its directory; the others (the error, a removal)
        are atomic only.
        """
        entry = self.entry()
        with mock.patch('os.fsync', wraps=os.fsync) as fsync:
            journal.write(entry)
            self.assertEqual(0, fsync.call_count)
            journal.write(entry, durable=True)
            self.assertEqual(2, fsync.call_count)
            journal.remove(entry)
            self.assertEqual(2, fsync.call_count)
        self.assertEqual([], os.listdir(os.path.join(self.journal, HOST)))

    def test_usable(self):
        """Issue 27, item 3: a journal that cannot be written is told."""
        with mock.patch.object(journal, 'LOG') as log:
            self.assertTrue(journal.usable(HOST))
            log.error.assert_not_called()
            self.assertTrue(os.path.isdir(os.path.join(self.journal, HOST)))
            self.assertEqual([], journal.entries(HOST))
            with mock.patch('os.replace', side_effect=OSError(
                    errno.ENOSPC, 'No space left on device')):
                self.assertFalse(journal.usable(HOST))
            self.assertIn('No space left', str(log.error.call_args))
            self.flags(journal_path='/proc/nova-evac-cleanup',
                       group='evacuate_cleanup')
            self.assertFalse(journal.usable(HOST))

    def test_shared_filesystem(self):
        """Issue 27, item 6: a journal on NFS or CephFS is told."""
        partition = collections.namedtuple('partition', 'mountpoint fstype')
        mounts = [partition('/', 'ext4'),
                  partition('/var/lib/nova', 'nfs4'),
                  partition('/var/lib/nova-local', 'xfs')]
        with mock.patch('psutil.disk_partitions', return_value=mounts):
            for path, kind in (('/var/lib/nova/evacuate_cleanup', 'nfs4'),
                               ('/var/lib/nova', 'nfs4'),
                               ('/var/lib/nova-local/journal', None),
                               ('/srv', None)):
                self.assertEqual(kind, journal.shared_filesystem(path), path)


class TestHostLock(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.flags(lock_path=self.useFixture(fixtures.TempDir()).path,
                   group='oslo_concurrency')

    def acquire(self, host=HOST, timeout=0):
        lock = host_lock.acquire(host, timeout)
        self.addCleanup(host_lock.release, lock)
        return lock

    def test_one_holder(self):
        """Two holders exclude each other, in one process too.

        Issue 27, item 6: no table of the locks this process holds (kept
        for nova's functional tests, whose computes share one process):
        ``flock`` locks an open file description.
        """
        lock = host_lock.acquire(HOST)
        error = self.assertRaises(host_lock.HostLockHeld, host_lock.acquire,
                                  HOST)
        self.assertIn('nova-compute or nova-evac-cleanup audit --delete is '
                      'running', str(error))
        # Another host's lock is another lock.
        self.acquire('compute2')
        host_lock.release(lock)
        self.acquire()

    def test_no_lock_path(self):
        self.flags(lock_path=None, group='oslo_concurrency')
        error = self.assertRaises(host_lock.HostLockHeld,
                                  host_lock.acquire, HOST)
        self.assertIn('lock_path', str(error))

    def test_bounded_wait(self):
        """Issue 19, item 11: a hung audit is waited for a while only."""
        self.acquire()
        with mock.patch('time.sleep') as sleep, \
                mock.patch('time.monotonic', side_effect=[0, 1, 2, 3]):
            self.assertRaises(host_lock.HostLockHeld, host_lock.acquire,
                              HOST, timeout=2.5)
        self.assertEqual(2, sleep.call_count)

    def test_lock_error_other_than_held(self):
        """Issue 34: ``flock`` failing otherwise, refused, never raised.

        ENOLCK on an NFS ``lock_path``: refused like a lock that cannot be
        had, not raised out of nova-compute's start.
        """
        with mock.patch('fcntl.flock', side_effect=OSError(
                errno.ENOLCK, 'No locks available')):
            error = self.assertRaises(host_lock.HostLockHeld,
                                      host_lock.acquire, HOST, timeout=5)
        self.assertFalse(error.busy)
        self.assertIn('No locks available', str(error))

    def test_unwritable_lock_path(self):
        """Issue 19, item 11: a lock that cannot be made is refused."""
        self.flags(lock_path='/proc/nova-evac-cleanup',
                   group='oslo_concurrency')
        self.assertRaises(host_lock.HostLockHeld, host_lock.acquire, HOST)


class TestNovaSupport(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        nova_support.changed.cache_clear()
        self.addCleanup(nova_support.changed.cache_clear)

    def test_installed_nova_has_every_name(self):
        """Issue 41, item 2: every nova name relied on, private or not."""
        self.assertEqual({}, nova_support.changed())
        for cost in (nova_support.HOOK, nova_support.FINISH,
                     nova_support.HELPER):
            self.assertEqual([], nova_support.problems(cost))
        self.assertFalse(nova_support.nova_has_the_fix())

    def test_each_missing_name_is_told(self):
        """Whichever name a nova lacks, the check says so."""
        for owner, name in nova_support.NAMES:
            nova_support.changed.cache_clear()
            with mock.patch.object(owner, name, None):
                self.assertIn('%s.%s(' % (owner.__name__, name),
                              nova_support.changed().get(name, ''))

    def test_changed_signature(self):
        def _do_rebuild_instance(self, context, instance):
            pass

        with mock.patch.object(nova_manager.ComputeManager,
                               '_do_rebuild_instance', _do_rebuild_instance):
            [text] = nova_support.problems(nova_support.HOOK)
        self.assertIn('ComputeManager._do_rebuild_instance(self, context, '
                      'instance, orig_image_ref, image_meta', text)
        self.assertIn('expected, (self, context, instance) found', text)

    def test_an_unreadable_signature_is_a_change(self):
        """A name whose signature cannot be read never stops the start."""
        with mock.patch.object(neutron.API, '_get_port_pci_dev', 42):
            self.assertIn('_get_port_pci_dev',
                          nova_support.changed())

    def test_a_removed_helper_is_reported_and_refused(self):
        """A nova that removed one: one sentence, and no call to it."""
        with mock.patch.object(neutron.API, '_has_resource_request', None):
            self.assertEqual(
                ['API._has_resource_request(self, context, port, neutron) '
                 'expected, no such method found'],
                nova_support.problems(nova_support.HELPER))
            self.assertRaises(nova_support.HelperChanged, nova_support.helper,
                              mock.Mock(), '_has_resource_request')

    def test_nova_release_outside_the_range(self):
        """Issue 27, item 3: the range requirements.txt states, enforced.

        35.0.0 and 30.2.0 passed before: only the vTPM minimum of 31 and
        32 was checked.
        """
        for version, ok in (('31.2.0', False), ('31.3.0', True),
                            ('31.3.1.dev4', True), ('32.0.0', False),
                            ('32.1.9', False), ('32.2.0', True),
                            ('33.0.0', True), ('34.0.0', True),
                            ('34.1.0.dev12', True), ('35.0.0', False),
                            ('35.0.0.0b1', False), ('30.2.0', False)):
            problem = nova_support.release_problem(version)
            self.assertEqual(ok, not problem, (version, problem))
            if not ok:
                self.assertIn(nova_support.supported_range(), problem)
                self.assertIn(version, problem)
        # Its hooks are not the range's business.
        with mock.patch('nova.version.version_string',
                        return_value='35.0.0'):
            self.assertEqual([], nova_support.problems(nova_support.HOOK))

    def test_releases_that_delete_the_vtpm_secret(self):
        """Bug 2125030, fixed by nova commit 787d2a1300 and its backports."""
        for version, deletes in (('30.3.0', True), ('31.2.0', True),
                                 ('31.3.0', False), ('32.0.0', True),
                                 ('32.1.9', True), ('32.2.0', False),
                                 ('33.0.0', False), ('35.0.0', False),
                                 ('31.3.1.dev4', False), ('not-a-version',
                                                          True)):
            self.assertEqual(deletes, nova_support.deletes_vtpm_secret(
                version), version)

    def test_vtpm_hazard(self):
        instance = fake_instance.fake_instance_obj(
            context.get_admin_context(), expected_attrs=['system_metadata'])
        instance.flavor.extra_specs = {}
        with mock.patch('nova.version.version_string',
                        return_value='32.1.0'):
            self.assertIsNone(nova_support.vtpm_hazard(instance))
            instance.system_metadata['image_hw_tpm_version'] = '2.0'
            self.assertIn('bug 2125030', nova_support.vtpm_hazard(instance))
            del instance.system_metadata['image_hw_tpm_version']
            instance.system_metadata['vtpm_secret_uuid'] = 'a-secret'
            self.assertIn('vTPM', nova_support.vtpm_hazard(instance))
        with mock.patch('nova.version.version_string',
                        return_value='32.2.0'):
            self.assertIsNone(nova_support.vtpm_hazard(instance))

    def test_one_place_states_the_range(self):
        """The range is requirements.txt's, as the package declares it."""
        with open(os.path.join(os.path.dirname(__file__), '..', '..',
                               'requirements.txt')) as stream:
            [line] = [line for line in stream if line.startswith('nova')]
        declared = line.split('#')[0].strip()[len('nova'):]
        self.assertEqual(sorted(declared.split(',')),
                         sorted(nova_support.supported_range().split(',')))

    def test_patched_nova(self):
        def _rebuild_default_impl(self, context, instance,
                                  on_shared_storage=None):
            pass

        with mock.patch.object(nova_manager.ComputeManager,
                               '_rebuild_default_impl',
                               _rebuild_default_impl):
            self.assertTrue(nova_support.nova_has_the_fix())
            self.assertIn('patch series is applied',
                          nova_support.problems(nova_support.HOOK)[0])
