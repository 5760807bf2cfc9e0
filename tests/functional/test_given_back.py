# SPDX-License-Identifier: Apache-2.0

"""The server of a failed evacuation given back whole to its source.

Regression tests for issue 33. compute0, the source, dies (its
nova-compute only: the guest keeps running there); the server, booted
from a volume with a data volume and a port, is evacuated to compute1,
where its spawn fails. Before spawning, nova moved each volume's
attachment to compute1 (the source's deleted, one connected with
compute1's connector) and bound the port there.

* Stock nova leaves each volume attached for compute1 and the mapping's
  connection info compute1's: on a SAN whose LUN depends on the host
  (``services.ISCSI``), compute0 would log into what compute1 was given.
* Issue 28's fix replaced compute1's attachments by reserved ones: the
  volumes ``reserved`` (snapshot, backup and upload refuse that state),
  the mappings still naming what compute1 was given.
* After the fix, compute0 connects each volume for itself as its
  nova-compute starts: one attachment per volume, ``attached`` with
  compute0's connector, and the mapping's connection info cinder's
  answer for compute0. Nothing is disconnected on compute0, whose guest
  still runs.
"""

import json
import threading

from nova.cmd import manage
from nova.compute import manager as nova_manager
from nova import context as nova_context
from nova import objects
from nova.tests.functional import test_servers_resource_request as \
    resource_request
from oslo_serialization import jsonutils
from oslo_utils.fixture import uuidsentinel as uuids
import testscenarios

from nova_evac_cleanup import fixture as evac_fixture
from tests.functional import test_half_moved as half_moved
from tests.harness import fake_libvirt
from tests.harness import services

load_tests = testscenarios.load_tests_apply_scenarios

SOURCE = half_moved.SOURCE
DEST = half_moved.DEST
VOLUMES = (half_moved.VOLUME, uuids.data_volume)


class _GivenBackTest(half_moved._HalfMovedTest):

    scenarios = [('fixed', {'FIXED': True})]
    row = 'get_guest_xml'
    #: the shape of cinder's connection info (tests.harness.services)
    STYLE = services.RBD

    def setUp(self):
        super().setUp()
        self.cinder.STYLE = self.STYLE
        # What each host's driver disconnects (os-brick's part).
        self.disconnected = []
        real = fake_libvirt.FakeLibvirtDriver._disconnect_volume

        def disconnect(driver, context, connection_info, instance):
            self.disconnected.append(driver._host)
            return real(driver, context, connection_info, instance)

        self.stub_out(
            'tests.harness.fake_libvirt.FakeLibvirtDriver._disconnect_volume',
            disconnect)

    def volumes(self):
        """Each volume's attachment, as ``(status, connector host, LUN)``.

        Also checks that the volume has one attachment, the one its
        mapping names, and that the mapping's connection info is cinder's
        for it once it is connected. The LUN is the one the mapping's
        connection info names (iSCSI only).
        """
        context = nova_context.get_admin_context()
        result = {}
        for volume in VOLUMES:
            attachments = self.cinder.volume_to_attachment[volume]
            bdm = objects.BlockDeviceMapping.get_by_volume(context, volume)
            self.assertEqual([bdm.attachment_id], list(attachments))
            attachment = attachments[bdm.attachment_id]
            data = jsonutils.loads(bdm.connection_info)['data']
            if attachment['connector']:
                self.assertEqual(attachment['connection_info']['data'], {
                    key: data[key]
                    for key in attachment['connection_info']['data']})
            result[volume] = (attachment['status'], (
                attachment['connector'] or {}).get('host'),
                data.get('target_lun'))
        return result

    def expected(self, status, host, lun_host):
        lun = services.lun(lun_host) if self.STYLE == services.ISCSI else None
        return {volume: (status, host, lun) for volume in VOLUMES}


