# SPDX-License-Identifier: Apache-2.0

"""Real nova in-process for evacuation tests: the shared harness.

:class:`EvacuateTestCase` starts nova's API, conductor, scheduler, the
placement fixture from openstack-placement and two computes, ``compute0``
(the source) and ``compute1`` (the destination), on the fake libvirt driver.
It is used by this project's functional tests and by the reproduction
(:mod:`tests.reproduce`), so both tell the same story the same way.

Where the fix of a :attr:`EvacuateTestCase.FIXED` test comes from is chosen
with the environment variable ``NOVA_EVAC_CLEANUP_FIX``: ``mixin`` (the
default) starts the computes with this project's manager; ``patch`` starts
nova's own manager, for a nova patched with ``patches/``, which is then
required. Stock (``FIXED = False``) tests cannot pass on a patched nova.

It needs nova's test tree (shipped in nova's wheel) and openstack-placement;
nova must have been installed from its sdist, which installs
``etc/nova/api-paste.ini``.
"""

from importlib import metadata
import inspect
import io
import os
import sys

import fixtures
from nova.cmd import manage
from nova.compute import manager as compute_manager
import nova.conf as nova_conf
from nova.tests import fixtures as nova_fixtures
from nova.tests.functional import integrated_helpers
from nova import utils

from nova_evac_cleanup import conf as evac_conf
from nova_evac_cleanup import fixture as evac_fixture
from nova_evac_cleanup import host_lock
from tests.harness import fake_libvirt
from tests.harness import services

evac_conf.register_opts(nova_conf.CONF)

SOURCE = 'compute0'
DEST = 'compute1'

#: The values of NOVA_EVAC_CLEANUP_FIX.
FIX_MIXIN = 'mixin'
FIX_PATCH = 'patch'


def fix_mode():
    """Where the fix comes from: ``NOVA_EVAC_CLEANUP_FIX``."""
    mode = os.environ.get('NOVA_EVAC_CLEANUP_FIX') or FIX_MIXIN
    if mode not in (FIX_MIXIN, FIX_PATCH):
        raise ValueError('NOVA_EVAC_CLEANUP_FIX must be %r or %r, not %r' %
                         (FIX_MIXIN, FIX_PATCH, mode))
    return mode


def nova_is_patched():
    """Whether the installed nova has the fix of ``patches/``.

    The patched ``_rebuild_default_impl`` takes ``on_shared_storage``.
    """
    return 'on_shared_storage' in inspect.signature(
        compute_manager.ComputeManager._rebuild_default_impl).parameters


def api_paste_config():
    """Where nova's ``api-paste.ini`` was installed.

    nova's sdist installs it as a data file under the environment's prefix;
    the OSAPIFixture loads the API through it.
    """
    try:
        for path in metadata.distribution('nova').files or ():
            if path.name == 'api-paste.ini':
                return str(path.locate())
    except metadata.PackageNotFoundError:
        pass
    return os.path.join(sys.prefix, 'etc', 'nova', 'api-paste.ini')


