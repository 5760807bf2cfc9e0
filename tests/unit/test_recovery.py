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

"""Unit tests of what the interrupted-evacuation recovery may act on."""

from unittest import mock

from nova.compute import task_states
from nova import exception
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_evac_cleanup.cmd import audit as audit_cmd
from nova_evac_cleanup import recovery

HOST = 'compute1'


def _migration(id_, status, uuid=None, type_='evacuation'):
    return objects.Migration(id=id_, uuid=uuid or uuids.migration,
                             status=status, dest_compute=HOST,
                             source_compute='compute0',
                             migration_type=type_)


def _instance(task_state=task_states.REBUILD_SPAWNING, migration_id=1,
              host='compute0'):
    instance = objects.Instance(uuid=uuids.instance, host=host,
                                vm_state='active', task_state=task_state,
                                deleted=False)
    instance.migration_context = (
        None if migration_id is None else
        objects.MigrationContext(migration_id=migration_id))
    return instance


class TestClassify(test.NoDBTestCase):
    """Only a state that still names the evacuation is acted on."""

    def classify(self, instance, ours, *others):
        moves = sorted((ours,) + others, key=lambda m: m.id, reverse=True)
        return recovery.classify(HOST, instance, ours, moves)[0]

    def test_interrupted(self):
        for status in ('pre-migrating', 'completed'):
            for task_state in task_states.rebuild_states:
                self.assertEqual(recovery.INTERRUPTED, self.classify(
                    _instance(task_state=task_state),
                    _migration(1, status)))

    def test_task_state_reset_or_other(self):
        """Scenario 4's operator: any other task state is reported."""
        for task_state in (None, task_states.MIGRATING,
                           task_states.REBOOTING_HARD):
            self.assertEqual(recovery.RESET, self.classify(
                _instance(task_state=task_state),
                _migration(1, 'pre-migrating')))

    def test_migration_context_names_another(self):
        for migration_id in (None, 2):
            self.assertEqual(recovery.NOT_CLAIMED, self.classify(
                _instance(migration_id=migration_id),
                _migration(1, 'pre-migrating')))

    def test_never_claimed(self):
        self.assertEqual(recovery.NOT_CLAIMED, self.classify(
            _instance(), _migration(1, 'accepted')))

    def test_failed(self):
        self.assertEqual(recovery.FAILED, self.classify(
            _instance(task_state=None), _migration(1, 'failed')))

    def test_newer_move_of_any_type(self):
        """Scenario 1: a record older than the newest move is history."""
        for type_, status in (('migration', 'confirmed'),
                              ('resize', 'reverted'),
                              ('live-migration', 'completed'),
                              ('evacuation', 'done')):
            newer = _migration(2, status, uuids.newer, type_)
            self.assertEqual(recovery.MOVED_ON, self.classify(
                _instance(), _migration(1, 'completed'), newer))

    def test_other_operation_in_progress(self):
        """Scenario 2: any migration of the instance in flight."""
        for type_, status in (('migration', 'migrating'),
                              ('migration', 'finished'),
                              ('live-migration', 'running'),
                              ('evacuation', 'accepted')):
            other = _migration(2, status, uuids.other, type_)
            self.assertEqual(recovery.IN_PROGRESS, self.classify(
                _instance(), _migration(1, 'pre-migrating'), other))
            # Even if it is older than ours.
            older = _migration(0, status, uuids.other, type_)
            self.assertEqual(recovery.IN_PROGRESS, self.classify(
                _instance(), _migration(1, 'pre-migrating'), older))

    def test_lives_here_or_deleted(self):
        self.assertEqual(recovery.LIVES_HERE, self.classify(
            _instance(host=HOST), _migration(1, 'pre-migrating')))
        deleted = _instance()
        deleted.deleted = True
        self.assertEqual(recovery.DELETED, self.classify(
            deleted, _migration(1, 'pre-migrating')))
        self.assertEqual(recovery.DELETED, recovery.classify(
            HOST, None, _migration(1, 'pre-migrating'), [])[0])

    def test_no_evacuation_known(self):
        self.assertEqual(recovery.FOREIGN_GUEST, recovery.classify(
            HOST, _instance(), None, [])[0])


