# SPDX-License-Identifier: Apache-2.0

"""What an ended evacuation left on this host, and who may use it.

Its journal entry goes once nothing of it is left, or records what is
kept. For the next evacuation of the server here, files on **shared
storage** are the server's own; a guest the cleanup could not destroy is
destroyed first; other files without the ownership proof are a leftover
nova would boot: it is refused (:func:`clear_or_refuse`), with a fault
naming the commands, and an HA tool picks another host. Files without
proof are never removed here.
"""

from nova import exception
from oslo_log import log as logging

from nova_evac_cleanup import guest
from nova_evac_cleanup import journal
from nova_evac_cleanup import ownership
from nova_evac_cleanup import runbook

LOG = logging.getLogger(__name__)


class EvacuationLeftoverKept(exception.NovaException):
    """The next evacuation is refused over a leftover nova would boot."""

    # The leftover first: nova keeps 255 characters in the fault's message.
    msg_fmt = ('Evacuation to %(host)s refused: %(leftover)s kept from '
               'evacuation %(migration)s, not proven its own. Once checked, '
               'on %(host)s: %(commands)s')


def _left(driver, entry, instance):
    """The guest and the files of ``entry`` here; OSError if unreadable.

    Before spawn, what is in the directory is another's.
    """
    present = guest.state(driver, instance)
    files = ownership.contents(ownership.instance_path(entry.instance_uuid))
    return present, files if entry.spawned else {}


def end(driver, entry, instance, forget=False, moved=False):
    """Forget ``entry`` if nothing of it is left here, or record it kept.

    Never raises: on an error the entry stays as it is, keeping everything.

    :param forget: nothing of it needs a record (the rule's verdict)
    :param moved: nova's rebuild code returned, the server lives here:
        every entry of it here goes. Never read from the instance after a
        failure: nova may have named this host in it without saving it.
    """
    try:
        guest_left, files = (None, {}) if forget or moved else _left(
            driver, entry, instance)
        if not (guest_left or files):
            for done in (journal.entries(entry.host, entry.instance_uuid)
                         if moved else [entry]):
                journal.remove(done)
            LOG.info('Evacuation %s to %s: nothing of it needs a record here '
                     'any more: forgotten', entry.migration_uuid, entry.host,
                     instance_uuid=entry.instance_uuid)
            return
        entry.phase = journal.KEPT
        journal.write(entry)
    except Exception:
        LOG.exception('Could not record the end of evacuation %s to %s: its '
                      'journal entry is kept as it was', entry.migration_uuid,
                      entry.host, instance_uuid=entry.instance_uuid)
        return
    if guest_left or not entry.shared:
        LOG.warning('Evacuation %s to %s ended and keeps %s; the next '
                    'evacuation of the server to %s %s', entry.migration_uuid,
                    entry.host, 'its %s guest' % guest_left if guest_left else
                    'its files, not proven its own', entry.host,
                    'destroys it first' if guest_left else
                    'is refused until they are removed by hand',
                    instance_uuid=entry.instance_uuid)


def commands(host, instance, guest_left, files, shared=False, **more):
    """The runbook's commands; files on shared storage are never listed."""
    steps = runbook.cleanup_steps(
        host, instance.uuid, instance.name, guest=guest_left,
        instance_dir=(ownership.instance_path(instance.uuid)
                      if files and not shared else None), **more)
    return [step.command for step in steps]


def clear_or_refuse(manager, context, instance, migration_uuid):
    """Clear what earlier evacuations of ``instance`` left here, or refuse.

    Before the evacuation ``migration_uuid`` creates anything here. An
    earlier one's guest is destroyed, its disks only with proof, taken
    now; files without proof, or what cannot be read, refuse it.

    :raises EvacuationLeftoverKept: a leftover is still here, or unreadable
    """
    host = manager.host
    try:
        for entry in journal.entries(host, instance.uuid):
            if entry.migration_uuid != migration_uuid:
                _clear(manager, context, instance, entry)
    except OSError as error:
        if not journal.usable(host):
            # No journal: nothing could have been kept with a record.
            return
        raise EvacuationLeftoverKept(
            host=host, leftover='what earlier evacuations left (%s)' % error,
            migration='-', commands='nova-evac-cleanup audit')


def _clear(manager, context, instance, entry):
    guest_left, files = _left(manager.driver, entry, instance)
    owned, _why = ownership.proof(entry)
    if entry.spawned and (guest_left or (files and owned)):
        LOG.warning('Evacuation %s left a guest on %s: destroying it (%s) '
                    'before evacuating the server here again',
                    entry.migration_uuid, manager.host,
                    'and its disks, which it created' if owned else
                    'keeping its files', instance=instance)
        try:
            # The resources its claim had are gone with the claim.
            guest.end(manager, context, instance, entry,
                      resources_known=False)
        except Exception:
            LOG.exception('Could not destroy what evacuation %s left on %s',
                          entry.migration_uuid, manager.host,
                          instance=instance)
        guest_left, files = _left(manager.driver, entry, instance)
    if entry.shared:
        # The server's own disks: the evacuation uses them.
        files = {}
    if guest_left or files:
        raise EvacuationLeftoverKept(
            host=manager.host, migration=entry.migration_uuid,
            leftover=' and '.join(filter(None, [
                guest_left and 'a %s guest' % guest_left,
                files and ownership.instance_path(instance.uuid)])),
            commands='; '.join(commands(
                manager.host, instance, guest_left, files,
                shared_with=instance.host if entry.shared is None else None)))
    if entry.phase in (journal.KEPT, journal.ENDING, journal.RELEASING):
        LOG.info('What evacuation %s left on %s is gone: forgotten',
                 entry.migration_uuid, manager.host, instance=instance)
        journal.remove(entry)
