# SPDX-License-Identifier: Apache-2.0

"""What nova's neutron and cinder fixtures lack for a server given back.

nova's ``CinderFixture`` answers every attachment with connection info,
even a reserved one, tracks no attachment status and gives every host the
same connection info; its ``NeutronFixture`` has no revision numbers, no
``If-Match`` and binds every port whatever the host's agent. Real services
do, and the give-back of a failed evacuation (issue 33) depends on it:

* cinder: an attachment is ``reserved`` (no connector, no connection
  info), ``attaching`` once updated with a connector, ``attached`` once
  completed; an update is refused, as cinder's volume API refuses it,
  only when the volume has another attachment and one is connected; a
  new attachment is refused while the volume's attach is half done
  (:func:`_reserve`);
  ``attachment_get_all`` answers a list, with each status, as cinder does;
  ``attachment_get`` answers what nova's cinder API would (connection
  info only once connected, its status inside it), and the volume show
  each attachment's host (``host_name``), the host of the connector it
  was completed with. With ``STYLE`` ``rbd`` or ``iscsi`` on the
  fixture the connection info is
  shaped like Ceph's (the same on every host) or like a SAN's, whose LUN
  a host sees depends on the host (:func:`lun`);
* neutron: each port has a ``revision_number``, raised by every update; an
  update with ``revision_number`` (neutronclient's ``If-Match``) that is
  not the port's is refused with 412; a port bound to a host in the
  fixture's ``agents_down`` (a set, empty at first) gets
  ``binding_failed``, as ML2's agent-based drivers and OVN answer for a
  host whose agent or chassis is not alive; bound again once it is
  alive, it gets its own vif type back.

:func:`install` patches both fixture classes for one test.
"""

import copy
import functools
import types

import fixtures
from neutronclient.common import exceptions as neutron_exceptions
from nova import exception
from nova.tests import fixtures as nova_fixtures

#: The connection info styles of :func:`connection_info`.
RBD = 'rbd'
ISCSI = 'iscsi'


def lun(host):
    """The LUN a SAN maps a volume to for ``host`` (one host group each)."""
    return 1 + sum(host.encode()) % 200


def connection_info(style, volume_id, host):
    """What cinder's volume driver answers for ``host``'s connector."""
    if style == RBD:
        return {'driver_volume_type': 'rbd', 'data': {
            'name': 'volumes/volume-%s' % volume_id,
            'hosts': ['192.0.2.1'], 'ports': ['6789'],
            'auth_enabled': True, 'auth_username': 'cinder'}}
    return {'driver_volume_type': 'iscsi', 'data': {
        'target_iqn': 'iqn.2010-10.org.openstack:volume-%s' % volume_id,
        'target_portal': '192.0.2.2:3260', 'target_lun': lun(host),
        'target_discovered': False}}


def _cinderclient(test, context, microversion=None, skip_version_check=False,
                  check_only=False):
    """cinder's volume show, whose ``host_name`` nova's volume API drops."""
    def show(volume_id):
        return types.SimpleNamespace(attachments=[{
            'attachment_id': attachment_id, 'volume_id': volume_id,
            'server_id': attachment.get('instance_uuid'),
            'host_name': attachment.get('host_name')}
            for attachment_id, attachment in
            test.cinder.volume_to_attachment[volume_id].items()])
    return types.SimpleNamespace(volumes=types.SimpleNamespace(get=show))


def _reserve(fixture, volume_id, instance_uuid):
    """cinder's ``_attachment_reserve``: refused while an attach is half done.

    The volume's status follows its attachments (``in-use`` if one is
    attached, else ``attaching``, ``reserved``, ``available``); a volume
    that is not multiattach is reserved only ``available``, or ``in-use``
    or ``reserved`` for a server it has an attachment of (nova's moves).
    """
    if fixture._is_multiattach(volume_id):
        return
    attachments = fixture.volume_to_attachment[volume_id].values()
    statuses = {attachment.get('status', 'attached')
                for attachment in attachments}
    status = next((volume for attach, volume in (
        ('attached', 'in-use'), ('attaching', 'attaching'),
        ('reserved', 'reserved')) if attach in statuses), 'available')
    if status == 'available' or status in ('in-use', 'reserved') and any(
            attachment.get('instance_uuid') == instance_uuid
            for attachment in attachments):
        return
    # nova's volume API translates cinder's 400.
    raise exception.InvalidInput(
        reason='Invalid volume: Volume %s status must be available or '
        'downloading to reserve, but the current status is %s.' % (
            volume_id, status))


