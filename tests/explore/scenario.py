# SPDX-License-Identifier: Apache-2.0

"""One cell of the explorer: a scenario, a fault at one point, the checks.

Every scenario runs real nova in-process (API, conductor, scheduler,
placement) on the fake libvirt driver with four computes: ``compute0`` the
source, ``compute1`` the destination, ``compute2`` the destination of
another evacuation in flight at the same time. Four servers: the *target*
(with a port and a data volume, from nova's neutron and cinder fixtures as
:mod:`tests.harness.services` completes them; booted from a volume too with
``EXPLORE_BOOT_FROM_VOLUME`` set, ``--boot-from-volume``) and two
bystanders on ``compute0`` (one stays there, one is evacuated to
``compute2`` with the target), one bystander on ``compute1``. ``compute0``
dies (stopped, forced down, its guests shut off as by the host's death),
then:

* ``evacuate``: the target is evacuated to ``compute1``;
* ``spawn-fails``: the same, and its spawn fails in ``wait_for_boot``
  (the guest was running: the most the spawn leaves);
* ``sweep``: the same evacuation, ``compute1`` dies right after spawn's
  ``wait_for_boot`` step, and starts again: its start-up sweep ends the
  interrupted evacuation;
* ``audit``: the same death, then ``nova-evac-cleanup audit --delete``
  ends it while ``compute1`` is down, and ``compute1`` starts again;
* ``giveback``: the failed spawn of ``spawn-fails``, then ``compute0``
  starts before its network agent is alive (neutron refuses to bind the
  port to it): its start-up give-back connects the volumes for itself but
  cannot bind the port; the agent comes up and its periodic give-back
  binds it.

The explored fault fires in the evacuation for the first two and in the
sweep or the audit for the next two, in the source's give-back (at its
start or from its periodic task) for ``giveback``
(:mod:`tests.explore.tracer`). A
process that died is restarted without a graceful stop, keeping its
domains and files; a death or an error inside the recovery is followed by
a second, normal start (or audit), which must finish the job. The source
comes back first or last (``source-first``, ``dest-first``). Then the
invariants of :data:`INVARIANTS` are checked, an HA-style retry evacuates
the target to ``compute1`` again (at most twice), the source comes back
and the last ones are checked.
"""

import collections
import json
import os
import sys
import time

import fixtures
from nova.compute import manager as nova_manager
import nova.conf
from nova import context as nova_context
from nova import objects
from nova.tests import fixtures as nova_fixtures
from nova.tests.functional.api import client as api_client
from oslo_utils.fixture import uuidsentinel as uuids

from tests.explore import tracer as tracing
from tests.harness import fake_libvirt
from tests.harness import functional as base
from tests.harness import services

CONF = nova.conf.CONF
SOURCE = base.SOURCE
DEST = base.DEST
OTHER = 'compute2'

GIVEBACK = 'giveback'
SCENARIOS = ('evacuate', 'spawn-fails', 'sweep', 'audit', GIVEBACK)
#: The scenarios whose explored points are the recovery's.
RECOVERY = ('sweep', 'audit')
ORDERS = ('dest-first', 'source-first')
#: The death that interrupts the evacuation of the recovery scenarios.
INTERRUPTION = tracing.Fault('evacuate', 'driver.spawn:wait_for_boot', 1,
                             tracing.DIE)

INVARIANTS = (
    ('data', "the shared-directory and RBD disks are byte-identical"),
    ('bystanders', 'nothing of another server or operation changed'),
    ('stuck', 'no task state left set, no migration pre-migrating or '
              'accepted'),
    ('orphaned', 'nothing left on the destination unless the server lives '
                 'there: domain, non-shared files, allocation; where it '
                 'lives, its allocation'),
    ('split-brain', 'a running guest only on the host the database names'),
    ('released-last', 'a recovery that dies or fails has not released the '
                      'server (task state) while anything of the evacuation '
                      'is left on the destination'),
    ('fault', 'the recorded fault is the original error'),
    ('retry', 'an HA retry to the same host (at most twice; a hard reboot '
              'if it is recorded there already, in ERROR) ends ACTIVE, on '
              'a fresh disk (non-shared) or the user\'s own (shared, RBD)'),
    ('ports', 'once the host the server lives on runs (after the evacuation '
              'and again at the end; a source running then has had its '
              'periodic give-back), the port is bound there with a working '
              'vif type, or a WARNING names it with its commands'),
    ('volumes', 'once that host runs, exactly one attachment per volume, '
                'the one its mapping names, attached for that host and the '
                'mapping\'s connection its own; and no host ever disconnects '
                'a connection it never made (checked at every disconnect)'),
)

