# SPDX-License-Identifier: Apache-2.0

"""Real death at a recorded point: the hook of the tier's nova-compute.

The fault-point explorer (:mod:`tests.explore.tracer`) numbers the
boundary calls an evacuation or its recovery makes on the destination and
"kills" the in-process compute after one of them. This hook numbers the
same calls in a real ``nova-compute`` (stock or
``nova-compute-evac-cleanup``), and when told "point P, occurrence N" it
sends SIGKILL to its own process right after the N-th call of P returned:
no ``finally``, no handler, no RPC reply; libvirtd, QEMU, os-brick's and
OVS's state stay as the process left them.

How it gets into the process: the tier starts the nova-compute with
``tests/deployment/hook`` first on its ``PYTHONPATH`` and
``EVAC_DEATHPOINT_DIR`` in its environment; that directory's
``sitecustomize`` calls :func:`install_on_start`, which wraps
``nova.cmd.compute.main`` as nova's entry point module is imported (after
``nova.cmd`` has set up eventlet or threading) and installs the wrappers
there, before the service is created. The runtime package has no hook.

The points, counted as the explorer counts them:

* a *root* is the evacuation (nova's ``ComputeManager.rebuild_instance``,
  or the mixin's ``EvacuateCleanupMixin.rebuild_instance`` around it,
  the outermost one), the start-up sweep (``sweep.on_start``) or the audit
  (``audit.report``), found on the calling thread's stack; calls outside
  a root (periodic tasks, lifecycle events, RPC of other servers) are not
  counted;
* a point is ``NAME#N``, the N-th call of NAME in one root: the
  evacuation of one server (the explorer's scenario has one evacuation to
  its destination) or one start-up of the process (the sweep);
* the names are the explorer's: ``driver.METHOD``, ``Instance.save`` and
  the other object methods, ``placement.VERB /path/{uuid}``,
  ``network.METHOD``, ``volume.METHOD``, ``journal.write`` and the
  project's other writes.

Which of the explorer's points have a real counterpart
(:func:`real_counterpart`): a point is real if the callable it names is
one real nova-compute calls: a method of nova's virt driver API
(``nova.virt.driver.ComputeDriver``, which ``LibvirtDriver`` implements or
inherits), of nova's objects, of nova's placement report client, of
nova's neutron and cinder APIs, or one of this project's writes. The
others are the fake libvirt world's own steps (``driver.spawn:STAGE``,
``driver.write_disk``, ``driver.cleanup_host``,
``driver.delete_instance_dir``) and the fake driver's methods outside
that API: the simulation's, with no call of that name in real nova.

Files in ``EVAC_DEATHPOINT_DIR``:

* ``points``: one JSON line per point, appended once its call returned
  or raised: ``{"seq", "root", "key", "name", "n", "raised", "pid"}``
  (``key``: the server of an evacuation, ``""`` for the others);
* ``arm``: written by the test: ``{"root", "key", "name", "n"}``, the
  point after which to die; read at each point, so it can be changed
  while the process runs;
* ``fired``: written right before the SIGKILL: the point, as JSON.
"""

import functools
import importlib
import inspect
import itertools
import json
import os
import re
import signal
import sys
import threading

ENV = 'EVAC_DEATHPOINT_DIR'
HOOK_DIR = os.path.join(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))), 'hook')

_UUID = re.compile(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                   r'[0-9a-f]{12}')

#: nova's object methods the explorer records (tests/explore/tracer.py).
OBJECT_METHODS = (
    ('Instance', ('save', 'drop_migration_context')),
    ('Migration', ('save', 'create')),
    ('BlockDeviceMapping', ('save', 'create', 'destroy',
                            'update_or_create')),
    ('InstanceFault', ('create',)),
    ('InstanceActionEvent', ('event_start', 'event_finish_with_failure')),
    ('InstanceAction', ('action_start', 'action_finish')),
    ('ComputeNode', ('save',)),
)

