# SPDX-License-Identifier: Apache-2.0

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
