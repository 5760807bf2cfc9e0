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

import datetime
from unittest import mock

from nova.compute import task_states
from nova import exception
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_evac_cleanup import audit
from nova_evac_cleanup import classification
from nova_evac_cleanup.cmd import audit as audit_cmd
from nova_evac_cleanup import ending
from nova_evac_cleanup import findings
from nova_evac_cleanup import journal
from nova_evac_cleanup import recovery
from nova_evac_cleanup import sweep

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
                                deleted=False, numa_topology=None,
                                pci_requests=None, pci_devices=None,
                                resources=None)
    instance.migration_context = (
        None if migration_id is None else
        objects.MigrationContext(migration_id=migration_id))
    return instance


class TestClassify(test.NoDBTestCase):
    """Only a state that still names the evacuation is acted on."""

    def classify(self, instance, ours, *others, entry=None):
        moves = sorted((ours,) + others, key=lambda m: m.id, reverse=True)
        return classification.classify(HOST, instance, ours, moves, entry)[0]

    def test_interrupted(self):
        for status in ('pre-migrating', 'completed'):
            for task_state in task_states.rebuild_states:
                self.assertEqual(classification.INTERRUPTED, self.classify(
                    _instance(task_state=task_state),
                    _migration(1, status)))

    def test_task_state_reset_or_other(self):
        """Scenario 4's operator: any other task state is reported."""
        for task_state in (None, task_states.MIGRATING,
                           task_states.REBOOTING_HARD):
            self.assertEqual(classification.RESET, self.classify(
                _instance(task_state=task_state),
                _migration(1, 'pre-migrating')))

    def test_migration_context_names_another(self):
        self.assertEqual(classification.NOT_CLAIMED, self.classify(
            _instance(migration_id=2), _migration(1, 'pre-migrating')))

    def test_migration_context_dropped_by_nova(self):
        """nova's handler aborts the claim before it fails the migration."""
        for status in ('pre-migrating', 'failed'):
            self.assertEqual(classification.INTERRUPTED, self.classify(
                _instance(migration_id=None), _migration(1, status)))

    def test_handler_cut_after_failing_the_migration(self):
        """Issue 19, item 5: nova's handler died before it released it."""
        self.assertEqual(classification.INTERRUPTED, self.classify(
            _instance(), _migration(1, 'failed')))

    def test_own_ending_is_recognised(self):
        """Issue 19, item 5: this host's half-done ending is its own.

        Whatever the migration says (this host set it to failed), while the
        instance is in the task state this host held, it is finished;
        once released, only the entry is left; anything else is someone
        else's doing.
        """
        entry = journal.Entry(HOST, uuids.instance, uuids.migration, 1,
                              ending={'task_state': 'rebuild_spawning',
                                      'done': ['migration', 'destroy']})
        for status in ('failed', 'completed'):
            self.assertEqual(classification.INTERRUPTED, self.classify(
                _instance(), _migration(1, status), entry=entry))
        self.assertEqual(classification.RESET, self.classify(
            _instance(task_state=None), _migration(1, 'failed'),
            entry=entry))
        # Died before it held the server: still in the task state found.
        entry.ending['from'] = task_states.REBUILDING
        self.assertEqual(classification.INTERRUPTED, self.classify(
            _instance(task_state=task_states.REBUILDING),
            _migration(1, 'failed'), entry=entry))
        entry.ending['releasing'] = True
        self.assertEqual(classification.ENDED, self.classify(
            _instance(task_state=None), _migration(1, 'failed'),
            entry=entry))
        self.assertEqual(classification.RESET, self.classify(
            _instance(task_state=task_states.REBUILDING),
            _migration(1, 'failed'), entry=entry))
        # A newer move still wins.
        self.assertEqual(classification.MOVED_ON, self.classify(
            _instance(), _migration(1, 'failed'),
            _migration(2, 'done', uuids.newer), entry=entry))

    def test_died_before_the_rebuild_began(self):
        """Issue 18, cell ``evacuate placement.GET /allocations#1 die``.

        The evacuation is journaled before nova's code runs: still
        ``accepted``, it died before nova's rebuild code began. Before,
        it was only reported, and the conductor took the migration for the
        next evacuation's, which never ended.
        """
        self.assertEqual(classification.INTERRUPTED, self.classify(
            _instance(task_state=task_states.REBUILDING),
            _migration(1, 'accepted')))

    def test_failed(self):
        self.assertEqual(classification.FAILED, self.classify(
            _instance(task_state=None), _migration(1, 'failed')))

    def test_died_after_nova_saved_the_spawned_instance(self):
        """Issue 27, explorer cell ``evacuate Instance.save#5 die``.

        nova cleared the task state after spawn (with the launch time),
        then this host died before finish_evacuation: taken for an
        operator's reset before, and only reported, the guest running here
        and its allocation left. An operator's reset-state does not
        launch the instance.
        """
        entry = journal.Entry(HOST, uuids.instance, uuids.migration, 1,
                              spawning=True)
        migration = _migration(1, 'pre-migrating')
        migration.created_at = datetime.datetime(2026, 1, 1, 12, 0)
        instance = _instance(task_state=None)
        instance.launched_at = datetime.datetime(2026, 1, 1, 12, 1)
        self.assertEqual(classification.INTERRUPTED, self.classify(
            instance, migration, entry=entry))
        # A reset-state: launched before the evacuation began.
        instance.launched_at = datetime.datetime(2025, 1, 1)
        self.assertEqual(classification.RESET, self.classify(
            instance, migration, entry=entry))
        # Not journaled as spawning: nothing of it was spawned here.
        instance.launched_at = datetime.datetime(2026, 1, 1, 12, 1)
        entry.spawning = False
        self.assertEqual(classification.RESET, self.classify(
            instance, migration, entry=entry))

    def test_newer_move_of_any_type(self):
        """Scenario 1: a record older than the newest move is history."""
        for type_, status in (('migration', 'confirmed'),
                              ('resize', 'reverted'),
                              ('live-migration', 'completed'),
                              ('evacuation', 'done')):
            newer = _migration(2, status, uuids.newer, type_)
            self.assertEqual(classification.MOVED_ON, self.classify(
                _instance(), _migration(1, 'completed'), newer))

    def test_other_operation_in_progress(self):
        """Scenario 2: any migration of the instance in flight."""
        for type_, status in (('migration', 'migrating'),
                              ('migration', 'finished'),
                              ('live-migration', 'running'),
                              ('evacuation', 'accepted')):
            other = _migration(2, status, uuids.other, type_)
            self.assertEqual(classification.IN_PROGRESS, self.classify(
                _instance(), _migration(1, 'pre-migrating'), other))
            # Even if it is older than ours.
            older = _migration(0, status, uuids.other, type_)
            self.assertEqual(classification.IN_PROGRESS, self.classify(
                _instance(), _migration(1, 'pre-migrating'), older))

    def test_lives_here_or_deleted(self):
        self.assertEqual(classification.LIVES_HERE, self.classify(
            _instance(host=HOST), _migration(1, 'pre-migrating')))
        deleted = _instance()
        deleted.deleted = True
        self.assertEqual(classification.DELETED, self.classify(
            deleted, _migration(1, 'pre-migrating')))
        self.assertEqual(classification.DELETED, classification.classify(
            HOST, None, _migration(1, 'pre-migrating'), [])[0])

    def test_no_evacuation_known(self):
        self.assertEqual(classification.FOREIGN_GUEST, classification.classify(
            HOST, _instance(), None, [])[0])


