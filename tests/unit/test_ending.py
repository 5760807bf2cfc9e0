# SPDX-License-Identifier: Apache-2.0

"""The one ending, on nova's real objects and a real journal.

The database is nova's (``nova.test.TestCase``); the driver, placement's
client and the compute manager's volume helpers are ``autospec`` mocks of
nova's classes: the boundary. The journal is a temporary directory.
"""

import functools
import json
import os
from unittest import mock

import fixtures
from nova.compute import manager as nova_manager
from nova.compute import power_state
from nova.compute import task_states
from nova.compute import vm_states
import nova.conf
from nova import context as nova_context
from nova.db.main import api as db_api
from nova import exception
from nova import objects
from nova.objects import base as objects_base
from nova.scheduler.client import report
from nova import test
from nova.virt import driver as virt_driver
from nova.virt import hardware
from nova.volume import cinder
from oslo_utils.fixture import uuidsentinel as uuids
from oslo_utils import uuidutils

from nova_evac_cleanup import conf
from nova_evac_cleanup import ending
from nova_evac_cleanup import evacuation
from nova_evac_cleanup import journal
from nova_evac_cleanup import ownership
from nova_evac_cleanup import records
from nova_evac_cleanup import rule
from nova_evac_cleanup import sweep
from nova_evac_cleanup import updates

CONF = nova.conf.CONF
HOST = 'compute1'
SOURCE = 'compute0'


