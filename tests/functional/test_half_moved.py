# SPDX-License-Identifier: Apache-2.0

"""What a failed evacuation leaves of the server's ports and volumes.

Issue 13. Before spawning, nova's evacuation binds the server's port to
compute1 and replaces its volume attachment by one connected with
compute1's connector. nova's ``NeutronFixture`` and ``CinderFixture`` keep
the port's ``binding:host_id`` and each attachment's connector, so each
test records, for one way the evacuation ends (a spawn failure at each
stage, or an interruption ended by compute1's start-up sweep in either
restart order), on stock nova and with the fix:

* where the port is bound and which host the volume's attachment is
  connected for, once the evacuation is over;
* on stock nova, the same after compute0 is back and the operator hard
  reboots the server there (nova's hard reboot neither rebinds ports nor
  refreshes volume connection info: it uses what is stored);
* with the fix, the same once compute0 is back: its nova-compute binds the
  port to itself and connects the volume for itself (issues 28 and 33,
  :mod:`nova_evac_cleanup.giveback`), as it starts or, if it was running
  already when the evacuation ended, at its periodic task's next run;
  then a hard reboot there.

compute1 never binds the port to compute0: while compute0 is dead, ML2's
agent-based drivers refuse the binding ("Refusing to bind port ... to dead
agent") and leave it ``binding_failed``; compute0 binds it once it runs.
nova's own ``_heal_instance_info_cache`` would too, but it is off by
default since nova 31 and passes no provider mappings.

A second evacuation, to another host, rebinds the port and re-attaches the
volume by itself, on stock nova as with the fix (nova's rebuild does it
before spawning): ``test_second_evacuation_moves_everything``.
"""

import threading
import time

import fixtures
from nova.compute import manager as nova_manager
from nova import context as nova_context
from nova import objects
from nova.tests import fixtures as nova_fixtures
from nova.virt import driver as driver_module
from nova.volume import cinder
import os_resource_classes as orc
from oslo_utils.fixture import uuidsentinel as uuids
import testscenarios

from tests.functional import test_interrupted_evacuation as interrupted
from tests.harness import fake_libvirt

load_tests = testscenarios.load_tests_apply_scenarios

SOURCE = interrupted.SOURCE
DEST = interrupted.DEST
OTHER = 'compute2'
VOLUME = nova_fixtures.CinderFixture.IMAGE_BACKED_VOL
INTERRUPTED_DEST_FIRST = 'interrupted-dest-first'
INTERRUPTED_SOURCE_FIRST = 'interrupted-source-first'
ROWS = fake_libvirt.STAGES + (INTERRUPTED_DEST_FIRST,
                              INTERRUPTED_SOURCE_FIRST)


