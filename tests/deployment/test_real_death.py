# SPDX-License-Identifier: Apache-2.0

"""Scenario 6: real death at the explorer's points.

The fault-point explorer kills its in-process destination by raising an
exception no handler catches; here the destination's real nova-compute
sends itself SIGKILL right after the N-th call of a point
(:mod:`tests.deployment.tier.deathpoint`), in the evacuation of a fresh
server, and the invariants are checked on the real services.

One *cell*: a binary (stock ``nova-compute`` or
``nova-compute-evac-cleanup``, on both hosts), a storage (non-shared, or
RBD: ``images_type = rbd``), a point ``NAME#N``, a death (``process``:
nova-compute alone; ``host``: with it libvirtd, every QEMU, OVS and
ovn-controller, as the tier's host crash) and a restart order
(``dest-first``, ``source-first``):

1. evac-a boots a server with a port and a data volume (cinder, RBD) and
   crashes (forced down, as evacuate requires);
2. the server is evacuated to evac-b, whose nova-compute dies right
   after the point's call returned;
3. both hosts come back, in the cell's order, and the invariants of
   :data:`INVARIANTS` are checked on nova, placement, libvirt, the
   instance directories, Ceph, neutron, OVN and cinder;
4. an HA retry: evac-a crashes again and the server is evacuated to
   evac-b again (a hard reboot if it is already recorded there, in
   ERROR or its guest not running), at most twice: it must end ACTIVE
   there, its guest running, on a disk the retry
   made (non-shared) or on the server's own RBD image; then evac-a comes
   back and the last checks run.

``tox -e deployment`` runs :data:`CI_CELLS` (fixed only). The table:
``EVAC_DEATH_CELLS=table tox -e deployment -- test_real_death`` runs
:data:`TABLE_CELLS`, stock beside fixed, and writes
``$EVAC_DEATH_RESULTS`` (default ``death-results.txt`` in the working
directory); one cell: ``EVAC_DEATH_CELLS='fixed rbd driver.spawn#1 host
source-first' tox -e deployment -- test_real_death``.
"""

import atexit
import datetime
import json
import os
import re
import signal
import sys
import time
import unittest

from tests.deployment import base
from tests.deployment.tier import hypervisor
from tests.deployment.tier import observe

SRC = base.SRC
DST = base.DST
ORDERS = ('dest-first', 'source-first')
DEATHS = ('process', 'host')
STORAGES = {'non-shared': {}, 'rbd': {'rbd': True}}
BINARIES = {'stock': base.STOCK, 'fixed': base.FIXED}

INVARIANTS = (
    ('stuck', 'no task state left set; the evacuation done, failed or '
              'error'),
    ('orphaned', 'nothing on evac-b unless the server lives there: '
                 'domain, QEMU process, instance directory (non-shared) or '
                 'local disk (RBD), allocation; where it lives, its '
                 'allocation'),
    ('split-brain', 'a running guest only on the host the database names'),
    ('data', "RBD: the server's image is the one it booted with, never "
             "more than one live watcher"),
    ('ports', "the port bound to the server's host; OVN's Port_Binding "
              "on no chassis or that host's"),
    ('volumes', "one attachment, its connector (if any) the server's "
                "host; never more than one live RBD watcher"),
    ('retry', 'an HA retry to evac-b (at most twice; a hard reboot if it '
              'is recorded there already, in ERROR or its guest not '
              'running) ends ACTIVE, its guest running there, on a '
              'disk it made (non-shared) or the server\'s own RBD image, '
              'and, evac-a back, its port ACTIVE on evac-b and its volume '
              'attached there'),
)


