# SPDX-License-Identifier: Apache-2.0

"""OVN for ML2/OVN: its databases and northd once, a chassis per host.

:class:`Central` runs the northbound and southbound ``ovsdb-server`` and
``ovn-northd``, on unix sockets in the run's directory (a path reaches
every network namespace; no port to forward). :class:`Chassis` is one
compute host's switch, in that host's network namespace: its own
``ovsdb-server``, ``ovs-vswitchd`` with the userspace datapath (there is
no openvswitch kernel module here: every bridge has
``datapath_type=netdev``) and ``ovn-controller``, whose ``system-id`` and
``hostname`` are nova's host name (ML2/OVN binds a port to the chassis of
the host nova names). Its geneve endpoint is the address of ``br-phy``, a
netdev bridge holding the host's veth to the underlay bridge
(:mod:`.netns`). Each has its own run directory (``OVS_RUNDIR``): the
bridges' management sockets of two hosts would clash in the default one.
"""

import csv
import os
import signal
import subprocess

from tests.deployment.tier import hypervisor


def _ovsdb_server(d, name, db, sock, extra_env=None, argv_wrap=None):
    from tests.deployment.tier import services

    rundir = os.path.dirname(sock)
    argv = ['ovsdb-server', db, '--remote=punix:%s' % sock,
            '--unixctl=%s' % os.path.join(rundir, '%s.ctl' % name),
            '--pidfile=%s' % os.path.join(rundir, '%s.pid' % name),
            '--no-chdir', '-vconsole:info', '-vsyslog:off', '-vfile:off']
    svc = services.Service(name, argv_wrap(argv) if argv_wrap else argv,
                           d.path('logs', '%s.log' % name), env=extra_env)
    d.add_service(svc)
    return svc


class Central(object):
    """OVN's northbound and southbound databases and ovn-northd."""

    def __init__(self, d):
        self.d = d
        self.dir = d.path('ovn')
        self.nb_sock = os.path.join(self.dir, 'nb.sock')
        self.sb_sock = os.path.join(self.dir, 'sb.sock')
        self.nb = 'unix:%s' % self.nb_sock
        self.sb = 'unix:%s' % self.sb_sock

    def start(self):
        d = self.d
        os.makedirs(self.dir, exist_ok=True)
        for name, schema in (('nb', 'ovn-nb.ovsschema'),
                             ('sb', 'ovn-sb.ovsschema')):
            db = os.path.join(self.dir, '%s.db' % name)
            d._run('ovsdb-tool', 'create', db,
                   os.path.join('/usr/share/ovn', schema))
            _ovsdb_server(d, 'ovn-%s-ovsdb' % name, db,
                          os.path.join(self.dir, '%s.sock' % name))
        northd = [
            'ovn-northd', '--ovnnb-db=%s' % self.nb,
            '--ovnsb-db=%s' % self.sb, '--no-chdir',
            '--unixctl=%s' % os.path.join(self.dir, 'northd.ctl'),
            '--pidfile=%s' % os.path.join(self.dir, 'northd.pid'),
            '-vconsole:info', '-vsyslog:off', '-vfile:off']
        for sock in (self.nb_sock, self.sb_sock):
            hypervisor.wait_for(lambda: os.path.exists(sock), 30, sock)
        from tests.deployment.tier import services

        d.add_service(services.Service('ovn-northd', northd,
                                       d.path('logs', 'ovn-northd.log')))

    def sbctl(self, *args):
        return subprocess.run(
            ['ovn-sbctl', '--db=%s' % self.sb, '--no-leader-only'] +
            list(args), capture_output=True, text=True, timeout=60,
            check=True).stdout

    def nbctl(self, *args):
        return subprocess.run(
            ['ovn-nbctl', '--db=%s' % self.nb, '--no-leader-only'] +
            list(args), capture_output=True, text=True, timeout=60,
            check=True).stdout

    def port_binding(self, port_id):
        """{'chassis': host or None, 'requested-chassis': ..., 'up': ...}.

        The chassis are named by their system-id, nova's host name.
        """
        out = self.sbctl(
            '--format=csv', '--data=bare', '--no-headings', '--columns',
            'chassis,options,up', 'find', 'Port_Binding',
            'logical_port=%s' % port_id).strip()
        if not out:
            return None
        chassis_uuid, options, up = next(iter(
            csv.reader([out])))
        chassis = None
        if chassis_uuid:
            chassis = self.sbctl('--data=bare', '--no-headings',
                                 '--columns=name', 'list', 'Chassis',
                                 chassis_uuid).strip() or chassis_uuid
        opts = dict(item.split('=', 1) for item in options.split()
                    if '=' in item)
        return {'chassis': chassis,
                'requested-chassis': opts.get('requested-chassis'),
                'up': up}

    def chassis_names(self):
        return self.sbctl('--data=bare', '--no-headings', '--columns=name',
                          'list', 'Chassis').split()


