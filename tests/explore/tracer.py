# SPDX-License-Identifier: Apache-2.0

"""Record every boundary call on the destination, and fail or die at one.

A *boundary call* is one whose effect is seen outside the compute process:
the virt driver's methods and the fake libvirt driver's own steps inside
them (each spawn stage, each disk written, each cleanup of the host), the
saves of nova's objects (``Instance``, ``Migration``,
``BlockDeviceMapping``, the fault and the instance action events), every
placement request of nova's report client, every method of nova's network
and volume APIs, and this project's journal and ownership-marker writes.

Only calls made on behalf of one *root* on the destination host are
recorded: the evacuation (``rebuild_instance`` of the destination's
manager), the start-up sweep (``sweep.on_start``) or ``audit --delete``
(``audit.report``); and, on the *source*, its give-back of a failed
evacuation (``giveback.give_back_all``, at its start and from its
periodic task), whose neutron client calls (``neutron.*``, the fixture's
methods nova's ``get_client`` hands out) and cinder client calls
(``cinder.client``: the client made for the volume show nova's API lacks;
a fault there fails or dies at that show) count too, for it alone. The
root and its host are found on the call stack, so
background work (periodic tasks, the sweep's late report of foreign
guests) and the other hosts are never counted and the numbering is the
same on every run. A point is ``(name, n)``: the n-th call of that name.

A :class:`Fault` at one point either *raises* (an ordinary exception,
before the call does anything) or makes the process *die* right after the
call returned: :class:`ProcessDied`, a ``BaseException`` no handler of
nova or of this project catches. A dead process reaches nothing outside
any more: from then on every boundary call and every write of nova's
database API made by that green thread raises :class:`ProcessDied` again
before it does anything, so that ``finally`` blocks and context managers
unwinding the dead thread (nova's claim, for one, aborts on any exception)
change nothing a real death would not.
"""

import collections
import functools
import importlib
import inspect
import re
import sys

import eventlet
import fixtures

from nova.compute import manager as nova_manager
from nova.db.main import api as db_api
from nova.network import neutron
from nova import objects
from nova import safe_utils
from nova.scheduler.client import report
from nova.tests import fixtures as nova_fixtures
from nova.volume import cinder

from nova_evac_cleanup import journal
from tests.harness import fake_libvirt


def _optional(name):
    """A module of this project that older versions of it lack, or None."""
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


ownership = _optional('nova_evac_cleanup.ownership')
#: Where the sweep and the audit lived before they moved.
recovery = _optional('nova_evac_cleanup.recovery')

RAISE = 'raise'
DIE = 'die'
FAULTS = (RAISE, DIE)


class InjectedFault(Exception):
    """The ordinary exception a *raise* fault raises."""


class ProcessDied(BaseException):
    """The destination's process died: no handler sees it."""


Fault = collections.namedtuple('Fault', 'root name occurrence kind')

_UUID = re.compile(r'[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-'
                   r'[0-9a-f]{12}')
_DB_WRITE = re.compile(r'(create|update|destroy|delete|save|add|set|remove|'
                       r'purge|archive|soft_delete|restore)')

#: Calls that only read: ``placement.GET ...``, the getters, lists and
#: questions of the driver and of nova's network and volume APIs.
_READ = re.compile(r'^(GET |get_|get$|list_|has_|check_|instance_exists$|'
                   r'instance_on_disk$|node_is_available$|'
                   r'capabilities_as_traits$)|_get$')


def changes_nothing(name):
    """Whether a call of ``name`` only reads.

    Dying right after it leaves what dying right after the call before it
    left. ``get_instance_nw_info`` saves the instance's network info cache.
    """
    method = name.split('.', 1)[-1]
    return method != 'get_instance_nw_info' and bool(_READ.search(method))


def _placement_name(verb, url):
    path = _UUID.sub('{uuid}', url.split('?', 1)[0])
    return 'placement.%s %s' % (verb.upper(), path)