#: This project's writes, as each version of it names them: (module,
#: attribute, point name), as the explorer records them.
PROJECT_WRITES = (
    ('journal', 'write', 'journal.write'),
    ('journal', 'write_json', 'journal.write'),
    ('journal', '_write_json', 'journal.write'),
    ('journal', 'remove', 'journal.remove'),
    ('journal', 'claim_directory', 'journal.claim_directory'),
    ('journal', 'release_directory', 'journal.release_directory'),
    ('journal', 'abandon_directory', 'journal.abandon_directory'),
    ('journal', 'note_shared_directory', 'journal.note_shared'),
    ('ownership', 'claim', 'ownership.claim'),
    ('ownership', '_write_marker', 'ownership.write_marker'),
    ('ownership', '_make_directory', 'ownership.make_directory'),
    ('ownership', 'release', 'ownership.release'),
    ('ownership', 'remove_if_empty', 'ownership.remove_if_empty'),
)

#: The prefixes of the points a real nova-compute makes.
REAL_PREFIXES = ('placement.', 'network.', 'volume.', 'journal.',
                 'ownership.') + tuple(
    '%s.' % cls for cls, _ in OBJECT_METHODS)


def driver_api():
    """The public methods of nova's virt driver API, by name."""
    from nova.virt import driver

    names = set()
    for cls in driver.ComputeDriver.__mro__:
        if cls is object:
            continue
        for name, value in vars(cls).items():
            if not name.startswith('_') and inspect.isfunction(value):
                names.add(name)
    return names


def real_counterpart(name, api=None):
    """Whether a point the explorer recorded names a call real nova makes.

    See the module's docstring for the rule.
    """
    if name.startswith('driver.'):
        method = name[len('driver.'):]
        return method in (driver_api() if api is None else api)
    return name.startswith(REAL_PREFIXES)


def placement_name(verb, url):
    path = _UUID.sub('{uuid}', url.split('?', 1)[0])
    return 'placement.%s %s' % (verb.upper(), path)


