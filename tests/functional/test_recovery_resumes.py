# SPDX-License-Identifier: Apache-2.0

"""Recovery that is killed half-way finishes its own work at the next start.

Issue 19, items 5 and 6. compute0, the source, dies; the evacuation of the
server to compute1 is interrupted by the death of compute1's nova-compute
(the spawn held with the guest running). compute1 starts again and its
start-up sweep ends the evacuation, but its process dies too, right after
one of the sweep's own steps: destroying the guest, removing compute1's
allocation, failing the migration, recording the fault, or releasing the
server (its task state). That start is killed without any handler running
(:class:`ProcessDied`), and compute1 starts once more.

Before the fix, the sweep released the server first (a compare-and-swap of
its task state) and then acted: killed after any later step, its own write
made the journal entry read as an operator's reset at the next start,
which only reported it, and compute1's allocation stayed, so the server
could not be evacuated again.

After the fix, the server stays claimed (its rebuild task state) until the
sweep's last step, the journal entry records how far the sweep got, and
the next start finishes the job: the server is ERROR on compute0 with
nothing of it left on compute1, and the next evacuation to compute1 ends
ACTIVE on a fresh disk. The same holds for ``audit --delete`` killed
half-way, and for compute1 dying while nova's own handlers end an
evacuation whose spawn failed.
"""

import os
import time

import fixtures
from nova.compute import task_states
import nova.conf
from nova import context as nova_context
from nova import objects
from nova.scheduler.client import report

from nova_evac_cleanup import journal
from tests.functional import test_interrupted_evacuation as interrupted
from tests.harness import fake_libvirt

CONF = nova.conf.CONF
SOURCE = interrupted.SOURCE
DEST = interrupted.DEST
ProcessDied = interrupted.ProcessDied

#: The boundary calls a recovery makes, by name: where to kill it.
POINTS = {
    'destroy': (fake_libvirt.FakeLibvirtDriver, 'destroy'),
    'deallocate': (report.SchedulerReportClient,
                   'remove_provider_tree_from_instance_allocation'),
    'migration': (objects.Migration, 'save'),
    'fault': (objects.InstanceFault, 'create'),
    'instance': (objects.Instance, 'save'),
}


class _ResumeTest(interrupted._InterruptedEvacuationTest):

    STORAGE = 'non-shared'

    def _die_after(self, point, when=lambda *args, **kwargs: True):
        """The process dies right after the next call of ``point``.

        :param when: called with the call's arguments: whether this call is
            the one after which it dies
        :returns: a list that holds one item once it died there
        """
        cls, name = POINTS[point]
        real = getattr(cls, name)
        died = []

        def call_then_die(*args, **kwargs):
            result = real(*args, **kwargs)
            if not died and when(*args, **kwargs):
                died.append(point)
                raise ProcessDied('%s died after %s' % (DEST, point))
            return result

        self.useFixture(fixtures.MonkeyPatch(
            '%s.%s.%s' % (cls.__module__, cls.__name__, name),
            call_then_die))
        return died

    def _die_before_recording(self, step):
        """The process dies once step ``step`` is done, before its record.

        For a step with no nova call of its own to die after: the
        migration's compare-and-swap goes to the database directly.
        """
        real = journal.write
        died = []

        def write_or_die(entry, *args, **kwargs):
            if not died and entry.done and entry.done[-1] == step:
                died.append(step)
                raise ProcessDied('%s died after %s' % (DEST, step))
            return real(entry, *args, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            'nova_evac_cleanup.journal.write', write_or_die))
        return died

    def _start_dest_and_die(self, point, die=None):
        """compute1 starts and dies right after ``point`` in its sweep."""
        died = (die or self._die_after)(point)
        self._force_down(DEST, False)
        cell_name = self.host_mappings[DEST].cell_mapping.name
        self.assertRaises(ProcessDied, self.start_service, 'compute',
                          host=DEST, cell_name=cell_name)
        self.assertEqual([point], died)
        # The kernel releases the dead process's lock.
        self.release_host_lock(DEST)
        self._force_down(DEST, True)

    def _task_state(self, server):
        return self.api.get_server(server['id'])['OS-EXT-STS:task_state']

    def _recovery_killed_then_finished(self, kill, point):
        """An interrupted evacuation; ``kill(point)`` ends it half-way.

        compute1's next start must finish it: the evacuation ends as one
        whose spawn failed, nothing is left on compute1, and the server
        evacuates there again on a fresh disk.
        """
        server = self._boot()
        self._fail_source()
        server, migration, block = self._interrupt_evacuation(
            server, 'wait_for_boot')
        self._end_held_spawn(block)

        kill(point)
        self._restart_dest()

        self.assert_ended(server, migration)
        self.assertFalse(self.world.files(DEST, server['id']))
        self.assert_evacuates_again(server)


class SweepKilledTest(_ResumeTest):

    def _run(self, point):
        self._recovery_killed_then_finished(self._start_dest_and_die, point)

    def test_killed_after_destroy(self):
        self._run('destroy')

    def test_killed_after_deallocate(self):
        self._run('deallocate')

    def test_killed_after_failing_the_migration(self):
        self._recovery_killed_then_finished(
            lambda point: self._start_dest_and_die(
                point, self._die_before_recording), 'migration')

    def test_killed_after_the_fault(self):
        self._run('fault')

    def test_killed_after_saving_the_instance(self):
        self._run('instance')


