# SPDX-License-Identifier: Apache-2.0

"""The rule: only a state that still names the evacuation is ended."""

import datetime

from nova.compute import task_states
from nova.compute import vm_states
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_evac_cleanup import journal
from nova_evac_cleanup import records
from nova_evac_cleanup import rule

HOST = 'compute1'
PATH = '/var/lib/nova/instances/uuid'
NOTHING = rule.Left(None, PATH, {}, {}, False)
GUEST = rule.Left('running', PATH, {}, {}, False)


def _migration(id_, status, uuid=None, type_='evacuation'):
    return objects.Migration(id=id_, uuid=uuid or uuids.migration,
                             status=status, dest_compute=HOST,
                             source_compute='compute0',
                             migration_type=type_)


def _instance(task_state=task_states.REBUILD_SPAWNING, migration_id=1,
              host='compute0', vm_state=vm_states.ACTIVE):
    instance = objects.Instance(uuid=uuids.instance, host=host,
                                vm_state=vm_state, task_state=task_state,
                                deleted=False)
    instance.migration_context = (
        None if migration_id is None else
        objects.MigrationContext(migration_id=migration_id))
    return instance


def _entry(**kwargs):
    return journal.Entry(HOST, uuids.instance, uuids.migration, **kwargs)


class TestDecide(test.NoDBTestCase):

    def decide(self, instance, ours, *others, entry=None, left=GUEST):
        moves = sorted((ours,) + others, key=lambda m: m.id, reverse=True)
        return rule.decide(HOST, entry or _entry(),
                           records.State(instance, ours, moves), left)

    def kind(self, *args, **kwargs):
        return self.decide(*args, **kwargs).kind

    def test_interrupted(self):
        for status in ('accepted', 'pre-migrating', 'completed'):
            for task_state in task_states.rebuild_states:
                self.assertEqual(rule.END, self.decide(
                    _instance(task_state=task_state),
                    _migration(1, status)).decision)

    def test_task_state_reset_or_other(self):
        """Scenario 4's operator: any other task state is kept."""
        for task_state in (None, task_states.MIGRATING,
                           task_states.REBOOTING_HARD):
            verdict = self.decide(_instance(task_state=task_state),
                                  _migration(1, 'pre-migrating'))
            self.assertEqual((rule.KEEP, 'interrupted-reset'),
                             verdict[:2])

    def test_nothing_left_is_forgotten(self):
        verdict = self.decide(_instance(task_state=None),
                              _migration(1, 'pre-migrating'), left=NOTHING)
        self.assertEqual(rule.FORGET, verdict.decision)

    def test_migration_context_names_another(self):
        self.assertEqual('not-claimed', self.kind(
            _instance(migration_id=2), _migration(1, 'pre-migrating')))

    def test_migration_context_dropped_by_nova(self):
        """nova's handler aborts the claim before it fails the migration."""
        for status in ('pre-migrating', 'failed'):
            self.assertEqual(rule.END, self.decide(
                _instance(migration_id=None), _migration(1, status)).decision)

    def test_own_ending_is_recognised(self):
        """This host's half-done ending is its own, and nothing else."""
        entry = _entry(spawned=True, phase=journal.ENDING,
                       held_from=task_states.REBUILD_SPAWNING,
                       done=['migration'])
        for status in ('failed', 'completed'):
            self.assertEqual(rule.END, self.decide(
                _instance(task_state=rule.HOLD), _migration(1, status),
                entry=entry).decision)
        # Died before it held the server: in the task state found.
        self.assertEqual(rule.END, self.decide(
            _instance(), _migration(1, 'failed'), entry=entry).decision)
        # Reset since.
        for task_state in (None, task_states.REBUILDING):
            self.assertEqual('interrupted-reset', self.kind(
                _instance(task_state=task_state), _migration(1, 'failed'),
                entry=entry))
        entry.phase = journal.RELEASING
        self.assertEqual((rule.END, 'ended'), self.decide(
            _instance(task_state=None), _migration(1, 'failed'),
            entry=entry)[:2])
        # A newer move still wins.
        self.assertEqual('moved-on', self.kind(
            _instance(task_state=rule.HOLD), _migration(1, 'failed'),
            _migration(2, 'done', uuids.newer), entry=entry))

    def test_failed_by_nova(self):
        """What nova's handler left of a failed evacuation, and only that."""
        failed = _migration(1, 'failed')
        error = _instance(task_state=None, vm_state=vm_states.ERROR,
                          migration_id=None)
        self.assertEqual((rule.END, 'failed-leftover'),
                         self.decide(error, failed)[:2])
        self.assertEqual(rule.FORGET, self.decide(
            error, failed, left=NOTHING).decision)
        # The server's own files on shared storage are only kept.
        shared = rule.Left(None, PATH, {'disk': 1}, {}, False)
        self.assertEqual(rule.KEEP, self.decide(
            error, failed, left=shared).decision)
        # An operator's reset of the server: kept.
        active = _instance(task_state=None, migration_id=None)
        self.assertEqual((rule.KEEP, 'failed-leftover'),
                         self.decide(active, failed)[:2])

    def test_handler_cut_before_failing_the_migration(self):
        """This host saw it fail; nova's handler died in its first step."""
        error = _instance(task_state=None, vm_state=vm_states.ERROR)
        running = _migration(1, 'pre-migrating')
        self.assertEqual(rule.END, self.decide(
            error, running, left=NOTHING,
            entry=_entry(error='boom')).decision)
        self.assertEqual(rule.FORGET, self.decide(
            error, running, left=NOTHING).decision)

    def test_failed_before_nova_rebuild_code_began(self):
        """explore: evacuate, InstanceActionEvent.event_start#1, raise.

        The error came from nova's decorators, before its rebuild code:
        its handler never ran. The migration is still accepted, the server
        ACTIVE with its task state reverted, the allocation still here.
        Left so, nova's conductor takes that migration for the next
        evacuation's, whose own stays accepted for ever.
        """
        active = _instance(task_state=None, migration_id=None)
        claimed = rule.Left(None, PATH, {}, {uuids.node: {'VCPU': 1}}, False)
        self.assertEqual((rule.END, 'failed-leftover'), self.decide(
            active, _migration(1, 'accepted'), left=claimed,
            entry=_entry(error='InjectedFault: boom'))[:2])
        # Without an error this host saw: an operator's reset, kept.
        self.assertEqual(rule.KEEP, self.decide(
            active, _migration(1, 'accepted'), left=claimed).decision)

    def test_volumes_not_released(self):
        """The failure handler could not release the volume connections."""
        error = _instance(task_state=None, vm_state=vm_states.ERROR,
                          migration_id=None)
        entry = _entry(spawned=True, detached={uuids.volume: uuids.a},
                       done=['destroy'])
        self.assertEqual(rule.END, self.decide(
            error, _migration(1, 'failed'), left=NOTHING,
            entry=entry).decision)
        entry.done.append('volumes')
        self.assertEqual(rule.FORGET, self.decide(
            error, _migration(1, 'failed'), left=NOTHING,
            entry=entry).decision)

    def test_died_before_the_rebuild_began(self):
        """Still ``accepted``: it died before nova's rebuild code began."""
        self.assertEqual(rule.END, self.decide(
            _instance(task_state=task_states.REBUILDING),
            _migration(1, 'accepted')).decision)

    def test_died_after_nova_saved_the_spawned_instance(self):
        """nova cleared the task state after spawn, then this host died.

        An operator's reset-state does not launch the instance.
        """
        entry = _entry(spawned=True)
        migration = _migration(1, 'pre-migrating')
        migration.created_at = datetime.datetime(2026, 1, 1, 12, 0)
        instance = _instance(task_state=None)
        instance.launched_at = datetime.datetime(2026, 1, 1, 12, 1)
        self.assertEqual(rule.END, self.decide(
            instance, migration, entry=entry).decision)
        instance.launched_at = datetime.datetime(2025, 1, 1)
        self.assertEqual('interrupted-reset', self.kind(
            instance, migration, entry=entry))
        instance.launched_at = datetime.datetime(2026, 1, 1, 12, 1)
        entry.spawned = False
        self.assertEqual('interrupted-reset', self.kind(
            instance, migration, entry=entry))

    def test_newer_move_of_any_type(self):
        """Scenario 1: a record older than the newest move is history."""
        for type_, status in (('migration', 'confirmed'),
                              ('resize', 'reverted'),
                              ('live-migration', 'completed'),
                              ('evacuation', 'done')):
            newer = _migration(2, status, uuids.newer, type_)
            self.assertEqual((rule.KEEP, 'moved-on'), self.decide(
                _instance(), _migration(1, 'completed'), newer)[:2])

    def test_other_operation_in_progress(self):
        """Scenario 2: any migration of the instance in flight."""
        for type_, status in (('migration', 'migrating'),
                              ('live-migration', 'running'),
                              ('evacuation', 'accepted')):
            for id_ in (0, 2):
                other = _migration(id_, status, uuids.other, type_)
                self.assertEqual('other-operation-in-progress', self.kind(
                    _instance(), _migration(1, 'pre-migrating'), other))

    def test_lives_here_or_deleted(self):
        self.assertEqual((rule.FORGET, 'lives-here'), self.decide(
            _instance(host=HOST), _migration(1, 'pre-migrating'))[:2])
        deleted = _instance()
        deleted.deleted = True
        self.assertEqual((rule.KEEP, 'instance-deleted'), self.decide(
            deleted, _migration(1, 'pre-migrating'))[:2])
        self.assertEqual((rule.FORGET, 'instance-deleted'), rule.decide(
            HOST, _entry(), records.State(None, None, []), NOTHING)[:2])

    def test_unjournaled_is_never_ended(self):
        """What only the database shows is reported, never acted on."""
        state = records.State(_instance(), _migration(1, 'pre-migrating'),
                              [_migration(1, 'pre-migrating')])
        self.assertEqual((rule.KEEP, 'unjournaled'),
                         rule.decide(HOST, None, state, GUEST)[:2])
        failed = records.State(
            _instance(task_state=None, vm_state=vm_states.ERROR),
            _migration(1, 'failed'), [_migration(1, 'failed')])
        self.assertEqual((rule.KEEP, 'failed-leftover'),
                         rule.decide(HOST, None, failed, GUEST)[:2])
        self.assertEqual('foreign-guest', rule.decide(
            HOST, None, records.State(_instance(), None, []), GUEST).kind)

    def test_held_only_while_newest_and_in_the_hold(self):
        ours = _migration(1, 'failed')
        self.assertTrue(rule.held(HOST, records.State(
            _instance(task_state=rule.HOLD), ours, [ours])))
        self.assertFalse(rule.held(HOST, records.State(
            _instance(task_state=task_states.REBUILDING), ours, [ours])))
        newer = _migration(2, 'accepted', uuids.newer)
        self.assertFalse(rule.held(HOST, records.State(
            _instance(task_state=rule.HOLD), ours, [newer, ours])))