class Hook(object):
    """The counting and the death, in one nova-compute process."""

    def __init__(self, directory):
        self.dir = directory
        self.roots = {}
        self.counts = {}
        self.seq = itertools.count(1)
        self.lock = threading.Lock()

    # Roots.

    def add_root(self, function, kind, owner):
        self.roots[function.__code__] = (kind, owner)

    def root(self):
        """(kind, key) of the outermost root on this stack, or None."""
        frame = sys._getframe(2)
        found = None
        try:
            while frame is not None:
                spec = self.roots.get(frame.f_code)
                if spec is not None:
                    key = ''
                    if spec[0] == 'evacuate':
                        key = getattr(frame.f_locals.get('instance'), 'uuid',
                                      '')
                    found = (spec[0], key)
                frame = frame.f_back
        finally:
            del frame
        return found

    # Points.

    def _path(self, name):
        return os.path.join(self.dir, name)

    def armed(self):
        try:
            with open(self._path('arm')) as f:
                return json.load(f)
        except (OSError, ValueError):
            return None

    def wrap(self, owner, attr, name):
        """Count the calls of ``owner.attr`` as point ``name``."""
        static = inspect.getattr_static(owner, attr)
        if isinstance(static, (staticmethod, property)):
            return
        bound = isinstance(static, classmethod)
        real = getattr(owner, attr)
        namer = name if callable(name) else (lambda args, kwargs: name)
        hook = self

        @functools.wraps(real)
        def counted(*args, **kwargs):
            root = hook.root()
            if root is None:
                return real(*args, **kwargs)
            point = namer(args, kwargs)
            with hook.lock:
                key = root + (point,)
                hook.counts[key] = hook.counts.get(key, 0) + 1
                n = hook.counts[key]
                seq = next(hook.seq)
            record = {'seq': seq, 'root': root[0], 'key': root[1],
                      'name': point, 'n': n, 'pid': os.getpid()}
            try:
                result = real(*args, **kwargs)
            except BaseException:
                hook.write(dict(record, raised=True))
                raise
            hook.write(dict(record, raised=False))
            arm = hook.armed()
            if arm and (arm.get('root'), arm.get('key', ''), arm.get('name'),
                        arm.get('n')) == (root[0], root[1], point, n):
                hook.die(record)
            return result

        setattr(owner, attr, staticmethod(counted) if bound and isinstance(
            owner, type) else counted)

    def write(self, record):
        with open(self._path('points'), 'a') as f:
            f.write(json.dumps(record, sort_keys=True) + '\n')

    def die(self, record):
        """SIGKILL this process, right now."""
        with open(self._path('fired'), 'w') as f:
            json.dump(record, f)
        os.kill(os.getpid(), signal.SIGKILL)

    # Set-up.

    def install(self):
        from nova.compute import manager
        from nova.network import neutron
        from nova import objects
        from nova import safe_utils
        from nova.scheduler.client import report
        from nova.virt.libvirt import driver as libvirt_driver
        from nova.volume import cinder

        objects.register_all()
        # nova's, under its decorators; the mixin's own (it calls nova's).
        self.add_root(safe_utils.get_wrapped_function(
            manager.ComputeManager.rebuild_instance), 'evacuate', 'self')
        project = {}
        if 'nova_evac_cleanup' in sys.modules:
            # nova-compute-evac-cleanup: its roots and writes.
            for name in ('manager', 'sweep', 'audit', 'journal',
                         'ownership'):
                try:
                    project[name] = importlib.import_module(
                        'nova_evac_cleanup.%s' % name)
                except ImportError:
                    pass
            mixin = getattr(project.get('manager'), 'EvacuateCleanupMixin',
                            None)
            if mixin is not None:
                self.add_root(mixin.rebuild_instance, 'evacuate', 'self')
            for module, function, kind in (('sweep', 'on_start', 'sweep'),
                                           ('sweep', 'sweep', 'sweep'),
                                           ('audit', 'report', 'audit')):
                if hasattr(project.get(module), function):
                    self.add_root(getattr(project[module], function), kind,
                                  'manager')
        for name in sorted(driver_api()):
            if hasattr(libvirt_driver.LibvirtDriver, name):
                self.wrap(libvirt_driver.LibvirtDriver, name,
                          'driver.%s' % name)
        for cls_name, methods in OBJECT_METHODS:
            cls = getattr(objects, cls_name)
            for method in methods:
                if hasattr(cls, method):
                    self.wrap(cls, method, '%s.%s' % (cls_name, method))
        for verb in ('get', 'put', 'post', 'delete'):
            self.wrap(report.SchedulerReportClient, verb,
                      lambda args, kwargs, verb=verb: placement_name(
                          verb, args[1]))
        for cls, prefix in ((neutron.API, 'network'), (cinder.API, 'volume')):
            for name, value in list(vars(cls).items()):
                if not name.startswith('_') and callable(value):
                    self.wrap(cls, name, '%s.%s' % (prefix, name))
        for module, attr, name in PROJECT_WRITES:
            if hasattr(project.get(module), attr):
                self.wrap(project[module], attr, name)


def _wrap_main(module, directory):
    real = module.main

    @functools.wraps(real)
    def main(*args, **kwargs):
        Hook(directory).install()
        return real(*args, **kwargs)

    module.main = main


class _Finder(object):
    """Run :func:`_wrap_main` once ``nova.cmd.compute`` is executed."""

    def __init__(self, directory):
        self.directory = directory

    def find_spec(self, name, path, target=None):
        if name != 'nova.cmd.compute':
            return None
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None:
            return None
        loader = spec.loader
        exec_module = loader.exec_module
        directory = self.directory

        def executed(module):
            exec_module(module)
            _wrap_main(module, directory)

        loader.exec_module = executed
        return spec


def install_on_start(directory):
    """Install the hook when this process turns out to be nova-compute."""
    sys.meta_path.insert(0, _Finder(directory))
