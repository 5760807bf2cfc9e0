# SPDX-License-Identifier: Apache-2.0

"""Evacuations interrupted by the death of the destination compute.

Regression test for issue 7. compute0, the source, dies; the server is
evacuated to compute1, whose nova-compute then dies too in the middle of
the spawn: the spawn is held at a stage of the fake libvirt driver (disks
created, or the domain running), the compute1 service is killed without a
graceful stop (``Service.stop()`` would wait for the held spawn), and the
held thread is later ended with :class:`ProcessDied`, a ``BaseException``
no exception handler of nova or of the mixin catches, as if the process had
gone.

On stock nova nothing then ends the evacuation: the server stays in a
rebuild task state on compute0, the migration ``pre-migrating`` (or
``completed`` by compute0 if it comes back first), compute1 keeps the
guest, its files and its allocation.

After the fix, compute1's start-up sweep ends it as nova ends an evacuation
whose spawn raised: the server is ERROR with no task state on compute0, the
migration ``failed``, nothing of it is left on compute1 (non-shared
storage) or its disk is intact (shared storage), compute1 has no allocation
for it and ``nova-manage placement audit`` finds nothing orphaned there.

* compute1 restarts first (compute0 still dead): the server keeps its
  allocation on compute0 and can be evacuated again, to compute1.
* compute0 restarts first: nova destroys its guest (keeping its disks, as
  it cannot ask the dead compute1 whether they are shared), removes its
  allocation and marks the migration ``completed``; when compute1 starts,
  the sweep ends the evacuation and heals the server's allocation on
  compute0, where a hard reboot brings it back on its kept disk.
"""

import json
import os
import time

import fixtures
import nova.conf

from nova.compute import task_states
from nova import context as nova_context
from nova import objects

from nova_evac_cleanup import journal
from nova_evac_cleanup import manager
from tests.harness import fake_libvirt
from tests.harness import functional as base

CONF = nova.conf.CONF

SOURCE = base.SOURCE
DEST = base.DEST


class ProcessDied(BaseException):
    """Ends a held spawn as the death of its process would: no handler."""


