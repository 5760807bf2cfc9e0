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

"""What nova's cinder fixture lacks for a server given back.

nova's ``CinderFixture`` answers every attachment with connection info,
even a reserved one, tracks no attachment status and gives every host the
same connection info. Real cinder does, and the give-back of a failed
evacuation (issue 33) depends on it: an attachment is ``reserved`` (no
connector, no connection info), ``attaching`` once updated with a
connector, ``attached`` once completed; ``attachment_get`` answers what
nova's cinder API would (connection info only once connected, its status
inside it). With ``STYLE`` ``rbd`` or ``iscsi`` on the fixture the
connection info is shaped like Ceph's (the same on every host) or like a
SAN's, whose LUN a host sees depends on the host (:func:`lun`).

:func:`install` patches the fixture class for one test.
"""

import copy

import fixtures
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


def _cinder(test):
    fixture_class = nova_fixtures.CinderFixture
    create = fixture_class.fake_attachment_create
    update = fixture_class.fake_attachment_update
    complete = fixture_class.fake_attachment_complete

    def attachment_create(fixture, context, volume_id, instance_uuid,
                          connector=None, mountpoint=None):
        result = create(fixture, context, volume_id, instance_uuid,
                        connector=connector, mountpoint=mountpoint)
        attachment = fixture.volume_to_attachment[volume_id][result['id']]
        attachment['status'] = 'attaching' if connector else 'reserved'
        return result

    def attachment_update(fixture, context, attachment_id, connector,
                          mountpoint=None):
        result = update(fixture, context, attachment_id, connector,
                        mountpoint=mountpoint)
        volume_id, attachment, _ = fixture._find_attachment(attachment_id)
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
        fixture._find_attachment(attachment_id)[1]['status'] = 'attached'

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

    for name, function in (
            ('fake_attachment_create', attachment_create),
            ('fake_attachment_update', attachment_update),
            ('fake_attachment_complete', attachment_complete),
            ('fake_attachment_get', attachment_get)):
        test.useFixture(fixtures.MonkeyPatch(
            'nova.tests.fixtures.CinderFixture.' + name, function))


def install(test):
    """Patch nova's cinder fixture for ``test``.

    Before the fixtures are set up: the cinder fixture binds its methods
    then.
    """
    _cinder(test)