class VolumesBackTest(_GivenBackTest):
    """Each volume connected for compute0 again, as it starts."""

    scenarios = [('%s-%s' % (fix, style), {'FIXED': fix == 'fixed',
                                           'STYLE': style})
                 for fix in ('stock', 'fixed')
                 for style in (services.RBD, services.ISCSI)]

    def test_volumes_connected_on_the_source(self):
        server = self._boot_with_port_and_volume(*VOLUMES[1:])
        self.assertEqual(self.expected('attached', SOURCE, SOURCE),
                         self.volumes())
        self._fail_source()
        server, _error = self._fail_evacuation(server, self.row)
        self._restart_source()

        if not self.FIXED:
            # compute0 would log into what compute1 was given.
            self.assertEqual(self.expected('attached', DEST, DEST),
                             self.volumes())
            return
        self.assertEqual(self.expected('attached', SOURCE, SOURCE),
                         self.volumes())
        # Nothing disconnected on compute0, whose guest still runs.
        self.assertNotIn(SOURCE, self.disconnected)
        self.assertEqual('running',
                         self.world.domain_state(SOURCE, server['id']))
        self.assertEqual(0, self.world.calls(SOURCE)['destroy'])
        self.api.post_server_action(
            server['id'], {'os-resetState': {'state': 'active'}})
        self.api.post_server_action(server['id'],
                                    {'reboot': {'type': 'HARD'}})
        server = self._wait_for_state_change(server, 'ACTIVE')
        self.assertEqual(SOURCE, server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(self.expected('attached', SOURCE, SOURCE),
                         self.volumes())


class StockDestinationTest(_GivenBackTest):
    """Issue 40: a volume attached for another host is not counted back.

    compute1 runs stock nova (a deployment upgraded host by host): its
    failed spawn leaves each volume ``attached`` for compute1. compute0
    comes back with the fix. Before, the status alone counted each volume
    as given back, and compute0 kept what compute1 was given; now a volume
    counts only once cinder names compute0 as the host it is attached for.
    """

    scenarios = [('stock-destination-%s' % style, {'FIXED': False,
                                                   'STYLE': style})
                 for style in (services.RBD, services.ISCSI)]

    def test_connected_for_the_source(self):
        server = self._boot_with_port_and_volume(*VOLUMES[1:])
        self._fail_source()
        self._fail_evacuation(server, self.row)
        self.assertEqual(self.expected('attached', DEST, DEST),
                         self.volumes())

        # compute0, and every compute started from now on, has the fix.
        self.useFixture(evac_fixture.EvacuateCleanupFixture())
        self._restart_source()

        self.assertEqual(self.expected('attached', SOURCE, SOURCE),
                         self.volumes())
        self.assertNotIn(SOURCE, self.disconnected)
        self.assertIn('gave back to %s the server\'s volumes' % SOURCE,
                      self.stdlog.logger.output)


class RefusedBindingTest(_GivenBackTest):
    """A binding neutron refused is not given back, and is tried again.

    compute0's nova-compute starts before its network agent is alive (the
    normal order after a host reboot): ML2's agent-based drivers and OVN
    refuse to bind the port to it (``binding:vif_type`` ``binding_failed``)
    though the update itself succeeds with ``binding:host_id`` compute0.
    Issue 28's fix compared the host only: it said the port was bound
    back and never tried again. After the fix the port does not count as
    given back until neutron binds it with a working vif type, and
    compute0's periodic task tries again until it does.
    """

    scenarios = [('stock', {'FIXED': False}), ('fixed', {'FIXED': True})]

    def binding(self):
        """``(binding:host_id, binding:vif_type)`` of the server's port."""
        [port] = self.neutron.list_ports(True, device_id=self.server_id)[
            'ports']
        return port['binding:host_id'], port['binding:vif_type']

    def test_refused_then_bound(self):
        server = self._boot_with_port_and_volume()
        self.server_id = server['id']
        self._fail_source()
        server, _error = self._fail_evacuation(server, self.row)
        self.assertEqual((DEST, 'ovs'), self.binding())
        self.neutron.agents_down = {SOURCE}
        self._restart_source()

        if not self.FIXED:
            self.assertEqual((DEST, 'ovs'), self.binding())
            return
        # Meta-test: neutron refused the binding.
        self.assertEqual((SOURCE, 'binding_failed'), self.binding())
        self.assertNotRegex(self.stdlog.logger.output,
                            '%s.*back to %s' % (self.port, SOURCE))
        self.assertNotRegex(self.stdlog.logger.output,
                            'gave back to %s.*%s' % (SOURCE, self.port))
        # The agent is alive: the periodic task's next run binds it.
        self.neutron.agents_down = set()
        self.compute0.manager._give_back_failed_evacuations(
            nova_context.get_admin_context())
        self.assertEqual((SOURCE, 'ovs'), self.binding())
        self.assertRegex(self.stdlog.logger.output,
                         'gave back to %s.*%s' % (SOURCE, self.port))


class AuditListsTest(_GivenBackTest):
    """``nova-evac-cleanup audit`` on compute0 lists what is not back."""

    def test_the_audit_lists_what_is_not_back(self):
        server = self._boot_with_port_and_volume()
        self._fail_source()
        self._fail_evacuation(server, self.row)
        self.neutron.agents_down = {SOURCE}
        self._restart_source()

        code, out, _err = self._run_audit(as_json=True, host=SOURCE)
        [left] = json.loads(out)['not_given_back']
        self.assertEqual((server['id'], {self.port: 'binding_failed on %s' %
                                         SOURCE}, []),
                         (left['instance'], left['ports'], left['volumes']))
        self.assertIn('openstack port set --host %s %s' % (SOURCE, self.port),
                      left['commands'])
        self.assertEqual(3, code)


class RetryDuringGiveBackTest(_GivenBackTest):
    """An evacuation accepted while compute0 gives back keeps the server.

    Issue 33, item 3. nova's evacuate API checks no task state, and
    compute0's ``init_host`` runs before its service is up (an HA tool may
    keep it forced down longer still): an HA retry to compute2 can be
    accepted after compute0 found the failed evacuation to be the
    server's newest migration and before it updates the port and the
    volumes. compute0 updates the port only at the revision it read
    (``If-Match``) and each attachment by the id it read: the retry's
    binding changed the revision (412) and its ``detach_block_devices``
    deleted the attachment (NotFound), so both are left to it
    (``retry-first``). A retry that runs only after compute0's updates
    moves them to compute2 itself (``give-back-first``). Either way the
    retried server keeps its port and volumes on compute2.

    The retry of ``give-back-first`` is scheduled before compute0 goes
    on: nova's own start-up there (``_destroy_evacuated_instances``)
    removes compute0's allocation for the accepted retry, and a scheduler
    that read the allocations before fails its claim with a consumer
    generation conflict (nova's race, on stock nova too; seen on a loaded
    machine).
    """

    STYLE = services.ISCSI
    scenarios = [(name, {'FIXED': True, 'RETRY_FIRST': first})
                 for name, first in (('retry-first', True),
                                     ('give-back-first', False))]

    def _retry(self, server):
        """The HA tool evacuates the server to compute2: accepted."""
        self.api.post_server_action(server['id'],
                                    {'evacuate': {'host': half_moved.OTHER}})
        if self.RETRY_FIRST:
            self._wait_for_server_parameter(server, {
                'status': 'ACTIVE',
                'OS-EXT-SRV-ATTR:host': half_moved.OTHER})
        else:
            self.assertTrue(self.scheduled.wait(60))

    def _hold_compute2(self):
        """compute2's rebuild waits until compute0 has given back."""
        manager = self.compute2.manager
        real, released = manager.rebuild_instance, threading.Event()
        self.scheduled = threading.Event()

        def rebuild_instance(*args, **kwargs):
            self.scheduled.set()
            released.wait()
            return real(*args, **kwargs)

        manager.rebuild_instance = rebuild_instance
        self.addCleanup(released.set)
        return released

    def test_retried_server_keeps_its_port_and_volumes(self):
        self.compute2 = self._start_compute(half_moved.OTHER)
        server = self._boot_with_port_and_volume(*VOLUMES[1:])
        self._fail_source()
        server, _error = self._fail_evacuation(server, self.row)
        released = None if self.RETRY_FIRST else self._hold_compute2()
        # The seam: compute0's first update, after its check.
        real = nova_manager.ComputeManager._update_volume_attachments
        retried = []

        def update(manager, context, instance, bdms):
            if manager.host == SOURCE and not retried:
                retried.append(instance.uuid)
                self._retry(server)
            return real(manager, context, instance, bdms)

        self.stub_out('nova.compute.manager.ComputeManager.'
                      '_update_volume_attachments', update)
        # compute0 starts again, still forced down by the HA tool.
        self.compute0 = self.restart_compute_service(self.compute0)
        self.assertEqual([server['id']], retried)
        if released:
            released.set()
        server = self._wait_for_server_parameter(server, {
            'status': 'ACTIVE', 'OS-EXT-SRV-ATTR:host': half_moved.OTHER})

        [port] = self.neutron.list_ports(True, device_id=server['id'])[
            'ports']
        self.assertEqual((half_moved.OTHER, 'ovs'), (
            port['binding:host_id'], port['binding:vif_type']))
        self.assertEqual(self.expected('attached', half_moved.OTHER,
                                       half_moved.OTHER), self.volumes())
        if self.RETRY_FIRST:
            log = self.stdlog.logger.output
            self.assertIn('changed since it was read', log)
            self.assertIn('replaced since it was read', log)


class EndedWhileSourceRunsTest(_GivenBackTest):
    """However the evacuation ends, compute0 takes the server back.

    Issue 33, item 4. compute0's nova-compute already runs when the
    evacuation ends, so no start of it gives the server back:

    * ``handler``: compute0's host never died; an HA tool forced its
      service down and evacuated the server, whose spawn failed on
      compute1 (nova's handler ended it); the guest still runs on
      compute0;
    * ``sweep``: compute1 died in the middle of the evacuation; compute0
      came back first (nova's ``_destroy_evacuated_instances`` marked the
      migration ``completed``), then compute1's start-up sweep ended it;
    * ``audit``: the same, ended by ``nova-evac-cleanup audit --delete`` on
      compute1 while its nova-compute is still down.

    compute0's periodic task gives the server back at its next run. Stock
    nova leaves the port and the volume on compute1.
    """

    scenarios = [('%s-%s' % ('fixed' if fixed else 'stock', ending),
                  {'FIXED': fixed, 'ENDING': ending})
                 for fixed, ending in ((False, 'handler'), (True, 'handler'),
                                       (True, 'sweep'), (True, 'audit'))]

    def _end(self, server):
        """End the evacuation as the scenario says, compute0 running."""
        if self.ENDING == 'handler':
            self._force_down(SOURCE, True)
            return self._fail_evacuation(server, self.row)[0]
        self._fail_source()
        server, _migration, block = self._interrupt_evacuation(
            server, 'wait_for_boot')
        self._restart_source()
        if self.ENDING == 'sweep':
            self._start_dest()
            self._end_held_spawn(block)
        else:
            self._end_held_spawn(block)
            code, _out, err = self._run_audit(delete=True)
            self.assertEqual(4, code, err)
        server = self.api.get_server(server['id'])
        self.assertEqual(('ERROR', SOURCE), (
            server['status'], server['OS-EXT-SRV-ATTR:host']))
        return server

    def test_given_back_without_a_restart(self):
        server = self._boot_with_port_and_volume(*VOLUMES[1:])
        self._end(server)
        self.assertEqual(DEST, self.where()[0])
        self.assertEqual(self.expected(
            'attached' if not self.FIXED else 'reserved',
            None if self.FIXED else DEST, None), self.volumes())

        if self.FIXED:
            self.compute0.manager._give_back_failed_evacuations(
                nova_context.get_admin_context())
        self.assertEqual(SOURCE if self.FIXED else DEST, self.where()[0])
        self.assertEqual(self.expected('attached', SOURCE if self.FIXED
                                       else DEST, None), self.volumes())
        if self.ENDING == 'handler':
            # compute0's guest still runs: nothing disconnected there.
            self.assertNotIn(SOURCE, self.disconnected)
            self.assertEqual('running',
                             self.world.domain_state(SOURCE, server['id']))


class NoAllocationHereTest(_GivenBackTest):
    """A port with a resource request waits for the server's allocation.

    Issue 33, item 4. Where compute0 came back first, nova's
    ``_destroy_evacuated_instances`` also removed the server's allocation
    on compute0, taking the evacuation for done. Once compute1's sweep
    ended it, the port's resource request has no provider on compute0 to
    map to: compute0 says so, with the ``heal_allocations`` command, and
    leaves that port where it is (no guess); the volume is connected all
    the same. Once the allocation is healed, the next run binds the port
    with the provider of compute0's allocation, in either format of
    neutron's resource request (``port-resource-request-groups``).
    """

    row = half_moved.INTERRUPTED_SOURCE_FIRST
    scenarios = [(name, {'FIXED': True, 'EXTENDED': extended})
                 for name, extended in (('legacy', False),
                                        ('extended', True))]

    def setUp(self):
        super().setUp()
        if self.EXTENDED:
            self.neutron = self.useFixture(
                resource_request.ExtendedResourceRequestNeutronFixture.
                create_with_existing_neutron_state(self.neutron))

    def profile(self):
        port = self.neutron._ports[self.port]
        return port['binding:host_id'], port['binding:profile'].get(
            'allocation')

    def test_bound_once_the_allocation_is_healed(self):
        bridges = self._bridges()
        allocation = (lambda host: {self.port: bridges[host]}
                      if self.EXTENDED else bridges[host])
        server = self._boot_with_port_and_volume(
            *VOLUMES[1:], port=self.neutron.port_with_resource_request['id'])
        self.assertEqual((SOURCE, allocation(SOURCE)), self.profile())
        self._fail_source()
        server = self._end_evacuation(server)
        self.assertEqual((DEST, allocation(DEST)), self.profile())
        self.assertNotIn(bridges[SOURCE],
                         self._get_allocations_by_server_uuid(server['id']))

        self.compute0.manager._give_back_failed_evacuations(
            nova_context.get_admin_context())
        self.assertEqual((DEST, allocation(DEST)), self.profile())
        self.assertEqual(self.expected('attached', SOURCE, None),
                         self.volumes())
        self.assertIn('openstack port unset --binding-profile allocation %s '
                      '&& nova-manage placement heal_allocations --instance '
                      '%s' % (self.port, server['id']),
                      self.stdlog.logger.output)

        # What the WARNING says to run.
        self.neutron.update_port(self.port,
                                 {'port': {'binding:profile': {}}})
        self.assertEqual(0, manage.PlacementCommands().heal_allocations(
            instance_uuid=server['id']))
        self.compute0.manager._give_back_failed_evacuations(
            nova_context.get_admin_context())
        self.assertEqual((SOURCE, allocation(SOURCE)), self.profile())


class DeletedAttachmentTest(_GivenBackTest):
    """A mapping naming an attachment cinder lost holds nothing else back.

    Found by the explorer (``sweep volume.attachment_delete#1``, die,
    source-first): a sweep that died replacing the attachment leaves the
    mapping of one volume naming one cinder deleted. That volume is left
    with a WARNING; the next volume and the port are still given back.
    """

    def test_the_rest_given_back(self):
        server = self._boot_with_port_and_volume(*VOLUMES[1:])
        self._fail_source()
        self._fail_evacuation(server, self.row)
        bdm = objects.BlockDeviceMapping.get_by_volume(
            nova_context.get_admin_context(), VOLUMES[0])
        del self.cinder.volume_to_attachment[VOLUMES[0]][bdm.attachment_id]
        self._restart_source()

        [port] = self.neutron.list_ports(True, device_id=server['id'])[
            'ports']
        self.assertEqual((SOURCE, 'ovs'), (
            port['binding:host_id'], port['binding:vif_type']))
        [attachment] = self.cinder.volume_to_attachment[VOLUMES[1]].values()
        self.assertEqual(SOURCE, attachment['connector']['host'])
        self.assertIn('Volume %s: attachment %s is gone' % (
            VOLUMES[0], bdm.attachment_id), self.stdlog.logger.output)