class _HalfMovedTest(interrupted._InterruptedEvacuationTest):

    STORAGE = 'non-shared'
    scenarios = [(row, {'row': row}) for row in ROWS]

    def _boot_with_port_and_volume(self, *data_volumes, port=None):
        """A volume-backed server with a port, on compute0."""
        self.port = port or self.neutron.port_1['id']
        server = self._build_server(image_uuid='', host=SOURCE,
                                    networks=[{'port': self.port}])
        server['block_device_mapping_v2'] = [{
            'boot_index': 0, 'uuid': VOLUME, 'source_type': 'volume',
            'destination_type': 'volume'}] + [{
                'boot_index': -1, 'uuid': volume, 'source_type': 'volume',
                'destination_type': 'volume'} for volume in data_volumes]
        server = self.api.post_server({'server': server})
        return self._wait_for_state_change(server, 'ACTIVE')

    def _bridges(self):
        """An OVS bridge provider with bandwidth under each node, by host.

        As neutron's agent reports them, and as nova's
        ``test_servers_resource_request.py`` sets them up.
        """
        for trait in ('CUSTOM_VNIC_TYPE_NORMAL', 'CUSTOM_PHYSNET2'):
            self._create_trait(trait)
        return {host: self._bridge(host) for host in (SOURCE, DEST)}

    def _bridge(self, host):
        """An OVS bridge provider with bandwidth under ``host``'s node."""
        compute = self._get_provider_uuid_by_host(host)
        bridge = getattr(uuids, host + ' ovs bridge')
        self.placement.post('/resource_providers', version='1.20', body={
            'name': bridge, 'uuid': bridge,
            'parent_provider_uuid': compute})
        generation = self.placement.get(
            '/resource_providers/%s' % bridge).body['generation']
        self._update_inventory(bridge, {
            'resource_provider_generation': generation, 'inventories': {
                orc.NET_BW_IGR_KILOBIT_PER_SEC: {'total': 10000},
                orc.NET_BW_EGR_KILOBIT_PER_SEC: {'total': 10000}}})
        self._set_provider_traits(bridge, ['CUSTOM_VNIC_TYPE_NORMAL',
                                           'CUSTOM_PHYSNET2'])
        return bridge

    def where(self):
        """Where the port is bound, and the attachments' connector hosts.

        Also checks that the port's active binding (of its per-host
        bindings) is on the same host as ``binding:host_id``, and that the
        server's BDM names the volume's one attachment.

        :returns: ``(binding:host_id, [connector host or 'reserved', ...])``
        """
        port = self.neutron._ports[self.port]
        active = [host for host, binding in self.neutron._port_bindings.get(
            self.port, {}).items() if binding.get('status') == 'ACTIVE']
        self.assertIn(active, ([], [port['binding:host_id']]))
        attachments = self.cinder.volume_to_attachment[VOLUME]
        bdm = objects.BlockDeviceMapping.get_by_volume(
            nova_context.get_admin_context(), VOLUME)
        self.assertEqual(list(attachments), [bdm.attachment_id])
        return (port['binding:host_id'],
                sorted((a['connector'] or {}).get('host') or 'reserved'
                       for a in attachments.values()))

    def _start_dest(self):
        """compute1 starts again: with the fix, its sweep runs."""
        if self.FIXED:
            return self._restart_dest()
        self._force_down(DEST, False)
        cell_name = self.host_mappings[DEST].cell_mapping.name
        self.compute1 = self.start_service('compute', host=DEST,
                                           cell_name=cell_name)

    def _end_evacuation(self, server):
        """Fail or interrupt the evacuation as the row says."""
        if self.row in fake_libvirt.STAGES:
            server, _error = self._fail_evacuation(server, self.row)
            return server
        server, _migration, block = self._interrupt_evacuation(
            server, 'wait_for_boot')
        if self.row == INTERRUPTED_SOURCE_FIRST:
            self._restart_source()
        self._start_dest()
        self._end_held_spawn(block)
        return self.api.get_server(server['id'])

    def _hard_reboot_on_source(self, server):
        if self.row != INTERRUPTED_SOURCE_FIRST:
            self._restart_source()
        if server['OS-EXT-STS:task_state'] is not None:
            # Stock nova never ends an interrupted evacuation.
            self.api.post_server_action(
                server['id'], {'os-resetState': {'state': 'error'}})
        self.api.post_server_action(server['id'],
                                    {'reboot': {'type': 'HARD'}})
        server = self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual(SOURCE, server['OS-EXT-SRV-ATTR:host'])
        return server


class StockHalfMovedTest(_HalfMovedTest):
    """Stock nova leaves the server half-moved onto compute1."""

    FIXED = False

    def test_half_moved(self):
        server = self._boot_with_port_and_volume()
        self.assertEqual((SOURCE, [SOURCE]), self.where())
        self._fail_source()
        server = self._end_evacuation(server)

        self.assertEqual((DEST, [DEST]), self.where())
        self._hard_reboot_on_source(server)
        # The server runs on compute0 with compute1's binding and volume
        # connection.
        self.assertEqual((DEST, [DEST]), self.where())


