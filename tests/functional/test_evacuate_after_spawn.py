# SPDX-License-Identifier: Apache-2.0

"""Evacuations that fail after spawn returned: the guest runs on compute1.

``driver.spawn`` succeeded on compute1, but the evacuation fails before
nova records the instance there, at one of the points after spawn:

* ``save``: nova saves the instance expecting ``rebuild_spawning`` and an
  operator has reset its state meanwhile (``UnexpectedTaskStateError``);
* ``delete``: the server is deleted meanwhile (its source is down, so the
  API deletes it locally);
* ``power``: a stopped server is brought back to its state and powering
  it off on compute1 fails;
* ``notify``: the ``instance.rebuild.end`` notification fails;
* ``finish``: ``ResourceTracker.finish_evacuation`` fails to record the
  instance on compute1.

nova then puts the server into ERROR on compute0 (or finishes deleting it)
and, on stock nova, leaves the guest running on compute1: the most
dangerous leftover, a second writer on the server's disks and volumes if
the source is brought back. The fix destroys it, removes its disks only
off shared storage, and the evacuation ends failed with nothing counted on
compute1.
"""

import time

import fixtures
from nova.compute import resource_tracker
from nova.compute import utils as compute_utils
from nova import context as nova_context
from nova import objects
from nova.objects import fields
from nova import utils

from tests.harness import fake_libvirt
from tests.harness import functional as base

SOURCE = base.SOURCE
DEST = base.DEST


class InjectedFailure(Exception):
    """A failure after spawn, injected on compute1."""


class _Points(object):
    """One test per point after spawn; ``_run(point)`` says what holds."""

    def test_save_after_reset_state(self):
        self._run('save')

    def test_deleted_meanwhile(self):
        self._run('delete')

    def test_power_off_of_stopped_server(self):
        self._run('power')

    def test_rebuild_end_notification(self):
        self._run('notify')

    def test_finish_evacuation(self):
        self._run('finish')


class _AfterSpawnTest(base.EvacuateTestCase):

    def _evacuate_and_fail(self, point, server):
        """Evacuate to compute1 and fail after spawn at ``point``.

        :returns: the server, None once deleted
        """
        self.dest_usages = self._get_provider_usages(self.dest_rp)
        if point == 'power':
            self.api.post_server_action(server['id'], {'os-stop': None})
            server = self._wait_for_state_change(server, 'SHUTOFF')
            self._inject(fake_libvirt.FakeLibvirtDriver, 'power_off')
        elif point == 'notify':
            self._inject_notification()
        elif point == 'finish':
            self._inject(resource_tracker.ResourceTracker,
                         'finish_evacuation')
        self._fail_source()
        held = self.world.block_spawn(DEST, 'wait_for_boot')
        self.addCleanup(held.release)
        self.api.post_server_action(server['id'],
                                    {'evacuate': {'host': DEST}})
        self.assertTrue(held.wait_reached(timeout=30))
        if point == 'save':
            self.api.post_server_action(
                server['id'], {'os-resetState': {'state': 'active'}})
        elif point == 'delete':
            self.api.delete_server(server['id'])
        held.release()
        if point == 'delete':
            self._wait_until_deleted(server)
            server = None
        else:
            server = self._wait_for_state_change(server, 'ERROR')
        return server

    def _migration_status(self, uuid, expected=None):
        """The evacuation's status, once it is ``expected`` if given."""
        context = nova_context.get_admin_context()
        for _attempt in range(50):
            with utils.temporary_mutation(context, read_deleted='yes'):
                [migration] = objects.MigrationList.get_by_filters(
                    context, {'instance_uuid': uuid,
                              'migration_type': 'evacuation'})
            if expected is None or migration.status == expected:
                break
            time.sleep(0.1)
        return migration.status

    def _inject(self, cls, name):
        """Make ``cls.name`` raise on compute1, once."""
        real = getattr(cls, name)
        fired = []

        def fail_on_dest(obj, *args, **kwargs):
            host = getattr(obj, 'host', None) or getattr(obj, '_host', None)
            if host == DEST and not fired:
                fired.append(True)
                raise InjectedFailure('%s failed on %s' % (name, DEST))
            return real(obj, *args, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            '%s.%s.%s' % (cls.__module__, cls.__name__, name), fail_on_dest))

    def _inject_notification(self):
        real = compute_utils.notify_about_instance_rebuild

        fired = []

        def fail_on_dest(context, instance, host, *args, **kwargs):
            if (host == DEST and not fired and
                    kwargs.get('phase') == fields.NotificationPhase.END):
                fired.append(True)
                raise InjectedFailure('rebuild.end failed on %s' % DEST)
            return real(context, instance, host, *args, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            'nova.compute.utils.notify_about_instance_rebuild',
            fail_on_dest))


