# SPDX-License-Identifier: Apache-2.0

"""``nova-evac-cleanup audit`` as an operator runs it, end to end.

The console script runs in its own process, from a configuration file, on
whatever nova release is installed (the ``release-NN-patched`` tox
environments run this module on nova 31 to 34): its start-up, the host lock
it shares with nova-compute, what it writes and how it fails. The database
is a SQLite file synced with nova's own migrations, and placement a stand-in
that only answers version discovery: an empty host needs nothing more.

:class:`OperatorGuideExampleTest` runs the audit in-process against real
nova on the fake libvirt driver, for the example the operator guide shows:
its output must be the guide's, so that the guide cannot drift.
"""

import atexit
import fcntl
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import textwrap
import threading

import fixtures
from nova.compute import manager as nova_manager
import testtools

from nova_evac_cleanup.cmd import audit as audit_cmd
from nova_evac_cleanup import fixture as evac_fixture
from nova_evac_cleanup import manager
from tests.harness import functional as base

HOST = 'auditedhost'
#: The audit exits 5 on a configuration problem it finds before starting.
CONFIG_ERROR = audit_cmd.CONFIG_ERROR
GUIDE = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__)))), 'doc', 'source', 'admin', 'index.rst')

_SYNC = '''
import sys
from nova import config
from nova.db import migration
config.parse_args(['sync', '--config-file', sys.argv[1]])
migration.db_sync(database='main')
'''


