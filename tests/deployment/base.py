# SPDX-License-Identifier: Apache-2.0

"""The deployment the tier's tests share, and what they look at.

One :class:`~tests.deployment.tier.services.Deployment` is started
by the first test that needs it and torn down when the test process exits
(stestr runs this tier in one worker: ``--concurrency 1``). A failed test
keeps the run's directory, with every process's log, and says where it
is. Each scenario records a row for the report
(:func:`tests.reproduce.report.deployment_text`), written
at exit to ``$EVAC_DEPLOY_REPORT`` (default ``deployment-report.txt`` in
the working directory).
"""

import atexit
from importlib import metadata
import os
import signal
import subprocess
import sys
import time

import testtools
import testtools.content

from nova_evac_cleanup import runbook
from tests.deployment.tier import ha
from tests.deployment.tier import netns
from tests.deployment.tier import services
from tests.reproduce import report

SRC = 'evac-a'
DST = 'evac-b'
STOCK = services.STOCK
FIXED = services.FIXED
MODES = {STOCK: 'stock', FIXED: 'fixed'}

_STATE = {'deployment': None, 'error': None, 'failed': [], 'ha': None,
          'ha_error': None}
RESULTS = []


def _finish():
    d = _STATE['deployment']
    if d is None:
        return
    path = os.environ.get('EVAC_DEPLOY_REPORT',
                          os.path.abspath('deployment-report.txt'))
    try:
        text = report.deployment_text(RESULTS, d.timings, d.rss_samples,
                                      software_versions())
        with open(path, 'w') as f:
            f.write(text)
        sys.__stderr__.write('\n%s\nreport written to %s\n' % (text, path))
    finally:
        d.stop(keep_logs=bool(_STATE['failed']))


def storage_name(shared):
    """How the report names a storage mode."""
    return 'shared instance directory' if shared else 'non-shared storage'


def files_text(files, empty='none'):
    """An instance directory's files with their sizes, for the report."""
    return ', '.join('%s (%d B)' % item for item in files.items()) or empty


def record(scenario, storage, binary, facts):
    """One row of the report: what a scenario saw with one binary."""
    RESULTS.append({'scenario': scenario, 'storage': storage,
                    'mode': MODES[binary], 'facts': facts})


