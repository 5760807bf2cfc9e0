# SPDX-License-Identifier: Apache-2.0

"""keystone: every API of the deployment authenticates with it.

keystone (the tox env's, from PyPI) runs under uWSGI with fernet tokens on
the run's MariaDB, bootstrapped with an ``admin`` user. Each service has
its user in project ``service`` with the ``admin`` and ``service`` roles:
the ``service`` role is what makes a token a service token, which cinder
requires before it lets an attachment of a server go without asking nova
(bug 2004555), and nova and cinder send one
(``[service_user] send_service_user_token = True``). The catalog names each
API where the deployment runs it.
"""

import os
import time

import requests

from tests.deployment.tier import client

ADMIN_PASSWORD = 'evac-admin'
REGION = 'RegionOne'
# Service users, and their catalog entries: (type, name).
SERVICE_USERS = ('nova', 'placement', 'neutron', 'cinder', 'glance',
                 'masakari')


def service_password(user):
    return 'evac-%s' % user


class Keystone(object):
    """keystone of one deployment.

    :param d: the :class:`~.services.Deployment`
    """

    def __init__(self, d):
        from tests.deployment.tier import services

        self.d = d
        self.port = services.free_port()
        self.url = 'http://127.0.0.1:%d/v3' % self.port
        self.etc = d.path('etc', 'keystone')
        self.client = Client(self.url)
        self.service_project = None
        self._admin_project = None

    def auth(self, user):
        """keystoneauth options for ``user``'s password, as oslo reads them."""
        return {
            'auth_url': self.url,
            'auth_type': 'password',
            'project_name': 'service',
            'project_domain_name': 'Default',
            'user_domain_name': 'Default',
            'username': user,
            'password': service_password(user),
            'region_name': REGION,
        }

    def authtoken(self, user):
        """A ``[keystone_authtoken]`` section for ``user``'s API."""
        section = self.auth(user)
        section.update({'www_authenticate_uri': self.url,
                        # Validated tokens cached in the process.
                        'token_cache_time': 600,
                        'service_token_roles_required': True})
        return section

    def write_conf(self):
        d = self.d
        os.makedirs(self.etc, exist_ok=True)
        state = d.path('state', 'keystone')
        os.makedirs(state, exist_ok=True)
        self.conf = d._write_conf(os.path.join('keystone', 'keystone.conf'), {
            'DEFAULT': {'debug': d.debug},
            'database': {'connection': d._db_url('keystone')},
            'token': {'provider': 'fernet'},
            # Every service gets tokens: bcrypt's fewest rounds keep that
            # cheap on a shared 2-core machine.
            'identity': {'password_hash_rounds': 4},
            'fernet_tokens': {'key_repository': os.path.join(
                state, 'fernet-keys')},
            'fernet_receipts': {'key_repository': os.path.join(
                state, 'fernet-keys')},
            'credential': {'key_repository': os.path.join(
                state, 'credential-keys')},
        })

    def db_sync(self):
        """Its schema and keys: (name, argv...) commands, independent."""
        manage = (self.d._bin('keystone-manage'), '--config-file',
                  self.conf)
        owner = ('--keystone-user', 'root', '--keystone-group', 'root')
        return [('keystone-db-sync',) + manage + ('db_sync',),
                ('keystone-fernet-setup',) + manage + (
                    'fernet_setup',) + owner,
                ('keystone-credential-setup',) + manage + (
                    'credential_setup',) + owner]

    def start(self):
        """Bootstrap, start, and create the service users (schema synced)."""
        d = self.d
        t0 = time.monotonic()
        d._run(d._bin('keystone-manage'), '--config-file', self.conf,
               'bootstrap', '--bootstrap-password', ADMIN_PASSWORD,
               '--bootstrap-admin-url', self.url,
               '--bootstrap-public-url', self.url,
               '--bootstrap-internal-url', self.url,
               '--bootstrap-region-id', REGION)
        svc = d._uwsgi('keystone', 'keystone.wsgi.api:application',
                       self.port, {'OS_KEYSTONE_CONFIG_DIR': self.etc},
                       processes=2, threads=2)
        d.add_service(svc)
        d._wait_http(svc, self.url)
        self._users()
        d.progress('keystone bootstrapped and answering (%.1fs)',
                   time.monotonic() - t0)

    def _users(self):
        c = self.client
        project = c.ks('POST', '/projects', {'project': {
            'name': 'service', 'domain_id': 'default'}})['project']
        self.service_project = project['id']
        roles = {r['name']: r['id'] for r in c.ks('GET', '/roles')['roles']}
        for role in ('admin', 'service'):
            if role not in roles:
                roles[role] = c.ks('POST', '/roles', {'role': {
                    'name': role}})['role']['id']
        for name in SERVICE_USERS:
            user = c.ks('POST', '/users', {'user': {
                'name': name, 'password': service_password(name),
                'domain_id': 'default', 'default_project_id': project['id']}}
            )['user']
            for role in ('admin', 'service'):
                c.ks('PUT', '/projects/%s/users/%s/roles/%s' % (
                    project['id'], user['id'], roles[role]))

    def admin_project(self):
        """The id of the admin's project (the tests' servers' own)."""
        if self._admin_project is None:
            self._admin_project = self.client.ks(
                'GET', '/projects?name=admin')['projects'][0]['id']
        return self._admin_project

    def register(self, stype, name, url):
        """``url`` in the catalog as service ``name`` of type ``stype``."""
        c = self.client
        svc = c.ks('POST', '/services', {'service': {
            'type': stype, 'name': name}})['service']
        for interface in ('public', 'internal', 'admin'):
            c.ks('POST', '/endpoints', {'endpoint': {
                'service_id': svc['id'], 'interface': interface,
                'region_id': REGION, 'url': url}})


class Client(object):
    """keystone's REST API, and tokens, as the admin user."""

    def __init__(self, url):
        self.url = url
        self._token = None
        self._expires = 0

    def token(self):
        """An admin token, renewed well before keystone's hour is over."""
        if self._token is None or time.monotonic() > self._expires:
            auth = {
                'identity': {'methods': ['password'], 'password': {
                    'user': {'name': 'admin', 'domain': {'id': 'default'},
                             'password': ADMIN_PASSWORD}}},
                'scope': {'project': {'name': 'admin',
                                      'domain': {'id': 'default'}}}}
            resp = requests.post(
                self.url + '/auth/tokens', json={'auth': auth},
                timeout=60, headers={'Connection': 'close'})
            resp.raise_for_status()
            self._token = resp.headers['X-Subject-Token']
            self._expires = time.monotonic() + 1800
        return self._token

    def ks(self, method, path, body=None):
        return client.call(method, self.url + path, self.token(), body)
