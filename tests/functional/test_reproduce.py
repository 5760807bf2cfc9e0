# SPDX-License-Identifier: Apache-2.0

"""The reproduction, run as ``tox -e reproduce`` runs it: in a subprocess.

Every run starts real nova in-process twice and costs some seconds, so each
command line is run once per test process and its result shared by the
tests of a class (:func:`run`).
"""

import json
import os
import subprocess
import sys

import testtools
from testtools import content

#: Seconds one run of the command may take before the test gives up.
TIMEOUT = 300

_RUNS = {}

#: The checkout: the reproduction is a module of its test tree.
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def run(*args):
    """Run ``python -m tests.reproduce`` with ``args``, once per process.

    It runs from the checkout's root, as ``tox -e reproduce`` runs it.

    :returns: a ``subprocess.CompletedProcess`` with text output
    """
    if args not in _RUNS:
        _RUNS[args] = subprocess.run(
            [sys.executable, '-m', 'tests.reproduce'] + list(args),
            cwd=ROOT, capture_output=True, text=True, timeout=TIMEOUT)
    return _RUNS[args]


def attach_output(test, process):
    """Show the command's output with a failing test, only then."""
    def attach(exc_info):
        for name in ('stdout', 'stderr'):
            test.addDetail(name, content.text_content(
                getattr(process, name)))
    test.addOnException(attach)


class _Reproduce(testtools.TestCase):
    """One command line with ``--json``; subclasses check its result."""

    ARGS = ()

    def setUp(self):
        super().setUp()
        self.process = run(*(self.ARGS + ('--json',)))
        attach_output(self, self.process)
        # --json: the JSON document is all there is on stdout.
        self.result = json.loads(self.process.stdout)
        self.stock = self.result['runs'].get('stock')
        self.fixed = self.result['runs'].get('fixed')

    def test_exit_code(self):
        self.assertEqual(0, self.process.returncode)
        self.assertTrue(self.result['ok'])
        self.assertEqual(0, self.result['exit_code'])

    def test_stderr_is_progress_only(self):
        # nova's logs and warnings stay captured; no traceback without -v.
        lines = self.process.stderr.splitlines()
        self.assertNotEqual([], lines)
        for line in lines:
            self.assertTrue(line.startswith('['), line)
        self.assertNotIn('Traceback', self.process.stderr)

    def assert_fixed_clean(self):
        verdict = self.fixed['verdict']
        after = self.fixed['observations']['after_failure']
        self.assertTrue(verdict['ok'], verdict['problems'])
        self.assertEqual({}, verdict['leftovers'])
        self.assertIsNone(after['domain'])
        self.assertFalse(after['own_dir_exists'])
        self.assertEqual(0, after['own_bytes'])
        self.assertIsNone(after['allocation'])
        self.assertEqual(0, after['placement_audit']['exit_code'])
        retry = self.fixed['observations']['retry']
        self.assertEqual('ACTIVE', retry['status'])
        self.assertEqual('compute1', retry['host'])
        self.assertEqual(['openstack server evacuate --host compute1 %s' %
                          self.fixed['observations']['server']['id']],
                         [step['command']
                          for step in verdict['manual_steps']])


class NonSharedGetGuestXmlTest(_Reproduce):
    """The default stage: libvirt leaves a complete but stale disk."""

    ARGS = ('--stage', 'get_guest_xml', '--storage', 'non-shared')

    def test_stock_leaves_the_disk_and_retry_boots_it(self):
        verdict = self.stock['verdict']
        after = self.stock['observations']['after_failure']
        self.assertTrue(verdict['bug_expected'])
        self.assertTrue(verdict['bug_reproduced'])
        self.assertIsNone(after['domain'])
        self.assertTrue(after['own_dir_exists'])
        self.assertIn('disk', after['own_files'])
        self.assertGreater(after['own_bytes'], 0)
        self.assertEqual('ERROR',
                         self.stock['observations']['failed_evacuation']
                         ['status'])
        # The retry "works" but on the failed attempt's disk.
        self.assertEqual('stale-disk', verdict['retry'])
        retry = self.stock['observations']['retry']
        self.assertEqual('ACTIVE', retry['status'])
        self.assertNotEqual(retry['spawn_generation'],
                            retry['disk_generation'])
        self.assertTrue(any('rm -rf' in step['command']
                            for step in verdict['manual_steps']))

    def test_fixed_is_clean_and_retry_gets_a_fresh_disk(self):
        self.assert_fixed_clean()
        self.assertEqual('fresh-disk', self.fixed['verdict']['retry'])
        retry = self.fixed['observations']['retry']
        self.assertEqual(retry['spawn_generation'], retry['disk_generation'])
        self.assertTrue(retry['disk_complete'])


class SharedWaitForBootTest(_Reproduce):
    """A running guest is left; the retry fails with InstanceExists."""

    ARGS = ('--stage', 'wait_for_boot', '--storage', 'shared')

    def test_stock_leaves_a_running_guest_and_retry_fails(self):
        verdict = self.stock['verdict']
        observations = self.stock['observations']
        self.assertTrue(verdict['bug_reproduced'])
        self.assertEqual('running', observations['after_failure']['domain'])
        # Nothing of compute1's own: the instance directory is shared.
        self.assertEqual(0, observations['after_failure']['own_bytes'])
        self.assertTrue(observations['after_failure']['shared_disk_unchanged'])
        self.assertEqual('failed', verdict['retry'])
        self.assertEqual('ERROR', observations['retry']['status'])
        self.assertIn('already exists',
                      observations['retry']['fault_message'])
        self.assertTrue(any('virsh destroy' in step['command']
                            for step in verdict['manual_steps']))

    def test_fixed_is_clean_and_keeps_the_shared_disk(self):
        self.assert_fixed_clean()
        self.assertEqual('shared-disk', self.fixed['verdict']['retry'])
        for step in ('after_failure', 'retry'):
            self.assertTrue(
                self.fixed['observations'][step]['shared_disk_unchanged'])


class OnlyFixedTest(testtools.TestCase):
    """``--only fixed``, human-readable: one run, judged alone."""

    ARGS = ('--only', 'fixed', '--stage', 'create_disks')

    def setUp(self):
        super().setUp()
        self.process = run(*self.ARGS)
        attach_output(self, self.process)

    def test_exit_code(self):
        self.assertEqual(0, self.process.returncode)

    def test_story_and_summary(self):
        out = self.process.stdout
        for step in range(1, 6):
            self.assertIn('Step %d.' % step, out)
        self.assertIn('Summary (failure at create_disks, non-shared '
                      'storage)', out)
        self.assertIn('With the fix', out)
        self.assertNotIn('Stock nova', out)
        self.assertIn('exit 0', out)


class BadOptionTest(testtools.TestCase):

    def test_bad_stage(self):
        process = run('--stage', 'nope')
        self.assertEqual(2, process.returncode)
        self.assertEqual('', process.stdout)
        lines = process.stderr.splitlines()
        self.assertEqual(1, len(lines), process.stderr)
        self.assertIn('--stage', lines[0])
        self.assertIn('nope', lines[0])
