# SPDX-License-Identifier: Apache-2.0

"""The story ``tox -e reproduce`` tells, played on real nova in-process.

:func:`play` runs :class:`StoryTestCase`, a one-test subclass of the
functional harness' :class:`EvacuateTestCase`, and returns what it observed
as a plain, JSON-serialisable dict: boot a server on compute0, fail
compute0, evacuate to compute1 with a spawn failure injected at a stage,
look at what is left on compute1, evacuate again without a fault.

This module imports nova: import it only once nova's eventlet monkey
patching is done (see :mod:`tests.reproduce.cli`).
"""

import logging
import os
import time
import traceback

import testtools

from tests.harness import fake_libvirt
from tests.harness import functional

SOURCE = functional.SOURCE
DEST = functional.DEST

#: How long to wait for the second evacuation to settle, in seconds.
RETRY_TIMEOUT = 60


class StoryTestCase(functional.EvacuateTestCase):
    """Boot, fail the source, fail the evacuation, look, evacuate again.

    :attr:`STORAGE`, :attr:`FIXED` and :attr:`STAGE` are set on a subclass
    per run; :attr:`story` (a dict to fill) and :attr:`progress` (a callable
    taking one line) on the instance before it is run.
    """

    STAGE = 'get_guest_xml'
    #: where nova's log records go live (-v), or None
    LOG_STREAM = None
    LOG_LEVEL = logging.INFO

    def setUp(self):
        self.progress('starting nova: database, API, conductor, scheduler, '
                      'placement, compute0 and compute1 ...')
        started = time.monotonic()
        super().setUp()
        if self.LOG_STREAM is not None:
            # nova's StandardLogging captures every record; also show them.
            handler = logging.StreamHandler(self.LOG_STREAM)
            handler.setLevel(self.LOG_LEVEL)
            handler.setFormatter(logging.Formatter(
                '%(asctime)s %(levelname)s [%(name)s] %(message)s'))
            root = logging.getLogger()
            root.addHandler(handler)
            self.addCleanup(root.removeHandler, handler)
        self.progress('nova is up (%.1f s)' % (time.monotonic() - started))

    def test_story(self):
        story = self.story
        world = self.world

        self.progress('step 1: booting a server on compute0 ...')
        server = self._boot()
        uuid = server['id']
        story['server'] = {
            'id': uuid, 'name': server['name'],
            # the libvirt domain name, as virsh shows it
            'instance_name': server['OS-EXT-SRV-ATTR:instance_name']}
        story['boot'] = {
            'status': server['status'],
            'host': server['OS-EXT-SRV-ATTR:host'],
            'disk_path': world.disk_path(SOURCE, uuid),
            'disk_size': _size(world.disk_path(SOURCE, uuid)),
            'instance_dir': world.instance_dir(SOURCE, uuid),
            'files': world.files(SOURCE, uuid),
        }
        # What compute1 sees of the disk before anything happens there: on
        # shared and rbd storage it is compute0's disk, which must survive.
        shared_before = world.disk_checksum(DEST, uuid)
        story['boot']['shared_disk_checksum'] = shared_before

        self.progress('step 2: stopping compute0 and forcing it down ...')
        self._fail_source()
        service = self.admin_api.get_services(
            binary='nova-compute', host=SOURCE)[0]
        story['source_failure'] = {
            'state': service['state'], 'forced_down': service['forced_down']}

        self.progress('step 3: evacuating to compute1 with a failure at %s; '
                      'waiting for nova ...' % self.STAGE)
        server, error = self._fail_evacuation(server, self.STAGE)
        failed_spawn = world.spawns(DEST, uuid)[-1]
        story['failed_evacuation'] = dict(
            _server_summary(server),
            injected_error='%s: %s' % (type(error).__name__, error),
            spawn_generation=failed_spawn.generation,
            stages_entered=list(failed_spawn.stages),
            driver_cleaned_up=failed_spawn.cleaned_up,
            migration_status=self._latest_migration(uuid)['status'])

        self.progress('step 4: looking at compute1 ...')
        after = self._look_at_dest(server, shared_before)
        code, output = self._placement_audit()
        after['placement_audit'] = {'exit_code': code,
                                    'output': output.strip()}
        story['after_failure'] = after

        self.progress('step 5: evacuating to compute1 again, no failure '
                      'injected; waiting for nova ...')
        previous = self._latest_migration(uuid)['id']
        self.admin_api.post_server_action(uuid, {'evacuate': {'host': DEST}})
        migration = self._wait_for_new_migration(uuid, previous)
        server = self._wait_for_settled(uuid)
        retry = dict(_server_summary(server),
                     migration_status=migration['status'])
        retry.update(self._look_at_dest(server, shared_before))
        spawns = world.spawns(DEST, uuid)
        retry['spawn_generation'] = spawns[-1].generation if spawns else None
        story['retry'] = retry

    # Observations.

    def _look_at_dest(self, server, shared_before):
        """What the server has on compute1 right now."""
        world = self.world
        uuid = server['id']
        instance_dir = world.instance_dir(DEST, uuid)
        files = world.files(DEST, uuid)
        # compute1's own storage: its instances directory, unless that is
        # the directory every host shares; never the rbd pool.
        if world.storage == 'shared':
            own_files = {}
        else:
            own_files = {name: size for name, size in files.items()
                         if name != fake_libvirt.RBD_DISK_KEY}
        shared_now = world.disk_checksum(DEST, uuid)
        allocation = self._dest_allocation(server)
        return {
            'domain': world.domain_state(DEST, uuid),
            'instance_dir': instance_dir,
            'instance_dir_exists': os.path.isdir(instance_dir),
            'own_dir_exists': (world.storage != 'shared' and
                               os.path.isdir(instance_dir)),
            'files': files,
            'own_files': own_files,
            'own_bytes': sum(own_files.values()),
            'disk_path': world.disk_path(DEST, uuid),
            'disk_generation': world.disk_generation(DEST, uuid),
            'disk_complete': world.disk_is_complete(DEST, uuid),
            'shared_disk_unchanged': (
                None if world.storage == 'non-shared'
                else shared_now == shared_before),
            'allocation': allocation and allocation['resources'],
            'allocation_provider': allocation and self.dest_rp,
        }

    def _migrations(self, uuid):
        migrations = self.admin_api.api_get(
            '/os-migrations').body['migrations']
        return sorted((m for m in migrations if m['instance_uuid'] == uuid),
                      key=lambda m: m['id'])

    def _latest_migration(self, uuid):
        return self._migrations(uuid)[-1]

    def _wait_for_new_migration(self, uuid, previous):
        """Wait until a migration newer than ``previous`` has finished."""
        deadline = time.monotonic() + RETRY_TIMEOUT
        while True:
            latest = self._latest_migration(uuid)
            if (latest['id'] != previous and
                    latest['status'] in ('done', 'failed', 'error')):
                return latest
            if time.monotonic() > deadline:
                self.fail('the second evacuation did not finish within %d s '
                          '(migration status %r)' % (RETRY_TIMEOUT,
                                                     latest['status']))
            time.sleep(0.2)

    def _wait_for_settled(self, uuid):
        """Wait until the server has no task and, if ERROR, its fault."""
        deadline = time.monotonic() + RETRY_TIMEOUT
        while True:
            server = self.admin_api.get_server(uuid)
            if (server['OS-EXT-STS:task_state'] is None and
                    (server['status'] != 'ERROR' or 'fault' in server)):
                return server
            if time.monotonic() > deadline:
                self.fail('the server did not settle within %d s'
                          % RETRY_TIMEOUT)
            time.sleep(0.2)


