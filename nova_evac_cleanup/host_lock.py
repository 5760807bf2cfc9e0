# Copyright 2026 nova-evac-cleanup developers
#
#    Licensed under the Apache License, Version 2.0 (the "License"); you may
#    not use this file except in compliance with the License. You may obtain
#    a copy of the License at
#
#         http://www.apache.org/licenses/LICENSE-2.0
#
#    Unless required by applicable law or agreed to in writing, software
#    distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
#    WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
#    License for the specific language governing permissions and limitations
#    under the License.

"""One actor per host: nova-compute or ``audit --delete``, never both.

Whether nova-compute *looks* up in the database says nothing about whether
it runs: a forced-down service, or one that died a second ago and whose
heartbeat has not expired, may be in the middle of the very evacuation the
audit would end. So nova-compute with this project's manager holds an
external lock, oslo.concurrency's file lock in ``[oslo_concurrency]
lock_path``, for as long as it lives, and ``audit --delete`` takes the same
lock without waiting and refuses to act while it is held. The kernel drops
the lock with the process that held it, however it died.

POSIX file locks do not exclude two holders in one process; nova's
functional tests run every compute in one, so the locks this process holds
are also kept in a table and a second holder is refused here too.
"""

import threading

from oslo_concurrency import lockutils
from oslo_config import cfg
from oslo_log import log as logging

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

_PREFIX = 'nova-evac-cleanup-'
_HELD = {}
_HELD_LOCK = threading.Lock()


class HostLockHeld(Exception):
    """Another actor holds this host's lock."""


def _lock_path():
    path = CONF.oslo_concurrency.lock_path
    if not path:
        raise HostLockHeld(
            '[oslo_concurrency] lock_path is not set: it is needed to know '
            'whether nova-compute runs on this host')
    return path


def acquire(host, blocking=False):
    """Take the lock of ``host``.

    :param blocking: wait for another process to release it (nova-compute
        at start-up); otherwise raise at once (the audit)
    :returns: a handle for :func:`release`
    :raises HostLockHeld: when it is held and not ``blocking``, or held in
        this very process
    """
    with _HELD_LOCK:
        if host in _HELD:
            raise HostLockHeld('the evacuation-cleanup lock of %s is held '
                               'in this process' % host)
        lock = lockutils.external_lock(host, lock_file_prefix=_PREFIX,
                                       lock_path=_lock_path())
        if not lock.acquire(blocking=False):
            if not blocking:
                raise HostLockHeld(
                    'another process holds the evacuation-cleanup lock of '
                    '%s (%s): nova-compute is running there' % (
                        host, lock.path))
            LOG.warning('Waiting for the evacuation-cleanup lock of %s (%s), '
                        'held by another process (nova-evac-cleanup audit '
                        '--delete?)', host, lock.path)
            lock.acquire()
        _HELD[host] = lock
        return lock


def release(host):
    """Release the lock of ``host`` if this process holds it."""
    with _HELD_LOCK:
        lock = _HELD.pop(host, None)
    if lock is not None:
        lock.release()


def held(host):
    """Whether this process holds the lock of ``host``."""
    return host in _HELD


def release_all():
    """Release every lock this process holds, as its death would."""
    for host in list(_HELD):
        release(host)
