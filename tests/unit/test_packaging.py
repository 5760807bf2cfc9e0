# SPDX-License-Identifier: Apache-2.0

"""What a compute node installs is runtime code only.

The package holds what nova-compute and the operator's command need. Test
code (the harness, the fake driver, the reproduction, the deployment tier)
lives in ``tests/``; the one public test helper,
:mod:`nova_evac_cleanup.fixture`, needs the ``[testing]`` extra and is
never imported by the rest.
"""

import ast
import os
import subprocess
import sys

import testtools

import nova_evac_cleanup

PACKAGE = os.path.dirname(nova_evac_cleanup.__file__)
#: Importable only from the test tree or with the [testing] extra.
TEST_ONLY = ('tests', 'testtools', 'fixtures', 'nova.tests', 'oslotest',
             'nova_evac_cleanup.fixture')


def imports(path):
    """The modules a source file imports, at any level."""
    with open(path) as source:
        tree = ast.parse(source.read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name
        elif isinstance(node, ast.ImportFrom) and node.module:
            yield node.module
            for alias in node.names:
                yield '%s.%s' % (node.module, alias.name)


def runtime_modules():
    for directory, _dirs, names in os.walk(PACKAGE):
        for name in sorted(names):
            if name.endswith('.py'):
                path = os.path.join(directory, name)
                if os.path.relpath(path, PACKAGE) != 'fixture.py':
                    yield path


def test_only(module):
    return any(module == name or module.startswith(name + '.')
               for name in TEST_ONLY)


class TestRuntimePackage(testtools.TestCase):

    def test_runtime_imports_no_test_code(self):
        found = {
            '%s: %s' % (os.path.relpath(path, PACKAGE), module)
            for path in runtime_modules()
            for module in imports(path) if test_only(module)}
        self.assertEqual(set(), found)

    def test_no_test_package_is_shipped(self):
        packages = {os.path.relpath(directory, PACKAGE)
                    for directory, _dirs, names in os.walk(PACKAGE)
                    if '__init__.py' in names}
        self.assertEqual({'.', 'cmd'}, packages)

    def test_the_checker_sees_a_test_import(self):
        # Meta-test: the walk finds imports nested in functions too.
        self.assertTrue(test_only('tests.harness.functional'))
        self.assertIn('nova_evac_cleanup.fixture', list(imports(
            os.path.join(os.path.dirname(__file__), 'test_install.py'))))

    def test_fixture_imports_first(self):
        # Another project's test module may import the fixture before
        # anything of nova: on nova 31, nova.service imported first fails.
        result = subprocess.run(
            [sys.executable, '-c', 'import nova_evac_cleanup.fixture'],
            capture_output=True, text=True)
        self.assertEqual(0, result.returncode, result.stderr[-2000:])
