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

"""Finishing an evacuation nova recorded here but did not finish.

Issue 18, cells ``evacuate Instance.save#5 die`` and ``evacuate
Migration.save#2 raise``: the instance was saved on the destination, and
the migration stayed ``pre-migrating``.
"""

from unittest import mock

from nova.compute import resource_tracker
from nova import objects
from nova import test
from oslo_concurrency import lockutils
from oslo_utils.fixture import uuidsentinel as uuids

from nova_evac_cleanup import classification
from nova_evac_cleanup import ending
from nova_evac_cleanup import findings
from nova_evac_cleanup import finish
from nova_evac_cleanup import journal
from nova_evac_cleanup import sweep


class TestFinishRecorded(test.NoDBTestCase):

    def setUp(self):
        super().setUp()
        self.context = mock.sentinel.context
        self.migration = objects.Migration(id=7, uuid=uuids.migration,
                                           status='pre-migrating')
        self.instance = objects.Instance(
            uuid=uuids.instance, host='compute1',
            migration_context=objects.MigrationContext(migration_id=7))
        self.useFixture(test.fixtures.MockPatchObject(
            objects.Migration, 'get_by_id', return_value=self.migration))
        self.useFixture(test.fixtures.MockPatchObject(
            objects.Instance, 'get_by_uuid', return_value=self.instance))
        self.save = self.useFixture(test.fixtures.MockPatchObject(
            objects.Migration, 'save')).mock

    def test_finishes(self):
        with mock.patch.object(self.instance,
                               'drop_migration_context') as drop:
            done = finish.finish_recorded(self.context, uuids.instance, 7)
        drop.assert_called_once_with()
        self.assertEqual('done', self.migration.status)
        self.save.assert_called_once_with()
        self.assertEqual(2, len(done))

    def test_under_the_resource_trackers_lock(self):
        """Issue 34: under the resource tracker's lock, as nova's.

        nova's ``finish_evacuation`` (bug 1896463) drops the context and
        marks the migration done there, never between its periodic reads.
        """
        lock = lockutils.internal_fair_lock(
            resource_tracker.COMPUTE_RESOURCE_SEMAPHORE)
        held = []
        self.save.side_effect = lambda: held.append(lock.is_writer())
        with mock.patch.object(
                self.instance, 'drop_migration_context',
                side_effect=lambda: held.append(lock.is_writer())):
            finish.finish_recorded(self.context, uuids.instance, 7)
        self.assertEqual([True, True], held)

    def test_another_migration_context_is_kept(self):
        self.instance.migration_context.migration_id = 8
        with mock.patch.object(self.instance,
                               'drop_migration_context') as drop:
            finish.finish_recorded(self.context, uuids.instance, 7)
        drop.assert_not_called()
        self.assertEqual('done', self.migration.status)

    def test_over_is_never_rewritten(self):
        for status in ('done', 'completed', 'failed', 'error'):
            self.migration.status = status
            self.assertEqual(
                [], finish.finish_recorded(self.context, uuids.instance, 7))
            self.assertEqual(status, self.migration.status)
        self.save.assert_not_called()

    def test_the_sweep_finishes_what_lives_here(self):
        """The destination died right after nova saved the instance here."""
        entry = journal.Entry('compute1', uuids.instance, uuids.migration, 7)
        finding = findings.Finding('compute1', uuids.instance, entry=entry)
        finding.kind = classification.LIVES_HERE
        finding.instance = self.instance
        with mock.patch.object(finish, 'finish_recorded',
                               return_value=[]) as finished, \
                mock.patch.object(journal, 'remove'):
            self.assertTrue(sweep.forget(mock.Mock(host='compute1'),
                                         self.context, finding))
        finished.assert_called_once_with(self.context, uuids.instance, 7)


class TestFaultOfAFailedEvacuation(test.NoDBTestCase):
    """Issue 18, cells ``spawn-fails * die``: the spawn error is the fault."""

    def test_the_journaled_error_is_the_fault(self):
        entry = journal.Entry('compute1', uuids.instance, uuids.migration, 7,
                              error='FakeLibvirtError: boom')
        finding = findings.Finding('compute1', uuids.instance, entry=entry)
        finding.instance = mock.sentinel.instance
        with mock.patch('nova.compute.utils.add_instance_fault_from_exc'
                        ) as add:
            ending.record_fault(None, mock.sentinel.context, finding,
                                None, None)
        error = add.call_args.args[2]
        self.assertTrue(error.format_message().startswith(
            'FakeLibvirtError: boom'))
