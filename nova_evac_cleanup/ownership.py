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

"""Proof that an instance directory is an evacuation's own to remove.

Disks may only be removed where the evacuation made them: on a failed
evacuation the disks on storage shared with the source (a shared instance
directory, RBD) are the only copy of the server's data. nova answers
whether the files are shared before spawn, but that answer can be wrong (a
share that was unreachable when nova looked), and a directory can be
replaced or mounted over afterwards. So when nova found the files not
shared, the evacuation creates the instance directory itself, just before
spawn (``os.mkdir``, which fails if it exists: then it is not the
evacuation's), and writes an **ownership marker** in it naming the
migration and the directory's identity.

The identity is the filesystem id (``statvfs``) and the directory's inode,
which stay the same across a reboot of the host; the device number does
not on some layouts (device-mapper minors, btrfs). The marker, the
directory and its parent are fsynced before spawn, so the proof survives
the crash it exists for.

:func:`proof` is taken right before anything removes disks: the marker is
still there, names the migration and this host, and the directory is
still the one it names. Anything else keeps the disks.
"""

import json
import os

from nova import objects
from oslo_log import log as logging
from oslo_utils import fileutils

from nova_evac_cleanup import journal

LOG = logging.getLogger(__name__)

#: The name of the ownership marker in an instance directory.
MARKER = '.nova-evac-cleanup'


def instance_path(instance_uuid):
    """The instance directory on this host, where the libvirt driver keeps it.

    nova's own ``libvirt_utils.get_instance_path``: the one place the
    libvirt driver finds it, so the two never disagree. Imported here:
    it loads libvirt's helpers, which only this needs.
    """
    from nova.virt.libvirt import utils as libvirt_utils

    return libvirt_utils.get_instance_path(
        objects.Instance(uuid=instance_uuid))


def identity(path):
    """What names directory ``path`` across reboots: filesystem and inode.

    :raises OSError: if it cannot be read
    """
    return {'fsid': os.statvfs(path).f_fsid, 'inode': os.stat(path).st_ino}


def claim(entry):
    """Create the instance directory ``entry`` names and mark it as its own.

    Called just before spawn, once the entry records the path (write-ahead:
    a directory this process made and died before marking is known to be
    the evacuation's to look at, and is removed only if empty). The
    directory and its marker are fsynced: the proof survives the crash it
    exists for.

    :returns: the directory's identity, which is also the proof in memory
        should the marker not be written (a full disk)
    :raises FileExistsError: the directory exists: it is not the
        evacuation's
    :raises OSError: it could not be created
    """
    path = entry.claim
    parent = os.path.dirname(path)
    fileutils.ensure_tree(parent)
    os.mkdir(path)
    journal.fsync_directory(parent)
    made = identity(path)
    marker = dict(made, migration_uuid=entry.migration_uuid,
                  instance_uuid=entry.instance_uuid, host=entry.host)
    try:
        with open(os.path.join(path, MARKER), 'x') as stream:
            json.dump(marker, stream)
            stream.flush()
            os.fsync(stream.fileno())
        journal.fsync_directory(path)
    except OSError as error:
        LOG.error('Could not mark %s as the directory of evacuation %s (%s): '
                  'only this process knows it is its own', path,
                  entry.migration_uuid, error)
        fileutils.delete_if_exists(os.path.join(path, MARKER))
    return made


def _read_marker(path):
    with open(os.path.join(path, MARKER)) as stream:
        marker = json.load(stream)
    if not isinstance(marker, dict):
        raise ValueError('not a JSON object')
    return marker


def proof(entry, made=None):
    """Whether the instance directory here is, right now, ``entry``'s.

    :param made: the identity :func:`claim` returned, in this process: the
        proof when the marker could not be written
    :returns: ``(True, None)``, or ``(False, reason)``
    """
    if entry.shared is not False:
        return False, ('the evacuation did not find the files to be off '
                       'shared storage before spawn (%s)' % (
                           'shared' if entry.shared else 'unknown'))
    if not entry.claim:
        return False, 'the evacuation did not create the instance directory'
    path = instance_path(entry.instance_uuid)
    if path != entry.claim:
        return False, 'the instance directory is now %s, not %s' % (
            path, entry.claim)
    try:
        current = identity(path)
    except OSError as error:
        return False, 'cannot read %s: %s' % (path, error)
    if made is not None and made == current:
        # This process created it, whatever became of its marker.
        return True, None
    try:
        marker = _read_marker(path)
    except FileNotFoundError:
        return False, 'no ownership marker in %s' % path
    except (OSError, ValueError) as error:
        return False, 'cannot read the ownership marker in %s: %s' % (
            path, error)
    if (marker.get('migration_uuid'), marker.get('host'),
            marker.get('instance_uuid')) != (
            entry.migration_uuid, entry.host, entry.instance_uuid):
        return False, 'the ownership marker in %s names migration %s on %s' % (
            path, marker.get('migration_uuid'), marker.get('host'))
    if (marker.get('fsid'), marker.get('inode')) != (
            current['fsid'], current['inode']):
        return False, ('%s is not the directory the evacuation created '
                       '(another filesystem or another directory)' % path)
    return True, None


def release(entry, lives_here=False, made=None):
    """Let go of the directory ``entry`` created: its marker goes.

    If the instance lives here, the directory is its own and stays.
    Otherwise it goes too if only the marker is in it (a failure before
    spawn, a death right after the claim), and only with the proof taken
    now: ``rmdir`` fails on a directory that is not empty, so no other
    file is ever removed.

    :param made: see :func:`proof`
    :returns: True if the evacuation keeps no directory here
    :raises OSError: if it could not be read or removed
    """
    path = entry.claim
    if not path:
        return True
    try:
        names = os.listdir(path)
    except FileNotFoundError:
        return True
    if not lives_here and (set(names) - {MARKER} or
                           names and not proof(entry, made)[0]):
        return False
    if MARKER in names:
        os.unlink(os.path.join(path, MARKER))
    if not lives_here:
        os.rmdir(path)
    journal.fsync_directory(path if lives_here else os.path.dirname(path))
    return True


def contents(path):
    """The files at the top of ``path`` with their sizes, but the marker.

    The libvirt driver keeps an instance's files flat in its directory; one
    ``scandir`` of that directory is all that is read.

    :raises OSError: if the directory exists but cannot be read
    """
    result = {}
    try:
        with os.scandir(path) as listing:
            for item in listing:
                if item.name == MARKER:
                    continue
                try:
                    result[item.name] = item.stat(
                        follow_symlinks=False).st_size
                except OSError:
                    result[item.name] = None
    except (FileNotFoundError, NotADirectoryError):
        pass
    return result
