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

"""What this host knows, on its own disk, of the evacuations it runs.

The start-up sweep and ``nova-evac-cleanup audit --delete`` may only act
on proof that what they touch belongs to an evacuation this host was
running when it died. The database cannot give that proof: its records
outlive the evacuation, and an instance moves on. So the evacuating compute
keeps it here, on this host:

* a **journal entry** per evacuation in flight, written before spawn and
  removed when nova's rebuild code returns or raises (any exception a
  handler saw). An entry that is still there at start-up is an evacuation
  this host's death cut; nothing else leaves one. The entries live in
  ``[evacuate_cleanup] journal_path``, which must be on this host's local
  disk, one file each, so reading them costs nothing when there are none,
  however many evacuations this host ran in the past.
* an **ownership marker** in the instance directory, when, and only when,
  the evacuation found before spawn that the instance files are not on
  shared storage and created the directory itself (``os.mkdir`` succeeded:
  it did not exist). The marker names the migration; the entry records the
  device of the filesystem the directory was made on.

Disks may be deleted only if :func:`owns_directory` says so at that moment:
the marker still names the migration and the directory is still on the
same filesystem. A directory that existed before the evacuation's spawn, a
share mounted over the instances path since, or a directory another
operation made later carry no marker of that migration.
"""

import json
import os

from oslo_config import cfg
from oslo_log import log as logging
from oslo_utils import fileutils

CONF = cfg.CONF
LOG = logging.getLogger(__name__)

#: The name of the ownership marker in an instance directory.
MARKER = '.nova-evac-cleanup'


def instance_path(host, instance):
    """The instance directory on ``host``, in the libvirt driver's layout.

    ``libvirt_utils.get_instance_path``: ``[DEFAULT] instances_path/<uuid>``.
    The functional tests, whose hosts share one process and one ``CONF``,
    replace this function.
    """
    return os.path.join(CONF.instances_path, instance.uuid)


class Entry(object):
    """One evacuation to this host, as its compute recorded it."""

    FIELDS = ('host', 'instance_uuid', 'migration_uuid', 'migration_id',
              'shared_storage', 'created_dir', 'dir_path', 'dir_device')

    def __init__(self, host, instance_uuid, migration_uuid, migration_id,
                 shared_storage, created_dir=False, dir_path=None,
                 dir_device=None):
        self.host = host
        self.instance_uuid = instance_uuid
        self.migration_uuid = migration_uuid
        self.migration_id = migration_id
        #: True, False or None (unknown), found before spawn
        self.shared_storage = shared_storage
        #: whether this evacuation created the instance directory
        self.created_dir = created_dir
        self.dir_path = dir_path
        #: ``st_dev`` of the directory it created
        self.dir_device = dir_device

    def as_dict(self):
        return {name: getattr(self, name) for name in self.FIELDS}

    def __repr__(self):
        return 'Entry(%s)' % ', '.join(
            '%s=%r' % item for item in sorted(self.as_dict().items()))


def _directory(host):
    return os.path.join(CONF.evacuate_cleanup.journal_path, host)


def _path(host, migration_uuid):
    return os.path.join(_directory(host), '%s.json' % migration_uuid)


def _write_json(path, data):
    """Write ``data`` to ``path`` atomically: a new file renamed in place."""
    fileutils.ensure_tree(os.path.dirname(path))
    temporary = path + '.tmp'
    with open(temporary, 'w') as stream:
        json.dump(data, stream)
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(temporary, path)


def write(entry):
    """Write ``entry`` atomically."""
    _write_json(_path(entry.host, entry.migration_uuid), entry.as_dict())


def remove(entry):
    """Forget ``entry``; never raises."""
    try:
        os.unlink(_path(entry.host, entry.migration_uuid))
    except FileNotFoundError:
        pass
    except OSError:
        LOG.exception('Could not remove the journal entry of evacuation %s',
                      entry.migration_uuid)


def entries(host):
    """The entries this host left: the evacuations it did not finish.

    An unreadable entry is logged and skipped: it proves nothing.
    """
    try:
        names = sorted(os.listdir(_directory(host)))
    except FileNotFoundError:
        return []
    result = []
    for name in names:
        if not name.endswith('.json'):
            continue
        path = os.path.join(_directory(host), name)
        try:
            with open(path) as stream:
                data = json.load(stream)
            entry = Entry(**{k: data.get(k) for k in Entry.FIELDS})
        except (OSError, ValueError, TypeError):
            LOG.exception('Ignoring the unreadable journal entry %s', path)
            continue
        if entry.host != host:
            LOG.warning('Ignoring journal entry %s: it is for host %s',
                        path, entry.host)
            continue
        result.append(entry)
    return result


# The ownership marker.

def claim_directory(entry, instance):
    """Create the instance directory for ``entry`` and mark it as its own.

    Called just before spawn, and only when the instance files were found
    not to be on shared storage. If the directory exists already it is not
    this evacuation's: nothing is written and the entry says so.

    :returns: True if the directory was created here
    """
    path = instance_path(entry.host, instance)
    try:
        fileutils.ensure_tree(os.path.dirname(path))
        os.mkdir(path)
    except FileExistsError:
        LOG.debug('Instance directory %s exists before spawn: not this '
                  'evacuation\'s', path, instance=instance)
        return False
    with open(os.path.join(path, MARKER), 'w') as stream:
        json.dump({'migration_uuid': entry.migration_uuid,
                   'host': entry.host}, stream)
    entry.created_dir = True
    entry.dir_path = path
    entry.dir_device = os.stat(path).st_dev
    write(entry)
    return True


