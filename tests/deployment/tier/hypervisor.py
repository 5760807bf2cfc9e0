# SPDX-License-Identifier: Apache-2.0

"""A simulated hypervisor host: libvirtd and QEMU in their own namespaces.

Each host has a directory holding what libvirtd sees as ``/etc/libvirt``,
``/run/libvirt``, ``/var/lib/libvirt``, ``/var/log/libvirt``,
``/var/cache/libvirt`` and ``/etc/ceph``; :mod:`.nsinit` mounts them in a
new mount, UTS and PID namespace, so that several libvirtd run side by
side, each with its own hostname and domains, and a QEMU that stops is
reaped at once. libvirtd runs in the host's network namespace
(:mod:`.netns`), where nova-compute and the host's OVS run too: QEMU opens
the tap devices os-vif creates there. nova-compute reaches its libvirtd
through that host's socket.
"""

import os
import shutil
import subprocess
import sys
import time

LIBVIRTD_CONF = '''\
auth_unix_ro = "none"
auth_unix_rw = "none"
unix_sock_group = "root"
'''

# No systemd, no cgroups to delegate, no KVM: root QEMU without confinement.
QEMU_CONF = '''\
user = "root"
group = "root"
security_driver = "none"
cgroup_controllers = [ ]
namespaces = [ ]
stdio_handler = "file"
dynamic_ownership = 0
'''


class Timeout(Exception):
    pass


def wait_for(predicate, timeout, what, interval=0.2):
    """Poll ``predicate`` until it returns something true; return that."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise Timeout('timed out after %ss waiting for %s' %
                          (timeout, what))
        time.sleep(interval)


class LibvirtdExited(RuntimeError):
    """libvirtd exited before it answered."""


class LibvirtHost(object):
    """One simulated host's libvirtd, started in its own namespaces."""

    def __init__(self, name, root, wrap=None):
        self.name = name
        self.root = root
        # Wraps libvirtd's command line: the host's network namespace.
        self.wrap = wrap or (lambda argv: argv)
        # Mounted on /etc/ceph in the host's mount namespace: QEMU's
        # librbd reads the cluster's client options there.
        self.ceph_conf = None
        self.socket = os.path.join(root, 'run', 'libvirt-sock')
        self.uri = 'qemu+unix:///system?socket=%s' % self.socket
        self.log_file = os.path.join(root, 'libvirtd.log')
        self.proc = None
        # Called with the process group of each start.
        self.on_start = None

    def prepare(self):
        """Lay out the host's libvirt directories and configuration."""
        etc = os.path.join(self.root, 'etc')
        if not os.path.isdir(etc):
            shutil.copytree('/etc/libvirt', etc, symlinks=True)
            # No default network to start: neutron's ports are OVS's.
            autostart = os.path.join(etc, 'qemu', 'networks', 'autostart')
            shutil.rmtree(autostart, ignore_errors=True)
        for name in ('run', 'lib', 'log', 'cache', 'ceph'):
            os.makedirs(os.path.join(self.root, name), exist_ok=True)
        if self.ceph_conf:
            shutil.copy(self.ceph_conf,
                        os.path.join(self.root, 'ceph', 'ceph.conf'))
        with open(os.path.join(etc, 'libvirtd.conf'), 'w') as f:
            f.write(LIBVIRTD_CONF)
        with open(os.path.join(etc, 'qemu.conf'), 'w') as f:
            f.write(QEMU_CONF)

    def start(self, timeout=60):
        """Start libvirtd in new namespaces; return when it answers.

        Started again once if it exits while starting: seen once after a
        crash, libvirtd reconnecting to the domains of the killed QEMUs
        exited with 0 before it answered, and the next start worked.
        """
        try:
            self._start(timeout)
        except LibvirtdExited:
            self.proc = None
            self._start(timeout)

    def _start(self, timeout):
        self.prepare()
        if os.path.exists(self.socket):
            os.unlink(self.socket)
        log = open(self.log_file, 'ab')
        # --kill-child: when unshare dies, its child (PID 1 of the
        # namespace) is killed, and with it every process in there.
        self.proc = subprocess.Popen(self.wrap(
            ['unshare', '--mount', '--uts', '--pid', '--mount-proc',
             '--fork', '--kill-child', '--propagation', 'private',
             sys.executable, '-m', 'tests.deployment.tier.nsinit',
             self.root, self.name, '--',
             'libvirtd', '-f', '/etc/libvirt/libvirtd.conf',
             '--pid-file', '/run/libvirt/libvirtd.pid']),
            stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True)
        log.close()
        if self.on_start:
            self.on_start(self.proc.pid)

        def answers():
            if self.proc.poll() is not None:
                raise LibvirtdExited('libvirtd of %s exited (%s), see %s' % (
                    self.name, self.proc.returncode, self.log_file))
            if not os.path.exists(self.socket):
                return False
            out = self.virsh('hostname', check=False)
            return out.returncode == 0 and out.stdout.strip() == self.name

        wait_for(answers, timeout, 'libvirtd of %s' % self.name)

    def stop(self):
        """Kill libvirtd and every QEMU of this host at once (a crash)."""
        if self.proc is None:
            return
        # unshare ignores SIGTERM while it waits; its death signals its
        # child (--kill-child), PID 1 of the namespace.
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc = None

    @property
    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def virsh(self, *args, check=True):
        return subprocess.run(
            ['virsh', '-c', self.uri] + list(args), check=check,
            capture_output=True, text=True, timeout=120)

    def list_all(self):
        """``virsh list --all``: (its text, {domain name: state})."""
        text = self.virsh('list', '--all').stdout
        domains = {}
        for line in text.splitlines()[2:]:
            fields = line.split(None, 2)
            if len(fields) == 3:
                domains[fields[1]] = fields[2].strip()
        return text.rstrip('\n'), domains

    def domain_uuids(self):
        """{instance uuid: (domain name, state)} of the host's domains."""
        result = {}
        for name, state in self.list_all()[1].items():
            uuid = self.virsh('domuuid', name, check=False).stdout.strip()
            result[uuid] = (name, state)
        return result

    def qemu_pids(self):
        """The QEMU processes running in this host's PID namespace."""
        if not self.running:
            return []
        try:
            with open('/proc/%d/task/%d/children' % (
                    self.proc.pid, self.proc.pid)) as f:
                init = int(f.read().split()[0])
            pidns = os.readlink('/proc/%d/ns/pid' % init)
        except (OSError, IndexError, ValueError):
            return []
        pids = []
        for entry in os.listdir('/proc'):
            if not entry.isdigit():
                continue
            try:
                if os.readlink('/proc/%s/ns/pid' % entry) != pidns:
                    continue
                with open('/proc/%s/comm' % entry) as f:
                    if f.read().startswith('qemu-system'):
                        pids.append(int(entry))
            except OSError:
                continue
        return pids

    def wipe(self):
        """Destroy and undefine every domain (between scenarios)."""
        for name, state in self.list_all()[1].items():
            if state != 'shut off':
                self.virsh('destroy', name, check=False)
            self.virsh('undefine', name, '--nvram', check=False)
            self.virsh('undefine', name, check=False)
