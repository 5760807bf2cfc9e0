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

"""``nova-evac-cleanup audit [--delete] [--json]``: on a compute host.

Reports, in the order of the orphaned-allocation runbook, what failed or
interrupted evacuations to this host left behind, and with ``--delete``
does what the start-up sweep (``[evacuate_cleanup] sweep_on_start``) does,
through the same code (:mod:`nova_evac_cleanup.recovery`). Run it with the
compute host's own configuration files, like nova-compute::

    nova-evac-cleanup --config-file /etc/nova/nova.conf audit

It loads the host's compute driver, and reaches the database directly when
``[database] connection`` is set (as nova-manage does) or through
nova-conductor otherwise (as nova-compute does).

It never initialises the driver (no ``init_host``, which on libvirt powers
down the dedicated CPUs no guest uses, under guests that still run), and
without ``--delete`` it writes nothing anywhere (nova's shared-storage
check, which writes a probe file, is never made). With ``--delete`` it
takes the host's lock (:mod:`nova_evac_cleanup.host_lock`) and refuses to
run while nova-compute holds it, whatever the service's state in the
database says, then does what the start-up sweep does: it ends the
interrupted evacuations this host journaled, finishes what a sweep or an
audit killed half-way had begun, and forgets the entries nothing is left
of.

Return codes: 0 nothing found; 3 found, nothing changed; 4 found and
``--delete`` ended all it may end; 1 something could not be done, or the
command could not start (one line on standard error says why).
"""

import json
import sys

from oslo_config import cfg

CONF = cfg.CONF


def build_manager(host=None):
    """A compute manager for ``host``, lending its driver and helpers.

    nova's own manager, never this project's (which runs as nova's own on
    a patched nova), and never started as a service nor its driver
    initialised: it only lends its driver, placement client and nova's
    helpers to :mod:`nova_evac_cleanup.audit`. The libvirt driver connects
    to libvirtd on its first call.
    """
    from nova.compute import manager

    return manager.ComputeManager(host=host)


def run(delete=False, as_json=False, out=None, host=None, compute=None):
    """The command without its set-up: usable in-process.

    :param compute: a compute manager; :func:`build_manager` by default
    :returns: the return code
        (1 and nothing done, with ``delete``, while nova-compute or another
        audit holds the host's lock)
    """
    from nova import context as nova_context

    from nova_evac_cleanup import audit
    from nova_evac_cleanup import host_lock

    out = out or sys.stdout
    if delete:
        # Refuse before anything is loaded.
        host = host or (compute.host if compute else CONF.host)
        try:
            host_lock.acquire(host)
        except host_lock.HostLockHeld as error:
            sys.stderr.write('nova-evac-cleanup: refusing --delete: %s\n' %
                             error)
            return 1
    try:
        compute = compute or build_manager(host)
        report = audit.report(compute, nova_context.get_admin_context(),
                              delete=delete)
    finally:
        if delete:
            host_lock.release(host)
    if as_json:
        out.write(json.dumps(report, indent=2, sort_keys=True) + '\n')
    else:
        out.write(format_report(report))
    return return_code(report)


def return_code(report):
    evacuations = report['evacuations']
    if any(e['errors'] for e in evacuations):
        return 1
    if not evacuations and not report['orphaned_allocations']:
        return 0
    if report['delete'] and not report['orphaned_allocations'] and all(
            e['ended'] for e in evacuations):
        return 4
    return 3