class TestRecover(test.NoDBTestCase):
    """The finding is read again; the server is released last."""

    def setUp(self):
        super().setUp()
        self.manager = mock.Mock(host=HOST)
        self.manager._get_instance_block_device_info.return_value = {
            'block_device_mapping': []}
        self.manager.reportclient.\
            remove_provider_tree_from_instance_allocation.return_value = True
        self.entry = journal.Entry(HOST, uuids.instance, uuids.migration, 1,
                                   shared_storage=True)
        self.finding = findings.Finding(HOST, uuids.instance,
                                        entry=self.entry)
        self.finding.kind = classification.INTERRUPTED
        self.finding.instance = _instance()
        self.useFixture(test.fixtures.MockPatch(
            'nova_evac_cleanup.findings.nodes', return_value=[uuids.rp]))
        self.fresh = _instance()
        self.fresh.get_network_info = mock.Mock()
        self.migration = _migration(1, 'pre-migrating')

        def load(context, finding):
            finding.instance = self.fresh
            finding.migration = self.migration
            finding.moves = [self.migration]

        def describe(manager, context, finding, nodes):
            finding.kind = classification.classify(
                HOST, finding.instance, finding.migration, finding.moves,
                finding.entry)[0]
            finding.allocation_here = {uuids.rp: {'VCPU': 1}}

        self.useFixture(test.fixtures.MockPatch(
            'nova_evac_cleanup.findings.load', side_effect=load))
        self.useFixture(test.fixtures.MockPatch(
            'nova_evac_cleanup.findings.describe', side_effect=describe))
        self.writes = []
        self.useFixture(test.fixtures.MockPatch(
            'nova_evac_cleanup.journal.write',
            side_effect=lambda entry, durable=False: (
                self.durable.append(durable), self.writes.append(
                    dict(entry.ending or {}, done=list(
                        (entry.ending or {}).get('done', [])))))))
        self.durable = []
        self.end = self.useFixture(test.fixtures.MockPatch(
            'nova_evac_cleanup.leftovers.end')).mock
        self.useFixture(test.fixtures.MockPatch(
            'nova_evac_cleanup.unwind.unwind', return_value=([], [])))
        self.useFixture(test.fixtures.MockPatch(
            'nova_evac_cleanup.leftovers.guest_state', return_value='running'))
        self.useFixture(test.fixtures.MockPatch(
            'nova_evac_cleanup.findings.allocations', return_value={}))
        self.calls = []
        self.manager.driver.destroy.side_effect = (
            lambda *args, **kwargs: self.calls.append(
                ('destroy', self.fresh.task_state)))
        self.manager.reportclient.\
            remove_provider_tree_from_instance_allocation.side_effect = (
                lambda *args: self.calls.append(
                    ('deallocate', self.fresh.task_state)) or True)

    def recover(self):
        with mock.patch.object(objects.Instance,
                               'drop_migration_context') as self.drop, \
                mock.patch.object(
                objects.Instance, 'save',
                side_effect=lambda **kwargs: self.calls.append(
                    ('release', kwargs))) as save, \
                mock.patch.object(
                    objects.Migration, 'get_by_id',
                    return_value=self.migration), \
                mock.patch.object(
                    objects.Migration, 'save',
                    side_effect=lambda: self.calls.append(
                        ('migration', self.fresh.task_state))), \
                mock.patch('nova.compute.utils.add_instance_fault_from_exc',
                           side_effect=lambda *args: self.calls.append(
                               ('fault', self.fresh.task_state))):
            result = recovery.recover(self.manager, mock.sentinel.ctx,
                                      self.finding)
        return result, save

    def test_changed_task_state_left_alone(self):
        # Still a rebuild state, but not the one classified: another
        # evacuation began meanwhile.
        self.fresh.task_state = task_states.REBUILDING
        result, save = self.recover()
        self.assertFalse(result)
        save.assert_not_called()
        self.manager.driver.destroy.assert_not_called()
        self.assertEqual([], self.writes)
        self.assertEqual(classification.RESET, self.finding.kind)

    def test_released_last(self):
        """Issue 19, item 6: every step runs while the server is held."""
        result, _save = self.recover()
        self.assertTrue(result)
        held = task_states.REBUILD_SPAWNING
        self.assertEqual([
            ('migration', held), ('destroy', held), ('deallocate', held),
            ('fault', held),
            ('release', {'expected_task_state': [held]})], self.calls)
        # Write-ahead: the ending is recorded before the first step, then
        # after each one, and the release is announced before it is made.
        self.assertEqual([[], ['migration'], ['migration', 'destroy'],
                          ['migration', 'destroy', 'volumes']],
                         [w['done'] for w in self.writes[:4]])
        self.assertTrue(all(durable for durable in self.durable))
        self.assertEqual(held, self.writes[0]['task_state'])
        self.assertTrue(self.writes[-1]['releasing'])
        self.end.assert_called_once_with(self.manager.driver, self.entry,
                                         self.fresh)

    def test_never_held_in_rebuilding(self):
        """Issue 27, item 4: an HA retry during the ending is left alone.

        nova's evacuate API sets ``rebuilding`` from any task state: a
        retry that lands after the last check that the server is still
        this evacuation's must fail the release, not be put into ERROR.
        Before, the ending held the server in the task state it found,
        ``rebuilding`` here, and its compare-and-swap let the retry's
        ``rebuilding`` through.
        """
        self.fresh.task_state = task_states.REBUILDING
        self.finding.instance.task_state = task_states.REBUILDING
        database = {'task_state': task_states.REBUILDING}

        def save(expected_task_state=None, **kwargs):
            if database['task_state'] not in expected_task_state:
                raise exception.UnexpectedTaskStateError(
                    instance_uuid=uuids.instance,
                    expected=expected_task_state,
                    actual=database['task_state'])
            database['task_state'] = self.fresh.task_state
            self.calls.append(('save', expected_task_state))

        def retry(*args):
            # The HA tool's evacuation, through nova's API.
            database['task_state'] = task_states.REBUILDING
            self.calls.append(('fault', None))

        with mock.patch.object(objects.Instance, 'save', side_effect=save), \
                mock.patch.object(objects.Migration, 'get_by_id',
                                  return_value=self.migration), \
                mock.patch.object(objects.Migration, 'save'), \
                mock.patch('nova.compute.utils.add_instance_fault_from_exc',
                           side_effect=retry):
            result = recovery.recover(self.manager, mock.sentinel.ctx,
                                      self.finding)
        self.assertFalse(result)
        held = task_states.REBUILD_BLOCK_DEVICE_MAPPING
        self.assertEqual(('save', [task_states.REBUILDING]), self.calls[0])
        self.assertEqual(held, self.writes[0]['task_state'])
        # The release's compare-and-swap failed: the retry keeps its state.
        self.assertEqual(task_states.REBUILDING, database['task_state'])
        self.assertEqual(classification.RESET, self.finding.kind)
        self.end.assert_not_called()

    def test_migration_context_dropped(self):
        """Issue 27, item 4: as nova's MoveClaim.abort drops it.

        Before, the ending left the instance a migration context naming a
        failed evacuation to this host.
        """
        result, _save = self.recover()
        self.assertTrue(result)
        self.drop.assert_called_once_with()
        self.assertIn('context', self.entry.ending['done'])

    def test_failed_step_keeps_the_server_held(self):
        self.manager.driver.destroy.side_effect = ValueError('libvirt')
        result, save = self.recover()
        self.assertFalse(result)
        save.assert_not_called()
        self.assertEqual(['migration'], self.entry.ending['done'])
        self.manager.reportclient.\
            remove_provider_tree_from_instance_allocation.assert_not_called()
        self.end.assert_not_called()
        self.assertEqual(['destroy: libvirt'], self.finding.errors)

    def test_resumes_where_it_stopped(self):
        """Issue 19, item 5: the next start goes on from the record."""
        self.migration.status = 'failed'
        self.entry.ending = {'task_state': task_states.REBUILD_SPAWNING,
                             'done': ['migration', 'destroy']}
        result, _save = self.recover()
        self.assertTrue(result)
        self.assertEqual(
            ['deallocate', 'fault', 'release'],
            [call[0] for call in self.calls])

    def test_released_already(self):
        """Killed between the release and the removal of the entry."""
        self.fresh.task_state = None
        self.fresh.vm_state = 'error'
        self.finding.instance.task_state = None
        self.finding.kind = classification.ENDED
        self.migration.status = 'failed'
        self.entry.ending = {'task_state': task_states.REBUILD_SPAWNING,
                             'done': list(dict.fromkeys(
                                 name for name, _step, _required
                                 in ending.STEPS)),
                             'releasing': True}
        result, save = self.recover()
        self.assertTrue(result)
        self.assertEqual([], self.calls)
        self.end.assert_called_once_with(self.manager.driver, self.entry,
                                         self.fresh)


