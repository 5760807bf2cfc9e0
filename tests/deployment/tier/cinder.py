# SPDX-License-Identifier: Apache-2.0

"""cinder with its RBD driver on the tier's Ceph.

``cinder-api`` under uWSGI (``cinder.wsgi.api:application``),
``cinder-scheduler`` and one ``cinder-volume`` whose only backend is
``ceph``: the RBD driver on pool ``volumes`` (:mod:`.ceph`), with no
``rbd_user`` (the cluster runs ``auth none``). cinder asks nova through
its ``[nova]`` section, and sends a service token with its own calls
(``[service_user]``); it lets an attachment go without asking nova only
when the request carries one (bug 2004555).
"""

import os
import time

from tests.deployment.tier import client

BACKEND = 'ceph'


class Cinder(object):

    def __init__(self, d):
        from tests.deployment.tier import services

        self.d = d
        self.port = services.free_port()
        self.url = 'http://127.0.0.1:%d/v3' % self.port
        self.etc = d.path('etc', 'cinder')
        self.host = 'evac-cinder'

    def write_conf(self):
        d = self.d
        os.makedirs(self.etc, exist_ok=True)
        state = d.path('state', 'cinder')
        for sub in ('lock', 'conversion'):
            os.makedirs(os.path.join(state, sub), exist_ok=True)
        service_user = d.keystone.auth('cinder')
        service_user['send_service_user_token'] = True
        sections = {
            'DEFAULT': {
                'debug': d.debug,
                'host': self.host,
                'my_ip': '127.0.0.1',
                'transport_url': d.transport_url,
                'auth_strategy': 'keystone',
                'state_path': state,
                'enabled_backends': BACKEND,
                'default_volume_type': BACKEND,
                'image_conversion_dir': os.path.join(state, 'conversion'),
                'api_paste_config': os.path.join(
                    d.bin, '..', 'etc', 'cinder', 'api-paste.ini'),
                'report_interval': 2,
            },
            BACKEND: {
                'volume_driver': 'cinder.volume.drivers.rbd.RBDDriver',
                'volume_backend_name': BACKEND,
                'rbd_pool': 'volumes',
                'rbd_ceph_conf': d.ceph.conf,
            },
            'database': {'connection': d._db_url('cinder')},
            'keystone_authtoken': d.keystone.authtoken('cinder'),
            'nova': d.keystone.auth('cinder'),
            'service_user': service_user,
            'oslo_concurrency': {'lock_path': os.path.join(state, 'lock')},
        }
        # privsep without sudo, as for nova-compute: cinder-volume runs as
        # root (it inspects images in its own privsep daemon).
        conf = os.path.join(self.etc, 'cinder.conf')
        helper = {'helper_command': '%s --config-file %s' % (
            d._bin('privsep-helper'), conf)}
        for context in ('cinder_sys_admin', 'privsep_osbrick'):
            sections[context] = dict(helper)
        self.conf = d._write_conf(os.path.join('cinder', 'cinder.conf'),
                                  sections)
        return self.conf

    def db_sync(self):
        return ('cinder-db-sync', self.d._bin('cinder-manage'),
                '--config-file', self.conf, 'db', 'sync')

    def start(self):
        from tests.deployment.tier import services

        d = self.d
        api = d._uwsgi('cinder-api', 'cinder.wsgi.api:application',
                       self.port, {})
        api.argv += ['--pyargv', '--config-file %s' % self.conf]
        d.add_service(api)
        for name in ('cinder-scheduler', 'cinder-volume'):
            d.add_service(services.Service(
                name, [d._bin(name), '--config-file', self.conf],
                d.path('logs', '%s.log' % name)))
        d.keystone.register('volumev3', 'cinderv3',
                            self.url + '/%(project_id)s')

    def wait(self):
        d = self.d
        d._wait_http(d.services['cinder-api'], self.url + '/',
                     ok=lambda status: status < 500)
        from tests.deployment.tier import hypervisor

        def up():
            for name in ('cinder-scheduler', 'cinder-volume'):
                d.services[name].check()
            services = self.request('GET', '/os-services')['services']
            states = {s['binary']: s['state'] for s in services}
            return (states.get('cinder-scheduler') == 'up' and
                    states.get('cinder-volume') == 'up')

        hypervisor.wait_for(up, 180, 'cinder-scheduler and cinder-volume',
                            interval=0.5)
        self.request('POST', '/types', {'volume_type': {
            'name': BACKEND, 'extra_specs': {
                'volume_backend_name': BACKEND}}})

    # The REST API, as the admin
    def request(self, method, path, body=None, version='3.44'):
        return client.call(
            method, '%s/%s%s' % (self.url, self.d.keystone.admin_project(),
                                 path),
            self.d.keystone.client.token(), body,
            {'OpenStack-API-Version': 'volume %s' % version})

    def create_volume(self, name, size=1, image_id=None):
        body = {'volume': {'name': name, 'size': size}}
        if image_id:
            body['volume']['imageRef'] = image_id
        return self.request('POST', '/volumes', body)['volume']

    def volume(self, volume_id):
        return self.request('GET', '/volumes/%s' % volume_id)['volume']

    def wait_volume(self, volume_id, statuses, timeout=180):
        deadline = time.monotonic() + timeout
        while True:
            vol = self.volume(volume_id)
            if vol['status'] in statuses:
                return vol
            if time.monotonic() > deadline:
                raise RuntimeError('volume %s %s after %ss, wanted %s' % (
                    volume_id, vol['status'], timeout, statuses))
            time.sleep(0.5)

    def attachments(self, volume_id):
        """The volume's attachments: {id: {host, instance, connector...}}."""
        found = self.request('GET', '/attachments/detail?volume_id=%s' %
                             volume_id)['attachments']
        return found

    def delete_volume(self, volume_id):
        try:
            self.request('DELETE', '/volumes/%s' % volume_id)
        except client.APIError as e:
            if ': 404 ' not in str(e):
                raise
