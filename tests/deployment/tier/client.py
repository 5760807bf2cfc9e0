# SPDX-License-Identifier: Apache-2.0

"""Small REST clients for the compute API and placement.

Both authenticate with keystone as the admin (:mod:`.identity`): each
request carries the admin's token.
"""

import time

import requests

# 2.74: boot on a given host. 2.53: services by UUID, for force-down.
COMPUTE_VERSION = '2.74'
# Evacuate with the microversion HA tools use: 2.95 and later would stop
# the evacuated guest on the destination, leaving no domain running.
EVACUATE_VERSION = '2.68'
PLACEMENT_VERSION = '1.39'


class APIError(Exception):
    pass


def call(method, url, token, body=None, headers=None, timeout=60,
         **kwargs):
    """One authenticated request; its JSON answer, APIError if it fails.

    A new connection each time (``Connection: close``), as uWSGI closes
    each after its response.
    """
    h = {'Connection': 'close', 'X-Auth-Token': token}
    h.update(headers or {})
    resp = requests.request(method, url, json=body, timeout=timeout,
                            headers=h, **kwargs)
    if resp.status_code >= 400:
        raise APIError('%s %s: %s %s' % (method, url, resp.status_code,
                                         resp.text[:500]))
    return resp.json() if resp.content else None


class Timeout(Exception):
    pass


class Compute(object):

    def __init__(self, url, token):
        self.url = url.rstrip('/')
        self.token = token
        # A new connection per request: reusing one that the server is
        # closing races with its FIN and gets the request reset.
        self.session = requests

    def request(self, method, path, body=None, version=COMPUTE_VERSION,
                ok=(200, 201, 202, 204)):
        headers = {'Connection': 'close', 'X-Auth-Token': self.token(),
                   'OpenStack-API-Version': 'compute %s' % version,
                   'X-OpenStack-Nova-API-Version': version}
        for attempt in range(3 if method == 'GET' else 1):
            try:
                resp = self.session.request(method, self.url + path,
                                            json=body, timeout=60,
                                            headers=headers)
                break
            except requests.ConnectionError:
                if attempt == 2 or method != 'GET':
                    raise
        if resp.status_code not in ok:
            raise APIError('%s %s: %s %s' % (
                method, path, resp.status_code, resp.text[:500]))
        return resp.json() if resp.content else None

    def get(self, path):
        return self.request('GET', path)

    # Servers
    def boot(self, name, flavor_id, image_id, host=None, metadata=None,
             ports=(), volumes=(), boot_volume=None):
        """Boot a server; its networks are ``ports``, or none.

        :param volumes: data volumes to attach at boot
        :param boot_volume: a bootable volume to boot from, instead of
            ``image_id``
        """
        body = {'server': {'name': name, 'flavorRef': flavor_id,
                           'networks': [{'port': p} for p in ports] or
                           'none'}}
        bdms = []
        if boot_volume:
            bdms.append({'boot_index': 0, 'uuid': boot_volume,
                         'source_type': 'volume',
                         'destination_type': 'volume',
                         'delete_on_termination': False})
        else:
            body['server']['imageRef'] = image_id
            if volumes:
                # With other block devices the image's is named too.
                bdms.append({'boot_index': 0, 'uuid': image_id,
                             'source_type': 'image',
                             'destination_type': 'local',
                             'delete_on_termination': True})
        for volume in volumes:
            bdms.append({'boot_index': -1, 'uuid': volume,
                         'source_type': 'volume',
                         'destination_type': 'volume',
                         'delete_on_termination': False})
        if bdms:
            body['server']['block_device_mapping_v2'] = bdms
        if host:
            body['server']['host'] = host
        if metadata:
            body['server']['metadata'] = metadata
        return self.request('POST', '/servers', body)['server']

    def server(self, server_id):
        return self.get('/servers/%s' % server_id)['server']

    def delete_server(self, server_id):
        self.request('DELETE', '/servers/%s' % server_id, ok=(204, 404))

    def server_action(self, server_id, action, args=None, version=None):
        return self.request('POST', '/servers/%s/action' % server_id,
                            {action: args}, version=version or
                            COMPUTE_VERSION)

    def evacuate(self, server_id, host=None):
        args = {'host': host} if host else {}
        return self.server_action(server_id, 'evacuate', args,
                                  version=EVACUATE_VERSION)

    def reset_state(self, server_id, state='error'):
        return self.server_action(server_id, 'os-resetState',
                                  {'state': state})

    def migrations(self, server_id):
        return self.get('/os-migrations?instance_uuid=%s' % server_id
                        )['migrations']

    def evacuations(self, server_id):
        migs = [m for m in self.migrations(server_id)
                if m['migration_type'] == 'evacuation']
        return sorted(migs, key=lambda m: m['id'])

    def faults(self, server_id):
        return self.server(server_id).get('fault')

    # Services
    def services(self, binary=None):
        path = '/os-services'
        if binary:
            path += '?binary=%s' % binary
        return self.get(path)['services']

    def service(self, host, binary='nova-compute'):
        for svc in self.services(binary):
            if svc['host'] == host:
                return svc
        return None

    def force_down(self, host, down=True):
        svc = self.service(host)
        self.request('PUT', '/os-services/%s' % svc['id'],
                     {'forced_down': down})

    def enable(self, host, enabled=True):
        """Enable or disable ``host``'s nova-compute service."""
        svc = self.service(host)
        self.request('PUT', '/os-services/%s' % svc['id'],
                     {'status': 'enabled' if enabled else 'disabled'})

    # Flavors
    def create_flavor(self, name, ram, vcpus, disk):
        return self.request('POST', '/flavors', {'flavor': {
            'name': name, 'ram': ram, 'vcpus': vcpus, 'disk': disk}}
        )['flavor']

    # Waiting
    def wait_server(self, server_id, statuses, timeout=120,
                    task_state_none=True):
        """Wait for one of ``statuses`` with no task state; return it."""
        if isinstance(statuses, str):
            statuses = (statuses,)
        deadline = time.monotonic() + timeout
        while True:
            server = self.server(server_id)
            if (server['status'] in statuses and
                    (not task_state_none or
                     server.get('OS-EXT-STS:task_state') is None)):
                return server
            if time.monotonic() > deadline:
                raise Timeout('server %s: %s/%s after %ss, wanted %s' % (
                    server_id, server['status'],
                    server.get('OS-EXT-STS:task_state'), timeout, statuses))
            time.sleep(0.25)

    def wait_server_gone(self, server_id, timeout=120):
        deadline = time.monotonic() + timeout
        while True:
            resp = requests.get(
                self.url + '/servers/%s' % server_id, timeout=60,
                headers={'Connection': 'close', 'X-Auth-Token': self.token(),
                         'OpenStack-API-Version':
                         'compute %s' % COMPUTE_VERSION})
            if resp.status_code == 404:
                return
            if time.monotonic() > deadline:
                raise Timeout('server %s not deleted after %ss' % (
                    server_id, timeout))
            time.sleep(0.25)

    def wait_evacuation(self, server_id, statuses, count=1, timeout=120):
        """Wait until the ``count``-th evacuation is in ``statuses``."""
        deadline = time.monotonic() + timeout
        while True:
            migs = self.evacuations(server_id)
            if len(migs) >= count and migs[count - 1]['status'] in statuses:
                return migs[count - 1]
            if time.monotonic() > deadline:
                raise Timeout('evacuation %d of %s: %s after %ss' % (
                    count, server_id, migs and migs[-1]['status'], timeout))
            time.sleep(0.25)


