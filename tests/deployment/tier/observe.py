# SPDX-License-Identifier: Apache-2.0

"""What each service says of a server: the rows of the half-moved report.

Each function asks one service, as an operator would, and returns short
text for the report: neutron's port (``binding:host_id``,
``binding:vif_type``, ``status``), OVN's Port_Binding (its chassis and
``requested-chassis``), cinder's volume (status, attachments with the
host and the connector's host, from cinder's own database: its API does
not show the connector), Ceph's watchers of each RBD image (a second
writer is data corruption), libvirt's domains and the instance
directories on each host, and placement's allocations.
"""

import json
import os


def port(d, port_id):
    p = d.neutron.show_port(port_id)
    binding = d.ovn.port_binding(port_id) or {}
    return {
        'host': p['binding:host_id'] or None,
        'vif_type': p['binding:vif_type'],
        'status': p['status'],
        'chassis': binding.get('chassis'),
        'requested': binding.get('requested-chassis'),
    }


def port_text(view):
    return ('neutron: %(host)s, %(vif_type)s, %(status)s; OVN: chassis '
            '%(chassis)s, requested-chassis %(requested)s' % view)


def attachments(d, volume_id):
    """cinder's attachments of a volume: [{status, host, connector}]."""
    rows = d._sql(
        "SELECT attach_status, attached_host, connector FROM `%s`."
        "volume_attachment WHERE volume_id = '%s' AND deleted = 0 "
        "ORDER BY created_at" % (d.db['cinder'], volume_id))
    found = []
    for status, host, connector in rows:
        connector = json.loads(connector) if connector else {}
        found.append({'status': status, 'host': host,
                      'connector': connector.get('host')})
    return found


def volume(d, volume_id):
    vol = d.cinder.volume(volume_id)
    pool_image = 'volume-%s' % volume_id
    return {
        'status': vol['status'],
        'attachments': attachments(d, volume_id),
        'watchers': d.ceph.watchers('volumes', pool_image),
    }


def watchers_text(watchers, dead=()):
    """How many clients watch an image; those of a crashed host apart.

    A client that dies keeps its watch until the OSD times it out
    (``osd_client_watch_timeout``, 30 s): it writes no more.
    """
    stale = [w for w in watchers if w in dead]
    text = '%d' % (len(watchers) - len(stale))
    if stale:
        text += ' (and %d of a crashed host, timing out)' % len(stale)
    return text


def live_watchers(watchers, dead=()):
    return [w for w in watchers if w not in dead]


def volume_text(view, dead=()):
    atts = '; '.join(
        '%(status)s on %(host)s (connector %(connector)s)' % a
        for a in view['attachments']) or 'none'
    return '%s; attachments: %s; RBD watchers: %s' % (
        view['status'], atts, watchers_text(view['watchers'], dead))


def rbd_disk(d, server_id):
    """Watchers of the server's disk in the ``vms`` pool, or None."""
    name = '%s_disk' % server_id
    if name not in {i['image'] for i in d.ceph.images('vms')}:
        return None
    return d.ceph.watchers('vms', name)


def guests(d, server_id):
    """{host: 'running'/'shut off'/...} of the server's domains."""
    found = {}
    for name, host in d.hosts.items():
        if not host.running:
            found[name] = 'host down'
            continue
        guest = host.domain_uuids().get(server_id)
        if guest:
            found[name] = guest[1]
    return found


def files(d, server_id):
    """{host: [file, ...]} of the instance directories that exist."""
    found = {}
    for name in d.host_names:
        path = os.path.join(d.instances_path(name), server_id)
        if os.path.isdir(path):
            found[name] = sorted(os.listdir(path))
    return found


def allocations(d, server_id):
    return sorted(d.placement.allocations(server_id))
