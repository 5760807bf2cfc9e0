# SPDX-License-Identifier: Apache-2.0

"""A failed evacuation's server given back on its source (issues 28, 33)."""

import copy
from unittest import mock

from neutronclient.common import exceptions as neutron_exceptions

from nova.compute import manager as nova_manager
from nova import exception
from nova.network import neutron
from nova import objects
from nova.scheduler.client import report
from nova import test
from nova.virt import driver as virt_driver
from nova.volume import cinder
from oslo_serialization import jsonutils
from oslo_utils.fixture import uuidsentinel as uuids

from nova_evac_cleanup import giveback
from nova_evac_cleanup import manager

HOST = 'compute0'


class FakeNeutron(object):
    """neutron's ports: revisions, If-Match, and bindings it may refuse."""

    def __init__(self, ports):
        self.ports = {port['id']: port for port in ports}
        self.refuse = False
        self.updates = []

    def list_ports(self, device_id):
        return {'ports': copy.deepcopy(list(self.ports.values()))}

    def update_port(self, port_id, body, revision_number=None):
        port = self.ports[port_id]
        if revision_number != port['revision_number']:
            raise neutron_exceptions.NeutronClientException(
                status_code=412, message='RevisionNumberConstraintFailed')
        self.updates.append((port_id, body['port'], revision_number))
        port.update(copy.deepcopy(body['port']), revision_number=(
            port['revision_number'] + 1), **{
                'binding:vif_type': 'binding_failed' if self.refuse
                else 'ovs'})
        return {'port': copy.deepcopy(port)}


class _SourceTestCase(test.NoDBTestCase):
    """compute0, the source: a server whose evacuation from it failed."""

    def setUp(self):
        super().setUp()
        self.tries = giveback.Tries()
        # nova's own classes, autospecced: a call nova's API lacks fails.
        self.manager = mock.create_autospec(nova_manager.ComputeManager,
                                            instance=True)
        self.manager.host = HOST
        self.manager.network_api = mock.create_autospec(neutron.API,
                                                        instance=True)
        self.manager.volume_api = mock.create_autospec(cinder.API,
                                                       instance=True)
        self.manager.reportclient = mock.create_autospec(
            report.SchedulerReportClient, instance=True)
        self.manager.driver = mock.create_autospec(virt_driver.ComputeDriver,
                                                   instance=True)
        self.context = mock.sentinel.context
        self.instance = objects.Instance(uuid=uuids.instance, host=HOST,
                                         node='node0', task_state=None)
        self.newest = objects.Migration(uuid=uuids.migration,
                                        instance_uuid=uuids.instance,
                                        source_compute=HOST,
                                        migration_type='evacuation',
                                        status='failed')
        self.useFixture(test.fixtures.MockPatchObject(
            objects.MigrationList, 'get_by_filters',
            side_effect=lambda context, filters, **kwargs:
                objects.MigrationList(objects=[self.newest])))
        self.useFixture(test.fixtures.MockPatchObject(
            objects.InstanceList, 'get_by_filters',
            side_effect=lambda *args, **kwargs:
                objects.InstanceList(objects=[self.instance])))
        # The server as read again right before the updates.
        self.reread = self.instance
        self.useFixture(test.fixtures.MockPatchObject(
            objects.Instance, 'get_by_uuid',
            side_effect=lambda context, uuid, **kwargs: self.reread))
        self.neutron = FakeNeutron([])
        self.useFixture(test.fixtures.MockPatch(
            'nova.network.neutron.get_client',
            side_effect=lambda context, admin=False: self.neutron))
        self.bdms = []
        self.useFixture(test.fixtures.MockPatchObject(
            objects.BlockDeviceMappingList, 'get_by_instance_uuid',
            side_effect=lambda context, uuid:
                objects.BlockDeviceMappingList(objects=self.bdms)))


