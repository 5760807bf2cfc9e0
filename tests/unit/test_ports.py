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

"""The ports of a failed evacuation, given back on its source (issue 28)."""

from unittest import mock

from nova import exception
from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_evac_cleanup import ports

HOST = 'compute0'


class TestGiveBack(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.manager = mock.Mock(host=HOST)
        self.context = mock.sentinel.context
        self.instance = objects.Instance(uuid=uuids.instance, host=HOST,
                                         node='node0', task_state=None)
        self.newest = objects.Migration(uuid=uuids.migration,
                                        instance_uuid=uuids.instance,
                                        status='failed')
        self.useFixture(test.fixtures.MockPatchObject(
            objects.MigrationList, 'get_by_filters',
            side_effect=lambda context, filters, **kwargs: [self.newest]))
        self.useFixture(test.fixtures.MockPatchObject(
            objects.InstanceList, 'get_by_host',
            return_value=[self.instance]))
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
        ports.give_back(self.manager, self.context)

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
            ports.give_back(self.manager, self.context)
        self.instance.task_state, self.newest.status = 'rebooting', 'failed'
        ports.give_back(self.manager, self.context)
        self.instance.task_state = None
        self.ports[0]['binding:host_id'] = HOST
        ports.give_back(self.manager, self.context)

        self.manager.network_api.setup_instance_network_on_host.\
            assert_not_called()

    def test_refused_commands_logged_per_port(self):
        self.manager.network_api.setup_instance_network_on_host.side_effect = (
            exception.PortUpdateFailed(port_id=uuids.away, reason='dead'))
        self.manager.network_api.get_binding_profile_allocation.\
            return_value = {uuids.group: uuids.bandwidth}

        ports.give_back(self.manager, self.context)

        log = self.stdlog.logger.output
        self.assertIn('openstack port set --host %s %s' % (HOST, uuids.away),
                      log)
        self.assertIn('openstack port set --binding-profile \'{"allocation": '
                      '{"%s": "%s"}}\' %s' % (uuids.group, uuids.bandwidth,
                                              uuids.away), log)
        self.assertNotIn(uuids.here, log)
        self.assertEqual(1, log.count('--host %s %s' % (HOST, uuids.away)))
