# SPDX-License-Identifier: Apache-2.0

"""glance with its file store, under uWSGI.

glance 33 runs only as a WSGI application ("standalone glance-api is no
longer supported"): ``glance.wsgi.api:application``, configured from
``OS_GLANCE_CONFIG_DIR``. Images are uploaded through its API as a user
does (:meth:`Glance.upload`), and stored as files in the run's directory:
:meth:`Glance.stored_file` is where a test finds one to damage.
"""

import os
import shutil
import sys
import time

from tests.deployment.tier import client


class Glance(object):

    def __init__(self, d):
        from tests.deployment.tier import services

        self.d = d
        self.port = services.free_port()
        self.url = 'http://127.0.0.1:%d' % self.port
        self.etc = d.path('etc', 'glance')
        self.store = d.path('state', 'glance', 'images')

    def write_conf(self):
        d = self.d
        os.makedirs(self.etc, exist_ok=True)
        state = d.path('state', 'glance')
        for sub in ('images', 'staging', 'tasks', 'lock'):
            os.makedirs(os.path.join(state, sub), exist_ok=True)
        paste = os.path.join(self.etc, 'glance-api-paste.ini')
        shutil.copy(os.path.join(sys.prefix, 'etc', 'glance',
                                 'glance-api-paste.ini'), paste)
        self.conf = d._write_conf(os.path.join('glance', 'glance-api.conf'), {
            'DEFAULT': {'debug': d.debug, 'enabled_backends': 'file1:file',
                        'transport_url': d.transport_url},
            'database': {'connection': d._db_url('glance')},
            'glance_store': {'default_backend': 'file1'},
            'file1': {'filesystem_store_datadir': self.store},
            'os_glance_staging_store': {'filesystem_store_datadir':
                                        os.path.join(state, 'staging')},
            'os_glance_tasks_store': {'filesystem_store_datadir':
                                      os.path.join(state, 'tasks')},
            'keystone_authtoken': d.keystone.authtoken('glance'),
            'paste_deploy': {'flavor': 'keystone', 'config_file': paste},
            'oslo_concurrency': {'lock_path': os.path.join(state, 'lock')},
        })
        return self.conf

    def db_sync(self):
        return ('glance-db-sync', self.d._bin('glance-manage'),
                '--config-file', self.conf, 'db_sync')

    def start(self):
        d = self.d
        svc = d._uwsgi('glance-api', 'glance.wsgi.api:application',
                       self.port, {'OS_GLANCE_CONFIG_DIR': self.etc})
        d.add_service(svc)
        d.keystone.register('image', 'glance', self.url)
        return svc

    def wait(self):
        self.d._wait_http(self.d.services['glance-api'], self.url + '/')

    def _request(self, method, path, **kwargs):
        return client.call(method, self.url + path,
                           self.d.keystone.client.token(), timeout=120,
                           **kwargs)

    def upload(self, name, path, disk_format='qcow2'):
        """Create an image and upload ``path``'s data; return its id."""
        t0 = time.monotonic()
        image = self._request('POST', '/v2/images', body={
            'name': name, 'disk_format': disk_format,
            'container_format': 'bare', 'visibility': 'public'})
        with open(path, 'rb') as f:
            self._request('PUT', '/v2/images/%s/file' % image['id'], data=f,
                          headers={'Content-Type':
                                   'application/octet-stream'})
        image = self._request('GET', '/v2/images/%s' % image['id'])
        if image['status'] != 'active':
            raise RuntimeError('image %s is %s after its upload' % (
                image['id'], image['status']))
        self.d.timings.setdefault('image upload to glance', []).append(
            time.monotonic() - t0)
        return image['id']

    def delete(self, image_id):
        self._request('DELETE', '/v2/images/%s' % image_id)

    def stored_file(self, image_id):
        """The file the file store keeps ``image_id``'s data in."""
        return os.path.join(self.store, image_id)
