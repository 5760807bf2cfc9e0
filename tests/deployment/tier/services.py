# SPDX-License-Identifier: Apache-2.0

"""Start and stop the whole deployment: databases, vhost, every service.

:class:`Deployment` starts from nothing: its own database names and
RabbitMQ vhost (named after the run), a configuration file per service,
keystone (:mod:`.identity`), Ceph (:mod:`.ceph`), OVN's databases and
northd (:mod:`.ovn`), the cell set-up nova-manage does, placement and the
compute API under uWSGI, nova-conductor, nova-scheduler, glance
(:mod:`.glance`), neutron with ML2/OVN (:mod:`.neutron`) and cinder on
RBD (:mod:`.cinder`); and for each simulated host a network namespace
(:mod:`.netns`) holding its OVS and ovn-controller, its libvirtd
(:mod:`.hypervisor`) and its nova-compute, which reach the services on
127.0.0.1 through the forwarder (:mod:`.forward`). It waits on real
readiness (services up in their APIs, resource providers in placement,
the chassis in OVN) and tears everything down, keeping every log when
asked to (a failed run).
"""

import configparser
import datetime
import functools
import json
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid

import pymysql

from tests.deployment.tier import ceph
from tests.deployment.tier import cinder
from tests.deployment.tier import client
from tests.deployment.tier import deathpoint
from tests.deployment.tier import glance
from tests.deployment.tier import hypervisor
from tests.deployment.tier import identity
from tests.deployment.tier import netns
from tests.deployment.tier import neutron
from tests.deployment.tier import ovn

# oslo.log's line: date time pid LEVEL logger
CRITICAL = re.compile(rb'^\S+ \S+ \d+ CRITICAL ')
FLAVOR = {'name': 'evac-tiny', 'ram': 64, 'vcpus': 1, 'disk': 1}
STOCK = 'nova-compute'
FIXED = 'nova-compute-evac-cleanup'

API_PASTE = '''\
[composite:osapi_compute]
use = call:nova.api.openstack.urlmap:urlmap_factory
/: oscomputeversions
/v2.1: oscomputeversion_v2
/v2.1/+: openstack_compute_api_v21

[pipeline:openstack_compute_api_v21]
pipeline = compute_req_id faultwrap request_log authtoken keystonecontext
  osapi_compute_app_v21

[pipeline:oscomputeversions]
pipeline = faultwrap oscomputeversionapp

[pipeline:oscomputeversion_v2]
pipeline = compute_req_id faultwrap oscomputeversionapp_v2

[filter:authtoken]
paste.filter_factory = keystonemiddleware.auth_token:filter_factory

[filter:keystonecontext]
paste.filter_factory = nova.api.auth:NovaKeystoneContext.factory

[filter:compute_req_id]
paste.filter_factory = nova.api.compute_req_id:ComputeReqIdMiddleware.factory

[filter:faultwrap]
paste.filter_factory = nova.api.openstack:FaultWrapper.factory

[filter:request_log]
paste.filter_factory = nova.api.openstack.requestlog:RequestLog.factory

[app:osapi_compute_app_v21]
paste.app_factory = nova.api.openstack.compute:APIRouterV21.factory

[app:oscomputeversionapp]
paste.app_factory = nova.api.openstack.compute.versions:Versions.factory

[app:oscomputeversionapp_v2]
paste.app_factory = nova.api.openstack.compute.versions:VersionsV2.factory
'''


def free_port():
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


def free_port_range(count=2):
    """``count`` consecutive free ports: (first, last).

    Below the kernel's ephemeral range: a port there, free now, may be an
    outgoing connection's a second later, and a QEMU serial console on it
    then fails with "Address already in use" (a Masakari test did so).
    """
    with open('/proc/sys/net/ipv4/ip_local_port_range') as ports:
        ephemeral = int(ports.read().split()[0])
    for _ in range(100):
        first = random.randrange(10000, ephemeral - count)
        socks = []
        try:
            for port in range(first, first + count):
                s = socket.socket()
                socks.append(s)
                s.bind(('127.0.0.1', port))
            return first, first + count - 1
        except OSError:
            continue
        finally:
            for s in socks:
                s.close()
    raise RuntimeError('no %d consecutive free ports' % count)


def utcnow():
    return datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)


def _parse_time(value):
    return datetime.datetime.fromisoformat(value.rstrip('Z').split('+')[0])


def rss_kb(pid):
    """Resident set size of a process and all its descendants, in KiB."""
    total = 0
    todo = [pid]
    while todo:
        p = todo.pop()
        try:
            with open('/proc/%d/status' % p) as f:
                for line in f:
                    if line.startswith('VmRSS:'):
                        total += int(line.split()[1])
            with open('/proc/%d/task/%d/children' % (p, p)) as f:
                todo.extend(int(c) for c in f.read().split())
        except OSError:
            continue
    return total


def record_pgid(run_dir, pgid):
    """Note a process group this run started, for :func:`clean_stale`."""
    with open(os.path.join(run_dir, 'pgids'), 'a') as f:
        f.write('%d\n' % pgid)


