# SPDX-License-Identifier: Apache-2.0

"""The console scripts as a new operator meets them.

Each command runs in its own process, as the console script does: nova
reads the ``--config-file`` arguments of ``sys.argv`` when it is first
imported (to choose its concurrency mode), so only a fresh process shows
what an operator sees. No database, placement or conductor is reached:
these are the command's start-up, its options and its configuration
errors.
"""

import os
import re
import subprocess
import sys
import textwrap

import fixtures
from nova import version as nova_version
import testtools

#: Runs a console script's main() as the installed script does.
_SCRIPT = textwrap.dedent('''\
    import sys
    if sys.argv[1] == 'nodefaults':
        # Whatever this machine has in /etc/nova or ~/.nova: nova's default
        # search for configuration files finds nothing.
        from oslo_config import cfg
        cfg.find_config_files = lambda *args, **kwargs: []
        cfg.find_config_dirs = lambda *args, **kwargs: []
    module = sys.argv[2]
    sys.argv[:3] = [module]
    from nova_evac_cleanup.cmd import audit, compute
    main = {'nova-evac-cleanup': audit.main,
            'nova-compute-evac-cleanup': compute.main}[module]
    sys.exit(main())
    ''')

AUDIT = 'nova-evac-cleanup'
COMPUTE = 'nova-compute-evac-cleanup'
#: The exit codes --help and the guide document.
EXIT_CODES = {
    0: 'nothing found',
    1: 'something could not be done',
    2: 'wrong command line',
    3: 'found',
    4: 'found, and --delete ended all it may end',
    5: 'configuration problem',
}
CONFIG_ERROR = 5
USAGE_ERROR = 2


def _version(cwd):
    """The version the scripts should print, run from ``cwd``.

    As installed: in a checkout, where the tests run, pbr and importlib
    find the checkout's own metadata first.
    """
    installed = subprocess.run(
        [sys.executable, '-c', 'from importlib import metadata; '
         'print(metadata.version("nova-evac-cleanup"))'],
        capture_output=True, text=True, check=True, cwd=cwd).stdout.strip()
    return '%s (nova %s)' % (installed, nova_version.version_string())


