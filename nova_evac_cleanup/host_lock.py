# SPDX-License-Identifier: Apache-2.0

"""One actor per host: nova-compute or ``audit --delete``, never both.

A service the database shows down may still run the evacuation the audit
would end. ``flock(2)`` in nova's ``lock_path``, not oslo.concurrency's
external lock (``lockf``, which a process shares with itself): the kernel
drops it with its process however it died, and two holders in one process
(nova's functional tests) exclude each other."""

import fcntl
import os
import time

from oslo_concurrency import lockutils
from oslo_config import cfg

#: Seconds nova-compute waits at start-up for an audit to release the lock.
START_TIMEOUT = 60


class HostLockHeld(Exception):
    """Held by another actor (``busy``), or not to be had at all."""

    def __init__(self, message, busy=False):
        super().__init__(message)
        self.busy = busy


def acquire(host, timeout=0):
    """Take ``host``'s lock (an open file), waiting ``timeout`` s at most."""
    directory = lockutils.get_lock_path(cfg.CONF)
    if not directory:
        raise HostLockHeld('[oslo_concurrency] lock_path is not set: it is '
                           'needed to know whether nova-compute runs here')
    path = os.path.join(directory, 'nova-evac-cleanup-' + host)
    deadline, lock = time.monotonic() + timeout, None
    while True:
        try:
            lock = lock or open(path, 'a')
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return lock
        except BlockingIOError:
            if time.monotonic() < deadline:
                time.sleep(0.5)
                continue
            failure = HostLockHeld(
                'another process holds the evacuation-cleanup lock of %s '
                '(%s): nova-compute or nova-evac-cleanup audit --delete is '
                'running there' % (host, path), busy=True)
        except OSError as error:  # ENOLCK on NFS...: refused, never raised
            failure = HostLockHeld('cannot take the evacuation-cleanup lock '
                                   'of %s (%s): %s' % (host, path, error))
        release(lock)
        raise failure


def release(lock):
    """Release what :func:`acquire` returned (or None), once or more."""
    if lock is not None:
        lock.close()