class PutBackTest(_HalfMovedTest):
    """The fix releases the volume on compute1; compute0 takes it back.

    compute1 never binds the port to the dead compute0 and leaves the
    volume reserved for the server. compute0 binds the port to itself
    (issue 28) and connects the volume for itself (issue 33), as its
    nova-compute starts or, where it came back first (nova's
    ``_destroy_evacuated_instances`` marked the migration ``completed``
    before compute1's sweep ended it), at its periodic task's next run,
    without another restart: a hard reboot brings the server back there,
    with nothing run by hand.
    """

    def test_put_back(self):
        server = self._boot_with_port_and_volume()
        self._fail_source()
        server = self._end_evacuation(server)

        self.assertEqual((DEST, ['reserved']), self.where())
        if self.row == INTERRUPTED_SOURCE_FIRST:
            self.compute0.manager._give_back_failed_evacuations(
                nova_context.get_admin_context())
        else:
            self._restart_source()
        self.assertEqual((SOURCE, [SOURCE]), self.where())
        self.api.post_server_action(server['id'],
                                    {'reboot': {'type': 'HARD'}})
        server = self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual(SOURCE, server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual((SOURCE, [SOURCE]), self.where())


class SecondEvacuationTest(_HalfMovedTest):
    """nova rebinds the port and re-attaches the volume by itself."""

    scenarios = [('stock', {'FIXED': False, 'row': 'get_guest_xml'}),
                 ('fixed', {'FIXED': True, 'row': 'get_guest_xml'})]

    def test_second_evacuation_moves_everything(self):
        self._start_compute(OTHER)
        server = self._boot_with_port_and_volume()
        self._fail_source()
        server = self._end_evacuation(server)

        self.api.post_server_action(server['id'],
                                    {'evacuate': {'host': OTHER}})
        server = self._wait_for_server_parameter(
            server, {'status': 'ACTIVE', 'OS-EXT-SRV-ATTR:host': OTHER})
        self.assertEqual((OTHER, [OTHER]), self.where())


class _Died(interrupted.ProcessDied):
    pass


class NotDetachedTest(_HalfMovedTest):
    """compute1 dies before nova's ``detach_block_devices`` ended.

    Issue 28. nova's evacuation replaces the source's volume attachment
    (``detach_block_devices``: a reserved attachment created, the source's
    deleted by ``_detach_volume``) only after the network set-up. If
    compute1 dies before that ended, the block device mapping still holds
    compute0's connected attachment and its connection info: when compute1
    starts again nothing of the volume is its to release or disconnect,
    and the reserved attachment nova made goes (issue 42, finding 2).
    """

    scenarios = [
        ('%s-%s' % (fix, point), {'FIXED': fix == 'fixed', 'point': point,
                                  'row': 'died-at-detach'})
        for fix in ('stock', 'fixed')
        for point in ('attachment_create', '_detach_volume')]

    def _hold_detach(self):
        """Hold compute1 at ``self.point``, then raise there: its death."""
        reached, released, destroyed = (
            threading.Event(), threading.Event(), [])
        real_destroy = fake_libvirt.FakeLibvirtDriver.destroy

        if self.point == '_detach_volume':
            real = nova_manager.ComputeManager._detach_volume

            def _detach_volume(manager, context, bdm, instance, *args, **kw):
                # No other callable in its closure: nova_support reads the
                # signature of the innermost one (nova's safe_utils).
                if manager.host == DEST:
                    reached.set()
                    released.wait()
                    raise _Died()
                return real(manager, context, bdm, instance, *args, **kw)

            self.useFixture(fixtures.MonkeyPatch(
                'nova.compute.manager.ComputeManager._detach_volume',
                _detach_volume))
        else:
            # Right after cinder made the reserved attachment: nothing of
            # this process has seen it yet.
            volume_api = self.compute1.manager.volume_api
            real = cinder.API.attachment_create

            def attachment_create(api, *args, **kwargs):
                result = real(*args, **kwargs)
                if api is volume_api:
                    reached.set()
                    released.wait()
                    raise _Died()
                return result

            self.useFixture(fixtures.MonkeyPatch(
                'nova.volume.cinder.API.attachment_create',
                attachment_create))

        def destroy(driver, context, instance, network_info,
                    block_device_info=None, *args, **kwargs):
            if driver._host == DEST:
                destroyed.append(driver_module.block_device_info_get_mapping(
                    block_device_info))
            return real_destroy(driver, context, instance, network_info,
                                block_device_info, *args, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            'tests.harness.fake_libvirt.FakeLibvirtDriver.destroy', destroy))
        self.addCleanup(released.set)
        return reached, released, destroyed

    def test_source_attachment_kept(self):
        server = self._boot_with_port_and_volume()
        context = nova_context.get_admin_context()
        before = objects.BlockDeviceMapping.get_by_volume(context, VOLUME)
        self.assertEqual((SOURCE, [SOURCE]), self.where())
        self._fail_source()
        reached, released, destroyed = self._hold_detach()
        self.api.post_server_action(server['id'],
                                    {'evacuate': {'host': DEST}})
        self.assertTrue(reached.wait(30))
        self._kill(self.compute1)
        self._start_dest()
        released.set()
        time.sleep(0.5)

        after = objects.BlockDeviceMapping.get_by_volume(context, VOLUME)
        self.assertEqual(before.attachment_id, after.attachment_id)
        self.assertEqual(before.connection_info, after.connection_info)
        # The source's attachment, connected for compute0; nova had only
        # reserved another (attachment_create) when compute1 died.
        attachment = self.cinder.volume_to_attachment[VOLUME][
            before.attachment_id]
        self.assertEqual(SOURCE, attachment['connector']['host'])
        # Nothing disconnected on compute1: no destroy got a volume.
        self.assertEqual([], [m for m in destroyed if m])
        if self.FIXED:
            # Meta-test: the sweep did end the evacuation.
            server = self.api.get_server(server['id'])
            self.assertEqual('ERROR', server['status'])
            self.assertIsNone(server['OS-EXT-STS:task_state'])
            # ... and deleted the attachment nova had reserved: the
            # volume's one attachment is the source's.
            self.assertEqual(
                [before.attachment_id],
                list(self.cinder.volume_to_attachment[VOLUME]))