class TestGiveBack(_SourceTestCase):

    def setUp(self):
        super().setUp()
        self.neutron = FakeNeutron([
            {'id': uuids.away, 'binding:host_id': 'compute1',
             'binding:vif_type': 'ovs', 'revision_number': 3,
             'binding:profile': {'allocation': {uuids.group: uuids.dest_bw},
                                 'migrating_to': 'compute1'},
             'resource_request': {'request_groups': [{'id': uuids.group}]}},
            {'id': uuids.here, 'binding:host_id': HOST,
             'binding:vif_type': 'ovs', 'revision_number': 7}])
        self.instance.availability_zone = 'az0'
        self.manager.network_api._has_resource_request.side_effect = (
            lambda context, port, client: bool(port.get('resource_request')))
        self.manager.network_api._get_binding_profile_allocation.\
            side_effect = lambda context, port, client, mappings: {
                group: mappings[group][0] for group in mappings}
        # The server's allocation: its compute node here and a bandwidth
        # provider under it, and a provider elsewhere.
        self.useFixture(test.fixtures.MockPatchObject(
            objects.ComputeNode, 'get_by_host_and_nodename',
            return_value=objects.ComputeNode(uuid=uuids.node)))
        self.manager.reportclient.get_providers_in_tree.return_value = [
            {'uuid': uuids.node}, {'uuid': uuids.bandwidth}]
        self.manager.reportclient.get_allocs_for_consumer.return_value = {
            'allocations': {uuids.node: {'resources': {'VCPU': 1}},
                            uuids.bandwidth: {'resources': {'BW': 1}},
                            uuids.elsewhere: {'resources': {'VCPU': 1}}}}
        self.manager.network_api.get_requested_resource_for_instance.\
            return_value = ([objects.RequestGroup(requester_id=uuids.group)],
                            None)
        self.fill = self.useFixture(test.fixtures.MockPatch(
            'nova.scheduler.utils.fill_provider_mapping_based_on_allocation',
            side_effect=self._fill)).mock

    def _fill(self, context, reportclient, spec, allocations):
        spec.requested_resources[0].provider_uuids = [uuids.bandwidth]

    def test_bound_at_the_revision_read_with_the_allocation_here(self):
        giveback.give_back_all(self.manager, self.context, self.tries,
                               start=True)

        # What nova's unshelve sets, for this host, only if neutron still
        # has the revision read.
        self.assertEqual([(uuids.away, {
            'binding:host_id': HOST, 'device_owner': 'compute:az0',
            'binding:profile': {'allocation': {uuids.group: uuids.bandwidth}}
        }, 3)], self.neutron.updates)
        # Only this host's providers are mapped from.
        self.assertEqual({uuids.node, uuids.bandwidth},
                         set(self.fill.call_args.args[3]))
        self.manager.network_api.get_instance_nw_info.assert_called_once_with(
            self.context, self.instance)
        self.assertEqual({(uuids.instance, uuids.migration)},
                         self.tries.done)

    def test_nothing_but_a_failed_newest_evacuation(self):
        for status in ('done', 'pre-migrating', 'accepted'):
            self.newest.status = status
            giveback.give_back_all(self.manager, self.context, self.tries,
                                   start=True)
        self.newest.status, self.newest.source_compute = 'failed', 'compute2'
        giveback.give_back_all(self.manager, self.context, self.tries,
                               start=True)
        # A newer operation of another kind: a failed resize here.
        self.newest.source_compute = HOST
        self.newest.migration_type = 'resize'
        giveback.give_back_all(self.manager, self.context, self.tries,
                               start=True)
        self.newest.migration_type = 'evacuation'

        self.newest.source_compute = HOST
        self.instance.task_state = 'rebooting'
        giveback.give_back_all(self.manager, self.context, self.tries,
                               start=True)

        self.assertEqual([], self.neutron.updates)

    def test_completed_by_a_source_that_came_back_first(self):
        """Issue 33, item 4: its evacuation then ended by the sweep."""
        self.newest.status = 'completed'

        giveback.give_back_all(self.manager, self.context, self.tries)

        self.assertEqual([uuids.away],
                         [update[0] for update in self.neutron.updates])

    def test_no_allocation_here_to_map_the_resource_request_to(self):
        """Issue 33, item 4: a source that came back first removed it.

        nova's ``_destroy_evacuated_instances`` removed the server's
        allocation here: the port keeps its binding until the allocation
        is healed, said once with the command; a port without a resource
        request is bound all the same.
        """
        self.fill.side_effect = ValueError('No valid group - RP mapping')
        self.neutron.ports[uuids.here]['binding:host_id'] = 'compute1'

        for _try in range(2):
            giveback.give_back_all(self.manager, self.context, self.tries)

        self.assertEqual([uuids.here],
                         [update[0] for update in self.neutron.updates])
        warnings = [line for line in self.stdlog.logger.output.splitlines()
                    if ' WARNING ' in line]
        [warning] = [line for line in warnings if
                     'nova-manage placement heal_allocations --instance %s' %
                     uuids.instance in line]
        self.assertIn('Port %s has a resource request' % uuids.away, warning)

    def test_moved_on_between_the_reads_and_the_check(self):
        """An evacuation accepted since the ports were read: left to it."""
        self.reread = objects.Instance(uuid=uuids.instance, host=HOST,
                                       task_state='rebuilding')

        giveback.give_back_all(self.manager, self.context, self.tries,
                               start=True)

        self.assertEqual([], self.neutron.updates)
        self.assertIn('moved on', self.stdlog.logger.output)

    def test_changed_between_the_check_and_the_update(self):
        """neutron refuses the update at the revision read (412)."""
        real = self.neutron.list_ports

        def list_ports(device_id):
            ports = real(device_id)
            # An HA retry bound the port since it was read.
            self.neutron.ports[uuids.away].update(
                {'binding:host_id': 'compute2', 'revision_number': 4})
            return ports

        self.neutron.list_ports = list_ports
        giveback.give_back_all(self.manager, self.context, self.tries,
                               start=True)

        self.assertEqual([], self.neutron.updates)
        self.assertEqual('compute2',
                         self.neutron.ports[uuids.away]['binding:host_id'])
        self.assertIn('Port %s changed since it was read' % uuids.away,
                      self.stdlog.logger.output)

    def test_servers_in_error_and_of_the_history(self):
        """Found by the tier: every server of this host's failed evacuations.

        nova's lists are no Python lists (their ``__radd__`` refuses one):
        with one of them not in ERROR any more, none was read.
        """
        other = objects.Instance(uuid=uuids.other, host=HOST)
        self.newest.instance_uuid = uuids.other
        answers = iter([objects.InstanceList(objects=[self.instance]),
                        objects.InstanceList(objects=[other])])
        objects.InstanceList.get_by_filters.side_effect = (
            lambda *a, **kw: next(answers))
        found = giveback.servers(self.manager, self.context, (), True)
        self.assertEqual([uuids.instance, uuids.other],
                         [instance.uuid for instance in found])

    def test_refused_binding_tried_again_then_commands_once(self):
        self.neutron.refuse = True

        for _try in range(giveback.TRIES + 2):
            giveback.give_back_all(self.manager, self.context, self.tries,
                                   start=True)

        # Each try at the revision it read.
        self.assertEqual(list(range(3, 3 + giveback.TRIES)),
                         [update[2] for update in self.neutron.updates])
        self.assertEqual(set(), self.tries.done)
        log = self.stdlog.logger.output
        self.assertNotIn('gave back', log)
        self.assertIn('openstack port set --host %s %s' % (HOST, uuids.away),
                      log)
        # Nothing read to print it: where to read the providers is said.
        self.assertIn('openstack port set --binding-profile \'{"allocation": '
                      '"PROVIDER_ON_%s"}\' %s' % (HOST, uuids.away), log)
        self.assertIn('openstack resource provider allocation show %s' %
                      uuids.instance, log)
        self.assertNotIn('--host %s %s' % (HOST, uuids.here), log)
        self.assertEqual(1, log.count('--host %s %s' % (HOST, uuids.away)))