#: The breaks stock nova makes itself, whatever the fix does: counted
#: apart (verdict ``stock`` when nothing else broke), never charged to
#: the fix, always listed. After a successful evacuation, the source's
#: start (nova's ``ComputeManager._destroy_evacuated_instances``, nova
#: 34.0.0 ``nova/compute/manager.py``) destroys the evacuated guest with
#: the block device info read from the mappings, which name the
#: destination's connection now: its driver disconnects each volume with
#: the destination's connection info (libvirt's ``_cleanup`` disconnects
#: every volume "regardless"), a connection the source never made.
STOCK = 'stock'
STOCK_PREFIX = 'stock nova\'s own (ComputeManager._destroy_evacuated_' \
    'instances on the source disconnects with the destination\'s ' \
    'connection info): '

#: What ``kept`` means in the table: the driver's destroy itself failed
#: in an ending (the failure handler's, the sweep's or ``audit --delete``'s:
#: they share one). Nothing may be destroyed then without a destroy that
#: works: the guest is powered off and kept with its files, recorded, and
#: the next evacuation of the server to this host destroys it first
#: (``retry`` still holds). ``orphaned`` is not met, nor, where the ending
#: released the server over the kept guest, ``released-last``; an
#: allocation left on compute1 is never excused.
#: The outcome of a cell whose fault point was never reached: counted
#: apart, neither held nor broken.
NOT_REACHED = 'not-reached'
#: Open findings the explorer found, each with the cells
#: ``(scenario, point, kind)`` that show it and the invariant they break:
#: such a cell's verdict is ``open`` when what broke is exactly that (it
#: is counted and listed apart, the CI sample stays green); anything else
#: breaking, or the finding fixed (the cell holds), shows as usual.
OPEN = 'open'
OPEN_FINDINGS = (
    ('volumes', 'the spawn failed, or the destination died in it, before '
     'it connected the volumes; the ending\'s destroy (the failure '
     'handler\'s, or the sweep\'s) passes the block device info and the '
     'driver disconnects each volume on the destination all the same '
     '(libvirt\'s _cleanup disconnects every volume "regardless", as in '
     'nova\'s own cleanup of a failed boot): a connection it never made '
     '(the runtime package; open)', {
         ('evacuate', name, tracing.RAISE) for name in (
             'driver.spawn#1', 'driver.spawn:create_instance_dir#1',
             'driver.write_disk#1', 'driver.spawn:create_disks#1',
             'driver.spawn:get_guest_xml#1')} | {
         ('evacuate', name, tracing.DIE) for name in (
             'journal.write#3', 'driver.spawn:create_instance_dir#1',
             'driver.write_disk#1', 'driver.spawn:create_disks#1',
             'driver.spawn:get_guest_xml#1')}),
    ('retry', 'the evacuation failed before spawn, after cinder connected '
     'the destination\'s new attachment of a volume and before nova '
     'completed it: the volume stays attaching, a status in which cinder '
     'reserves no attachment, and the failure handler, nova\'s and the '
     'ending, leave it so; the HA retry is refused by cinder (stock nova '
     'breaks it too, and leaves the port and the volume there; the '
     'runtime package; open)', {
         ('evacuate', 'BlockDeviceMapping.save#2', tracing.RAISE)}),
)


def open_finding(cell):
    """The ``(invariant, finding)`` of OPEN_FINDINGS a cell shows, or None."""
    fault = cell.fault
    if fault is None or cell.nova != FIXED:
        return None
    key = (cell.scenario, '%s#%d' % (fault.name, fault.occurrence),
           fault.kind)
    return next(((invariant, text) for invariant, text, cells in
                 OPEN_FINDINGS if key in cells), None)


#: The outcomes that are not a failure.
PASSED = ('held', 'kept', NOT_REACHED, STOCK, OPEN)

KEPT = ('the driver\'s destroy failed in the ending: the guest is powered '
        'off and kept with its files until the next evacuation of the '
        'server to this host destroys it first')

#: Files in compute1's journal directory that are not its entries: valid
#: JSON that is not an object, empty, truncated, a directory, another
#: host's entry. Part of every scenario, as bystanders.
JUNK = {
    'not-an-object.json': '[1, 2]',
    'empty.json': '',
    'truncated.json': '{"host": "compute1", "instance_uu',
    'a-directory.json': None,
    'other-host.json': '{"host": "compute9", "instance_uuid": "x", '
                       '"migration_uuid": "other-host", "migration_id": 1}',
}

_WAIT = 30