class Tracer(fixtures.Fixture):
    """Record the boundary calls of the roots on ``host``; inject a fault.

    :param host: the destination host
    :param faults: the :class:`Fault` s to inject, none to only record
    """

    def __init__(self, host, faults=(), source=None):
        super().__init__()
        self.host = host
        #: the host whose give-back is a root (None: not one)
        self.source = source
        #: the faults still to fire, each at its point
        self.faults = list(faults)
        #: the points, in order: ``(root, name, occurrence)``
        self.points = []
        #: the index in :attr:`points` of each fault that fired
        self.fired = {}
        self._counts = collections.Counter()
        self._dead = set()
        self.died = eventlet.event.Event()

    def index_of(self, point):
        try:
            return self.points.index(point)
        except ValueError:
            return None

    # Roots.

    def _roots(self):
        """Code objects of the roots, and how to read their host."""
        # The sweep: sweep.on_start, sweep.sweep before it took its mode,
        # recovery.sweep before it moved (the explorer also runs on older
        # trees, e.g. RESULTS-f8d47e1.rst).
        module = _optional('nova_evac_cleanup.sweep')
        sweep_of = (getattr(module, 'on_start', None) or
                    getattr(module, 'sweep', None) or
                    getattr(recovery, 'sweep'))
        roots = {sweep_of.__code__: ('sweep', 'manager', self.host)}
        # The audit's: audit.report, recovery.audit before it moved.
        report_of = getattr(_optional('nova_evac_cleanup.audit'), 'report',
                            None) or getattr(recovery, 'audit')
        roots[report_of.__code__] = ('audit', 'manager', self.host)
        from nova_evac_cleanup import manager

        # The mixin's own method, and nova's under its decorators.
        roots[manager.EvacuateCleanupMixin.rebuild_instance.__code__] = (
            'evacuate', 'self', self.host)
        roots[safe_utils.get_wrapped_function(
            nova_manager.ComputeManager.rebuild_instance).__code__] = (
            'evacuate', 'self', self.host)
        # The source's give-back, at its start and from its periodic task.
        give_back_all = getattr(_optional('nova_evac_cleanup.giveback'),
                                'give_back_all', None)
        if give_back_all is not None and self.source is not None:
            roots[give_back_all.__code__] = ('giveback', 'manager',
                                             self.source)
        return roots

    def root(self):
        """The root on this host the current call is made for, or None."""
        frame = sys._getframe(2)
        found = None
        try:
            while frame is not None:
                spec = self._root_codes.get(frame.f_code)
                if spec is not None:
                    owner = frame.f_locals.get(spec[1])
                    if getattr(owner, 'host', None) == spec[2]:
                        # The outermost root counts: the mixin's
                        # rebuild_instance calls nova's.
                        found = spec[0]
                frame = frame.f_back
        finally:
            del frame
        return found

    # Set-up.

    def _setUp(self):
        self._root_codes = self._roots()
        self.addCleanup(self._dead.clear)
        driver_names = set()
        for cls in fake_libvirt.FakeLibvirtDriver.__mro__:
            if cls is object:
                break
            for name, value in vars(cls).items():
                if not name.startswith('_') and callable(value) and (
                        not isinstance(value, (staticmethod, classmethod,
                                               type, property))):
                    driver_names.add(name)
        for name in sorted(driver_names):
            self._wrap(fake_libvirt.FakeLibvirtDriver, name,
                       'driver.%s' % name)
        # The libvirt driver's own steps inside spawn and destroy.
        self._wrap(fake_libvirt.FakeLibvirtWorld, '_enter_stage',
                   lambda args, kwargs: 'driver.spawn:%s' % args[2])
        self._wrap(fake_libvirt.FakeLibvirtWorld, '_write_disk',
                   'driver.write_disk')
        self._wrap(fake_libvirt.FakeLibvirtDriver, '_cleanup_host',
                   'driver.cleanup_host')
        self._wrap(fake_libvirt.FakeLibvirtDriver, '_delete_instance_dir',
                   'driver.delete_instance_dir')
        for cls, names in (
                (objects.Instance, ('save', 'drop_migration_context',
                                    'apply_migration_context')),
                (objects.Migration, ('save', 'create')),
                (objects.BlockDeviceMapping, ('save', 'create', 'destroy',
                                              'update_or_create')),
                (objects.InstanceFault, ('create',)),
                (objects.InstanceActionEvent, ('event_start',
                                               'event_finish_with_failure')),
                (objects.InstanceAction, ('action_start', 'action_finish')),
                (objects.ComputeNode, ('save',))):
            for name in names:
                if name in ('apply_migration_context',):
                    continue
                self._wrap(cls, name, '%s.%s' % (cls.__name__, name))
        for verb in ('get', 'put', 'post', 'delete'):
            self._wrap(report.SchedulerReportClient, verb,
                       lambda args, kwargs, verb=verb: _placement_name(
                           verb, args[1]))
        for cls, prefix in ((neutron.API, 'network'), (cinder.API, 'volume')):
            for name, value in list(vars(cls).items()):
                if not name.startswith('_') and callable(value):
                    self._wrap(cls, name, '%s.%s' % (prefix, name))
        # The clients the give-back uses itself (nova's API, for the
        # others, is above).
        for name in ('list_ports', 'show_port', 'update_port',
                     'create_port_binding', 'activate_port_binding',
                     'delete_port_binding', 'show_port_binding'):
            if hasattr(nova_fixtures.NeutronFixture, name):
                self._wrap(nova_fixtures.NeutronFixture, name,
                           'neutron.%s' % name, roots=('giveback',))
        self._wrap(cinder, 'cinderclient', 'cinder.client',
                   roots=('giveback',))
        # This project's own writes, as each version of it names them.
        for module, attr, name in (
                (journal, 'write', 'journal.write'),
                (journal, 'write_json', 'journal.write'),
                (journal, '_write_json', 'journal.write'),
                (journal, 'remove', 'journal.remove'),
                (journal, 'claim_directory', 'journal.claim_directory'),
                (journal, 'release_directory', 'journal.release_directory'),
                (journal, 'abandon_directory', 'journal.abandon_directory'),
                (journal, 'note_shared_directory', 'journal.note_shared'),
                (ownership, 'claim', 'ownership.claim'),
                (ownership, '_write_marker', 'ownership.write_marker'),
                (ownership, '_make_directory', 'ownership.make_directory'),
                (ownership, 'release', 'ownership.release'),
                (ownership, 'remove_if_empty', 'ownership.remove_if_empty')):
            if module is not None and hasattr(module, attr):
                self._wrap(module, attr, name)
        for name in dir(db_api):
            value = getattr(db_api, name)
            if (callable(value) and not name.startswith('_') and
                    _DB_WRITE.search(name) and
                    getattr(value, '__module__', None) == db_api.__name__):
                self._guard(db_api, name)

    def _guard(self, owner, name):
        real = getattr(owner, name)

        @functools.wraps(real)
        def guarded(*args, **kwargs):
            if eventlet.getcurrent() in self._dead:
                raise ProcessDied('dead: %s' % name)
            return real(*args, **kwargs)

        self.useFixture(fixtures.MonkeyPatch(
            '%s.%s' % (owner.__name__, name), guarded))

    def _wrap(self, owner, attr, name, roots=None):
        static = inspect.getattr_static(owner, attr)
        if isinstance(static, staticmethod):
            return
        # A class method is called through the class: it stays bound. A
        # mock in a class (nova's CinderFixture puts its fakes there) is
        # no descriptor: called without the instance, as before.
        bound = isinstance(static, classmethod) or (
            isinstance(owner, type) and not inspect.isfunction(static))
        real = getattr(owner, attr)
        namer = name if callable(name) else (lambda args, kwargs: name)
        tracer = self

        @functools.wraps(real)
        def traced(*args, **kwargs):
            if eventlet.getcurrent() in tracer._dead:
                raise ProcessDied('dead: %s' % namer(args, kwargs))
            root = tracer.root()
            if root is None or roots is not None and root not in roots:
                return real(*args, **kwargs)
            point = namer(args, kwargs)
            tracer._counts[(root, point)] += 1
            occurrence = tracer._counts[(root, point)]
            tracer.points.append((root, point, occurrence))
            fault = tracer._fault_at(root, point, occurrence)
            if fault is not None and fault.kind == RAISE:
                raise InjectedFault('%s #%d raised on %s' % (
                    point, occurrence, tracer.host))
            result = real(*args, **kwargs)
            if fault is not None:
                tracer.die(fault)
            return result

        if isinstance(owner, type):
            path = '%s.%s.%s' % (owner.__module__, owner.__name__, attr)
        else:
            path = '%s.%s' % (owner.__name__, attr)
        self.useFixture(fixtures.MonkeyPatch(
            path, staticmethod(traced) if bound else traced))

    def _fault_at(self, root, point, occurrence):
        for fault in self.faults:
            if (fault.root, fault.name, fault.occurrence) == (
                    root, point, occurrence):
                self.faults.remove(fault)
                self.fired[fault] = len(self.points) - 1
                return fault
        return None

    # Death.

    def die(self, fault):
        """This green thread's process dies now."""
        self._dead.add(eventlet.getcurrent())
        if not self.died.ready():
            self.died.send(True)
        raise ProcessDied('%s died after %s #%d' % (
            self.host, fault.name, fault.occurrence))

    def resurrect(self):
        """The harness caught the death in its own thread: it lives on."""
        self._dead.discard(eventlet.getcurrent())

    def disarm(self):
        """No fault from now on (the restarts that follow a fault)."""
        self.faults = []
