# SPDX-License-Identifier: Apache-2.0

"""Scenario 1: spawn fails on the destination after the disks are written.

Regression test for "evacuate spawn failure leaves debris on the
destination", on real libvirt and QEMU.

evac-a runs a server and dies (nova-compute, libvirtd and QEMU killed; the
service forced down). The server is evacuated to evac-b, whose serial
console has one port, which another process holds: the real libvirt
driver writes the instance's disks (``_create_image``), then fails in
``_get_guest_xml`` (``_create_serial_consoles``:
``SocketPortRangeExhaustedException``) before any domain is defined. nova
marks the evacuation failed and the server ERROR on evac-a.

Stock nova leaves the instance directory and its disk on evac-b. On
non-shared storage the next evacuation then takes the leftover directory
for shared storage ("disk on shared storage, evacuating using existing
disk") and boots the leftover disk. With the fix evac-b keeps nothing of
it, and the next evacuation starts from the image. On a shared instance
directory the disk is the server's own: both keep it, and the retry uses
it, as it should.

CI runs the local-storage tests; ``_test(binary, shared=True)`` runs the
shared-directory variant, which scenario 5's shared variant (the same
cause) and the behaviour table cover (see the deployment page of the
documentation).
"""


from tests.deployment import base

SCENARIO = ('1. Spawn fails on the destination after its disks are '
            'written (serial console port taken: a real cause)')


class TestSpawnFailsAfterDisks(base.DeploymentTestCase):

    def _test(self, binary, shared):
        d = self.d
        storage = base.storage_name(shared)
        # The destination's serial consoles get two ports (nova wants a
        # range), which another process holds.
        ports = d.free_port_range(2, base.DST)
        self.hosts_up(evac_a=dict(shared=shared),
                      evac_b=dict(binary=binary, shared=shared,
                                  serial_ports=ports))
        server = self.boot(base.SRC)
        sid = server['id']
        self.crash_source()
        holders = self.hold_ports(ports)

        offset = self.log_offset(base.DST)
        server, migration = self.evacuate(
            sid, base.DST, 'evacuation that fails after the disks, API '
            'call to ERROR (%s)' % base.MODES[binary])
        log = self.log_since(base.DST, offset)
        # Meta-test: the real cause is what failed the spawn.
        self.assertIn('SocketPortRangeExhaustedException', log)
        self.assertEqual('failed', migration['status'])
        self.assertEqual('ERROR', server['status'])
        self.assertEqual(base.SRC, server['OS-EXT-SRV-ATTR:host'])
        left = self.observe(base.DST, sid)
        d.progress('%s, %s: evac-b after the failed evacuation: guest=%s '
                   'files=%s', base.MODES[binary], storage, left['guest'],
                   left['files'])

        manual = self.manual_steps(base.DST, sid, left, shared=shared,
                                   then='evacuate again')

        # The operator frees the port and evacuates again.
        for holder in holders:
            holder.close()
        offset = self.log_offset(base.DST)
        server, _ = self.evacuate(sid, base.DST,
                                  'evacuation (API call to ACTIVE)')
        retry_log = self.log_since(base.DST, offset)
        after = self.observe(base.DST, sid)
        used_existing = 'evacuating using existing disk' in retry_log
        same_disk = (left['disk_inode'] is not None and
                     left['disk_inode'] == after['disk_inode'])

        if shared:
            retry = 'ACTIVE, on its own disk (shared)'
        elif used_existing and same_disk:
            retry = ('ACTIVE, on the STALE leftover disk ("disk on shared '
                     'storage, evacuating using existing disk"; same inode)')
        else:
            retry = 'ACTIVE, fresh disk from the image'
        if server['status'] != 'ACTIVE':
            retry = '%s: %s' % (server['status'], server.get('fault'))
        base.record(SCENARIO, storage, binary, {
            'Failure (evac-b log)': 'SocketPortRangeExhaustedException '
                                    'in _get_guest_xml',
            'virsh list --all on evac-b after the failure':
                left['virsh'],
            'Instance dir on evac-b after the failure':
                base.files_text(left['files']),
            'Placement (evac-b)': 'allocation: %s' % (
                left['allocation'] or 'none'),
            'Evacuating again': retry,
            'Manual steps still needed on evac-b': manual,
        })

        self.assertEqual('ACTIVE', server['status'], server.get('fault'))
        self.assertEqual(base.DST, server['OS-EXT-SRV-ATTR:host'])
        self.assertIsNotNone(after['guest'])
        self.assertIn('running', after['guest'])
        # Neither leaves a domain: spawn failed before defining it.
        self.assertIsNone(left['guest'])
        # nova itself removes evac-b's allocation.
        self.assertIsNone(left['allocation'])

        if shared:
            # The disk is the server's own, on the shared directory:
            # both keep it and the retry uses it.
            self.assertIn('disk', left['files'])
            self.assertTrue(used_existing)
            self.assertTrue(same_disk)
        elif binary == base.STOCK:
            # FIXME(bug): stock nova leaves the instance directory and
            # disk behind, and the retry boots that leftover disk.
            self.assertIn('disk', left['files'])
            self.assertTrue(used_existing)
            self.assertTrue(same_disk)
        else:
            self.assertEqual({}, left['files'])
            self.assertFalse(used_existing)
            self.assertIn('disk not on shared storage, evacuating from '
                          'image', retry_log)

    def test_stock_non_shared(self):
        self._test(base.STOCK, shared=False)

    def test_fixed_non_shared(self):
        self._test(base.FIXED, shared=False)


