# SPDX-License-Identifier: Apache-2.0

"""What each cleanup design leaves on the destination: a measurement.

Not a pass/fail test: every case fails one evacuation at one point and
records what is left on compute1, then evacuates again and records how
that went, as one JSON line in ``$DESIGN_MATRIX_OUT``.
``tests/patches/design_matrix_report.py`` turns the lines into the table
of ``patches/README.rst``. Run by ``tests/patches/measure_designs.sh``.

The points are the seven spawn stages of the fake libvirt driver and the
five points after spawn of ``tests/functional/test_evacuate_after_spawn``;
the storage modes non-shared, shared instance directory and RBD. Each case
boots one image-backed server, as the failure matrix does.

The design measured is the installed nova's (stock, or patched with
``patches/``; the computes always run nova's own manager, never the mixin)
plus, with ``DESIGN_MATRIX_DRIVER_CLEANUP=all``, a driver that cleans up
after a failure anywhere in spawn what that spawn created
(``created_instance_dir``, ``created_disks``), where libvirt does it only
inside ``_create_guest_with_network`` (bug 1550919).
"""

import json
import os
import time

import fixtures
import testscenarios

from tests.functional import test_evacuate_after_spawn as after_spawn
from tests.harness import fake_libvirt
from tests.harness import functional as base

load_tests = testscenarios.load_tests_apply_scenarios

SOURCE = base.SOURCE
DEST = base.DEST
AFTER_SPAWN = ('save', 'delete', 'power', 'notify', 'finish')
POINTS = fake_libvirt.STAGES + AFTER_SPAWN


class DesignMatrixTest(after_spawn._AfterSpawnTest):

    FIXED = False
    scenarios = testscenarios.multiply_scenarios(
        [(s, {'STORAGE': s}) for s in fake_libvirt.STORAGE_MODES],
        [(p, {'point': p}) for p in POINTS])

    def setUp(self):
        if os.environ.get('DESIGN_MATRIX_DRIVER_CLEANUP') == 'all':
            # A driver that removes what its spawn created after a failure
            # at any stage, not only inside _create_guest_with_network.
            self.useFixture(fixtures.MonkeyPatch(
                'tests.harness.fake_libvirt.SELF_CLEANING_STAGES',
                fake_libvirt.STAGES))
        super().setUp()

    def _own(self, uuid):
        """What compute1 has of the server on its own storage."""
        if self.STORAGE == 'shared':
            return {}
        return {name: size for name, size in
                self.world.files(DEST, uuid).items()
                if name != fake_libvirt.RBD_DISK_KEY}

    def _retry(self, server):
        """Evacuate again, to compute1; how it ends."""
        self.world.clear_faults()
        spawns = len(self.world.spawns(DEST, server['id']))
        self.api.post_server_action(server['id'],
                                    {'evacuate': {'host': DEST}})
        # An evacuation is ACTIVE, with no task state, on the source for a
        # moment after spawn: wait for the destination, or ERROR.
        deadline = time.time() + 60
        while time.time() < deadline:
            server = self.api.get_server(server['id'])
            if server['OS-EXT-STS:task_state'] is None and (
                    server['status'] == 'ERROR' or
                    (server['status'] == 'ACTIVE' and
                     server['OS-EXT-SRV-ATTR:host'] == DEST)):
                break
            time.sleep(0.2)
        else:
            return 'timeout (%s on %s)' % (server['status'],
                                           server['OS-EXT-SRV-ATTR:host'])
        if server['status'] == 'ERROR':
            return 'ERROR (%s)' % server.get('fault', {}).get('message')
        records = self.world.spawns(DEST, server['id'])[spawns:]
        if self.STORAGE == 'non-shared' and not (
                records and records[-1].created_disks):
            return 'ACTIVE, stale disk'
        return 'ACTIVE'

    def test_point(self):
        server = self._boot()
        uuid = server['id']
        shared_disk = (None if self.STORAGE == 'non-shared' else
                       self.world.disk_checksum(DEST, uuid))
        if self.point in AFTER_SPAWN:
            server = self._evacuate_and_fail(self.point, server)
        else:
            self._fail_source()
            server, _error = self._fail_evacuation(server, self.point)
        own = self._own(uuid)
        record = {
            'design': os.environ.get('DESIGN_MATRIX_DESIGN', 'unnamed'),
            'storage': self.STORAGE,
            'point': self.point,
            'guest': self.world.domain_state(DEST, uuid),
            'files': sorted(own),
            'bytes': sum(own.values()),
            'shared_disk_intact': (
                None if shared_disk is None else
                shared_disk == self.world.disk_checksum(DEST, uuid)),
            'dest_allocation': (None if server is None else
                                self._dest_allocation(server) is not None),
            'migration': self._migration_status(uuid),
            'retry': None if server is None else self._retry(server),
        }
        with open(os.environ['DESIGN_MATRIX_OUT'], 'a') as out:
            out.write(json.dumps(record) + '\n')
