# SPDX-License-Identifier: Apache-2.0

"""A failed evacuation's ports: bound back at the source, else reported."""

from nova import exception
from nova.network import model as network_model
from nova.network import neutron
from nova import objects
from nova.scheduler import utils as scheduler_utils
from oslo_log import log as logging

from nova_evac_cleanup import nova_support
from nova_evac_cleanup import runbook

LOG = logging.getLogger(__name__)


class NoProvider(exception.NovaException):
    msg_fmt = ('Port %(port)s has a resource request and the server no '
               'allocation on %(host)s to map it to (%(error)s): left until '
               'that allocation is healed (heal_allocations skips a port '
               'whose binding profile names one); run: openstack port unset '
               '--binding-profile allocation %(port)s && %(command)s')


def away(client, instance):
    """Its ports bound elsewhere or refused (``_require_nw_info_update``)."""
    return [port for port in client.list_ports(device_id=instance.uuid)[
        'ports'] if port.get('binding:host_id') != instance.host or
        port.get('binding:vif_type') in (
            network_model.VIF_TYPE_BINDING_FAILED,
            network_model.VIF_TYPE_UNBOUND)]


def bind(manager, context, instance, client, ports):
    """Bind each port here at the revision read; errors by port id."""
    errors = {}
    try:
        mappings = provider_mappings(manager, context, instance)
    except Exception as error:
        mappings = error
    for port in ports:
        try:
            client.update_port(port['id'], {'port': binding(
                manager, context, instance, client, port, mappings)},
                revision_number=port['revision_number'])
        except Exception as error:
            errors[port['id']] = error
            if getattr(error, 'status_code', None) == 412:
                LOG.warning('Port %s changed since it was read; left to the '
                            'operation that changed it', port['id'],
                            instance=instance)
    if len(errors) < len(ports):
        manager.network_api.get_instance_nw_info(context, instance)
    return errors


def binding(manager, context, instance, client, port, mappings):
    """What nova's unshelve (``_update_port_binding_for_instance``) sets."""
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


def provider_mappings(manager, context, instance):
    """Its ports' request groups mapped to its allocation's providers here."""
    groups, _params = manager.network_api.get_requested_resource_for_instance(
        context, instance.uuid)
    if not groups:
        return None
    tree = {rp['uuid'] for rp in manager.reportclient.get_providers_in_tree(
        context, objects.ComputeNode.get_by_host_and_nodename(
            context, manager.host, instance.node).uuid)}
    allocations = manager.reportclient.get_allocs_for_consumer(
        context, instance.uuid)['allocations']
    spec = objects.RequestSpec(requested_resources=groups)
    scheduler_utils.fill_provider_mapping_based_on_allocation(
        context, manager.reportclient, spec,
        {rp: alloc for rp, alloc in allocations.items() if rp in tree})
    return spec.get_request_group_mapping()


def commands(host, port):
    """The commands that bind ``port`` to ``host`` by hand; reads nothing."""
    profile = ['openstack port set --binding-profile \'{"allocation": '
               '"PROVIDER_ON_%s"}\' %s' % (host, port['id'])]
    return (profile if port.get('resource_request') else []) + [
        'openstack port set --host %s %s' % (host, port['id'])]


def report_away(manager, context, instance, why, ports=None):
    """Log how to bind each port home (a dead host's agent refuses it)."""
    try:
        for port in away(neutron.get_client(context, admin=True),
                         instance) if ports is None else ports:
            LOG.warning('Port %s of the server is bound to %s (%s, %s): '
                        'once nova-compute and the network agent run on %s, '
                        'run: %s%s', port['id'], port.get('binding:host_id'),
                        port.get('binding:vif_type'), why, instance.host,
                        ' && '.join(commands(instance.host, port)),
                        '; PROVIDER_ON_%s: the server\'s providers there, in '
                        'openstack resource provider allocation show %s' % (
                            instance.host, instance.uuid)
                        if port.get('resource_request') else '',
                        instance=instance)
    except Exception:
        LOG.exception('Could not read the ports of the failed evacuation to '
                      '%s', manager.host, instance=instance)
