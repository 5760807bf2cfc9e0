# SPDX-License-Identifier: Apache-2.0

"""What this host knows, on its own disk, of the evacuations to it.

The proof the sweep and ``audit --delete`` need that this host ran an
evacuation (nova's records outlive it): one entry each, from before nova's
rebuild code runs until nothing of it is left.
"""

import contextlib
import dataclasses
import json
import os

from oslo_config import cfg
from oslo_log import log as logging
import psutil

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

PHASES = BEGUN, ENDING, RELEASING, KEPT = (
    'begun', 'ending', 'releasing', 'kept')


@dataclasses.dataclass
class Entry(object):
    """One evacuation to this host, as its compute recorded it."""

    host: str
    instance_uuid: str
    migration_uuid: str
    spawned: bool = False  #: before spawn nothing here is its own
    shared: bool | None = None  #: nova's answer to "shared?", if known
    claim: str | None = None  #: the directory, absent before, spawn makes
    fsid: int | None = None  #: the filesystem it was absent from
    #: the source's attachment of each volume, before nova replaces it
    detached: dict = dataclasses.field(default_factory=dict)
    #: the reserved attachment its ending made for each volume ('' while
    #: cinder is asked for it)
    reserved: dict = dataclasses.field(default_factory=dict)
    error: str | None = None  #: what failed it, as this host first saw it
    phase: str = BEGUN  #: how far its end got (``releasing``: server held)
    held_from: str | None = None  #: the task state the ending found
    done: list = dataclasses.field(default_factory=list)  #: its steps

    def __post_init__(self):
        # Entries of earlier versions may hold null for any.
        self.detached, self.reserved = self.detached or {}, self.reserved or {}
        self.done = self.done or []

    def made(self, volume_id, attachment_id):
        """Whether the attachment is the evacuation's, not the source's."""
        return self.detached.get(volume_id, attachment_id) != attachment_id

    as_dict = dataclasses.asdict

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
                isinstance(entry.reserved, dict) and
                isinstance(entry.done, list) and
                isinstance(entry.claim, (str, type(None))) and
                entry.phase in PHASES):
            raise ValueError('detached, reserved, done, claim or phase '
                             'mistyped')
        return entry


FIELDS = tuple(field.name for field in dataclasses.fields(Entry))


def _upgraded(old):
    """An entry as versions before 2026-12 wrote it, in today's fields."""
    claim, ending = old.get('claim') or {}, old.get('ending') or {}
    if not isinstance(claim, dict) or not isinstance(ending, dict) or (
            not isinstance(ending.get('done', []), list)):
        raise ValueError('claim or ending is not a JSON object')
    return dict(
        old, shared=old['shared_storage'], spawned=bool(old.get('spawning')),
        phase=(KEPT if old.get('kept') else
               RELEASING if ending.get('releasing') else
               ENDING if ending else BEGUN),
        claim=None if claim.get('keep') else claim.get('path'),  # disks kept
        held_from=ending.get('from', ending.get('task_state')),
        done=ending.get('done', []))


def _path(host, migration_uuid=''):
    """The file of an entry, or with no migration the host's directory."""
    return os.path.join(CONF.evacuate_cleanup.journal_path, host,
                        migration_uuid and migration_uuid + '.json')


def write(entry, durable=False):
    """Write ``entry`` atomically; ``durable``: fsynced, with its directory."""
    path = _path(entry.host, entry.migration_uuid)
    directory = os.path.dirname(path)
    os.makedirs(directory, exist_ok=True)
    with open(path + '.tmp', 'w') as stream:
        json.dump(entry.as_dict(), stream)
        if durable:
            stream.flush()
            os.fsync(stream.fileno())
    os.replace(path + '.tmp', path)
    if durable:
        descriptor = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(descriptor)
        finally:
            os.close(descriptor)


def remove(entry):
    """Forget ``entry``; not fsynced: the next start forgets it again."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(_path(entry.host, entry.migration_uuid))


#: Filesystem types that may be mounted on several hosts at once.
_SHARED_TYPES = ('nfs', 'nfs4', 'cifs', 'smb3', 'ceph', 'fuse.ceph-fuse',
                 'glusterfs', 'fuse.glusterfs', 'ocfs2', 'gfs2', 'lustre',
                 'gpfs', 'beegfs', 'fuse.sshfs', '9p', 'virtiofs')


def shared_filesystem(path):
    """The type of the filesystem ``path`` is on if it may be shared."""
    path = os.path.realpath(path)
    mount = max((m for m in psutil.disk_partitions(all=True)
                 if os.path.commonpath([path, m.mountpoint]) == m.mountpoint),
                key=lambda m: len(m.mountpoint), default=None)
    return mount.fstype if mount and mount.fstype in _SHARED_TYPES else None


def usable(host):
    """Whether a probe entry of ``host`` can be written; logs why not."""
    path = CONF.evacuate_cleanup.journal_path
    if shared := shared_filesystem(path):
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
                  'of a failed spawn still runs.', host, _path(host), error)
        return False
    return True


def entries(host, instance_uuid=None):
    """This host's entries (of one instance), by name; skips other files."""
    try:
        names = sorted(name for name in os.listdir(_path(host))
                       if name.endswith('.json') and not name.startswith('.'))
    except FileNotFoundError:
        return []
    result = []
    for name in names:
        path = _path(host, name[:-len('.json')])
        try:
            with open(path) as stream:
                entry = Entry.from_dict(json.load(stream))
            if path != _path(entry.host, entry.migration_uuid):
                raise ValueError('the entry of migration %s to %s' % (
                    entry.migration_uuid, entry.host))
        except (OSError, ValueError) as error:
            LOG.error('Ignoring %s in the evacuation journal of %s: not a '
                      'journal entry of it (%s)', path, host, error)
            continue
        if instance_uuid in (None, entry.instance_uuid):
            result.append(entry)
    return result