def software_versions():
    """What the deployment ran: OpenStack, libvirt, QEMU, OVS, OVN, Ceph.

    Masakari too, if a scenario started it.
    """
    found = []
    names = ['nova', 'openstack-placement', 'keystone', 'glance', 'neutron',
             'cinder']
    if _STATE['ha']:
        names += ['masakari']
    for name in names:
        try:
            found.append('%s %s' % (name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            pass
    for command in (['libvirtd', '--version'],
                    ['qemu-system-x86_64', '--version'],
                    ['ovs-vswitchd', '--version'],
                    ['ovn-controller', '--version'],
                    ['ceph', '--version']):
        try:
            out = subprocess.run(command, capture_output=True, text=True,
                                 timeout=30).stdout
        except OSError:
            continue
        if out.strip():
            found.append(out.splitlines()[0].strip())
    return found


def _exit(signum, frame):
    _STATE['failed'].append('killed by signal %d' % signum)
    sys.exit(128 + signum)


def get_deployment():
    """The shared deployment, started on first use."""
    if _STATE['error']:
        raise RuntimeError('the deployment failed to start: %s' %
                           _STATE['error'])
    if _STATE['deployment'] is None:
        # A run whose test process was killed (SIGKILL, a lost CI worker)
        # left its processes, databases and vhost: end them first.
        services.clean_stale(out=sys.__stderr__)
        d = services.Deployment(out=sys.__stderr__)
        _STATE['deployment'] = d
        atexit.register(_finish)
        # Killed (a CI timeout, ^C): still tear everything down.
        signal.signal(signal.SIGTERM, _exit)
        try:
            d.start()
        except Exception as e:
            _STATE['error'] = str(e)
            _STATE['failed'].append('start-up')
            raise
    return _STATE['deployment']


def get_ha():
    """keystone and Masakari on the shared deployment, started on first use.

    See :mod:`tests.deployment.tier.ha`.
    """
    if _STATE['ha_error']:
        raise RuntimeError('keystone and Masakari failed to start: %s' %
                           _STATE['ha_error'])
    if _STATE['ha'] is None:
        h = ha.HA(get_deployment())
        try:
            h.start()
        except Exception as e:
            _STATE['ha_error'] = str(e)
            _STATE['failed'].append('keystone and Masakari start-up')
            raise
        _STATE['ha'] = h
    return _STATE['ha']


class DeploymentTestCase(testtools.TestCase):
    """A test on the shared deployment; cleans up its servers."""

    def setUp(self):
        super().setUp()
        self.d = get_deployment()
        # Where each service's log stood when the test began.
        self._log_offsets = self._offsets()
        self.addOnException(self._keep_logs)

    def _offsets(self):
        offsets = {}
        for name in os.listdir(self.d.logs_dir):
            path = os.path.join(self.d.logs_dir, name)
            if os.path.isfile(path):
                offsets[name] = os.path.getsize(path)
        return offsets

    def _keep_logs(self, exc_info):
        """What every service logged during the test, in its own directory.

        ``logs/tests/<test id>/<service>.log``: only the lines written
        since the test began; the run's directory is kept too.
        """
        _STATE['failed'].append(self.id())
        kept = os.path.join(self.d.logs_dir, 'tests', self.id())
        os.makedirs(kept, exist_ok=True)
        for name in os.listdir(self.d.logs_dir):
            path = os.path.join(self.d.logs_dir, name)
            if not os.path.isfile(path):
                continue
            with open(path, 'rb') as src:
                src.seek(self._log_offsets.get(name, 0))
                with open(os.path.join(kept, name), 'wb') as dst:
                    dst.write(src.read())
        self.addDetail('service logs', testtools.content.text_content(kept))
        self.d.progress('FAILED %s: %s; its services\' logs kept in %s',
                        self.id(), exc_info[1], kept)

    # Hosts
    def host_up(self, host, binary=STOCK, **kwargs):
        """libvirtd and nova-compute running on ``host``, not forced down.

        nova-compute is restarted only if it must change.
        """
        self.d.ensure_compute(host, binary=binary, **kwargs)
        if self.d.compute.service(host)['forced_down']:
            self.d.compute.force_down(host, False)

    def hosts_up(self, **hosts):
        """:meth:`host_up` for several hosts, restarted side by side.

        ``hosts_up(evac_a={...}, evac_b={...})``
        """
        d = self.d
        started = []
        for key, kwargs in hosts.items():
            host = key.replace('_', '-')
            if d.ensure_compute(host, wait=False, **kwargs).restarted:
                started.append(host)
        for host in started:
            d.wait_compute(host)
        for key in hosts:
            host = key.replace('_', '-')
            if d.compute.service(host)['forced_down']:
                d.compute.force_down(host, False)

    def crash_source(self, host=SRC):
        """The host dies (nova-compute, libvirtd, QEMU).

        The operator or the HA tool marks it down, as evacuate requires.
        """
        self.d.crash_host(host)
        self.d.compute.force_down(host)

    def hold_ports(self, ports, host=DST):
        """Another process of ``host`` holds ``ports`` (first, last).

        Bound on 127.0.0.1 of the host's network namespace, where its
        nova-compute and QEMU run: nova cannot have them.
        """
        socks = []
        for port in range(ports[0], ports[1] + 1):
            s = netns.listening_socket(port, self.d.netns[host].path)
            self.addCleanup(s.close)
            socks.append(s)
        return socks

    # Servers
    def boot(self, host=SRC, name=None, image_id=None, **kwargs):
        """Boot a server on ``host``; ``kwargs`` as :meth:`.Compute.boot`."""
        return self.boot_all(host, {name or self.id().rsplit('.', 1)[-1]:
                                    dict(kwargs, image_id=image_id)})[0]

    def boot_all(self, host, servers):
        """Boot ``{name: kwargs}`` on ``host`` side by side; ACTIVE each."""
        d = self.d
        t0 = time.monotonic()
        ids = []
        for name, kwargs in servers.items():
            kwargs = dict(kwargs)
            image_id = kwargs.pop('image_id', None) or d.image_id
            server = d.compute.boot(name, d.flavor_id, image_id, host=host,
                                    **kwargs)
            self.addCleanup(self.delete_server, server['id'])
            ids.append(server['id'])
        booted = []
        for sid in ids:
            server = d.compute.wait_server(sid, ('ACTIVE', 'ERROR'))
            self.assertEqual('ACTIVE', server['status'], server.get('fault'))
            self.assertEqual(host, server['OS-EXT-SRV-ATTR:host'])
            booted.append(server)
        d.timings.setdefault('boot of %d server(s) side by side' % len(ids),
                             []).append(time.monotonic() - t0)
        return booted

    def evacuate(self, server_id, host=None, timing=None):
        """Evacuate; wait for the evacuation to end, then the server.

        The server can be ACTIVE with no task state a moment before
        nova moves it to its new host: the migration's status says when
        the evacuation is over.
        """
        return self.evacuate_all([server_id], host, timing)[0]

    def evacuate_all(self, server_ids, host=None, timing=None):
        """:meth:`evacuate` several servers at once, as HA tools do.

        :returns: [(server, migration)] in ``server_ids``' order
        """
        d = self.d
        counts = [len(d.compute.evacuations(sid)) + 1 for sid in server_ids]
        t0 = time.monotonic()
        for sid in server_ids:
            d.compute.evacuate(sid, host)
        ended = []
        for sid, count in zip(server_ids, counts):
            migration = d.compute.wait_evacuation(
                sid, ('done', 'completed', 'failed', 'error'), count)
            server = d.compute.wait_server(sid, ('ACTIVE', 'ERROR'))
            ended.append((server, migration))
        if timing:
            d.timings.setdefault(timing, []).append(time.monotonic() - t0)
        return ended

    def delete_server(self, server_id):
        """Delete with every host up, then wipe what nova left."""
        d = self.d
        down = {}
        for host in d.host_names:
            svc = d.compute_service(host)
            if not (svc and svc.running and d.host_running(host)):
                down[host.replace('-', '_')] = self._config(host)
            elif d.compute.service(host)['forced_down']:
                d.compute.force_down(host, False)
        self.hosts_up(**down)
        d.compute.delete_server(server_id)
        d.compute.wait_server_gone(server_id)
        self.wipe(server_id)

    def _config(self, host):
        svc = self.d.compute_service(host)
        config = dict(getattr(svc, 'config', None) or {})
        config.pop('binary', None)
        config.pop('hook', None)
        config.pop('death', None)
        return config

    def wipe(self, server_id):
        """Remove whatever of a deleted server remains on any host."""
        d = self.d
        for host in d.hosts.values():
            if not host.running:
                continue
            found = host.domain_uuids().get(server_id)
            if found:
                host.virsh('destroy', found[0], check=False)
                host.virsh('undefine', found[0], check=False)
        # nova deletes an RBD disk where the server is deleted.
        disk = '%s_disk' % server_id
        if disk in {i['image'] for i in d.ceph.images('vms')}:
            d.ceph.rbd('rm', 'vms/%s' % disk)
        for path in set(opts['instances_path']
                        for opts in d.compute_opts.values()):
            target = os.path.join(path, server_id)
            if os.path.isdir(target):
                for name in os.listdir(target):
                    os.unlink(os.path.join(target, name))
                os.rmdir(target)

    # Looking
    def state(self, server_id):
        """'STATUS/task_state on host; evacuation: migration status'."""
        server = self.d.compute.server(server_id)
        migs = self.d.compute.evacuations(server_id)
        return '%s/%s on %s; evacuation %s' % (
            server['status'], server.get('OS-EXT-STS:task_state'),
            server['OS-EXT-SRV-ATTR:host'],
            migs[-1]['status'] if migs else 'none')

    def log_offset(self, host):
        return os.path.getsize(self.d.compute_service(host).log_file)

    def log_since(self, host, offset, svc=None):
        svc = svc or self.d.compute_service(host)
        with open(svc.log_file, 'rb') as f:
            f.seek(offset)
            return f.read().decode(errors='replace')

    def observe(self, host, server_id):
        """What ``host`` holds of a server: guest, files, allocation."""
        d = self.d
        text, _ = d.hosts[host].list_all() if d.hosts[host].running else (
            '(libvirtd down)', {})
        guest = (d.hosts[host].domain_uuids().get(server_id)
                 if d.hosts[host].running else None)
        inst_dir = os.path.join(d.instances_path(host), server_id)
        files = {}
        if os.path.isdir(inst_dir):
            for name in sorted(os.listdir(inst_dir)):
                files[name] = os.path.getsize(os.path.join(inst_dir, name))
        disk = os.path.join(inst_dir, 'disk')
        rows = [' '.join(line.split()) for line in text.splitlines()[2:]
                if line.strip()]
        return {
            'virsh': '; '.join(rows) or '(no domain)',
            'guest': guest and '%s (%s)' % guest,
            'domain': guest and guest[0],
            'guest_state': guest and (
                'running' if guest[1] == 'running' else 'defined'),
            # An empty one too: nova takes it for shared storage.
            'instance_dir': inst_dir if os.path.isdir(inst_dir) else None,
            'files': files,
            'bytes': sum(files.values()),
            'disk_inode': os.stat(disk).st_ino if os.path.exists(
                disk) else None,
            'allocation': d.placement.allocations(server_id).get(host),
        }

    def manual_steps(self, host, server_id, left, shared=False, then=None):
        """The runbook's steps for what ``left`` shows, in a few words.

        Worked out from what was observed, by the runbook the sweep and
        the audit report with (:mod:`nova_evac_cleanup.runbook`): a server
        still in a rebuild task state, the guest and the instance
        directory on ``host`` (not on a shared instance directory: there it
        holds the server's disks), ``host``'s allocation, and a server with
        no allocation against the host it is recorded on.

        :param left: what :meth:`observe` saw on ``host``
        :param then: what gets the server running afterwards, e.g.
            ``'evacuate again'``
        """
        d = self.d
        server = d.compute.server(server_id)
        allocations = d.placement.allocations(server_id)
        steps = runbook.cleanup_steps(
            host, server_id, left['domain'],
            task_stuck=server.get('OS-EXT-STS:task_state') is not None,
            guest=left['guest_state'],
            instance_dir=None if shared else left['instance_dir'],
            providers=([d.placement.providers()[host]]
                       if left['allocation'] else ()))
        if server['OS-EXT-SRV-ATTR:host'] not in allocations:
            steps.append(runbook.heal_allocations(server_id))
        words = [step.what for step in steps]
        if then:
            words.append(then)
        if not steps:
            return 'none on %s%s' % (host, '; ' + then if then else '')
        return '; '.join(words)
