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

"""A failed evacuation's server given back on its source (issues 28, 33)."""

from unittest import mock

from nova import exception
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_evac_cleanup import giveback
from nova_evac_cleanup import manager

HOST = 'compute0'


class _SourceTestCase(test.NoDBTestCase):
    """compute0, the source: a server whose evacuation from it failed."""

    def setUp(self):
        super().setUp()
        self.tries = giveback.Tries()
        self.manager = mock.Mock(host=HOST)
        self.context = mock.sentinel.context
        self.instance = objects.Instance(uuid=uuids.instance, host=HOST,
                                         node='node0', task_state=None)
        self.newest = objects.Migration(uuid=uuids.migration,
                                        instance_uuid=uuids.instance,
                                        source_compute=HOST,
                                        status='failed')
        self.useFixture(test.fixtures.MockPatchObject(
            objects.MigrationList, 'get_by_filters',
            side_effect=lambda context, filters, **kwargs: [self.newest]))
        self.useFixture(test.fixtures.MockPatchObject(
            objects.InstanceList, 'get_by_host',
            return_value=[self.instance]))
        self.bdms = []
        self.useFixture(test.fixtures.MockPatchObject(
            objects.BlockDeviceMappingList, 'get_by_instance_uuid',
            side_effect=lambda context, uuid: self.bdms))


class TestGiveBack(_SourceTestCase):

    def setUp(self):
        super().setUp()
        self.ports = [
            {'id': uuids.away, 'binding:host_id': 'compute1',
             'resource_request': {'request_groups': [{'id': uuids.group}]}},
            {'id': uuids.here, 'binding:host_id': HOST}]
        self.manager.network_api.list_ports.return_value = {
            'ports': self.ports}
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

    def test_bound_back_with_the_allocation_here(self):
        giveback.give_back_all(self.manager, self.context, self.tries,
                               start=True)

        self.manager.network_api.setup_instance_network_on_host.\
            assert_called_once_with(self.context, self.instance, HOST,
                                    provider_mappings={
                                        uuids.group: [uuids.bandwidth]})
        # Only this host's providers are mapped from.
        self.assertEqual({uuids.node, uuids.bandwidth},
                         set(self.fill.call_args.args[3]))
        self.manager.network_api.get_instance_nw_info.assert_called_once_with(
            self.context, self.instance)

    def test_nothing_but_a_failed_newest_evacuation(self):
        for status in ('done', 'completed', 'pre-migrating', 'accepted'):
            self.newest.status = status
            giveback.give_back_all(self.manager, self.context, self.tries,
                                   start=True)
        self.instance.task_state, self.newest.status = 'rebooting', 'failed'
        giveback.give_back_all(self.manager, self.context, self.tries,
                               start=True)
        self.instance.task_state = None
        self.ports[0]['binding:host_id'] = HOST
        giveback.give_back_all(self.manager, self.context, self.tries,
                               start=True)

        self.manager.network_api.setup_instance_network_on_host.\
            assert_not_called()

    def test_refused_commands_logged_per_port(self):
        self.manager.network_api.setup_instance_network_on_host.side_effect = (
            exception.PortUpdateFailed(port_id=uuids.away, reason='dead'))
        self.manager.network_api.get_binding_profile_allocation.\
            return_value = {uuids.group: uuids.bandwidth}

        for _try in range(giveback.TRIES + 2):
            giveback.give_back_all(self.manager, self.context, self.tries,
                                   start=True)

        self.assertEqual(
            giveback.TRIES, self.manager.network_api.
            setup_instance_network_on_host.call_count)
        log = self.stdlog.logger.output
        self.assertIn('openstack port set --host %s %s' % (HOST, uuids.away),
                      log)
        self.assertIn('openstack port set --binding-profile \'{"allocation": '
                      '{"%s": "%s"}}\' %s' % (uuids.group, uuids.bandwidth,
                                              uuids.away), log)
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

    def test_an_error_per_volume_and_the_next_goes_on(self):
        def update(context, instance, bdms):
            if bdms == [self.bdms[0]]:
                raise exception.CinderConnectionFailed(reason='cinder down')

        self.manager._update_volume_attachments.side_effect = update

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