class EndingTestCase(test.TestCase):
    """An evacuation from compute0 to compute1 that compute1's death cut."""

    def setUp(self):
        super().setUp()
        conf.register_opts(CONF)
        self.flags(instances_path=self.useFixture(fixtures.TempDir()).path)
        self.flags(journal_path=self.useFixture(fixtures.TempDir()).path,
                   group='evacuate_cleanup')
        self.context = nova_context.get_admin_context()
        self.calls = []
        self.manager = self._manager()
        self.node = objects.ComputeNode(
            self.context, host=HOST, hypervisor_hostname=HOST,
            uuid=uuids.node, vcpus=1, memory_mb=512, local_gb=1,
            vcpus_used=0, memory_mb_used=0, local_gb_used=0,
            hypervisor_type='fake', hypervisor_version=1, cpu_info='{}',
            disk_available_least=1)
        self.node.create()
        self.instance = objects.Instance(
            self.context, uuid=uuids.instance, host=SOURCE,
            vm_state=vm_states.ACTIVE, task_state=task_states.REBUILD_SPAWNING,
            project_id='p', user_id='u', flavor=objects.Flavor(
                id=1, flavorid='1', name='f', memory_mb=512, vcpus=1,
                root_gb=1, ephemeral_gb=0, swap=0, extra_specs={}),
            system_metadata={})
        self.instance.create()
        self.migration = objects.Migration(
            self.context, instance_uuid=uuids.instance, source_compute=SOURCE,
            dest_compute=HOST,
            status='pre-migrating', migration_type='evacuation',
            uuid=uuids.migration)
        self.migration.create()
        self.instance.migration_context = objects.MigrationContext(
            migration_id=self.migration.id, instance_uuid=uuids.instance,
            new_numa_topology=None, old_numa_topology=None)
        self.instance.save()
        path = ownership.instance_path(uuids.instance)
        self.entry = journal.Entry(
            HOST, uuids.instance, uuids.migration, spawned=True,
            shared=False, claim=path, fsid=ownership.filesystem(path))
        journal.write(self.entry)
        # What spawn made: the directory, absent before, and a disk.
        os.makedirs(path)
        with open(os.path.join(self.entry.claim, 'disk'), 'w') as disk:
            disk.write('partial')

    def _manager(self):
        manager = mock.create_autospec(nova_manager.ComputeManager,
                                       instance=True)
        manager.host = HOST
        manager.driver = mock.create_autospec(virt_driver.ComputeDriver,
                                              instance=True)
        manager.reportclient = mock.create_autospec(
            report.SchedulerReportClient, instance=True)
        self.guest = ['running']
        manager.driver.instance_exists.side_effect = (
            lambda instance: bool(self.guest))
        manager.driver.get_info.side_effect = (
            lambda instance: hardware.InstanceInfo(state=power_state.RUNNING))

        def destroy(context, instance, network_info, block_device_info=None,
                    destroy_disks=True):
            self.calls.append(('destroy', self._task_state()))
            self.guest[:] = []
            if destroy_disks:
                for name in os.listdir(self.entry.claim):
                    os.unlink(os.path.join(self.entry.claim, name))
                os.rmdir(self.entry.claim)

        manager.driver.destroy.side_effect = destroy
        manager.reportclient.get_allocs_for_consumer.return_value = {
            'allocations': {uuids.node: {'resources': {'VCPU': 1}}}}

        def remove(context, consumer, rp):
            self.calls.append(('allocation', self._task_state()))
            return True

        manager.reportclient.\
            remove_provider_tree_from_instance_allocation.side_effect = remove
        manager._get_instance_block_device_info.return_value = {
            'block_device_mapping': []}
        return manager

    def _volume_made_here(self, named=uuids.dest_attachment):
        """A data volume nova's evacuation replaces; the source's noted.

        :param named: the attachment its mapping names: the destination's
            once nova replaced it
        """
        objects.BlockDeviceMapping(
            self.context, instance_uuid=uuids.instance,
            volume_id=uuids.volume, attachment_id=named,
            source_type='volume', destination_type='volume',
            device_name='/dev/vdb', boot_index=None, volume_size=1,
            connection_info='{}').create()
        self.entry.detached = {uuids.volume: uuids.source_attachment}
        journal.write(self.entry)

    def _cinder(self):
        """cinder's attachments of the volume, behind nova's volume API.

        nova's own ``_terminate_volume_connections`` runs on it for real.
        """
        self.attachments = [uuids.dest_attachment]
        #: connected by cinder for a host, never completed
        self.attaching = set()
        api = self.manager.volume_api = mock.create_autospec(cinder.API,
                                                             instance=True)

        def status(attachment):
            # The hosts' are attached, those made since reserved.
            return 'attaching' if attachment in self.attaching else (
                'attached' if attachment in (uuids.dest_attachment,
                                             uuids.source_attachment)
                else 'reserved')

        def create(context, volume_id, instance_uuid, connector=None,
                   mountpoint=None):
            if self.attaching & set(self.attachments):
                # cinder's _attachment_reserve, through nova's volume API.
                raise exception.InvalidInput(
                    reason='Invalid volume: Volume %s status must be '
                    'available or downloading to reserve, but the current '
                    'status is attaching.' % volume_id)
            self.attachments.append(uuidutils.generate_uuid())
            return {'id': self.attachments[-1]}

        def get_all(context, instance_id=None, volume_id=None):
            return [{'id': attachment, 'instance': uuids.instance,
                     'volume_id': uuids.volume, 'status': status(attachment)}
                    for attachment in self.attachments]

        def get(context, attachment_id):
            if attachment_id not in self.attachments:
                raise exception.VolumeAttachmentNotFound(
                    attachment_id=attachment_id)
            if status(attachment_id) == 'reserved':
                return {'id': attachment_id, 'status': 'reserved',
                        'connection_info': {}}
            # nova's _translate_attachment_ref: the status in the
            # connection info, once cinder connected it.
            return {'id': attachment_id, 'connection_info': {
                'driver_volume_type': 'rbd', 'data': {},
                'status': status(attachment_id)}}

        def complete(context, attachment_id):
            self.attaching.discard(attachment_id)

        def delete(context, attachment_id):
            if attachment_id not in self.attachments:
                raise exception.VolumeAttachmentNotFound(
                    attachment_id=attachment_id)
            self.attachments.remove(attachment_id)

        api.attachment_create.side_effect = create
        api.attachment_delete.side_effect = delete
        api.attachment_get_all.side_effect = get_all
        api.attachment_get.side_effect = get
        api.attachment_complete.side_effect = complete
        self.manager._terminate_volume_connections.side_effect = (
            functools.partial(
                nova_manager.ComputeManager._terminate_volume_connections,
                self.manager))

    def _task_state(self):
        return objects.Instance.get_by_uuid(
            self.context, uuids.instance).task_state

    def _reload(self):
        return (objects.Instance.get_by_uuid(self.context, uuids.instance),
                objects.Migration.get_by_id(self.context, self.migration.id))

    def settle(self):
        real = objects.Instance.save

        def save(instance, *args, **kwargs):
            self.calls.append(('save', instance.task_state))
            return real(instance, *args, **kwargs)

        with fixtures.MonkeyPatch('nova.objects.Instance.save', save):
            return sweep.settle(self.manager, self.context, self.entry)


