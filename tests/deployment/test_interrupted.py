# SPDX-License-Identifier: Apache-2.0

"""Scenario 2: the destination's nova-compute dies while the guest runs.

evac-a runs a server and dies; the server is evacuated to evac-b, whose
nova-compute is SIGKILLed while spawn waits for the real domain it has
just started (QEMU running). There is no real cause that stops a spawn
there and leaves the process to be killed: the fault hook of
:mod:`tests.deployment.tier.faults` blocks ``_wait_for_boot`` (the
only point of spawn after the domain runs), and the test proves it fired.

No exception handler runs: the evacuation stays ``pre-migrating``, the
server in ``rebuild_spawning`` on its dead source, and evac-b keeps the
running guest, its disk and its allocation. Then both hosts come back,
the destination first. Stock nova leaves evac-b's guest running for ever
(nothing owns it); with the fix evac-b's start-up sweep ends the
evacuation and removes it.

CI runs this order on local storage; ``_test`` also runs the source
first and a shared instance directory, which the functional suite
(``tests/functional/test_interrupted_evacuation.py``) and the explorer's
recovery points cover.
"""

import signal
import time

from tests.deployment import base

SCENARIO = ("2. The destination's nova-compute is SIGKILLed while the "
            "real guest runs (fault hook blocks _wait_for_boot)")


class TestDestinationKilled(base.DeploymentTestCase):

    def _test(self, binary, dest_first, shared=False):
        d = self.d
        order = ('destination restarts first' if dest_first else
                 'source restarts first')
        storage = '%s, %s' % (base.storage_name(shared), order)
        self.hosts_up(evac_a=dict(shared=shared),
                      evac_b=dict(binary=binary, hook=True, shared=shared))
        server = self.boot(base.SRC)
        sid = server['id']
        self.crash_source()

        d.set_fault(base.DST, 'hang')
        d.compute.evacuate(sid, base.DST)
        self._wait(lambda: sid in d.fault_fired(base.DST), 'the fault hook')
        # Meta-test: the hook fired, and the real domain runs.
        guest = d.hosts[base.DST].domain_uuids().get(sid)
        self.assertIsNotNone(guest)
        self.assertEqual('running', guest[1])
        d.stop_compute(base.DST, signal.SIGKILL)
        d.set_fault(base.DST, None)
        killed = {'state': self.state(sid),
                  'dst': self.observe(base.DST, sid),
                  'qemu': len(d.hosts[base.DST].qemu_pids())}
        self.assertIn('pre-migrating', killed['state'])
        self.assertIn('rebuild_spawning', killed['state'])

        if not dest_first:
            self.host_up(base.SRC, shared=shared)
        t0 = time.monotonic()
        self.host_up(base.DST, binary, hook=True, shared=shared)
        d.timings.setdefault('destination nova-compute restart, start to '
                             'up (%s)' % base.MODES[binary], []).append(
            time.monotonic() - t0)
        after_dst = self.state(sid)
        if dest_first:
            self.host_up(base.SRC, shared=shared)
        end = {'state': self.state(sid),
               'dst': self.observe(base.DST, sid),
               'src': self.observe(base.SRC, sid),
               'qemu': len(d.hosts[base.DST].qemu_pids())}
        d.progress('%s, %s: %s; evac-b guest=%s files=%s allocation=%s',
                   base.MODES[binary], order, end['state'],
                   end['dst']['guest'], end['dst']['files'],
                   end['dst']['allocation'])

        manual = self.manual_steps(base.DST, sid, end['dst'], shared=shared)
        base.record(SCENARIO, storage, binary, {
            'After the kill': '%s; evac-b guest %s, %d QEMU' % (
                killed['state'], killed['dst']['guest'], killed['qemu']),
            'After evac-b restarted': after_dst,
            'After both restarted': end['state'],
            'virsh list --all on evac-b': end['dst']['virsh'],
            'QEMU processes left on evac-b': str(end['qemu']),
            'Instance dir on evac-b': base.files_text(end['dst']['files']),
            'Allocation on evac-b': str(end['dst']['allocation'] or
                                        'none'),
            'Manual steps still needed': manual,
        })

        if binary == base.STOCK:
            # FIXME(bug): nothing owns evac-b's guest: it runs on, with its
            # disk and allocation, and the server is stuck mid-rebuild.
            self.assertIsNotNone(end['dst']['guest'])
            self.assertEqual(1, end['qemu'])
        else:
            self.assertIsNone(end['dst']['guest'])
            if shared:
                # The server's own disk, on the shared directory: kept.
                self.assertIn('disk', end['dst']['files'])
            else:
                self.assertEqual({}, end['dst']['files'])
            self.assertIsNone(end['dst']['allocation'])
            self.assertEqual(0, end['qemu'])
            self.assertIn('ERROR/None', end['state'])
            if dest_first:
                # Ended as nova ends a failed evacuation. (Source first:
                # the source had already marked it completed.)
                self.assertIn('evacuation failed', end['state'])

    def _wait(self, predicate, what, timeout=120):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                self.fail('timed out waiting for %s' % what)
            time.sleep(0.2)

    def test_stock_destination_first(self):
        self._test(base.STOCK, dest_first=True)

    def test_fixed_destination_first(self):
        self._test(base.FIXED, dest_first=True)