class Cell(object):
    """One real death: binary, storage, point, death, restart order."""

    def __init__(self, binary, storage, point, death, order):
        self.binary = binary
        self.storage = storage
        self.name, n = point.rsplit('#', 1)
        self.n = int(n)
        self.death = death
        self.order = order

    @property
    def point(self):
        return '%s#%d' % (self.name, self.n)

    def __str__(self):
        return '%s %s %s %s %s' % (self.binary, self.storage, self.point,
                                   self.death, self.order)

    def test_name(self):
        return 'test_' + re.sub(r'[^0-9a-zA-Z]+', '_', str(self)).strip('_')

    @classmethod
    def parse(cls, text):
        return cls(*text.split())


def _cells(binaries, storages, points, deaths, orders):
    return [Cell(b, s, p, d, o) for s in storages for p in points
            for d in deaths for o in orders for b in binaries]


#: What ``tox -e deployment`` runs: fixed only, each of the table's points
#: on both storages with both deaths and both orders, none twice (the
#: source first at a point before the evacuation ends: F1), and the
#: walk's F2 (a volume left ``attaching``), by storage so that the
#: computes restart for a new storage once.
CI_CELLS = [Cell.parse('fixed ' + text) for text in (
    'non-shared volume.attachment_update#1 process source-first',
    'non-shared driver.spawn#1 process dest-first',
    'non-shared network.setup_instance_network_on_host#1 host dest-first',
    'non-shared Migration.save#2 host dest-first',
    'non-shared Migration.save#2 process source-first',
    'rbd driver.spawn#1 host dest-first',
    'rbd network.setup_instance_network_on_host#1 process source-first',
    'rbd Migration.save#2 host source-first',
    'rbd Migration.save#2 process dest-first')]

#: The table: three points x both storages x both deaths x both orders,
#: stock beside fixed (48 runs, 24 rows).
TABLE_POINTS = ('network.setup_instance_network_on_host#1',
                'driver.spawn#1', 'Migration.save#2')
TABLE_CELLS = _cells(['stock', 'fixed'], list(STORAGES), TABLE_POINTS,
                     DEATHS, ORDERS)

RESULTS = []

#: How long the fixed source's give-back may take after both hosts are
#: back: its periodic try comes once a minute (giveback.SPACING), the
#: first at its start.
GIVEBACK_WAIT = 75

#: How long a point may still fire once the evacuation looks ended: the
#: hook reads its arm right after the call returned, in the same thread.
ENDED_GRACE = 10


def _selected():
    wanted = os.environ.get('EVAC_DEATH_CELLS', '').strip()
    if not wanted:
        return CI_CELLS
    if wanted == 'table':
        return TABLE_CELLS
    return [Cell.parse(text) for text in wanted.split(',')]


def _write_results(announce=True):
    """Write the cells run so far; after each cell, and at exit.

    A run killed between cells (a CI timeout) keeps what it had.
    """
    if not RESULTS:
        return
    path = os.environ.get('EVAC_DEATH_RESULTS',
                          os.path.abspath('death-results.txt'))
    with open(path + '.json', 'w') as f:
        json.dump(RESULTS, f, indent=1)
    with open(path, 'w') as f:
        f.write(results_text(RESULTS))
    if announce:
        sys.__stderr__.write('\n%s\nreal-death results written to %s\n'
                             % (results_text(RESULTS), path))


def results_text(results):
    """The cells as a table: a row per cell, stock beside fixed."""
    rows = {}
    order = []
    for r in results:
        key = (r['storage'], r['point'], r['death'], r['order'])
        if key not in rows:
            rows[key] = {}
            order.append(key)
        rows[key][r['binary']] = r
    header = ['storage', 'point', 'death', 'restart', 'fixed', 'stock']
    lines = [header]
    for key in order:
        cells = []
        for binary in ('fixed', 'stock'):
            r = rows[key].get(binary)
            cells.append('not run' if r is None else '%s (%ds)' % (
                r['outcome'], r['seconds']))
        lines.append(list(key) + cells)
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]

    def rule(char):
        return '+' + '+'.join(char * (w + 2) for w in widths) + '+'

    out = [rule('-')]
    for number, line in enumerate(lines):
        out.append('| ' + ' | '.join(
            text.ljust(w) for text, w in zip(line, widths)) + ' |')
        out.append(rule('=' if number == 0 else '-'))
    out.append('')
    for r in results:
        if r['broken'] or r['notes']:
            out.append('* %s %s %s %s %s:' % (
                r['binary'], r['storage'], r['point'], r['death'],
                r['order']))
            for invariant, detail in r['broken']:
                out.append('    broke %s: %s' % (invariant, detail))
            for note in r['notes']:
                out.append('    %s' % note)
    return '\n'.join(out) + '\n'