class TestSettle(test.NoDBTestCase):

    def test_failed_evacuation_allocation_removed(self):
        """Issue 27, explorer cell ``spawn-fails * die source-first``.

        nova's handler failed the migration, then this host died before
        it removed this host's allocation; the source's start put the
        server into ERROR. Before, the sweep only reported it: the
        allocation stayed against this host for good.
        """
        manager = mock.Mock(host=HOST)
        remove = manager.reportclient.\
            remove_provider_tree_from_instance_allocation
        remove.return_value = True
        entry = journal.Entry(HOST, uuids.instance, uuids.migration, 1,
                              shared_storage=False, spawning=True)
        finding = findings.Finding(HOST, uuids.instance, entry=entry,
                                   migration=_migration(1, 'failed'))
        finding.kind = classification.FAILED
        finding.instance = _instance(task_state=None)
        finding.allocation_here = {uuids.rp: {'VCPU': 1}}
        with mock.patch.object(journal, 'remove') as forget:
            self.assertTrue(sweep.settle(manager, mock.sentinel.ctx,
                                         finding))
        remove.assert_called_once_with(mock.sentinel.ctx, uuids.instance,
                                       uuids.rp)
        forget.assert_called_once_with(entry)
        # A guest left here keeps it all, for the operator.
        finding.allocation_here = {uuids.rp: {'VCPU': 1}}
        finding.guest = 'running'
        remove.reset_mock()
        self.assertFalse(sweep.settle(manager, mock.sentinel.ctx, finding))
        remove.assert_not_called()


