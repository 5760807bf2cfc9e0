# SPDX-License-Identifier: Apache-2.0

"""Scenario 5: the half-moved server, as neutron, OVN, cinder and Ceph see it.

What a failed evacuation leaves of a server's ports and volumes, on real
neutron (ML2/OVN), cinder (RBD) and Ceph, on local, shared-directory and
RBD storage, stock ``nova-compute`` against ``nova-compute-evac-cleanup``
on the destination.

evac-a runs two servers as users boot them, each with a port on a real
network: ``x`` from the image (its disk on the storage under test) with a
data volume attached, and ``y`` booted from a volume. evac-a dies (its
nova-compute, libvirtd, QEMU, ovs-vswitchd and ovn-controller killed; the
service forced down). Both are evacuated to evac-b, whose serial console
ports are all taken (a real cause): each spawn fails in
``_get_guest_xml``, after nova has bound the ports to evac-b and replaced
the volume attachments by evac-b's. Then, as in production:

* an HA retry of ``x`` to evac-c, with evac-a still down;
* evac-a comes back, running the nova-compute under test, and ``y`` is
  started there again (a hard reboot, which nova allows on an ERROR
  server).

After each step the test records, per server: neutron's view of its port,
OVN's Port_Binding, cinder's view of each volume, Ceph's watchers of each
RBD image, libvirt's domains and the instance directories on each host,
and placement's allocations (:mod:`tests.deployment.tier.observe`).

The test asserts what the project's rules promise: no data lost (the
volumes and the RBD disk intact, never a second writer on an RBD image),
no leftover on evac-b that the fix promises to remove, and, fixed, ``y``'s
port given back: bound to evac-a as its nova-compute starts, claimed by
evac-a's chassis and ACTIVE once ``y`` runs there, and ``y``'s boot
volume connected for evac-a again, in use there after the reboot; ``x``
keeps its data volume on evac-c. Stock leaves the port bound to evac-b,
DOWN. With shared storage the fixed evac-a starts its ovn-controller
after its nova-compute, as a rebooted host may: neutron refuses the
binding at first, and the manager's periodic give-back binds it once the
agent is alive. The rest is recorded.
"""

import re

from tests.deployment import base
from tests.deployment.tier import hypervisor
from tests.deployment.tier import observe

SCENARIO = ('5. The half-moved server: ports, volumes and RBD after a '
            'failed evacuation to evac-b (serial console ports taken: a '
            'real cause), an HA retry to evac-c, and evac-a back')
STORAGE = {
    'local': ('local storage', {}),
    'shared': ('shared instance directory', {'shared': True}),
    'rbd': ('RBD (images_type = rbd)', {'rbd': True}),
}
C = 'evac-c'


def bound_to(port, host):
    """Whether neutron has ``port`` bound to ``host`` with a working vif."""
    return port['host'] == host and port['vif_type'] not in (
        'binding_failed', 'unbound')


