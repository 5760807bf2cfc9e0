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

"""keystone and Masakari on the deployment, for the HA scenario.

:class:`HA` starts, on the deployment's MariaDB and RabbitMQ vhost:

* keystone (the tox env's, from PyPI) under uWSGI, with fernet tokens,
  bootstrapped with an ``admin`` user and a catalog in which ``compute``
  (named ``nova``) points at the deployment's compute API and
  ``instance-ha`` at Masakari's;
* ``masakari-api`` under uWSGI with keystonemiddleware's ``auth_token``
  against that keystone (Masakari's own ``api-paste.ini``, installed by
  its wheel), and ``masakari-engine`` with the taskflow driver.

Masakari's engine reaches nova as in production: novaclient through a
keystone session of the ``masakari`` service user, the compute endpoint
from the catalog. The compute API itself keeps the tier's admin paste
filter (:mod:`.auth`): it accepts the token without checking it.

Masakari's periodic retry and waits are shortened by configuration
(:data:`ENGINE_OPTS`); everything else is its default, as its install
guide configures it.
"""

import os
import shutil
import sys
import time

import requests

from tests.deployment.tier import hypervisor
from tests.deployment.tier import services

ADMIN_PASSWORD = 'evac-admin'
SERVICE_PASSWORD = 'evac-masakari'
REGION = 'RegionOne'
MASAKARI_VERSION = '1.1'

# What the scenario shortens; every other option is Masakari's default
# (evacuate_all_instances and ignore_instances_in_error_state included:
# host recovery evacuates ERROR instances again).
ENGINE_OPTS = {
    # Its retry of notifications in error: 120 s by default.
    'process_unfinished_notifications_interval': 10,
    # Waits after disabling the failed host's service (180 s) and for
    # each evacuation (90 s); checks every verify_interval (1 s).
    'wait_period_after_service_update': 3,
    'wait_period_after_evacuation': 90,
    'verify_interval': 1,
    # Each run posts a notification for the same host: only a repeat
    # within this interval (180 s) is a duplicate.
    'duplicate_notification_detection_interval': 5,
}
HOST_FAILURE_OPTS = {
    # Only the servers with HA_Enabled=True metadata, as most
    # deployments run it (Masakari's default, True, evacuates all).
    'evacuate_all_instances': False,
}