class CommandLineTest(testtools.TestCase):

    def setUp(self):
        super().setUp()
        self.useFixture(fixtures.Timeout(150, gentle=True))
        self.root = self.useFixture(fixtures.TempDir()).path
        # No ~/.nova/nova.conf of whoever runs the tests.
        self.home = os.path.join(self.root, 'home')
        os.mkdir(self.home)

    def run_script(self, *args, script=AUDIT, defaults=False):
        """Run a console script; ``defaults``: let nova search /etc."""
        env = dict(os.environ, HOME=self.home)
        return subprocess.run(
            [sys.executable, '-c', _SCRIPT,
             'defaults' if defaults else 'nodefaults', script] + list(args),
            capture_output=True, text=True, timeout=120, cwd=self.root,
            env=env)

    def write_config(self, name='nova.conf', placement=True, database=True,
                     transport=False, extra=''):
        path = os.path.join(self.root, name)
        text = '[DEFAULT]\nhost = cli-test\ncompute_driver = fake.FakeDriver\n'
        text += 'state_path = %s\n' % self.root
        if transport:
            text += 'transport_url = fake:/\n'
        if database:
            text += '[database]\nconnection = sqlite:///%s/nova.sqlite\n' % (
                self.root)
        if placement:
            # Nothing listens there: the command fails once it asks.
            text += ('[placement]\nauth_type = none\n'
                     'endpoint_override = http://127.0.0.1:9/placement\n')
        text += extra
        with open(path, 'w') as stream:
            stream.write(text)
        return path

    def assert_one_line(self, result, code):
        """``code``, and one line on standard error: returns the line."""
        self.assertEqual(code, result.returncode, result)
        self.assertNotIn('Traceback', result.stderr)
        lines = result.stderr.splitlines()
        self.assertEqual(1, len(lines), result.stderr)
        self.assertTrue(lines[0].startswith('%s: error: ' % AUDIT), lines)
        return lines[0]

    def assert_documents_exit_codes(self, text):
        text = ' '.join(text.split())
        for code, meaning in EXIT_CODES.items():
            self.assertRegex(text, r'(?<!\d)%d:? %s' % (
                code, re.escape(meaning)), code)

    # --version and --help.

    def test_version_names_the_project_and_nova(self):
        result = self.run_script('--version')
        self.assertEqual(0, result.returncode, result)
        self.assertEqual('%s %s\n' % (AUDIT, _version(self.root)),
                         result.stdout)

    def test_compute_version_names_the_project_and_nova(self):
        result = self.run_script('--version', script=COMPUTE)
        self.assertEqual(0, result.returncode, result)
        self.assertEqual('%s %s\n' % (COMPUTE, _version(self.root)),
                         result.stdout)

    def test_help_says_what_it_is_and_its_exit_codes(self):
        result = self.run_script('--help')
        self.assertEqual(0, result.returncode, result)
        text = ' '.join(result.stdout.split())
        self.assertIn('failed or interrupted evacuations left on this '
                      'compute host', text)
        self.assert_documents_exit_codes(result.stdout)
        for option in ('--config-file', '--config-dir', '--debug',
                       '--version', 'audit'):
            self.assertIn(option, text)

    def test_audit_help_lists_its_options_and_exit_codes(self):
        result = self.run_script('audit', '--help')
        self.assertEqual(0, result.returncode, result)
        self.assertIn('--delete', result.stdout)
        self.assertIn('--json', result.stdout)
        self.assert_documents_exit_codes(result.stdout)

    def test_compute_help_says_what_it_is(self):
        result = self.run_script('--help', script=COMPUTE)
        self.assertEqual(0, result.returncode, result)
        text = ' '.join(result.stdout.split())
        self.assertIn('nova-compute with the evacuation cleanup', text)
        # nova-compute's own options follow.
        self.assertIn('--config-file', text)

    # Options before or after the command.

    def test_options_after_the_command(self):
        config = self.write_config(placement=False)
        result = self.run_script('audit', '--config-file', config, '--debug')
        line = self.assert_config_error(result, debug=True)
        self.assertIn(config, line)

    def test_config_dir_after_the_command(self):
        directory = os.path.join(self.root, 'nova.conf.d')
        os.mkdir(directory)
        self.write_config(os.path.join('nova.conf.d', '10.conf'),
                          placement=False)
        for args in (['--config-dir', directory, 'audit', '--json'],
                     ['audit', '--json', '--config-dir', directory]):
            line = self.assert_config_error(self.run_script(*args))
            self.assertIn('[placement] auth_type is not set in %s/*.conf' %
                          directory, line)

    def assert_config_error(self, result, debug=False):
        """A configuration error: exit code 5 and one line at the end."""
        if not debug:
            return self.assert_one_line(result, CONFIG_ERROR)
        self.assertEqual(CONFIG_ERROR, result.returncode, result)
        line = result.stderr.splitlines()[-1]
        self.assertTrue(line.startswith('%s: error: ' % AUDIT), line)
        return line

    def test_usage_error_is_short(self):
        for args in (['audit', '--bogus'], [], ['--json']):
            result = self.run_script(*args)
            self.assertEqual(USAGE_ERROR, result.returncode, result)
            self.assertNotIn('Traceback', result.stderr)
            # The usage in one line, then the error.
            lines = result.stderr.splitlines()
            self.assertEqual(2, len(lines), result.stderr)
            self.assertTrue(lines[0].startswith('usage: %s ' % AUDIT), lines)
            self.assertTrue(lines[1].startswith('%s: error: ' % AUDIT), lines)

    # Configuration errors: one line, naming the file or the option.

    def test_config_file_missing(self):
        missing = os.path.join(self.root, 'missing.conf')
        for args in (['--config-file', missing, 'audit'],
                     ['audit', '--config-file', missing]):
            line = self.assert_config_error(self.run_script(*args))
            # oslo.config's own words, which name the file.
            self.assertEqual(
                '%s: error: ConfigFilesNotFoundError: Failed to find some '
                'config files: %s' % (AUDIT, missing), line)

    def test_config_dir_missing(self):
        missing = os.path.join(self.root, 'missing.conf.d')
        line = self.assert_config_error(
            self.run_script('audit', '--config-dir', missing))
        self.assertEqual(
            '%s: error: ConfigDirNotFoundError: Failed to read config file '
            'directory: %s' % (AUDIT, missing), line)

    def test_config_file_unparsable(self):
        config = os.path.join(self.root, 'broken.conf')
        with open(config, 'w') as stream:
            stream.write('[DEFAULT\nhost = x\n')
        line = self.assert_config_error(
            self.run_script('--config-file', config, 'audit'))
        self.assertIn(config, line)

    def test_no_configuration_found(self):
        line = self.assert_config_error(self.run_script('audit'))
        self.assertIn('no configuration file', line)
        self.assertIn('--config-file', line)
        self.assertIn('/etc/nova/', line)

    def test_placement_credentials_missing(self):
        config = self.write_config(placement=False)
        line = self.assert_config_error(
            self.run_script('--config-file', config, 'audit'))
        self.assertIn('[placement] auth_type', line)
        self.assertIn(config, line)

    def test_placement_credentials_incomplete(self):
        config = self.write_config(placement=False, extra=(
            '[placement]\nauth_type = password\n'))
        line = self.assert_config_error(
            self.run_script('--config-file', config, 'audit'))
        self.assertIn('[placement]', line)
        self.assertIn('auth_url', line)
        self.assertIn(config, line)

    def test_no_database(self):
        config = self.write_config(database=False)
        line = self.assert_config_error(
            self.run_script('--config-file', config, 'audit'))
        self.assertIn('[database] connection', line)
        self.assertIn('transport_url', line)
        self.assertIn(config, line)

    # nova's start-up noise.

    def test_nova_start_up_noise_only_with_debug(self):
        """Past the checks, the command fails asking placement.

        nova's INFO line about ``_heal_instance_info_cache`` (logged while
        its compute manager's module loads) and its other start-up lines are
        not on the terminal; the error is one line.
        """
        config = self.write_config()
        line = self.assert_one_line(
            self.run_script('--config-file', config, 'audit'), 1)
        self.assertNotIn('Traceback', line)

        result = self.run_script('--config-file', config, 'audit', '--debug')
        self.assertEqual(1, result.returncode, result)
        self.assertIn('_heal_instance_info_cache', result.stderr)
        self.assertIn('Traceback', result.stderr)
        self.assertEqual(line, result.stderr.splitlines()[-1])
