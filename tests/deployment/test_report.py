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

"""The report's rendering, without a deployment."""

import testtools

from nova_evac_cleanup.deployment import report


class TestReport(testtools.TestCase):

    def test_render(self):
        rows = [
            {'scenario': '2. second', 'storage': 'shared', 'mode': 'fixed',
             'facts': {'Left': 'nothing'}},
            {'scenario': '1. first', 'storage': 'non-shared',
             'mode': 'stock', 'facts': {'Left': 'disk (196624 B)',
                                        'Retry': 'ACTIVE, stale disk'}},
            {'scenario': '1. first', 'storage': 'non-shared',
             'mode': 'fixed', 'facts': {'Left': 'none'}},
        ]
        text = report.render(rows, {'start-up': 58.6, 'boot': [2.0, 4.0]},
                             {'idle': {'nova-api': 2048, 'placement': 1024}})
        # Scenarios in order, stock and fixed side by side, a missing
        # fact or mode said so.
        self.assertLess(text.index('1. first (non-shared)'),
                        text.index('2. second (shared)'))
        self.assertIn('| Left', text)
        self.assertIn('disk (196624 B)', text)
        self.assertIn('not run', text)
        self.assertIn('58.6 s', text)
        self.assertIn('3.0 s mean, 2.0-4.0 s (2 runs)', text)
        self.assertIn('| total', text)
        self.assertIn('3 MiB', text)

    def test_grid_wraps_cells(self):
        text = report.grid(['a', 'b'], [['x' * 40, 'y']], widths=[10, 5])
        lines = text.splitlines()
        self.assertEqual({len(lines[0])}, set(len(line) for line in lines))
        self.assertEqual(4, sum(1 for line in lines if 'xxxx' in line))
