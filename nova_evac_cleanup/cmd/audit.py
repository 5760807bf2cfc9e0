# SPDX-License-Identifier: Apache-2.0

"""Audit, and with --delete clean up, what failed or interrupted
evacuations left on this compute host (guests, files, journal entries,
allocations), and list the ports and volumes they have not given back to
it yet. Run it on the host, with its nova-compute's configuration.
"""

import json
import logging
import sys
import traceback

from oslo_config import cfg
import pbr.version

from nova_evac_cleanup.cmd import configuration

CONF = cfg.CONF
PROG = 'nova-evac-cleanup'
NOTHING_FOUND, FAILED, USAGE_ERROR, FOUND, ENDED, CONFIG_ERROR = range(6)
#: What --help says of the exit codes (tests/unit/test_cli.py checks them).
EPILOG = (
    'Exit codes: 0 nothing found; 3 found: something is left (without '
    '--delete, nothing was changed); 4 found, and --delete ended all it may '
    'end; 1 something could not be done; 2 wrong command line; 5 '
    'configuration problem: a configuration file, the [placement] '
    'credentials or the database (named on standard error).')
#: One parser (options before or after the command); main() may run again.
_OPTS = [
    cfg.StrOpt('command', positional=True, choices=['audit'],
               help='audit (options may come before or after it)'),
    cfg.BoolOpt('delete', default=False,
                help='End the interrupted evacuations this host journaled, '
                     'as the start-up sweep does.'),
    cfg.BoolOpt('json', default=False, help='Print the report as JSON.'),
]


def version_line(prog):
    from nova import version  # pbr only: loads none of nova's services

    return '%s %s (nova %s)' % (prog, pbr.version.VersionInfo(
        'nova-evac-cleanup').release_string(), version.version_string())


def build_manager(host=None):
    from nova.compute import manager  # nova's own, never started

    return manager.ComputeManager(host=host)


def run(delete=False, as_json=False, out=None, host=None):
    """The command without its set-up; returns the exit code."""
    from nova import context as nova_context

    from nova_evac_cleanup import audit
    from nova_evac_cleanup import host_lock

    host, lock = host or CONF.host, None
    if delete:  # refused before anything is loaded
        try:
            lock = host_lock.acquire(host)
        except host_lock.HostLockHeld as error:
            sys.stderr.write('%s: refusing --delete: %s\n' % (PROG, error))
            return FAILED
    try:
        report = audit.report(build_manager(host),
                              nova_context.get_admin_context(), delete=delete)
    finally:
        host_lock.release(lock)
    (out or sys.stdout).write(json.dumps(report, indent=2, sort_keys=True) +
                              '\n' if as_json else audit.text(report))
    evacuations = report['evacuations']
    left = report.get('not_given_back')
    if any(e['errors'] for e in evacuations):
        return FAILED
    if not (evacuations or left):
        return NOTHING_FOUND
    return ENDED if report['delete'] and not left and all(
        e['ended'] for e in evacuations) else FOUND


def _fail(code, line, debug):
    if debug and sys.exc_info()[0] is not None:
        traceback.print_exc()
    sys.stderr.write('%s: error: %s\n' % (PROG, line))
    return code


def main(argv=None):
    args = list(sys.argv if argv is None else argv)[1:]
    debug = '--debug' in args or '-d' in args
    logging.captureWarnings(True)  # as oslo.log does
    if not debug:  # nova's modules log as they load, before the log is set
        logging.getLogger().addHandler(logging.NullHandler())
    try:
        # First, as nova-compute does: it sets up nova's concurrency mode
        # (nova 34 reads --config-file and --config-dir of sys.argv for it).
        import nova.cmd.compute  # noqa: F401
        from nova.conductor import rpcapi as conductor_rpcapi
        from nova import config  # registers nova's options on CONF
        from nova import objects
        from nova.objects import base as objects_base
        from oslo_log import log

        from nova_evac_cleanup import conf as evac_conf

        evac_conf.register_opts(CONF)
        log.register_options(CONF)
        CONF.clear()
        CONF.register_cli_opts(_OPTS)
        # --help, --version, usage errors (SystemExit), files and options,
        # unconnected; then nova's config.parse_args on the same arguments.
        CONF(args, project='nova', prog=PROG, version=version_line(PROG),
             usage='%(prog)s [OPTIONS] audit [--delete] [--json]',
             description=__doc__, epilog=EPILOG)
        debug = CONF.debug
        problem = configuration.problem(CONF)
    except SystemExit as done:
        return done.code or 0
    except cfg.Error as error:  # a file missing, unreadable, unparsable
        problem = configuration.describe(error)
    if problem:
        return _fail(CONFIG_ERROR, problem, debug)
    try:
        CONF.clear()
        config.parse_args([PROG] + args,
                          default_config_files=CONF.default_config_files)
        CONF.set_default('use_stderr', True)  # the report alone on stdout
        log.setup(CONF, 'nova')
        for handler in [] if debug else logging.getLogger().handlers:
            # On the terminal, only errors and this project's warnings.
            if (isinstance(handler, logging.StreamHandler) and
                    handler.stream in (sys.stderr, sys.__stderr__)):
                handler.addFilter(lambda record: record.levelno >= (
                    logging.WARNING if record.name.startswith(
                        'nova_evac_cleanup') else logging.ERROR))
        objects.register_all()
        if not CONF.database.connection:  # through nova-conductor
            objects_base.NovaObject.indirection_api = (
                conductor_rpcapi.ConductorAPI())
        return run(delete=CONF.delete, as_json=CONF.json)
    except Exception as error:
        return _fail(FAILED, configuration.describe(error), debug)
