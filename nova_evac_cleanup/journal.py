# SPDX-License-Identifier: Apache-2.0

"""The record: what this host knows, on its own disk, of its evacuations.

The sweep and ``audit --delete`` act only on proof that what they touch
is an evacuation this host ran, which the database cannot give (its
records outlive the evacuation). So the evacuating compute keeps one
entry per evacuation to it in ``[evacuate_cleanup] journal_path``, from
before nova's rebuild code runs until nothing of it is left here. Each
write is atomic; those before what a host crash could leave unrecorded
are fsynced. Entries of earlier versions are read too (their disks, proven
by a marker then, are kept).
"""

import contextlib
import dataclasses
import json
import os
import typing

from oslo_config import cfg
from oslo_log import log as logging
import psutil

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

_SUFFIX = '.json'
PHASES = BEGUN, ENDING, RELEASING, KEPT = (
    'begun', 'ending', 'releasing', 'kept')


@dataclasses.dataclass
class Entry(object):
    """One evacuation to this host, as its compute recorded it."""

    host: str
    instance_uuid: str
    migration_uuid: str
    #: whether it got as far as spawning: before, nothing here is its own
    spawned: bool = False
    #: nova's answer to "shared?": True, False or None (not known)
    shared: typing.Optional[bool] = None
    #: the instance directory, absent before spawn, that spawn makes
    claim: typing.Optional[str] = None
    #: the id of the filesystem it was absent from
    fsid: typing.Optional[int] = None
    #: the source's attachment of each volume nova began to replace
    detached: dict = dataclasses.field(default_factory=dict)
    #: the error that failed it, as this host first saw it
    error: typing.Optional[str] = None
    #: how far its end got: begun, ending, releasing (the server held;
    #: done lists the steps), kept (it left what the cleanup keeps)
    phase: str = BEGUN
    #: the task state the ending found the server in, before its hold
    held_from: typing.Optional[str] = None
    #: the steps of the ending done
    done: list = dataclasses.field(default_factory=list)

    def __post_init__(self):
        # Entries of earlier versions may hold null for either.
        self.detached, self.done = self.detached or {}, self.done or []

    def made(self, volume_id, attachment_id):
        """Whether the attachment is the evacuation's, not the source's."""
        return self.detached.get(volume_id, attachment_id) != attachment_id

    def as_dict(self):
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data):
        """An entry of this version or an earlier one; or ValueError."""
        if not isinstance(data, dict):
            raise ValueError('not a JSON object')
        missing = [name for name in FIELDS[:3]
                   if not isinstance(data.get(name), str)]
        if missing:
            raise ValueError('no %s' % ', '.join(missing))
        if 'shared_storage' in data:
            data = _upgraded(data)
        entry = cls(**{name: data[name] for name in FIELDS if name in data})
        if not (isinstance(entry.detached, dict) and
                isinstance(entry.done, list) and
                isinstance(entry.claim, (str, type(None))) and
                entry.phase in PHASES):
            raise ValueError('detached, done, claim or phase mistyped')
        return entry


FIELDS = tuple(field.name for field in dataclasses.fields(Entry))


def _upgraded(old):
    """An entry as versions before 2026-12 wrote it, in today's fields."""
    claim = old.get('claim') or {}
    ending = old.get('ending') or {}
    if not isinstance(claim, dict) or not isinstance(ending, dict) or (
            not isinstance(ending.get('done', []), list)):
        raise ValueError('claim or ending is not a JSON object')
    phase = (KEPT if old.get('kept') else
             RELEASING if ending.get('releasing') else
             ENDING if ending else BEGUN)
    return dict(
        old, shared=old['shared_storage'], phase=phase,
        spawned=bool(old.get('spawning')),
        # A claim with 'keep' made no directory.
        claim=None if claim.get('keep') else claim.get('path'),
        held_from=ending.get('from', ending.get('task_state')),
        done=ending.get('done', []))


def _directory(host):
    return os.path.join(CONF.evacuate_cleanup.journal_path, host)


def _path(entry):
    return os.path.join(_directory(entry.host),
                        entry.migration_uuid + _SUFFIX)


def write(entry, durable=False):
    """Write ``entry`` atomically; with ``durable``, fsynced too."""
    path = _path(entry)
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
        descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def remove(entry):
    """Forget ``entry`` (not fsynced: the next start forgets it again)."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_path(entry))


#: Filesystem types that may be mounted on several hosts at once.
_SHARED_TYPES = ('nfs', 'nfs4', 'cifs', 'smb3', 'ceph', 'fuse.ceph-fuse',
                 'glusterfs', 'fuse.glusterfs', 'ocfs2', 'gfs2', 'lustre',
                 'gpfs', 'beegfs', 'fuse.sshfs', '9p', 'virtiofs')


def shared_filesystem(path):
    """The type of the filesystem ``path`` is on if it may be shared."""
    path = os.path.realpath(path)
    mounts = [m for m in psutil.disk_partitions(all=True)
              if os.path.commonpath([path, m.mountpoint]) == m.mountpoint]
    if not mounts:
        return None
    kind = max(mounts, key=lambda m: len(m.mountpoint)).fstype
    return kind if kind in _SHARED_TYPES else None


def usable(host):
    """Whether the journal of ``host`` can be written; logs why not.

    A probe entry is written and removed: a read-only filesystem or a full
    disk shows here. A journal other hosts may mount gets a warning.
    """
    path = CONF.evacuate_cleanup.journal_path
    shared = shared_filesystem(path)
    if shared:
        LOG.warning('[evacuate_cleanup] journal_path %s is on a %s '
                    'filesystem, which other hosts may mount: it must be '
                    'local to %s', path, shared, host)
    try:
        probe = Entry(host, '-', '.probe')
        write(probe)
        remove(probe)
    except Exception as error:
        LOG.error('nova-evac-cleanup on %s: %s: %s: without a journal, '
                  'evacuations this host\'s death interrupts are not '
                  'recovered and kept leftovers refuse nothing; the cleanup '
                  'of a failed spawn still runs.', host, _directory(host),
                  error)
        return False
    return True


def entries(host, instance_uuid=None):
    """The entries of this host (of one instance), by name.

    Anything else in the directory (another host's entry, an empty,
    truncated or foreign file) proves nothing: logged and skipped.
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
            if entry.host != host or name != entry.migration_uuid + _SUFFIX:
                raise ValueError('the entry of migration %s to %s' % (
                    entry.migration_uuid, entry.host))
        except (OSError, ValueError) as error:
            LOG.error('Ignoring %s in the evacuation journal of %s: not a '
                      'journal entry of it (%s)', path, host, error)
            continue
        if instance_uuid in (None, entry.instance_uuid):
            result.append(entry)
    return result
