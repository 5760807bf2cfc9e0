# SPDX-License-Identifier: Apache-2.0

"""A one-node Ceph cluster: one mon, one OSD on memstore, one mgr.

Debian's Ceph daemons, started in the foreground by the tier, with the
run's own configuration file, data directories and ports: nothing of the
machine's ``/etc/ceph`` is read or written. The OSD keeps its objects in
memory (``memstore``): no disk, no kernel support. Every daemon binds on
127.0.0.1; the compute hosts' network namespaces reach them through the
tier's forwarder (:mod:`.forward`), which is why the messenger's ports are
a small fixed range (:attr:`Ceph.ports`).

``auth none``: cephx would only add a keyring per client and a libvirt
secret per host (and nova's and cinder's ``rbd_secret_uuid``), none of
which a failed evacuation touches; with ``rbd_user`` unset, cinder's
connection info says ``auth_enabled: False`` and nova's disks carry no
secret.

Pools: ``volumes`` (cinder) and ``vms`` (nova's ``images_type = rbd``),
one replica each.
"""

import json
import os
import subprocess
import time
import uuid

from tests.deployment.tier import hypervisor

POOLS = ('volumes', 'vms')


class Ceph(object):
    """The cluster of one deployment.

    :param d: the :class:`~.services.Deployment` it belongs to
    """

    def __init__(self, d):
        from tests.deployment.tier import services

        self.d = d
        self.fsid = str(uuid.uuid4())
        self.root = d.path('ceph')
        self.conf = os.path.join(self.root, 'ceph.conf')
        # v2 and v1 for the mon: nova and cinder hand QEMU the mon's
        # address as host and port only, which librados takes for v1.
        self.mon_v2 = services.free_port()
        self.mon_v1 = services.free_port()
        # The OSD's and mgr's messenger ports: public and cluster,
        # heartbeats, v1 and v2 each.
        self.port_range = services.free_port_range(20)
        self.services = []

    @property
    def ports(self):
        """Every port a client may connect to (for the forwarder)."""
        return [self.mon_v2, self.mon_v1] + list(
            range(self.port_range[0], self.port_range[1] + 1))

    def _write_conf(self):
        options = {
            'fsid': self.fsid,
            'mon_host': '[v2:127.0.0.1:%d,v1:127.0.0.1:%d]' % (
                self.mon_v2, self.mon_v1),
            'public_addr': '127.0.0.1',
            'cluster_addr': '127.0.0.1',
            'ms_bind_port_min': self.port_range[0],
            'ms_bind_port_max': self.port_range[1],
            'auth_cluster_required': 'none',
            'auth_service_required': 'none',
            'auth_client_required': 'none',
            'osd_objectstore': 'memstore',
            'memstore_device_bytes': 4 << 30,
            'osd_pool_default_size': 1,
            'osd_pool_default_min_size': 1,
            'osd_pool_default_pg_num': 8,
            'osd_pool_default_pgp_num': 8,
            'osd_pool_default_pg_autoscale_mode': 'off',
            'osd_crush_chooseleaf_type': 0,
            'mon_allow_pool_size_one': 'true',
            'mon_allow_pool_delete': 'true',
            'mon_warn_on_pool_no_redundancy': 'false',
            'mon_data': os.path.join(self.root, 'mon', '$cluster-$id'),
            'osd_data': os.path.join(self.root, 'osd', '$cluster-$id'),
            'mgr_data': os.path.join(self.root, 'mgr', '$cluster-$id'),
            'run_dir': os.path.join(self.root, 'run'),
            'admin_socket': os.path.join(self.root, 'run',
                                         '$cluster-$name.$pid.asok'),
            'crash_dir': os.path.join(self.root, 'crash'),
            'exporter_sock_dir': os.path.join(self.root, 'run'),
            # Daemons log to stderr, into the tier's log of each; clients
            # (QEMU, nova, cinder) do not log.
            'log_file': '',
            'log_to_file': 'false',
            'mon_cluster_log_to_file': 'false',
            # A small memory footprint: this is a test cluster.
            'osd_memory_target': 512 << 20,
            'osd_op_num_shards': 1,
            'osd_op_num_threads_per_shard': 1,
        }
        for sub in ('mon', 'osd', 'mgr', 'run', 'crash'):
            os.makedirs(os.path.join(self.root, sub), exist_ok=True)
        with open(self.conf, 'w') as f:
            f.write('[global]\n')
            for key, value in options.items():
                f.write('%s = %s\n' % (key, value))

    def ceph(self, *args, timeout=60):
        """``ceph ARGS --format json``, parsed."""
        out = subprocess.run(
            ['ceph', '-c', self.conf, '--connect-timeout', '30'] +
            list(args) + ['--format', 'json'],
            capture_output=True, text=True, timeout=timeout)
        if out.returncode:
            raise RuntimeError('ceph %s: %s' % (' '.join(args),
                                                out.stderr.strip()[-500:]))
        return json.loads(out.stdout) if out.stdout.strip() else None

    def rbd(self, *args, timeout=60):
        out = subprocess.run(['rbd', '-c', self.conf] + list(args),
                             capture_output=True, text=True,
                             timeout=timeout)
        if out.returncode:
            raise RuntimeError('rbd %s: %s' % (' '.join(args),
                                               out.stderr.strip()[-500:]))
        return out.stdout

    def _daemon(self, name, *argv):
        from tests.deployment.tier import services

        svc = services.Service(
            'ceph-%s' % name, list(argv) + ['-d', '-c', self.conf],
            self.d.path('logs', 'ceph-%s.log' % name))
        self.d.add_service(svc)
        self.services.append(svc)
        return svc

    def start(self):
        """mkfs, then mon, OSD and mgr; return once the pools are usable."""
        d = self.d
        t0 = time.monotonic()
        self._write_conf()
        monmap = os.path.join(self.root, 'monmap')
        d._run('monmaptool', '--create', '--fsid', self.fsid, '--addv',
               'a', '[v2:127.0.0.1:%d,v1:127.0.0.1:%d]' % (
                   self.mon_v2, self.mon_v1), monmap)
        d._run('ceph-mon', '-c', self.conf, '--mkfs', '-i', 'a',
               '--monmap', monmap)
        mon = self._daemon('mon', 'ceph-mon', '-i', 'a')
        hypervisor.wait_for(lambda: self._answers(mon), 60, 'ceph-mon',
                            interval=0.5)
        osd_uuid = str(uuid.uuid4())
        osd_id = self.ceph('osd', 'new', osd_uuid)['osdid']
        os.makedirs(os.path.join(self.root, 'osd', 'ceph-%d' % osd_id))
        d._run('ceph-osd', '-c', self.conf, '-i', str(osd_id), '--mkfs',
               '--osd-uuid', osd_uuid)
        osd = self._daemon('osd', 'ceph-osd', '-i', str(osd_id))
        self._daemon('mgr', 'ceph-mgr', '-i', 'x')
        for pool in POOLS:
            self.ceph('osd', 'pool', 'create', pool, '8')
            self.ceph('osd', 'pool', 'application', 'enable', pool, 'rbd')
        hypervisor.wait_for(lambda: self._osd_up(osd), 120, 'ceph-osd up',
                            interval=0.5)
        hypervisor.wait_for(self._pgs_active, 120,
                            'ceph placement groups active', interval=0.5)
        d.timings['start-up: Ceph (mon, OSD, mgr, pools)'] = (
            time.monotonic() - t0)
        d.progress('Ceph up: mon at 127.0.0.1:%d (v2) and :%d (v1), pools '
                   '%s (%.1fs)', self.mon_v2, self.mon_v1,
                   ', '.join(POOLS), time.monotonic() - t0)

    def _answers(self, mon):
        mon.check()
        try:
            self.ceph('mon', 'stat', timeout=20)
        except (RuntimeError, subprocess.TimeoutExpired):
            return False
        return True

    def _osd_up(self, osd):
        osd.check()
        return self.ceph('osd', 'stat')['num_up_osds'] >= 1

    def _pgs_active(self):
        for svc in self.services:
            svc.check()
        states = self.ceph('pg', 'stat')
        summary = states.get('pg_summary', states)
        total = summary.get('num_pgs', 0)
        active = sum(s['num'] for s in summary.get('num_pg_by_state', [])
                     if s['name'].startswith('active'))
        return total and active == total

    # What the tests look at
    def images(self, pool):
        """The RBD images of ``pool``."""
        return json.loads(self.rbd('ls', '-l', '--format', 'json', pool)
                          or '[]')

    def watchers(self, pool, image):
        """The clients that have ``pool/image`` open: [address, ...]."""
        status = json.loads(self.rbd('status', '--format', 'json',
                                     '%s/%s' % (pool, image)))
        return [w['address'] for w in status.get('watchers', [])]