class _FixedAfterSpawnTest(_AfterSpawnTest):

    FIXED = True

    def assert_ended(self, point, server, disk=None):
        """Nothing of the server runs or counts on compute1."""
        self.assertIsNone(self.world.domain_state(DEST, self.uuid))
        if self.STORAGE == 'non-shared':
            self.assertEqual({}, self.world.files(DEST, self.uuid))
        else:
            self.assertEqual(disk, self.world.disk_checksum(DEST, self.uuid))
        self._run_periodics()
        self.assertEqual(self.dest_usages,
                         self._get_provider_usages(self.dest_rp))
        code, output = self._placement_audit()
        self.assertEqual(0, code, output)
        if server is None:
            return
        self.assertEqual(SOURCE, server['OS-EXT-SRV-ATTR:host'])
        self.assertIsNone(self._dest_allocation(server))
        # The operator's next step works: evacuate again, to compute1.
        self.world.clear_faults()
        self._evacuate(server)
        self.assertEqual('running',
                         self.world.domain_state(DEST, self.uuid))

    def _run(self, point):
        server = self._boot()
        self.uuid = server['id']
        disk = self.world.disk_checksum(SOURCE, self.uuid)
        server = self._evacuate_and_fail(point, server)
        self.assertEqual('failed', self._migration_status(self.uuid,
                                                          'failed'))
        self.assert_ended(point, server, disk)


class NonSharedFixedTest(_Points, _FixedAfterSpawnTest):
    STORAGE = 'non-shared'


class SharedDirFixedTest(_Points, _FixedAfterSpawnTest):
    STORAGE = 'shared'


class NonSharedStockTest(_Points, _AfterSpawnTest):
    """Stock nova leaves the guest running on compute1 at every point."""

    FIXED = False
    STORAGE = 'non-shared'

    def _run(self, point):
        server = self._boot()
        uuid = server['id']
        server = self._evacuate_and_fail(point, server)
        self.assertEqual('running', self.world.domain_state(DEST, uuid))
        if server is not None:
            self.assertEqual(SOURCE, server['OS-EXT-SRV-ATTR:host'])
        # The evacuation failed; nova's finish_evacuation failing even
        # leaves it pre-migrating.
        status = 'pre-migrating' if point == 'finish' else 'failed'
        self.assertEqual(status, self._migration_status(uuid, status))


class FinishEvacuationTest(_AfterSpawnTest):
    """``rt.finish_evacuation`` fails before or after recording the server.

    Issue 19, item 7. ``finish_evacuation`` applies the migration context
    to the instance, sets its host to compute1 and saves it, drops the
    migration context and marks the migration ``done``.

    * Its save fails: nothing recorded the server on compute1, so its
      guest there is destroyed, the migration fails and compute1's
      allocation goes, as for a failure inside the rebuild; and nova's own
      error handling, which saves the instance it was given, must not
      record it on compute1 with compute1's resources after all.
    * A later step fails: the server is recorded on compute1 and lives
      there. Its guest and compute1's allocation are kept, and what
      ``finish_evacuation`` had left to do is done: the migration ``done``
      (issue 18, cell ``evacuate Migration.save#2 raise``: left
      ``pre-migrating`` it was stuck, and the conductor took it for the
      next evacuation's), so that compute0's start-up reaps its own copy.
      Before the fix the guest was kept but the allocation was removed and
      the migration set to ``failed``.
    """

    FIXED = True
    STORAGE = 'non-shared'

    def _fail_once(self, cls, name, when):
        real = getattr(cls, name)
        fired = []

        def fail(obj, *args, **kwargs):
            if not fired and when(obj):
                fired.append(obj)
                raise InjectedFailure('%s failed on %s' % (name, DEST))
            return real(obj, *args, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            '%s.%s.%s' % (cls.__module__, cls.__name__, name), fail))
        return fired

    def test_instance_not_recorded(self):
        server = self._boot()
        fired = self._fail_once(
            objects.Instance, 'save',
            lambda instance: ('host' in instance.obj_what_changed() and
                              instance.host == DEST))
        self._fail_source()
        server = self._evacuate(server, expected_state='ERROR',
                                expected_migration_status='failed')
        self.assertEqual(1, len(fired))
        self.assertEqual(SOURCE, server['OS-EXT-SRV-ATTR:host'])
        self.assertIsNone(self.world.domain_state(DEST, server['id']))
        self.assertEqual({}, self.world.files(DEST, server['id']))
        self.assertIsNone(self._dest_allocation(server))
        self._evacuate(server)
        self.assertEqual('running',
                         self.world.domain_state(DEST, server['id']))

    def test_instance_recorded_then_migration_save_fails(self):
        server = self._boot()
        fired = self._fail_once(
            objects.Migration, 'save',
            lambda migration: (migration.status == 'done' and
                               migration.dest_compute == DEST))
        ended = self._rebuilds_ended()
        self._fail_source()
        self.api.post_server_action(server['id'],
                                    {'evacuate': {'host': DEST}})
        for _attempt in range(300):
            if ended:
                break
            time.sleep(0.05)
        self.assertEqual([server['id']], ended)
        server = self.api.get_server(server['id'])
        self.assertEqual('ERROR', server['status'])
        self.assertEqual(DEST, server['OS-EXT-SRV-ATTR:host'])
        self.assertEqual(1, len(fired))
        self.assertEqual('running',
                         self.world.domain_state(DEST, server['id']))
        self.assertIsNotNone(self._dest_allocation(server))
        self.assertEqual('done', self._migration_status(server['id']))
