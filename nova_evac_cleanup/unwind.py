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

"""Release the volume connections a failed evacuation made on this host.

Before it spawns the guest, nova's evacuation binds the instance's ports to
the destination (``setup_instance_network_on_host``) and replaces each
volume attachment by one connected with the destination's connector
(``_prep_block_device``). When the evacuation fails nothing undoes either.

* The ports are never bound from here: while the source is dead, ML2's
  agent-based drivers would refuse ("Refusing to bind port ... to dead
  agent") and leave them ``binding_failed``. The source binds them to
  itself once its nova-compute runs (:mod:`nova_evac_cleanup.giveback`);
  the commands are logged for a source that does not run this manager
  (:func:`nova_evac_cleanup.ports.report_away`).
* The volume attachments of this host are replaced by reserved ones
  (nova's ``_terminate_volume_connections``, which ``revert_resize`` uses
  on the destination of a resize): this host keeps no connection to the
  volumes. They cannot be connected for the source from here (its
  connector is only known there): the source connects them itself
  (:mod:`nova_evac_cleanup.giveback`); the ``nova-manage
  volume_attachment`` commands that do it by hand are logged.
"""

from nova import objects
from oslo_log import log as logging

from nova_evac_cleanup import runbook

LOG = logging.getLogger(__name__)


def made_here(entry, bdms):
    """The volume mappings whose attachment the evacuation replaced.

    Those whose attachment is still the one ``entry.detached`` noted
    before nova's ``detach_block_devices`` deleted it are the source's.
    """
    return [bdm for bdm in bdms if bdm.is_volume and
            _made(entry, bdm.volume_id, bdm.attachment_id)]


def _made(entry, volume_id, attachment_id):
    return entry.detached.get(volume_id, attachment_id) != attachment_id


def block_device_info(manager, context, instance, entry):
    """The database's block device info, of what spawn here was given.

    Without the volumes the evacuation did not attach here, or did not
    spawn with: their connection info is the source's.
    """
    info = manager._get_instance_block_device_info(context, instance)
    return dict(info, block_device_mapping=[
        bdm for bdm in info['block_device_mapping'] if entry.spawning and
        _made(entry, bdm['volume_id'], bdm['attachment_id'])])


def unwind(manager, context, instance, source, entry):
    """Release this host's volume connections of ``instance``.

    Call it only once the guest here is destroyed, with the instance still
    naming the failed or interrupted evacuation. Running it again is
    harmless: it replaces the reserved attachments by new reserved ones.
    Only the attachments the evacuation made (:func:`made_here`) are
    released: the others are the source's.

    :param source: the host the instance is on (the evacuation's source)
    :param entry: the evacuation's journal entry
    :returns: ``(done, commands)``: what was released, and what is left to
        run by hand, on the source
    """
    done, commands = [], []
    bdms = made_here(entry, objects.BlockDeviceMappingList.
                     get_by_instance_uuid(context, instance.uuid))
    if bdms:
        manager._terminate_volume_connections(context, instance, bdms)
        for bdm in bdms:
            done.append('replaced the attachment of volume %s on %s by a '
                        'reserved one (%s)' % (
                            bdm.volume_id, manager.host, bdm.attachment_id))
        commands.extend(runbook.refresh_volumes(
            source, instance.uuid, [bdm.volume_id for bdm in bdms]))
    for item in done:
        LOG.info('Failed evacuation to %s: %s', manager.host, item,
                 instance=instance)
    if commands:
        LOG.warning('Failed evacuation to %s: its volumes are reserved for '
                    'the server; nova-evac-cleanup on %s connects them '
                    'there again as it runs; without it, run: %s',
                    manager.host, source, ' && '.join(commands),
                    instance=instance)
    return done, commands