class PortsBackTest(_HalfMovedTest):
    """compute0 binds the failed evacuation's ports back when it starts.

    Issue 28. nova binds the port to compute1 before spawning and nothing
    binds it back when the evacuation fails: nova 31 and later turn the
    periodic ``_heal_instance_info_cache`` off by default, and
    ``_init_instance`` skips a server in ERROR. compute1 never rebinds it
    (compute0 is dead: its agent would refuse the binding); it logs the
    command that does it. With the fix, compute0 binds it to itself when
    its nova-compute starts again, before the server is started there.
    """

    scenarios = [('%s-%s' % (fix, row), {'FIXED': fix == 'fixed', 'row': row})
                 for fix in ('stock', 'fixed')
                 for row in ('get_guest_xml', INTERRUPTED_DEST_FIRST)]

    def test_ports_back_on_the_source(self):
        server = self._boot_with_port_and_volume()
        self._fail_source()
        server = self._end_evacuation(server)
        # The destination never rebinds.
        self.assertEqual(DEST, self.where()[0])
        command = 'openstack port set --host %s %s' % (SOURCE, self.port)
        self.assertEqual(self.FIXED, command in self.stdlog.logger.output)

        self._restart_source()
        self.assertEqual(SOURCE if self.FIXED else DEST, self.where()[0])
        self.api.post_server_action(
            server['id'], {'os-resetState': {'state': 'active'}})
        self.api.post_server_action(server['id'],
                                    {'reboot': {'type': 'HARD'}})
        self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual(SOURCE if self.FIXED else DEST, self.where()[0])


class PortWithResourceRequestBackTest(_HalfMovedTest):
    """A port with a QoS minimum bandwidth request keeps its provider.

    Issue 28. Each compute has an OVS bridge provider with bandwidth under
    its compute node (as neutron's agent reports it, and as nova's
    ``test_servers_resource_request.py`` sets it up). The port's binding
    profile names the provider its allocation is on: compute1's after the
    evacuation, and compute0's again once compute0 bound it back, from the
    server's allocation there (nova's heal passes no provider mappings
    and fails with ``PortUpdateFailed`` on such a port).
    """

    scenarios = [('stock', {'FIXED': False, 'row': 'get_guest_xml'}),
                 ('fixed', {'FIXED': True, 'row': 'get_guest_xml'})]

    def test_port_keeps_its_provider(self):
        bridges = self._bridges()
        self.port = self.neutron.port_with_resource_request['id']
        server = self.api.post_server({'server': self._build_server(
            host=SOURCE, networks=[{'port': self.port}])})
        server = self._wait_for_state_change(server, 'ACTIVE')
        profile = self.neutron._ports[self.port]['binding:profile']
        self.assertEqual(bridges[SOURCE], profile['allocation'])
        self._fail_source()
        server, _error = self._fail_evacuation(server, self.row)
        port = self.neutron._ports[self.port]
        self.assertEqual((DEST, bridges[DEST]), (
            port['binding:host_id'], port['binding:profile']['allocation']))

        self._restart_source()
        port = self.neutron._ports[self.port]
        where = SOURCE if self.FIXED else DEST
        self.assertEqual((where, bridges[where]), (
            port['binding:host_id'], port['binding:profile']['allocation']))
        # The server's allocation is compute0's, its bridge included.
        self.assertIn(bridges[SOURCE],
                      self._get_allocations_by_server_uuid(server['id']))