class EvacuateTestCase(integrated_helpers.ProviderUsageBaseTestCase):
    """Two computes on the fake libvirt driver, ready to evacuate.

    Subclasses set :attr:`STORAGE` and :attr:`FIXED`.
    """

    compute_driver = fake_libvirt.DRIVER
    # 2.14 is needed for evacuate without onSharedStorage; from 2.95 an
    # evacuated server is left stopped, and these tests expect ACTIVE.
    microversion = '2.94'
    #: one of fake_libvirt.STORAGE_MODES
    STORAGE = 'non-shared'
    #: whether the computes run this project's compute manager
    FIXED = True

    def setUp(self):
        # The API fixture loads nova's paste pipeline from this file.
        self.flags(api_paste_config=api_paste_config(), group='wsgi')
        # nova's base test case sets up its CinderFixture without keeping
        # it; keep it, for the volume attachments it tracks.
        cinder_setup = nova_fixtures.CinderFixture.setUp

        def keep_cinder(fixture):
            self.cinder = fixture
            return cinder_setup(fixture)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.CinderFixture.setUp', keep_cinder))
        # Attachment statuses, per-host connection info, port revisions and
        # refused bindings, as cinder and neutron have them.
        services.install(self)
        super().setUp()
        # The hosts' disks, domains and the faults to inject.
        self.world = self.useFixture(
            fake_libvirt.FakeLibvirtFixture(storage=self.STORAGE)).world
        # Every host of the test shares this process and CONF: its journal
        # and instance directories are the fake world's, per host. As in
        # nova's libvirt functional tests, nova's own function gives each
        # host its directory.
        self.flags(journal_path=self.useFixture(fixtures.TempDir()).path,
                   group='evacuate_cleanup')
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.libvirt.utils.get_instance_path',
            self._get_instance_path))
        # Where the computes hold their host locks (nova's tests set no
        # lock_path).
        self.flags(lock_path=self.useFixture(fixtures.TempDir()).path,
                   group='oslo_concurrency')
        # The host locks each compute (or audit) took, by host: a test that
        # kills one releases them, as the kernel does for a dead process.
        self.host_locks = {}
        acquire = host_lock.acquire

        def acquire_and_note(host, *args, **kwargs):
            lock = acquire(host, *args, **kwargs)
            self.host_locks.setdefault(host, []).append(lock)
            return lock

        self.useFixture(fixtures.MonkeyPatch(
            'nova_evac_cleanup.host_lock.acquire', acquire_and_note))
        self.addCleanup(lambda: [self.release_host_lock(host)
                                 for host in list(self.host_locks)])
        if self.FIXED and fix_mode() == FIX_PATCH:
            # nova's own manager has the fix; say so if it has not.
            if not nova_is_patched():
                self.fail('NOVA_EVAC_CLEANUP_FIX=patch but the installed '
                          'nova is not patched with patches/')
        elif self.FIXED:
            # Every compute started from now on, restarted ones too, runs
            # the evacuation cleanup.
            self.useFixture(evac_fixture.EvacuateCleanupFixture())
        self.compute0 = self._start_compute(SOURCE)
        self.compute1 = self._start_compute(DEST)
        self.dest_rp = self._get_provider_uuid_by_host(DEST)

    def release_host_lock(self, host):
        """What the kernel does with the locks of a dead process."""
        for lock in self.host_locks.pop(host, []):
            host_lock.release(lock)

    def _get_instance_path(self, instance, relative=False):
        """nova's ``get_instance_path``, on the host whose code asks.

        The computes of a test share one process: the host is the one of
        the nearest compute manager on the caller's stack, as ``self`` or
        ``manager`` (the sweep, the audit and the recovery take it so).
        """
        if relative:
            return instance.uuid
        frame = sys._getframe(1)
        while frame is not None:
            for name in ('self', 'manager'):
                candidate = frame.f_locals.get(name)
                if isinstance(candidate, compute_manager.ComputeManager):
                    return self.world.instance_dir(candidate.host, instance)
            frame = frame.f_back
        raise AssertionError('get_instance_path called outside the code of a '
                             'compute service: on which host?')

    # Servers.

    def _boot(self, volume_backed=False):
        """Boot a server on the source host."""
        if volume_backed:
            server = self._build_server(
                image_uuid='', host=SOURCE, networks='none')
            server['block_device_mapping_v2'] = [{
                'boot_index': 0,
                'uuid': nova_fixtures.CinderFixture.IMAGE_BACKED_VOL,
                'source_type': 'volume',
                'destination_type': 'volume'}]
        else:
            server = self._build_server(host=SOURCE, networks='none')
        server = self.api.post_server({'server': server})
        return self._wait_for_state_change(server, 'ACTIVE')

    def _fail_source(self):
        """The source compute dies: stopped and forced down in the API."""
        self.compute0.stop()
        service = self.admin_api.get_services(
            binary='nova-compute', host=SOURCE)[0]
        self.admin_api.put_service_force_down(service['id'], True)

    def _evacuate(self, server, expected_state='ACTIVE',
                  expected_migration_status='done', on_shared_storage=None):
        """Evacuate a server to the destination through the REST API.

        :param on_shared_storage: None for the microversion >= 2.14 form;
            True or False to use the old form that passes
            ``onSharedStorage`` (microversion 2.1).
        """
        args = {'host': DEST}
        microversion = self.admin_api.microversion
        if on_shared_storage is not None:
            args['onSharedStorage'] = on_shared_storage
            microversion = '2.1'
        kwargs = {}
        if expected_state == 'ACTIVE':
            kwargs['expected_host'] = DEST
        # Only this request uses the old microversion: later calls, like
        # the hypervisor lookups of the placement audit, need the newer.
        with utils.temporary_mutation(self.admin_api,
                                      microversion=microversion):
            return self._evacuate_server(
                server, args, expected_state=expected_state,
                expected_task_state=None,
                expected_migration_status=expected_migration_status,
                **kwargs)

    def _fail_evacuation(self, server, stage, on_shared_storage=None):
        """Evacuate with a spawn failure at ``stage`` on the destination.

        :returns: the server after the evacuation and the injected error
        """
        fired = self.world.fired(DEST, stage)
        error = self.world.inject_spawn_fault(DEST, stage)
        server = self._evacuate(server, expected_state='ERROR',
                                expected_migration_status='failed',
                                on_shared_storage=on_shared_storage)
        # Meta-test: the failure did happen where it was injected.
        self.assertEqual(fired + 1, self.world.fired(DEST, stage))
        return server, error

    def _rebuilds_ended(self):
        """The instances whose rebuild_instance on compute1 has ended.

        The server is ERROR before compute1 is done with the evacuation:
        checks wait for compute1's RPC handler itself to return or raise.
        """
        manager = self.compute1.manager
        real = manager.rebuild_instance
        ended = []

        def rebuild_instance(context, instance, *args, **kwargs):
            try:
                return real(context, instance, *args, **kwargs)
            finally:
                ended.append(instance.uuid)

        # The RPC dispatcher looks the method up on the manager object.
        manager.rebuild_instance = rebuild_instance
        return ended

    # What is left.

    def assert_failed_and_cleaned(self, server, error):
        """nova's part and the cleanup's, after a spawn that failed.

        The server ERROR on its source with the spawn error as its fault;
        on the destination no guest, no file, no directory, no allocation.
        """
        self.assertEqual('ERROR', server['status'])
        self.assertEqual(SOURCE, server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual('FakeLibvirtError', server['fault']['message'])
        self.assertIn(str(error), server['fault']['details'])
        self.assertIsNone(self.world.domain_state(DEST, server['id']))
        self.assertEqual({}, self.world.files(DEST, server['id']))
        self.assertFalse(os.path.exists(
            self.world.instance_dir(DEST, server['id'])))
        self.assertIsNone(self._dest_allocation(server))

    def _dest_allocation(self, server):
        """The server's allocation against the destination, or None."""
        allocations = self._get_allocations_by_server_uuid(server['id'])
        return allocations.get(self.dest_rp)

    def _run_audit(self, delete=False, as_json=False, host=DEST):
        """Run ``nova-evac-cleanup audit`` for ``host``, in-process.

        :returns: its return code, what it printed on standard output and
            what on standard error
        """
        from nova_evac_cleanup.cmd import audit as audit_cmd

        out, err = io.StringIO(), io.StringIO()
        build = audit_cmd.build_manager

        def build_manager(host, **kwargs):
            compute = build(host, **kwargs)
            # The fake driver learns its host in init_host, which the audit
            # skips without --delete; libvirt's reaches libvirtd without it.
            compute.driver._host = host
            return compute

        with fixtures.MonkeyPatch(
                'nova_evac_cleanup.cmd.audit.build_manager', build_manager):
            with fixtures.MonkeyPatch('sys.stderr', err):
                code = audit_cmd.run(delete=delete, as_json=as_json, out=out,
                                     host=host)
        return code, out.getvalue(), err.getvalue()

    def _placement_audit(self, host=DEST):
        """Run ``nova-manage placement audit --verbose`` for one host.

        Only one host is audited: while the source compute is down, nova
        keeps a successfully evacuated instance's allocation against it
        until it restarts, which the audit reports as orphaned.

        :returns: its return code (0: no orphaned allocation, 3: some) and
            its output
        """
        output = io.StringIO()
        with fixtures.MonkeyPatch('sys.stdout', output):
            code = manage.PlacementCommands().audit(
                verbose=True,
                provider_uuid=self._get_provider_uuid_by_host(host))
        return code, output.getvalue()