class HA(object):
    """keystone, masakari-api and masakari-engine of one deployment.

    :param d: the :class:`~.services.Deployment`, already started
    """

    def __init__(self, d):
        self.d = d
        self.ports = {'keystone': services.free_port(),
                      'masakari': services.free_port()}
        self.keystone_url = 'http://127.0.0.1:%d/v3' % self.ports['keystone']
        self.masakari_url = 'http://127.0.0.1:%d' % self.ports['masakari']
        self.etc = d.path('etc', 'ha')
        self.client = None
        self.started = False

    # Configuration
    def _keystone_conf(self):
        state = self.d.path('state', 'keystone')
        os.makedirs(state, exist_ok=True)
        return self.d._write_conf(os.path.join('ha', 'keystone.conf'), {
            'DEFAULT': {'debug': self.d.debug},
            'database': {'connection': self.d._db_url('keystone')},
            'token': {'provider': 'fernet'},
            # Masakari's engine gets a token for each call to nova: bcrypt's
            # fewest rounds keep that cheap on a shared 2-core machine.
            'identity': {'password_hash_rounds': 4},
            'fernet_tokens': {'key_repository': os.path.join(
                state, 'fernet-keys')},
            'fernet_receipts': {'key_repository': os.path.join(
                state, 'fernet-keys')},
            'credential': {'key_repository': os.path.join(
                state, 'credential-keys')},
        })

    def _masakari_conf(self):
        auth = {
            'auth_url': self.keystone_url,
            'auth_type': 'password',
            'project_name': 'service',
            'project_domain_name': 'Default',
            'user_domain_name': 'Default',
            'username': 'masakari',
            'password': SERVICE_PASSWORD,
        }
        default = {
            'debug': self.d.debug,
            'transport_url': self.d.transport_url,
            'auth_strategy': 'keystone',
            'os_privileged_user_name': 'masakari',
            'os_privileged_user_password': SERVICE_PASSWORD,
            'os_privileged_user_tenant': 'service',
            'os_privileged_user_auth_url': self.keystone_url,
            'os_region_name': REGION,
            'graceful_shutdown_timeout': 5,
            # The periodic tasks start at once, not up to 60 s later.
            'periodic_fuzzy_delay': 0,
        }
        default.update(ENGINE_OPTS)
        lock = self.d.path('state', 'masakari', 'lock')
        os.makedirs(lock, exist_ok=True)
        return self.d._write_conf(os.path.join('ha', 'masakari.conf'), {
            'DEFAULT': default,
            'wsgi': {'api_paste_config': os.path.join(self.etc,
                                                      'api-paste.ini')},
            'database': {'connection': self.d._db_url('masakari')},
            'taskflow': {'connection': self.d._db_url('masakari_taskflow')},
            'keystone_authtoken': dict(
                auth, www_authenticate_uri=self.keystone_url,
                region_name=REGION, service_token_roles_required=True),
            'host_failure': HOST_FAILURE_OPTS,
            'oslo_concurrency': {'lock_path': lock},
            'oslo_messaging_rabbit': {'heartbeat_timeout_threshold': 0},
        })

    # Start-up
    def start(self):
        d = self.d
        t0 = time.monotonic()
        os.makedirs(self.etc, exist_ok=True)
        # Masakari's own paste pipeline, as its wheel installs it.
        shutil.copy(os.path.join(sys.prefix, 'etc', 'masakari',
                                 'api-paste.ini'),
                    os.path.join(self.etc, 'api-paste.ini'))
        ks_conf = self._keystone_conf()
        mk_conf = self._masakari_conf()
        manage = [d._bin('keystone-manage'), '--config-file', ks_conf]
        owner = ('--keystone-user', 'root', '--keystone-group', 'root')
        # The schemas and keystone's keys are independent: side by side.
        d._run_parallel(
            ('keystone-db-sync',) + tuple(manage) + ('db_sync',),
            ('keystone-fernet-setup',) + tuple(manage) + (
                'fernet_setup',) + owner,
            ('keystone-credential-setup',) + tuple(manage) + (
                'credential_setup',) + owner,
            ('masakari-db-sync', d._bin('masakari-manage'),
             '--config-file', mk_conf, 'db', 'sync'))
        # Masakari needs keystone only for requests: it starts meanwhile.
        # Eventlet-patched like nova-api: one thread (see services).
        api = d._uwsgi('masakari-api', 'masakari.wsgi.api:application',
                       self.ports['masakari'],
                       {'OS_MASAKARI_CONFIG_DIR': self.etc}, threads=1)
        # masakari.wsgi.api parses its configuration twice, the second
        # time from sys.argv alone (then only /etc/masakari is searched):
        # name the file there too.
        api.argv += ['--pyargv', '--config-file %s' % mk_conf]
        engine = services.Service('masakari-engine', [
            d._bin('masakari-engine'), '--config-file', mk_conf],
            d.path('logs', 'masakari-engine.log'))
        self._add(api)
        self._add(engine)
        d._run(*manage, 'bootstrap', '--bootstrap-password', ADMIN_PASSWORD,
               '--bootstrap-admin-url', self.keystone_url,
               '--bootstrap-public-url', self.keystone_url,
               '--bootstrap-internal-url', self.keystone_url,
               '--bootstrap-region-id', REGION)
        keystone = d._uwsgi('keystone', 'keystone.wsgi.api:application',
                            self.ports['keystone'],
                            {'OS_KEYSTONE_CONFIG_DIR': self.etc})
        self._add(keystone)
        d._wait_http(keystone, self.keystone_url)
        d.progress('keystone bootstrapped and answering (%.1fs)',
                   time.monotonic() - t0)
        self.client = Client(self.keystone_url, self.masakari_url)
        self._catalog()
        d._wait_http(api, self.masakari_url + '/')
        # The engine consumes its topic once it runs its periodic tasks.
        hypervisor.wait_for(self._engine_ready, 120,
                            'masakari-engine consuming', interval=0.5)
        d.timings['keystone and Masakari start-up'] = time.monotonic() - t0
        d.progress('masakari-api and masakari-engine up (%.1fs)',
                   time.monotonic() - t0)
        self.started = True

    def _engine_ready(self):
        engine = self.d.services['masakari-engine']
        engine.check()
        with open(engine.log_file, 'rb') as f:
            text = f.read()
        return b'Running periodic task' in text

    def _add(self, svc):
        svc.run_dir = self.d.dir
        self.d.services[svc.name] = svc
        svc.start()

    def _catalog(self):
        """The service user, nova's and Masakari's endpoints."""
        c = self.client
        project = c.ks('POST', '/projects', {'project': {
            'name': 'service', 'domain_id': 'default'}})['project']
        user = c.ks('POST', '/users', {'user': {
            'name': 'masakari', 'password': SERVICE_PASSWORD,
            'domain_id': 'default', 'default_project_id': project['id']}}
        )['user']
        roles = {r['name']: r['id']
                 for r in c.ks('GET', '/roles')['roles']}
        for role in ('admin', 'service'):
            if role not in roles:
                roles[role] = c.ks('POST', '/roles', {'role': {
                    'name': role}})['role']['id']
            c.ks('PUT', '/projects/%s/users/%s/roles/%s' % (
                project['id'], user['id'], roles[role]))
        for stype, name, url in (
                ('compute', 'nova', self.d.compute.url),
                ('instance-ha', 'masakari', self.masakari_url + '/v1')):
            svc = c.ks('POST', '/services', {'service': {
                'type': stype, 'name': name}})['service']
            for interface in ('public', 'internal', 'admin'):
                c.ks('POST', '/endpoints', {'endpoint': {
                    'service_id': svc['id'], 'interface': interface,
                    'region_id': REGION, 'url': url}})
        self.d.progress('keystone catalog: compute (nova) at %s, '
                        'instance-ha (masakari) at %s/v1; user masakari '
                        'in project service (admin, service)',
                        self.d.compute.url, self.masakari_url)