class TestRecoverRereads(test.NoDBTestCase):
    """Scenario 4: the finding is read again and swapped, never trusted."""

    def setUp(self):
        super().setUp()
        self.manager = mock.Mock(host=HOST)
        self.finding = recovery.Finding(HOST, uuids.instance,
                                        entry=mock.Mock())
        self.finding.kind = recovery.INTERRUPTED
        self.finding.instance = _instance()
        self.useFixture(test.fixtures.MockPatch(
            'nova_evac_cleanup.recovery._nodes', return_value=[]))
        self.fresh = _instance()
        self.migration = _migration(1, 'pre-migrating')

        def load(context, finding):
            finding.instance = self.fresh
            finding.migration = self.migration
            finding.moves = [self.migration]

        self.useFixture(test.fixtures.MockPatch(
            'nova_evac_cleanup.recovery._load', side_effect=load))
        self.describe = self.useFixture(test.fixtures.MockPatch(
            'nova_evac_cleanup.recovery._describe',
            side_effect=lambda mgr, ctx, finding, nodes: setattr(
                finding, 'kind', recovery.classify(
                    HOST, finding.instance, finding.migration,
                    finding.moves)[0]))).mock

    def test_changed_task_state_left_alone(self):
        # Still a rebuild state, but not the one classified: another
        # evacuation began meanwhile.
        self.fresh.task_state = task_states.REBUILDING
        with mock.patch.object(objects.Instance, 'save') as save:
            self.assertFalse(recovery.recover(self.manager, mock.sentinel.ctx,
                                              self.finding))
        save.assert_not_called()
        self.manager.driver.destroy.assert_not_called()
        self.assertEqual(recovery.RESET, self.finding.kind)

    def test_compare_and_swap_first(self):
        """A failed swap leaves everything as it is."""
        self.fresh.get_network_info = mock.Mock()
        with mock.patch.object(
                objects.Instance, 'save',
                side_effect=exception.UnexpectedTaskStateError(
                    instance_uuid=uuids.instance, expected='x',
                    actual='y')) as save, \
                mock.patch.object(objects.Migration, 'save') as mig_save:
            self.assertFalse(recovery.recover(self.manager, mock.sentinel.ctx,
                                              self.finding))
        save.assert_called_once_with(
            expected_task_state=[task_states.REBUILD_SPAWNING])
        mig_save.assert_not_called()
        self.manager.driver.destroy.assert_not_called()
        self.manager.reportclient.\
            remove_provider_tree_from_instance_allocation.assert_not_called()


class TestAuditReport(test.NoDBTestCase):

    def report(self, evacuations=(), orphaned=(), delete=False):
        return {'host': HOST, 'delete': delete,
                'compute_service_up': False, 'examined': 1,
                'evacuations': list(evacuations),
                'orphaned_allocations': list(orphaned),
                'missing_allocations': []}

    def finding(self, errors=(), ended=False, kind=recovery.INTERRUPTED,
                commands=()):
        return {'instance': uuids.instance, 'kind': kind,
                'reason': 'this host died while running the evacuation',
                'journaled': True, 'migration': uuids.migration,
                'migration_status': 'pre-migrating',
                'source_compute': 'compute0', 'guest': 'running',
                'files': {'/i/disk': 1024}, 'disks': 'remove: ...',
                'allocation_here': {uuids.rp: {'VCPU': 1}},
                'instance_exists': True, 'instance_host': 'compute0',
                'vm_state': 'active', 'task_state': 'rebuild_spawning',
                'actions': ['destroy'], 'commands': list(commands),
                'done': [], 'errors': list(errors), 'ended': ended}

    def test_return_codes(self):
        self.assertEqual(0, audit_cmd.return_code(self.report()))
        self.assertEqual(3, audit_cmd.return_code(
            self.report([self.finding()])))
        self.assertEqual(4, audit_cmd.return_code(
            self.report([self.finding(ended=True)], delete=True)))
        # Something only reported is still there after --delete.
        self.assertEqual(3, audit_cmd.return_code(self.report(
            [self.finding(ended=True),
             self.finding(kind=recovery.MOVED_ON)], delete=True)))
        self.assertEqual(1, audit_cmd.return_code(
            self.report([self.finding(errors=['x'])], delete=True)))

    def test_text_in_runbook_order(self):
        text = audit_cmd.format_report(self.report([self.finding(
            commands=['virsh undefine --nvram instance-00000001'])]))
        positions = [text.index(title) for title in (
            '1. Leftovers', '2. Instances', '3. Allocations',
            '4. What --delete would do')]
        self.assertEqual(sorted(positions), positions)
        self.assertIn('file: /i/disk (1024 bytes)', text)
        self.assertIn('by hand, once checked: virsh undefine', text)
