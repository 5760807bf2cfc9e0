# SPDX-License-Identifier: Apache-2.0

"""``nova-evac-cleanup audit [--delete] [--json]``, on a compute host."""

import json
import logging
import sys
import traceback

from oslo_config import cfg

from nova_evac_cleanup import cmd
from nova_evac_cleanup.cmd import configuration

CONF = cfg.CONF

PROG = 'nova-evac-cleanup'

#: The exit codes, which --help prints.
NOTHING_FOUND, FAILED, USAGE_ERROR, FOUND, ENDED, CONFIG_ERROR = range(6)

EXIT_CODES = (
    (NOTHING_FOUND, 'nothing found'),
    (FOUND, 'found: something is left (without --delete, nothing was '
            'changed)'),
    (ENDED, 'found, and --delete ended all it may end'),
    (FAILED, 'something could not be done (one line on standard error '
             'says what)'),
    (USAGE_ERROR, 'wrong command line'),
    (CONFIG_ERROR, 'configuration problem: a configuration file missing or '
                   'unreadable, none found, no [placement] credentials, or '
                   'no database (one line on standard error names the file '
                   'or the option)'),
)

DESCRIPTION = (
    'Audit, and with --delete clean up, what failed or interrupted '
    'evacuations left on this compute host: guests, instance files, '
    'journal entries and placement allocations; and list the ports and '
    'volumes failed evacuations from this host have not given back to it '
    'yet. Run it on the compute host with the configuration files of its '
    'nova-compute. Options may come before or after the command.')


def build_manager(host=None):
    """nova's own compute manager for ``host``, never started."""
    from nova.compute import manager

    return manager.ComputeManager(host=host)


def run(delete=False, as_json=False, out=None, host=None, compute=None):
    """The command without its set-up; returns the exit code."""
    from nova import context as nova_context

    from nova_evac_cleanup import audit
    from nova_evac_cleanup import host_lock

    out = out or sys.stdout
    lock = None
    if delete:
        # Refused before anything is loaded.
        host = host or (compute.host if compute else CONF.host)
        try:
            lock = host_lock.acquire(host)
        except host_lock.HostLockHeld as error:
            sys.stderr.write('nova-evac-cleanup: refusing --delete: %s\n' %
                             error)
            return FAILED
    try:
        compute = compute or build_manager(host)
        report = audit.report(compute, nova_context.get_admin_context(),
                              delete=delete)
    finally:
        host_lock.release(lock)
    if as_json:
        out.write(json.dumps(report, indent=2, sort_keys=True) + '\n')
    else:
        out.write(audit.text(report))
    return return_code(report)


def return_code(report):
    evacuations = report['evacuations']
    left = report['orphaned_allocations'] or report.get('not_given_back')
    if any(e['errors'] for e in evacuations):
        return FAILED
    if not (evacuations or left):
        return NOTHING_FOUND
    if report['delete'] and not left and all(e['ended'] for e in evacuations):
        return ENDED
    return FOUND


#: Module constants: main() may run again in one process. Positional and
#: flags of one parser: options may come before or after the command.
_OPTS = [
    cfg.StrOpt('command', positional=True, choices=['audit'],
               help='audit: report, and with --delete clean up, what failed '
                    'or interrupted evacuations left on this host.'),
    cfg.BoolOpt('delete', default=False,
                help='End the interrupted evacuations this host journaled, '
                     'as the start-up sweep does.'),
    cfg.BoolOpt('json', default=False, help='Print the report as JSON.'),
]


def _quiet_terminal():
    """On the terminal only errors, and this project's warnings."""
    for handler in logging.getLogger().handlers:
        if (isinstance(handler, logging.StreamHandler) and
                handler.stream in (sys.stderr, sys.__stderr__)):
            handler.addFilter(lambda record: record.levelno >= (
                logging.WARNING if record.name.startswith('nova_evac_cleanup')
                else logging.ERROR))


def _fail(code, line, debug):
    """``line`` on standard error, after the traceback with --debug."""
    if debug and sys.exc_info()[0] is not None:
        traceback.print_exc()
    sys.stderr.write('%s: error: %s\n' % (PROG, line))
    return code


def main(argv=None):
    argv = list(sys.argv if argv is None else argv)
    debug = '--debug' in argv[1:] or '-d' in argv[1:]
    logging.captureWarnings(True)  # as oslo.log does
    if not debug:
        # nova's modules log as they load, before the log is set up.
        logging.getLogger().addHandler(logging.NullHandler())
    try:
        # First, as nova-compute does: it sets up nova's concurrency mode
        # (nova 34 reads --config-file and --config-dir of sys.argv for it).
        import nova.cmd.compute  # noqa: F401
    except cfg.Error as error:
        return _fail(CONFIG_ERROR, configuration.error_line(error), debug)

    from nova.conductor import rpcapi as conductor_rpcapi
    import nova.conf
    from nova import config
    from nova import objects
    from nova.objects import base as objects_base
    from oslo_log import log

    from nova_evac_cleanup import conf as evac_conf

    conf = nova.conf.CONF
    evac_conf.register_opts(conf)
    log.register_options(conf)
    conf.clear()
    conf.register_cli_opts(_OPTS)
    args = argv[1:]
    # --help, --version, usage errors and the files; nova's
    # config.parse_args then parses the same arguments and sets nova up.
    try:
        conf(args, project='nova', prog=PROG,
             version=cmd.version_line(PROG),
             usage='%(prog)s [OPTIONS] audit [--delete] [--json]',
             description=DESCRIPTION,
             epilog='Exit codes: ' + '; '.join(
                 '%d %s' % code for code in EXIT_CODES) + '.')
    except SystemExit as done:
        # --help, --version, or argparse's usage error (2)
        return done.code or 0
    except cfg.Error as error:
        return _fail(CONFIG_ERROR, configuration.error_line(error), debug)
    debug = conf.debug
    problem = configuration.problem(conf)
    if problem:
        return _fail(CONFIG_ERROR, problem, debug)
    try:
        conf.clear()
        config.parse_args([PROG] + args,
                          default_config_files=conf.default_config_files)
        # The report alone on standard output.
        conf.set_default('use_stderr', True)
        log.setup(conf, 'nova')
        if not debug:
            _quiet_terminal()
        objects.register_all()
        if not conf.database.connection:
            # Through nova-conductor, as nova-compute.
            objects_base.NovaObject.indirection_api = (
                conductor_rpcapi.ConductorAPI())
        return run(delete=conf.delete, as_json=conf.json)
    except Exception as error:
        return _fail(FAILED, configuration.describe(error), debug)
