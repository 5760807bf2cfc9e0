# SPDX-License-Identifier: Apache-2.0

"""Run some of nova's own tests, optionally with every compute on our manager.

One side of ``tox -e nova-functional-mixin`` (``python -m
tests.nova_functional`` starts it twice, once per side)::

    python -m tests.nova_functional.run [--manager] --json FILE \\
        --load-list IDS MODULE... > RESULT.subunit
    python -m tests.nova_functional.run --select REGEX --json FILE MODULE...

It loads nova's test modules from the installed nova (its sdist ships
``nova/tests``) and hands them to python-subunit's runner
(``subunit.run``, the stream ``stestr`` reads), filtered by the test ids
in ``IDS``; nothing of nova's is copied.

With ``--manager``, ``nova.test.TestCase.setUp`` is wrapped so that every
test uses this package's own fixture,
``nova_evac_cleanup.fixture.EvacuateCleanupFixture``, at the end of nova's
base ``setUp``: before any subclass starts a service, as a consumer's test
would use it, and undone by the test's own cleanups. Wrapping the one
base ``setUp`` in this process, rather than a ``sitecustomize`` on
``PYTHONPATH`` or a patched copy of nova's tests, keeps the change to nova
visible in one place and limited to this runner.

On both sides the same wrapper points nova's ``[wsgi]api_paste_config``
at the ``api-paste.ini`` nova's sdist installed under the environment's
prefix: nova's ``ConfFixture`` looks for it beside the source tree, which
an installed nova does not have.

nova's API samples tests read the samples of its API reference from its
source tree's ``doc/api_samples``, which the sdist has and the installed
package lacks: ``--api-samples`` points them at an extracted copy.

So that the comparison cannot pass because the manager was never used,
every ``nova-compute`` service the tests create is recorded with its
manager's class, and the counts are written as JSON to ``--json``.
"""

import argparse
import collections
from importlib import metadata
import json
import os
import pkgutil
import re
import sys
import unittest

# nova's functional test package monkey-patches first (eventlet): import
# it before any other nova module, as nova's own runs do.
import nova.tests.functional  # noqa: F401  # isort: skip

from nova import service
from nova import test
from subunit import run as subunit_run

from nova_evac_cleanup import fixture

_SEEN = collections.Counter()


def _record_compute_managers():
    """Count the manager class of every nova-compute service created."""
    init = service.Service.__init__

    def __init__(self, host, binary, *args, **kwargs):
        init(self, host, binary, *args, **kwargs)
        if binary == 'nova-compute':
            cls = type(self.manager)
            _SEEN['%s.%s' % (cls.__module__, cls.__qualname__)] += 1

    service.Service.__init__ = __init__


def _api_paste_config():
    """Where nova's sdist installed ``api-paste.ini`` (data file)."""
    for path in metadata.distribution('nova').files or ():
        if path.name == 'api-paste.ini':
            return str(path.locate())
    return os.path.join(sys.prefix, 'etc', 'nova', 'api-paste.ini')


def _wrap_setup(manager):
    """Wrap nova's base TestCase.setUp: paste config, and the fixture."""
    setup = test.TestCase.setUp
    paste = _api_paste_config()

    def setUp(self, *args, **kwargs):
        setup(self, *args, **kwargs)
        self.flags(api_paste_config=paste, group='wsgi')
        if manager:
            self.useFixture(fixture.EvacuateCleanupFixture())

    test.TestCase.setUp = setUp


def _api_samples_from(doc):
    """Read the API samples (``doc/api_samples``) under ``doc``.

    nova's API samples tests compare the API's answers with the samples of
    its API reference, which its sdist ships beside the package, not in
    it: nova looks for them at ``nova/../doc``.
    """
    from nova.tests.functional import api_samples_test_base as base

    def _get_sample(cls, name, api_version=None):
        return cls._get_sample_path(name, doc, api_version=api_version)

    base.ApiSampleTestBase._get_sample = classmethod(_get_sample)


def _ids(suite):
    for item in suite:
        if isinstance(item, unittest.TestSuite):
            yield from _ids(item)
        else:
            yield item.id()


def select(regex, modules):
    """The ids of the tests in modules (a package: its modules) matching.

    ``{module: [test id, ...]}``, for the modules holding at least one.
    """
    loader = unittest.TestLoader()
    names = []
    for name in modules:
        package = __import__(name, fromlist=['_'])
        if hasattr(package, '__path__'):
            names += sorted(name + '.' + m.name
                            for m in pkgutil.iter_modules(package.__path__))
        else:
            names.append(name)
    found = {}
    for name in names:
        ids = [i for i in _ids(loader.loadTestsFromName(name))
               if re.search(regex, i)]
        if ids:
            found[name] = ids
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--manager', action='store_true',
                        help="every compute service on this project's "
                             "manager (default: stock nova)")
    parser.add_argument('--select', metavar='REGEX',
                        help='write the ids of the tests of the modules '
                             '(or packages) matching REGEX, run nothing')
    parser.add_argument('--json', required=True,
                        help='where to write, as JSON, the selection '
                             '(--select) or the count of compute services '
                             'per manager class')
    parser.add_argument('--load-list',
                        help='file of the test ids to run, one a line')
    parser.add_argument('--api-samples', metavar='DOC',
                        help="the doc directory of nova's source tree, "
                             'with its api_samples')
    parser.add_argument('modules', nargs='+',
                        help="nova's test modules holding those tests")
    args = parser.parse_args(argv)
    if args.select:
        found = select(args.select, args.modules)
        with open(args.json, 'w') as f:
            json.dump(found, f, indent=1)
        return 0
    if not args.load_list:
        parser.error('--load-list is needed to run tests')
    _record_compute_managers()
    _wrap_setup(args.manager)
    if args.api_samples:
        _api_samples_from(args.api_samples)
    try:
        subunit_run.main(
            ['subunit.run', '--load-list', args.load_list] + args.modules)
    finally:
        with open(args.json, 'w') as f:
            json.dump(dict(_SEEN), f, indent=1, sort_keys=True)


if __name__ == '__main__':
    sys.exit(main())