class _PlacementVersions(http.server.BaseHTTPRequestHandler):
    """Placement's version document, all an empty host's audit asks."""

    def do_GET(self):
        body = json.dumps({'versions': [{
            'id': 'v1.0', 'min_version': '1.0', 'max_version': '1.39',
            'status': 'CURRENT',
            'links': [{'rel': 'self', 'href': ''}]}]}).encode()
        self.send_response(200)
        self.send_header('Content-Type', 'application/json')
        self.send_header('Content-Length', str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


_TEMPLATE = {}


def _synced_database():
    """A SQLite file with nova's schema, made once per test process."""
    if 'path' not in _TEMPLATE:
        root = tempfile.mkdtemp(prefix='nova-evac-cleanup-audit-')
        atexit.register(shutil.rmtree, root, True)
        path = os.path.join(root, 'nova.sqlite')
        config = os.path.join(root, 'sync.conf')
        with open(config, 'w') as stream:
            stream.write('[database]\nconnection = sqlite:///%s\n' % path)
        subprocess.run([sys.executable, '-c', _SYNC, config],
                       check=True, capture_output=True, timeout=90)
        _TEMPLATE['path'] = path
    return _TEMPLATE['path']


def _console_script(name):
    return os.path.join(os.path.dirname(sys.executable), name)


class AuditCommandTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(120, gentle=True))
        self.root = self.useFixture(fixtures.TempDir()).path
        self.locks = os.path.join(self.root, 'locks')
        self.journal = os.path.join(self.root, 'journal')
        for path in (self.locks, self.journal,
                     os.path.join(self.root, 'instances')):
            os.makedirs(path)
        server = http.server.HTTPServer(('127.0.0.1', 0), _PlacementVersions)
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        self.addCleanup(server.server_close)
        self.addCleanup(server.shutdown)
        self.placement = 'http://127.0.0.1:%d/placement' % (
            server.server_address[1])
        self.config = self.write_config('nova.conf')
        shutil.copyfile(_synced_database(), os.path.join(self.root,
                                                         'nova.sqlite'))

    def write_config(self, name, database=None, placement=True):
        path = os.path.join(self.root, name)
        text = textwrap.dedent('''\
            [DEFAULT]
            host = %(host)s
            compute_driver = fake.FakeDriver
            state_path = %(root)s
            instances_path = %(root)s/instances
            transport_url = fake:/
            [database]
            connection = %(database)s
            [oslo_concurrency]
            lock_path = %(locks)s
            [evacuate_cleanup]
            journal_path = %(journal)s
            ''') % {
            'host': HOST, 'root': self.root, 'locks': self.locks,
            'journal': self.journal,
            'database': database or 'sqlite:///%s/nova.sqlite' % self.root}
        if placement:
            text += textwrap.dedent('''\
                [placement]
                auth_type = none
                endpoint_override = %s
                ''') % self.placement
        with open(path, 'w') as stream:
            stream.write(text)
        return path

    def audit(self, *args, config=None):
        return subprocess.run(
            [_console_script('nova-evac-cleanup'), '--config-file',
             config or self.config, 'audit'] + list(args),
            capture_output=True, text=True, timeout=90)

    def snapshot(self):
        """Every file under the test's root, with its size and mtime."""
        result = {}
        for dirpath, _dirnames, filenames in os.walk(self.root):
            for name in filenames:
                stat = os.stat(os.path.join(dirpath, name))
                result[os.path.join(dirpath, name)] = (
                    stat.st_size, stat.st_mtime_ns)
        return result

    def assert_one_line_error(self, result, code=1):
        self.assertEqual(code, result.returncode, result)
        self.assertNotIn('Traceback', result.stderr)
        errors = [line for line in result.stderr.splitlines()
                  if line.startswith('nova-evac-cleanup: ')]
        self.assertEqual(1, len(errors), result.stderr)
        return errors[0]

    def test_empty_host_reported_and_nothing_written(self):
        before = self.snapshot()
        result = self.audit('--json')
        self.assertEqual(0, result.returncode, result)
        report = json.loads(result.stdout)
        self.assertEqual(HOST, report['host'])
        self.assertFalse(report['delete'])
        self.assertEqual([], report['evacuations'])
        self.assertEqual(before, self.snapshot())
        self.assertEqual([], os.listdir(self.locks))

        result = self.audit()
        self.assertEqual(0, result.returncode, result)
        self.assertIn('nothing left by failed or interrupted evacuations',
                      result.stdout)

    def test_delete_refused_while_the_host_lock_is_held(self):
        """The lock of a running nova-compute, in another process."""
        with open(os.path.join(self.locks, 'nova-evac-cleanup-' + HOST),
                  'a') as lock:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            error = self.assert_one_line_error(self.audit('--delete'))
        self.assertIn('refusing --delete', error)
        self.assertIn('nova-compute or nova-evac-cleanup audit --delete is '
                      'running', error)

        result = self.audit('--delete', '--json')
        self.assertEqual(0, result.returncode, result)
        self.assertTrue(json.loads(result.stdout)['delete'])

    def test_database_unreachable(self):
        config = self.write_config(
            'bad.conf', database='sqlite:///%s/nowhere/nova.sqlite' %
            self.root)
        self.assert_one_line_error(self.audit(config=config))

    def test_placement_not_configured(self):
        config = self.write_config('noplacement.conf', placement=False)
        error = self.assert_one_line_error(self.audit(config=config),
                                           CONFIG_ERROR)
        self.assertIn('[placement] auth_type is not set in %s' % config,
                      error)

    def test_config_file_missing(self):
        missing = os.path.join(self.root, 'missing.conf')
        error = self.assert_one_line_error(self.audit(config=missing),
                                           CONFIG_ERROR)
        self.assertIn('Failed to find some config files: %s' % missing,
                      error)


def guide_example(command, path=GUIDE):
    """The output the operator guide shows under ``$ command``.

    :returns: its lines, without the block's indentation
    """
    with open(path) as stream:
        lines = stream.read().splitlines()
    for i, line in enumerate(lines):
        if line.strip() == '$ ' + command:
            indent = len(line) - len(line.lstrip())
            break
    else:
        raise AssertionError('no "$ %s" in %s' % (command, path))
    output = []
    for line in lines[i + 1:]:
        if line.strip() and len(line) - len(line.lstrip()) < indent:
            break
        if line.strip().startswith('$ '):
            break
        output.append(line[indent:])
    while output and not output[-1].strip():
        output.pop()
    return output