class AuditDeleteKilledTest(_ResumeTest):
    """``audit --delete`` dies half-way; compute1's start finishes it."""

    def _audit_and_die(self, point):
        died = self._die_after(point)
        self.assertRaises(ProcessDied, self._audit, delete=True)
        self.assertEqual([point], died)
        self.release_host_lock(DEST)

    def _run(self, point):
        self._recovery_killed_then_finished(self._audit_and_die, point)

    def test_killed_after_destroy(self):
        self._run('destroy')

    def test_killed_after_saving_the_instance(self):
        self._run('instance')


class ServerHeldUntilTheLastStepTest(_ResumeTest):
    """The server stays claimed while the sweep acts on it.

    Issue 19, item 6. The sweep destroys the guest and releases the volume
    connections while the server is still in its rebuild task state, and
    releases it last. nova's evacuate API does not look at the task state,
    so an HA tool may evacuate the server again meanwhile: the sweep reads
    the server again before each of its steps and leaves a server that
    moved on alone, so the new evacuation keeps its volume attachment.
    """

    def test_task_state_held_while_acting(self):
        self._start_compute('compute2')
        server = self._boot(volume_backed=True)
        self._fail_source()
        server, migration, block = self._interrupt_evacuation(
            server, 'wait_for_boot')
        self._end_held_spawn(block)
        seen = []
        real = fake_libvirt.FakeLibvirtDriver.destroy

        def destroy(driver, context, instance, *args, **kwargs):
            if instance.uuid == server['id'] and not seen:
                current = objects.Instance.get_by_uuid(
                    nova_context.get_admin_context(), server['id'])
                seen.append(current.task_state)
                # An HA tool evacuates the server now, elsewhere.
                self.admin_api.post_server_action(
                    server['id'], {'evacuate': {'host': 'compute2'}})
            return real(driver, context, instance, *args, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            'tests.harness.fake_libvirt.FakeLibvirtDriver.'
            'destroy', destroy))
        self._restart_dest()

        self.assertEqual(1, len(seen), seen)
        self.assertIn(seen[0], task_states.rebuild_states)
        self.assertIn('changed while this host ended it',
                      self.stdlog.logger.output)
        # The sweep stopped before the volume connections: the new
        # evacuation's attachment is its own, connected on compute2.
        self._wait_for_server_parameter(
            server, {'status': 'ACTIVE', 'OS-EXT-SRV-ATTR:host': 'compute2'})
        [bdm] = objects.BlockDeviceMappingList.get_by_instance_uuid(
            nova_context.get_admin_context(), server['id'])
        attachments = self.cinder.volume_to_attachment[bdm.volume_id]
        self.assertEqual([bdm.attachment_id], list(attachments))
        self.assertEqual('compute2', attachments[bdm.attachment_id][
            'connector']['host'])


class HandlerKilledTest(_ResumeTest):
    """compute1 dies while nova's handlers end a failed spawn.

    The spawn fails, the cleanup destroys the guest, and compute1 dies
    before nova has put the server into ERROR: after the journal entry of
    the evacuation was removed (before the fix, right after the cleanup),
    or after nova set the migration to ``failed``. The server must not
    stay stuck in its rebuild task state.
    """

    def _journal_unlink_then_die(self):
        journal_dir = CONF.evacuate_cleanup.journal_path
        real = os.unlink
        died = []

        def unlink(path, *args, **kwargs):
            result = real(path, *args, **kwargs)
            if not died and str(path).startswith(journal_dir) and (
                    str(path).endswith('.json')):
                died.append(path)
                raise ProcessDied('%s died after removing %s' % (DEST, path))
            return result

        self.useFixture(fixtures.MonkeyPatch('os.unlink', unlink))
        return died

    def _run(self, die):
        server = self._boot()
        self._fail_source()
        self.world.inject_spawn_fault(DEST, 'wait_for_boot')
        died = die()
        self.api.post_server_action(server['id'],
                                    {'evacuate': {'host': DEST}})
        self._wait_for(lambda: died)
        self._kill(self.compute1)
        self.world.clear_faults()
        self._restart_dest()

        server = self.api.get_server(server['id'])
        self.assertIsNone(server['OS-EXT-STS:task_state'])
        self.assertEqual('ERROR', server['status'])
        self.assertEqual(SOURCE, server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual('failed', self._migration(server).status)
        self.assertIsNone(self._dest_allocation(server))
        self.assertIsNone(self.world.domain_state(DEST, server['id']))
        self.assertFalse(self.world.files(DEST, server['id']))
        self.assert_evacuates_again(server)

    def _wait_for(self, condition, timeout=30):
        deadline = time.monotonic() + timeout
        while not condition():
            if time.monotonic() > deadline:
                self.fail('compute1 never died')
            time.sleep(0.05)

    def test_killed_after_the_journal_entry_is_removed(self):
        self._run(self._journal_unlink_then_die)

    def test_killed_after_nova_failed_the_migration(self):
        self._run(lambda: self._die_after(
            'migration', lambda migration: migration.status == 'failed'))