class Chassis(object):
    """One host's OVS (userspace datapath) and ovn-controller.

    :param netns: the host's :class:`~.netns.HostNetns`
    """

    #: The daemons' common arguments: logs on the console only.
    COMMON = ['--no-chdir', '-vconsole:info', '-vsyslog:off', '-vfile:off']

    def __init__(self, d, central, host, netns):
        self.d = d
        self.central = central
        self.host = host
        self.netns = netns
        self.dir = d.path('hosts', host, 'ovs')
        self.db = os.path.join(self.dir, 'conf.db')
        self.sock = os.path.join(self.dir, 'db.sock')
        self.env = {'OVS_RUNDIR': self.dir, 'OVN_RUNDIR': self.dir,
                    'OVS_DBDIR': self.dir, 'OVS_LOGDIR': self.dir}
        self.names = ['ovsdb-%s' % host, 'ovs-vswitchd-%s' % host,
                      'ovn-controller-%s' % host]

    def vsctl(self, *args, check=True):
        return subprocess.run(
            ['ovs-vsctl', '--db=unix:%s' % self.sock, '--timeout=30'] +
            list(args), capture_output=True, text=True, check=check,
            env=dict(os.environ, **self.env)).stdout

    def start(self, first=False, controller=True):
        """ovsdb-server, ovs-vswitchd and ovn-controller of the host.

        :param first: lay out the database and br-phy (the host's first
            start); later starts reuse them, as a rebooted host does.
        :param controller: start ovn-controller too; else the caller calls
            :meth:`start_controller` (an agent that comes up late)
        """
        from tests.deployment.tier import services

        d = self.d
        if first:
            os.makedirs(self.dir, exist_ok=True)
            d._run('ovsdb-tool', 'create', self.db,
                   '/usr/share/openvswitch/vswitch.ovsschema')
        _ovsdb_server(d, self.names[0], self.db, self.sock,
                      extra_env=self.env)
        hypervisor.wait_for(lambda: os.path.exists(self.sock), 30,
                            self.sock)
        if first:
            self.vsctl('--no-wait', 'init')
            self.vsctl(
                '--no-wait', 'set', 'Open_vSwitch', '.',
                'external_ids:system-id=%s' % self.host,
                'external_ids:hostname=%s' % self.host,
                'external_ids:ovn-remote=%s' % self.central.sb,
                'external_ids:ovn-encap-type=geneve',
                'external_ids:ovn-encap-ip=%s' %
                self.netns.address.split('/')[0],
                'external_ids:ovn-bridge=br-int',
                'external_ids:ovn-bridge-datapath-type=netdev')
        vswitchd = services.Service(
            self.names[1], self.netns.argv([
                'ovs-vswitchd', 'unix:%s' % self.sock,
                '--unixctl=%s' % os.path.join(self.dir, 'vswitchd.ctl'),
                '--pidfile=%s' % os.path.join(self.dir, 'vswitchd.pid')] +
                self.COMMON),
            d.path('logs', '%s.log' % self.names[1]), env=self.env)
        d.add_service(vswitchd)
        if first:
            self.vsctl('add-br', 'br-phy', '--', 'set', 'Bridge', 'br-phy',
                       'datapath_type=netdev', '--', 'add-port', 'br-phy',
                       'underlay')
        # br-phy's internal port is a tap device of ovs-vswitchd's: made
        # anew, without its address, at each start.
        hypervisor.wait_for(lambda: 'br-phy' in self.netns.links(), 30,
                            'br-phy of %s' % self.host)
        self.netns.run('ip', 'addr', 'replace', self.netns.address, 'dev',
                       'br-phy')
        self.netns.run('ip', 'link', 'set', 'br-phy', 'up')
        if controller:
            self.start_controller()

    def start_controller(self):
        """The host's ovn-controller, on its running switch."""
        from tests.deployment.tier import services

        controller = services.Service(
            self.names[2], self.netns.argv([
                # Its control socket goes in OVN_RUNDIR.
                'ovn-controller', 'unix:%s' % self.sock,
                '--pidfile=%s' % os.path.join(
                    self.dir, 'controller.pid')] + self.COMMON),
            self.d.path('logs', '%s.log' % self.names[2]), env=self.env)
        self.d.add_service(controller)

    def wait_registered(self, timeout=60):
        """Its chassis in the southbound database."""
        def registered():
            for name in self.names:
                self.d.services[name].check()
            return self.host in self.central.chassis_names()

        hypervisor.wait_for(registered, timeout,
                            'OVN chassis %s' % self.host, interval=0.5)

    def stop(self):
        """The host's switch dies with the host."""
        for name in self.names:
            svc = self.d.services.pop(name, None)
            if svc:
                svc.stop(signal.SIGKILL)
