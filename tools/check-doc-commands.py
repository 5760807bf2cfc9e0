# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.

"""Check every command the documentation shows, so it cannot drift.

Run by ``tox -e docs`` after the build, from the docs environment (which
has this project and nova installed). It reads ``README.rst`` and
``doc/source/**/*.rst`` and takes:

* each ``$ `` line (with its ``> `` continuation lines) of a ``..
  code-block:: console`` block;
* each non-empty ``ExecStart=`` line of any code block (systemd units).

and checks each command according to its program:

* this project's console scripts (and ``oslo-config-generator``): the
  command is run with ``--help`` (and ``SUBCOMMAND --help`` when it names
  one), and every option, subcommand and choice the page shows must be in
  that help; a file of this repository it names must exist;
* ``tox``: each ``-e`` environment and ``-m`` label must be in
  ``tox.ini``; arguments after ``--`` are checked against the console
  script the environment runs;
* ``pip install``: the name must be this project's distribution name;
* ``git am``, ``patch`` and ``for ... in $(cat FILE)`` loops: the files of
  this repository they name must exist (``tox -e patches`` applies them);
* ``cd``: nothing to check.

A command of any other program fails the check: teach this script how to
check it, or do not show it in a ``console`` block.
"""

import configparser
import glob
import importlib.metadata
import os
import re
import shlex
import shutil
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
#: How the pages name a checkout of this repository.
CHECKOUT = '/path/to/nova-evac-cleanup/'
DIST = 'nova-evac-cleanup'
#: Programs run with --help: this project's console scripts and the
#: generator the pages show.
HELP_PROGRAMS = {
    ep.name for ep in importlib.metadata.distribution(DIST).entry_points
    if ep.group == 'console_scripts'} | {'oslo-config-generator'}

_DIRECTIVE = re.compile(r'^(\s*)\.\. code-block::\s*(\S+)')
_FOR_LOOP = re.compile(
    r'^for (\w+) in \$\(cat (\S+)\); do (.*?);? done$')


def doc_files():
    files = [os.path.join(ROOT, 'README.rst')]
    files += sorted(glob.glob(os.path.join(ROOT, 'doc', 'source', '**',
                                           '*.rst'), recursive=True))
    return files


def commands_in(path):
    """Yield (line number, command) for each command shown in a file."""
    with open(path) as f:
        lines = f.read().splitlines()
    i = 0
    while i < len(lines):
        match = _DIRECTIVE.match(lines[i])
        i += 1
        if not match:
            continue
        indent, language = len(match.group(1)), match.group(2)
        while i < len(lines):
            line = lines[i]
            if line.strip() and len(line) - len(line.lstrip()) <= indent:
                break
            text = line.strip()
            if language == 'console' and text.startswith('$ '):
                start, command = i + 1, text[2:]
                while (i + 1 < len(lines) and
                       lines[i + 1].strip().startswith('> ')):
                    i += 1
                    command += ' ' + lines[i].strip()[2:]
                yield start, command
            elif text.startswith('ExecStart=') and text != 'ExecStart=':
                yield i + 1, text[len('ExecStart='):]
            i += 1


def repo_path(token):
    """The path in this repository a token names, or None."""
    if token.startswith(CHECKOUT):
        return os.path.join(ROOT, token[len(CHECKOUT):])
    if not token.startswith('/') and os.sep in token:
        return os.path.join(ROOT, token)
    return None


def check_paths(tokens):
    for token in tokens:
        path = repo_path(token.split('=', 1)[-1])
        if path and '$' not in path and not glob.glob(path):
            yield 'no such file in the repository: %s' % token


def run_help(argv):
    # The console scripts of the environment running this script.
    local = os.path.join(os.path.dirname(sys.executable), argv[0])
    if os.path.exists(local):
        argv = [local] + argv[1:]
    try:
        result = subprocess.run(argv + ['--help'], capture_output=True,
                                text=True, timeout=300)
    except OSError as error:
        return None, '%s: %s' % (' '.join(argv), error)
    if result.returncode != 0:
        return None, '%s --help exited %d: %s' % (
            ' '.join(argv), result.returncode, result.stderr.strip()[-500:])
    return result.stdout, None


def check_help_program(program, args):
    """Run ``program --help`` and find every word the command shows."""
    text, error = run_help([program])
    if error:
        yield error
        return
    # argparse shows subcommands in the usage as {a,b} ...
    subcommands = re.findall(r'\{([\w,-]+)\} \.\.\.', text)
    for token in args:
        if token.strip('[]') in ','.join(subcommands).split(','):
            sub_text, error = run_help([program, token])
            if error:
                yield error
                return
            text += sub_text
    for token in args:
        word = token.strip('[]').split('=', 1)[0]
        if word.startswith('/') or repo_path(word):
            continue
        if not re.search(r'(?<![\w-])%s(?![\w-])' % re.escape(word), text):
            yield '%r is not in the output of %s --help' % (word, program)
    yield from check_paths(args)


