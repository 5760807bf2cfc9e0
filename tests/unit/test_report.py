# SPDX-License-Identifier: Apache-2.0

"""The reports' tables, with made-up observations (no nova running)."""

import collections

import docutils.core
import docutils.utils
import testtools

from tests.reproduce import report


def parse_rst_table(text):
    """The cells of the one grid table in ``text``, parsed by docutils.

    A table docutils cannot parse raises: both reports promise tables the
    documentation can include as they are.
    """
    settings = {'report_level': docutils.utils.Reporter.SEVERE_LEVEL + 1,
                'halt_level': docutils.utils.Reporter.WARNING_LEVEL}
    doctree = docutils.core.publish_doctree(text,
                                            settings_overrides=settings)
    rows = []
    for row in doctree.findall(lambda node: node.tagname == 'row'):
        rows.append([' '.join(entry.astext().split())
                     for entry in row.children])
    return rows


class TestTable(testtools.TestCase):

    def test_cells_wrap_to_the_widths_given(self):
        text = report.table(['a', 'b'], [['x' * 40, 'y']], widths=[10, 5])
        lines = text.splitlines()
        self.assertEqual({len(lines[0])}, set(len(line) for line in lines))
        self.assertEqual(4, sum(1 for line in lines if 'xxxx' in line))

    def test_columns_fit_their_content_up_to_the_cap(self):
        text = report.table(['', 'short'],
                            [['label', 'word ' * 20]])
        first = text.splitlines()[0]
        widths = [len(part) - 2 for part in first.strip('+').split('+')]
        self.assertEqual([5, report.CELL_WIDTH], widths)

    def test_list_cells_keep_their_lines(self):
        text = report.table(['', 'run'], [['x', ['one', 'two']]])
        self.assertIn('| x | one |', text)
        self.assertIn('|   | two |', text)

    def test_is_a_grid_table_docutils_parses(self):
        text = report.table(['', 'Stock', 'Fixed'],
                            [['Left', 'disk (196624 B), console.log', ''],
                             ['Retry', ['ACTIVE,', 'stale disk'], 'ok']])
        self.assertEqual(
            [['', 'Stock', 'Fixed'],
             ['Left', 'disk (196624 B), console.log', ''],
             ['Retry', 'ACTIVE, stale disk', 'ok']],
            parse_rst_table(text))


class TestComparison(testtools.TestCase):

    def test_facts_in_first_seen_order_missing_ones_said(self):
        columns = collections.OrderedDict([
            ('Stock', collections.OrderedDict([('Left', 'disk'),
                                               ('Retry', 'stale')])),
            ('Fixed', collections.OrderedDict([('Left', 'nothing'),
                                               ('Audit', 'clean')])),
        ])
        self.assertEqual(
            [['', 'Stock', 'Fixed'],
             ['Left', 'disk', 'nothing'],
             ['Retry', 'stale', report.NOT_RECORDED],
             ['Audit', report.NOT_RECORDED, 'clean']],
            parse_rst_table(report.comparison(columns)))


class TestDeploymentText(testtools.TestCase):

    ROWS = [
        {'scenario': '2. second', 'storage': 'shared', 'mode': 'fixed',
         'facts': {'Left': 'nothing'}},
        {'scenario': '1. first', 'storage': 'non-shared',
         'mode': 'stock', 'facts': {'Left': 'disk (196624 B)',
                                    'Retry': 'ACTIVE, stale disk'}},
        {'scenario': '1. first', 'storage': 'non-shared',
         'mode': 'fixed', 'facts': {'Left': 'none'}},
    ]

    def test_scenarios_in_order_stock_and_fixed_side_by_side(self):
        text = report.deployment_text(self.ROWS,
                                      software=['nova 34.0.0'])
        self.assertIn('Software: nova 34.0.0', text)
        first = text.index('1. first (non-shared)')
        second = text.index('2. second (shared)')
        self.assertLess(first, second)
        self.assertEqual(
            [['', 'Stock nova-compute', 'nova-compute-evac-cleanup'],
             ['Left', 'disk (196624 B)', 'none'],
             ['Retry', 'ACTIVE, stale disk', report.NOT_RECORDED]],
            parse_rst_table(text[first:second]))
        # A mode a scenario did not run is a column of "not run".
        self.assertEqual(
            [['', 'Stock nova-compute', 'nova-compute-evac-cleanup'],
             ['Left', report.NOT_RECORDED, 'nothing']],
            parse_rst_table(text[second:]))

    def test_timings_and_memory(self):
        text = report.deployment_text(
            [], {'start-up': 58.6, 'boot': [2.0, 4.0]},
            {'idle': {'nova-api': 2048, 'placement': 1024}})
        self.assertIn('58.6 s', text)
        self.assertIn('3.0 s mean, 2.0-4.0 s (2 runs)', text)
        memory = text[text.index('Memory (RSS)'):]
        self.assertEqual(
            [['Process', 'RSS'], ['nova-api', '2 MiB'],
             ['placement', '1 MiB'], ['total', '3 MiB']],
            parse_rst_table(memory[memory.index('+'):]))
