# SPDX-License-Identifier: Apache-2.0

"""The behaviour table: the mixin and the series, cell by cell.

The fix ships twice, as this project's compute manager and as the nova
patch series, and nothing else compares the two point by point. Here one
evacuation from compute0 to compute1 fails per cell, a storage mode and a
failure point: the spawn stages of the fake libvirt driver
(``fake_libvirt.STAGES``) and the points after spawn of
``test_evacuate_after_spawn`` (its helpers fail them), all of them on
non-shared storage, those that tell something new on shared storage and
RBD (:data:`CELLS`). After each, the
facts a deployer cares about are recorded as plain strings
(``tests.behaviour_table.FACTS``): the server's state and host, the
migration, whether the fault is the original error, what is left on
compute1 (guest, files), whether the disk on shared storage or in the RBD
pool is the source's, untouched, where the server's allocations, port and
data volume are, and how the same evacuation then ends.

Every cell is asserted equal to one expected table,
``tests/functional/behaviour.json``, whichever fix runs: the mixin in
``tox -e functional``, nova's own patched manager in ``tox -e
release-NN-patched`` (``NOVA_EVAC_CLEANUP_FIX=patch``). A cell where they
differ fails at least one of them. With ``EVAC_BEHAVIOUR_DIR`` set, each
test also writes what it saw there, and ``python -m tests.behaviour_table
DIR`` prints the runs side by side.

Cost: one test per storage mode shares nova's services, compute0 and
compute1 between its cells. Every server of the test is booted at once on
compute0, which then dies (only the stopped server of ``power`` is stopped
first); each cell's evacuation then fails in turn, and the retries of all
cells run at once at the end.
"""

import hashlib
from importlib import metadata
import os
import time

from nova.tests.functional.api import client
from oslo_utils import uuidutils

from tests import behaviour_table
from tests.functional import test_evacuate_after_spawn as after_spawn
from tests.harness import fake_libvirt
from tests.harness import functional as base

SOURCE = base.SOURCE
DEST = base.DEST

#: The points after spawn of ``_AfterSpawnTest._evacuate_and_fail``.
AFTER_SPAWN = ('save', 'delete', 'power', 'notify', 'finish')

#: The cells, by storage mode, in the order of the table. The stages
#: ``define_domain`` and ``plug_vifs`` end as ``launch`` does (the driver
#: cleans up after itself, fake_libvirt.SELF_CLEANING_STAGES) and are left
#: out. On shared storage and RBD the evacuation reuses the disk the
#: source wrote, so the stages before the guest is defined all leave the
#: same (``get_guest_xml`` stands for them; on RBD it leaves compute1's
#: own directory with ``console.log``), and ``save`` and ``power`` fail in
#: the same code as ``notify`` in both fixes; ``wait_for_boot`` leaves a
#: running guest on the user's own disk, ``delete`` and ``finish`` are the
#: other paths after spawn.
CELLS = {
    'non-shared': tuple(stage for stage in fake_libvirt.STAGES
                        if stage not in ('define_domain', 'plug_vifs')) +
    AFTER_SPAWN,
    'shared': ('get_guest_xml', 'wait_for_boot', 'delete', 'notify',
               'finish'),
    'rbd': ('get_guest_xml', 'wait_for_boot', 'delete', 'notify', 'finish'),
    # A shared instance directory nova on compute1 cannot write: nova
    # answers not shared, yet the directory holds the source's disk. One
    # failure in spawn, one after it, and finish_evacuation (each its own
    # clean-up path).
    'shared-unwritable': ('get_guest_xml', 'notify', 'finish'),
}

#: The storage modes whose cells are not evacuated again. On
#: ``shared-unwritable`` the two fixes differ there by design: the mixin
#: refuses the next evacuation of a server whose files it kept without
#: proof they are its own (its journal keeps them), the series has no
#: journal and spawns on the share's disk. The cells are there for what
#: the failed evacuation keeps.
NO_RETRY = ('shared-unwritable',)