class TestVolumes(_SourceTestCase):
    """Issue 33: the volumes no guest uses, connected here again."""

    def setUp(self):
        super().setUp()
        self.bdms = [objects.BlockDeviceMapping(
            volume_id=volume, attachment_id=attachment, source_type='volume',
            destination_type='volume') for volume, attachment in (
                (uuids.reserved, uuids.reserved_attachment),
                (uuids.attaching, uuids.attaching_attachment),
                (uuids.attached, uuids.attached_attachment))] + [
            objects.BlockDeviceMapping(source_type='image',
                                       destination_type='local')]
        # What nova's cinder API answers (_translate_attachment_ref).
        answers = {
            uuids.reserved_attachment: {'status': 'reserved',
                                        'connection_info': {}},
            uuids.attaching_attachment: {'connection_info': {
                'driver_volume_type': 'rbd', 'status': 'attaching'}},
            uuids.attached_attachment: {'connection_info': {
                'driver_volume_type': 'rbd', 'status': 'attached'}}}
        self.manager.volume_api.attachment_get.side_effect = (
            lambda context, attachment_id: answers[attachment_id])
        self.manager.network_api.list_ports.return_value = {'ports': []}
        # cinder's volume show: the host each attachment was completed
        # for (``host_name``), which nova's volume API drops.
        self.completed_for = {uuids.attached_attachment: HOST}
        self.cinderclient = self.useFixture(test.fixtures.MockPatch(
            'nova.volume.cinder.cinderclient', autospec=True)).mock
        self.cinderclient.return_value.volumes.get.side_effect = (
            lambda volume_id: mock.Mock(attachments=[{
                'attachment_id': bdm.attachment_id, 'volume_id': volume_id,
                'host_name': self.completed_for.get(bdm.attachment_id)}
                for bdm in self.bdms if bdm.is_volume and
                bdm.volume_id == volume_id]))
        self.manager._complete_volume_attachments.side_effect = (
            self._complete)
        self.answers = answers

    def _complete(self, context, bdms):
        for bdm in bdms:
            self.completed_for[bdm.attachment_id] = HOST
            self.answers[bdm.attachment_id] = {'connection_info': {
                'driver_volume_type': 'rbd', 'status': 'attached'}}

    def test_only_attachments_no_guest_uses(self):
        giveback.give_back_all(self.manager, self.context, self.tries,
                               start=True)

        # nova's own steps, one volume at a time, in nova's order.
        calls = [call for call in self.manager.method_calls
                 if not call[0].startswith(('volume_api', 'network_api'))]
        self.assertEqual([
            mock.call._update_volume_attachments(
                self.context, self.instance, [self.bdms[0]]),
            mock.call._get_instance_block_device_info(
                self.context, self.instance, refresh_conn_info=True,
                bdms=[self.bdms[0]]),
            mock.call._complete_volume_attachments(
                self.context, [self.bdms[0]]),
            mock.call._update_volume_attachments(
                self.context, self.instance, [self.bdms[1]]),
            mock.call._get_instance_block_device_info(
                self.context, self.instance, refresh_conn_info=True,
                bdms=[self.bdms[1]]),
            mock.call._complete_volume_attachments(
                self.context, [self.bdms[1]])], calls)
        # Nothing disconnected, nothing deleted.
        self.manager.driver.detach_volume.assert_not_called()
        self.manager.volume_api.attachment_delete.assert_not_called()
        self.manager._terminate_volume_connections.assert_not_called()

    def _connected(self):
        return [call[1][1][0].volume_id for call in
                self.manager._complete_volume_attachments.mock_calls]

    def test_attached_for_another_host_is_connected_here(self):
        """Issue 40: an unwind cut short left it attached for compute1."""
        self.completed_for[uuids.attached_attachment] = 'compute1'

        giveback.give_back_all(self.manager, self.context, self.tries,
                               start=True)

        self.assertEqual([uuids.reserved, uuids.attaching, uuids.attached],
                         self._connected())
        # cinder moves an attachment to a host only through a new one.
        self.manager._terminate_volume_connections.assert_called_once_with(
            self.context, self.instance, [self.bdms[2]])
        self.assertEqual({uuids.attached_attachment: HOST,
                          uuids.reserved_attachment: HOST,
                          uuids.attaching_attachment: HOST},
                         self.completed_for)
        # Counted back once cinder says so: no second try.
        giveback.give_back_all(self.manager, self.context, self.tries)
        self.assertEqual(3, len(self._connected()))

    def test_counted_back_only_once_cinder_names_this_host(self):
        """cinder's answer, not the steps' success, ends the tries."""
        self.manager._complete_volume_attachments.side_effect = None
        self.bdms[1:3] = []

        for _try in range(giveback.TRIES + 1):
            giveback.give_back_all(self.manager, self.context, self.tries,
                                   start=True)

        self.assertEqual([uuids.reserved] * giveback.TRIES, self._connected())
        self.assertIn('Volume %s of the server is not connected' %
                      uuids.reserved, self.stdlog.logger.output)

    def test_a_volume_cinder_cannot_show_is_connected_again(self):
        """When in doubt, not counted back: connected for this host."""
        self.cinderclient.return_value.volumes.get.side_effect = (
            exception.CinderConnectionFailed(reason='cinder down'))
        self.bdms[0:2] = []

        giveback.give_back_all(self.manager, self.context, self.tries,
                               start=True)

        self.assertEqual([uuids.attached], self._connected())
        # Not proven another host's: connected in place, nothing deleted.
        self.manager._terminate_volume_connections.assert_not_called()
        self.assertIn('cannot read which host its attachment %s is for: '
                      % uuids.attached_attachment, self.stdlog.logger.output)

    def test_an_error_per_volume_and_the_next_goes_on(self):
        def update(context, instance, bdms):
            if bdms == [self.bdms[0]]:
                raise exception.CinderConnectionFailed(reason='cinder down')

        self.manager._update_volume_attachments.side_effect = update
        # cinder never says it completed: each try tries both again.
        self.manager._complete_volume_attachments.side_effect = None

        for _try in range(giveback.TRIES + 1):
            giveback.give_back_all(self.manager, self.context, self.tries,
                                   start=True)

        # The next volume went on, at every try.
        self.assertEqual(
            [mock.call(self.context, [self.bdms[1]])] * giveback.TRIES,
            self.manager._complete_volume_attachments.call_args_list)
        # One WARNING per volume left, at the last try, with the commands.
        log = self.stdlog.logger.output
        command = 'nova-manage volume_attachment refresh %s %s ' \
            'connector.json' % (uuids.instance, uuids.reserved)
        self.assertEqual(1, log.count(command))
        self.assertIn('cinder down', log[log.index('Volume %s of the server '
                                                   % uuids.reserved):])

    def test_replaced_since_read_is_left_alone(self):
        """A retry deleted the reserved attachment: cinder says NotFound."""
        self.manager._update_volume_attachments.side_effect = (
            exception.VolumeAttachmentNotFound(
                attachment_id=uuids.reserved_attachment))
        self.bdms[1:3] = []

        giveback.give_back_all(self.manager, self.context, self.tries,
                               start=True)

        self.manager._get_instance_block_device_info.assert_not_called()
        self.manager._complete_volume_attachments.assert_not_called()
        self.assertIn('replaced since it was read',
                      self.stdlog.logger.output)