class TestHalfMovedServer(base.DeploymentTestCase):

    def _resources(self):
        """x's port and data volume, y's port and boot volume."""
        d = self.d
        ports = {}
        for name in ('x', 'y'):
            port = d.neutron.create_port('%s-%s' % (self.id()[-12:], name))
            self.addCleanup(d.neutron.delete_port, port['id'])
            ports[name] = port['id']
        data = d.cinder.create_volume('data')
        root = d.cinder.create_volume('root', image_id=d.image_id)
        for vol in (data, root):
            self.addCleanup(self.delete_volume, vol['id'])
        for vol in (data, root):
            d.cinder.wait_volume(vol['id'], ('available',))
        return ports, {'x': data['id'], 'y': root['id']}

    def delete_volume(self, volume_id):
        d = self.d
        d.cinder.wait_volume(volume_id, ('available', 'error'))
        d.cinder.delete_volume(volume_id)

    def _view(self, sid, port_id, volume_id):
        d = self.d
        server = d.compute.server(sid)
        view = {
            'server': '%s on %s' % (server['status'],
                                    server['OS-EXT-SRV-ATTR:host']),
            'port': observe.port(d, port_id),
            'volume': observe.volume(d, volume_id),
            'disk': observe.rbd_disk(d, sid),
            'guests': observe.guests(d, sid),
            'files': observe.files(d, sid),
            'allocations': observe.allocations(d, sid),
        }
        return view

    def _facts(self, step, name, view, facts):
        prefix = '%s, %s: ' % (step, name)
        facts[prefix + 'server'] = view['server']
        facts[prefix + 'port'] = observe.port_text(view['port'])
        facts[prefix + ('boot volume' if name == 'y' else 'data volume')] = (
            observe.volume_text(view['volume'], self.dead_watchers))
        if view['disk'] is not None:
            facts[prefix + 'RBD disk'] = 'watchers: %s' % (
                observe.watchers_text(view['disk'], self.dead_watchers))
        facts[prefix + 'domains'] = ', '.join(
            '%s %s' % item for item in sorted(view['guests'].items())
            if item[1] != 'host down') or 'none'
        facts[prefix + 'instance dirs'] = '; '.join(
            '%s: %s' % (host, ', '.join(names) or 'empty')
            for host, names in sorted(view['files'].items())) or 'none'
        facts[prefix + 'allocations'] = ', '.join(
            view['allocations']) or 'none'

    def _no_second_writer(self, view):
        """Never two live clients on one RBD image; the volume is intact.

        The watch of a QEMU that died with its host lingers until the OSD
        times it out: it is no writer.
        """
        self.assertLessEqual(len(observe.live_watchers(
            view['volume']['watchers'], self.dead_watchers)), 1, view)
        self.assertNotIn(view['volume']['status'], ('error', 'deleting'),
                         view)
        if view['disk'] is not None:
            self.assertLessEqual(len(observe.live_watchers(
                view['disk'], self.dead_watchers)), 1, view)

    def _test(self, binary, storage):
        d = self.d
        label, conf = STORAGE[storage]
        serial = d.free_port_range(2, base.DST)
        self.hosts_up(evac_a=dict(conf), evac_b=dict(
            conf, binary=binary, serial_ports=serial), evac_c=dict(conf))
        ports, volumes = self._resources()
        x, y = [server['id'] for server in self.boot_all(base.SRC, {
            'x': dict(ports=[ports['x']], volumes=[volumes['x']]),
            'y': dict(ports=[ports['y']], boot_volume=volumes['y'])})]
        servers = {'x': x, 'y': y}
        facts = {}
        views = {}

        def look(step):
            views[step] = {}
            for name, sid in servers.items():
                view = self._view(sid, ports[name], volumes[name])
                views[step][name] = view
                self._facts(step, name, view, facts)
                self._no_second_writer(view)

        self.dead_watchers = ()
        look('0 booted')
        disk_before = views['0 booted']['x']['disk']
        # evac-a's QEMUs die with it: their watches are a dead host's.
        self.dead_watchers = set(disk_before or ()).union(*(
            v['volume']['watchers'] for v in views['0 booted'].values()))
        self.crash_source()
        self.hold_ports(serial)
        offset = self.log_offset(base.DST)
        for server, migration in self.evacuate_all(
                list(servers.values()), base.DST,
                'two evacuations that fail after the ports and volumes '
                'moved, API calls to ERROR (%s)' % base.MODES[binary]):
            self.assertEqual('failed', migration['status'])
            self.assertEqual('ERROR', server['status'])
            self.assertEqual(base.SRC, server['OS-EXT-SRV-ATTR:host'])
        # Meta-test: the real cause failed both spawns.
        log = self.log_since(base.DST, offset)
        for sid in servers.values():
            self.assertTrue(re.search(
                r'instance: %s\].*SocketPortRangeExhaustedException' % sid,
                log), sid)
        look('1 failed to evac-b')

        retried, _ = self.evacuate(x, C, 'evacuation (API call to ACTIVE)')
        self.assertEqual('ACTIVE', retried['status'], retried.get('fault'))
        self.assertEqual(C, retried['OS-EXT-SRV-ATTR:host'])
        look('2 x retried to evac-c')

        # Fixed on shared storage: evac-a's ovn-controller starts after its
        # nova-compute, as after a host's reboot where it comes up late.
        late = binary == base.FIXED and storage == 'shared'
        self.host_up(base.SRC, binary=binary, late_controller=late, **conf)
        if late:
            facts['3 evac-a back, y hard-rebooted there: y\'s port as '
                  'evac-a\'s nova-compute started, ovn-controller down'] = (
                observe.port_text(observe.port(d, ports['y'])))
            d.chassis[base.SRC].start_controller()
            d.chassis[base.SRC].wait_registered()
            # The manager's periodic give-back binds it once the agent is
            # alive in neutron.
            hypervisor.wait_for(
                lambda: bound_to(observe.port(d, ports['y']), base.SRC),
                180, "y's port bound to evac-a with a working vif type",
                interval=2)
        d.compute.server_action(y, 'reboot', {'type': 'HARD'})
        rebooted = d.compute.wait_server(y, ('ACTIVE', 'ERROR'),
                                         timeout=180)
        if binary == base.FIXED:
            # evac-a's ovn-controller claims the port once y's tap is up.
            hypervisor.wait_for(
                lambda: observe.port(d, ports['y'])['status'] == 'ACTIVE',
                60, "y's port ACTIVE on evac-a", interval=1)
        look('3 evac-a back, y hard-rebooted there')
        facts['3 evac-a back, y hard-rebooted there: y after the reboot'] = (
            '%s%s' % (rebooted['status'], ': %s' % (
                rebooted.get('fault') or {}).get('message')
                if rebooted['status'] == 'ERROR' else ''))
        base.record(SCENARIO, label, binary, facts)

        failed = views['1 failed to evac-b']
        for name in servers:
            # Nothing runs of either server on evac-b, stock or fixed:
            # spawn failed before any domain was defined.
            self.assertNotIn(base.DST, failed[name]['guests'])
        if storage == 'rbd':
            # The server's disk, in Ceph: never deleted.
            self.assertIsNotNone(disk_before)
            self.assertIsNotNone(failed['x']['disk'])
            # evac-b's own directory holds no disk, stock or fixed; both
            # leave its console.log there (destroy_disks is False on
            # shared storage, and nova's RBD directory clean-up is off).
            for name in servers:
                self.assertEqual(['console.log'],
                                 failed[name]['files'].get(base.DST))
        elif storage == 'shared':
            # The server's own disk on the shared directory: kept.
            self.assertIn('disk', failed['x']['files'].get(base.DST, []))
        elif binary == base.STOCK:
            # FIXME(bug): stock nova leaves the failed spawn's instance
            # directory on evac-b (on local storage, with its disk).
            self.assertIn(base.DST, failed['x']['files'])
        else:
            self.assertNotIn(base.DST, failed['x']['files'])
            self.assertNotIn(base.DST, failed['y']['files'])
        # The HA retry: x runs on evac-c, its port bound there.
        retry = views['2 x retried to evac-c']['x']
        self.assertEqual({C: 'running'}, {
            h: s for h, s in retry['guests'].items() if s != 'host down'})
        self.assertEqual(C, retry['port']['host'])
        back = views['3 evac-a back, y hard-rebooted there']
        # x stays on evac-c: its newest evacuation did not fail.
        self.assertEqual((C, 'ACTIVE', C), (
            back['x']['port']['host'], back['x']['port']['status'],
            back['x']['port']['chassis']))
        self.assertEqual('ACTIVE', rebooted['status'])
        self.assertEqual('ACTIVE on %s' % base.SRC, back['y']['server'])
        if binary == base.FIXED:
            # The source's manager gave y's port back as it started (or,
            # its ovn-controller late, once neutron could bind it).
            self.assertEqual((base.SRC, 'ACTIVE', base.SRC, base.SRC), (
                back['y']['port']['host'], back['y']['port']['status'],
                back['y']['port']['chassis'],
                back['y']['port']['requested']), back['y']['port'])
            # ... and y's boot volume: connected for evac-a once, in use
            # by y's QEMU there after the hard reboot, the one writer.
            attached = {'status': 'attached', 'host': base.SRC,
                        'connector': base.SRC}
            self.assertEqual(('in-use', [attached]), (
                back['y']['volume']['status'],
                back['y']['volume']['attachments']), back['y']['volume'])
            self.assertEqual(1, len(observe.live_watchers(
                back['y']['volume']['watchers'], self.dead_watchers)))
            # x, retried to evac-c, keeps its data volume there.
            self.assertEqual(('in-use', [dict(attached, host=C,
                                              connector=C)]), (
                back['x']['volume']['status'],
                back['x']['volume']['attachments']), back['x']['volume'])
        else:
            # FIXME(bug): stock nova leaves y's port bound to evac-b: y
            # runs on evac-a with no network.
            self.assertEqual((base.DST, 'DOWN'), (
                back['y']['port']['host'], back['y']['port']['status']))

    # Named storage first: the tests run in name order, and the hosts
    # change storage only between modes.
    def test_local_stock(self):
        self._test(base.STOCK, 'local')

    def test_local_fixed(self):
        self._test(base.FIXED, 'local')

    def test_shared_stock(self):
        self._test(base.STOCK, 'shared')

    def test_shared_fixed(self):
        self._test(base.FIXED, 'shared')

    def test_rbd_stock(self):
        self._test(base.STOCK, 'rbd')

    def test_rbd_fixed(self):
        self._test(base.FIXED, 'rbd')
