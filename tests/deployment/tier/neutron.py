# SPDX-License-Identifier: Apache-2.0

"""neutron with ML2/OVN, its API under uWSGI.

neutron 29 is WSGI only (``neutron.wsgi.api:application``), and its OVN
driver's hash ring wants uWSGI. ML2 with the ``ovn`` mechanism driver on
geneve networks talks to OVN's databases (:mod:`.ovn`); no agent runs: each
host's ovn-controller is its "OVN Controller agent". neutron tells nova of
its ports' status changes (``network-vif-plugged``) through nova's API with
its service user, from the ``[nova]`` section.

:meth:`Neutron.create_network` makes the network servers get their ports
on: geneve, with a subnet and no DHCP (the guests run no operating
system).
"""

import os
import time

from tests.deployment.tier import client

NETWORK = 'evac-net'
CIDR = '198.51.100.0/24'


class Neutron(object):

    def __init__(self, d):
        from tests.deployment.tier import services

        self.d = d
        self.port = services.free_port()
        self.url = 'http://127.0.0.1:%d' % self.port
        self.etc = d.path('etc', 'neutron')
        self.network_id = None

    def write_conf(self):
        d = self.d
        os.makedirs(self.etc, exist_ok=True)
        state = d.path('state', 'neutron')
        os.makedirs(os.path.join(state, 'lock'), exist_ok=True)
        nova = d.keystone.auth('neutron')
        nova['endpoint_type'] = 'public'
        d._write_conf(os.path.join('neutron', 'neutron.conf'), {
            'DEFAULT': {
                'debug': d.debug,
                'core_plugin': 'ml2',
                'service_plugins': '',
                'auth_strategy': 'keystone',
                'transport_url': d.transport_url,
                'state_path': state,
                'api_paste_config': os.path.join(
                    d.bin, '..', 'etc', 'neutron', 'api-paste.ini'),
                'notify_nova_on_port_status_changes': True,
                'notify_nova_on_port_data_changes': True,
                # Tell nova within a second (the default batches for 2).
                'send_events_interval': 1,
            },
            'database': {'connection': d._db_url('neutron')},
            'keystone_authtoken': d.keystone.authtoken('neutron'),
            'nova': nova,
            'oslo_concurrency': {'lock_path': os.path.join(state, 'lock')},
        })
        d._write_conf(os.path.join('neutron', 'ml2_conf.ini'), {
            'ml2': {'mechanism_drivers': 'ovn', 'type_drivers': 'geneve',
                    'tenant_network_types': 'geneve',
                    'extension_drivers': 'port_security'},
            'ml2_type_geneve': {'vni_ranges': '1:1000',
                                'max_header_size': 38},
            'ovn': {'ovn_nb_connection': d.ovn.nb,
                    'ovn_sb_connection': d.ovn.sb,
                    'ovn_metadata_enabled': False,
                    'ovn_l3_scheduler': 'leastloaded'},
        })

    def db_sync(self):
        return ('neutron-db-sync', self.d._bin('neutron-db-manage'),
                '--config-file', os.path.join(self.etc, 'neutron.conf'),
                '--config-file', os.path.join(self.etc, 'ml2_conf.ini'),
                'upgrade', 'heads')

    def start(self):
        d = self.d
        # Each worker initialises the OVN driver after uWSGI forks it.
        svc = d._uwsgi('neutron-api', 'neutron.wsgi.api:application',
                       self.port, {'OS_NEUTRON_CONFIG_DIR': self.etc,
                                   'OS_NEUTRON_CONFIG_FILES':
                                   'neutron.conf;ml2_conf.ini'},
                       threads=2, lazy=True)
        d.add_service(svc)
        d.keystone.register('network', 'neutron', self.url)
        return svc

    def wait(self):
        self.d._wait_http(self.d.services['neutron-api'],
                          self.url + '/v2.0/networks',
                          ok=lambda status: status == 401)

    # The REST API, as the admin
    def request(self, method, path, body=None):
        return client.call(method, self.url + '/v2.0' + path,
                           self.d.keystone.client.token(), body)

    def create_network(self):
        t0 = time.monotonic()
        net = self.request('POST', '/networks', {'network': {
            'name': NETWORK, 'provider:network_type': 'geneve'}})['network']
        self.request('POST', '/subnets', {'subnet': {
            'network_id': net['id'], 'ip_version': 4, 'cidr': CIDR,
            'enable_dhcp': False, 'name': NETWORK + '-subnet'}})
        self.network_id = net['id']
        self.d.progress('network %s (%s, geneve, no DHCP) in %.1fs',
                        NETWORK, CIDR, time.monotonic() - t0)
        return net['id']

    def create_port(self, name):
        return self.request('POST', '/ports', {'port': {
            'network_id': self.network_id, 'name': name}})['port']

    def show_port(self, port_id):
        return self.request('GET', '/ports/%s' % port_id)['port']

    def delete_port(self, port_id):
        try:
            self.request('DELETE', '/ports/%s' % port_id)
        except client.APIError as e:
            if ': 404 ' not in str(e):
                raise

    def agents_alive(self, hosts):
        agents = self.request('GET', '/agents')['agents']
        alive = {a['host'] for a in agents if a['alive'] and
                 a['agent_type'] == 'OVN Controller agent'}
        return set(hosts) <= alive
