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

"""Unit tests of the decisions of the interrupted-evacuation recovery."""

from nova.compute import task_states
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_evac_cleanup.cmd import audit as audit_cmd
from nova_evac_cleanup import recovery


def _migration(id_, status, uuid=None):
    return objects.Migration(id=id_, uuid=uuid or uuids.migration,
                             status=status, dest_compute='compute1',
                             source_compute='compute0')


def _instance(task_state=task_states.REBUILD_SPAWNING, migration_id=None):
    instance = objects.Instance(uuid=uuids.instance, host='compute0',
                                task_state=task_state, system_metadata={})
    instance.migration_context = (
        None if migration_id is None else
        objects.MigrationContext(migration_id=migration_id))
    return instance


class TestSharedStorageRecord(test.NoDBTestCase):

    def test_round_trip_per_migration(self):
        instance = _instance()
        migration = _migration(1, 'pre-migrating')
        for answer in (True, False, None):
            recovery.record_shared_storage(instance, migration, answer)
            self.assertIs(
                answer, recovery.recorded_shared_storage(instance, migration))
        # A record of another evacuation says nothing about this one.
        recovery.record_shared_storage(instance, migration, False)
        other = _migration(2, 'pre-migrating', uuid=uuids.other)
        self.assertIsNone(recovery.recorded_shared_storage(instance, other))

    def test_nothing_recorded(self):
        self.assertIsNone(recovery.recorded_shared_storage(
            _instance(), _migration(1, 'pre-migrating')))

    def test_migration_without_uuid(self):
        instance = _instance()
        recovery.record_shared_storage(instance, objects.Migration(), False)
        recovery.record_shared_storage(instance, None, False)
        self.assertEqual({}, instance.system_metadata)


class TestClassify(test.NoDBTestCase):

    def classify(self, instance, latest, ours):
        return recovery._classify('compute1', instance, latest, ours)

    def test_interrupted(self):
        for status in ('pre-migrating', 'completed'):
            ours = _migration(1, status)
            self.assertEqual(recovery.INTERRUPTED, self.classify(
                _instance(migration_id=1), ours, ours))

    def test_reset_by_operator(self):
        ours = _migration(1, 'pre-migrating')
        self.assertEqual(recovery.RESET, self.classify(
            _instance(task_state=None, migration_id=1), ours, ours))

    def test_accepted_never_claimed_may_be_queued(self):
        ours = _migration(1, 'accepted')
        self.assertEqual(recovery.QUEUED, self.classify(
            _instance(), ours, ours))
        self.assertEqual(recovery.STALE, self.classify(
            _instance(task_state=None), ours, ours))

    def test_failed(self):
        ours = _migration(1, 'failed')
        self.assertEqual(recovery.FAILED, self.classify(
            _instance(task_state=None), ours, ours))

    def test_other_evacuation_in_progress(self):
        ours = _migration(1, 'pre-migrating')
        for status in ('accepted', 'pre-migrating'):
            latest = _migration(2, status, uuid=uuids.other)
            self.assertEqual(recovery.ELSEWHERE, self.classify(
                _instance(migration_id=2), latest, ours))

    def test_moved_on(self):
        ours = _migration(1, 'pre-migrating')
        latest = _migration(2, 'done', uuid=uuids.other)
        self.assertEqual(recovery.STALE, self.classify(
            _instance(task_state=None), latest, ours))


class TestAuditReport(test.NoDBTestCase):

    def report(self, evacuations=(), orphaned=(), delete=False):
        return {'host': 'compute1', 'delete': delete,
                'compute_service_up': False,
                'evacuations': list(evacuations),
                'orphaned_allocations': list(orphaned),
                'missing_allocations': []}

    def finding(self, errors=()):
        return {'instance': uuids.instance, 'kind': recovery.INTERRUPTED,
                'migration': uuids.migration,
                'migration_status': 'pre-migrating',
                'source_compute': 'compute0', 'guest': 'running',
                'files': {'/i/disk': 1024}, 'disks': 'remove: ...',
                'allocation_here': {uuids.rp: {'VCPU': 1}},
                'instance_exists': True, 'instance_host': 'compute0',
                'vm_state': 'active', 'task_state': 'rebuild_spawning',
                'actions': ['destroy'], 'done': [], 'notes': [],
                'errors': list(errors)}

    def test_return_codes(self):
        self.assertEqual(0, audit_cmd.return_code(self.report()))
        self.assertEqual(3, audit_cmd.return_code(
            self.report([self.finding()])))
        self.assertEqual(4, audit_cmd.return_code(
            self.report([self.finding()], delete=True)))
        self.assertEqual(1, audit_cmd.return_code(
            self.report([self.finding(errors=['x'])], delete=True)))

    def test_text_in_runbook_order(self):
        text = audit_cmd.format_report(self.report([self.finding()]))
        positions = [text.index(title) for title in (
            '1. Leftovers', '2. Instances', '3. Allocations',
            '4. What --delete would do')]
        self.assertEqual(sorted(positions), positions)
        self.assertIn('file: /i/disk (1024 bytes)', text)
