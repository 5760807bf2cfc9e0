# SPDX-License-Identifier: Apache-2.0

"""Masakari on the deployment, for the HA scenario.

:class:`HA` starts, on the deployment's MariaDB, RabbitMQ vhost and
keystone (:mod:`.identity`), ``masakari-api`` under uWSGI with
keystonemiddleware's ``auth_token`` (Masakari's own ``api-paste.ini``,
installed by its wheel) and ``masakari-engine`` with the taskflow driver;
``instance-ha`` joins the catalog.

Masakari's engine reaches nova as in production: novaclient through a
keystone session of the ``masakari`` service user, the compute endpoint
from the catalog.

Masakari's periodic retry and waits are shortened by configuration
(:data:`ENGINE_OPTS`); everything else is its default, as its install
guide configures it.
"""

import os
import shutil
import sys
import time

from tests.deployment.tier import client
from tests.deployment.tier import hypervisor
from tests.deployment.tier import identity
from tests.deployment.tier import services

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
    """masakari-api and masakari-engine of one deployment.

    :param d: the :class:`~.services.Deployment`, already started
    """

    def __init__(self, d):
        self.d = d
        self.port = services.free_port()
        self.masakari_url = 'http://127.0.0.1:%d' % self.port
        self.etc = d.path('etc', 'ha')
        self.client = None
        self.started = False

    def _masakari_conf(self):
        keystone = self.d.keystone
        default = {
            'debug': self.d.debug,
            'transport_url': self.d.transport_url,
            'auth_strategy': 'keystone',
            'os_privileged_user_name': 'masakari',
            'os_privileged_user_password': identity.service_password(
                'masakari'),
            'os_privileged_user_tenant': 'service',
            'os_privileged_user_auth_url': keystone.url,
            'os_region_name': identity.REGION,
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
            'keystone_authtoken': keystone.authtoken('masakari'),
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
        mk_conf = self._masakari_conf()
        d._run(d._bin('masakari-manage'), '--config-file', mk_conf, 'db',
               'sync')
        # Eventlet-patched like nova-api: one thread (see services).
        api = d._uwsgi('masakari-api', 'masakari.wsgi.api:application',
                       self.port, {'OS_MASAKARI_CONFIG_DIR': self.etc},
                       threads=1)
        # masakari.wsgi.api parses its configuration twice, the second
        # time from sys.argv alone (then only /etc/masakari is searched):
        # name the file there too.
        api.argv += ['--pyargv', '--config-file %s' % mk_conf]
        engine = services.Service('masakari-engine', [
            d._bin('masakari-engine'), '--config-file', mk_conf],
            d.path('logs', 'masakari-engine.log'))
        d.add_service(api)
        d.add_service(engine)
        d.keystone.register('instance-ha', 'masakari',
                            self.masakari_url + '/v1')
        self.client = Client(d.keystone.client, self.masakari_url)
        d._wait_http(api, self.masakari_url + '/')
        # The engine consumes its topic once it runs its periodic tasks.
        hypervisor.wait_for(self._engine_ready, 120,
                            'masakari-engine consuming', interval=0.5)
        d.timings['Masakari start-up'] = time.monotonic() - t0
        d.progress('masakari-api and masakari-engine up (%.1fs)',
                   time.monotonic() - t0)
        self.started = True

    def _engine_ready(self):
        engine = self.d.services['masakari-engine']
        engine.check()
        with open(engine.log_file, 'rb') as f:
            text = f.read()
        return b'Running periodic task' in text


class Client(object):
    """Masakari's REST API, as the admin user.

    :param keystone: the deployment's :class:`~.identity.Client`
    """

    def __init__(self, keystone, masakari_url):
        self.keystone = keystone
        self.masakari_url = masakari_url

    def _request(self, method, url, body=None, headers=None):
        return client.call(method, url, self.keystone.token(), body,
                           headers)

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
