# SPDX-License-Identifier: Apache-2.0

"""The start-up sweep acts only on what it can prove is its own.

Regression tests for issue 10: each test is one of the situations in which
an earlier sweep acted on something that was not the interrupted
evacuation's (an old record, another operation in flight, a record trusted
after the storage changed, a stale read, the cleanup disabled). In each,
compute1's sweep must leave the server, its disks and its records alone,
and report.
"""

import json
import os
import shutil
import threading

import fixtures

from nova.cmd import manage
from nova.compute import task_states
from nova import objects

from nova_evac_cleanup import journal
from nova_evac_cleanup import rule
from tests.functional import test_interrupted_evacuation as interrupted
from tests.harness import fake_libvirt

SOURCE = interrupted.SOURCE
DEST = interrupted.DEST
OTHER = 'compute2'


class RecoverySafetyTest(interrupted._InterruptedEvacuationTest):

    STORAGE = 'non-shared'

    def _recover_source(self, server):
        """The operator brings compute0 back and the server up on it.

        nova's start-up on compute0 destroys its guest and marks the
        evacuation completed; the operator heals the allocation and hard
        reboots the server there.
        """
        self.api.post_server_action(
            server['id'], {'os-resetState': {'state': 'active'}})
        self._restart_source()
        # 4: nothing to heal, compute1's allocation is still there.
        self.assertIn(manage.PlacementCommands().heal_allocations(
            instance_uuid=server['id']), (0, 4))
        self.api.post_server_action(server['id'],
                                    {'reboot': {'type': 'HARD'}})
        return self._wait_for_state_change(server, 'ACTIVE')

    def test_old_successful_evacuation_is_history(self):
        """Scenario 1: an old, successful evacuation to compute1.

        compute0 -> compute1 succeeded, compute0 came back (the record is
        ``completed``), the server was cold-migrated on to compute2, where a
        plain rebuild runs while compute1 restarts. compute1 destroys
        nothing, the record stays ``completed`` and the rebuild succeeds.
        """
        self._start_compute(OTHER)
        server = self._boot()
        self._fail_source()
        self._evacuate(server)
        migration = self._migration(server)
        # nova refuses to force compute0 up before its start-up marked the
        # evacuation completed.
        self.compute0 = self.restart_compute_service(self.compute0)
        self._force_down(SOURCE, False)
        self.assertEqual('completed', self._reload(migration).status)
        server = self._migrate_server(server, host=OTHER)
        server = self._confirm_resize(server)
        self.assertEqual(OTHER, server['OS-EXT-SRV-ATTR:host'])
        destroys = self.world.calls(DEST)['destroy']
        held = self.world.block_spawn(OTHER, 'wait_for_boot')
        self.api.post_server_action(
            server['id'], {'rebuild': {'imageRef': server['image']['id']}})
        self.assertTrue(held.wait_reached(timeout=30))

        self.compute1 = self.restart_compute_service(self.compute1)

        self.assertEqual(destroys, self.world.calls(DEST)['destroy'])
        self.assertEqual('completed', self._reload(migration).status)
        self.assertEqual(task_states.REBUILD_SPAWNING, self.api.get_server(
            server['id'])['OS-EXT-STS:task_state'])
        held.release()
        server = self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual(OTHER, server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual('running',
                         self.world.domain_state(OTHER, server['id']))
        self.assertIn('No interrupted evacuation to %s' % DEST,
                      self.stdlog.logger.output)

    def test_migration_in_flight_keeps_the_copied_disk(self):
        """Scenario 2: a cold migration to compute1 is copying the disk.

        An earlier evacuation to compute1 was interrupted; the operator
        brought the server back up on compute0 and later cold-migrates it
        to compute1. compute1 restarts while compute0 copies the disk: the
        sweep takes nothing for the old evacuation's, and the disk on
        compute1 is the user's.
        """
        server = self._boot()
        self._fail_source()
        server, migration, block = self._interrupt_evacuation(
            server, 'wait_for_boot')
        self._end_held_spawn(block)
        server = self._recover_source(server)
        user_disk = self.world.disk_checksum(SOURCE, server['id'])
        # compute1 comes back: the old evacuation is only reported.
        self._restart_dest()
        self.assertEqual(1, len(journal.entries(DEST)))

        copying, resume = threading.Event(), threading.Event()
        real = fake_libvirt.FakeLibvirtDriver.migrate_disk_and_power_off
        world = self.world

        def copy_slowly(driver, context, instance, dest, *args, **kwargs):
            # compute0 has copied the user's disk over to compute1 and is
            # not done yet.
            shutil.copyfile(world.disk_path(SOURCE, instance.uuid),
                            world.disk_path(DEST, instance.uuid))
            copying.set()
            resume.wait(60)
            return real(driver, context, instance, dest, *args, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            'tests.harness.fake_libvirt.FakeLibvirtDriver.'
            'migrate_disk_and_power_off', copy_slowly))
        self.addCleanup(resume.set)
        self.api.post_server_action(server['id'],
                                    {'migrate': {'host': DEST}})
        self.assertTrue(copying.wait(30))
        destroys = self.world.calls(DEST)['destroy']
        allocations = self._get_allocations_by_server_uuid(server['id'])

        self._kill(self.compute1)
        self._restart_dest()

        self.assertEqual(destroys, self.world.calls(DEST)['destroy'])
        self.assertEqual(user_disk,
                         self.world.disk_checksum(DEST, server['id']))
        self.assertEqual(allocations,
                         self._get_allocations_by_server_uuid(server['id']))
        self.assertEqual('completed', self._reload(migration).status)
        self.assertEqual(1, len(journal.entries(DEST)))
        self.assertIn('other-operation-in-progress',
                      self.stdlog.logger.output)
        resume.set()
        self._wait_for_state_change(server, 'VERIFY_RESIZE')
        self.assertEqual(user_disk,
                         self.world.disk_checksum(DEST, server['id']))

    def test_share_mounted_since_keeps_the_files(self):
        """Scenario 3: the storage changed after the record was taken.

        The evacuation found the files not shared and compute1's instance
        directory absent; since then a share was mounted over the instances
        path (another filesystem id), and the path now shows the source's
        directory. The evacuation is ended, but the files there are not its
        own: kept.
        """
        server = self._boot()
        source_disk = self.world.disk_checksum(SOURCE, server['id'])
        self._fail_source()
        server, migration, block = self._interrupt_evacuation(
            server, 'wait_for_boot')
        path = self.world.instance_dir(DEST, server['id'])
        shutil.rmtree(path)
        shutil.copytree(self.world.instance_dir(SOURCE, server['id']), path)
        mounted, real_statvfs = os.path.dirname(path), os.statvfs

        def statvfs(name):
            found = real_statvfs(name)
            if not str(name).startswith(mounted):
                return found
            return os.statvfs_result(tuple(found),
                                     {'f_fsid': found.f_fsid + 1})

        self.useFixture(fixtures.MonkeyPatch('os.statvfs', statvfs))

        self._restart_dest()
        self._end_held_spawn(block)

        self.assert_ended(server, migration,
                          kept='not on the filesystem it was absent from')
        self.assertEqual(source_disk,
                         self.world.disk_checksum(DEST, server['id']))

    def test_operator_acts_between_examining_and_acting(self):
        """Scenario 4: the server was evacuated again meanwhile.

        Between the sweep's examination of the interrupted evacuation and
        its first write (the hold), the operator reset the server and
        evacuated it to compute2, which runs it in the very task state the
        sweep found. The hold's compare-and-swap succeeds on compute2's
        task state; the sweep reads the server again, sees the newer
        evacuation and gives the task state back, touching nothing else:
        compute2's evacuation keeps its migration context and task state,
        and succeeds.
        """
        self._start_compute(OTHER)
        server = self._boot()
        self._fail_source()
        server, migration, block = self._interrupt_evacuation(
            server, 'wait_for_boot')
        files = self.world.files(DEST, server['id'])
        real = objects.Instance.save
        state = {}

        def operator_first(instance, *args, **kwargs):
            # Right before the sweep's first write to the server: its hold.
            if not state and instance.task_state == rule.HOLD:
                state['held'] = self.world.block_spawn(OTHER, 'wait_for_boot')
                self.addCleanup(state['held'].release)
                self.api.post_server_action(
                    server['id'], {'os-resetState': {'state': 'error'}})
                self.api.post_server_action(server['id'],
                                            {'evacuate': {'host': OTHER}})
                self.assertTrue(state['held'].wait_reached(timeout=30))
                state['second'] = self._migration(server)
            return real(instance, *args, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.objects.Instance.save', operator_first))
        self._restart_dest()
        self._end_held_spawn(block)

        # The sweep took its hold over compute2's task state, saw the newer
        # evacuation and gave the task state back.
        self.assertIn('second', state)
        self.assertEqual(state['second'].id, self._migration_context(server))
        self.assertEqual(task_states.REBUILD_SPAWNING, self.api.get_server(
            server['id'])['OS-EXT-STS:task_state'])
        self.assert_kept(server, migration, files)
        state['held'].release()
        server = self._wait_for_server_parameter(
            server, {'status': 'ACTIVE', 'OS-EXT-SRV-ATTR:host': OTHER})

    def test_disabled_cleanup_keeps_the_failed_guest(self):
        """Scenario 6: ``enabled = false`` is hands off for the sweep too."""
        self.flags(enabled=False, group='evacuate_cleanup')
        server = self._boot()
        self._fail_source()
        server, _error = self._fail_evacuation(server, 'wait_for_boot')
        files = self.world.files(DEST, server['id'])
        self.assertEqual('running',
                         self.world.domain_state(DEST, server['id']))

        for _restart in range(2):
            self.compute1 = self.restart_compute_service(self.compute1)
            self.assertEqual('running',
                             self.world.domain_state(DEST, server['id']))
            self.assertEqual(files, self.world.files(DEST, server['id']))
        # Re-enabled: what failed while disabled is still only reported.
        self.flags(enabled=True, group='evacuate_cleanup')
        self.compute1 = self.restart_compute_service(self.compute1)
        self.assertEqual('running',
                         self.world.domain_state(DEST, server['id']))
        self.assertEqual(files, self.world.files(DEST, server['id']))
        self.assert_reported('failed-leftover')

    def test_disabled_cleanup_keeps_the_interrupted_guest(self):
        """Scenario 6: nothing journaled while disabled, nothing acted on."""
        self.flags(enabled=False, group='evacuate_cleanup')
        server = self._boot()
        self._fail_source()
        server, migration, block = self._interrupt_evacuation(
            server, 'wait_for_boot')
        files = self.world.files(DEST, server['id'])
        self.assertEqual([], journal.entries(DEST))

        self._restart_dest()
        self._end_held_spawn(block)

        self.assert_stuck(server, migration)
        self.assertEqual(files, self.world.files(DEST, server['id']))
        self.assert_reported('unjournaled')

    def assert_reported(self, kind):
        """The audit reports it, and changes nothing.

        The start-up sweep reads the journal only (issue 27: its
        background report of the guests of instances hosted elsewhere is
        gone); the audit reads the hypervisor and the database too.
        """
        code, out, _err = self._run_audit(as_json=True)
        self.assertEqual(3, code, out)
        [found] = [found for found in json.loads(out)['evacuations']
                   if found['kind'] == kind]
        self.assertEqual('running', found['guest'])