def tox_config():
    """tox.ini's environment names and labels."""
    parser = configparser.ConfigParser(interpolation=None)
    parser.read(os.path.join(ROOT, 'tox.ini'))
    envs = {}
    for section in parser.sections():
        if not section.startswith('testenv:'):
            continue
        for name in expand(section[len('testenv:'):]):
            envs[name] = parser[section].get('commands', '')
    labels = {}
    for line in parser['tox'].get('labels', '').splitlines():
        if '=' in line:
            label, names = line.split('=', 1)
            labels[label.strip()] = [n.strip() for n in names.split(',')]
    # py3 and the like are tox's own, run with [testenv].
    return envs, labels


def expand(name):
    """tox's brace expansion: release-{31,32}-stock."""
    match = re.search(r'\{([^}]*)\}', name)
    if not match:
        return [name]
    return [expanded for part in match.group(1).split(',')
            for expanded in expand(name[:match.start()] + part +
                                   name[match.end():])]


def check_tox(args):
    envs, labels = tox_config()
    if '--' in args:
        args, posargs = args[:args.index('--')], args[args.index('--') + 1:]
    else:
        posargs = None
    options = dict(zip(args, args[1:]))
    if '-e' not in options and '-m' not in options:
        yield 'tox %s: neither -e nor -m' % ' '.join(args)
    if '-m' in options and options['-m'] not in labels:
        yield 'no label %r in tox.ini' % options['-m']
    for label in labels.values():
        for name in label:
            if name not in envs and not re.match(r'^py\d*$', name):
                yield 'label names %r, not in tox.ini' % name
    for env in options.get('-e', '').split(',') if '-e' in options else []:
        if env not in envs and not re.match(r'^py\d*$', env):
            yield 'no environment %r in tox.ini' % env
        elif posargs and _module(envs[env]) in TEST_TREE_COMMANDS:
            yield from check_test_tree_command(_module(envs[env]), env,
                                               posargs)
        elif posargs:
            program = envs[env].split()[0] if envs[env].split() else ''
            if program not in HELP_PROGRAMS:
                yield ('tox -e %s -- ...: its command %r is no console '
                       'script to check the arguments against' %
                       (env, program))
            else:
                yield from check_help_program(program, posargs)


def _module(command):
    """``MODULE`` of a ``python -m MODULE ...`` command, or None."""
    words = command.split()
    if words[:2] == ['python', '-m'] and len(words) > 2:
        return words[2]
    return None


#: The commands of the test tree that tox environments run, and the file
#: holding each one's argument parser.
TEST_TREE_COMMANDS = {
    'tests.explore': os.path.join('tests', 'explore', '__main__.py'),
    'tests.reproduce': os.path.join('tests', 'reproduce', 'cli.py'),
}


def check_test_tree_command(module, env, args):
    """A test-tree command's options, read from its parser's source.

    It needs nova's test fixtures to run, which the docs environment has
    not.
    """
    with open(os.path.join(ROOT, TEST_TREE_COMMANDS[module])) as f:
        known = {'--help'} | set(re.findall(
            r"add_argument\(\s*(?:'-\w',\s*)?'(--[a-z-]+)'", f.read()))
    for arg in args:
        if arg.startswith('--') and arg.split('=')[0] not in known:
            yield 'tox -e %s -- %s: no such option' % (env, arg)


def check_pip(args):
    if args[:1] != ['install']:
        yield 'pip %s: only pip install is checked' % ' '.join(args)
        return
    names = [a for a in args[1:] if not a.startswith('-')]
    distribution = importlib.metadata.distribution(DIST).metadata['Name']
    for name in names:
        if name != distribution and not os.path.isdir(name):
            yield 'pip install %s: the distribution is %s' % (
                name, distribution)


def check_command(command):
    """The problems of one command, as strings."""
    loop = _FOR_LOOP.match(command)
    if loop:
        var, listing, body = loop.groups()
        path = repo_path(listing)
        if not path or not os.path.isfile(path):
            yield 'for loop: no such file in the repository: %s' % listing
            return
        with open(path) as f:
            entries = [e.strip() for e in f if e.strip()]
        for entry in entries:
            yield from check_command(body.replace('$' + var, entry))
        return
    tokens = shlex.split(command, comments=True)
    tokens = [t for t in tokens if t not in ('<', '>')]
    program, args = os.path.basename(tokens[0]), tokens[1:]
    if program == 'cd':
        return
    if program in HELP_PROGRAMS:
        yield from check_help_program(program, args)
    elif program == 'tox':
        yield from check_tox(args)
    elif program == 'pip':
        yield from check_pip(args)
    elif program in ('git', 'patch'):
        if program == 'git' and args[:1] != ['am']:
            yield 'git %s: only git am is checked' % ' '.join(args)
        if not shutil.which(program):
            yield '%s is not installed' % program
        yield from check_paths(args)
    else:
        yield 'no check for %r: teach %s how to check it' % (
            program, os.path.relpath(__file__, ROOT))


def main():
    failures = checked = 0
    for path in doc_files():
        for line, command in commands_in(path):
            checked += 1
            problems = list(check_command(command))
            where = '%s:%d' % (os.path.relpath(path, ROOT), line)
            for problem in problems:
                print('%s: %s\n    %s' % (where, problem, command))
            if problems:
                failures += 1
            else:
                print('%s: ok: %s' % (where, command))
    print('%d commands checked, %d failed' % (checked, failures))
    return 1 if failures or not checked else 0


if __name__ == '__main__':
    sys.exit(main())
