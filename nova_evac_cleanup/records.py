# SPDX-License-Identifier: Apache-2.0

"""nova's records of an evacuation: read, and written only as expected.

nova's evacuate API checks no task state, and a source back first
completes the migration: the migration's status and the server's task
state are written with a compare-and-swap, and alone.
"""

import collections

from nova.compute import resource_tracker
from nova.compute import utils as compute_utils
from nova.db.main import api as db_api
from nova.db.main import models
from nova import exception
from nova import objects
from nova.objects import base as objects_base
from nova import servicegroup
from nova import utils
from oslo_log import log as logging

LOG = logging.getLogger(__name__)


class EvacuationFailedThenInterrupted(exception.NovaException):
    msg_fmt = ('%(error)s (the evacuation to %(host)s failed so, and '
               'nova-compute on %(host)s stopped before it had ended it; it '
               'was ended when it started again)')


class EvacuationInterrupted(exception.NovaException):
    msg_fmt = ('The evacuation to %(host)s was interrupted: nova-compute on '
               '%(host)s stopped before the guest was spawned. The guest '
               'there was cleaned up when it started again.')


#: ``faulted``: the instance has a fault since the migration began.
State = collections.namedtuple('State', 'instance migration moves faulted',
                               defaults=(False,))


def _moves(context, instance_uuid, **limit):
    return objects.MigrationList.get_by_filters(
        context, {'instance_uuid': instance_uuid},
        sort_keys=['created_at', 'id'], sort_dirs=['desc', 'desc'], **limit)


def read(context, instance_uuid, migration_uuid=None):
    """The instance (None once deleted), the migration, every move."""
    try:
        instance = objects.Instance.get_by_uuid(
            context, instance_uuid,
            expected_attrs=['info_cache', 'flavor', 'migration_context'])
    except exception.InstanceNotFound:
        instance = None  # nova's running_deleted_instance_action reaps it
    moves = list(_moves(context, instance_uuid))
    migration = next((m for m in moves if m.uuid == migration_uuid), None)
    fault = objects.InstanceFault.get_latest_for_instance(context,
                                                          instance_uuid)
    return State(instance, migration, moves, bool(
        fault is not None and migration is not None and
        fault.created_at >= migration.created_at))


def newest_move(context, instance_uuid):
    return next(iter(_moves(context, instance_uuid, limit=1)), None)


def nodes(context, host):
    try:
        return [node.uuid for node in objects.ComputeNodeList.get_all_by_host(
            context, host)]
    except exception.ComputeHostNotFound:
        return []


def service_up(context, host):
    try:
        service = objects.Service.get_by_compute_host(context, host)
    except exception.ComputeHostNotFound:
        return False
    return (not service.forced_down and
            servicegroup.API().service_is_up(service))


def set_status(context, migration, expected, status):
    """The migration from one of ``expected`` to ``status``; whether it was."""
    if objects_base.NovaObject.indirection_api is None:
        with db_api.get_context_manager(context).writer.using(context):
            return bool(context.session.query(models.Migration).filter_by(
                id=migration.id, deleted=0).filter(
                models.Migration.status.in_(expected)).update(
                {'status': status}, synchronize_session=False))
    # nova-conductor cannot update a migration conditionally.
    current = objects.Migration.get_by_id(context, migration.id)
    if current.status not in expected:
        return False
    current.status = status
    current.save()
    return True


def set_task_state(context, instance, expected, task_state, **changes):
    """The server's task state from ``expected``, with ``changes``."""
    changes['task_state'] = task_state
    # A copy of only the changes: nova would save again the migration
    # context of the instance read before, a newer operation's by now.
    server = objects.Instance(context=context, uuid=instance.uuid)
    server.obj_reset_changes()
    server.update(changes)
    server.save(expected_task_state=[expected])
    instance.update(changes)


def drop_context(instance, migration):
    if instance.migration_context is not None and (
            instance.migration_context.migration_id == migration.id):
        instance.drop_migration_context()
        return True
    return False


# Under the resource tracker's lock, as in nova: its periodic update never
# sees the context gone and the migration in progress.
@utils.synchronized(resource_tracker.COMPUTE_RESOURCE_SEMAPHORE, fair=True)
def finish(context, instance, migration):
    """What nova's ``finish_evacuation`` left of one that moved it here."""
    drop_context(instance, migration)
    if migration.status == 'pre-migrating' and set_status(
            context, migration, ('pre-migrating',), 'done'):
        LOG.info('Evacuation %s to %s: migration set to done',
                 migration.uuid, instance.host, instance=instance)


def add_fault(context, instance, error):
    compute_utils.add_instance_fault_from_exc(
        context, instance, error, (type(error), error, error.__traceback__))
