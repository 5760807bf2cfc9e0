# SPDX-License-Identifier: Apache-2.0

"""PID 1 of a simulated host's namespace: mounts, hostname, then libvirtd.

Run by ``unshare --mount --uts --pid --mount-proc --fork``::

    python -m tests.deployment.tier.nsinit ROOT HOSTNAME -- CMD...

It bind-mounts ``ROOT/{etc,run,lib,log,cache}`` over libvirt's directories
and ``ROOT/ceph`` over ``/etc/ceph``,
sets the hostname (libvirt's hostname is nova's node name), runs ``CMD``
and reaps every process orphaned in the namespace. libvirtd itself cannot
be PID 1: it does not reap the QEMU capability probes it orphans, and then
waits 40 s for each of them to die. When ``CMD`` exits this process exits,
and the kernel kills whatever is left in the namespace (QEMU included).
"""

import os
import signal
import socket
import subprocess
import sys

MOUNTS = (
    ('etc', '/etc/libvirt'),
    ('run', '/run/libvirt'),
    ('lib', '/var/lib/libvirt'),
    ('log', '/var/log/libvirt'),
    ('cache', '/var/cache/libvirt'),
    ('ceph', '/etc/ceph'),
)


def main(argv=None):
    argv = sys.argv[1:] if argv is None else argv
    root, hostname, sep = argv[:3]
    command = argv[3:]
    if sep != '--' or not command:
        sys.exit('usage: nsinit ROOT HOSTNAME -- CMD...')
    for name, target in MOUNTS:
        os.makedirs(target, exist_ok=True)
        subprocess.check_call(
            ['mount', '--bind', os.path.join(root, name), target])
    socket.sethostname(hostname)

    child = os.fork()
    if child == 0:
        os.execvp(command[0], command)

    def forward(signum, frame):
        os.kill(child, signum)

    for signum in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(signum, forward)
    while True:
        try:
            pid, status = os.wait()
        except InterruptedError:
            continue
        except ChildProcessError:
            return 0
        if pid == child:
            return os.waitstatus_to_exitcode(status)


if __name__ == '__main__':
    sys.exit(main())