#: The error each point after spawn fails with: an injected one, or the
#: task state save's conflict after the reset.
AFTER_SPAWN_ERRORS = {'save': 'UnexpectedTaskStateError',
                      'power': 'InjectedFailure',
                      'notify': 'InjectedFailure',
                      'finish': 'InjectedFailure'}

#: How long to wait for compute1 to end one evacuation, in seconds.
TIMEOUT = 60


def _poll(check, what, timeout=TIMEOUT):
    """Wait until ``check()`` is true, polling every 50 ms."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError('timed out waiting for %s' % what)
        time.sleep(0.05)


class _Behaviour(object):
    """One test per storage mode: its cells of :data:`CELLS`.

    Mixed into ``test_evacuate_after_spawn._AfterSpawnTest``, whose
    helpers fail the points after spawn.
    """

    FIXED = True
    # One test runs up to 10 evacuations and their retries: twice the
    # usual OS_TEST_TIMEOUT.
    TIMEOUT_SCALING_FACTOR = 2

    def setUp(self):
        super().setUp()
        self.points = CELLS[self.STORAGE]
        # A server per cell: more than the test project's default quota.
        self.flags(instances=-1, cores=-1, ram=-1, group='quota')
        # Which evacuations compute1 has ended, by server uuid: the
        # server is ERROR before compute1 is done with it.
        self.ended = self._rebuilds_ended()
        self.source_dead = False
        self.hosts = {self._get_provider_uuid_by_host(host): host
                      for host in (SOURCE, DEST)}

    # Helpers of test_evacuate_after_spawn use these.

    def _fail_source(self):
        """compute0 dies, once for all the cells."""
        if not self.source_dead:
            self.source_dead = True
            super()._fail_source()

    # The cells.

    def _boot_all(self, points):
        """One server per point on compute0, booted at once.

        Each has a port on network_1 and a data volume of its own
        (CinderFixture takes any volume id for an available volume).
        """
        servers = {}
        for point in points:
            request = self._build_server(
                host=SOURCE,
                networks=[{'uuid': self.neutron.network_1['id']}])
            request['block_device_mapping_v2'] = [{
                'boot_index': 0, 'uuid': request['imageRef'],
                'source_type': 'image', 'destination_type': 'local'}, {
                'boot_index': -1, 'uuid': uuidutils.generate_uuid(),
                'source_type': 'volume', 'destination_type': 'volume'}]
            servers[point] = self.api.post_server({'server': request})
        for point, server in servers.items():
            _poll(lambda: self.api.get_server(server['id'])['status'] ==
                  'ACTIVE', 'server of %s to be ACTIVE' % point)
            servers[point] = self.api.get_server(server['id'])
        return servers

    def _wait_ended(self, uuid, count):
        _poll(lambda: self.ended.count(uuid) >= count,
              'compute1 to end evacuation %d of %s' % (count, uuid))

    def _fail_at_stage(self, server, stage):
        """Evacuate ``server`` with spawn failing at ``stage``."""
        self._fail_source()
        fired = self.world.fired(DEST, stage)
        error = self.world.inject_spawn_fault(DEST, stage)
        self.api.post_server_action(server['id'],
                                    {'evacuate': {'host': DEST}})
        self._wait_ended(server['id'], 1)
        # Meta-test: the failure did happen where it was injected.
        self.assertEqual(fired + 1, self.world.fired(DEST, stage))
        return ('FakeLibvirtError', str(error))

    def _fail_after_spawn(self, server, point):
        """Evacuate ``server`` and fail it at ``point`` after spawn."""
        self._evacuate_and_fail(point, server)
        self._wait_ended(server['id'], 1)
        return (None, AFTER_SPAWN_ERRORS.get(point))

    # The facts.

    def _disk_identity(self, uuid):
        """(sha256, inode) of the disk on shared storage, or None."""
        path = self.world.disk_path(DEST, uuid)
        if self.STORAGE == 'non-shared' or not os.path.exists(path):
            return None
        with open(path, 'rb') as f:
            return hashlib.sha256(f.read()).hexdigest(), os.stat(path).st_ino

    def _server(self, uuid):
        try:
            return self.api.get_server(uuid)
        except client.OpenStackApiNotFoundException:
            return None

    def _facts(self, uuid, original, disk_before, volume_id):
        server = self._server(uuid)
        facts = {}
        if server is None:
            facts['server'] = 'deleted'
        else:
            facts['server'] = '%s%s@%s' % (
                server['OS-EXT-STS:vm_state'],
                '/%s' % server['OS-EXT-STS:task_state']
                if server['OS-EXT-STS:task_state'] else '',
                server['OS-EXT-SRV-ATTR:host'])
        facts['migration'] = self._migration_status(uuid)
        facts['fault'] = self._fault(server, original)
        facts['guest'] = self.world.domain_state(DEST, uuid) or 'none'
        files = self.world.files(DEST, uuid)
        files.pop(fake_libvirt.RBD_DISK_KEY, None)
        facts['files'] = ' '.join(
            name + (' (partial)' if name == 'disk' and
                    size != fake_libvirt.DISK_SIZE else '')
            for name, size in sorted(files.items())) or (
            '(empty dir)' if os.path.isdir(
                self.world.instance_dir(DEST, uuid)) else '-')
        facts['disk'] = self._disk_fact(uuid, disk_before)
        facts['allocation'] = ' '.join(sorted(
            self.hosts.get(rp, rp)
            for rp in self._get_allocations_by_server_uuid(uuid))) or 'none'
        ports = self.neutron.list_ports(True, device_id=uuid)['ports']
        facts['port'] = ' '.join(sorted(
            port.get('binding:host_id') or 'unbound'
            for port in ports)) or 'none'
        attachments = self.cinder.volume_to_attachment.get(volume_id, {})
        facts['volume'] = ' '.join(sorted(
            (attachment['connector'] or {}).get('host', 'reserved')
            for attachment in attachments.values())) or 'none'
        return facts

    def _fault(self, server, original):
        fault = server and server.get('fault')
        if not fault:
            return 'none'
        message, detail = original
        if ((message is None or fault['message'] == message) and
                (detail is None or detail in fault.get('details', ''))):
            return 'original'
        return 'other: %s' % fault['message'][:60]

    def _disk_fact(self, uuid, before):
        if self.STORAGE == 'non-shared':
            return '-'
        now = self._disk_identity(uuid)
        if now is None:
            return 'gone'
        if now == before:
            return 'intact'
        return 'rewritten' if now[1] == before[1] else 'replaced'

    def _retry_fact(self, uuid):
        server = self.api.get_server(uuid)
        if server['status'] != 'ACTIVE':
            return '%s: %s' % (server['status'],
                               server.get('fault', {}).get('message', '')[:60])
        generation = self.world.disk_generation(DEST, uuid)
        [writer] = [spawn for spawn in self.world.spawns(uuid=uuid)
                    if spawn.generation == generation] or [None]
        if writer is None:
            disk = 'no disk'
        elif writer.host == SOURCE:
            disk = 'own disk'
        elif writer is self.world.spawns(DEST, uuid)[-1]:
            disk = 'fresh disk'
        else:
            disk = 'stale disk'
        if not self.world.disk_is_complete(DEST, uuid):
            disk += ' (partial)'
        guest = self.world.domain_state(DEST, uuid)
        return '%s@%s %s%s' % (
            server['status'], server['OS-EXT-SRV-ATTR:host'], disk,
            '' if guest == 'running' else ', guest %s' % guest)

    # The test.

    def test_behaviour(self):
        servers = self._boot_all(self.points)
        disks = {point: self._disk_identity(server['id'])
                 for point, server in servers.items()}
        if self.STORAGE != 'non-shared':
            self.assertNotIn(None, disks.values())
        # A cell that goes wrong on the way (a wait that times out) is
        # still recorded, from what is there, and reported at the end.
        errors = []
        observed = self._fail_cells(servers, disks, errors)
        self._retry_cells(servers, observed, errors)
        rows = {point: {name: observed[point][name]
                        for name in behaviour_table.FACT_NAMES}
                for point in self.points}
        self._write(rows)
        self.assertEqual([], errors)
        self.assert_table(rows)

    def _fail_cells(self, servers, disks, errors):
        """Fail each cell's evacuation in turn; its facts by point."""
        observed = {}
        # The stopped server's cell first: compute0 must be up to stop it.
        for point in sorted(self.points, key=lambda point: point != 'power'):
            server = servers[point]
            self.world.clear_faults()
            original = (None, None)
            try:
                if point in fake_libvirt.STAGES:
                    original = self._fail_at_stage(server, point)
                else:
                    original = self._fail_after_spawn(server, point)
            except Exception as error:
                errors.append('%s %s: %s' % (self.STORAGE, point, error))
            observed[point] = self._facts(
                server['id'], original, disks[point],
                self._volume_of(server))
        return observed

    def _retry_cells(self, servers, observed, errors):
        """Every cell's evacuation again, at once, without fault."""
        self.world.clear_faults()
        retried = [point for point in self.points
                   if observed[point]['server'] != 'deleted' and
                   self.STORAGE not in NO_RETRY]
        for point in list(retried):
            try:
                self.api.post_server_action(servers[point]['id'],
                                            {'evacuate': {'host': DEST}})
            except client.OpenStackApiException as error:
                retried.remove(point)
                observed[point]['retry'] = 'refused (%s)' % (
                    error.response.status_code)
        for point in self.points:
            observed[point].setdefault('retry', '-')
            if point in retried:
                try:
                    self._wait_ended(servers[point]['id'], 2)
                except AssertionError as error:
                    errors.append('%s %s retry: %s' % (
                        self.STORAGE, point, error))
                observed[point]['retry'] = self._retry_fact(
                    servers[point]['id'])

    def _volume_of(self, server):
        [volume] = server['os-extended-volumes:volumes_attached']
        return volume['id']

    def _write(self, rows):
        directory = os.environ.get(behaviour_table.DIR_ENV)
        if directory:
            behaviour_table.write_observed(
                directory, base.fix_mode(), metadata.version('nova'),
                self.STORAGE, rows)

    def assert_table(self, rows):
        """Every cell equal to the expected table's; all differences."""
        expected = behaviour_table.load_expected().get(self.STORAGE, {})
        self.assertEqual(list(self.points), list(expected),
                         'the cells of %s' % self.STORAGE)
        differences = [
            '%s %s %s: expected %r, saw %r' % (
                self.STORAGE, point, name, expected[point][name], value)
            for point in self.points
            for name, value in rows[point].items()
            if expected[point].get(name) != value]
        if differences:
            self.fail('%s (%s) differs from the behaviour table in %d '
                      'cell(s):\n%s' % (
                          base.fix_mode(), metadata.version('nova'),
                          len(differences), '\n'.join(differences)))


class NonSharedBehaviourTest(_Behaviour, after_spawn._AfterSpawnTest):
    STORAGE = 'non-shared'


class SharedDirBehaviourTest(_Behaviour, after_spawn._AfterSpawnTest):
    STORAGE = 'shared'


class RbdBehaviourTest(_Behaviour, after_spawn._AfterSpawnTest):
    STORAGE = 'rbd'


class SharedUnwritableBehaviourTest(_Behaviour,
                                    after_spawn._AfterSpawnTest):
    STORAGE = 'shared-unwritable'