atexit.register(_write_results)


class TestRealDeath(base.DeploymentTestCase):
    """One test per cell of :func:`_selected`."""

    def _cell(self, cell):
        t0 = time.monotonic()
        d = self.d
        conf = dict(STORAGES[cell.storage])
        binary = BINARIES[cell.binary]
        self.cell = cell
        self.broken = []
        self.notes = []
        self.hosts_up(evac_a=dict(conf, binary=binary),
                      evac_b=dict(conf, binary=binary, death=True))
        d.arm_death(DST)
        port = d.neutron.create_port(self.id()[-20:])
        self.addCleanup(d.neutron.delete_port, port['id'])
        volume = d.cinder.create_volume('data')
        self.addCleanup(self._delete_volume, volume['id'])
        d.cinder.wait_volume(volume['id'], ('available',))
        self.port, self.volume = port['id'], volume['id']
        server = self.boot(SRC, ports=[self.port], volumes=[self.volume])
        sid = self.sid = server['id']
        self.image = self._rbd_image() if conf.get('rbd') else None
        # evac-a's QEMU dies with it: its watches are a dead host's.
        self.dead_watchers = set(self._watchers())
        self.crash_source()

        d.arm_death(DST, 'evacuate', cell.name, cell.n, key=sid)
        d.compute.evacuate(sid, DST)
        fired = self._wait_death()
        d.arm_death(DST)
        if fired is None:
            self.notes.append('the point was not reached: the evacuation '
                              'ended %s' % self.state())
        else:
            # seq numbers every point the process recorded, in any root.
            self.notes.append('died after %s#%d (point %d of the '
                              'process): %s' % (
                                  fired['name'], fired['n'], fired['seq'],
                                  self.state()))
            if cell.death == 'host':
                d.crash_host(DST)
                self.dead_watchers |= set(self._watchers())
            else:
                d.stop_compute(DST, signal.SIGKILL)

        up = dict(conf, binary=binary, death=True)
        if cell.order == 'dest-first':
            self.host_up(DST, **up)
            self.host_up(SRC, binary=binary, **conf)
        else:
            self.host_up(SRC, binary=binary, **conf)
            self.host_up(DST, **up)
        self._settle()
        if cell.binary == 'fixed':
            self._wait_given_back()
        self.notes.append('after both restarted: %s' % self.state())
        self._check('after both restarted')

        self._retry(conf, binary)
        self._settle()
        self._check('after the retry, evac-a back', retry=True)
        outcome = ', '.join(sorted({i for i, _ in self.broken})) or 'held'
        if fired is None:
            outcome = 'not reached; ' + outcome
        RESULTS.append({
            'binary': cell.binary, 'storage': cell.storage,
            'point': cell.point, 'death': cell.death, 'order': cell.order,
            'outcome': outcome, 'broken': self.broken, 'notes': self.notes,
            'fired': fired, 'seconds': round(time.monotonic() - t0),
            'date': datetime.datetime.now().isoformat(timespec='seconds'),
            # The points of the evacuation that died (or of the only one).
            'points': [(p['name'], p['n'], p['raised']) for p in
                       d.death_points(DST, 'evacuate', sid)
                       if fired is None or p['pid'] == fired['pid']],
        })
        _write_results(announce=False)
        d.progress('real death %s: %s (%ds)', cell, outcome,
                   time.monotonic() - t0)
        return outcome

    def _run(self, cell):
        outcome = self._cell(cell)
        if cell.binary == 'fixed':
            # Stock's cells are recorded: they show what the fix changes.
            self.assertEqual('held', outcome, '\n'.join(
                '%s: %s' % item for item in self.broken))

    # Steps.

    def _delete_volume(self, volume_id):
        d = self.d
        d.cinder.wait_volume(volume_id, ('available', 'error'))
        d.cinder.delete_volume(volume_id)

    def _wait_death(self, timeout=180):
        """The point the destination died at; None if the evacuation ended.

        Waits for the process to be gone: the point is written before
        the SIGKILL.
        """
        d = self.d
        svc = d.compute_service(DST)

        def ended():
            fired = d.death_fired(DST)
            if fired is not None:
                return not svc.running and fired
            migs = d.compute.evacuations(self.sid)
            server = d.compute.server(self.sid)
            return (migs and migs[-1]['status'] in (
                'done', 'completed', 'failed', 'error') and
                server.get('OS-EXT-STS:task_state') is None and 'ended')

        result = hypervisor.wait_for(ended, timeout, 'the death of %s\'s '
                                     'nova-compute or the evacuation\'s end'
                                     % DST, interval=0.2)
        if result != 'ended':
            return result
        # The point can be the write that ends the evacuation
        # (Migration.save#2): the database says it ended a moment before
        # the hook, right after that call returned, reads its arm and
        # fires. Disarmed in that moment, it never fired (T5): give it
        # ENDED_GRACE before calling the point not reached.
        try:
            return hypervisor.wait_for(
                lambda: not svc.running and d.death_fired(DST),
                ENDED_GRACE, 'the death after the evacuation\'s last write',
                interval=0.2)
        except hypervisor.Timeout:
            return None

    def _settle(self, timeout=30):
        """Wait for the server's task state to clear, at most ``timeout``.

        Stock nova leaves an interrupted evacuation's task state for ever:
        the check then says so.
        """
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.d.compute.server(self.sid).get(
                    'OS-EXT-STS:task_state') is None:
                break
            time.sleep(0.5)

    def _wait_given_back(self, timeout=GIVEBACK_WAIT):
        """Wait, at most ``timeout``, for the port and volume to follow.

        The fixed source gives a failed evacuation's server back its port
        and volume as it starts and then once a minute: started before the
        destination ended the evacuation (``source-first``), its next try
        is up to a minute away. Stock nova has no such step: not waited
        for. The checks that follow are the same either way.
        """
        d = self.d

        def back():
            host = d.compute.server(self.sid)['OS-EXT-SRV-ATTR:host']
            port = observe.port(d, self.port)
            atts = observe.volume(d, self.volume)['attachments']
            return (port['host'] == host and
                    port['chassis'] in (None, host) and len(atts) == 1 and
                    atts[0]['connector'] in (None, host))

        t0 = time.monotonic()
        try:
            hypervisor.wait_for(back, timeout, 'the port and volume on the '
                                'server\'s host', interval=2)
        except hypervisor.Timeout:
            self.notes.append('port and volume not on the server\'s host '
                              'after %ds' % timeout)
            return
        waited = time.monotonic() - t0
        if waited > 5:
            self.notes.append('port and volume on the server\'s host after '
                              '%ds (the periodic give-back)' % waited)

    def _retry(self, conf, binary):
        """An HA tool's retry of the evacuation to evac-b, then evac-a back.

        At most twice; a server already recorded on evac-b in ERROR is
        hard-rebooted instead.
        """
        d = self.d
        sid = self.sid
        self.before_retry = self._dst_disk()
        server = d.compute.server(sid)
        # Recorded on evac-b but not running there: in ERROR, or ACTIVE
        # in nova while its guest died with evac-b (a host death after
        # the evacuation ended), which nova sees only at its next power
        # state sync.
        if server['OS-EXT-SRV-ATTR:host'] == DST and (
                server['status'] == 'ERROR' or
                observe.guests(d, sid).get(DST) != 'running'):
            d.compute.server_action(sid, 'reboot', {'type': 'HARD'})
            server = self._wait_server()
            self.notes.append('retry: hard reboot on evac-b: %s' %
                              self.state())
        else:
            self.crash_source()
        attempts = 0
        self.retried = False
        while server['OS-EXT-SRV-ATTR:host'] != DST or (
                server['status'] != 'ACTIVE'):
            if attempts == 2:
                self._break('retry', 'still %s on %s after two retries: %s'
                            % (server['status'],
                               server['OS-EXT-SRV-ATTR:host'],
                               (server.get('fault') or {}).get('message')))
                break
            attempts += 1
            self.retried = True
            count = len(d.compute.evacuations(sid)) + 1
            try:
                d.compute.evacuate(sid, DST)
            except Exception as e:
                self._break('retry', 'evacuate refused: %s' % e)
                break
            try:
                d.compute.wait_evacuation(
                    sid, ('done', 'completed', 'failed', 'error'), count,
                    timeout=180)
            except Exception as e:
                self._break('retry', 'the retry did not end: %s' % e)
                break
            server = self._wait_server()
            self.notes.append('retry %d: %s' % (attempts, self.state()))
        self.host_up(SRC, binary=binary, **conf)
        if self._broken_now('retry'):
            return
        # The server's port: ACTIVE on evac-b once OVN claims it.
        try:
            hypervisor.wait_for(
                lambda: observe.port(d, self.port)['status'] == 'ACTIVE',
                60, 'the port ACTIVE', interval=1)
        except hypervisor.Timeout:
            pass

    def _wait_server(self):
        try:
            return self.d.compute.wait_server(self.sid, ('ACTIVE', 'ERROR'),
                                              timeout=180)
        except Exception:
            return self.d.compute.server(self.sid)

    # Looking.

    def state(self):
        return base.DeploymentTestCase.state(self, self.sid)

    def _rbd_image(self):
        """The id of the server's RBD disk, or None."""
        try:
            info = json.loads(self.d.ceph.rbd(
                'info', '--format', 'json', 'vms/%s_disk' % self.sid))
        except RuntimeError:
            return None
        return info.get('id') or info.get('block_name_prefix')

    def _watchers(self):
        d = self.d
        found = d.ceph.watchers('volumes', 'volume-%s' % self.volume)
        disk = observe.rbd_disk(d, self.sid)
        return found + (disk or [])

    def _dst_disk(self):
        """(inode, mtime) of the server's disk file on evac-b, or None."""
        path = os.path.join(self.d.instances_path(DST), self.sid, 'disk')
        try:
            st = os.stat(path)
        except FileNotFoundError:
            return None
        return (st.st_ino, st.st_mtime_ns)

    def _qemu_of(self, host):
        """The QEMU processes of this server on ``host``."""
        found = []
        for pid in self.d.hosts[host].qemu_pids():
            try:
                with open('/proc/%d/cmdline' % pid, 'rb') as f:
                    if self.sid.encode() in f.read():
                        found.append(pid)
            except OSError:
                continue
        return found

    def _break(self, invariant, detail):
        self.broken.append((invariant, detail))

    def _broken_now(self, invariant):
        return any(i == invariant for i, _ in self.broken)

    # The invariants.

    def _check(self, when, retry=False):
        d = self.d
        sid = self.sid
        server = d.compute.server(sid)
        host = server['OS-EXT-SRV-ATTR:host']
        rbd = self.cell.storage == 'rbd'

        def broke(invariant, detail):
            self._break(invariant, '%s: %s' % (when, detail))

        if server.get('OS-EXT-STS:task_state') is not None:
            broke('stuck', 'task state %s' % server['OS-EXT-STS:task_state'])
        migs = d.compute.evacuations(sid)
        busy = [m['status'] for m in migs if m['status'] not in (
            'done', 'completed', 'failed', 'error')]
        if busy:
            broke('stuck', 'evacuation %s' % busy[-1])

        allocations = d.placement.allocations(sid)
        guests = observe.guests(d, sid)
        if host != DST:
            if guests.get(DST) not in (None, 'host down'):
                broke('orphaned', 'a %s domain on %s' % (guests[DST], DST))
            if self._qemu_of(DST):
                broke('orphaned', 'a QEMU process on %s' % DST)
            files = observe.files(d, sid).get(DST)
            if files is not None and not rbd:
                broke('orphaned', 'instance directory on %s: %s' % (
                    DST, ', '.join(files) or 'empty'))
            if rbd and files and [f for f in files if 'disk' in f]:
                broke('orphaned', 'a local disk on %s: %s' % (
                    DST, ', '.join(files)))
            if DST in allocations:
                broke('orphaned', 'an allocation against %s' % DST)
        if host not in allocations:
            broke('orphaned', 'no allocation against %s, where it lives' %
                  host)
        running = [h for h, s in guests.items() if s == 'running']
        if set(running) - {host}:
            broke('split-brain', 'running on %s, recorded on %s' % (
                ', '.join(running), host))

        if rbd:
            image = self._rbd_image()
            if image != self.image:
                broke('data', 'the server\'s RBD image %s' % (
                    'is gone' if image is None else 'was made again'))
            disk = observe.rbd_disk(d, sid) or []
            live = observe.live_watchers(disk, self.dead_watchers)
            if len(live) > 1:
                broke('data', '%d live watchers of the RBD disk' %
                      len(live))

        port = observe.port(d, self.port)
        if port['host'] != host:
            broke('ports', 'bound to %s, the server on %s (%s)' % (
                port['host'], host, observe.port_text(port)))
        if port['chassis'] not in (None, host):
            broke('ports', 'OVN Port_Binding on chassis %s, the server on '
                  '%s' % (port['chassis'], host))

        vol = observe.volume(d, self.volume)
        atts = vol['attachments']
        if len(atts) != 1:
            broke('volumes', '%d attachments: %s' % (
                len(atts), observe.volume_text(vol, self.dead_watchers)))
        for att in atts:
            if att['connector'] not in (None, host):
                broke('volumes', 'an attachment connected for %s, the '
                      'server on %s' % (att['connector'], host))
        live = observe.live_watchers(vol['watchers'], self.dead_watchers)
        if len(live) > 1:
            broke('volumes', '%d live watchers of the volume' % len(live))

        if not retry:
            return
        if host != DST or server['status'] != 'ACTIVE':
            if not self._broken_now('retry'):
                broke('retry', '%s on %s' % (server['status'], host))
            return
        if guests.get(DST) != 'running':
            broke('retry', 'ACTIVE in nova, its guest on %s %s' % (
                DST, guests.get(DST) or 'undefined'))
        if not rbd and self.retried:
            disk = self._dst_disk()
            if disk is None or (self.before_retry is not None and
                                disk[0] == self.before_retry[0]):
                broke('retry', 'ACTIVE on a disk it did not make: %s' % (
                    'none' if disk is None else 'the one left before'))
        if port['status'] != 'ACTIVE' or port['chassis'] != DST:
            broke('retry', 'the port %s' % observe.port_text(port))
        if [a for a in atts if a['connector'] != DST or
                a['status'] != 'attached']:
            broke('retry', 'the volume %s' % observe.volume_text(
                vol, self.dead_watchers))


def load_tests(loader, standard_tests, pattern):
    """A test per selected cell (``EVAC_DEATH_CELLS``)."""
    suite = unittest.TestSuite(standard_tests)
    for cell in _selected():
        name = cell.test_name()
        if not hasattr(TestRealDeath, name):
            setattr(TestRealDeath, name,
                    lambda self, cell=cell: self._run(cell))
        suite.addTest(TestRealDeath(name))
    return suite
