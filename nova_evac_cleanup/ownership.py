# SPDX-License-Identifier: Apache-2.0

"""Proof that an instance directory is an evacuation's own to remove.

Disks may only be removed where the evacuation made them: on a failed
evacuation the disks on storage shared with the source (a shared instance
directory, RBD) are the only copy of the server's data. nova answers
whether the files are shared before spawn, but that answer can be wrong (a
share that was unreachable when nova looked), and a share can be mounted
over the instances path afterwards.

So just before spawn, when nova found the files not shared, the
evacuation journals (fsynced) that the instance directory does not exist
yet, and the filesystem it will be made on. nova's driver then creates it
itself, as on stock nova, and so knows it may clean it up (libvirt's
``created_instance_dir``). What is at that path afterwards, on that
filesystem, was made by the evacuation's spawn: anything newer that could
have made it is an operation the rule (:mod:`nova_evac_cleanup.rule`)
never acts over. :func:`proof` is taken right before anything removes
disks; anything else keeps them.
"""

import os

from nova import objects
from oslo_log import log as logging

from nova_evac_cleanup import nova_support

LOG = logging.getLogger(__name__)


def instance_path(instance_uuid):
    """The instance directory on this host, where the libvirt driver keeps it.

    nova's own ``libvirt_utils.get_instance_path``: the one place the
    libvirt driver finds it, so the two never disagree. Imported here:
    it loads libvirt's helpers, which only this needs.
    """
    from nova.virt.libvirt import utils as libvirt_utils

    return libvirt_utils.get_instance_path(
        objects.Instance(uuid=instance_uuid))


def filesystem(path):
    """The id of the filesystem ``path`` is on, or would be created on.

    :raises OSError: if it cannot be read
    """
    path = os.path.abspath(path)
    while not os.path.lexists(path):
        path = os.path.dirname(path)
    return os.statvfs(path).f_fsid


def claim(entry, instance):
    """Note in ``entry``, before spawn, the directory spawn will make.

    Only where nova found the files not shared. A directory there already
    (a share unreachable when nova looked, or a leftover) turns nova's
    answer into "unknown"; on a nova that would delete the vTPM secret
    with the disks, they are kept too. Never raises.
    """
    entry.spawned = True
    path = instance_path(instance.uuid)
    if entry.shared is False and os.path.lexists(path):
        LOG.warning('The instance directory %s exists although nova found '
                    'the files not on shared storage: they are kept',
                    path, instance=instance)
        entry.shared = None
    keep = entry.shared is False and nova_support.vtpm_hazard(instance)
    if keep:
        LOG.warning('The disks of the evacuation to %s are kept whatever '
                    'happens: %s', entry.host, keep, instance=instance)
    elif entry.shared is False:
        try:
            entry.claim, entry.fsid = path, filesystem(path)
        except OSError as error:
            LOG.warning('Could not read where %s will be (%s): its disks '
                        'are kept', path, error, instance=instance)
            entry.claim, entry.shared = None, None


def proof(entry):
    """Whether the instance directory here is, right now, ``entry``'s.

    :returns: ``(True, None)``, or ``(False, reason)``
    """
    if entry.shared is not False:
        return False, ('the evacuation did not find the files to be off '
                       'shared storage before spawn (%s)' % (
                           'shared' if entry.shared else 'unknown'))
    if not entry.claim or entry.fsid is None:
        return False, ('the instance directory was not absent before the '
                       'evacuation\'s spawn')
    path = instance_path(entry.instance_uuid)
    if path != entry.claim:
        return False, 'the instance directory is now %s, not %s' % (
            path, entry.claim)
    try:
        if os.path.islink(path) or filesystem(path) != entry.fsid:
            return False, ('%s is not on the filesystem it was absent from '
                           'before spawn' % path)
    except OSError as error:
        return False, 'cannot read %s: %s' % (path, error)
    return True, None


def contents(path):
    """The files at the top of ``path`` with their sizes.

    The libvirt driver keeps an instance's files flat in its directory; one
    ``scandir`` of that directory is all that is read.

    :raises OSError: if the directory exists but cannot be read
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
