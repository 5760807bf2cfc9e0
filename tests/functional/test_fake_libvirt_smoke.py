# SPDX-License-Identifier: Apache-2.0

"""nova's functional test services run on the fake libvirt driver.

Stock nova is used here (no evacuation cleanup), so these tests also show
the bug: an evacuation whose spawn fails on the destination leaves the
domain and files behind there.
"""

import os
import sys

from nova import test
from nova.tests import fixtures as nova_fixtures
from nova.tests.functional import fixtures as func_fixtures
from nova.tests.functional import integrated_helpers

from tests.harness import fake_libvirt


class _SmokeBase(test.TestCase, integrated_helpers.InstanceHelperMixin):

    storage = 'non-shared'

    def setUp(self):
        super().setUp()
        # nova's sdist installs api-paste.ini under the environment prefix;
        # the API fixture loads the API pipeline from it.
        # It is in [wsgi]; nova 31 has no deprecated [DEFAULT] alias.
        self.flags(api_paste_config=os.path.join(
            sys.prefix, 'etc', 'nova', 'api-paste.ini'), group='wsgi')
        self.libvirt = self.useFixture(
            fake_libvirt.FakeLibvirtFixture(storage=self.storage))
        self.world = self.libvirt.world
        self.useFixture(nova_fixtures.NeutronFixture(self))
        self.useFixture(nova_fixtures.GlanceFixture(self))
        self.useFixture(nova_fixtures.CinderFixture(self))
        self.useFixture(func_fixtures.PlacementFixture())
        api_fixture = self.useFixture(nova_fixtures.OSAPIFixture(
            api_version='v2.1'))
        self.api = api_fixture.admin_api
        self.admin_api = api_fixture.admin_api
        # From 2.95 an evacuated server is left stopped.
        self.api.microversion = '2.94'
        self.flags(compute_driver=fake_libvirt.DRIVER)
        self.start_service('conductor')
        self.start_service('scheduler')
        self.compute0 = self.start_service('compute', host='compute0')
        self.compute1 = self.start_service('compute', host='compute1')

    def _boot(self):
        server = self._create_server(host='compute0', networks='none')
        self.assertEqual('compute0', server['OS-EXT-SRV-ATTR:host'])
        return server

    def _force_down(self, compute):
        compute.stop()
        service_id = self.admin_api.get_services(
            host=compute.host, binary='nova-compute')[0]['id']
        self.admin_api.put_service(service_id, {'forced_down': 'true'})
        return service_id


class NonSharedSmokeTest(_SmokeBase):

    def test_boot(self):
        server = self._boot()
        self.assertEqual('ACTIVE', server['status'])
        self.assertTrue(self.world.disk_is_complete('compute0', server['id']))
        self.assertEqual('running',
                         self.world.domain_state('compute0', server['id']))
        self.assertEqual({}, self.world.files('compute1', server['id']))
        self.assertEqual(1, self.world.calls('compute0')['spawn'])

    def test_evacuate_and_restart_source(self):
        server = self._boot()
        service_id = self._force_down(self.compute0)
        server = self._evacuate_server(
            server, expected_host='compute1', expected_state='ACTIVE')
        self.assertEqual('running',
                         self.world.domain_state('compute1', server['id']))
        # Not shared: a new disk from the image on the destination.
        self.assertEqual(2, self.world.disk_generation('compute1',
                                                       server['id']))
        # The source comes back and destroys its copy with its disks.
        self.compute0 = self.restart_compute_service(self.compute0)
        self.admin_api.put_service(service_id, {'forced_down': 'false'})
        self.assertIsNone(self.world.domain_state('compute0', server['id']))
        self.assertEqual({}, self.world.files('compute0', server['id']))
        self.assertEqual(1, self.world.calls('compute0')['destroy'])

    def test_failed_evacuate_leaves_debris(self):
        server = self._boot()
        self._force_down(self.compute0)
        self.world.inject_spawn_fault('compute1', 'wait_for_boot')
        self._evacuate_server(
            server, expected_state='ERROR',
            expected_migration_status='failed')
        self.assertEqual(1, self.world.fired('compute1', 'wait_for_boot'))
        # Stock nova leaves the domain and files on the destination.
        self.assertEqual('running',
                         self.world.domain_state('compute1', server['id']))
        self.assertTrue(self.world.disk_is_complete('compute1', server['id']))


class RbdSmokeTest(_SmokeBase):

    storage = 'rbd'

    def test_evacuate_and_restart_source_keeps_image(self):
        server = self._boot()
        checksum = self.world.disk_checksum('compute0', server['id'])
        service_id = self._force_down(self.compute0)
        server = self._evacuate_server(
            server, expected_host='compute1', expected_state='ACTIVE')
        # Shared block storage: the image is reused.
        self.assertEqual(1, self.world.disk_generation('compute1',
                                                       server['id']))
        self.compute0 = self.restart_compute_service(self.compute0)
        self.admin_api.put_service(service_id, {'forced_down': 'false'})
        self.assertIsNone(self.world.domain_state('compute0', server['id']))
        # The source destroyed with destroy_disks=False: the image stays.
        self.assertEqual(checksum,
                         self.world.disk_checksum('compute1', server['id']))
        self.assertEqual('running',
                         self.world.domain_state('compute1', server['id']))
