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

"""Tests of how a deployer turns the cleanup on, and of its options."""

import inspect
import sys
import types
from unittest import mock

import fixtures
from nova.compute import manager as nova_manager
from nova import service
from nova import test
from oslo_config import cfg
from oslo_config import fixture as config_fixture

import nova_evac_cleanup
from nova_evac_cleanup.cmd import compute as compute_cmd
from nova_evac_cleanup import conf
from nova_evac_cleanup import fixture as evac_fixture
from nova_evac_cleanup import spawn_failure


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


class NotSpawn(Exception):
    """An error raised by something nova calls around spawn."""


class TestSpawnFailure(test.NoDBTestCase):
    """The spawn call found in the installed nova is the one that raises.

    nova's real ``_rebuild_default_impl`` runs with everything it calls
    mocked; one of those calls raises, and the traceback must say "spawn"
    for the ``driver.spawn`` call and for nothing else.
    """

    def _rebuild_traceback(self, fail, evacuate=True):
        """Run nova's default rebuild until ``fail`` raises.

        :param fail: a function of the mocked manager, instance and block
            device callbacks that makes one of them raise
        :returns: the traceback of the exception that left nova's code
        """
        manager = mock.Mock()
        manager.driver.spawn.return_value = None
        instance = mock.MagicMock()
        instance.flavor.extra_specs = {}
        detach = mock.Mock()
        attach = mock.Mock(return_value=mock.sentinel.block_device_info)
        fail(manager, instance, detach, attach)
        impl = inspect.unwrap(
            nova_manager.ComputeManager._rebuild_default_impl)
        try:
            impl(manager, mock.sentinel.context, instance,
                 mock.sentinel.image_meta, [], None, {}, [], detach, attach,
                 network_info=mock.sentinel.network_info, evacuate=evacuate,
                 block_device_info=None, accel_uuids=[])
        except Exception as error:
            self.assertIsInstance(error, NotSpawn)
            return error.__traceback__
        self.fail('nova\'s _rebuild_default_impl did not raise')

    @property
    def code(self):
        return spawn_failure._rebuild_default_impl()[0]

    @property
    def spawn_call(self):
        return spawn_failure._rebuild_default_impl()[1]

    def _lasti(self, tb):
        """The offset at which the exception left nova's frame."""
        while tb is not None:
            if tb.tb_frame.f_code is self.code:
                return tb.tb_lasti
            tb = tb.tb_next
        self.fail('no frame of nova\'s _rebuild_default_impl')

    def test_spawn_error_is_told(self):
        def fail(manager, instance, detach, attach):
            manager.driver.spawn.side_effect = NotSpawn('spawn')

        tb = self._rebuild_traceback(fail)

        self.assertIn(self._lasti(tb), self.spawn_call)
        self.assertTrue(spawn_failure.raised_by_spawn(tb))

    def test_errors_around_spawn_are_not(self):
        # Every call nova makes before and after spawn on an evacuation,
        # and on a plain rebuild, its destroy of the old guest.
        def raising(name):
            def fail(manager, instance, detach, attach):
                target = {
                    'detach': detach,
                    'attach': attach,
                    'save': instance.save,
                    'enter': instance.mutated_migration_context.
                    return_value.__enter__,
                    'exit': instance.mutated_migration_context.
                    return_value.__exit__,
                    'destroy': manager.driver.destroy,
                }[name]
                target.side_effect = NotSpawn(name)
            return fail

        for name in ('detach', 'attach', 'save', 'enter', 'exit'):
            tb = self._rebuild_traceback(raising(name))
            self.assertNotIn(self._lasti(tb), self.spawn_call,
                             name)
            self.assertFalse(spawn_failure.raised_by_spawn(tb), name)
        tb = self._rebuild_traceback(raising('destroy'), evacuate=False)
        self.assertNotIn(self._lasti(tb), self.spawn_call)
        self.assertFalse(spawn_failure.raised_by_spawn(tb))

    def test_nova_without_spawn_call(self):
        """A nova that no longer calls spawn there: the cleanup never runs.

        Issue 19, item 11: nova-compute still starts, as nova's own.
        """
        def rebuild(self):
            self.driver.destroy()

        def fail(manager, instance, detach, attach):
            manager.driver.spawn.side_effect = NotSpawn('spawn')

        self.assertIsNone(spawn_failure._spawn_call_offsets(rebuild.__code__))
        tb = self._rebuild_traceback(fail)
        with mock.patch.object(spawn_failure, '_rebuild_default_impl',
                               return_value=(rebuild.__code__, None)):
            self.assertIn('no longer calls driver.spawn',
                          spawn_failure.problem())
            self.assertFalse(spawn_failure.raised_by_spawn(tb))

    def test_not_from_rebuild(self):
        try:
            raise ValueError()
        except ValueError as error:
            self.assertFalse(spawn_failure.raised_by_spawn(
                error.__traceback__))
        self.assertFalse(spawn_failure.raised_by_spawn(None))
