# SPDX-License-Identifier: Apache-2.0

"""nova's records of an evacuation, and placement's, read afresh each time.

Never kept: the ending proves its hold again before each step. Writes are
:mod:`~nova_evac_cleanup.updates`'.
"""

import collections

from nova import exception
from nova import objects

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


def allocations(reportclient, context, instance_uuid, host):
    """The instance's resources by provider: in ``host``'s trees, others.

    A port's or a device's provider below a node here is here.

    :returns: two dicts, provider uuid to resources
    """
    found = reportclient.get_allocs_for_consumer(
        context, instance_uuid).get('allocations') or {}
    mine = set(nodes(context, host)) if found else set()
    if set(found) - mine:
        mine.update(rp['uuid'] for node in list(mine) for rp in
                    reportclient.get_providers_in_tree(context, node))
    here, others = {}, {}
    for rp, allocation in found.items():
        (here if rp in mine else others)[rp] = allocation.get('resources', {})
    return here, others
