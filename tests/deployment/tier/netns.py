# SPDX-License-Identifier: Apache-2.0

"""The compute hosts' network namespaces and their underlay.

Each simulated host gets a network namespace, ``evac<run>-<host>``, in
which its nova-compute (and privsep daemons), libvirtd and QEMU,
ovs-vswitchd and ovn-controller run. A veth pair joins it to the run's
Linux bridge in the root namespace, ``evbr<run>``: the underlay that
carries the hosts' geneve tunnels, with one address per host
(:data:`UNDERLAY`, a documentation range no machine routes). Every name
carries the run's id, so that a run never touches another's, and
:func:`remove` ends what a killed run left.
"""

import contextlib
import ctypes
import os
import socket
import subprocess

CLONE_NEWNET = 0x40000000

# TEST-NET-1 (RFC 5737): never routed; only on the run's own bridge.
UNDERLAY = '192.0.2.%d/24'


def _ip(*args, check=True):
    return subprocess.run(('ip',) + args, capture_output=True, text=True,
                          check=check)


def bridge_name(run_id):
    return 'evbr%s' % run_id


def netns_name(run_id, host):
    return 'evac%s-%s' % (run_id, host)


def netns_path(run_id, host):
    return '/run/netns/%s' % netns_name(run_id, host)


class HostNetns(object):
    """One host's namespace and its veth to the underlay bridge."""

    def __init__(self, run_id, host, index):
        self.run_id = run_id
        self.host = host
        self.name = netns_name(run_id, host)
        self.path = netns_path(run_id, host)
        # The root end on the bridge; the namespace's end is "underlay".
        self.veth = 'ev%sh%d' % (run_id, index)
        self.address = UNDERLAY % (10 + index)

    def create(self):
        bridge = bridge_name(self.run_id)
        if not os.path.exists('/sys/class/net/%s' % bridge):
            _ip('link', 'add', bridge, 'type', 'bridge')
            _ip('link', 'set', bridge, 'up')
        _ip('netns', 'add', self.name)
        _ip('-n', self.name, 'link', 'set', 'lo', 'up')
        _ip('link', 'add', self.veth, 'type', 'veth', 'peer', 'name',
            'underlay', 'netns', self.name)
        _ip('link', 'set', self.veth, 'master', bridge, 'up')
        _ip('-n', self.name, 'link', 'set', 'underlay', 'up')

    def run(self, *argv, check=True):
        """Run a command in the namespace."""
        return subprocess.run(('nsenter', '--net=%s' % self.path) + argv,
                              capture_output=True, text=True, check=check)

    def argv(self, argv):
        """``argv`` wrapped to run in the namespace."""
        return ['nsenter', '--net=%s' % self.path] + list(argv)

    def links(self):
        out = _ip('-n', self.name, '-o', 'link', 'show', check=False).stdout
        return [line.split(':')[1].strip().split('@')[0]
                for line in out.splitlines() if ':' in line]

    def remove_taps(self):
        """What a reboot does to the guests' tap devices: they are gone."""
        for link in self.links():
            if link.startswith('tap'):
                _ip('-n', self.name, 'link', 'del', link, check=False)


def setns(fd):
    """Move the calling thread into the network namespace ``fd`` names."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.setns(fd, CLONE_NEWNET) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, os.strerror(errno))


@contextlib.contextmanager
def entered(path):
    """In the network namespace at ``path``; back to this one after.

    A socket made meanwhile stays in that namespace.
    """
    own = os.open('/proc/thread-self/ns/net', os.O_RDONLY)
    try:
        fd = os.open(path, os.O_RDONLY)
        try:
            setns(fd)
        finally:
            os.close(fd)
        yield
    finally:
        setns(own)
        os.close(own)


def listening_socket(port, path=None):
    """A socket listening on 127.0.0.1:``port``, in namespace ``path``."""
    with entered(path) if path else contextlib.nullcontext():
        s = socket.socket()
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind(('127.0.0.1', port))
        s.listen(128)
    return s


def remove(run_id):
    """Delete the run's namespaces, veths and bridge (idempotent)."""
    prefix = 'evac%s-' % run_id
    if os.path.isdir('/run/netns'):
        for name in os.listdir('/run/netns'):
            if name.startswith(prefix):
                _ip('netns', 'del', name, check=False)
    for link in os.listdir('/sys/class/net'):
        if link.startswith('ev%sh' % run_id) or link == bridge_name(run_id):
            _ip('link', 'del', link, check=False)
