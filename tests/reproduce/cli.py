# SPDX-License-Identifier: Apache-2.0

"""``tox -e reproduce``: show the bug and the fix on real nova.

It starts nova in-process (API, conductor, scheduler, placement and two
computes on the fake libvirt driver) twice, once with stock nova and once
with this project's compute manager, and plays the same story on both:
boot a server on compute0, let compute0 fail, evacuate to compute1 with a
failure injected in compute1's spawn, look at what is left on compute1,
then evacuate again. It ends with both runs side by side.

Exit status: 0 when stock nova behaved as the bug says it does (for the
chosen stage and storage) and the fixed computes left compute1 clean, 1
otherwise, 2 for a bad command line. With ``--only`` just that half is
judged.

Needs nova's test tree (shipped in nova's wheel) and openstack-placement,
as the functional tests do. Nothing here imports nova at module level:
:func:`bootstrap` must choose eventlet and monkey patch first.
"""

import argparse
import json
import logging
import os
import sys
import time
import warnings


def bootstrap():
    """Prepare the process for nova's functional fixtures.

    Runs nova in eventlet mode, as nova's functional tests do, makes the
    test fixtures capture what nova prints, and keeps import-time warnings
    and log records off the terminal. Nothing of nova may be imported
    before this.
    """
    os.environ['OS_NOVA_DISABLE_EVENTLET_PATCHING'] = 'False'
    # oslotest's BaseTestCase captures stdout and stderr with these.
    os.environ['OS_STDOUT_CAPTURE'] = '1'
    os.environ['OS_STDERR_CAPTURE'] = '1'
    os.environ.setdefault('OS_TEST_TIMEOUT', '160')
    warnings.simplefilter('ignore')
    quiet_logging()
    # nova >= 32.0.0 patches in patch(); 31.x did when this is imported.
    from nova import monkey_patch
    getattr(monkey_patch, 'patch', lambda: None)()


def quiet_logging(stream=None):
    """Send log records outside the tests to ``stream``, or nowhere.

    nova's test fixtures capture records while a story runs; before and
    after (imports, thread pools shutting down) the root logger's handlers
    apply. Importing nova's test tree installs one writing to stdout.
    """
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    if stream is None:
        root.addHandler(logging.NullHandler())
    else:
        handler = logging.StreamHandler(stream)
        handler.setFormatter(logging.Formatter(
            '%(asctime)s %(levelname)s [%(name)s] %(message)s'))
        root.addHandler(handler)


class _Parser(argparse.ArgumentParser):
    """argparse, with its error on one line."""

    def error(self, message):
        self.exit(2, '%s: error: %s (see --help)\n' % (
            self.prog, ' '.join(message.split())))


def build_parser(stages, storage_modes):
    parser = _Parser(
        prog='tox -e reproduce --',
        description='Reproduce, on real nova running in-process, what a '
                    'nova evacuation whose spawn fails on the destination '
                    'leaves behind there, with stock nova and with this '
                    "project's fix, and compare.")
    parser.add_argument(
        '--stage', choices=stages, default='get_guest_xml',
        help='where spawn fails on compute1 (default: %(default)s, where '
             'libvirt leaves a stale disk)')
    parser.add_argument(
        '--storage', choices=storage_modes, default='non-shared',
        help='the storage layout (default: %(default)s)')
    parser.add_argument(
        '--only', choices=('stock', 'fixed'),
        help='run and judge only stock nova or only the fixed computes')
    parser.add_argument(
        '--json', action='store_true',
        help='print a machine-readable result on stdout and nothing else')
    parser.add_argument(
        '-v', '--verbose', action='count', default=0,
        help="show nova's logs on stderr (-vv: debug too) and full "
             'tracebacks')
    return parser


class Progress(object):
    """Progress lines on stderr, so a person knows it is working."""

    def __init__(self, stream, prefix=''):
        self.stream = stream
        self.prefix = prefix
        self.started = time.monotonic()

    def __call__(self, line):
        self.stream.write('[%5.1fs] %s%s\n' % (
            time.monotonic() - self.started, self.prefix, line))
        self.stream.flush()


def main(argv=None):
    # Whatever nova prints goes through the captured sys.stdout/stderr of
    # its test fixtures; keep the real ones for the story and the progress.
    stdout, stderr = sys.stdout, sys.stderr
    bootstrap()
    from tests.harness import fake_libvirt

    # shared-unwritable is a behaviour table mode; the story tells the
    # other three.
    args = build_parser(fake_libvirt.STAGES,
                        tuple(mode for mode in fake_libvirt.STORAGE_MODES
                              if mode != 'shared-unwritable')
                        ).parse_args(argv)
    verbose = args.verbose
    quiet_logging(stderr if verbose else None)
    try:
        return _run(args, stdout, stderr)
    except KeyboardInterrupt:
        stderr.write('reproduce: interrupted\n')
        return 130
    except Exception as exc:
        if verbose:
            raise
        stderr.write('reproduce: error: %s: %s (run with -v for '
                     'the traceback)\n' % (type(exc).__name__, exc))
        return 1


def _run(args, stdout, stderr):
    progress = Progress(stderr)
    progress('importing nova ...')
    from tests.reproduce import report
    from tests.reproduce import story
    from tests.reproduce import verdict
    # Importing nova's test tree installs a root log handler on stdout.
    quiet_logging(stderr if args.verbose else None)

    names = [args.only] if args.only else ['stock', 'fixed']
    titles = {'stock': 'stock nova (without the fix)',
              'fixed': "with the fix (this project's compute manager)"}
    started = time.monotonic()
    stories = {}
    for name in names:
        progress.prefix = '%s: ' % name
        stories[name] = story.play(
            fixed=name == 'fixed', stage=args.stage, storage=args.storage,
            progress=progress,
            log_stream=stderr if args.verbose else None,
            log_level=logging.DEBUG if args.verbose > 1 else logging.INFO)
        if stories[name]['error']:
            progress('the story stopped early: %s' % stories[name]['error'])
            if args.verbose and stories[name]['traceback']:
                stderr.write(stories[name]['traceback'] + '\n')
        else:
            progress('done (%.1f s)' % stories[name]['elapsed_seconds'])
    progress.prefix = ''
    judgement = verdict.judge(stories)
    elapsed = round(time.monotonic() - started, 1)

    if args.json:
        result = {
            'stage': args.stage, 'storage': args.storage,
            'only': args.only, 'ok': judgement['ok'],
            'exit_code': judgement['exit_code'],
            'elapsed_seconds': elapsed, 'runs': {}}
        for name in names:
            run = dict(stories[name])
            if not args.verbose:
                run.pop('traceback', None)
            result['runs'][name] = {
                'observations': run,
                'verdict': judgement['verdicts'][name]}
        stdout.write(json.dumps(result, indent=2, sort_keys=True) + '\n')
    else:
        for name in names:
            stdout.write(report.story_text(
                titles[name].capitalize(), stories[name],
                judgement['verdicts'][name]) + '\n')
        stdout.write(report.summary_text(
            args.stage, args.storage, stories, judgement) + '\n')
    stdout.flush()
    progress('finished in %.1f s' % elapsed)
    return judgement['exit_code']
