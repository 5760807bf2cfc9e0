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

"""Releasing the volume connections a failed evacuation made here."""

from unittest import mock

from nova import objects
from nova import test
from oslo_utils.fixture import uuidsentinel as uuids

from nova_evac_cleanup import journal
from nova_evac_cleanup import unwind


class TestUnwind(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.manager = mock.Mock(host='compute1')
        self.context = mock.sentinel.context
        self.instance = objects.Instance(uuid=uuids.instance,
                                         host='compute0')
        self.bdms = objects.BlockDeviceMappingList(objects=[
            objects.BlockDeviceMapping(volume_id=uuids.volume,
                                       source_type='volume',
                                       destination_type='volume',
                                       attachment_id=uuids.attachment),
            objects.BlockDeviceMapping(source_type='image',
                                       destination_type='local')])
        self.useFixture(test.fixtures.MockPatchObject(
            objects.BlockDeviceMappingList, 'get_by_instance_uuid',
            return_value=self.bdms))
        # nova's detach_block_devices replaced the source's attachment.
        self.entry = journal.Entry('compute1', uuids.instance, uuids.migration,
                                   1, detached={uuids.volume: uuids.source})

    def test_volumes_released_ports_left_to_the_source(self):
        """Issue 19, item 8: the source binds the ports (issue 33)."""
        done, commands = unwind.unwind(self.manager, self.context,
                                       self.instance, 'compute0', self.entry)

        # nova's own release of this host's attachments, volumes only.
        self.manager._terminate_volume_connections.assert_called_once_with(
            self.context, self.instance, [self.bdms[0]])
        self.manager.network_api.assert_not_called()
        self.assertEqual([], self.manager.network_api.method_calls)
        self.assertEqual(1, len(done), done)
        # The source alone can connect the volume: said how.
        self.assertIn('nova-manage volume_attachment refresh %s %s '
                      'connector.json' % (uuids.instance, uuids.volume),
                      ' '.join(commands))
        self.assertNotIn('openstack port set', ' '.join(commands))

    def test_nothing_moved(self):
        self.bdms.objects = []

        done, commands = unwind.unwind(
            self.manager, self.context, self.instance, 'compute0', self.entry)

        self.assertEqual(([], []), (done, commands))
        self.manager._terminate_volume_connections.assert_not_called()

    def test_source_attachment_untouched(self):
        """Issue 28: not replaced (or not noted) is the source's."""
        for detached in ({uuids.volume: uuids.attachment}, {}):
            self.entry.detached = detached
            done, commands = unwind.unwind(
                self.manager, self.context, self.instance, 'compute0',
                self.entry)

            self.assertEqual(([], []), (done, commands))
            self.manager._terminate_volume_connections.assert_not_called()

    def test_block_device_info_only_what_spawn_here_was_given(self):
        """Issue 28: the source's connection info is never disconnected."""
        made = {'volume_id': uuids.volume, 'attachment_id': uuids.attachment}
        source = {'volume_id': uuids.other, 'attachment_id': uuids.source}
        self.entry.detached[uuids.other] = uuids.source
        self.manager._get_instance_block_device_info.return_value = {
            'block_device_mapping': [made, source], 'swap': None}
        for spawning, expected in ((False, []), (True, [made])):
            self.entry.spawning = spawning
            info = unwind.block_device_info(
                self.manager, self.context, self.instance, self.entry)
            self.assertEqual({'block_device_mapping': expected,
                              'swap': None}, info)
