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

"""A fixture for other projects' tests of nova with the evacuation cleanup.

Public API, like oslo.concurrency's ``fixture`` package: never imported by
the compute manager or the operator's command. It needs ``fixtures``,
which ``pip install nova-evac-cleanup[testing]`` installs.
"""

import fixtures

import nova_evac_cleanup


class EvacuateCleanupFixture(fixtures.Fixture):
    """Make every compute service a test starts use this project's manager.

    nova's functional tests create services through
    ``nova.service.Service.create``, which looks the manager up in
    ``nova.service.SERVICE_MANAGERS``; so does
    ``nova.test.TestCase.restart_compute_service``, which starts a plain
    ``start_service('compute')``. Patching the table, rather than passing a
    manager to ``start_service``, therefore also covers restarted computes.
    The table is restored on cleanup.

    Example::

        def setUp(self):
            super().setUp()
            self.useFixture(EvacuateCleanupFixture())
            self.compute1 = self.start_service('compute', host='compute1')
    """

    def _setUp(self):
        # Imported here, once the test has loaded nova: on nova 31,
        # nova.service imported first fails (webob.dec not loaded yet).
        from nova import service

        self.useFixture(fixtures.MonkeyPatch(
            'nova.service.SERVICE_MANAGERS',
            dict(service.SERVICE_MANAGERS)))
        nova_evac_cleanup.install()
