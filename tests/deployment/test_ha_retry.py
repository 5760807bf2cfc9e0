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

"""Scenario 4: a host evacuation retried the way HA tools drive it.

evac-a runs three servers and dies. An HA tool evacuates each of them,
letting the scheduler choose the destination (evac-b, the only one up),
and when an evacuation fails resets the server's state and evacuates it
again, up to three times, as Masakari's host recovery or Red Hat's
InstanceHA do. On evac-b the first spawn of each server fails after its
guest runs: no real cause fails spawn there, so the fault hook raises in
``_wait_for_boot`` once per server (:mod:`tests.deployment.tier.
faults`), and the test proves it fired for each.

Stock nova leaves each failed guest running on evac-b, and every retry
fails on it ("Instance ... already exists"). With the fix each failed
guest is destroyed and the second try succeeds.
"""

import time

from tests.deployment import base

SCENARIO = ('4. Host evacuation with an HA-style retry loop (reset-state, '
            'evacuate again, up to 3 tries; first spawn of each fails, '
            'fault hook)')
SERVERS = 3
MAX_TRIES = 3


class TestHostEvacuationRetries(base.DeploymentTestCase):

    def _test(self, binary):
        d = self.d
        self.hosts_up(evac_a={}, evac_b=dict(binary=binary, hook=True))
        sids = [self.boot(base.SRC, name='ha-%d' % i)['id']
                for i in range(SERVERS)]
        self.crash_source()
        d.set_fault(base.DST, 'raise-once')

        t0 = time.monotonic()
        tries = {}
        for sid in sids:
            tries[sid] = None
            for attempt in range(1, MAX_TRIES + 1):
                if attempt > 1:
                    d.compute.reset_state(sid, 'error')
                server, _ = self.evacuate(sid)
                if (server['status'] == 'ACTIVE' and
                        server['OS-EXT-SRV-ATTR:host'] == base.DST):
                    tries[sid] = attempt
                    break
        elapsed = time.monotonic() - t0
        d.timings.setdefault('host evacuation, %d servers, HA retry loop '
                             '(%s)' % (SERVERS, base.MODES[binary]),
                             []).append(elapsed)
        fired = d.fault_fired(base.DST)
        d.set_fault(base.DST, None)
        active = [sid for sid in sids if tries[sid]]
        dst = d.hosts[base.DST]
        guests = dst.domain_uuids()
        qemu = len(dst.qemu_pids())
        orphans = [sid for sid in sids if sid not in active and
                   sid in guests]
        d.rss_samples['during scenario 4 (%s): %d guests on evac-b' % (
            base.MODES[binary], len(guests))] = d.rss()
        d.progress('%s: %d of %d ACTIVE, tries %s', base.MODES[binary],
                   len(active), SERVERS, [tries[s] for s in sids])

        base.record(SCENARIO, 'non-shared storage', binary, {
            'ACTIVE in the end': '%d of %d' % (len(active), SERVERS),
            'Tries per server': ', '.join(
                str(tries[s]) if tries[s] else
                'failed %d times' % MAX_TRIES for s in sids),
            'Wall time of the loop': '%.1f s' % elapsed,
            'Guests of failed servers running on evac-b':
                str(len(orphans)),
            'QEMU processes on evac-b': str(qemu),
        })

        # Meta-test: the hook failed the first spawn of each server.
        self.assertEqual(sorted(sids), sorted(set(fired)))
        if binary == base.STOCK:
            # FIXME(bug): every retry fails on the guest the first try
            # left running.
            self.assertEqual([], active)
            self.assertEqual(SERVERS, len(orphans))
        else:
            self.assertEqual(SERVERS, len(active))
            self.assertEqual([2] * SERVERS, [tries[s] for s in sids])
            self.assertEqual(SERVERS, qemu)

    def test_stock(self):
        self._test(base.STOCK)

    def test_fixed(self):
        self._test(base.FIXED)
