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

"""Finish an evacuation that nova recorded on this host but did not finish.

nova's ``ResourceTracker.finish_evacuation`` saves the instance with this
host, then drops its migration context and marks the migration ``done``.
Should the last two fail, or the process die between the save and them,
the instance lives here (its guest runs here, this host's allocation is
its own) but the migration stays ``pre-migrating``: it counts as in
progress (nova refuses to delete either host's compute service), and the
conductor may take it for the next move's. :func:`finish_recorded` does
what was left, once the database says the instance is on this host; the
failure handler and the start-up sweep both use it.
"""

from nova.compute import resource_tracker
from nova import objects
from nova import utils
from oslo_log import log as logging

from nova_evac_cleanup import failure

LOG = logging.getLogger(__name__)


@utils.synchronized(resource_tracker.COMPUTE_RESOURCE_SEMAPHORE, fair=True)
def finish_recorded(context, instance_uuid, migration_id):
    """Drop the migration context naming the migration; the migration done.

    Only while the migration is ``pre-migrating`` and the instance is
    hosted where the caller runs (the caller checked it). Under the
    resource tracker's lock, as nova's ``finish_evacuation``: its periodic
    update never sees the context gone and the migration in progress.

    :returns: what was done, a list of sentences
    """
    done = []
    migration = objects.Migration.get_by_id(context, migration_id)
    if migration.status != 'pre-migrating':
        return done
    instance = objects.Instance.get_by_uuid(
        context, instance_uuid, expected_attrs=['migration_context'])
    if instance.migration_context is not None and (
            instance.migration_context.migration_id == migration_id):
        instance.drop_migration_context()
        done.append('dropped the migration context')
    migration.status = 'done'
    migration.save()
    done.append('set migration %s from pre-migrating to done' %
                migration.uuid)
    return done


def end_unrecorded(manager, instance, evacuation, error):
    """End an evacuation whose ``finish_evacuation`` failed.

    If it had already recorded the instance here, the instance lives
    here: what ``finish_evacuation`` had left to do is done (the
    migration context dropped, the migration ``done``). Otherwise it is
    ended as nova ends one that failed earlier: the instance read
    again (what ``finish_evacuation`` changed in memory must not be
    saved by nova's handler, which puts it into ERROR on its source),
    the migration ``failed``, the guest destroyed and this host's
    allocation removed. Never raises.
    """
    context = evacuation.context
    recorded = failure.recorded_here(manager, context, instance)
    try:
        if recorded:
            LOG.warning('Evacuation failed after the instance was '
                        'recorded on %s (%s): it lives here',
                        manager.host, error, instance=instance)
            finish_recorded(context, instance.uuid, evacuation.migration.id)
            return
        if recorded is False:
            instance.refresh()
    except Exception:
        LOG.exception('Could not end the evacuation to %s after its '
                      'finish_evacuation failed', manager.host,
                      instance=instance)
        return
    if recorded is False and failure.fail_migration(
            manager, context, instance, evacuation):
        failure.destroy(manager, context, instance, evacuation)
        failure.remove_allocation(manager, context, instance)