def clean_stale(base_dir=None, out=None):
    """Tear down the runs whose test process died without doing it.

    A run is stale when the process that started it (``run.json``) is
    gone. Only the process groups the run recorded are killed, and only if
    their leader's command line names the run's directory; then its
    databases and vhost are dropped. Its directory (the logs) is kept.

    :returns: the run ids cleaned
    """
    base_dir = base_dir or os.environ.get('EVAC_DEPLOY_DIR', '/var/tmp')
    out = out or sys.stderr
    cleaned = []
    for name in sorted(os.listdir(base_dir)):
        run_dir = os.path.join(base_dir, name)
        meta = os.path.join(run_dir, 'run.json')
        if not (name.startswith('nova-evac-deploy-') and
                os.path.isfile(meta)):
            continue
        with open(meta) as f:
            run = json.load(f)
        if os.path.exists('/proc/%d' % run['owner']):
            continue
        try:
            with open(os.path.join(run_dir, 'pgids')) as f:
                pgids = [int(line) for line in f if line.strip()]
        except FileNotFoundError:
            pgids = []
        for pgid in pgids:
            try:
                with open('/proc/%d/cmdline' % pgid, 'rb') as f:
                    cmdline = f.read().decode(errors='replace')
            except OSError:
                continue
            if run_dir in cmdline:
                try:
                    os.killpg(pgid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        conn = pymysql.connect(host='127.0.0.1', port=3306, user='root',
                               password='', autocommit=True)
        try:
            with conn.cursor() as cur:
                for db in run['databases']:
                    cur.execute('DROP DATABASE IF EXISTS `%s`' % db)
        finally:
            conn.close()
        subprocess.run(['rabbitmqctl', '-q', 'delete_vhost', run['vhost']],
                       capture_output=True)
        # Its hosts' network namespaces, veths and underlay bridge.
        netns.remove(run['run_id'])
        os.rename(meta, meta + '.cleaned')
        out.write('cleaned stale deployment run %s (logs kept in %s)\n' % (
            run['run_id'], run_dir))
        cleaned.append(run['run_id'])
    return cleaned


class ServiceFailed(RuntimeError):
    """A service exited or logged a fatal error; says which, and its log."""


class Service(object):
    """One process of the deployment, logging to its own file."""

    def __init__(self, name, argv, log_file, env=None):
        self.name = name
        self.argv = argv
        self.log_file = log_file
        self.env = env
        self.proc = None
        self.started_at = None
        self._checked = 0
        # Set to the run's directory: the process group is recorded there.
        self.run_dir = None

    def start(self):
        log = open(self.log_file, 'ab')
        log.write(('--- %s: %s\n' % (utcnow().isoformat(),
                                     ' '.join(self.argv))).encode())
        log.flush()
        env = dict(os.environ)
        env.update(self.env or {})
        self.started_at = utcnow()
        self._checked = self.log_start = os.path.getsize(self.log_file)
        self.proc = subprocess.Popen(
            self.argv, stdout=log, stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        log.close()
        if self.run_dir:
            record_pgid(self.run_dir, self.proc.pid)

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def check(self):
        """Raise if the process exited or logged a CRITICAL error.

        nova logs its fatal start-up errors, then may hang in shutdown.
        """
        if self.proc is not None and self.proc.poll() is not None:
            raise ServiceFailed('%s exited with %s; see %s; its last '
                                'lines:\n%s' % (
                                    self.name, self.proc.returncode,
                                    self.log_file, self.tail()))
        with open(self.log_file, 'rb') as f:
            f.seek(self._checked)
            new = f.read()
        self._checked += len(new)
        for line in new.splitlines():
            if CRITICAL.match(line):
                raise ServiceFailed('%s: %s; see %s; its last lines:\n%s' % (
                    self.name, line.decode(errors='replace')[:400],
                    self.log_file, self.tail()))

    def logged(self, text):
        """Whether this run of the process logged ``text`` (bytes)."""
        with open(self.log_file, 'rb') as f:
            f.seek(self.log_start)
            return text in f.read()

    def tail(self, lines=15):
        """The last lines of the service's log."""
        try:
            with open(self.log_file, 'rb') as f:
                f.seek(max(0, os.path.getsize(self.log_file) - 16384))
                text = f.read().decode(errors='replace')
        except OSError as e:
            return '(no log: %s)' % e
        return '\n'.join('    ' + line[:300]
                         for line in text.splitlines()[-lines:])

    def stop(self, sig=signal.SIGTERM, timeout=30):
        """Signal the process group; SIGKILL it if it outlives timeout."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
            except ProcessLookupError:
                pass
        # Whatever it left in its group (uWSGI workers, privsep daemon).
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc = None

    def kill(self):
        """SIGKILL the main process only, as the OOM killer would.

        Its privsep daemon dies when its socket closes.
        """
        if self.running:
            self.proc.kill()
            self.proc.wait()
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, AttributeError):
            pass
        self.proc = None

    def rss_kb(self):
        return rss_kb(self.proc.pid) if self.running else 0


class Deployment(object):
    """The whole deployment of one run.

    :param hosts: the simulated compute hosts' names
    :param base_dir: where configuration, state, instances and logs go
    :param out: where progress lines go
    """

    def __init__(self, hosts=('evac-a', 'evac-b', 'evac-c'), base_dir=None,
                 out=None, debug=True):
        self.run_id = uuid.uuid4().hex[:8]
        self.dir = base_dir or os.path.join(
            os.environ.get('EVAC_DEPLOY_DIR', '/var/tmp'),
            'nova-evac-deploy-%s' % self.run_id)
        self.out = out or sys.stderr
        self.debug = debug
        self.bin = os.path.dirname(os.path.abspath(sys.executable))
        self.db = {name: 'evac_%s_%s' % (self.run_id, name)
                   for name in ('api', 'cell0', 'cell1', 'placement',
                                'keystone', 'glance', 'neutron', 'cinder',
                                # Masakari (.ha), if started
                                'masakari', 'masakari_taskflow')}
        self.vhost = 'evac-%s' % self.run_id
        self.transport_url = 'rabbit://guest:guest@127.0.0.1:5672/%s' % (
            self.vhost)
        self.ports = {name: free_port() for name in ('placement', 'api')}
        self.host_names = list(hosts)
        self.netns = {name: netns.HostNetns(self.run_id, name, i)
                      for i, name in enumerate(hosts)}
        self.hosts = {
            name: hypervisor.LibvirtHost(
                name, os.path.join(self.dir, 'hosts', name),
                wrap=self.netns[name].argv)
            for name in hosts}
        self.keystone = identity.Keystone(self)
        self.ceph = ceph.Ceph(self)
        self.ovn = ovn.Central(self)
        self.glance = glance.Glance(self)
        self.neutron = neutron.Neutron(self)
        self.cinder = cinder.Cinder(self)
        self.chassis = {name: ovn.Chassis(self, self.ovn, name,
                                          self.netns[name])
                        for name in hosts}
        self.services = {}
        self.compute_opts = {}
        self.timings = {}
        self.rss_samples = {}
        self._t0 = time.monotonic()
        token = self.keystone.client.token
        self.compute = client.Compute(
            'http://127.0.0.1:%d/v2.1' % self.ports['api'], token)
        self.placement = client.Placement(
            'http://127.0.0.1:%d' % self.ports['placement'], token)
        self.flavor_id = None
        self.image_id = None
        self.created = []
        self.logs_dir = os.path.join(self.dir, 'logs')

    # Progress
    def progress(self, msg, *args):
        line = '[deploy %6.1fs] %s' % (time.monotonic() - self._t0,
                                       msg % args if args else msg)
        self.out.write(line + '\n')
        self.out.flush()
        with open(os.path.join(self.logs_dir, 'progress.log'), 'a') as f:
            f.write(line + '\n')

    def _run(self, *argv, **kwargs):
        log = os.path.join(self.logs_dir, 'setup.log')
        t0 = time.monotonic()
        with open(log, 'ab') as f:
            f.write(('--- %s\n' % ' '.join(argv)).encode())
            f.flush()
            result = subprocess.run(argv, stdout=f, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, **kwargs)
            f.write(('--- took %.1fs\n' % (time.monotonic() - t0)).encode())
        if result.returncode:
            raise RuntimeError('%s failed (%d); see %s' % (
                ' '.join(argv), result.returncode, log))

    def _run_parallel(self, *commands, before=None):
        """Run (name, argv...) commands at once; ``before`` meanwhile."""
        t0 = time.monotonic()
        procs = []
        for name, *argv in commands:
            log = open(self.path('logs', '%s.log' % name), 'wb')
            procs.append((name, subprocess.Popen(
                argv, stdout=log, stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL)))
            log.close()
        if before:
            before()
        failed = [name for name, proc in procs if proc.wait()]
        if failed:
            raise RuntimeError('%s failed; see their logs in %s:\n%s' % (
                ', '.join(failed), self.logs_dir, '\n'.join(
                    '%s:\n%s' % (name, Service(
                        name, None, self.path('logs', '%s.log' % name)
                    ).tail()) for name in failed)))
        self.progress('%s done (%.1fs)', ', '.join(n for n, _ in procs),
                      time.monotonic() - t0)

    def free_port_range(self, count, host):
        """``count`` consecutive ports free here and in ``host``'s namespace.

        The forwarder holds ports in every host's namespace that may be
        free in ours (Ceph's whole messenger range).
        """
        for _ in range(100):
            first, last = free_port_range(count)
            socks = []
            try:
                for port in range(first, last + 1):
                    socks.append(netns.listening_socket(
                        port, self.netns[host].path))
                return first, last
            except OSError:
                continue
            finally:
                for sock in socks:
                    sock.close()
        raise RuntimeError('no %d consecutive free ports on %s' % (
            count, host))

    def add_service(self, svc):
        """Start ``svc`` as one of the run's processes."""
        svc.run_dir = self.dir
        self.services[svc.name] = svc
        svc.start()
        return svc

    def _bin(self, name):
        return os.path.join(self.bin, name)

    def path(self, *parts):
        return os.path.join(self.dir, *parts)

    # Configuration
    def _db_url(self, name):
        return 'mysql+pymysql://root@127.0.0.1/%s?charset=utf8' % (
            self.db[name])

    def _write_conf(self, name, sections):
        conf = configparser.ConfigParser(interpolation=None)
        conf.optionxform = str
        for section, options in sections.items():
            conf[section] = {k: str(v) for k, v in options.items()}
        path = self.path('etc', name)
        with open(path, 'w') as f:
            conf.write(f)
        return path

    def _nova_common(self, host):
        nova = self.keystone.auth('nova')
        service_user = dict(nova, send_service_user_token=True)
        return {
            'DEFAULT': {
                'host': host,
                'debug': self.debug,
                'transport_url': self.transport_url,
                'my_ip': '127.0.0.1',
                'state_path': self.path('state', host),
                'report_interval': 2,
                'heal_instance_info_cache_interval': -1,
                # nova's 60 s: a source that restarts while the destination
                # is dead waits that long on its shared-storage question.
                'rpc_response_timeout': 15,
                # A port neutron never reports plugged fails the spawn
                # (vif_plugging_is_fatal), in a minute rather than five.
                'vif_plugging_timeout': 60,
            },
            'oslo_concurrency': {'lock_path': self.path('state', host,
                                                        'lock')},
            'oslo_messaging_rabbit': {'heartbeat_timeout_threshold': 0},
            'keystone_authtoken': self.keystone.authtoken('nova'),
            'service_user': service_user,
            'placement': dict(nova),
            'neutron': dict(nova),
            'cinder': dict(nova, os_region_name=identity.REGION),
            'glance': {'region_name': identity.REGION},
            'vnc': {'enabled': False},
            'oslo_policy': {'enforce_scope': False,
                            'enforce_new_defaults': False},
        }

    def _write_control_confs(self):
        self._write_conf('placement.conf', {
            'DEFAULT': {'debug': self.debug},
            'api': {'auth_strategy': 'keystone'},
            'keystone_authtoken': self.keystone.authtoken('placement'),
            'placement_database': {'connection': self._db_url('placement')},
        })
        paste = self.path('etc', 'api-paste.ini')
        with open(paste, 'w') as f:
            f.write(API_PASTE)
        control = self._nova_common('control')
        control['api_database'] = {'connection': self._db_url('api')}
        control['database'] = {'connection': self._db_url('cell1')}
        control['wsgi'] = {'api_paste_config': paste}
        control['conductor'] = {'workers': 1}
        control['scheduler'] = {'workers': 1}
        control['api'] = {'max_limit': 1000, 'auth_strategy': 'keystone'}
        self._write_conf('nova.conf', control)
        self.glance.write_conf()
        self.neutron.write_conf()
        self.cinder.write_conf()

    def compute_conf(self, host, shared=False, rbd=False, serial_ports=None):
        """Write ``host``'s nova-compute configuration; return its path.

        :param shared: the instance directory is shared by every host
        :param rbd: the servers' disks are RBD images in Ceph's ``vms``
            pool (``[libvirt] images_type = rbd``)
        :param serial_ports: (first, last) port of the serial consoles,
            or None for no serial console
        """
        conf_path = self.path('etc', 'nova-compute-%s.conf' % host)
        instances = self.path('instances', 'shared' if shared else host)
        os.makedirs(instances, exist_ok=True)
        os.makedirs(self.path('state', host, 'lock'), exist_ok=True)
        conf = self._nova_common(host)
        conf['DEFAULT'].update({
            'compute_driver': 'libvirt.LibvirtDriver',
            'instances_path': instances,
            'reserved_host_memory_mb': 0,
            # A guest with no OS ignores ACPI: a stop (Masakari stops the
            # servers it recovers from ERROR) waits this long before the
            # destroy, 60 s by default.
            'shutdown_timeout': 5,
        })
        conf['libvirt'] = {
            'virt_type': 'qemu',
            'cpu_mode': 'none',
            'connection_uri': self.hosts[host].uri,
        }
        if rbd:
            conf['libvirt'].update({
                'images_type': 'rbd',
                'images_rbd_pool': 'vms',
                'images_rbd_ceph_conf': self.ceph.conf,
            })
        # privsep without sudo: nova-compute runs as root already. One
        # helper per context: nova's, os-vif's OVS plugin, os-brick's.
        conf['workarounds'] = {'disable_rootwrap': True}
        helper = {'helper_command': '%s --config-file %s' % (
            self._bin('privsep-helper'), conf_path)}
        for context in ('nova_sys_admin', 'vif_plug_ovs_privileged',
                        'vif_plug_linux_bridge_privileged',
                        'privsep_osbrick'):
            conf[context] = dict(helper)
        # os-vif plugs into this host's own OVS.
        conf['os_vif_ovs'] = {'ovsdb_connection': 'unix:%s' %
                              self.chassis[host].sock}
        if serial_ports:
            conf['serial_console'] = {
                'enabled': True,
                'port_range': '%d:%d' % serial_ports,
                'proxyclient_address': '127.0.0.1',
                'base_url': 'ws://127.0.0.1:6083/',
            }
        self.compute_opts[host] = {'shared': shared, 'rbd': rbd,
                                   'serial_ports': serial_ports,
                                   'instances_path': instances}
        self._write_conf('nova-compute-%s.conf' % host, conf)
        return conf_path

    def instances_path(self, host):
        return self.compute_opts[host]['instances_path']

    # Databases and vhost
    def _sql(self, *statements):
        conn = pymysql.connect(host='127.0.0.1', port=3306, user='root',
                               password='', autocommit=True)
        try:
            with conn.cursor() as cur:
                for statement in statements:
                    cur.execute(statement)
                return cur.fetchall()
        finally:
            conn.close()

    def _create_databases(self):
        self._sql(*['CREATE DATABASE `%s` CHARACTER SET utf8' % db
                    for db in self.db.values()])
        self.created.append('databases')

    def _drop_databases(self):
        self._sql(*['DROP DATABASE IF EXISTS `%s`' % db
                    for db in self.db.values()])

    def _create_vhost(self):
        self._run('rabbitmqctl', '-q', 'add_vhost', self.vhost)
        self.created.append('vhost')
        self._run('rabbitmqctl', '-q', 'set_permissions', '-p', self.vhost,
                  'guest', '.*', '.*', '.*')

    def _delete_vhost(self):
        self._run('rabbitmqctl', '-q', 'delete_vhost', self.vhost)

    # Start-up
    def _timed(self, phase, t0):
        self.timings['start-up: %s' % phase] = time.monotonic() - t0

    def start(self):
        """Everything, from nothing; the deployment is usable on return."""
        t0 = time.monotonic()
        for sub in ('etc', 'logs', 'state', 'instances', 'hosts'):
            os.makedirs(self.path(sub), exist_ok=True)
        # What clean_stale() needs if this process dies without stop().
        with open(self.path('run.json'), 'w') as f:
            json.dump({'owner': os.getpid(), 'run_id': self.run_id,
                       'databases': sorted(self.db.values()),
                       'vhost': self.vhost}, f)
        for host in self.hosts.values():
            host.on_start = functools.partial(record_pgid, self.dir)
        self.progress('run %s in %s', self.run_id, self.dir)
        image = self.path('state', 'evac-tiny.qcow2')
        self._run('qemu-img', 'create', '-q', '-f', 'qcow2', image, '64M')

        t1 = time.monotonic()
        self._create_databases()
        self._create_vhost()
        self.progress('databases %s and vhost %s created',
                      ', '.join(sorted(self.db.values())), self.vhost)
        self.keystone.write_conf()
        self._write_control_confs()
        nova_conf = self.path('etc', 'nova.conf')
        manage = [self._bin('nova-manage'), '--config-file', nova_conf]
        # The schemas are independent: write them side by side (the
        # cell databases with --local_cell, one configuration each),
        # while the hosts' namespaces and switches, Ceph and libvirtd
        # start.
        cell0_conf = self._write_conf('nova-cell0.conf', {
            'database': {'connection': self._db_url('cell0')}})
        self._run_parallel(
            *self.keystone.db_sync(),
            ('placement-db-sync', self._bin('placement-manage'),
             '--config-file', self.path('etc', 'placement.conf'),
             'db', 'sync'),
            ('api-db-sync',) + tuple(manage) + ('api_db', 'sync'),
            ('cell1-db-sync',) + tuple(manage) + (
                'db', 'sync', '--local_cell'),
            ('cell0-db-sync', self._bin('nova-manage'), '--config-file',
             cell0_conf, 'db', 'sync', '--local_cell'),
            self.glance.db_sync(), self.neutron.db_sync(),
            self.cinder.db_sync(),
            before=self._start_infrastructure)
        self._timed('schemas; namespaces, OVN, Ceph, libvirtd', t1)
        t1 = time.monotonic()
        self.keystone.start()
        self._timed('keystone', t1)
        t1 = time.monotonic()
        self._run(*manage, 'cell_v2', 'map_cell0', '--database_connection',
                  self._db_url('cell0'))
        self._run(*manage, 'cell_v2', 'create_cell', '--name', 'cell1',
                  '--database_connection', self._db_url('cell1'),
                  '--transport-url', self.transport_url)
        self.progress('cells mapped')
        self._timed('cells', t1)

        t1 = time.monotonic()
        self._start_control()
        self._timed('APIs and control services', t1)
        t1 = time.monotonic()
        for host in self.host_names:
            self.compute_conf(host)
            svc = self.start_compute(host, STOCK, wait=False)
            svc.config = dict(binary=STOCK, hook=False, death=False,
                              shared=False, rbd=False, serial_ports=None)
        for host in self.host_names:
            self.wait_compute(host)
        self._run(*manage, 'cell_v2', 'discover_hosts')
        self.progress('hosts discovered')
        self.wait_providers()
        hypervisor.wait_for(
            lambda: self.neutron.agents_alive(self.host_names), 120,
            'OVN Controller agents alive in neutron', interval=0.5)
        self._timed('computes', t1)
        t1 = time.monotonic()
        flavor = self.compute.create_flavor(**FLAVOR)
        self.flavor_id = flavor['id']
        self.neutron.create_network()
        self.image_id = self.glance.upload('evac-tiny', image)
        self._timed('flavor, network, image', t1)
        self.timings['start-up'] = time.monotonic() - t0
        self.rss_samples['after start-up (idle, no guest)'] = self.rss()
        self.progress('deployment ready in %.1fs', self.timings['start-up'])

    def _start_networks(self):
        """The hosts' namespaces, the forwarder into them, OVN."""
        for host in self.host_names:
            self.netns[host].create()
        ports = sorted({5672, self.ports['placement'], self.ports['api'],
                        self.keystone.port, self.glance.port,
                        self.neutron.port, self.cinder.port} |
                       set(self.ceph.ports))
        argv = [sys.executable, '-m', 'tests.deployment.tier.forward']
        for host in self.host_names:
            argv += ['--netns', self.netns[host].path]
        for port in ports:
            argv += ['--port', str(port)]
        fwd = self.add_service(Service('forwarder', argv,
                                       self.path('logs', 'forwarder.log')))
        hypervisor.wait_for(lambda: fwd.check() or b'forwarding' in open(
            fwd.log_file, 'rb').read(), 30, 'the forwarder')
        self.ovn.start()
        for host in self.host_names:
            self.chassis[host].start(first=True)
        for host in self.host_names:
            self.chassis[host].wait_registered()
        self.progress('namespaces %s, forwarder, OVN and chassis up',
                      ', '.join(self.netns[h].name for h in self.host_names))

    def _start_infrastructure(self):
        """What the APIs do not need: the hosts' networks, Ceph, libvirtd."""
        t0 = time.monotonic()
        self._start_networks()
        self.timings['start-up: namespaces, forwarder, OVN'] = (
            time.monotonic() - t0)
        self.ceph.start()
        t0 = time.monotonic()
        for host in self.hosts.values():
            host.ceph_conf = self.ceph.conf
            host.start()
        self.timings['start-up: libvirtd'] = time.monotonic() - t0
        self.progress('libvirtd running for %s', ', '.join(self.hosts))

    def _uwsgi(self, name, module, port, env, processes=1, threads=4,
               lazy=False):
        # uWSGI's HTTP socket closes each connection after its response:
        # say so, or pooling clients (keystoneauth) reuse a closed one.
        argv = [self._bin('uwsgi'), '--http-socket', '127.0.0.1:%d' % port,
                '--add-header', 'Connection: close',
                '--module', module, '--virtualenv', sys.prefix,
                '--master', '--processes', str(processes),
                '--threads', str(threads),
                '--enable-threads', '--die-on-term', '--need-app',
                '--buffer-size', '65535', '--hook-master-start',
                'unix_signal:15 gracefully_kill_them_all']
        if lazy:
            argv += ['--lazy-apps']
        for key, value in env.items():
            argv += ['--env', '%s=%s' % (key, value)]
        return Service(name, argv, self.path('logs', '%s.log' % name))

    def _start_control(self):
        placement = self._uwsgi(
            'placement', 'placement.wsgi.api:application',
            self.ports['placement'],
            {'OS_PLACEMENT_CONFIG_DIR': self.path('etc')})
        # One thread per process, as devstack runs it: nova-api runs in
        # eventlet mode here, and requests served at once by threads of one
        # process (an HA service's, side by side) can deadlock on its hub
        # ("greenlet.error: Cannot switch to a different thread").
        api = self._uwsgi(
            'nova-api', 'nova.wsgi.osapi_compute:application',
            self.ports['api'],
            {'OS_NOVA_CONFIG_DIR': self.path('etc'),
             'OS_NOVA_CONFIG_FILES': 'api-paste.ini;nova.conf'},
            processes=2, threads=1)
        nova_conf = self.path('etc', 'nova.conf')
        conductor = Service('nova-conductor', [
            self._bin('nova-conductor'), '--config-file', nova_conf],
            self.path('logs', 'nova-conductor.log'))
        scheduler = Service('nova-scheduler', [
            self._bin('nova-scheduler'), '--config-file', nova_conf],
            self.path('logs', 'nova-scheduler.log'))
        for svc in (placement, api, conductor, scheduler):
            self.add_service(svc)
        self.glance.start()
        self.neutron.start()
        self.cinder.start()
        self.keystone.register('placement', 'placement', self.placement.url)
        self.keystone.register('compute', 'nova', self.compute.url)
        self.progress('started placement, nova-api, nova-conductor, '
                      'nova-scheduler, glance, neutron, cinder')
        self._wait_http(placement, self.placement.url + '/')
        self._wait_http(api, self.compute.url + '/')
        self.glance.wait()
        self.neutron.wait()
        self.progress('placement, nova-api, glance and neutron answer')
        for svc in (conductor, scheduler):
            self._wait_service_up('control', svc.name, svc)
        self.cinder.wait()
        self.progress('nova-conductor, nova-scheduler, cinder-scheduler and '
                      'cinder-volume up')

    def _wait_http(self, svc, url, timeout=120, ok=None):
        import requests

        ok = ok or (lambda status: status < 500)

        def answers():
            svc.check()
            try:
                return ok(requests.get(url, timeout=5).status_code)
            except requests.RequestException:
                return False

        hypervisor.wait_for(answers, timeout, '%s at %s' % (svc.name, url),
                            interval=0.25)

    def _wait_service_up(self, host, binary, svc, timeout=180):
        """Up in the API, with a heartbeat since the process started.

        A heartbeat the conductor saves late, of a process killed just
        before this one started, can look newer than the start: the
        process must also have logged (at debug level) that its start-up
        (``init_host``, where nova-compute-evac-cleanup sweeps) is over.
        """
        def up():
            svc.check()
            if self.debug and not svc.logged(
                    b'Creating RPC server for service: %s' % binary.encode()):
                return False
            ref = self.compute.service(host, binary)
            # A forced-down service is down whatever its heartbeat.
            return (ref and ref['updated_at'] and
                    (ref['state'] == 'up' or ref.get('forced_down')) and
                    _parse_time(ref['updated_at']) >= svc.started_at)

        hypervisor.wait_for(up, timeout, '%s on %s up' % (binary, host),
                            interval=0.25)

    def wait_providers(self, timeout=120):
        def present():
            names = self.placement.providers()
            return all(h in names for h in self.host_names)

        hypervisor.wait_for(present, timeout, 'resource providers')
        self.progress('resource providers in placement: %s',
                      ', '.join(self.host_names))

    # Computes
    def compute_service(self, host):
        return self.services.get('nova-compute-%s' % host)

    def start_compute(self, host, binary=STOCK, wait=True, hook=False,
                      death=False):
        """Start ``host``'s nova-compute, in the host's namespace.

        :param binary: :data:`STOCK` or :data:`FIXED`
        :param hook: run it with the fault hook (:mod:`.faults`), whose
            directory is :meth:`fault_dir`
        :param death: run it with the death-point hook
            (:mod:`.deathpoint`), whose directory is :meth:`death_dir`
        """
        name = 'nova-compute-%s' % host
        conf = self.path('etc', 'nova-compute-%s.conf' % host)
        if hook:
            argv = [sys.executable, '-m',
                    'tests.deployment.tier.faults',
                    '--fault-dir', self.fault_dir(host)]
            if binary == FIXED:
                argv.append('--fixed')
        else:
            argv = [self._bin(binary)]
        env = dict(self.chassis[host].env)
        if death:
            env[deathpoint.ENV] = self.death_dir(host)
            env['PYTHONPATH'] = os.pathsep.join(
                [deathpoint.HOOK_DIR] + [
                    p for p in os.environ.get('PYTHONPATH', '').split(
                        os.pathsep) if p])
        svc = Service(name, self.netns[host].argv(
            argv + ['--config-file', conf]),
            self.path('logs', '%s.log' % name), env=env)
        svc.binary = binary
        svc.hook = hook
        self.add_service(svc)
        self.progress('%s started (%s%s%s)', name, binary,
                      ', fault hook' if hook else '',
                      ', death-point hook' if death else '')
        if wait:
            self.wait_compute(host)
        return svc

    def fault_dir(self, host):
        path = self.path('state', host, 'faults')
        os.makedirs(path, exist_ok=True)
        return path

    def death_dir(self, host):
        path = self.path('state', host, 'death')
        os.makedirs(path, exist_ok=True)
        return path

    def arm_death(self, host, root=None, name=None, n=None, key=''):
        """Have ``host``'s nova-compute die after point ``name#n``.

        In the evacuation of server ``key`` (``root`` ``evacuate``) or in
        the start-up's sweep; no arguments: disarm. What it recorded and
        fired before is cleared when armed.
        """
        arm = os.path.join(self.death_dir(host), 'arm')
        if root is None:
            if os.path.exists(arm):
                os.unlink(arm)
            return
        for stale in ('fired',):
            path = os.path.join(self.death_dir(host), stale)
            if os.path.exists(path):
                os.unlink(path)
        with open(arm + '.new', 'w') as f:
            json.dump({'root': root, 'key': key, 'name': name, 'n': n}, f)
        os.rename(arm + '.new', arm)

    def death_fired(self, host):
        """The point ``host``'s nova-compute died at, or None."""
        try:
            with open(os.path.join(self.death_dir(host), 'fired')) as f:
                return json.load(f)
        except FileNotFoundError:
            return None

    def death_points(self, host, root=None, key=None):
        """The points ``host``'s nova-compute recorded, in call order."""
        try:
            with open(os.path.join(self.death_dir(host), 'points')) as f:
                points = [json.loads(line) for line in f if line.strip()]
        except FileNotFoundError:
            return []
        return sorted((p for p in points if (
            root is None or p['root'] == root) and (
            key is None or p['key'] == key)),
            key=lambda p: (p['pid'], p['seq']))

    def set_fault(self, host, fault=None):
        """Arm (``raise``/``hang``) or disarm (None) ``host``'s hook."""
        for name in ('fault', 'fired'):
            try:
                os.unlink(os.path.join(self.fault_dir(host), name))
            except FileNotFoundError:
                pass
        if fault:
            with open(os.path.join(self.fault_dir(host), 'fault'), 'w') as f:
                f.write(fault)

    def fault_fired(self, host):
        """The UUIDs of the instances the hook fired for, in order."""
        try:
            with open(os.path.join(self.fault_dir(host), 'fired')) as f:
                return f.read().split()
        except FileNotFoundError:
            return []

    # Images
    def create_image(self):
        """A new image in glance, with the tier's image's data.

        No host has cached it: a host that boots or evacuates a server of
        it downloads it.
        """
        return self.glance.upload('evac-tiny-%s' % uuid.uuid4().hex[:6],
                                  self.path('state', 'evac-tiny.qcow2'))

    def image_size(self):
        """The size in bytes of the images' data."""
        return os.path.getsize(self.path('state', 'evac-tiny.qcow2'))

    def truncate_image(self, image_id, size=None):
        """Cut the data glance stores for ``image_id`` after ``size`` bytes.

        glance then serves the image's recorded size and checksum, and
        fewer bytes. ``size=None`` puts the whole data back.
        """
        stored = self.glance.stored_file(image_id)
        if size is None:
            shutil.copyfile(self.path('state', 'evac-tiny.qcow2'), stored)
        else:
            os.truncate(stored, size)

    def delete_image(self, image_id):
        self.glance.delete(image_id)

    def host_running(self, host):
        """libvirtd and the switch of ``host`` run (it has not crashed)."""
        return self.hosts[host].running and all(
            name in self.services and self.services[name].running
            for name in self.chassis[host].names)

    def start_host(self, host, controller=True):
        """A crashed host boots: its switch, then libvirtd.

        :param controller: ovn-controller too; else the caller starts it
            later (``self.chassis[host].start_controller()``)
        """
        self.chassis[host].start(controller=controller)
        if controller:
            self.chassis[host].wait_registered()
        self.hosts[host].start()
        self.progress('host %s booted (OVS, %slibvirtd)', host,
                      'ovn-controller, ' if controller else '')

    def ensure_compute(self, host, binary=STOCK, hook=False, wait=True,
                       late_controller=False, death=False, **conf):
        """Run ``host``'s libvirtd and nova-compute as asked.

        nova-compute is restarted only if its binary or configuration
        differ from those asked for. With ``wait=False`` the caller calls
        :meth:`wait_compute` if the returned service has ``restarted``.
        With ``late_controller`` a host that boots starts its
        ovn-controller only when the caller does.
        """
        want = dict(binary=binary, hook=hook, death=death, shared=False,
                    rbd=False, serial_ports=None)
        want.update(conf)
        svc = self.compute_service(host)
        have = getattr(svc, 'config', None)
        if not self.host_running(host):
            self.start_host(host, controller=not late_controller)
        if svc and svc.running and have == want:
            svc.restarted = False
            return svc
        # How it stops does not matter here; nova-compute's graceful
        # shutdown takes 30 s or more on this stack.
        self.stop_compute(host, signal.SIGKILL)
        self.compute_conf(host, **conf)
        svc = self.start_compute(host, binary, hook=hook, wait=wait,
                                 death=death)
        svc.config = want
        svc.restarted = True
        return svc

    def wait_compute(self, host, timeout=180):
        t0 = time.monotonic()
        svc = self.compute_service(host)
        self._wait_service_up(host, 'nova-compute', svc, timeout)
        # Restarted by the operator: no longer forced down. nova refuses
        # that until the service has started (and completed the host's
        # evacuations), which a heartbeat since its start proves.
        if self.compute.service(host)['forced_down']:
            self.compute.force_down(host, False)
        self.progress('nova-compute on %s up (%.1fs)', host,
                      time.monotonic() - t0)

    def stop_compute(self, host, sig=signal.SIGTERM):
        svc = self.services.pop('nova-compute-%s' % host, None)
        if svc:
            if sig == signal.SIGKILL:
                svc.kill()
            else:
                svc.stop(sig)
            self.progress('nova-compute on %s stopped (%s)', host,
                          signal.Signals(sig).name)

    def crash_host(self, host):
        """The host dies: nova-compute, libvirtd and every QEMU, its switch.

        Its tap devices go too, as a reboot loses them.
        """
        self.stop_compute(host, signal.SIGKILL)
        self.hosts[host].stop()
        self.chassis[host].stop()
        self.netns[host].remove_taps()
        self.progress('host %s crashed (nova-compute, libvirtd, QEMU, '
                      'ovs-vswitchd, ovn-controller killed)', host)

    def nova_manage(self, *args, conf=None):
        return subprocess.run(
            [self._bin('nova-manage'), '--config-file',
             conf or self.path('etc', 'nova.conf')] + list(args),
            capture_output=True, text=True, timeout=300)

    def rss(self):
        """{service: RSS in KiB}, libvirtd and QEMU of each host included."""
        result = {name: svc.rss_kb() for name, svc in self.services.items()}
        for name, host in self.hosts.items():
            if host.running:
                result['libvirtd+qemu-%s' % name] = rss_kb(host.proc.pid)
        return result

    # Tear-down
    def stop(self, keep_logs=False):
        """Stop everything, drop the databases and the vhost.

        :param keep_logs: keep the run's directory (logs, configuration)
        """
        t0 = time.monotonic()
        # Nothing is kept: no need for graceful shutdowns.
        for name in list(self.services):
            self.services.pop(name).stop(signal.SIGKILL)
        for host in self.hosts.values():
            host.stop()
        errors = []
        netns.remove(self.run_id)
        if 'databases' in self.created:
            try:
                self._drop_databases()
            except Exception as e:
                errors.append('dropping databases: %s' % e)
        if 'vhost' in self.created:
            try:
                self._delete_vhost()
            except Exception as e:
                errors.append('deleting vhost: %s' % e)
        self.created = []
        # Torn down: nothing left for clean_stale().
        if os.path.exists(self.path('run.json')):
            os.rename(self.path('run.json'), self.path('run.json.stopped'))
        self.timings['tear-down'] = time.monotonic() - t0
        if keep_logs:
            self.progress('torn down in %.1fs; logs kept in %s',
                          self.timings['tear-down'], self.logs_dir)
        else:
            self.progress('torn down in %.1fs', self.timings['tear-down'])
            shutil.rmtree(self.dir, ignore_errors=True)
        if errors:
            raise RuntimeError('; '.join(errors))


def main(argv=None):
    """``python -m tests.deployment.tier.services --clean-stale``."""
    argv = sys.argv[1:] if argv is None else argv
    if argv != ['--clean-stale']:
        sys.exit('usage: python -m tests.deployment.tier.services '
                 '--clean-stale')
    clean_stale(out=sys.stdout)


if __name__ == '__main__':
    main()
