# SPDX-License-Identifier: Apache-2.0

"""A failed evacuation's volumes: released here, connected at the source."""

from nova import exception
from nova import objects
from oslo_log import log as logging

from nova_evac_cleanup import nova_support
from nova_evac_cleanup import runbook

LOG = logging.getLogger(__name__)


def release(manager, context, instance, entry):
    """Disconnect here the volumes it attached, as ``revert_resize`` does.

    :returns: the ids of the volumes released
    """
    bdms = [bdm for bdm in objects.BlockDeviceMappingList.get_by_instance_uuid(
        context, entry.instance_uuid) if bdm.is_volume and entry.made(
            bdm.volume_id, bdm.attachment_id)]
    if not bdms:
        return None
    commands = ' && '.join(runbook.refresh_volumes(
        instance.host, instance.uuid, [bdm.volume_id for bdm in bdms]))
    try:
        nova_support.helper(manager, '_terminate_volume_connections')(
            context, instance, bdms)
    except nova_support.HelperChanged as error:
        LOG.error('Evacuation %s to %s: cannot release the connections of '
                  'its volumes here (%s); once checked, run: %s',
                  entry.migration_uuid, entry.host, error, commands,
                  instance=instance)
        return None
    LOG.warning('Evacuation %s to %s: its volumes are reserved for the '
                'server; nova-evac-cleanup on %s connects them there again '
                'as it runs; without it, run: %s', entry.migration_uuid,
                entry.host, instance.host, commands, instance=instance)
    return [bdm.volume_id for bdm in bdms]


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


def unused(manager, context, instance):
    """Its volume mappings reserved, or updated and not completed."""
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
                        bdm.attachment_id, ' && '.join(runbook.refresh_volumes(
                            manager.host, instance.uuid, [bdm.volume_id])),
                        instance=instance)
            continue
        # Once connected, cinder's status is in the connection info.
        if (attachment.get('connection_info') or attachment).get(
                'status') in ('reserved', 'attaching'):
            result.append(bdm)
    return result


def connect(manager, context, instance, bdm):
    """Connect it here as ``finish_revert_resize`` does; the error if any."""
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
