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

Return codes: 0 nothing found; 3 found, nothing changed; 4 found and
``--delete`` acted on all of it; 1 something could not be done.
"""

import json
import sys


def build_manager(host=None):
    """A compute manager for ``host`` with its driver initialised.

    The manager is never started as a service: it only lends its driver,
    placement client and nova's helpers to :mod:`nova_evac_cleanup.recovery`.
    """
    from nova_evac_cleanup import manager

    compute = manager.ComputeManager(host=host)
    compute.driver.init_host(host=compute.host)
    return compute


def run(delete=False, as_json=False, out=None, host=None, compute=None):
    """The command without its set-up: usable in-process.

    :param compute: a compute manager; :func:`build_manager` by default
    :returns: the return code
    """
    from nova import context as nova_context

    from nova_evac_cleanup import recovery

    out = out or sys.stdout
    compute = compute or build_manager(host)
    report = recovery.audit(compute, nova_context.get_admin_context(),
                            delete=delete)
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
    if report['delete'] and not report['orphaned_allocations']:
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
        add('    guest: %s' % (e['guest'] or 'none'))
        for path, size in sorted(e['files'].items()):
            add('    file: %s (%d bytes)' % (path, size))
        add('    disks: %s' % e['disks'])
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
        for note in e['notes']:
            add('  %s: %s' % (e['instance'], note))
        for error in e['errors']:
            add('  %s: NOT DONE: %s' % (e['instance'], error))
    return '\n'.join(lines) + '\n'


def main(argv=None):
    # As nova's entry points do: set up nova's concurrency mode before any
    # other nova module is loaded.
    from nova import monkey_patch
    monkey_patch.patch(backend='threading')

    from nova.conductor import rpcapi as conductor_rpcapi
    import nova.conf
    from nova import config
    from nova import objects
    from nova.objects import base as objects_base
    from oslo_config import cfg
    from oslo_log import log as logging

    import nova_evac_cleanup

    conf = nova.conf.CONF

    def add_parsers(subparsers):
        parser = subparsers.add_parser(
            'audit', help='Report, and with --delete clean up, what failed '
                          'or interrupted evacuations left on this host.')
        parser.add_argument('--delete', action='store_true',
                            help='Do what the report says --delete would.')
        parser.add_argument('--json', action='store_true',
                            help='Print the report as JSON.')

    conf.register_cli_opt(cfg.SubCommandOpt(
        'command', title='Commands', handler=add_parsers))
    argv = list(sys.argv if argv is None else argv)
    config.parse_args(argv)
    logging.setup(conf, 'nova')
    objects.register_all()
    nova_evac_cleanup.install()
    if not conf.database.connection:
        # No database here: go through nova-conductor like nova-compute.
        objects_base.NovaObject.indirection_api = (
            conductor_rpcapi.ConductorAPI())
    return run(delete=conf.command.delete, as_json=conf.command.json)
