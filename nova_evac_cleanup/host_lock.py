# SPDX-License-Identifier: Apache-2.0

"""One actor per host: nova-compute or ``audit --delete``, never both.

A service the database shows down may still run the evacuation the audit
would end. ``flock(2)`` on ``[oslo_concurrency] lock_path``: the kernel
drops it with its process, however it died, and two holders in one process
exclude each other too (a lock of an open file description).
"""

import fcntl
import os
import time

from oslo_concurrency import lockutils
from oslo_config import cfg

CONF = cfg.CONF

#: Seconds nova-compute waits at start-up for an audit to release the lock.
START_TIMEOUT = 60


class HostLockHeld(Exception):
    """Held by another actor (``busy``), or not to be had at all."""

    def __init__(self, message, busy=False):
        super().__init__(message)
        self.busy = busy


_UNAVAILABLE = 'cannot take the evacuation-cleanup lock of %s (%s): %s'


def acquire(host, timeout=0):
    """Take the lock of ``host``, waiting ``timeout`` seconds at most.

    :returns: the lock (its open file), for :func:`release`
    :raises HostLockHeld: held, or not to be had (no ``lock_path``...)
    """
    directory = lockutils.get_lock_path(CONF)
    if not directory:
        raise HostLockHeld(
            '[oslo_concurrency] lock_path is not set: it is needed to know '
            'whether nova-compute runs on this host')
    path = os.path.join(directory, 'nova-evac-cleanup-' + host)
    try:
        lock = open(path, 'a')
    except OSError as error:
        raise HostLockHeld(_UNAVAILABLE % (host, path, error))
    deadline = time.monotonic() + timeout
    while True:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return lock
        except BlockingIOError:
            if time.monotonic() >= deadline:
                lock.close()
                raise HostLockHeld(
                    'another process holds the evacuation-cleanup lock of '
                    '%s (%s): nova-compute or nova-evac-cleanup audit '
                    '--delete is running there' % (host, path), busy=True)
            time.sleep(0.5)
        except OSError as error:
            # Not held but not to be had (ENOLCK on an NFS lock_path):
            # never raised out of nova-compute's start.
            lock.close()
            raise HostLockHeld(_UNAVAILABLE % (host, path, error))


def release(lock):
    """Release a lock :func:`acquire` returned, once or more; or None."""
    if lock is not None:
        lock.close()