#: The target's data volume; booted from a volume, its root volume too.
DATA_VOLUME = uuids.explore_data_volume
ROOT_VOLUME = nova_fixtures.CinderFixture.IMAGE_BACKED_VOL


def boot_from_volume():
    """Whether the target boots from a volume (``--boot-from-volume``)."""
    return bool(os.environ.get('EXPLORE_BOOT_FROM_VOLUME'))


def volumes():
    """The target's volumes."""
    return ((ROOT_VOLUME,) if boot_from_volume() else ()) + (DATA_VOLUME,)


class Broken(Exception):
    """An invariant broke."""

    def __init__(self, invariant, detail):
        super().__init__('%s: %s' % (invariant, detail))
        self.invariant = invariant
        self.detail = detail


#: The compute managers a cell runs on: this project's, or nova's own.
FIXED, STOCK_NOVA = 'fixed', 'stock'
NOVAS = (FIXED, STOCK_NOVA)
#: The scenarios stock nova has: it has no sweep, audit or give-back.
ON_STOCK = ('evacuate', 'spawn-fails')


class Cell(object):
    """What one run explores; ``fault`` None records the points."""

    def __init__(self, storage, scenario, fault=None, order='dest-first',
                 nova=FIXED):
        self.storage = storage
        self.scenario = scenario
        self.fault = fault
        self.order = order
        #: :data:`FIXED` or :data:`STOCK_NOVA`
        self.nova = nova

    def key(self):
        fault = self.fault
        return (self.storage, self.scenario,
                fault and '%s#%d' % (fault.name, fault.occurrence),
                fault and fault.kind, self.order, self.nova)