class Placement(object):

    def __init__(self, url, token):
        self.url = url.rstrip('/')
        self.token = token

    def get(self, path):
        headers = {
            'Connection': 'close', 'X-Auth-Token': self.token(),
            'OpenStack-API-Version': 'placement %s' % PLACEMENT_VERSION}
        for attempt in range(3):
            try:
                resp = requests.get(self.url + path, timeout=60,
                                    headers=headers)
                break
            except requests.ConnectionError:
                if attempt == 2:
                    raise
        if resp.status_code != 200:
            raise APIError('GET %s: %s %s' % (
                path, resp.status_code, resp.text[:500]))
        return resp.json()

    def providers(self):
        return {rp['name']: rp['uuid']
                for rp in self.get('/resource_providers')[
                    'resource_providers']}

    def allocations(self, consumer):
        """{provider name: resources} of one consumer."""
        names = {v: k for k, v in self.providers().items()}
        allocs = self.get('/allocations/%s' % consumer)['allocations']
        return {names.get(rp, rp): a['resources']
                for rp, a in allocs.items()}

    def provider_allocations(self, name):
        """{consumer: resources} against one provider."""
        uuid = self.providers()[name]
        allocs = self.get('/resource_providers/%s/allocations' % uuid)
        return {c: a['resources'] for c, a in allocs['allocations'].items()}

    def usages(self, name):
        uuid = self.providers()[name]
        return self.get('/resource_providers/%s/usages' % uuid)['usages']