class TestEnd(EndingTestCase):

    def test_ended_step_by_step_and_released_last(self):
        finding = self.settle()

        self.assertTrue(finding.ended, finding.errors)
        self.assertEqual([
            ('save', rule.HOLD),
            ('destroy', rule.HOLD),
            ('allocation', rule.HOLD),
            ('save', None),
        ], self.calls)
        instance, migration = self._reload()
        self.assertEqual((vm_states.ERROR, None, SOURCE),
                         (instance.vm_state, instance.task_state,
                          instance.host))
        self.assertIsNone(instance.migration_context)
        self.assertEqual('failed', migration.status)
        fault = objects.InstanceFault.get_latest_for_instance(
            self.context, uuids.instance)
        self.assertIn('interrupted', fault.message)
        self.manager.driver.destroy.assert_called_once_with(
            self.context, mock.ANY, mock.ANY, block_device_info=mock.ANY,
            destroy_disks=True)
        self.assertFalse(os.path.exists(self.entry.claim))
        self.assertEqual([], journal.entries(HOST))

    def test_what_it_did_as_facts_put_in_words_in_one_place(self):
        """Issue 41, item 1: steps return facts; the log and audit words."""
        with mock.patch.object(ending, 'LOG') as mock_log:
            finding = self.settle()

        self.assertEqual([
            ('migration', 'pre-migrating'), ('destroy', ('running', None)),
            ('allocation', [uuids.node]), ('context', True), ('fault', True),
            ('release', vm_states.ACTIVE)], finding.done)
        said = ['migration set from pre-migrating to failed',
                'destroyed the running guest; removed its disks (not on '
                'shared storage)',
                'removed the allocation against %s' % uuids.node,
                'dropped the migration context', 'recorded the fault',
                'set the instance from active/%s to error/None' % rule.HOLD]
        self.assertEqual(said, [str(fact) for fact in finding.done])
        logged = [call.args[0] % call.args[1:]
                  for call in mock_log.info.call_args_list]
        for words in said[:-1]:
            self.assertIn(': ' + words, ' '.join(logged))

    def test_never_held_in_rebuilding(self):
        """nova's API sets rebuilding for a new evacuation: not a hold."""
        self.instance.task_state = task_states.REBUILDING
        self.instance.save()

        self.assertTrue(self.settle().ended)
        self.assertEqual(('save', rule.HOLD), self.calls[0])
        self.assertEqual(('destroy', rule.HOLD), self.calls[1])
        self.assertNotEqual(rule.HOLD, task_states.REBUILDING)

    def test_a_failed_step_keeps_the_hold_and_the_next_goes_on(self):
        remove = self.manager.reportclient.\
            remove_provider_tree_from_instance_allocation
        remove.side_effect = None
        remove.return_value = False

        self.assertFalse(self.settle().ended)
        self.assertEqual(rule.HOLD, self._task_state())
        [entry] = journal.entries(HOST)
        self.assertEqual(journal.ENDING, entry.phase)
        # The steps after it still ran.
        self.assertEqual(['migration', 'destroy', 'volumes', 'context',
                          'fault'], entry.done)

        # The next start: what is done is not done again.
        remove.return_value = True
        self.entry = entry
        self.assertTrue(self.settle().ended)
        self.manager.driver.destroy.assert_called_once()
        self.assertEqual((vm_states.ERROR, None),
                         (self._reload()[0].vm_state, self._task_state()))

    def test_a_failed_destroy_still_releases_the_volumes(self):
        """Issue 40, item 4: the guest's connections go even so.

        Before, a failed destroy ended the sweep's ending before the
        volume connections were released.
        """
        self._volume_made_here()
        self.manager.driver.destroy.side_effect = Exception('libvirt down')
        self.manager.driver.power_off.side_effect = self._power_off

        self._cinder()

        self.assertTrue(self.settle().ended)
        self.assertNotIn(uuids.dest_attachment, self.attachments)
        self.assertEqual(self.attachments, [self._named()])
        # The guest is powered off and kept: it refuses the next
        # evacuation of the server here, which destroys it first.
        self.manager.driver.power_off.assert_called_once()
        [entry] = journal.entries(HOST)
        self.assertEqual(journal.KEPT, entry.phase)

    def _named(self):
        """The attachment the volume's mapping names."""
        [bdm] = objects.BlockDeviceMappingList.get_by_instance_uuid(
            self.context, uuids.instance)
        return bdm.attachment_id

    def test_a_release_cut_before_the_mapping_is_saved_finishes(self):
        """Issue 42: a release cut between cinder's delete and the save.

        cinder deleted this host's attachment; the mapping does not name
        the reserved one yet (a failed save, or this host's death, as the
        explorer found). The next try finishes the release: no third
        attachment, and the server is not held for ever.
        """
        self._volume_made_here()
        self._cinder()
        real, failures = objects.BlockDeviceMapping.save, [
            exception.NovaException('database gone')]

        def save(bdm, *args, **kwargs):
            if failures:
                raise failures.pop()
            return real(bdm, *args, **kwargs)

        with fixtures.MonkeyPatch(
                'nova.objects.BlockDeviceMapping.save', save):
            self.assertFalse(self.settle().ended)
            self.assertEqual(rule.HOLD, self._task_state())
            [self.entry] = journal.entries(HOST)
            self.assertTrue(self.settle().ended)

        self.assertEqual([self._named()], self.attachments)
        self.assertNotEqual(uuids.dest_attachment, self._named())
        self.assertEqual((vm_states.ERROR, None),
                         (self._reload()[0].vm_state, self._task_state()))

    def test_a_volume_cut_before_nova_completed_its_attachment(self):
        """Issue 43: the real tier's death right after attachment_update.

        cinder connected this host's attachment, nova never completed it:
        the volume is ``attaching``, a status cinder reserves no
        attachment in. Before, the release failed there on every try and
        the server stayed held, its volume named for this host.
        """
        self.entry.spawned, self.guest[:] = False, []
        self._volume_made_here()
        self._cinder()
        self.attaching.add(uuids.dest_attachment)

        self.assertTrue(self.settle().ended)

        self.assertEqual([self._named()], self.attachments)
        self.assertNotEqual(uuids.dest_attachment, self._named())
        self.assertEqual((vm_states.ERROR, None),
                         (self._reload()[0].vm_state, self._task_state()))

    def test_a_release_cinder_failed_at_the_delete_leaves_one(self):
        """Issue 42, finding 3: cinder failed the delete of this host's.

        The reserved attachment made before it is the one the next try
        puts in the mapping.
        """
        self._volume_made_here()
        self._cinder()

        self._cut_once_then_finished(
            self.manager.volume_api.attachment_delete,
            [exception.CinderConnectionFailed(reason='cinder-api down')])
        self.assertNotEqual(uuids.dest_attachment, self._named())

    def test_a_reserved_attachment_never_named_is_named_next(self):
        """Issue 42: cinder made the reserved attachment, unanswered.

        Its answer lost (or this host dead before the journal named it),
        the next try names that one in the mapping: no second one.
        """
        self._volume_made_here()
        self._cinder()
        create = self.manager.volume_api.attachment_create
        real = create.side_effect

        def unanswered(*args, **kwargs):
            real(*args, **kwargs)
            raise exception.CinderConnectionFailed(reason='timed out')

        self._cut_once_then_finished(create, unanswered)
        create.assert_called_once()

    def test_a_reserved_attachment_not_its_own_is_left_alone(self):
        """Named only when this ending asked cinder for one and was cut.

        A reserved attachment of the server no mapping names that nova's
        own detach left (issue 42, finding 2) is not this ending's: it
        makes its own and leaves that one where it is.
        """
        self._volume_made_here()
        self._cinder()
        self.attachments.append(uuids.nova_left)

        self.assertTrue(self.settle().ended)

        self.assertIn(uuids.nova_left, self.attachments)
        self.assertNotIn(self._named(), (uuids.nova_left,
                                         uuids.dest_attachment))
        self.manager.volume_api.attachment_get_all.assert_not_called()

    def _detach_cut(self, source_deleted):
        """nova's detach of an evacuation not spawned, cut (finding 2).

        cinder made the destination's attachment; the source's is still
        there or deleted; the mapping still names the source's.
        """
        self.entry.spawned, self.guest[:] = False, []
        self._volume_made_here(named=uuids.source_attachment)
        self._cinder()
        self.attachments[:] = [uuids.cut_attachment] + (
            [] if source_deleted else [uuids.source_attachment])

    def test_a_cut_detach_s_attachment_goes_while_the_source_s_is_there(self):
        """Issue 42, finding 2: the evacuation died inside nova's detach.

        The attachment nova made for this host is named nowhere: before,
        the volume had two attachments after the retry.
        """
        self._detach_cut(source_deleted=False)

        self.assertTrue(self.settle().ended)

        self.assertEqual([uuids.source_attachment], self.attachments)
        self.assertEqual(uuids.source_attachment, self._named())

    def test_a_cut_detach_s_attachment_is_named_once_the_source_s_is_gone(
            self):
        """Finding 2, cut after nova deleted the source's attachment."""
        self._detach_cut(source_deleted=True)

        self.assertTrue(self.settle().ended)

        self.assertEqual([uuids.cut_attachment], self.attachments)
        self.assertEqual(uuids.cut_attachment, self._named())
        self.manager.volume_api.attachment_create.assert_not_called()

    def test_a_cut_detach_among_other_unnamed_attachments_is_left(self):
        """Two reserved attachments no mapping names: which is its own?

        No proof which one the cut detach made: both are kept.
        """
        self._detach_cut(source_deleted=False)
        self.attachments.append(uuids.another_unnamed)

        self.assertTrue(self.settle().ended)

        self.assertEqual(sorted([uuids.cut_attachment, uuids.another_unnamed,
                                 uuids.source_attachment]),
                         sorted(self.attachments))
        self.assertEqual(uuids.source_attachment, self._named())

    def test_a_cut_detach_ended_by_the_failure_handler(self):
        """Finding 2 without a death: cinder failed inside nova's detach.

        nova's handler runs; the failure handler, before it, ends the
        replacement nova cut.
        """
        self._detach_cut(source_deleted=False)
        live = evacuation.Evacuation(self.manager, self.context, self.entry,
                                     lambda: True)

        live.failed(self.instance, exception.CinderConnectionFailed(
            reason='cinder-api down'))

        self.assertEqual([uuids.source_attachment], self.attachments)
        self.assertEqual(uuids.source_attachment, self._named())

    def _cut_once_then_finished(self, call, cut):
        """cinder's ``call`` cuts the release (``cut``); the next start.

        Cut, the server is still held and the volume has two attachments;
        the next start ends it, with one, the mapping's.
        """
        real, call.side_effect = call.side_effect, cut
        self.assertFalse(self.settle().ended)
        self.assertEqual(rule.HOLD, self._task_state())
        self.assertEqual(2, len(self.attachments))
        call.side_effect = real
        [self.entry] = journal.entries(HOST)
        self.assertTrue(self.settle().ended)
        self.assertEqual([self._named()], self.attachments)

    def _source_took_its_allocation(self):
        """The source back first took its own as a done evacuation's.

        nova's ``_destroy_evacuated_instances`` does that for an evacuation
        still ``pre-migrating`` (the real tier's F1): only this host's is
        left.
        """
        node = objects.ComputeNode(
            self.context, host=SOURCE, hypervisor_hostname=SOURCE,
            uuid=uuids.source_node, vcpus=1, memory_mb=512, local_gb=1,
            vcpus_used=0, memory_mb_used=0, local_gb_used=0,
            hypervisor_type='fake', hypervisor_version=1, cpu_info='{}',
            disk_available_least=1)
        node.create()
        self.instance.node, self.instance.compute_id = SOURCE, node.id
        self.instance.save()
        client = self.manager.reportclient
        client.get_allocs_for_consumer.return_value = {
            'allocations': {uuids.node: {'resources': {'VCPU': 1}}},
            'consumer_generation': 3, 'project_id': 'p', 'user_id': 'u'}
        return client

    def test_an_allocation_left_only_here_goes_to_the_server_s_node(self):
        client = self._source_took_its_allocation()
        client.put_allocations.return_value = True

        self.assertTrue(self.settle().ended)
        client.put_allocations.assert_called_once_with(
            self.context, uuids.instance, {
                'allocations': {
                    uuids.source_node: {'resources': {'VCPU': 1}}},
                'consumer_generation': 3, 'project_id': 'p', 'user_id': 'u'})
        client.remove_provider_tree_from_instance_allocation.\
            assert_not_called()

    def test_an_allocation_changed_since_it_was_read_is_not_moved(self):
        client = self._source_took_its_allocation()
        mine = client.get_allocs_for_consumer.return_value
        # A retry's claim lands between the step's read and the move's.
        # (The sweep's read and the step's, then the move's.)
        client.get_allocs_for_consumer.side_effect = [mine, mine, {
            'allocations': {uuids.retry_node: {'resources': {'VCPU': 1}}},
            'consumer_generation': 4, 'project_id': 'p', 'user_id': 'u'}]

        self.assertTrue(self.settle().ended)
        client.put_allocations.assert_not_called()
        client.remove_provider_tree_from_instance_allocation.\
            assert_called_once_with(self.context, uuids.instance, uuids.node)

    def test_an_allocation_placement_will_not_move_is_removed(self):
        client = self._source_took_its_allocation()
        client.put_allocations.return_value = False  # no room there

        self.assertTrue(self.settle().ended)
        client.remove_provider_tree_from_instance_allocation.\
            assert_called_once_with(self.context, uuids.instance, uuids.node)

    def test_a_child_provider_of_this_host_is_this_host_s(self):
        """A port's bandwidth on this host's tree is not the server's home.

        Removed with its tree and never moved to the server's node; with
        nothing left elsewhere, the heal command is logged.
        """
        client = self._source_took_its_allocation()
        client.get_allocs_for_consumer.return_value['allocations'][
            uuids.bandwidth] = {'resources': {'NET_BW_EGR_KILOBIT_PER_SEC': 1}}
        client.get_providers_in_tree.side_effect = lambda context, rp: [
            {'uuid': uuids.node}, {'uuid': uuids.bandwidth}] if rp in (
                uuids.node, uuids.bandwidth) else []

        with mock.patch.object(ending, 'LOG') as mock_log:
            self.assertTrue(self.settle().ended)
        client.put_allocations.assert_not_called()
        client.remove_provider_tree_from_instance_allocation.\
            assert_called_once_with(self.context, uuids.instance, uuids.node)
        warned = [call.args[0] % call.args[1:]
                  for call in mock_log.warning.call_args_list]
        self.assertIn('heal_allocations', ' '.join(warned))

    def test_a_guest_that_still_runs_keeps_the_hold(self):
        """Neither destroyed nor powered off: never released over it.

        Released, the server could be started again elsewhere while its
        guest here still writes to its disks. The other steps still run:
        the volume connections here are released, the next start tries
        the destroy again.
        """
        self.manager.driver.destroy.side_effect = Exception('libvirt down')
        self.manager.driver.power_off.side_effect = Exception('stuck')

        self.assertFalse(self.settle().ended)
        self.assertEqual(rule.HOLD, self._task_state())
        [entry] = journal.entries(HOST)
        self.assertEqual(journal.ENDING, entry.phase)
        self.assertNotIn('destroy', entry.done)
        self.assertIn('allocation', entry.done)

        # The next start destroys it, and only then releases the server.
        self.manager.driver.destroy.side_effect = None
        self.manager.driver.destroy.return_value = None
        self.guest[:] = []
        self.entry = entry
        self.assertTrue(self.settle().ended)
        self.assertEqual((vm_states.ERROR, None),
                         (self._reload()[0].vm_state, self._task_state()))

    def _power_off(self, instance, *args, **kwargs):
        self.manager.driver.get_info.side_effect = (
            lambda instance: hardware.InstanceInfo(
                state=power_state.SHUTDOWN))

    def test_left_alone_once_the_server_moved_on(self):
        """An HA tool evacuates the server while the sweep destroys."""
        def destroy(*args, **kwargs):
            objects.Migration(
                self.context, instance_uuid=uuids.instance,
                source_compute=SOURCE, dest_compute='compute2',
                status='accepted', migration_type='evacuation',
                uuid=uuids.newer).create()
            instance = objects.Instance.get_by_uuid(self.context,
                                                    uuids.instance)
            instance.task_state = task_states.REBUILDING
            instance.save()

        self.manager.driver.destroy.side_effect = destroy

        self.assertFalse(self.settle().ended)
        self.assertEqual(task_states.REBUILDING, self._task_state())
        self.manager.reportclient.\
            remove_provider_tree_from_instance_allocation.assert_not_called()

    def test_an_entry_of_the_previous_format_is_ended(self):
        """Deployments upgrade with entries on disk (issue 40, item 3).

        Its directory was proven by a marker in it, which this version
        no longer reads: its disks are kept (and refuse the next
        evacuation here until removed by hand).
        """
        self.instance.task_state = rule.HOLD
        self.instance.save()
        old = {'host': HOST, 'instance_uuid': uuids.instance,
               'migration_uuid': uuids.migration,
               'migration_id': self.migration.id, 'shared_storage': False,
               'claim': {'path': self.entry.claim}, 'spawning': True,
               'kept': None, 'error': 'FakeLibvirtError: boom',
               'detached': {},
               'ending': {'task_state': rule.HOLD,
                          'from': task_states.REBUILD_SPAWNING,
                          'done': ['migration']}}
        with open(os.path.join(CONF.evacuate_cleanup.journal_path, HOST,
                               uuids.migration + '.json'), 'w') as stream:
            json.dump(old, stream)
        [self.entry] = journal.entries(HOST)

        self.assertTrue(self.settle().ended)
        # The migration step was done: the record says so.
        self.assertEqual('pre-migrating', self._reload()[1].status)
        self.manager.driver.destroy.assert_called_once_with(
            self.context, mock.ANY, mock.ANY, block_device_info=mock.ANY,
            destroy_disks=False)
        self.assertEqual(vm_states.ERROR, self._reload()[0].vm_state)
        fault = objects.InstanceFault.get_latest_for_instance(
            self.context, uuids.instance)
        self.assertIn('FakeLibvirtError: boom', fault.message)
        [kept] = journal.entries(HOST)
        self.assertEqual(journal.KEPT, kept.phase)


