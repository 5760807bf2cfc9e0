# SPDX-License-Identifier: Apache-2.0

"""A failed evacuation's volumes: released here, connected at the source."""

from nova import exception
from nova import objects
from nova.volume import cinder
from oslo_log import log as logging

from nova_evac_cleanup import nova_support
from nova_evac_cleanup import runbook

LOG = logging.getLogger(__name__)


def release(manager, context, instance, entry, record):
    """Disconnect here the volumes it attached; the ids of those released.

    cinder disconnects an attachment only by replacing it with a reserved
    one, as nova's ``_terminate_volume_connections`` does; each call is
    journaled (``record``) first, so that the next try finishes a cut one.
    """
    bdms = finish_detach(manager, context, entry, record)
    bdms = [bdm for bdm in bdms
            if entry.made(bdm.volume_id, bdm.attachment_id)]
    for bdm in bdms:
        reserved = entry.reserved.get(bdm.volume_id)
        if reserved == '':  # a try asked cinder for one, never heard which
            reserved = next(iter(_unnamed(manager, context, bdm)), None)
        if not reserved:
            _complete_if_attaching(manager, context, bdm)
            entry.reserved[bdm.volume_id] = ''
            record()
            reserved = manager.volume_api.attachment_create(
                context, bdm.volume_id, instance.uuid)['id']
        if entry.reserved[bdm.volume_id] != reserved:
            entry.reserved[bdm.volume_id] = reserved
            record()
        if bdm.attachment_id != reserved:
            try:
                manager.volume_api.attachment_delete(context,
                                                     bdm.attachment_id)
            except exception.VolumeAttachmentNotFound:
                pass  # deleted by the try this one finishes
            bdm.attachment_id = reserved
            bdm.save()
    if bdms:
        LOG.warning('Evacuation %s to %s: its volumes are reserved for the '
                    'server; nova-evac-cleanup on %s connects them there '
                    'again as it runs; without it, run: %s',
                    entry.migration_uuid, entry.host, instance.host,
                    ' && '.join(runbook.refresh_volumes(
                        instance.host, instance.uuid,
                        [bdm.volume_id for bdm in bdms])), instance=instance)
    return [bdm.volume_id for bdm in bdms]


def _complete_if_attaching(manager, context, bdm):
    """Complete its attachment if cinder connected it and nova never did.

    Cut between the two (the real tier's death after
    ``attachment_update``), the volume is ``attaching``, a status in which
    cinder reserves no attachment; completed, it is replaced at once.
    """
    try:
        attaching = _status(manager, context, bdm) == 'attaching'
    except exception.VolumeAttachmentNotFound:
        return  # nothing to complete: the release deletes none
    if attaching:
        manager.volume_api.attachment_complete(context, bdm.attachment_id)


def finish_detach(manager, context, entry, record):
    """End nova's replacement of an attachment the evacuation cut.

    nova's evacuation makes the destination's attachment, deletes the
    source's, then names the new one in the mapping: cut in between (issue
    42, finding 2), the new one is named nowhere. It goes while the
    source's is there; once that is gone, it is named, as nova would have.

    :returns: the server's volume mappings
    """
    bdms = [bdm for bdm in objects.BlockDeviceMappingList.get_by_instance_uuid(
        context, entry.instance_uuid) if bdm.is_volume and bdm.attachment_id]
    for bdm in bdms:
        if bdm.attachment_id != entry.detached.get(bdm.volume_id):
            continue  # nova named the new one, or never began
        unnamed = _unnamed(manager, context, bdm)
        if len(unnamed) != 1:
            continue  # none was made; or more: not only its own, kept
        try:
            manager.volume_api.attachment_get(context, bdm.attachment_id)
        except exception.VolumeAttachmentNotFound:
            entry.reserved[bdm.volume_id] = bdm.attachment_id = unnamed[0]
            record()
            bdm.save()
        else:
            manager.volume_api.attachment_delete(context, unnamed[0])
        LOG.info('Evacuation %s to %s: its cut replacement of the '
                 'attachment of volume %s ended', entry.migration_uuid,
                 entry.host, bdm.volume_id,
                 instance_uuid=entry.instance_uuid)
    return bdms


def _unnamed(manager, context, bdm):
    """The reserved attachments of the volume for the server, not named."""
    found = manager.volume_api.attachment_get_all(
        context, instance_id=bdm.instance_uuid, volume_id=bdm.volume_id)
    return [attachment['id'] for attachment in found
            if attachment['id'] != bdm.attachment_id and
            attachment.get('status') == 'reserved']


def block_device_info(manager, context, instance, entry):
    """nova's block device info of the volumes its evacuation attached."""
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


#: Where an attachment is, beyond cinder's own statuses.
HERE, ELSEWHERE = 'here', 'elsewhere'


def unused(manager, context, instance):
    """Its volume mappings not connected for this host, as far as known.

    Reserved, not completed, or completed for another host (a destination
    without the fix leaves its own ``attached``).
    """
    result = []
    for bdm in objects.BlockDeviceMappingList.get_by_instance_uuid(
            context, instance.uuid):
        if not (bdm.is_volume and bdm.attachment_id):
            continue
        try:
            where = attached(manager, context, instance, bdm)
        except exception.VolumeAttachmentNotFound:
            # A replacement cut short: the rest of the server still goes.
            LOG.warning('Volume %s: attachment %s is gone from cinder; '
                        'once checked, run: %s', bdm.volume_id,
                        bdm.attachment_id, ' && '.join(runbook.refresh_volumes(
                            manager.host, instance.uuid, [bdm.volume_id])),
                        instance=instance)
            continue
        if where in ('reserved', 'attaching', 'attached', ELSEWHERE):
            result.append(bdm)
    return result


def attached(manager, context, instance, bdm):
    """cinder's status of its attachment; once attached, :data:`HERE` or not.

    nova's volume API drops the host (``host_name`` of cinder's volume
    show): cinder is asked itself; if it fails, ``attached``.
    """
    status = _status(manager, context, bdm)
    if status != 'attached':
        return status
    try:
        volume = nova_support.helper(cinder, 'cinderclient')(
            context).volumes.get(bdm.volume_id)
    except Exception as error:
        LOG.info('Volume %s: cannot read which host its attachment %s is '
                 'for: %s', bdm.volume_id, bdm.attachment_id, error,
                 instance=instance)
        return status
    host = next((found.get('host_name') for found in volume.attachments
                 if found.get('attachment_id') == bdm.attachment_id), None)
    return HERE if host == manager.host else ELSEWHERE if host else status


def _status(manager, context, bdm):
    """cinder's status of its attachment, as nova's volume API gives it."""
    attachment = manager.volume_api.attachment_get(context, bdm.attachment_id)
    # Once connected, cinder's status is in the connection info.
    return (attachment.get('connection_info') or attachment).get('status')


def connect(manager, context, instance, bdm):
    """Connect it here as ``finish_revert_resize`` does; the error if any.

    One completed for another host is first replaced by a reserved one:
    cinder moves an attachment only through a new one.
    """
    try:
        if attached(manager, context, instance, bdm) == ELSEWHERE:
            nova_support.helper(manager, '_terminate_volume_connections')(
                context, instance, [bdm])
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