class TestSettleFault(test.NoDBTestCase):

    def test_fault_nova_could_not_record(self):
        """Issue 27, explorer cell ``spawn-fails Migration.save#2 die``.

        (source-first) nova failed the migration and this host died before
        its handler recorded the fault; the source's start put the server
        into ERROR with none. Before, the fault stayed empty.
        """
        entry = journal.Entry(HOST, uuids.instance, uuids.migration, 1,
                              error='FakeLibvirtError: boom')
        migration = _migration(1, 'failed')
        migration.created_at = datetime.datetime(2026, 1, 1, 12, 0)
        finding = findings.Finding(HOST, uuids.instance, entry=entry,
                                   migration=migration)
        finding.kind = classification.FAILED
        finding.instance = _instance(task_state=None)
        older = objects.InstanceFault(
            created_at=datetime.datetime(2025, 1, 1))
        with mock.patch.object(objects.InstanceFault,
                               'get_latest_for_instance',
                               return_value=older), \
                mock.patch('nova.compute.utils.add_instance_fault_from_exc'
                           ) as add, \
                mock.patch.object(journal, 'remove'):
            self.assertTrue(sweep.settle(mock.Mock(host=HOST),
                                         mock.sentinel.ctx, finding))
        self.assertTrue(add.call_args.args[2].format_message().startswith(
            'FakeLibvirtError: boom'))
        # nova's own fault, from the evacuation on, is kept as it is.
        newer = objects.InstanceFault(
            created_at=datetime.datetime(2026, 1, 1, 12, 1))
        with mock.patch.object(objects.InstanceFault,
                               'get_latest_for_instance',
                               return_value=newer), \
                mock.patch('nova.compute.utils.add_instance_fault_from_exc'
                           ) as add, \
                mock.patch.object(journal, 'remove'):
            sweep.settle(mock.Mock(host=HOST), mock.sentinel.ctx, finding)
        add.assert_not_called()