class TestSettleUnderTheHold(EndingTestCase):
    """Issue 40, item 4: the sweep acts on a state read under its hold."""

    def setUp(self):
        super().setUp()
        # nova's handler failed the migration and released the server,
        # then this host died before it removed its allocation.
        self.migration.status = 'failed'
        self.migration.save()
        self.instance.vm_state, self.instance.task_state = (
            vm_states.ERROR, None)
        self.instance.migration_context = None
        self.instance.save()
        self.guest[:] = []

    def test_failed_evacuation_allocation_removed(self):
        self.assertTrue(self.settle().ended)
        self.manager.reportclient.\
            remove_provider_tree_from_instance_allocation.\
            assert_called_once_with(self.context, uuids.instance, uuids.node)
        self.assertEqual((vm_states.ERROR, None),
                         (self._reload()[0].vm_state, self._task_state()))

    def test_the_fault_nova_could_not_record(self):
        """nova failed the migration and this host died before the fault.

        Explorer cell ``spawn-fails Migration.save#2 die`` (source-first).
        """
        self.entry.error = 'FakeLibvirtError: boom'
        self.manager.reportclient.get_allocs_for_consumer.return_value = {
            'allocations': {}}

        self.assertTrue(self.settle().ended)
        fault = objects.InstanceFault.get_latest_for_instance(
            self.context, uuids.instance)
        self.assertTrue(fault.message.startswith('FakeLibvirtError: boom'))
        # nova's own fault, from the evacuation on, is kept as it is.
        self.entry = journal.Entry(
            HOST, uuids.instance, uuids.migration, spawned=True,
            shared=False, error='FakeLibvirtError: boom')
        self.assertFalse(self.settle().ended)
        self.assertEqual(fault.id, objects.InstanceFault.
                         get_latest_for_instance(self.context,
                                                 uuids.instance).id)

    def test_a_retry_here_keeps_its_allocation(self):
        """An HA retry to this host lands between reading and acting.

        Before, the sweep removed this host's allocation of the server,
        read before its loop: the retry lost its claim.
        """
        read = self.manager.reportclient.get_allocs_for_consumer

        def retry_lands(context, consumer):
            objects.Migration(
                self.context, instance_uuid=uuids.instance,
                source_compute=SOURCE, dest_compute=HOST, status='accepted',
                migration_type='evacuation', uuid=uuids.retry).create()
            instance = objects.Instance.get_by_uuid(self.context,
                                                    uuids.instance)
            instance.task_state = task_states.REBUILDING
            instance.save()
            read.side_effect = None
            return read.return_value

        read.side_effect = retry_lands

        self.assertFalse(self.settle().ended)
        self.manager.reportclient.\
            remove_provider_tree_from_instance_allocation.assert_not_called()
        self.assertEqual(task_states.REBUILDING, self._task_state())