def release_directory(entry):
    """Remove the marker of a directory that is now the instance's own."""
    if not entry.created_dir:
        return
    try:
        os.unlink(os.path.join(entry.dir_path, MARKER))
    except FileNotFoundError:
        pass
    except OSError:
        LOG.exception('Could not remove the ownership marker in %s',
                      entry.dir_path)


def abandon_directory(entry):
    """Remove a directory this evacuation created if nothing else is in it.

    After a failure before spawn only the marker is there. After a failed
    spawn the cleanup has removed the directory, or it failed and the files
    are kept for the operator.
    """
    if not entry.created_dir:
        return
    try:
        if os.listdir(entry.dir_path) == [MARKER]:
            os.unlink(os.path.join(entry.dir_path, MARKER))
            os.rmdir(entry.dir_path)
    except FileNotFoundError:
        pass
    except OSError:
        LOG.exception('Could not remove the empty instance directory %s',
                      entry.dir_path)


def owns_directory(entry, instance):
    """Whether the instance directory here is, right now, ``entry``'s.

    :returns: ``(True, None)`` or ``(False, reason)``
    """
    if entry.shared_storage is not False:
        return False, ('the evacuation did not find the files to be off '
                       'shared storage before spawn (%s)' % (
                           {True: 'shared', None: 'unknown'}[
                               entry.shared_storage]))
    if not entry.created_dir:
        return False, ('the instance directory existed before the '
                       'evacuation\'s spawn')
    path = instance_path(entry.host, instance)
    if path != entry.dir_path:
        return False, ('the instance directory is now %s, not %s' % (
            path, entry.dir_path))
    try:
        device = os.stat(path).st_dev
        with open(os.path.join(path, MARKER)) as stream:
            marker = json.load(stream)
    except FileNotFoundError:
        return False, 'no ownership marker in %s' % path
    except (OSError, ValueError) as error:
        return False, 'cannot read the ownership marker: %s' % error
    if marker.get('migration_uuid') != entry.migration_uuid or (
            marker.get('host') != entry.host):
        return False, 'the ownership marker in %s names %s on %s' % (
            path, marker.get('migration_uuid'), marker.get('host'))
    if device != entry.dir_device:
        return False, ('%s is on another filesystem than the one the '
                       'evacuation created it on' % path)
    return True, None


# Directories found on shared storage.

def _shared_note_path(host, migration_uuid):
    return os.path.join(_directory(host), 'shared',
                        '%s.json' % migration_uuid)


def note_shared_directory(entry, instance):
    """Note that ``entry``'s evacuation found the files on shared storage.

    Called when that evacuation ends without the instance on this host
    (its spawn failed and the disks were kept, or the sweep or the audit
    ended it): the instance directory here then holds the instance's own
    files, on storage its host shares, not leftovers of this host's. The
    audit reads the note (:func:`shares_directory`) so as not to offer to
    remove the only copy of the disks. It names the directory and its
    filesystem: a directory elsewhere, or on another filesystem later, is
    not covered by it. Never raises: without a note the files are reported
    as kept, with the warning to check before removing them.
    """
    if entry.shared_storage is not True:
        return
    path = instance_path(entry.host, instance)
    try:
        device = os.stat(path).st_dev
    except FileNotFoundError:
        # No directory (the instance deleted meanwhile): nothing to note.
        return
    try:
        _write_json(_shared_note_path(entry.host, entry.migration_uuid), {
            'instance_uuid': instance.uuid,
            'migration_uuid': entry.migration_uuid,
            'dir_path': path,
            'dir_device': device})
    except OSError:
        LOG.exception('Could not note that evacuation %s found %s on shared '
                      'storage; the audit will report its files as kept',
                      entry.migration_uuid, path, instance=instance)


def shares_directory(host, migration_uuid, instance):
    """Whether the evacuation found this instance directory shared.

    True only if :func:`note_shared_directory` noted it for this
    migration, and the directory is, right now, the one it noted, on the
    same filesystem.
    """
    try:
        with open(_shared_note_path(host, migration_uuid)) as stream:
            note = json.load(stream)
        path = instance_path(host, instance)
        device = os.stat(path).st_dev
    except FileNotFoundError:
        return False
    except (OSError, ValueError):
        LOG.exception('Ignoring the unreadable shared-storage note of '
                      'evacuation %s', migration_uuid, instance=instance)
        return False
    return (note.get('instance_uuid') == instance.uuid and
            note.get('dir_path') == path and
            note.get('dir_device') == device)


def forget_shared_directory(host, migration_uuid):
    """Remove the note of an instance that is gone or now lives here."""
    try:
        os.unlink(_shared_note_path(host, migration_uuid))
    except FileNotFoundError:
        pass
    except OSError:
        LOG.exception('Could not remove the shared-storage note of '
                      'evacuation %s', migration_uuid)


def directory_contents(path):
    """The files at the top of ``path`` with their sizes, without a walk.

    The libvirt driver keeps an instance's files flat in its directory; one
    ``scandir`` of that directory is all the sweep reads.
    """
    result = {}
    try:
        with os.scandir(path) as listing:
            for item in listing:
                try:
                    result[item.name] = item.stat(
                        follow_symlinks=False).st_size
                except OSError:
                    result[item.name] = None
    except (FileNotFoundError, NotADirectoryError):
        pass
    return result