def normalised(lines, instances_path=None):
    """What may differ from one run to the next, made the same.

    Each UUID becomes ``UUID-n`` by order of appearance (the same UUID
    keeps its name), the fake driver's instances directory nova's default
    one, and each size ``N bytes``.
    """
    text = '\n'.join(lines)
    if instances_path:
        text = text.replace(instances_path.rstrip('/'),
                            '/var/lib/nova/instances')
    names = {}

    def name(match):
        return names.setdefault(match.group(0).lower(),
                                'UUID-%d' % (len(names) + 1))

    text = re.sub(r'[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}',
                  name, text)
    text = re.sub(r'\(\d+ bytes\)', '(N bytes)', text)
    return text.splitlines()


class OperatorGuideExampleTest(base.EvacuateTestCase):
    """The guide's example: a leftover from before the project was installed.

    compute0 dies and its server is evacuated to compute1, which still runs
    stock nova's compute manager: the spawn fails while the guest boots,
    and nova leaves the guest and its files on compute1 (the bug). Then the
    project is installed on compute1 and nova-compute restarted with its
    manager. compute1 never journaled that evacuation: ``audit`` reports
    the leftover, with the commands to remove it by hand, and keeps it;
    ``audit --delete`` (nova-compute stopped) does not remove it either.
    Their text output is the operator guide's, UUIDs, paths and sizes
    aside.
    """

    # compute1 runs stock nova's manager during the evacuation.
    FIXED = False
    AUDIT = 'nova-evac-cleanup --config-file /etc/nova/nova.conf audit'

    def setUp(self):
        super().setUp()
        if base.nova_is_patched():
            self.skipTest("a patched nova's own manager cleans up: no "
                          "leftover")

    def _audit(self, delete=False):
        """The audit of compute1 as text: its return code and lines."""
        code, out, _err = self._run_audit(delete=delete)
        return code, out.splitlines()

    def assert_guide_shows(self, command, output):
        instances = self.world.instances_path(base.DEST)
        self.assertEqual(normalised(guide_example(command)),
                         normalised(output, instances))

    def test_leftover_from_before_the_install_is_kept(self):
        # Meta-test: compute1 runs nova's own manager, not the project's.
        self.assertIs(nova_manager.ComputeManager,
                      type(self.compute1.manager))
        server = self._boot()
        self._fail_source()
        server, _error = self._fail_evacuation(server, 'wait_for_boot')
        # Stock nova left the guest and its files on compute1.
        guest = self.world.domain_state(base.DEST, server['id'])
        files = self.world.files(base.DEST, server['id'])
        self.assertIsNotNone(guest)
        self.assertIn('disk', files)

        # The project is installed on compute1; nova-compute restarts.
        self.useFixture(evac_fixture.EvacuateCleanupFixture())
        self.compute1 = self.restart_compute_service(self.compute1)
        self.assertIsInstance(self.compute1.manager, manager.ComputeManager)

        code, output = self._audit()
        self.assertEqual(audit_cmd.FOUND, code, output)
        self.assert_guide_shows(self.AUDIT, output)

        # audit --delete runs with nova-compute stopped (and, a minute
        # later, seen down).
        self.compute1.stop()
        self.admin_api.put_service_force_down(self.admin_api.get_services(
            binary='nova-compute', host=base.DEST)[0]['id'], True)
        code, output = self._audit(delete=True)
        self.assertEqual(audit_cmd.FOUND, code, output)
        self.assert_guide_shows(self.AUDIT + ' --delete', output)
        # Kept: this host has no record that it made them.
        self.assertEqual(guest,
                         self.world.domain_state(base.DEST, server['id']))
        self.assertEqual(files, self.world.files(base.DEST, server['id']))