class TestSetStatus(EndingTestCase):
    """Issue 40, item 4: a completed migration is never rewritten."""

    def test_the_source_completes_it_between_the_read_and_the_write(self):
        """The source starts, and takes the evacuation for done, meanwhile.

        Before, the ending read the migration again and saved it: a source
        whose start completed it between the two had its record rewritten
        to failed.
        """
        state = records.read(self.context, uuids.instance, uuids.migration)
        db_api.migration_update(self.context, self.migration.id,
                                {'status': 'completed'})
        steps = ending.Ending(self.manager, self.context, self.entry,
                              lambda: None)

        self.assertIsNone(steps.fail_migration(state))
        self.assertEqual('completed', self._reload()[1].status)

    def test_compare_and_swap_in_the_database(self):
        stale = objects.Migration.get_by_id(self.context, self.migration.id)
        # The source starts meanwhile and takes the evacuation for done.
        self.migration.status = 'completed'
        self.migration.save()

        self.assertFalse(updates.set_status(self.context, stale,
                                            rule.RUNNING, 'failed'))
        self.assertEqual('completed', self._reload()[1].status)
        self.assertTrue(updates.set_status(self.context, stale,
                                           ('completed',), 'failed'))
        self.assertEqual('failed', self._reload()[1].status)

    def test_read_right_before_the_save_through_the_conductor(self):
        self.migration.status = 'completed'
        self.migration.save()
        stale = objects.Migration(id=self.migration.id,
                                  status='pre-migrating')
        self.useFixture(fixtures.MonkeyPatch(
            'nova.objects.base.NovaObject.indirection_api', mock.Mock()))
        with mock.patch.object(objects.Migration, 'get_by_id',
                               return_value=self._reload()[1]), \
                mock.patch.object(objects.Migration, 'save') as save:
            self.assertFalse(updates.set_status(
                self.context, stale, rule.RUNNING, 'failed'))
        save.assert_not_called()
        self.assertIsNotNone(objects_base.NovaObject.indirection_api)