class _InterruptedEvacuationTest(base.EvacuateTestCase):

    def setUp(self):
        super().setUp()
        # The source asks the dead destination whether the storage is
        # shared; do not wait a minute for the answer that never comes.
        self.flags(rpc_response_timeout=2)

    # The death of compute1 during the evacuation.

    def _interrupt_evacuation(self, server, stage):
        """Evacuate to compute1 and kill compute1 with the spawn at stage.

        :returns: the server, its migration and the held block
        """
        self.dest_usages = self._get_provider_usages(self.dest_rp)
        block = self.world.block_spawn(DEST, stage)
        self.api.post_server_action(server['id'],
                                    {'evacuate': {'host': DEST}})
        # Registered first: a held spawn must end even if the test fails.
        self.addCleanup(self._end_held_spawn, block)
        self.assertTrue(block.wait_reached(timeout=30))
        self._kill(self.compute1)
        migration = self._migration(server)
        self.assertEqual('pre-migrating', migration.status)
        return self.api.get_server(server['id']), migration, block

    def _kill(self, service):
        """Stop a compute without a graceful stop, and force it down."""
        service.rpcserver.stop()
        # nova < 32 has no second RPC server.
        if getattr(service, 'rpcserver_alt', None) is not None:
            service.rpcserver_alt.stop()
        service.tg.stop()
        # The kernel releases the dead process's lock.
        self.release_host_lock(service.host)
        self._force_down(service.host, True)

    def _force_down(self, host, down):
        service = self.admin_api.get_services(
            binary='nova-compute', host=host)[0]
        self.admin_api.put_service_force_down(service['id'], down)

    def _end_held_spawn(self, block):
        """The held spawn of the dead process ends without any handler."""
        if block.is_set():
            return
        # Meta-test: no handler of the dead process destroys anything.
        before = self.world.calls(DEST)['destroy']
        block.release(ProcessDied())
        time.sleep(0.5)
        self.assertEqual(before, self.world.calls(DEST)['destroy'])

    def _restart_dest(self, sweep='clean'):
        """Start compute1 again with the mixin."""
        self.flags(sweep_on_start=sweep, group='evacuate_cleanup')
        self._force_down(DEST, False)
        cell_name = self.host_mappings[DEST].cell_mapping.name
        self.compute1 = self.start_service('compute', host=DEST,
                                           cell_name=cell_name)
        self.assertIsInstance(self.compute1.manager, manager.ComputeManager)
        return self.compute1

    def _restart_source(self):
        self._force_down(SOURCE, False)
        self.compute0 = self.restart_compute_service(self.compute0)
        return self.compute0

    def _wait_for_log(self, text, timeout=10):
        """Wait for ``text`` in the log: the guests are reported late."""
        deadline = time.monotonic() + timeout
        while text not in self.stdlog.logger.output:
            if time.monotonic() > deadline:
                self.fail('%r never logged' % text)
            time.sleep(0.05)

    def _migration(self, server):
        context = nova_context.get_admin_context()
        migrations = objects.MigrationList.get_by_filters(
            context, {'instance_uuid': server['id'],
                      'migration_type': 'evacuation'},
            sort_keys=['created_at', 'id'], sort_dirs=['desc', 'desc'])
        return migrations[0]

    def _reload(self, migration):
        return objects.Migration.get_by_id(
            nova_context.get_admin_context(), migration.id)

    def _audit(self, delete=False):
        """``nova-evac-cleanup audit [--delete] --json`` for compute1.

        :returns: its return code and report (None if it printed none)
        """
        code, out, err = self._run_audit(delete=delete, as_json=True)
        #: what it said on standard error
        self.audit_stderr = err
        return code, json.loads(out) if out else err

    # What is left.

    def assert_ended(self, server, migration, host=SOURCE, status='failed',
                     kept=None):
        """The evacuation ended as nova ends one whose spawn raised.

        :param status: the migration's: ``failed``, or ``completed`` when
            the source came back first (never rewritten)
        :param kept: why its files were kept, when they were not proven
            its own: its journal entry then records it
        """
        server = self.api.get_server(server['id'])
        self.assertEqual('ERROR', server['status'])
        self.assertIsNone(server['OS-EXT-STS:task_state'])
        self.assertEqual(host, server['OS-EXT-SRV-ATTR:host'])
        self.assertIn('interrupted', server['fault']['message'])
        self.assertEqual(status, self._reload(migration).status)
        self.assert_journal_ended(server, kept)
        self.assertIsNone(self._dest_allocation(server))
        code, output = self._placement_audit()
        self.assertEqual(0, code, output)
        self.assertIsNone(self.world.domain_state(DEST, server['id']))
        # compute1 does not count it any more.
        self._run_periodics()
        self.assertEqual(self.dest_usages,
                         self._get_provider_usages(self.dest_rp))
        return server

    def assert_evacuates_again(self, server):
        """The server evacuates to compute1 again, nothing orphaned."""
        self._evacuate(server)
        self.assertEqual('running',
                         self.world.domain_state(DEST, server['id']))
        self.assertTrue(self.world.disk_is_complete(DEST, server['id']))
        code, output = self._placement_audit()
        self.assertEqual(0, code, output)

    def assert_journal_ended(self, server, kept=None):
        """compute1's journal keeps only what must refuse or explain files.

        A shared directory's files are the server's own: their entry says
        so to the audit. Files kept without proof refuse the next
        evacuation of the server to compute1.
        """
        entries = journal.entries(DEST)
        for entry in entries:
            self.assertEqual(journal.KEPT, entry.phase, entry)
        if kept is None:
            for entry in entries:
                self.assertTrue(entry.shared, entry)
        else:
            self.assertEqual([server['id']],
                             [entry.instance_uuid for entry in entries])
            _code, out, _err = self._run_audit(as_json=True)
            [found] = json.loads(out)['evacuations']
            self.assertIn(kept, found['disks'])

    def assert_kept(self, server, migration, files, status='pre-migrating'):
        """compute1 kept all the evacuation left, and its record."""
        self.assertEqual(status, self._reload(migration).status)
        self.assertEqual('running',
                         self.world.domain_state(DEST, server['id']))
        self.assertEqual(files, self.world.files(DEST, server['id']))
        self.assertIsNotNone(self._dest_allocation(server))

    def _migration_context(self, server):
        """The migration id the server's migration context names."""
        instance = objects.Instance.get_by_uuid(
            nova_context.get_admin_context(), server['id'],
            expected_attrs=['migration_context'])
        context = instance.migration_context
        return context.migration_id if context else None

    def assert_stuck(self, server, migration, status='pre-migrating'):
        """Nothing changed since compute1 died."""
        server = self.api.get_server(server['id'])
        self.assertIn(server['OS-EXT-STS:task_state'],
                      task_states.rebuild_states)
        self.assertEqual(status, self._reload(migration).status)
        self.assertIsNotNone(self._dest_allocation(server))
        self.assertIsNotNone(self.world.domain_state(DEST, server['id']))