class TestPeriodicTask(test.NoDBTestCase):
    """The source tries again once a minute, as a nova periodic task."""

    def test_registered_on_the_manager(self):
        spacing = {name.rsplit('.', 1)[-1]: value for name, value in
                   manager.ComputeManager._periodic_spacing.items()}
        self.assertEqual(giveback.SPACING,
                         spacing['_give_back_failed_evacuations'])

    def test_nothing_when_disabled(self):
        self.flags(enabled=False, group='evacuate_cleanup')
        compute = manager.ComputeManager()
        with mock.patch.object(giveback, 'give_back_all') as give_back_all:
            compute._give_back_failed_evacuations(mock.sentinel.context)
            self.flags(enabled=True, group='evacuate_cleanup')
            compute._give_back_failed_evacuations(mock.sentinel.context)
        give_back_all.assert_called_once_with(
            compute, mock.sentinel.context, compute._given_back)


class TestSriovPort(_SourceTestCase):
    """An SR-IOV port gets the PCI device the instance has here.

    nova's evacuation gave it the destination's device (its migration
    context); the instance, the evacuation failed, has this host's again.
    nova's own lookup and profile of that device are used, as for an
    unshelve (``_get_port_pci_dev``, ``_get_pci_device_profile``).
    """

    def setUp(self):
        super().setUp()
        self.flags(device_spec=[jsonutils.dumps({
            'address': '0000:81:00.*', 'physical_network': 'physnet2'})],
            group='pci')
        api = neutron.API()
        self.manager.network_api._get_port_pci_dev = api._get_port_pci_dev
        self.manager.network_api._get_pci_device_profile = (
            api._get_pci_device_profile)
        self.manager.network_api._has_resource_request.return_value = False
        self.instance.availability_zone = 'az0'
        self.instance.pci_requests = objects.InstancePCIRequests(requests=[
            objects.InstancePCIRequest(requester_id=uuids.sriov,
                                       request_id=uuids.request)])
        self.instance.pci_devices = objects.PciDeviceList(objects=[
            objects.PciDevice(address='0000:81:00.1', vendor_id='8086',
                              product_id='154d', dev_type='type-VF',
                              parent_addr='0000:81:00.0', extra_info={},
                              request_id=uuids.request)])
        self.neutron = FakeNeutron([{
            'id': uuids.sriov, 'binding:host_id': 'compute1',
            'binding:vnic_type': 'direct', 'binding:vif_type': 'hw_veb',
            'revision_number': 5, 'binding:profile': {
                'pci_slot': '0000:82:00.1', 'pci_vendor_info': '8086:154d',
                'physical_network': 'physnet2'}}])

    def test_the_device_here(self):
        giveback.give_back_all(self.manager, self.context, self.tries,
                               start=True)

        [(port_id, update, revision)] = self.neutron.updates
        self.assertEqual((uuids.sriov, HOST, 5), (
            port_id, update['binding:host_id'], revision))
        self.assertEqual({'pci_slot': '0000:81:00.1',
                          'pci_vendor_info': '8086:154d',
                          'physical_network': 'physnet2'},
                         update['binding:profile'])
