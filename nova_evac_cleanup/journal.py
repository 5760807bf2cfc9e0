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

"""What this host knows, on its own disk, of the evacuations to it.

The start-up sweep and ``nova-evac-cleanup audit --delete`` may only act on
proof that what they touch belongs to an evacuation this host ran; the
database cannot give it (its records outlive the evacuation, and an
instance moves on). So the evacuating compute keeps a **journal entry** per
evacuation to this host, one file each in ``[evacuate_cleanup]
journal_path`` on this host's local disk:

* written before nova's rebuild code runs, and rewritten just before spawn
  with nova's answer to "are the instance files shared?" and the instance
  directory the evacuation created (:mod:`nova_evac_cleanup.ownership`);
* rewritten after each step of ending the evacuation, by the failure
  handler, the sweep or the audit (:attr:`Entry.ending`): a process that
  dies half-way leaves the record of how far it got, so that the next one
  finishes the job instead of taking its half-done work for an operator's;
* removed once nothing of the evacuation is left on this host, or kept
  (:attr:`Entry.kept`) with what is left here and why it could not be
  removed: a kept leftover of an evacuation that did not find the files on
  shared storage refuses the next evacuation of that server to this host
  until an operator clears it (:mod:`nova_evac_cleanup.leftovers`).

Every write is atomic (a new file renamed over the old one) and durable
(the file and its directory are fsynced), so an entry is either the old or
the new one after a crash, never a torn one. Reading tolerates anything
else found in the directory: a file that is not an entry of this host is
logged once and skipped, the others are still read.
"""

import json
import os

from oslo_config import cfg
from oslo_log import log as logging

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

_SUFFIX = '.json'


class Entry(object):
    """One evacuation to this host, as its compute recorded it."""

    FIELDS = ('host', 'instance_uuid', 'migration_uuid', 'migration_id',
              'shared_storage', 'claim', 'ending', 'kept', 'error',
              'spawning')

    def __init__(self, host, instance_uuid, migration_uuid, migration_id,
                 shared_storage=None, claim=None, ending=None, kept=None,
                 error=None, spawning=False):
        self.host = host
        self.instance_uuid = instance_uuid
        self.migration_uuid = migration_uuid
        self.migration_id = migration_id
        #: nova's answer before spawn: True, False or None (not known)
        self.shared_storage = shared_storage
        #: the instance directory the evacuation created, see
        #: :func:`nova_evac_cleanup.ownership.claim`; None if it created
        #: none
        self.claim = claim
        #: how far ending the evacuation got: None before it started, then
        #: ``{'task_state': <the task state it holds>, 'done': [steps]}``
        self.ending = ending
        #: why what is left of it here was kept, once it ended; None while
        #: it runs or is being ended
        self.kept = kept
        #: the error that failed it, as its handler first saw it: the
        #: fault a start that ends it records, should this process die
        #: before nova's handler recorded it
        self.error = error
        #: whether it got as far as spawning: before, nothing on this host
        #: is its own (files found here are another's, a shared
        #: directory's for one)
        self.spawning = spawning

    def as_dict(self):
        return {name: getattr(self, name) for name in self.FIELDS}

    @classmethod
    def from_dict(cls, data):
        """An entry from what :meth:`as_dict` returned.

        :raises ValueError: if ``data`` is not such a dict
        """
        if not isinstance(data, dict):
            raise ValueError('not a JSON object')
        missing = [name for name in ('host', 'instance_uuid',
                                     'migration_uuid', 'migration_id')
                   if not isinstance(data.get(name), (str, int))]
        if missing:
            raise ValueError('no %s' % ', '.join(missing))
        entry = cls(**{name: data.get(name) for name in cls.FIELDS})
        if entry.claim is not None and not isinstance(entry.claim, dict):
            raise ValueError('claim is not a JSON object')
        if entry.ending is not None and not (
                isinstance(entry.ending, dict) and
                isinstance(entry.ending.get('done'), list)):
            raise ValueError('ending is not a JSON object with done steps')
        return entry

    def __repr__(self):
        return 'Entry(%s)' % ', '.join(
            '%s=%r' % item for item in sorted(self.as_dict().items()))


def _directory(host):
    return os.path.join(CONF.evacuate_cleanup.journal_path, host)


def _path(host, migration_uuid):
    return os.path.join(_directory(host), migration_uuid + _SUFFIX)


def fsync_directory(path):
    """Make the entries of directory ``path`` durable."""
    descriptor = os.open(path, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def write_json(path, data):
    """Write ``data`` to ``path`` atomically and durably.

    A new file, fsynced, renamed over ``path``, then its directory fsynced:
    after a crash ``path`` holds either what it held or ``data``.
    """
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    temporary = path + '.tmp'
    with open(temporary, 'w') as stream:
        json.dump(data, stream)
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(temporary, path)
    fsync_directory(directory)


def ensure_writable(host):
    """Create this host's journal directory; raise if it cannot be written.

    :raises OSError: the evacuations could not be journaled
    """
    directory = _directory(host)
    os.makedirs(directory, exist_ok=True)
    if not os.access(directory, os.W_OK | os.X_OK):
        raise PermissionError('%s is not writable' % directory)


def write(entry):
    """Write ``entry`` atomically and durably.

    :raises OSError: if it could not be written
    """
    write_json(_path(entry.host, entry.migration_uuid), entry.as_dict())


def remove(entry):
    """Forget ``entry``.

    :raises OSError: if it could not be removed
    """
    path = _path(entry.host, entry.migration_uuid)
    try:
        os.unlink(path)
    except FileNotFoundError:
        return
    fsync_directory(os.path.dirname(path))


def entries(host):
    """The entries of this host, oldest name first.

    Anything in the journal directory that is not a readable entry of this
    host (another host's, a directory, an empty, truncated or foreign
    file) proves nothing: it is logged and skipped, and the other entries
    are still read.
    """
    directory = _directory(host)
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return []
    result = []
    for name in names:
        if not name.endswith(_SUFFIX):
            continue
        path = os.path.join(directory, name)
        try:
            with open(path) as stream:
                entry = Entry.from_dict(json.load(stream))
        except (OSError, ValueError) as error:
            LOG.error('Ignoring %s in the evacuation journal of %s: not a '
                      'readable journal entry (%s)', path, host, error)
            continue
        if entry.host != host or name != entry.migration_uuid + _SUFFIX:
            LOG.error('Ignoring %s in the evacuation journal of %s: it is '
                      'the entry of migration %s to %s', path, host,
                      entry.migration_uuid, entry.host)
            continue
        result.append(entry)
    return result


def entries_of(host, instance_uuid):
    """The entries of this host for one instance."""
    return [entry for entry in entries(host)
            if entry.instance_uuid == instance_uuid]
