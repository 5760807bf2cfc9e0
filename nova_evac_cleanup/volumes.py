# SPDX-License-Identifier: Apache-2.0

"""The volumes of a failed evacuation: let go here, connected at the source.

Before it spawns, nova's evacuation replaces each volume's attachment with
one for the destination; nothing replaces them back when it fails. The
destination releases its connections of the volumes the evacuation
attached (:func:`release`): their attachments become reserved ones, as
nova's ``revert_resize`` leaves them on a resize's destination. The source
connects them again (:func:`unused`, :func:`connect`, for
:mod:`~nova_evac_cleanup.giveback`).
"""

from nova import exception
from nova import objects
from oslo_log import log as logging

from nova_evac_cleanup import nova_support
from nova_evac_cleanup import runbook

LOG = logging.getLogger(__name__)


def made_here(context, entry):
    """The volume mappings whose attachment ``entry``'s evacuation made.

    Those whose attachment is still the one the entry noted before nova's
    ``detach_block_devices`` deleted it are the source's.
    """
    return [bdm for bdm in objects.BlockDeviceMappingList.
            get_by_instance_uuid(context, entry.instance_uuid)
            if bdm.is_volume and entry.made(bdm.volume_id,
                                            bdm.attachment_id)]


def release(manager, context, instance, entry):
    """This host's connections of the volumes it attached, released.

    :returns: what was done, a sentence, or None
    """
    bdms = made_here(context, entry)
    if not bdms:
        return None
    commands = ' && '.join(runbook.refresh_volumes(
        instance.host, instance.uuid, [bdm.volume_id for bdm in bdms]))
    try:
        terminate = nova_support.helper(manager,
                                        '_terminate_volume_connections')
    except nova_support.HelperChanged as error:
        LOG.error('Evacuation %s to %s: cannot release the connections of '
                  'its volumes here (%s); once checked, run: %s',
                  entry.migration_uuid, entry.host, error, commands,
                  instance=instance)
        return None
    terminate(context, instance, bdms)
    LOG.warning('Evacuation %s to %s: its volumes are reserved for the '
                'server; nova-evac-cleanup on %s connects them there again '
                'as it runs; without it, run: %s', entry.migration_uuid,
                entry.host, instance.host, commands, instance=instance)
    return 'released the connections of volumes %s here' % ', '.join(
        bdm.volume_id for bdm in bdms)


def block_device_info(manager, context, instance, entry):
    """The database's block device info, of the volumes spawn was given.

    Those the evacuation did not attach here are left out: their
    connection info is the source's.
    """
    try:
        info = nova_support.helper(
            manager, '_get_instance_block_device_info')(context, instance)
    except nova_support.HelperChanged as error:
        LOG.error('Destroying the guest without its volumes: %s', error,
                  instance=instance)
        return None
    return dict(info, block_device_mapping=[
        bdm for bdm in info['block_device_mapping']
        if entry.made(bdm['volume_id'], bdm['attachment_id'])])


def by_hand(manager, instance, bdm):
    """The commands that connect ``bdm`` by hand, in one line."""
    return ' && '.join(runbook.refresh_volumes(
        manager.host, instance.uuid, [bdm.volume_id]))


def unused(manager, context, instance):
    """The server's volume mappings whose attachment no guest uses.

    Reserved, or updated and not completed (a give-back cut short); once
    connected, cinder's status is in the connection info.
    """
    result = []
    for bdm in objects.BlockDeviceMappingList.get_by_instance_uuid(
            context, instance.uuid):
        if not (bdm.is_volume and bdm.attachment_id):
            continue
        try:
            attachment = manager.volume_api.attachment_get(
                context, bdm.attachment_id)
        except exception.VolumeAttachmentNotFound:
            # A replacement cut short: the rest of the server still goes.
            LOG.warning('Volume %s: attachment %s is gone from cinder; '
                        'once checked, run: %s', bdm.volume_id,
                        bdm.attachment_id, by_hand(manager, instance, bdm),
                        instance=instance)
            continue
        info = attachment.get('connection_info') or attachment
        if info.get('status') in ('reserved', 'attaching'):
            result.append(bdm)
    return result


def connect(manager, context, instance, bdm):
    """Connect one volume here as nova's ``finish_revert_resize`` does.

    :returns: None, or the error: never raises
    """
    try:
        nova_support.helper(manager, '_update_volume_attachments')(
            context, instance, [bdm])
        nova_support.helper(manager, '_get_instance_block_device_info')(
            context, instance, refresh_conn_info=True, bdms=[bdm])
        nova_support.helper(manager, '_complete_volume_attachments')(
            context, [bdm])
    except exception.VolumeAttachmentNotFound:
        LOG.warning('Volume %s: attachment %s was replaced since it was '
                    'read; left to the operation that replaced it',
                    bdm.volume_id, bdm.attachment_id, instance=instance)
    except Exception as error:
        LOG.info('Could not connect volume %s on %s: %s', bdm.volume_id,
                 manager.host, error, instance=instance)
        return error
    return None
