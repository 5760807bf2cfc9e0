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

"""The report of ``nova-evac-cleanup audit``, in the runbook's order.

1. the leftovers of failed or interrupted evacuations to this host;
2. for each, whether the instance exists and where it is hosted;
3. the allocations against this host's nodes that are orphaned (no
   instance here, no migration in progress here, no finding), and the
   instances of the findings that have no allocation left;
4. what ``--delete`` does (or did) about them: exactly what the start-up
   sweep's ``clean`` does (:func:`nova_evac_cleanup.sweep.settle`).

Without ``delete`` nothing is written anywhere.
"""

from nova import exception
from nova import objects

from nova_evac_cleanup import classification
from nova_evac_cleanup import findings
from nova_evac_cleanup import sweep


def _service_up(context, host):
    from nova import servicegroup

    try:
        service = objects.Service.get_by_compute_host(context, host)
    except exception.ComputeHostNotFound:
        return False
    return (not service.forced_down and
            servicegroup.API().service_is_up(service))


def report(manager, context, delete=False):
    """Find, and with ``delete`` settle, what evacuations left here.

    With ``delete`` the caller holds the host's lock
    (:mod:`nova_evac_cleanup.host_lock`).

    :returns: a dict, the report
    """
    found, examined = findings.find(manager, context, history=True)
    nodes = findings.nodes(manager, context)
    if delete:
        for finding in found:
            sweep.settle(manager, context, finding)
    # An entry nothing is left of, or of an instance that lives here, is
    # only examined (and with delete forgotten).
    found = [f for f in found if f.ended or f.left_here() or
             f.refuses_evacuations() or f.kind == classification.INTERRUPTED]
    result = {
        'host': manager.host,
        'delete': delete,
        'compute_service_up': _service_up(context, manager.host),
        'examined': examined,
        'evacuations': [f.as_dict() for f in found],
        'orphaned_allocations': _orphaned(manager, context, nodes, found),
        'missing_allocations': [],
    }
    for finding in found:
        instance = finding.instance
        if instance is None or instance.deleted:
            continue
        # Without delete: what ending the evacuation would leave.
        left = set(findings.allocations(manager, context,
                                        finding.instance_uuid))
        if not delete and finding.kind == classification.INTERRUPTED:
            left -= set(nodes)
        if not left:
            result['missing_allocations'].append(finding.instance_uuid)
    return result


def _orphaned(manager, context, nodes, found):
    """Allocations against this host nothing here accounts for."""
    handled = {f.instance_uuid for f in found}
    result = []
    for node_uuid in nodes:
        node = objects.ComputeNode.get_by_uuid(context, node_uuid)
        instances = {i.uuid for i in objects.InstanceList.get_by_host_and_node(
            context, node.host, node.hypervisor_hostname, expected_attrs=[])}
        migrations = objects.MigrationList.get_in_progress_by_host_and_node(
            context, node.host, node.hypervisor_hostname)
        migrating = {m.uuid for m in migrations} | {
            m.instance_uuid for m in migrations
            if m.instance_uuid not in handled}
        get = manager.reportclient.get_allocations_for_resource_provider
        allocations = get(context, node_uuid).allocations
        for consumer in allocations:
            if consumer in instances or consumer in migrating:
                continue
            result.append({
                'consumer': consumer,
                'provider': node_uuid,
                'resources': allocations[consumer].get('resources', {}),
                'evacuation_finding': consumer in handled,
            })
    return result
