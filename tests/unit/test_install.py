# SPDX-License-Identifier: Apache-2.0

"""Tests of how a deployer turns the cleanup on, and of its options."""

import sys
import types
from unittest import mock

import fixtures
from nova import service
from nova import test
from oslo_config import cfg
from oslo_config import fixture as config_fixture

import nova_evac_cleanup
from nova_evac_cleanup.cmd import compute as compute_cmd
from nova_evac_cleanup import conf
from nova_evac_cleanup import fixture as evac_fixture


class TestInstall(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        # Restore nova's table whatever the test does to it.
        self.useFixture(fixtures.MonkeyPatch(
            'nova.service.SERVICE_MANAGERS', dict(service.SERVICE_MANAGERS)))

    def test_install_sets_compute_manager(self):
        nova_evac_cleanup.install()

        self.assertEqual('nova_evac_cleanup.manager.ComputeManager',
                         service.SERVICE_MANAGERS['nova-compute'])
        # Other services keep nova's managers.
        self.assertEqual('nova.conductor.manager.ConductorManager',
                         service.SERVICE_MANAGERS['nova-conductor'])

    def test_install_is_idempotent(self):
        nova_evac_cleanup.install()
        first = dict(service.SERVICE_MANAGERS)
        nova_evac_cleanup.install()

        self.assertEqual(first, service.SERVICE_MANAGERS)

    def test_manager_path_imports(self):
        from nova_evac_cleanup import manager

        module, _, name = nova_evac_cleanup.COMPUTE_MANAGER.rpartition('.')
        self.assertEqual(manager.__name__, module)
        self.assertIs(manager.ComputeManager, getattr(manager, name))

    def test_service_create_uses_manager(self):
        # nova's own service factory picks the manager up from the table.
        nova_evac_cleanup.install()
        with mock.patch.object(service.Service, '__init__',
                               return_value=None) as mock_init:
            service.Service.create(binary='nova-compute', topic='compute')

        self.assertEqual('nova_evac_cleanup.manager.ComputeManager',
                         mock_init.call_args.args[3])

    def test_console_script_installs_then_runs_nova(self):
        # nova.cmd sets up threading on import, which these eventlet
        # patched tests must not do: give the script a stand-in.
        calls = []
        nova_cmd = types.ModuleType('nova.cmd')
        nova_cmd.compute = types.ModuleType('nova.cmd.compute')
        nova_cmd.compute.main = lambda: calls.append(
            service.SERVICE_MANAGERS['nova-compute'])
        with mock.patch.dict(sys.modules, {
                'nova.cmd': nova_cmd, 'nova.cmd.compute': nova_cmd.compute}):
            compute_cmd.main()

        self.assertEqual(['nova_evac_cleanup.manager.ComputeManager'], calls)


class TestFixture(test.NoDBTestCase):

    def test_fixture_installs_and_restores(self):
        before = dict(service.SERVICE_MANAGERS)
        fixture = evac_fixture.EvacuateCleanupFixture()

        with fixture:
            self.assertEqual('nova_evac_cleanup.manager.ComputeManager',
                             service.SERVICE_MANAGERS['nova-compute'])
        self.assertEqual(before, service.SERVICE_MANAGERS)


class TestOpts(test.NoDBTestCase):

    def test_list_opts(self):
        opts = conf.list_opts()

        self.assertEqual(1, len(opts))
        group, group_opts = opts[0]
        self.assertEqual('evacuate_cleanup', group)
        self.assertEqual(['enabled', 'sweep_on_start', 'journal_path'],
                         [opt.name for opt in group_opts])
        self.assertIs(True, group_opts[0].default)
        self.assertEqual('clean', group_opts[1].default)
        self.assertEqual(['clean', 'report', 'off'],
                         list(group_opts[1].type.choices))
        # A copy: the generator may not change the registered options.
        self.assertIsNot(conf._opts[0], group_opts[0])

    def test_register_opts(self):
        config = self.useFixture(
            config_fixture.Config(cfg.ConfigOpts())).conf
        conf.register_opts(config)

        self.assertTrue(config.evacuate_cleanup.enabled)
        self.assertEqual('clean', config.evacuate_cleanup.sweep_on_start)
        self.assertRaises(ValueError, config.set_override, 'sweep_on_start',
                          'delete', group='evacuate_cleanup')

    def test_entry_point(self):
        from importlib import metadata

        points = [ep for ep in metadata.entry_points(group='oslo.config.opts')
                  if ep.name == 'nova_evac_cleanup']
        self.assertEqual(1, len(points))
        self.assertIs(conf.list_opts, points[0].load())