class ExploreCase(base.EvacuateTestCase):
    """The scenario of one :class:`Cell`; ``outcome`` says what held."""

    #: set by :func:`run_cell`
    CELL = None

    def setUp(self):
        self.STORAGE = self.CELL.storage
        super().setUp()
        # The source asks the dead destination whether the storage is
        # shared; do not wait a minute for the answer.
        self.flags(rpc_response_timeout=2)
        self.flags(sweep_on_start='clean', group='evacuate_cleanup')
        self.compute2 = self._start_compute(OTHER)
        # A SAN's connection info: the LUN a host logs into is its own, so
        # a disconnect with another host's connection info shows.
        self.cinder.STYLE = services.ISCSI
        self._watch_connections()
        # nova's volume detach asks CONF.host whether the instance is on
        # this host; the computes of a test share CONF (its host is the
        # one started last): each asks for its own.
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.block_device.CONF', _HostOfCaller(CONF)))
        self.source_runs = True

    def runTest(self):
        cell = self.CELL
        self.points = []
        self.outcome = None
        self.broken = []
        #: the breaks that are stock nova's own (:data:`STOCK`)
        self.stock = []
        try:
            self._scenario(cell)
        except Broken as error:
            self.broken.append((error.invariant, error.detail))
        self.outcome = self._verdict(cell)
        finding = open_finding(cell)
        if finding and self.outcome == finding[0]:
            self.outcome = OPEN
            self.broken = [(invariant, 'open finding: %s; %s' % (
                finding[1], detail)) for invariant, detail in self.broken]
        if self.stock and self.outcome == 'held':
            self.outcome = STOCK
        # nova's test case deletes the public attributes at its end.
        self._ran = (self.outcome, self.broken + [
            (invariant, STOCK_PREFIX + detail)
            for invariant, detail in self.stock], self.points)

    def _verdict(self, cell):
        """``held``, ``kept`` (see :data:`KEPT`), or what broke.

        A cell whose fault never fired tested nothing: ``not-reached``
        unless something broke all the same.
        """
        broken = sorted({invariant for invariant, _ in self.broken})
        if not broken:
            fault = cell.fault
            return ('held' if fault is None or fault in self.tracer.fired
                    else NOT_REACHED)
        fault = cell.fault
        if set(broken) <= {'orphaned', 'released-last'} and (
                fault is not None and fault.kind == tracing.RAISE and
                self._inside_destroy(fault) and not any(
                    'allocation' in detail for _, detail in self.broken)):
            return 'kept'
        return ', '.join(broken)

    def _inside_destroy(self, fault):
        """Whether the fault fired inside the cleanup's driver.destroy."""
        points = self.tracer.points
        index = self.tracer.fired.get(fault)
        if index is None:
            return False
        opened = [i for i, p in enumerate(points[:index + 1])
                  if p[1] == 'driver.destroy']
        return bool(opened) and not any(
            p[1] in ('journal.remove', 'Migration.save')
            for p in points[opened[-1]:index])

    # The scenario.

    def _scenario(self, cell):
        context = nova_context.get_admin_context()
        # Booted side by side: the servers are independent.
        self.target, self.stays, self.moves, self.local = [
            self._wait_for_state_change(server, 'ACTIVE') for server in [
                self._post_target()] + [
                self._post_server(host) for host in (SOURCE, SOURCE, DEST)]]
        self.before = {s['id']: self._disk(s) for s in
                       (self.target, self.stays, self.moves, self.local)}
        self.local_state = self._server_state(self.local)
        self._fail_source()
        self.source_runs = False
        self.world.host_reboot(SOURCE)
        self.stays_state = self._server_state(self.stays)
        if not os.environ.get('EXPLORE_NO_JUNK'):
            self._put_junk()

        faults = []
        if cell.scenario in RECOVERY:
            faults.append(INTERRUPTION)
        if cell.fault is not None:
            faults.append(cell.fault)
        self.tracer = self.useFixture(tracing.Tracer(
            DEST, faults, source=SOURCE if cell.scenario == GIVEBACK
            else None))
        # What was recorded survives a scenario that fails half-way.
        self._points_seen = self.tracer.points
        if cell.scenario in ('spawn-fails', GIVEBACK):
            self.world.inject_spawn_fault(DEST, 'wait_for_boot')
        ended = self._rebuilds_ended()
        self.api.post_server_action(self.moves['id'],
                                    {'evacuate': {'host': OTHER}})
        self.api.post_server_action(self.target['id'],
                                    {'evacuate': {'host': DEST}})
        self._wait(lambda: self.target['id'] in ended, 'the evacuation')
        dead = self.tracer.died.ready()
        if dead:
            self._kill_dest()
        # The other evacuation ends (its server was ACTIVE before it).
        self._wait(lambda: self._moved_on(self.moves, OTHER),
                   'the other evacuation')

        source_down = True
        if dead and cell.order == 'source-first':
            self._restart_source()
            source_down = False
        if cell.scenario == 'audit':
            self._audit_with_fault()
        if dead:
            self._start_dest_with_fault(
                explored=cell.scenario == 'sweep')
        if cell.scenario == GIVEBACK:
            self._give_back_with_fault(context)
            source_down = False
        self._settle()
        self.points = list(self.tracer.points)
        self.tracer.disarm()
        self._check_phase_one(cell, context)

        if not source_down:
            self._stop_source()
        self._ha_retry(cell)
        if source_down:
            self._restart_source()
        self._check_split_brain()
        self._check_bystanders()
        self._check_junk()
        self._check_home(context)
        self._check_disconnects()

    def _post_server(self, host):
        return self.api.post_server({'server': self._build_server(
            host=host, networks='none')})

    def _post_target(self):
        """The target, on compute0: a port, a data volume, maybe BFV."""
        self.port = self.neutron.port_1['id']
        bfv = boot_from_volume()
        server = self._build_server(image_uuid='' if bfv else None,
                                    host=SOURCE,
                                    networks=[{'port': self.port}])
        server['block_device_mapping_v2'] = ([] if bfv else [{
            'boot_index': 0, 'uuid': server['imageRef'],
            'source_type': 'image', 'destination_type': 'local'}]) + [{
                'boot_index': 0 if volume == ROOT_VOLUME else -1,
                'uuid': volume, 'source_type': 'volume',
                'destination_type': 'volume'} for volume in volumes()]
        return self.api.post_server({'server': server})

    def _moved_on(self, server, host):
        """Whether the evacuation of ``server`` to ``host`` has ended."""
        server = self.api.get_server(server['id'])
        if server['OS-EXT-STS:task_state'] is not None:
            return False
        return server['OS-EXT-SRV-ATTR:host'] == host or any(
            m.status in ('failed', 'error')
            for m in self._migrations(server['id']))

    def _wait(self, predicate, what, timeout=_WAIT):
        deadline = time.monotonic() + timeout
        while not predicate():
            if time.monotonic() > deadline:
                self.fail('timed out waiting for %s' % (
                    what() if callable(what) else what))
            time.sleep(0.05)

    # Deaths and restarts.

    def _kill_dest(self):
        """compute1 died: no graceful stop, its lock goes with it."""
        service = self.compute1
        service.rpcserver.stop()
        if getattr(service, 'rpcserver_alt', None) is not None:
            service.rpcserver_alt.stop()
        service.tg.stop()
        self.release_host_lock(DEST)
        self._force_down(DEST, True)

    def _force_down(self, host, down):
        service = self.admin_api.get_services(
            binary='nova-compute', host=host)[0]
        self.admin_api.put_service_force_down(service['id'], down)

    def _start_dest(self):
        self._force_down(DEST, False)
        cell_name = self.host_mappings[DEST].cell_mapping.name
        self.compute1 = self.start_service('compute', host=DEST,
                                           cell_name=cell_name)

    def _start_dest_with_fault(self, explored):
        """compute1 starts; with ``explored`` its sweep meets the fault.

        A start that dies or fails is followed by a normal one.
        """
        try:
            self._start_dest()
        except tracing.ProcessDied:
            self.tracer.resurrect()
            self._kill_dest()
            self.tracer.disarm()
            self._check_released_last()
            self._start_dest()
            return
        if explored and self.CELL.fault in self.tracer.fired:
            self.tracer.disarm()
            self._kill_dest()
            self._check_released_last()
            self._start_dest()

    def _audit(self):
        return self._run_audit(delete=True, as_json=True, host=DEST)[0]

    def _audit_with_fault(self):
        """audit --delete meets the fault; then a normal one."""
        try:
            self._audit()
        except tracing.ProcessDied:
            self.tracer.resurrect()
            self.release_host_lock(DEST)
        except tracing.InjectedFault:
            # The command fails (nova-evac-cleanup prints the error and
            # exits 1); the operator runs it again.
            pass
        if self.CELL.fault in self.tracer.fired:
            self.tracer.disarm()
            self._check_released_last()
            self._audit()

    def _give_back_with_fault(self, context):
        """compute0 starts, its agent down, then its periodic give-back.

        A start or a periodic run that dies is followed by a normal start;
        one that fails, by the next periodic run.
        """
        self.neutron.agents_down = {SOURCE}
        try:
            self._restart_source()
        except tracing.ProcessDied:
            self._source_died()
        self.neutron.agents_down = set()
        fired = self.CELL.fault in self.tracer.fired
        try:
            self.compute0.manager._give_back_failed_evacuations(context)
        except tracing.ProcessDied:
            self._source_died()
            return
        if not fired and self.CELL.fault in self.tracer.fired:
            # It failed: the next periodic run.
            self.tracer.disarm()
            self.compute0.manager._give_back_failed_evacuations(context)

    def _source_died(self):
        """compute0 died in its give-back: killed, then a normal start."""
        self.tracer.resurrect()
        self.tracer.disarm()
        service = self.compute0
        if getattr(service, 'rpcserver', None) is not None:
            service.rpcserver.stop()
        service.tg.stop()
        self.release_host_lock(SOURCE)
        self._force_down(SOURCE, True)
        cell_name = self.host_mappings[SOURCE].cell_mapping.name
        self.compute0 = self.start_service('compute', host=SOURCE,
                                           cell_name=cell_name)
        self._force_down(SOURCE, False)
        self.source_runs = True

    def _restart_source(self):
        # nova refuses to force a host up while it has evacuations done
        # from it that its own start-up has not cleaned up yet.
        self.compute0 = self.restart_compute_service(self.compute0)
        self._force_down(SOURCE, False)
        self.source_runs = True

    def _stop_source(self):
        self.compute0.stop()
        self._force_down(SOURCE, True)
        self.source_runs = False
        self.world.host_reboot(SOURCE)

    def _settle(self):
        """Let the late work of a start end (the sweep's guest report)."""
        time.sleep(0.2)

    # What is seen.

    def _disk(self, server):
        """The checksum of a server's disk where its host sees it."""
        host = server['OS-EXT-SRV-ATTR:host']
        return self.world.disk_checksum(host, server['id'])

    def _server_state(self, server):
        server = self.api.get_server(server['id'])
        return (server['status'], server['OS-EXT-SRV-ATTR:host'],
                server['OS-EXT-STS:task_state'],
                self.world.domain_state(server['OS-EXT-SRV-ATTR:host'],
                                        server['id']))

    def _migrations(self, uuid):
        """The migrations of a server, oldest first."""
        return sorted(objects.MigrationList.get_by_filters(
            nova_context.get_admin_context(), {'instance_uuid': uuid}),
            key=lambda migration: migration.id)

    def _break(self, invariant, detail):
        self.broken.append((invariant, detail))

    # The invariants.

    def _check_phase_one(self, cell, context):
        server = self.api.get_server(self.target['id'])
        uuid = server['id']
        host = server['OS-EXT-SRV-ATTR:host']
        if self.STORAGE in ('shared', 'rbd'):
            disk = self.world.disk_checksum(SOURCE, uuid)
            if disk != self.before[uuid]:
                self._break('data', 'the disk of the target changed: %s' %
                            ('gone' if disk is None else 'other bytes'))
        if server['OS-EXT-STS:task_state'] is not None:
            self._break('stuck', 'task state %s' %
                        server['OS-EXT-STS:task_state'])
        busy = [m.status for m in self._migrations(uuid)
                if m.status in ('pre-migrating', 'accepted')]
        if busy:
            self._break('stuck', 'migration %s' % busy[0])
        if host != DEST:
            domain = self.world.domain_state(DEST, uuid)
            if domain is not None:
                self._break('orphaned', 'a %s domain on %s' % (domain, DEST))
            files = self.world.files(DEST, uuid)
            if self.STORAGE == 'non-shared' and files:
                self._break('orphaned', 'files on %s: %s' % (
                    DEST, ', '.join(sorted(files))))
            if self.STORAGE == 'rbd' and [
                    name for name in files if 'disk' in name and
                    not name.startswith(fake_libvirt.RBD_DISK_KEY)]:
                self._break('orphaned', 'a local disk on %s' % DEST)
            if self._dest_allocation(server) is not None:
                self._break('orphaned', 'an allocation against %s' % DEST)
            if host == SOURCE and self._get_allocations_by_server_uuid(
                    uuid).get(self._get_provider_uuid_by_host(SOURCE)) is None:
                self._break('orphaned', 'it lives on %s without an '
                            'allocation there' % SOURCE)
        elif self._dest_allocation(server) is None:
            self._break('orphaned', 'it lives on %s without an allocation '
                        'there' % DEST)
        self._check_split_brain()
        self._check_fault(cell, server)
        self._check_home(context)
        self._check_disconnects()

    # Ports and volumes.

    def _watch_connections(self):
        """Note each volume connection each host makes and takes down."""
        #: host: the connections it made, by :func:`connection_key`
        self.connections = collections.defaultdict(set)
        #: ``(host, key, made by this host before, stock nova's own)``
        self.disconnects = []
        self._disconnects_checked = 0
        driver = fake_libvirt.FakeLibvirtDriver
        connect, disconnect = driver._connect_volume, driver._disconnect_volume
        stock_code = nova_manager.ComputeManager. \
            _destroy_evacuated_instances.__code__

        def connect_noted(driver, context, connection_info, instance):
            result = connect(driver, context, connection_info, instance)
            self.connections[driver._host].add(
                connection_key(connection_info))
            return result

        def disconnect_noted(driver, context, connection_info, instance):
            key = connection_key(connection_info)
            self.disconnects.append((
                driver._host, key, key in self.connections[driver._host],
                _on_stack(stock_code)))
            return disconnect(driver, context, connection_info, instance)

        for name, function in (('_connect_volume', connect_noted),
                               ('_disconnect_volume', disconnect_noted)):
            self.useFixture(fixtures.MonkeyPatch(
                'tests.harness.fake_libvirt.FakeLibvirtDriver.' + name,
                function))

    def _check_disconnects(self):
        """No host disconnected a connection it never made."""
        for host, key, made, stock in self.disconnects[
                self._disconnects_checked:]:
            if made:
                continue
            detail = '%s disconnected %s LUN %s, a connection it never ' \
                'made' % (host, key[0], key[1])
            if stock:
                self.stock.append(('volumes', detail))
            else:
                self._break('volumes', detail)
        self._disconnects_checked = len(self.disconnects)

    def _check_home(self, context):
        """The ports and volumes, once the server's host runs."""
        server = self.api.get_server(self.target['id'])
        host = server['OS-EXT-SRV-ATTR:host']
        if host == SOURCE:
            if not self.source_runs:
                return
            # The source has run a while: its periodic give-back ran.
            give_back = getattr(self.compute0.manager,
                                '_give_back_failed_evacuations', None)
            if give_back is not None:
                give_back(context)
        elif host != DEST:
            return
        port = self.neutron._ports[self.port]
        bound = (port.get('binding:host_id'), port.get('binding:vif_type'))
        if bound[0] != host or bound[1] in ('binding_failed', 'unbound',
                                            None):
            told = [line for line in self.stdlog.logger.output.splitlines()
                    if 'WARNING' in line and self.port in line and
                    'openstack port set --host %s %s' % (
                        host, self.port) in line]
            if not told:
                self._break('ports', 'the port is bound to %s (%s), the '
                            'server lives on %s, and no WARNING names it '
                            'with its commands' % (bound[0], bound[1], host))
        for volume in volumes():
            attachments = self.cinder.volume_to_attachment[volume]
            bdm = objects.BlockDeviceMapping.get_by_volume_and_instance(
                context, volume, server['id'])
            if len(attachments) != 1:
                self._break('volumes', 'volume %s has %d attachments, the '
                            'server lives on %s' % (
                                volume, len(attachments), host))
                continue
            [(attachment_id, attachment)] = attachments.items()
            connector = (attachment.get('connector') or {}).get('host')
            status = attachment.get('status', 'attached')
            lun = _lun(bdm.connection_info)
            if attachment_id != bdm.attachment_id:
                self._break('volumes', 'the mapping of volume %s names '
                            'another attachment' % volume)
            elif status != 'attached' or connector != host:
                self._break('volumes', 'volume %s %s for %s, the server '
                            'lives on %s' % (volume, status, connector, host))
            elif lun != services.lun(host):
                self._break('volumes', 'the mapping of volume %s has the '
                            'connection info of LUN %s, not %s\'s' % (
                                volume, lun, host))

    def _check_released_last(self):
        """After a recovery died or failed: not released half-way."""
        server = self.api.get_server(self.target['id'])
        if server['OS-EXT-STS:task_state'] is not None or (
                server['OS-EXT-SRV-ATTR:host'] == DEST):
            return
        uuid = server['id']
        left = [what for what, there in (
            ('a domain', self.world.domain_state(DEST, uuid)),
            ('an allocation', self._dest_allocation(server)),
            ('files', self.STORAGE == 'non-shared' and
             self.world.files(DEST, uuid))) if there]
        if left:
            self._break('released-last', 'released while %s is left on %s' %
                        (' and '.join(left), DEST))

    def _check_junk(self):
        """The foreign files in compute1's journal are all still there."""
        if os.environ.get('EXPLORE_NO_JUNK'):
            return
        for name in sorted(JUNK):
            if not os.path.lexists(os.path.join(self._journal_dir(), name)):
                self._break('bystanders', 'the foreign journal file %s is '
                            'gone' % name)

    def _journal_dir(self):
        return os.path.join(CONF.evacuate_cleanup.journal_path, DEST)

    def _put_junk(self):
        """Foreign files a journal directory may hold: none may matter."""
        directory = self._journal_dir()
        os.makedirs(directory, exist_ok=True)
        for name, content in sorted(JUNK.items()):
            path = os.path.join(directory, name)
            if content is None:
                os.mkdir(path)
            else:
                with open(path, 'w') as stream:
                    stream.write(content)

    def _check_split_brain(self):
        server = self.api.get_server(self.target['id'])
        running = [h for h in (SOURCE, DEST, OTHER)
                   if self.world.domain_state(h, server['id']) == 'running']
        if set(running) - {server['OS-EXT-SRV-ATTR:host']}:
            self._break('split-brain', 'running on %s, recorded on %s' % (
                ', '.join(running), server['OS-EXT-SRV-ATTR:host']))

    def _check_fault(self, cell, server):
        if server['status'] != 'ERROR' or cell.scenario in RECOVERY:
            return
        fired = self.tracer.fired.get(cell.fault)
        spawn_failed = self.tracer.index_of(
            ('evacuate', 'driver.spawn:wait_for_boot', 1))
        if cell.scenario in ('spawn-fails', GIVEBACK) and (
                fired is None or spawn_failed is not None and
                fired > spawn_failed):
            expected = 'FakeLibvirtError'
        elif fired is not None and cell.fault.kind == tracing.RAISE:
            expected = 'InjectedFault'
        else:
            return
        message = (server.get('fault') or {}).get('message', '')
        # nova records an error's class name, or its own words for some
        # paths (the volumes' among them): the injected error's own.
        own = '%s #%d raised on %s' % (cell.fault.name, cell.fault.occurrence,
                                       DEST) if fired is not None else None
        if expected not in message and message != own:
            self._break('fault', 'fault %r, not the original %s' % (
                message, expected))

    def _check_bystanders(self):
        if self._server_state(self.stays) != self.stays_state:
            self._break('bystanders', 'the server left on %s changed: %s' % (
                SOURCE, self._server_state(self.stays)))
        if self._server_state(self.local) != self.local_state:
            self._break('bystanders', 'the server on %s changed: %s' % (
                DEST, self._server_state(self.local)))
        if self._disk(self.local) != self.before[self.local['id']]:
            self._break('bystanders', 'the disk of the server on %s '
                        'changed' % DEST)
        moved = self._server_state(self.moves)
        if moved[:3] != ('ACTIVE', OTHER, None):
            self._break('bystanders', 'the other evacuation ended %s' %
                        (moved,))
        if self.STORAGE in ('shared', 'rbd') and (
                self._disk(self.api.get_server(self.moves['id'])) !=
                self.before[self.moves['id']]):
            self._break('bystanders', 'the disk of the other evacuation '
                        'changed')

    def _ha_retry(self, cell):
        """Evacuate the target to compute1 again, at most twice."""
        uuid = self.target['id']
        server = self.api.get_server(uuid)
        if server['OS-EXT-SRV-ATTR:host'] == DEST and (
                server['status'] == 'ERROR'):
            # It lives on compute1 already, in ERROR: what an HA tool does
            # with a server in ERROR on a live host is a hard reboot.
            self.api.post_server_action(uuid, {'reboot': {'type': 'HARD'}})
            server = self._wait_for_state_change(server, 'ACTIVE')
        attempts = 0
        while server['OS-EXT-SRV-ATTR:host'] != DEST or (
                server['status'] != 'ACTIVE'):
            if attempts == 2:
                self._break('retry', 'still %s on %s after two retries: %s'
                            % (server['status'],
                               server['OS-EXT-SRV-ATTR:host'],
                               (server.get('fault') or {}).get('message')))
                return
            attempts += 1
            before = {m.uuid for m in self._migrations(uuid)}
            try:
                self.api.post_server_action(uuid,
                                            {'evacuate': {'host': DEST}})
            except api_client.OpenStackApiException as error:
                self._break('retry', 'evacuate refused: %s' % error)
                return
            self._wait(lambda: [m for m in self._migrations(uuid)
                                if m.uuid not in before and m.status in (
                                    'done', 'failed', 'error')],
                       lambda: 'the retry (migrations: %s)' % ', '.join(
                           '%s %s' % (m.migration_type, m.status)
                           for m in self._migrations(uuid)))
            self._wait(lambda: self.api.get_server(uuid)[
                'OS-EXT-STS:task_state'] is None, 'the retry to end')
            server = self.api.get_server(uuid)
        generation = self.world.disk_generation(DEST, uuid)
        if boot_from_volume():
            # No local disk: the root disk is a volume.
            if generation is not None:
                self._break('retry', 'a local root disk on %s' % DEST)
        elif self.STORAGE == 'non-shared':
            latest = [r for r in self.world.spawns(DEST, uuid)
                      if r.succeeded]
            if not latest or generation != latest[-1].generation or (
                    not self.world.disk_is_complete(DEST, uuid)):
                self._break('retry', 'ACTIVE on a stale disk (generation '
                            '%s)' % generation)
        elif self.world.disk_checksum(DEST, uuid) != self.before[uuid]:
            self._break('retry', 'ACTIVE, not on the user\'s own disk')


