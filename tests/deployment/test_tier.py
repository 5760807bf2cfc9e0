# SPDX-License-Identifier: Apache-2.0

"""The tier's own machinery, without a deployment.

A service that fails names itself and shows its last log lines; the
forwarder carries a connection from a host's network namespace to
127.0.0.1 of ours; a crashed host's RBD watches are told apart.
"""

import os
import subprocess
import sys
import uuid

import fixtures
import testtools

from tests.deployment.tier import hypervisor
from tests.deployment.tier import netns
from tests.deployment.tier import observe
from tests.deployment.tier import services


class TestServiceFailure(testtools.TestCase):

    def test_exit_names_the_service_and_its_last_lines(self):
        log = os.path.join(self.useFixture(fixtures.TempDir()).path,
                           'svc.log')
        svc = services.Service('glance-api', [
            'sh', '-c', 'for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17;'
            ' do echo line $i; done; echo "the real cause"; exit 3'], log)
        svc.start()
        svc.proc.wait()
        e = self.assertRaises(services.ServiceFailed, svc.check)
        text = str(e)
        self.assertIn('glance-api exited with 3', text)
        self.assertIn(log, text)
        self.assertIn('the real cause', text)
        self.assertIn('line 17', text)
        # Only the last lines, not the whole log.
        self.assertNotIn('line 1\n', text)

    def test_critical_line_names_the_service(self):
        log = os.path.join(self.useFixture(fixtures.TempDir()).path,
                           'svc.log')
        svc = services.Service('nova-compute-evac-b', [
            'sh', '-c', 'echo "2026-01-01 00:00:00.000 42 CRITICAL nova '
            '[-] Unhandled error"; sleep 30'], log)
        svc.start()
        self.addCleanup(svc.stop)
        # The log's first line, the command, names it too.
        hypervisor.wait_for(
            lambda: open(log, 'rb').read().count(b'CRITICAL') == 2, 10,
            'the log line')
        e = self.assertRaises(services.ServiceFailed, svc.check)
        self.assertIn('nova-compute-evac-b: 2026-01-01', str(e))
        self.assertIn('Unhandled error', str(e))


class TestForwarder(testtools.TestCase):
    """127.0.0.1:N in a namespace reaches 127.0.0.1:N here."""

    def test_connection_reaches_the_root_namespace(self):
        run_id = 'test%s' % uuid.uuid4().hex[:4]
        ns = netns.HostNetns(run_id, 'evac-t', 0)
        self.addCleanup(netns.remove, run_id)
        ns.create()
        server = netns.listening_socket(0)
        self.addCleanup(server.close)
        port = server.getsockname()[1]
        log = os.path.join(self.useFixture(fixtures.TempDir()).path,
                           'forwarder.log')
        fwd = services.Service('forwarder', [
            sys.executable, '-m', 'tests.deployment.tier.forward',
            '--netns', ns.path, '--port', str(port)], log)
        fwd.start()
        self.addCleanup(fwd.stop)
        hypervisor.wait_for(
            lambda: fwd.check() or b'forwarding' in open(log, 'rb').read(),
            30, 'the forwarder')
        client = subprocess.Popen(ns.argv([
            sys.executable, '-c',
            'import socket; s = socket.create_connection(("127.0.0.1", %d));'
            ' s.sendall(b"ping"); print(s.recv(4).decode())' % port]),
            stdout=subprocess.PIPE, text=True)
        conn, _ = server.accept()
        self.assertEqual(b'ping', conn.recv(4))
        conn.sendall(b'pong')
        conn.close()
        self.assertEqual('pong', client.communicate(timeout=30)[0].strip())
        # Meta-test: in the namespace only the forwarded port answers.
        other = services.free_port()
        self.assertNotEqual(0, subprocess.run(ns.argv([
            sys.executable, '-c', 'import socket; socket.create_connection('
            '("127.0.0.1", %d), timeout=5)' % other]),
            capture_output=True).returncode)


class TestWatchers(testtools.TestCase):

    def test_a_crashed_hosts_watch_is_no_writer(self):
        dead = {'127.0.0.1:0/1'}
        watchers = ['127.0.0.1:0/1', '127.0.0.1:0/2']
        self.assertEqual(['127.0.0.1:0/2'],
                         observe.live_watchers(watchers, dead))
        self.assertEqual('1 (and 1 of a crashed host, timing out)',
                         observe.watchers_text(watchers, dead))
        self.assertEqual('2', observe.watchers_text(watchers))
