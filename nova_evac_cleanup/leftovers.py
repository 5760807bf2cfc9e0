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

"""What an evacuation left on this host once it ended, and who may use it.

An evacuation to this host ends without the instance living here when its
spawn fails, when it fails after spawn, or when this host died during it
and the start-up sweep or ``audit --delete`` ended it. What is then left
here is either nothing (its journal entry goes), or kept:

* files nova found on **shared storage** before spawn are the server's own
  (its disks on a shared instance directory or RBD): the next evacuation
  of the server to this host uses them, as nova always did;
* a guest the cleanup could not destroy is the evacuation's own: the
  next evacuation of the server to this host destroys it first, with its
  disks only where the ownership proof still holds;
* files the evacuation found not shared, or could not tell, whose
  directory no longer carries its ownership marker, are a leftover that
  nova would take for shared storage, and boot, on the next evacuation.
  So the next evacuation of that server to this host is refused before
  anything is created (:func:`clear_or_refuse`), with a fault naming the
  leftover and the commands to clear it, until an operator has removed
  it; an HA tool then picks another host.

Files without proof are never removed or renamed here: only the journal
entry goes, once nothing of the evacuation is left.
"""

from nova import exception
from oslo_log import log as logging

from nova_evac_cleanup import guest
from nova_evac_cleanup import journal
from nova_evac_cleanup import ownership
from nova_evac_cleanup import runbook
from nova_evac_cleanup import unwind

LOG = logging.getLogger(__name__)


class EvacuationLeftoverKept(exception.NovaException):
    """The next evacuation is refused over a leftover nova would boot.

    The leftover comes first in the message: nova keeps 255 characters of
    it in the instance fault, and the whole of it in the fault's details.
    """
    msg_fmt = ('Evacuation to %(host)s refused: %(leftover)s kept from '
               'evacuation %(migration)s, not proven its own. Once checked, '
               'on %(host)s: %(commands)s')


def guest_state(driver, instance):
    """None, ``'running'`` or ``'defined'``: the guest on this host."""
    from nova.compute import power_state

    try:
        if not driver.instance_exists(instance):
            return None
        state = driver.get_info(instance).state
    except exception.InstanceNotFound:
        return None
    return 'running' if state == power_state.RUNNING else 'defined'


def left_here(driver, entry, instance):
    """What of ``entry``'s evacuation is on this host, besides placement.

    :returns: ``(guest, files)``: :func:`guest`, and the files of the
        instance directory with their sizes
    :raises OSError: if the instance directory cannot be read
    """
    path = ownership.instance_path(entry.instance_uuid)
    return guest_state(driver, instance), ownership.contents(path)


def kept_reason(entry, guest_left, files, made=None):
    """Why what is left of ``entry`` is kept, or None if nothing is.

    Files are the evacuation's leftovers only if it got as far as
    spawning: before, it made none, and what is in the directory is
    another's (on a shared instance directory, the server's own disks).
    """
    if guest_left:
        return 'its %s guest could not be destroyed' % guest_left
    if not files or not entry.spawning:
        return None
    if entry.shared_storage:
        return ('the server\'s own files: nova found them on shared storage '
                'before spawn')
    return 'its files: %s' % ownership.proof(entry, made)[1]


def end(driver, entry, instance, made=None):
    """The evacuation of ``entry`` ended without the instance here.

    Removes its journal entry if nothing of it is left, or records why
    what is left is kept. Never raises: on an error the entry stays as it
    is, which keeps everything.

    :param made: see :func:`nova_evac_cleanup.ownership.proof`

    :returns: the reason it was kept, or None
    """
    try:
        if not ownership.remove_if_empty(entry, made):
            LOG.debug('The instance directory of evacuation %s holds '
                      'files', entry.migration_uuid)
        guest_left, files = left_here(driver, entry, instance)
        reason = kept_reason(entry, guest_left, files, made)
        if reason is None:
            journal.remove(entry)
            return None
        entry.kept = reason
        journal.write(entry)
    except Exception:
        LOG.exception('Could not record the end of evacuation %s to %s: its '
                      'journal entry is kept as it was', entry.migration_uuid,
                      entry.host, instance_uuid=entry.instance_uuid)
        return 'unknown'
    if guest_left:
        LOG.warning('Evacuation %s to %s ended and keeps %s; the next '
                    'evacuation of the server to %s destroys it first',
                    entry.migration_uuid, entry.host, reason, entry.host,
                    instance_uuid=entry.instance_uuid)
    elif not entry.shared_storage:
        LOG.warning('Evacuation %s to %s ended and keeps %s; the next '
                    'evacuation of the server to %s is refused until it is '
                    'removed by hand', entry.migration_uuid, entry.host,
                    reason, entry.host, instance_uuid=entry.instance_uuid)
    return reason


