# SPDX-License-Identifier: Apache-2.0

"""The operator's steps for what an evacuation left."""

import testtools

from nova_evac_cleanup import runbook
from tests.reproduce import report
from tests.reproduce import verdict

UUID = 'a4b5c7e0-1b7b-4c5e-9d4e-6f1f2d3c4b5a'
RP = '0c3e9f5a-52c4-4b0e-8f35-3f9d4b1f2e6d'


class TestCleanupSteps(testtools.TestCase):

    def test_nothing_left_nothing_to_do(self):
        self.assertEqual(
            [], runbook.cleanup_steps('compute1', UUID, 'instance-00000001'))

    def test_everything_in_the_runbook_order(self):
        steps = runbook.cleanup_steps(
            'compute1', UUID, 'instance-00000001', task_stuck=True,
            guest='running', instance_dir='/var/lib/nova/instances/' + UUID,
            providers=[RP]) + [runbook.heal_allocations(UUID)]
        self.assertEqual(
            ['reset-state', 'virsh destroy+undefine', 'rm -rf instance dir',
             'remove the allocation', 'heal_allocations'],
            [step.what for step in steps])
        self.assertEqual(
            ['openstack server set --state error %s' % UUID,
             'on compute1: virsh destroy instance-00000001; '
             'virsh undefine --nvram instance-00000001',
             'on compute1: rm -rf /var/lib/nova/instances/%s' % UUID,
             'openstack --os-placement-api-version 1.12 resource provider '
             'allocation unset --provider %s %s' % (RP, UUID),
             'nova-manage placement heal_allocations --instance %s' % UUID],
            [report.step_text(step) for step in steps])

    def test_a_defined_guest_is_only_undefined(self):
        steps = runbook.cleanup_steps('compute1', UUID, 'instance-00000001',
                                      guest='defined')
        self.assertEqual(['virsh undefine --nvram instance-00000001'],
                         [step.command for step in steps])

    def test_a_directory_maybe_shared_says_check_first(self):
        step, = runbook.cleanup_steps(
            'compute1', UUID, 'instance-00000001',
            instance_dir='/srv/instances/' + UUID, shared_with='compute0')
        self.assertTrue(step.command.startswith(
            'rm -rf /srv/instances/%s  # only after checking' % UUID))
        self.assertIn('shared with compute0', step.command)

    def test_evacuate_again_is_the_last_manual_step(self):
        steps = verdict.manual_steps({
            'server': {'id': UUID, 'instance_name': 'instance-00000001'},
            'after_failure': {'domain': None, 'own_dir_exists': False,
                              'allocation': False}})
        self.assertEqual('openstack server evacuate --host %s %s'
                         % (verdict.DEST, UUID),
                         report.step_text(runbook.Step(**steps[-1])))