def format_report(report):
    """The report as text, in the runbook's order."""
    lines = []
    add = lines.append
    host = report['host']
    add('Evacuations to %s (nova-compute there is %s)' % (
        host, 'up' if report['compute_service_up'] else 'down'))
    if not report['evacuations']:
        add('  nothing left by failed or interrupted evacuations')
    # 1. Leftovers on this host.
    add('')
    add('1. Leftovers of failed or interrupted evacuations on %s' % host)
    for e in report['evacuations']:
        add('  instance %s: %s, migration %s (%s) from %s' % (
            e['instance'], e['kind'], e['migration'],
            e['migration_status'], e['source_compute']))
        add('    %s' % e['reason'])
        add('    guest: %s' % (e['guest'] or 'none'))
        for path, size in sorted(e['files'].items()):
            add('    file: %s (%d bytes)' % (path, size))
        add('    disks: %s' % e['disks'])
        if e['refuses_evacuations']:
            add('    refuses the next evacuation of this server to %s until '
                'it is removed' % host)
        for rp, resources in sorted(e['allocation_here'].items()):
            add('    allocation against %s: %s' % (rp, resources))
    # 2. Where each instance is.
    add('')
    add('2. Instances')
    for e in report['evacuations']:
        if not e['instance_exists']:
            add('  %s: deleted' % e['instance'])
        else:
            add('  %s: on %s, %s, task state %s' % (
                e['instance'], e['instance_host'], e['vm_state'],
                e['task_state']))
    # 3. Allocations.
    add('')
    add('3. Allocations')
    for o in report['orphaned_allocations']:
        add('  orphaned: consumer %s on %s: %s%s' % (
            o['consumer'], o['provider'], o['resources'],
            ' (an evacuation above)' if o['evacuation_finding'] else
            '; check it, then: nova-manage placement audit --delete '
            '--resource_provider %s' % o['provider']))
    for uuid in report['missing_allocations']:
        add('  missing: instance %s %s no allocation; '
            'nova-manage placement heal_allocations --instance %s' % (
                uuid, 'has' if report['delete'] else 'would have', uuid))
    if not (report['orphaned_allocations'] or
            report['missing_allocations']):
        add('  none orphaned or missing')
    # 4. What --delete does.
    add('')
    add('4. %s' % ('Done (--delete)' if report['delete'] else
                   'What --delete would do'))
    for e in report['evacuations']:
        for item in (e['done'] if report['delete'] else e['actions']):
            add('  %s: %s' % (e['instance'], item))
        for command in e['commands']:
            add('  %s: by hand, once checked: %s' % (e['instance'], command))
        for error in e['errors']:
            add('  %s: NOT DONE: %s' % (e['instance'], error))
    return '\n'.join(lines) + '\n'


def main(argv=None):
    # As nova-compute does, on every nova release: importing its entry
    # point sets up nova's concurrency mode (eventlet monkey patching or
    # threading) before any other nova module is loaded.
    import nova.cmd.compute  # noqa: F401

    from nova.conductor import rpcapi as conductor_rpcapi
    import nova.conf
    from nova import config
    from nova import objects
    from nova.objects import base as objects_base
    from oslo_log import log as logging

    from nova_evac_cleanup import conf as evac_conf

    conf = nova.conf.CONF
    evac_conf.register_opts(conf)

    def add_parsers(subparsers):
        parser = subparsers.add_parser(
            'audit', help='Report, and with --delete clean up, what failed '
                          'or interrupted evacuations left on this host.')
        parser.add_argument('--delete', action='store_true',
                            help='End the interrupted evacuations this host '
                                 'journaled, as the start-up sweep does.')
        parser.add_argument('--json', action='store_true',
                            help='Print the report as JSON.')

    conf.register_cli_opt(cfg.SubCommandOpt(
        'command', title='Commands', handler=add_parsers))
    argv = list(sys.argv if argv is None else argv)
    try:
        config.parse_args(argv)
        # The report goes to standard output, the log (unless a log file is
        # configured) to standard error.
        conf.set_default('use_stderr', True)
        logging.setup(conf, 'nova')
        objects.register_all()
        if not conf.database.connection:
            # No database here: go through nova-conductor like nova-compute.
            objects_base.NovaObject.indirection_api = (
                conductor_rpcapi.ConductorAPI())
        return run(delete=conf.command.delete, as_json=conf.command.json)
    except Exception as error:
        # One clear line, not a traceback; --debug logs the traceback.
        logging.getLogger(__name__).debug('audit failed', exc_info=True)
        sys.stderr.write('nova-evac-cleanup: error: %s\n' % describe(error))
        return 1


def describe(error):
    """One line saying what went wrong, and where to look."""
    text = ' '.join(str(error).split()) or repr(error)
    line = '%s: %s' % (type(error).__name__, text)
    module = type(error).__module__ or ''
    if module.startswith(('keystoneauth1', 'openstack')):
        line += (' (placement: check the [placement] options of the '
                 'configuration: auth_type, auth_url and credentials, or '
                 'endpoint_override)')
    return line
