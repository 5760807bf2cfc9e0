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

"""The source's volume attachments after a failed evacuation.

The evacuation left them reserved (or a give-back cut short left them
updated); the source connects them again (:mod:`~nova_evac_cleanup.giveback`).
"""

from nova import exception
from nova import objects
from oslo_log import log as logging

from nova_evac_cleanup import nova_support
from nova_evac_cleanup import runbook

LOG = logging.getLogger(__name__)


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
