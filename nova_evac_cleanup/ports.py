# SPDX-License-Identifier: Apache-2.0

"""A failed evacuation's ports: where neutron has them, and binding them.

The source binds them back (:func:`bind`, for
:mod:`~nova_evac_cleanup.giveback`); the destination only logs the
commands (:func:`report_away`): a dead source's agent refuses a binding.
"""

from neutronclient.common import exceptions as neutron_exceptions
from nova import exception
from nova.network import model as network_model
from nova.network import neutron
from nova import objects
from nova.scheduler import utils as scheduler_utils
from oslo_log import log as logging

from nova_evac_cleanup import nova_support
from nova_evac_cleanup import runbook

LOG = logging.getLogger(__name__)

#: What neutron answers for a binding its mechanism drivers refused.
REFUSED = (network_model.VIF_TYPE_BINDING_FAILED,
           network_model.VIF_TYPE_UNBOUND)


class NoProvider(exception.NovaException):
    msg_fmt = ('Port %(port)s has a resource request and the server no '
               'allocation on %(host)s to map it to (%(error)s): left where '
               'it is until the allocation is healed (heal_allocations '
               'heals a port whose binding profile names no allocation); '
               'run: openstack port unset --binding-profile allocation '
               '%(port)s && %(command)s')


def home(port, host):
    """Whether neutron says ``port`` is bound to ``host`` and works there.

    As nova's ``_require_nw_info_update`` reads it.
    """
    return (port.get('binding:host_id') == host and
            port.get('binding:vif_type') not in REFUSED)


def away(client, instance):
    """The ports of ``instance`` not home on its host, as neutron has them."""
    return [port for port in client.list_ports(
        device_id=instance.uuid)['ports'] if not home(port, instance.host)]


def bind(manager, context, instance, client, ports):
    """Bind each port here, at the revision read; never raises.

    :returns: the error of each port not bound, by port id
    """
    errors = {}
    try:
        mappings = provider_mappings(manager, context, instance, manager.host)
    except Exception as error:
        mappings = error
    for port in ports:
        try:
            client.update_port(port['id'], {'port': binding(
                manager, context, instance, client, port, mappings)},
                revision_number=port['revision_number'])
        except neutron_exceptions.NeutronClientException as error:
            errors[port['id']] = error
            if error.status_code == 412:
                LOG.warning('Port %s changed since it was read; left to the '
                            'operation that changed it', port['id'],
                            instance=instance)
        except Exception as error:
            errors[port['id']] = error
    if len(errors) < len(ports):
        manager.network_api.get_instance_nw_info(context, instance)
    return errors


def binding(manager, context, instance, client, port, mappings):
    """What nova's ``_update_port_binding_for_instance`` sets, for here.

    As for an unshelve (no migration).
    """
    api = manager.network_api
    profile = dict(port.get('binding:profile') or {})
    profile.pop('migrating_to', None)
    if port.get('binding:vnic_type') in network_model.VNIC_TYPES_SRIOV:
        device = nova_support.helper(api, '_get_port_pci_dev')(instance, port)
        if device:
            profile.update(nova_support.helper(
                api, '_get_pci_device_profile')(device))
    if nova_support.helper(api, '_has_resource_request')(
            context, port, client):
        if isinstance(mappings, Exception) or not mappings:
            raise NoProvider(port=port['id'], host=manager.host,
                             error=mappings, command=runbook.heal_allocations(
                                 instance.uuid).command)
        profile['allocation'] = nova_support.helper(
            api, '_get_binding_profile_allocation')(
                context, port, client, mappings)
    return {'binding:host_id': manager.host, 'binding:profile': profile,
            'device_owner': 'compute:%s' % instance.availability_zone}


def provider_mappings(manager, context, instance, host):
    """nova's request group mapping of the server's ports on ``host``.

    From its allocation in its node's provider tree there; None without a
    port with a resource request; raises when nothing there fits.
    """
    groups, _params = manager.network_api.get_requested_resource_for_instance(
        context, instance.uuid)
    if not groups:
        return None
    node = objects.ComputeNode.get_by_host_and_nodename(
        context, host, instance.node)
    tree = {rp['uuid'] for rp in manager.reportclient.get_providers_in_tree(
        context, node.uuid)}
    allocations = manager.reportclient.get_allocs_for_consumer(
        context, instance.uuid)['allocations']
    spec = objects.RequestSpec(requested_resources=groups)
    scheduler_utils.fill_provider_mapping_based_on_allocation(
        context, manager.reportclient, spec,
        {rp: alloc for rp, alloc in allocations.items() if rp in tree})
    return spec.get_request_group_mapping()


def commands(host, port):
    """The commands that bind ``port`` to ``host`` by hand; reads nothing.

    For a port with a resource request, the binding profile's allocation
    names the providers of the server's allocation on ``host``, which
    :func:`report` tells where to read.
    """
    result = ['openstack port set --host %s %s' % (host, port['id'])]
    if port.get('resource_request'):
        result.insert(0, 'openstack port set --binding-profile '
                      '\'{"allocation": "PROVIDER_ON_%s"}\' %s' % (
                          host, port['id']))
    return result


def report(instance, ports, why):
    """Log, once per port, the commands that bind it to its server's host."""
    for port in ports:
        LOG.warning('Port %s of the server is bound to %s (%s, %s): once '
                    'nova-compute and the network agent run on %s, run: '
                    '%s%s', port['id'], port.get('binding:host_id'),
                    port.get('binding:vif_type'), why, instance.host,
                    ' && '.join(commands(instance.host, port)),
                    '; PROVIDER_ON_%s: the providers of the server\'s '
                    'allocation there (openstack resource provider '
                    'allocation show %s)' % (instance.host, instance.uuid)
                    if port.get('resource_request') else '',
                    instance=instance)


def report_away(manager, context, instance, why):
    """The destination's report: the commands per port not home."""
    try:
        report(instance, away(
            neutron.get_client(context, admin=True), instance), why)
    except Exception:
        LOG.exception('Could not read the ports of the failed evacuation to '
                      '%s', manager.host, instance=instance)