SCENARIO_RUNNING = ('1b. Spawn fails on the destination after its guest '
                    'runs (fault hook raises in _wait_for_boot)')


class TestSpawnFailsGuestRunning(base.DeploymentTestCase):
    """Spawn fails on evac-b after the real domain has started.

    No real cause fails spawn there: libvirt refusing to start the domain
    or QEMU dying during its start are cleaned up by the libvirt driver
    itself, and QEMU killed later is after spawn returned. The fault hook
    (:mod:`tests.deployment.tier.faults`) raises in
    ``_wait_for_boot``, the only point of spawn after the domain runs,
    once; the test proves it fired. Stock nova leaves the guest running
    on evac-b. With the fix it is destroyed; on non-shared storage with its
    disks, on a shared instance directory without them: there the disk is
    the server's own, the one it booted on evac-a, and the retry boots it.
    CI runs the local-storage tests (the behaviour table covers this stage
    on shared storage).
    """

    def _test(self, binary, shared=False):
        d = self.d
        storage = base.storage_name(shared)
        self.hosts_up(evac_a=dict(shared=shared),
                      evac_b=dict(binary=binary, hook=True, shared=shared))
        server = self.boot(base.SRC)
        sid = server['id']
        # On a shared instance directory evac-b sees this very disk.
        booted_disk = self.observe(base.SRC, sid)['disk_inode']
        self.crash_source()
        d.set_fault(base.DST, 'raise-once')

        server, migration = self.evacuate(
            sid, base.DST, 'evacuation that fails after the guest runs, '
            'API call to ERROR (%s)' % base.MODES[binary])
        left = self.observe(base.DST, sid)
        qemu = len(d.hosts[base.DST].qemu_pids())
        fired = d.fault_fired(base.DST)
        d.set_fault(base.DST, None)
        d.progress('%s, %s: evac-b after the failed evacuation: guest=%s '
                   'files=%s qemu=%d', base.MODES[binary], storage,
                   left['guest'], left['files'], qemu)
        manual = self.manual_steps(base.DST, sid, left, shared=shared,
                                   then='evacuate again')

        offset = self.log_offset(base.DST)
        retried, _ = self.evacuate(sid, base.DST,
                                   'evacuation (API call to ACTIVE)')
        retry_log = self.log_since(base.DST, offset)
        after = self.observe(base.DST, sid)
        if retried['status'] == 'ACTIVE':
            retry = 'ACTIVE on %s, guest %s' % (
                retried['OS-EXT-SRV-ATTR:host'], after['guest'])
        else:
            retry = '%s: %s' % (retried['status'], (
                retried.get('fault') or {}).get('message'))
        base.record(SCENARIO_RUNNING, storage, binary, {
            'Failure': 'InjectedFault in _wait_for_boot (hook)',
            'virsh list --all on evac-b after the failure':
                left['virsh'],
            'QEMU processes on evac-b': str(qemu),
            'Instance dir on evac-b after the failure':
                base.files_text(left['files']),
            'The disk the server booted on evac-a': (
                'kept' if left['disk_inode'] == booted_disk else
                'gone') if shared else "evac-a's own",
            'Placement (evac-b)': 'allocation: %s' % (
                left['allocation'] or 'none'),
            'Evacuating again': retry,
            'Used the leftover disk':
                str('evacuating using existing disk' in retry_log),
            'Manual steps still needed on evac-b': manual,
        })

        # Meta-test: the hook is what failed the spawn, once.
        self.assertEqual([sid], fired)
        self.assertEqual('failed', migration['status'])
        self.assertEqual('ERROR', server['status'])
        self.assertIsNone(left['allocation'])
        if shared:
            # Never deleted, by either: the only copy of the server's disk.
            self.assertEqual(booted_disk, left['disk_inode'])
        if binary == base.STOCK:
            # FIXME(bug): the guest runs on, on a host that does not own
            # the instance (on a shared directory, on the server's disk).
            self.assertIsNotNone(left['guest'])
            self.assertIn('running', left['guest'])
            self.assertEqual(1, qemu)
            self.assertIn('disk', left['files'])
            return
        self.assertIsNone(left['guest'])
        self.assertEqual(0, qemu)
        self.assertEqual('ACTIVE', retried['status'])
        self.assertEqual(base.DST, retried['OS-EXT-SRV-ATTR:host'])
        if shared:
            self.assertIn('disk on shared storage, evacuating using '
                          'existing disk', retry_log)
            self.assertEqual(booted_disk, after['disk_inode'])
        else:
            self.assertEqual({}, left['files'])
            self.assertIn('disk not on shared storage, evacuating from '
                          'image', retry_log)

    def test_stock(self):
        self._test(base.STOCK)

    def test_fixed(self):
        self._test(base.FIXED)