def commands(entry, instance, guest_left, files):
    """The runbook's commands that clear a kept leftover of ``entry``."""
    path = ownership.instance_path(entry.instance_uuid)
    steps = runbook.cleanup_steps(
        entry.host, entry.instance_uuid, instance.name, guest=guest_left,
        instance_dir=path if files else None,
        shared_with=(instance.host if entry.shared_storage is None
                     else None))
    return [step.command for step in steps]


def clear_or_refuse(manager, context, instance, migration_uuid):
    """Clear what earlier evacuations of ``instance`` left here, or refuse.

    Called by the next evacuation of the server to this host, which holds
    the server, before anything is created here. A guest an earlier
    evacuation of it left here (its destroy failed) is the evacuation's
    own: the instance is not hosted here, and nova would fail with
    ``InstanceExists``. It is destroyed now, its disks with it only with
    proof, taken now, that their directory is that evacuation's
    (:func:`nova_evac_cleanup.ownership.proof`). Files without that proof
    refuse the evacuation. Entries nothing is left of are forgotten.

    :param migration_uuid: the evacuation's own migration, whose entry is
        not an earlier one's

    :raises EvacuationLeftoverKept: files of an earlier evacuation that did
        not find them on shared storage are still here, not proven its own
    :raises OSError: the journal or the instance directory cannot be read
    """
    host = manager.host
    for entry in journal.entries_of(host, instance.uuid):
        if entry.migration_uuid == migration_uuid:
            # The evacuation itself, journaled as it began.
            continue
        guest_left, files = _left_unshared(manager.driver, entry, instance)
        owned, _why = ownership.proof(entry)
        if guest_left or (files and owned):
            _clear(manager, context, entry, instance, owned)
            guest_left, files = _left_unshared(manager.driver, entry,
                                               instance)
        if not (guest_left or files):
            if entry.kept or entry.ending:
                LOG.info('What evacuation %s left on %s is gone: '
                         'forgotten', entry.migration_uuid, host,
                         instance=instance)
                journal.remove(entry)
            continue
        leftover = ' and '.join(filter(None, [
            guest_left and 'a %s guest' % guest_left,
            files and ownership.instance_path(instance.uuid)]))
        raise EvacuationLeftoverKept(
            host=host, leftover=leftover, migration=entry.migration_uuid,
            commands='; '.join(commands(entry, instance, guest_left, files)))


def _left_unshared(driver, entry, instance):
    guest_left, files = left_here(driver, entry, instance)
    if entry.shared_storage or not entry.spawning:
        # The server's own files, which the evacuation uses, or files of
        # another: that evacuation never got as far as spawning.
        files = {}
    return guest_left, files


def _clear(manager, context, entry, instance, owned):
    """Destroy the guest an earlier evacuation of ``instance`` left here.

    Its volume connections are those of the mappings that evacuation
    attached here and spawned with (:func:`unwind.block_device_info`).
    The resources its claim had are gone with the claim: the driver is
    given none.
    """
    LOG.warning('Evacuation %s left a guest on %s: destroying it (%s) '
                'before evacuating the server here again',
                entry.migration_uuid, manager.host,
                'and its disks, which it created' if owned else
                'keeping its files', instance=instance)
    try:
        guest.destroy(manager.driver, context, instance,
                      instance.get_network_info(),
                      unwind.block_device_info(manager, context,
                                               instance, entry),
                      destroy_disks=owned, resources_known=False)
    except Exception:
        LOG.exception('Could not destroy what evacuation %s left on %s',
                      entry.migration_uuid, manager.host,
                      instance=instance)