class NonSharedStorageTest(_InterruptedEvacuationTest):

    STORAGE = 'non-shared'

    def test_dest_restarts_first(self):
        """compute1 comes back while compute0 is still dead.

        A healthy server on compute1 is left alone; the interrupted one is
        ended and evacuated again to compute1.
        """
        healthy = self._build_server(host=DEST, networks='none')
        healthy = self._wait_for_state_change(
            self.api.post_server({'server': healthy}), 'ACTIVE')
        healthy_disk = self.world.disk_checksum(DEST, healthy['id'])
        server = self._boot()
        self._fail_source()
        server, migration, block = self._interrupt_evacuation(
            server, 'wait_for_boot')
        self.assertEqual('running',
                         self.world.domain_state(DEST, server['id']))
        self.assertTrue(self.world.files(DEST, server['id']))

        self._restart_dest()
        self._end_held_spawn(block)

        self.assert_ended(server, migration)
        self.assertFalse(self.world.files(DEST, server['id']))
        # compute0's allocation is the server's only one.
        self.assertEqual(
            [self._get_provider_uuid_by_host(SOURCE)],
            list(self._get_allocations_by_server_uuid(server['id'])))
        # The healthy server is untouched.
        self.assertEqual('running',
                         self.world.domain_state(DEST, healthy['id']))
        self.assertEqual(healthy_disk,
                         self.world.disk_checksum(DEST, healthy['id']))
        self.assertEqual('ACTIVE', self.api.get_server(
            healthy['id'])['status'])

        # The server can be evacuated to compute1 again, on a fresh disk.
        generation = self.world.disk_generation(DEST, server['id'])
        self.assertIsNone(generation)
        self.assert_evacuates_again(server)

    def test_source_restarts_first(self):
        """compute0 comes back first and takes the evacuation for done.

        nova destroys its guest but keeps its disks (it cannot ask compute1
        whether they are shared), removes its allocation and marks the
        migration completed. compute1's sweep then ends the evacuation and
        removes its own copy (made from the image, in the directory it
        created); the completed record is kept as it is. The server has no
        allocation left: the sweep logs the nova-manage command that heals
        it, which the operator runs; a hard reboot then brings the server
        back on compute0.
        """
        server = self._boot()
        source_disk = self.world.disk_checksum(SOURCE, server['id'])
        self._fail_source()
        server, migration, block = self._interrupt_evacuation(
            server, 'wait_for_boot')

        self._restart_source()
        self.assert_stuck(server, migration, status='completed')
        self.assertIsNone(self.world.domain_state(SOURCE, server['id']))
        self.assertEqual(source_disk,
                         self.world.disk_checksum(SOURCE, server['id']))
        self.assertEqual([self.dest_rp], list(
            self._get_allocations_by_server_uuid(server['id'])))

        self._restart_dest()
        self._end_held_spawn(block)

        self.assert_ended(server, migration, status='completed')
        self.assertFalse(self.world.files(DEST, server['id']))
        self.assertEqual(source_disk,
                         self.world.disk_checksum(SOURCE, server['id']))
        # compute1's allocation, the server's last, moved to compute0's
        # node as it was: nothing to heal (the real tier's F1).
        self.assertEqual([self._get_provider_uuid_by_host(SOURCE)], list(
            self._get_allocations_by_server_uuid(server['id'])))
        self.assertNotIn('heal_allocations', self.stdlog.logger.output)
        code, output = self._placement_audit(host=SOURCE)
        self.assertEqual(0, code, output)
        # compute0 is up: nova refuses an evacuation; a hard reboot
        # recreates the guest on the kept disk.
        self.api.post_server_action(server['id'], {'reboot': {'type': 'HARD'}})
        self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual('running',
                         self.world.domain_state(SOURCE, server['id']))
        self.assertEqual(source_disk,
                         self.world.disk_checksum(SOURCE, server['id']))

    def test_volume_backed_disks_created_dest_first(self):
        """Held after creating the files, before the domain is defined."""
        server = self._boot(volume_backed=True)
        self._fail_source()
        server, migration, block = self._interrupt_evacuation(
            server, 'get_guest_xml')
        self.assertIsNone(self.world.domain_state(DEST, server['id']))
        self.assertTrue(self.world.files(DEST, server['id']))

        self._restart_dest()
        self._end_held_spawn(block)

        self.assert_ended(server, migration)
        self.assertFalse(self.world.files(DEST, server['id']))
        self._evacuate(server)
        self.assertEqual('running',
                         self.world.domain_state(DEST, server['id']))

    def _interrupted_then_reporting(self):
        """compute1 died in the evacuation and came back only reporting."""
        server = self._boot()
        self._fail_source()
        server, migration, block = self._interrupt_evacuation(
            server, 'wait_for_boot')
        self._restart_dest(sweep='report')
        self._end_held_spawn(block)
        return server, migration

    def test_report_and_audit_change_nothing(self):
        """sweep_on_start=report and audit without --delete only report.

        While nova-compute runs on compute1, audit --delete refuses, even
        with the service forced down in the API (issue 10, scenario 5): it
        may be in the middle of the very evacuation. Once the process is
        gone it ends the evacuation.
        """
        server, migration = self._interrupted_then_reporting()
        self.assert_stuck(server, migration)
        files = self.world.files(DEST, server['id'])

        code, report = self._audit()
        self.assertEqual(3, code, report)
        [finding] = report['evacuations']
        self.assertEqual(server['id'], finding['instance'])
        self.assertEqual('interrupted', finding['kind'])
        self.assertEqual('running', finding['guest'])
        # Its ownership marker aside.
        self.assertEqual(sorted(set(files) - {'.nova-evac-cleanup'}), sorted(
            p[len(self.world.instance_dir(DEST, server['id'])) + 1:]
            for p in finding['files']))
        self.assertEqual([self.dest_rp], list(finding['allocation_here']))
        self.assertEqual(SOURCE, finding['instance_host'])
        self.assertTrue(finding['disks'].startswith('remove'))
        # Any other allocation against it is nova-manage's to find.
        self.assertEqual([self.dest_rp], report['providers'])
        self.assertEqual([], report['missing_allocations'])
        self.assertEqual(4, len(finding['actions']), finding['actions'])
        # Nothing was initialised or probed on the host.
        self.assertEqual(0, self.world.calls(DEST).get(
            'check_instance_shared_storage_local', 0))
        self.assert_stuck(server, migration)
        self.assertEqual(files, self.world.files(DEST, server['id']))

        # compute1 runs: it may be running the evacuation.
        code, report = self._audit(delete=True)
        self.assertEqual(1, code, report)
        self.assertIn('refusing --delete', self.audit_stderr)
        self.assert_stuck(server, migration)
        # Forced down in the API, but running all the same.
        self._force_down(DEST, True)
        code, report = self._audit(delete=True)
        self.assertEqual(1, code, report)
        self.assert_stuck(server, migration)

        # The process is gone.
        self._kill(self.compute1)
        code, report = self._audit(delete=True)
        self.assertEqual(4, code, report)
        self._force_down(DEST, False)
        self.assert_ended(server, migration)
        self.assertFalse(self.world.files(DEST, server['id']))
        code, report = self._audit()
        self.assertEqual(0, code, report)

    def test_audit_moves_the_last_allocation_to_the_server_s_node(self):
        """The source's allocation gone first (finding F1 of the real tier).

        nova's start on a source back first drops its allocation of an
        evacuation still ``pre-migrating``: the allocation here is then the
        server's last; ending the evacuation moves it to the server's node
        instead of leaving it none.
        """
        server, migration = self._interrupted_then_reporting()
        self._kill(self.compute1)
        source_rp = self._get_provider_uuid_by_host(SOURCE)
        self.assertTrue(self.compute0.manager.reportclient.
                        remove_provider_tree_from_instance_allocation(
                            nova_context.get_admin_context(), server['id'],
                            source_rp))
        resources = self._get_allocations_by_server_uuid(
            server['id'])[self.dest_rp]['resources']

        code, report = self._audit()
        self.assertEqual(3, code, report)
        self.assertEqual([], report['missing_allocations'])
        self.assertIn('move the allocation against %s to the server\'s '
                      'node' % DEST, report['evacuations'][0]['actions'])
        code, report = self._audit(delete=True)
        self.assertEqual(4, code, report)
        self.assertEqual([], report['missing_allocations'])
        self.assertEqual({source_rp: resources}, {
            rp: allocation['resources'] for rp, allocation in
            self._get_allocations_by_server_uuid(server['id']).items()})
        self.assert_ended(server, migration)

    def _journal_files(self):
        """Every file under the journal directory, with its content."""
        root = CONF.evacuate_cleanup.journal_path
        files = {}
        for directory, _dirs, names in os.walk(root):
            for name in names:
                path = os.path.join(directory, name)
                with open(path, 'rb') as stream:
                    files[os.path.relpath(path, root)] = stream.read()
        return files

    def test_report_and_audit_write_nothing(self):
        """Issue 19, item 12: only acting changes the journal.

        The server is deleted while compute1 is dead: what its
        interrupted evacuation left there is reported by the sweep with
        ``sweep_on_start = report`` and by the audit without
        ``--delete``, and neither removes or rewrites anything.
        """
        server = self._boot()
        self._fail_source()
        server, migration, block = self._interrupt_evacuation(
            server, 'wait_for_boot')
        self._end_held_spawn(block)
        self.api.delete_server(server['id'])
        self._wait_until_deleted(server)
        journal_files = self._journal_files()
        self.assertTrue(journal_files)
        files = self.world.files(DEST, server['id'])

        self._restart_dest(sweep='report')
        self.assertEqual(journal_files, self._journal_files())
        self._kill(self.compute1)
        code, report = self._audit()
        self.assertEqual(3, code, report)
        self.assertEqual(journal_files, self._journal_files())
        self.assertEqual(files, self.world.files(DEST, server['id']))

    def test_audit_delete_leaves_the_driver_uninitialised(self):
        """Issue 19, item 12: ``audit --delete`` never runs ``init_host``.

        libvirt's ``init_host`` powers down the dedicated CPUs no guest
        uses when ``[libvirt] cpu_power_management`` is on, under guests
        that still run on the host.
        """
        server = self._boot()
        self._fail_source()
        server, migration, block = self._interrupt_evacuation(
            server, 'wait_for_boot')
        self._end_held_spawn(block)
        init_host = []
        real = fake_libvirt.FakeLibvirtDriver.init_host

        def spy(driver, host):
            init_host.append(host)
            return real(driver, host)

        self.useFixture(fixtures.MonkeyPatch(
            'tests.harness.fake_libvirt.FakeLibvirtDriver.'
            'init_host', spy))
        code, report = self._audit(delete=True)
        self.assertEqual(4, code, report)
        self.assertEqual([], init_host)
        self._force_down(DEST, False)
        self.assert_ended(server, migration)

    def test_evacuation_elsewhere_then_old_record_only_reported(self):
        """The operator evacuated the server on to compute2 meanwhile.

        While that evacuation is in progress, and after it is done, the
        interrupted one to compute1 is older than the server's newest move:
        compute1's sweep reports what it left there, with the commands to
        remove it, and changes nothing. The server on compute2 is untouched.
        """
        other = 'compute2'
        self._start_compute(other)
        server = self._boot()
        self._fail_source()
        server, migration, block = self._interrupt_evacuation(
            server, 'wait_for_boot')
        files = self.world.files(DEST, server['id'])
        # The operator's recovery by hand: reset-state, evacuate again.
        self.api.post_server_action(
            server['id'], {'os-resetState': {'state': 'error'}})
        held = self.world.block_spawn(other, 'wait_for_boot')
        self.api.post_server_action(server['id'],
                                    {'evacuate': {'host': other}})
        self.assertTrue(held.wait_reached(timeout=30))
        second = self._migration(server)
        self.assertNotEqual(migration.id, second.id)

        self._restart_dest()
        self._end_held_spawn(block)

        self.assert_kept(server, migration, files)
        self.assertEqual(task_states.REBUILD_SPAWNING, self.api.get_server(
            server['id'])['OS-EXT-STS:task_state'])
        self.assertEqual(second.id, self._migration_context(server))

        held.release()
        server = self._wait_for_server_parameter(
            server, {'status': 'ACTIVE', 'OS-EXT-SRV-ATTR:host': other,
                     'OS-EXT-STS:task_state': None})
        self._wait_for_migration_status(server, ['done'])
        disk = self.world.disk_checksum(other, server['id'])

        self.compute1 = self.restart_compute_service(self.compute1)

        self.assert_kept(server, migration, files)
        self.assertIn('virsh undefine', self.stdlog.logger.output)
        code, report = self._audit()
        self.assertEqual(3, code, report)
        [finding] = report['evacuations']
        self.assertEqual('moved-on', finding['kind'])
        self.assertIn('rm -rf %s' % self.world.instance_dir(
            DEST, server['id']), ' '.join(finding['commands']))
        server = self.api.get_server(server['id'])
        self.assertEqual('ACTIVE', server['status'])
        self.assertEqual(other, server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual('running',
                         self.world.domain_state(other, server['id']))
        self.assertEqual(disk, self.world.disk_checksum(other, server['id']))

    def test_sweep_off(self):
        server = self._boot()
        self._fail_source()
        server, migration, block = self._interrupt_evacuation(
            server, 'wait_for_boot')
        calls = self.world.calls(DEST)

        self._restart_dest(sweep='off')
        self._end_held_spawn(block)

        self.assert_stuck(server, migration)
        self.assertEqual(calls['destroy'], self.world.calls(DEST)['destroy'])


class SharedStorageTest(_InterruptedEvacuationTest):

    STORAGE = 'shared'

    def _interrupted(self):
        """An evacuation interrupted with the guest running on compute1.

        :returns: the server, its disk's checksum, the migration and the
            held spawn
        """
        server = self._boot()
        disk = self.world.disk_checksum(SOURCE, server['id'])
        self._fail_source()
        server, migration, block = self._interrupt_evacuation(
            server, 'wait_for_boot')
        return server, disk, migration, block

    def assert_audit_clean(self, server, disk):
        """The audit finds nothing: the files are the server's own.

        compute1 found the instance directory on shared storage before
        spawn; what is left in it is the server's, not a leftover of
        compute1's, and the audit has no ``rm -rf`` to suggest.
        """
        code, report = self._audit()
        self.assertEqual(0, code, report)
        self.assertEqual([], report['evacuations'])
        self.assertEqual(disk, self.world.disk_checksum(DEST, server['id']))

    def test_dest_restarts_first(self):
        server, disk, migration, block = self._interrupted()

        self._restart_dest()
        self._end_held_spawn(block)

        self.assert_ended(server, migration)
        self.assert_audit_clean(server, disk)
        self._evacuate(server)
        self.assertEqual('running',
                         self.world.domain_state(DEST, server['id']))
        self.assertEqual(disk, self.world.disk_checksum(DEST, server['id']))

    def test_audit_after_audit_delete_reports_nothing(self):
        server, disk, migration, block = self._interrupted()
        self._restart_dest(sweep='report')
        self._end_held_spawn(block)
        self._kill(self.compute1)
        code, report = self._audit(delete=True)
        self.assertEqual(4, code, report)
        self._force_down(DEST, False)
        self.assert_ended(server, migration)
        self.assert_audit_clean(server, disk)

    def test_audit_after_a_failed_evacuation_reports_nothing(self):
        server = self._boot()
        disk = self.world.disk_checksum(SOURCE, server['id'])
        self._fail_source()
        server, _ = self._fail_evacuation(server, 'wait_for_boot')
        self.assertIsNone(self.world.domain_state(DEST, server['id']))
        self.assert_audit_clean(server, disk)

    def test_source_restarts_first_volume_backed(self):
        server = self._boot(volume_backed=True)
        self._fail_source()
        server, migration, block = self._interrupt_evacuation(
            server, 'wait_for_boot')
        files = self.world.files(SOURCE, server['id'])

        self._restart_source()
        self.assert_stuck(server, migration, status='completed')
        self._restart_dest()
        self._end_held_spawn(block)

        self.assert_ended(server, migration, status='completed')
        self.assertEqual(files, self.world.files(DEST, server['id']))
        self.api.post_server_action(server['id'], {'reboot': {'type': 'HARD'}})
        self._wait_for_state_change(server, 'ACTIVE')
