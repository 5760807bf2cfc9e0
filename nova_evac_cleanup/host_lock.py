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

nova-compute waits for the lock at start-up only for a while
(:data:`START_TIMEOUT`): an audit that hangs must not keep the compute
service down. Without the lock, nova-compute starts all the same, its
start-up sweep only reports, and it takes the lock in the background as
soon as it is free (:func:`acquire_when_free`); a lock that cannot be
taken at all (``lock_path`` not writable) is logged and treated the same.

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

#: Seconds nova-compute waits at start-up for an audit to release the lock.
START_TIMEOUT = 60

_PREFIX = 'nova-evac-cleanup-'
_HELD = {}
_HELD_LOCK = threading.Lock()


class HostLockHeld(Exception):
    """The lock cannot be taken: held by another actor, or not to be had."""


def _lock(host):
    path = CONF.oslo_concurrency.lock_path
    if not path:
        raise HostLockHeld(
            '[oslo_concurrency] lock_path is not set: it is needed to know '
            'whether nova-compute runs on this host')
    return lockutils.external_lock(host, lock_file_prefix=_PREFIX,
                                   lock_path=path)


def acquire(host, timeout=0):
    """Take the lock of ``host``.

    :param timeout: seconds to wait for another process to release it;
        0 does not wait (the audit), None waits as long as it takes
    :returns: a handle for :func:`release`
    :raises HostLockHeld: when it is held by another process after
        ``timeout``, held in this very process, or cannot be taken
    """
    with _HELD_LOCK:
        if host in _HELD:
            raise HostLockHeld('the evacuation-cleanup lock of %s is held '
                               'in this process' % host)
        # Reserved while this thread waits for the file lock.
        _HELD[host] = None
    try:
        lock = _lock(host)
        try:
            acquired = lock.acquire(blocking=timeout != 0, timeout=timeout)
        except Exception as error:
            raise HostLockHeld('cannot take the evacuation-cleanup lock of '
                               '%s (%s): %s' % (host, lock.path, error))
        if not acquired:
            raise HostLockHeld(
                'another process holds the evacuation-cleanup lock of %s '
                '(%s): nova-compute or nova-evac-cleanup audit --delete is '
                'running there' % (host, lock.path))
    except BaseException:
        with _HELD_LOCK:
            _HELD.pop(host, None)
        raise
    with _HELD_LOCK:
        _HELD[host] = lock
    return lock


def acquire_when_free(host):
    """Take the lock of ``host`` once it is free; never raises.

    For nova-compute started without it: an audit that held it may still
    be running, and must not be followed by another while nova-compute
    runs.
    """
    try:
        acquire(host, timeout=None)
    except Exception:
        LOG.exception('Could not take the evacuation-cleanup lock of %s: '
                      'nova-evac-cleanup audit --delete may run beside '
                      'nova-compute', host)
        return
    LOG.info('Took the evacuation-cleanup lock of %s', host)


def release(host):
    """Release the lock of ``host`` if this process holds it."""
    with _HELD_LOCK:
        lock = _HELD.pop(host, None)
    if lock is not None:
        lock.release()


def held(host):
    """Whether this process holds the lock of ``host``."""
    with _HELD_LOCK:
        return _HELD.get(host) is not None


def release_all():
    """Release every lock this process holds, as its death would."""
    for host in list(_HELD):
        release(host)