def _size(path):
    try:
        return os.path.getsize(path)
    except OSError:
        return None


def _server_summary(server):
    fault = server.get('fault') or {}
    details = (fault.get('details') or '').strip().splitlines()
    return {
        'status': server['status'],
        'host': server['OS-EXT-SRV-ATTR:host'],
        'fault_message': fault.get('message'),
        # The last line of the traceback nova recorded: the exception.
        'fault_details': details[-1].strip() if details else None,
    }


def play(fixed, stage, storage, progress, log_stream=None,
         log_level=logging.INFO):
    """Run the story once on fresh nova services.

    :param fixed: whether the computes run this project's manager
    :param progress: a callable taking one line of progress
    :param log_stream: a stream to show nova's log records on, or None
    :returns: the observations, a dict; ``error`` is set (a one-line
        message) and ``traceback`` to the full text if the story could not
        be played to its end
    """
    cls = type('FixedStory' if fixed else 'StockStory', (StoryTestCase,), {
        'FIXED': fixed, 'STORAGE': storage, 'STAGE': stage,
        'LOG_STREAM': log_stream, 'LOG_LEVEL': log_level})
    test = cls('test_story')
    story = {'fixed': fixed, 'stage': stage, 'storage': storage,
             'error': None, 'traceback': None}
    test.story = story
    test.progress = progress

    def on_exception(exc_info):
        if story['error'] is None:
            story['error'] = ''.join(traceback.format_exception_only(
                exc_info[0], exc_info[1])).strip().splitlines()[-1]
            story['traceback'] = ''.join(traceback.format_exception(
                *exc_info))

    test.addOnException(on_exception)
    result = testtools.TestResult()
    started = time.monotonic()
    test.run(result)
    story['elapsed_seconds'] = round(time.monotonic() - started, 1)
    if story['error'] is None and (not result.wasSuccessful() or
                                   'retry' not in story):
        problems = result.errors + result.failures
        story['error'] = 'the story did not run to its end'
        story['traceback'] = problems[0][1] if problems else None
    return story