class Client(object):
    """keystone and Masakari's REST API, as the admin user."""

    def __init__(self, keystone_url, masakari_url):
        self.keystone_url = keystone_url
        self.masakari_url = masakari_url
        self._token = None

    def token(self):
        if self._token is None:
            auth = {
                'identity': {'methods': ['password'], 'password': {
                    'user': {'name': 'admin', 'domain': {'id': 'default'},
                             'password': ADMIN_PASSWORD}}},
                'scope': {'project': {'name': 'admin',
                                      'domain': {'id': 'default'}}}}
            resp = requests.post(
                self.keystone_url + '/auth/tokens', json={'auth': auth},
                timeout=60, headers={'Connection': 'close'})
            resp.raise_for_status()
            self._token = resp.headers['X-Subject-Token']
        return self._token

    def _request(self, method, url, body=None, headers=None):
        h = {'Connection': 'close', 'X-Auth-Token': self.token()}
        h.update(headers or {})
        resp = requests.request(method, url, json=body, timeout=60,
                                headers=h)
        if resp.status_code >= 400:
            raise RuntimeError('%s %s: %s %s' % (
                method, url, resp.status_code, resp.text[:500]))
        return resp.json() if resp.content else None

    def ks(self, method, path, body=None):
        return self._request(method, self.keystone_url + path, body)

    def ha(self, method, path, body=None):
        return self._request(
            method, self.masakari_url + '/v1' + path, body,
            {'OpenStack-API-Version': 'instance-ha %s' % MASAKARI_VERSION})

    # Masakari
    def create_segment(self, name, recovery_method):
        return self.ha('POST', '/segments', {'segment': {
            'name': name, 'recovery_method': recovery_method,
            'service_type': 'COMPUTE'}})['segment']

    def update_segment(self, segment, **fields):
        return self.ha('PUT', '/segments/%s' % segment,
                       {'segment': fields})['segment']

    def add_host(self, segment, name, reserved=False):
        return self.ha('POST', '/segments/%s/hosts' % segment, {'host': {
            'name': name, 'type': 'COMPUTE', 'control_attributes': 'SSH',
            'reserved': reserved, 'on_maintenance': False}})['host']

    def hosts(self, segment):
        return {h['name']: h for h in self.ha(
            'GET', '/segments/%s/hosts' % segment)['hosts']}

    def update_host(self, segment, host, **fields):
        return self.ha('PUT', '/segments/%s/hosts/%s' % (segment, host),
                       {'host': fields})['host']

    def notify_host_down(self, hostname, generated_time):
        """What masakari-monitors' host monitor posts for a dead host."""
        return self.ha('POST', '/notifications', {'notification': {
            'type': 'COMPUTE_HOST', 'hostname': hostname,
            'generated_time': generated_time,
            'payload': {'event': 'STOPPED', 'host_status': 'NORMAL',
                        'cluster_status': 'OFFLINE'}}})['notification']

    def notification(self, uuid, version='1.0'):
        """A notification; from 1.1 on with its recovery workflow details.

        1.1 asks the engine over RPC, which can time out while the engine
        recovers: polling uses 1.0.
        """
        return self._request(
            'GET', self.masakari_url + '/v1/notifications/%s' % uuid,
            headers={'OpenStack-API-Version': 'instance-ha %s' % version}
        )['notification']