def _cinder(test):
    fixture_class = nova_fixtures.CinderFixture
    create = fixture_class.fake_attachment_create
    update = fixture_class.fake_attachment_update
    complete = fixture_class.fake_attachment_complete

    def attachment_create(fixture, context, volume_id, instance_uuid,
                          connector=None, mountpoint=None):
        _reserve(fixture, volume_id, instance_uuid)
        result = create(fixture, context, volume_id, instance_uuid,
                        connector=connector, mountpoint=mountpoint)
        attachment = fixture.volume_to_attachment[volume_id][result['id']]
        attachment['status'] = 'attaching' if connector else 'reserved'
        return result

    def attachment_update(fixture, context, attachment_id, connector,
                          mountpoint=None):
        volume_id, attachment, attachments = fixture._find_attachment(
            attachment_id)
        if len(attachments) == 1:
            # cinder refuses a second connection only beside another
            # attachment; the only one is updated again (nova's fixture
            # refuses it).
            attachment['connector'] = None
        result = update(fixture, context, attachment_id, connector,
                        mountpoint=mountpoint)
        style = getattr(fixture, 'STYLE', None)
        if style:
            result['connection_info'] = connection_info(
                style, volume_id, connector['host'])
        attachment['status'] = 'attaching'
        attachment['connection_info'] = copy.deepcopy(
            result['connection_info'])
        return result

    def attachment_complete(fixture, context, attachment_id):
        complete(fixture, context, attachment_id)
        attachment = fixture._find_attachment(attachment_id)[1]
        # cinder's attached_host: the host of the connector completed with.
        attachment.update(status='attached', host_name=(
            attachment.get('connector') or {}).get('host'))

    def attachment_get_all(fixture, context, instance_id=None,
                           volume_id=None):
        # nova's cinder API: cinder's summaries, each with its status.
        return [{'id': attachment_id, 'status': attachment.get(
                    'status', 'attached'),
                 'instance': attachment.get('instance_uuid'),
                 'volume_id': volume,
                 'connection_info': {}}
                for volume, attachments in
                fixture.volume_to_attachment.items()
                for attachment_id, attachment in attachments.items()
                if volume_id in (None, volume) and
                instance_id in (None, attachment.get('instance_uuid'))]

    def attachment_get(fixture, context, attachment_id):
        volume_id, attachment, _ = fixture._find_attachment(attachment_id)
        status = attachment.get('status', 'attached')
        if attachment.get('connector') is None:
            # nova's _translate_attachment_ref: no connection info, the
            # status left where cinder put it.
            return {'id': attachment_id, 'status': status,
                    'connection_info': {}}
        info = copy.deepcopy(attachment.get('connection_info') or
                             fixture._find_connection_info(
                                 volume_id, attachment_id))
        info['status'] = status
        return {'id': attachment_id, 'connection_info': info}

    # A partial, not a closure: nova_support reads the signature of what
    # its closures wrap.
    test.useFixture(fixtures.MockPatch(
        'nova.volume.cinder.cinderclient',
        new=functools.partial(_cinderclient, test)))
    for name, function in (
            ('fake_attachment_create', attachment_create),
            ('fake_attachment_update', attachment_update),
            ('fake_attachment_complete', attachment_complete),
            ('fake_attachment_get', attachment_get),
            ('fake_attachment_get_all', attachment_get_all)):
        test.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.CinderFixture.' + name, function))


def _neutron(test):
    fixture_class = nova_fixtures.NeutronFixture
    update = fixture_class.update_port
    list_ports = fixture_class.list_ports
    show_port = fixture_class.show_port

    def revised(fixture):
        """Every port with a revision, the vif type it binds with kept."""
        working = fixture.__dict__.setdefault('working_vif_types', {})
        for port in fixture._ports.values():
            port.setdefault('revision_number', 1)
            working.setdefault(port['id'], port['binding:vif_type'])
        fixture.__dict__.setdefault('agents_down', set())
        return working

    def update_port(fixture, port_id, body=None, revision_number=None):
        working = revised(fixture)
        port = fixture._ports[port_id]
        if revision_number is not None and (
                revision_number != port['revision_number']):
            raise neutron_exceptions.NeutronClientException(
                status_code=412, message='RevisionNumberConstraintFailed: '
                'constrained to %s, port %s is at %s' % (
                    revision_number, port_id, port['revision_number']))
        host = body['port'].get('binding:host_id',
                                port.get('binding:host_id'))
        port['binding:vif_type'] = (
            'binding_failed' if host in fixture.agents_down
            else working[port_id])
        result = update(fixture, port_id, body)
        port['revision_number'] += 1
        result['port']['revision_number'] = port['revision_number']
        return result

    def list_ports_revised(fixture, *args, **kwargs):
        revised(fixture)
        return list_ports(fixture, *args, **kwargs)

    def show_port_revised(fixture, *args, **kwargs):
        revised(fixture)
        return show_port(fixture, *args, **kwargs)

    for name, function in (('update_port', update_port),
                           ('list_ports', list_ports_revised),
                           ('show_port', show_port_revised)):
        test.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.NeutronFixture.' + name, function))


def install(test):
    """Patch nova's cinder and neutron fixtures for ``test``.

    Before the fixtures are set up: the cinder fixture binds its methods
    then.
    """
    _cinder(test)
    _neutron(test)