class TestAuditReport(test.NoDBTestCase):

    def report(self, evacuations=(), orphaned=(), delete=False):
        return {'host': HOST, 'delete': delete,
                'compute_service_up': False, 'examined': 1,
                'evacuations': list(evacuations),
                'orphaned_allocations': list(orphaned),
                'missing_allocations': []}

    def finding(self, errors=(), ended=False, kind=classification.INTERRUPTED,
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
                'kept': None, 'refuses_evacuations': False,
                'files_shared': False,
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
             self.finding(kind=classification.MOVED_ON)], delete=True)))
        self.assertEqual(1, audit_cmd.return_code(
            self.report([self.finding(errors=['x'])], delete=True)))

    def test_what_is_not_given_back_is_found(self):
        """Issue 33: on the source, what its failed evacuations left."""
        report = self.report()
        self.assertNotIn('5. Failed evacuations', audit.text(report))
        report['not_given_back'] = [{
            'instance': uuids.instance, 'migration': uuids.migration,
            'ports': {uuids.port: 'binding_failed on compute0'},
            'volumes': [uuids.volume],
            'commands': ['openstack port set --host compute0 %s' %
                         uuids.port]}]

        self.assertEqual(3, audit_cmd.return_code(report))
        text = audit.text(report)
        self.assertIn('5. Failed evacuations from %s: not given back' % HOST,
                      text)
        self.assertIn('port %s: binding_failed on compute0' % uuids.port,
                      text)
        self.assertIn('volume %s: not connected' % uuids.volume, text)
        self.assertIn('by hand, once checked: openstack port set --host '
                      'compute0 %s' % uuids.port, text)

    def test_text_in_runbook_order(self):
        text = audit.text(self.report([self.finding(
            commands=['virsh undefine --nvram instance-00000001'])]))
        positions = [text.index(title) for title in (
            '1. Leftovers', '2. Instances', '3. Allocations',
            '4. What --delete would do')]
        self.assertEqual(sorted(positions), positions)
        self.assertIn('file: /i/disk (1024 bytes)', text)
        self.assertIn('by hand, once checked: virsh undefine', text)
