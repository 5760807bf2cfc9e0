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

* written as the evacuation begins, and just before spawn with nova's
  answer to "are the instance files shared?" and the instance directory
  the evacuation is about to create (:mod:`nova_evac_cleanup.ownership`);
* rewritten after each step of ending it, by the sweep or the audit
  (:attr:`Entry.ending`): a process that dies half-way leaves the record
  of how far it got, so that the next one finishes the job instead of
  taking its half-done work for an operator's;
* removed once nothing of the evacuation is left on this host, or kept
  (:attr:`Entry.kept`) with what is left here and why: a kept leftover of
  an evacuation that did not find the files on shared storage refuses the
  next evacuation of that server to this host until an operator clears it
  (:mod:`nova_evac_cleanup.leftovers`).

Every write is atomic (a new file renamed over the old one): after the
process dies an entry is the old or the new one, never a torn one. Only
the writes that precede what a crash of the host could leave without a
record are fsynced (``durable``): the entry written before the instance
directory is created, and the steps of an ending. Losing any other write
to a power cut leaves a record the sweep reads as less proven, which only
ever keeps more. Reading tolerates anything else found in the directory:
a file that is not an entry of this host is logged and skipped.

Should the journal be unusable (a full disk, a read-only or missing
directory) the failure handler still cleans up with what it knows in
memory; only the crash recovery and the refusal of kept leftovers are
lost, and the compute manager says so in one error.
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
              'spawning', 'detached')

    def __init__(self, host, instance_uuid, migration_uuid, migration_id,
                 shared_storage=None, claim=None, ending=None, kept=None,
                 error=None, spawning=False, detached=None):
        self.host = host
        self.instance_uuid = instance_uuid
        self.migration_uuid = migration_uuid
        self.migration_id = migration_id
        #: nova's answer before spawn: True, False or None (not known)
        self.shared_storage = shared_storage
        #: the instance directory the evacuation created, see
        #: :func:`nova_evac_cleanup.ownership.claim`; None if it created
        #: none; with ``keep``, why it created none and keeps the disks
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
        #: the source's attachment of each volume nova's
        #: ``detach_block_devices`` began to replace, by volume id
        self.detached = detached or {}

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


def write(entry, durable=False):
    """Write ``entry`` atomically; with ``durable``, fsynced too.

    :raises OSError: if it could not be written
    """
    path = _path(entry.host, entry.migration_uuid)
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    temporary = path + '.tmp'
    with open(temporary, 'w') as stream:
        json.dump(entry.as_dict(), stream)
        if durable:
            stream.flush()
            os.fsync(stream.fileno())
    os.replace(temporary, path)
    if durable:
        fsync_directory(directory)


#: Filesystem types that may be mounted on several hosts at once.
_SHARED_TYPES = ('nfs', 'nfs4', 'cifs', 'smb3', 'ceph', 'fuse.ceph-fuse',
                 'glusterfs', 'fuse.glusterfs', 'ocfs2', 'gfs2', 'lustre',
                 'gpfs', 'beegfs', 'fuse.sshfs', '9p', 'virtiofs')


def problem(host):
    """Why the journal of ``host`` cannot be used, or None.

    Creates the directory if it is missing, and writes and removes a probe
    entry: a read-only filesystem or a full disk shows here.
    """
    try:
        probe = Entry(host, '-', '.probe', 0)
        write(probe)
        os.unlink(_path(host, probe.migration_uuid))
    except Exception as error:
        return '%s: %s' % (_directory(host), error)
    return None


def shared_filesystem(path, mountinfo='/proc/self/mountinfo'):
    """The type of the filesystem ``path`` is on if it may be shared.

    Read from the mount table (the longest mount point above ``path``);
    None for a local filesystem or when it cannot be told.
    """
    path = os.path.realpath(path)
    best, kind = '', None
    try:
        with open(mountinfo) as stream:
            for line in stream:
                fields = line.split()
                separator = fields.index('-')
                point = fields[4].replace('\\040', ' ')
                inside = (path == point or
                          path.startswith(point.rstrip('/') + '/'))
                if inside and len(point) >= len(best):
                    best, kind = point, fields[separator + 1]
    except (OSError, ValueError, IndexError):
        return None
    return kind if kind in _SHARED_TYPES else None


def remove(entry):
    """Forget ``entry``.

    Not fsynced: an entry back after a power cut is examined again, and
    forgotten, by the next start.

    :raises OSError: if it could not be removed
    """
    try:
        os.unlink(_path(entry.host, entry.migration_uuid))
    except FileNotFoundError:
        pass


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
        if not name.endswith(_SUFFIX) or name.startswith('.'):
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
