# SPDX-License-Identifier: Apache-2.0

"""Proof that an instance directory is an evacuation's own to remove.

Disks shared with the source are the only copy of the server's data, and
nova's "not shared" can be wrong (a share it could not reach, or mounted
since). So before spawn the journal notes that the directory is absent,
and its filesystem; what is there later, on that filesystem, is the
spawn's. Disks go only with :func:`proof`.
"""

import os

from nova import objects
from oslo_log import log as logging

from nova_evac_cleanup import nova_support

LOG = logging.getLogger(__name__)


def instance_path(instance_uuid):
    """The instance directory here, as the libvirt driver finds it."""
    from nova.virt.libvirt import utils  # only this needs libvirt's helpers
    return utils.get_instance_path(objects.Instance(uuid=instance_uuid))


def filesystem(path):
    """The id of the filesystem ``path`` is or would be made on; OSError."""
    path = os.path.abspath(path)
    while not os.path.lexists(path):
        path = os.path.dirname(path)
    return os.statvfs(path).f_fsid


def claim(entry, instance):
    """Note in ``entry`` the directory spawn will make; never raises."""
    # A directory there already (a share nova missed, a leftover): unknown.
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
    """Whether the directory here is ``entry``'s now: ``(owns, why not)``."""
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
    """The sizes of the files directly in ``path``; OSError if unreadable."""
    # One scandir: the libvirt driver keeps an instance's files flat.
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