class _HostOfCaller(object):
    """CONF, whose ``host`` is the one of the compute on the call stack."""

    def __init__(self, conf):
        self._conf = conf

    def __getattr__(self, name):
        if name == 'host':
            frame = sys._getframe(1)
            try:
                while frame is not None:
                    for local in ('self', 'manager'):
                        owner = frame.f_locals.get(local)
                        if isinstance(owner, nova_manager.ComputeManager):
                            return owner.host
                    frame = frame.f_back
            finally:
                del frame
        return getattr(self._conf, name)


def connection_key(connection_info):
    """What names one host's connection: the target and the LUN."""
    data = (connection_info or {}).get('data') or {}
    return (data.get('target_iqn') or data.get('name'),
            data.get('target_lun'))


def _lun(connection_info):
    if isinstance(connection_info, str):
        connection_info = json.loads(connection_info)
    return ((connection_info or {}).get('data') or {}).get('target_lun')


def _on_stack(code):
    """Whether ``code`` runs on the caller's stack."""
    frame = sys._getframe(2)
    try:
        while frame is not None:
            if frame.f_code is code:
                return True
            frame = frame.f_back
        return False
    finally:
        del frame


def case_class(storage, nova=FIXED):
    return type('Explore_%s%s' % (storage.replace('-', '_'), '' if nova ==
                                  FIXED else '_stock'), (ExploreCase,),
                {'STORAGE': storage, 'FIXED': nova == FIXED})


def run_cell(cell):
    """Run one cell in this process.

    :returns: ``(outcome, broken, points, error)``: ``outcome`` is
        ``held``, the broken invariants, or ``error`` when the scenario
        itself failed (then ``error`` says why)
    """
    import testtools

    cls = case_class(cell.storage, cell.nova)
    cls.CELL = cell
    case = cls('runTest')
    result = testtools.TestResult()
    case.run(result)
    problems = result.errors + result.failures
    if problems:
        return ('error', [], list(getattr(case, '_points_seen', [])),
                problems[0][1].strip().splitlines()[-1][:300])
    if not hasattr(case, '_ran'):
        return ('error', [], [], 'the scenario did not run: %s' % (
            result.skip_reasons or result))
    outcome, broken, points = case._ran
    return outcome, broken, points, None
