# SPDX-License-Identifier: Apache-2.0

"""Benchmark scenarios, run as test methods of ``EvacuateTestCase``.

``run.py`` runs each scenario twice, on stock nova (``FIXED`` False) and
with the cleanup manager (``FIXED`` True), in fresh services each time, and
reads what the scenario measured from ``self.results``; the start-up sweep,
which stock nova has not, runs with the cleanup manager only. Nothing here
asserts a time: the methods only fail when nova does not get where the
scenario needs it (a server that never becomes ACTIVE, ...).

nova's own wait helpers poll every 0.5 s, which would swamp what is
measured; these scenarios poll every :data:`POLL` seconds instead.
"""

import collections
import datetime
import functools
import random
import statistics
import time

import fixtures
import greenlet
from nova import context as nova_context
from nova.db.main import api as db_api
from nova.db.main import models
from nova import objects
from oslo_utils import timeutils
from oslo_utils import uuidutils
import sqlalchemy as sa

from nova_evac_cleanup import evacuation
from nova_evac_cleanup import manager
from tests.harness import fake_libvirt
from tests.harness import functional as base

SOURCE = base.SOURCE
DEST = base.DEST
#: The second destination of the interleaved scenarios.
OTHER = 'compute2'
STOCK_MANAGER = 'nova.compute.manager.ComputeManager'
FIXED_MANAGER = 'nova_evac_cleanup.manager.ComputeManager'
POLL = 0.02
TIMEOUT = 300

#: The statuses an old evacuation record to a host has, and how often: a
#: source that came back marked it ``completed``, one that did not yet left
#: it ``done``; ``failed`` ones failed on the destination.
HISTORY = (('completed', 6), ('done', 2), ('failed', 2))
#: The share of old records whose instance has been deleted since.
DELETED_SHARE = 0.5
#: Statements not counted as queries.
TRANSACTION_CONTROL = frozenset(['BEGIN', 'COMMIT', 'ROLLBACK', 'SAVEPOINT',
                                 'RELEASE'])


def per_instance_faults(world, faults):
    """Make spawns of given instances fail at given stages.

    The world's spawn faults are one-shot per (host, stage), which cannot
    fail twelve of forty concurrent evacuations at seven stages. This adds
    faults keyed by (host, uuid) on top, fired like the world's own (a
    ``create_disks`` fault still writes a partial disk) and recorded in
    ``world.fired_faults``.

    :param faults: a dict of (stage, exception) by (host, uuid); emptied
        as the faults fire
    """
    original = world._enter_stage

    def enter_stage(record, stage):
        exc = original(record, stage)
        if exc is None:
            with world._lock:
                key = (record.host, record.uuid)
                if key in faults and faults[key][0] == stage:
                    exc = faults.pop(key)[1]
                    world._fired.append(fake_libvirt.FiredFault(
                        record.host, stage, record.uuid, exc))
        return exc

    world._enter_stage = enter_stage


class OwnTime(object):
    """Wall time in the project's own code, by destination.

    A span opens on a green thread when it enters one of the project's
    entry points; within it, what nova would do anyway and the driver's
    destroy are marked off (:meth:`Scenarios._own_time`). Each moment of
    the thread goes to the innermost mark: ``own`` is the project's code
    with the calls it makes to nova's objects, placement and the database,
    and the green threads that run while it waits on them (the conductor
    doing its saves, but also the benchmark's own polling: an upper
    bound); ``own_on_thread`` the same while the thread itself runs (a
    lower bound: what is done for it elsewhere left out). ``nova`` and
    ``destroy`` are left out of both.
    """

    def __init__(self):
        self._threads = {}
        self._spent = collections.defaultdict(collections.Counter)
        self._previous = None

    def trace(self):
        """Follow the switches of green threads, until the returned undo."""
        self._previous = greenlet.settrace(self._switched)
        return lambda: greenlet.settrace(self._previous)

    def _switched(self, event, args):
        if event in ('switch', 'throw'):
            origin, target = args
            for thread, away in ((self._threads.get(origin), True),
                                 (self._threads.get(target), False)):
                if thread is not None:
                    self._charge(thread)
                    thread['away'] = away
        if self._previous is not None:
            self._previous(event, args)

    def take(self, host):
        """What was spent on ``host`` since the last take, by mark."""
        return self._spent.pop(host, collections.Counter())

    def wrap(self, mark, original):
        """``original``, its time marked; an ``own`` one opens a span."""
        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            current = greenlet.getcurrent()
            thread = self._threads.get(current)
            if thread is None:
                if mark != 'own':
                    return original(*args, **kwargs)
                # The project's entry points are the manager's methods.
                thread = self._threads[current] = {
                    'host': args[0].host, 'marks': [], 'away': False,
                    'since': time.perf_counter()}
            self._charge(thread)
            thread['marks'].append(mark)
            try:
                return original(*args, **kwargs)
            finally:
                self._charge(thread)
                thread['marks'].pop()
                if not thread['marks']:
                    del self._threads[current]
        return wrapper

    def _charge(self, thread):
        now = time.perf_counter()
        if thread['marks']:
            spent = self._spent[thread['host']]
            mark = thread['marks'][-1]
            spent[mark] += now - thread['since']
            if not thread['away']:
                spent[mark + '_on_thread'] += now - thread['since']
        thread['since'] = now


class Scenarios(base.EvacuateTestCase):
    """The benchmark scenarios; ``run.py`` sets FIXED, STORAGE, params."""

    STORAGE = 'non-shared'
    FIXED = True
    #: set by run.py: sizes and the seed
    params = {}
    #: set by run.py: where the scenario puts what it measured. A class
    #: attribute, as nova's TestCase clears the test's own attributes
    #: when it ends.
    sink = {}

    def setUp(self):
        # Room for 50 tiny servers on one host: MediumFakeDriver has 10
        # vCPUs and 8 GiB.
        self.flags(cpu_allocation_ratio=16.0, ram_allocation_ratio=16.0,
                   disk_allocation_ratio=16.0)
        # ... and in the project's quota (10 instances by default).
        self.flags(instances=-1, cores=-1, ram=-1, group='quota')
        super().setUp()
        self.results = self.sink
        self.cleanup_seconds = []
        if self.FIXED:
            self._time_cleanup()

    def _time_cleanup(self):
        """Record how long each cleanup of a failed evacuation takes."""
        original = evacuation.Evacuation.before_nova
        durations = self.cleanup_seconds

        def timed(*args, **kwargs):
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                durations.append(time.perf_counter() - started)

        self.useFixture(fixtures.MonkeyPatch(
            'nova_evac_cleanup.evacuation.Evacuation.before_nova', timed))

    # Polling.

    def _until(self, check, what):
        deadline = time.monotonic() + TIMEOUT
        while True:
            value = check()
            if value:
                return value
            if time.monotonic() > deadline:
                self.fail('timed out waiting for %s' % what)
            time.sleep(POLL)

    def _migrations(self):
        """The latest migration of each instance, by instance uuid."""
        latest = {}
        for migration in self.admin_api.api_get(
                '/os-migrations').body['migrations']:
            uuid = migration['instance_uuid']
            if uuid not in latest or migration['id'] > latest[uuid]['id']:
                latest[uuid] = migration
        return latest

    def _settled(self, uuid, before):
        """The server once its latest evacuation has settled, else None.

        Settled: the latest migration (newer than ``before``, the id of the
        migration before it or 0) is done or failed and the task state is
        cleared.
        """
        migration = self._migrations().get(uuid)
        if (migration is None or migration['id'] <= before or
                migration['status'] not in ('done', 'failed')):
            return None
        server = self.admin_api.get_server(uuid)
        if server['OS-EXT-STS:task_state'] is not None:
            return None
        if server['status'] == 'ERROR' and 'fault' not in server:
            return None
        return server

    def _boot_many(self, count, host=SOURCE):
        """Boot ``count`` image-backed servers on ``host`` at once."""
        uuids = []
        for _ in range(count):
            server = self._build_server(host=host, networks='none')
            uuids.append(self.api.post_server({'server': server})['id'])

        def all_active():
            servers = {s['id']: s for s in self.api.get_servers()}
            states = [servers[uuid]['status'] for uuid in uuids]
            if 'ERROR' in states:
                self.fail('a server failed to boot')
            return all(state == 'ACTIVE' for state in states)

        self._until(all_active, 'servers to boot')
        return uuids

    def _evacuate_all(self, uuids):
        """Post an evacuation of each server, then wait for all of them.

        :returns: the servers by uuid once settled
        """
        before = {uuid: m['id'] for uuid, m in self._migrations().items()}
        for uuid in uuids:
            self.admin_api.post_server_action(
                uuid, {'evacuate': {'host': DEST}})
        settled = {}

        def all_settled():
            for uuid in uuids:
                if uuid not in settled:
                    server = self._settled(uuid, before.get(uuid, 0))
                    if server is not None:
                        settled[uuid] = server
            return len(settled) == len(uuids)

        self._until(all_settled, 'evacuations to settle')
        return settled

    def _calls(self, host=DEST):
        return self.world.calls(host)

    # 1. Success path.

    def test_success_path(self):
        """N evacuations, then N rebuilds, one at a time, all succeeding."""
        count = self.params['success_count']
        uuids = self._boot_many(count)
        self._fail_source()

        calls = self._calls()
        seconds = []
        for uuid in uuids:
            started = time.perf_counter()
            server = self._evacuate_all([uuid])[uuid]
            seconds.append(time.perf_counter() - started)
            if (server['status'] != 'ACTIVE' or
                    server['OS-EXT-SRV-ATTR:host'] != DEST):
                self.fail('evacuation failed: %s' % server.get('fault'))
        evacuate_calls = self._calls() - calls
        self.results['evacuate'] = {
            'count': count, 'seconds': seconds,
            'calls': dict(evacuate_calls)}

        calls = self._calls()
        image = self.api.get_server(uuids[0])['image']['id']
        seconds = []
        for uuid in uuids:
            started = time.perf_counter()
            self.admin_api.post_server_action(
                uuid, {'rebuild': {'imageRef': image}})

            def rebuilt():
                server = self.admin_api.get_server(uuid)
                if server['status'] == 'ERROR':
                    self.fail('rebuild failed: %s' % server.get('fault'))
                return (server['status'] == 'ACTIVE' and
                        server['OS-EXT-STS:task_state'] is None)

            self._until(rebuilt, 'rebuild')
            seconds.append(time.perf_counter() - started)
        rebuild_calls = self._calls() - calls
        self.results['rebuild'] = {
            'count': count, 'seconds': seconds,
            'calls': dict(rebuild_calls)}

    # 2. Failure path.

    def test_failure_path(self):
        """A failed evacuation at each spawn stage, a few times each."""
        repeat = self.params['failure_repeat']
        stages = fake_libvirt.STAGES
        uuids = self._boot_many(repeat * len(stages))
        self._fail_source()
        results = {}
        for i, stage in enumerate(stages):
            seconds = []
            cleanups_before = len(self.cleanup_seconds)
            for uuid in uuids[i * repeat:(i + 1) * repeat]:
                self.world.inject_spawn_fault(DEST, stage)
                started = time.perf_counter()
                server = self._evacuate_all([uuid])[uuid]
                seconds.append(time.perf_counter() - started)
                if server['status'] != 'ERROR':
                    self.fail('evacuation did not fail at %s' % stage)
            results[stage] = {
                'seconds': seconds,
                'cleanup_seconds': self.cleanup_seconds[cleanups_before:],
                'left': self._debris(uuids[i * repeat:(i + 1) * repeat])}
        self.results['failure'] = results

    # 6. Failure path, stock and fixed interleaved.

    def test_failure_interleaved(self):
        """Failed evacuations to a stock and a fixed destination, in turn.

        One nova: compute1 and compute2 are destinations, one running
        nova's own manager and the other this project's; the servers fail
        to spawn on them one after the other (guest running, the whole
        cleanup), the order alternating, then the two swap managers (both
        restarted) and it goes again. Per evacuation: the time from the
        API call to the server in ERROR with its fault, the SQL statements
        on the destination's ``rebuild_instance`` thread (nova's cell
        database, and placement), and, on the fixed one, the time and the
        statements of the cleanup itself (``Evacuation.before_nova`` and
        ``Evacuation.after_nova``) and the time in the
        project's own code, the driver's destroy left out
        (:class:`OwnTime`).
        """
        pairs, rounds = self.params['interleaved_pairs'], 2
        self._start_other_stock()
        uuids = iter(self._boot_many(pairs * 2 * rounds))
        self._fail_source()
        counters = self._count_statements()
        rebuilds = self._count_rebuilds(counters)
        own = self._own_time()
        cleanup = collections.defaultdict(list)
        for name in ('before_nova', 'after_nova'):
            self.useFixture(fixtures.MonkeyPatch(
                'nova_evac_cleanup.evacuation.Evacuation.' + name,
                self._timed(getattr(evacuation.Evacuation, name), cleanup,
                            counters)))
        samples = []
        for number, _, host, fixed in self._turns(pairs, rounds):
            uuid = next(uuids)
            rebuilds[host] = {'statements': 0, 'done': False}
            own.take(host)
            del cleanup['seconds'][:], cleanup['statements'][:]
            self.world.inject_spawn_fault(host, 'wait_for_boot')
            started = time.perf_counter()
            self.admin_api.post_server_action(
                uuid, {'evacuate': {'host': host}})
            server = self._until(lambda: self._settled(uuid, 0), 'ERROR')
            seconds = time.perf_counter() - started
            self._until_handled(rebuilds[host])
            if server['status'] != 'ERROR':
                self.fail('evacuation to %s did not fail' % host)
            spent = own.take(host)
            samples.append({
                'round': number, 'fixed': fixed,
                'host': host, 'seconds': seconds,
                'sql': rebuilds[host]['statements'],
                'handler_ended': rebuilds[host]['done'],
                'cleanup_seconds': sum(cleanup['seconds']),
                'cleanup_sql': sum(cleanup['statements']),
                'own_seconds': spent['own'],
                'own_on_thread_seconds': spent['own_on_thread'],
                'destroy_seconds': spent['destroy'],
                'left': bool(self.world.domain_state(host, uuid) or
                             self.world.files(host, uuid))})
        self.results['interleaved'] = samples

    # 7. Success path, stock and fixed interleaved.

    def test_success_interleaved(self):
        """Successful evacuations to a stock and a fixed destination.

        As :meth:`test_failure_interleaved`, with no fault: a slower
        moment of the machine falls on both sides, which one nova per
        side, minutes apart (section 1), cannot promise. Each evacuation
        is of a fresh server from the dead source. The first pair of each
        round is not recorded: the first evacuations after a (re)start
        pay for what is loaded once. Per evacuation: wall time and the
        process's CPU time from the API call to the server ACTIVE on the
        destination, and to the destination's ``rebuild_instance``
        returning (the fixed one ends its journal entry after nova made
        the server ACTIVE); the driver calls on the destination; the SQL
        statements on the handler's thread; the time in the project's own
        code (:class:`OwnTime`).
        """
        pairs, rounds = self.params['success_pairs'], 2
        self._start_other_stock()
        uuids = iter(self._boot_many((pairs + 1) * 2 * rounds))
        self._fail_source()
        counters = self._count_statements()
        rebuilds = self._count_rebuilds(counters)
        own = self._own_time()
        samples = []
        for number, pair, host, fixed in self._turns(pairs + 1, rounds):
            uuid = next(uuids)
            rebuilds[host] = {'statements': 0, 'done': False}
            own.take(host)
            calls = self._calls(host)
            cpu_started = time.process_time()
            started = time.perf_counter()
            self.admin_api.post_server_action(
                uuid, {'evacuate': {'host': host}})
            server = self._until(lambda: self._settled(uuid, 0), 'ACTIVE')
            seconds = time.perf_counter() - started
            cpu = time.process_time() - cpu_started
            self._until_handled(rebuilds[host])
            if (server['status'] != 'ACTIVE' or
                    server['OS-EXT-SRV-ATTR:host'] != host):
                self.fail('evacuation to %s failed: %s' % (
                    host, server.get('fault')))
            if not pair:
                continue
            ended = rebuilds[host].get('ended')
            spent = own.take(host)
            samples.append({
                'round': number, 'fixed': fixed, 'host': host,
                'seconds': seconds, 'cpu': cpu,
                'ended_seconds': ended[0] - started if ended else None,
                'ended_cpu': ended[1] - cpu_started if ended else None,
                'calls': dict(self._calls(host) - calls),
                'sql': rebuilds[host]['statements'],
                'handler_ended': rebuilds[host]['done'],
                'own_seconds': spent['own'],
                'own_on_thread_seconds': spent['own_on_thread']})
        self.results['success_interleaved'] = samples

    # What 6 and 7 share.

    def _start_other_stock(self):
        """compute2, the second destination, on nova's own manager."""
        with fixtures.MonkeyPatch('nova.service.SERVICE_MANAGERS',
                                  {'nova-compute': STOCK_MANAGER}):
            self.compute2 = self._start_compute(OTHER)

    def _turns(self, pairs, rounds):
        """The destinations in turn: (round, pair, host, fixed) tuples.

        ``pairs`` pairs per round, one evacuation to each destination per
        pair, the fixed one first in even pairs: a drift of the machine
        falls on both. Before each round but the first both destinations
        restart with the managers swapped (compute1 fixed in even
        rounds): a host slower than the other shows as ratios on both
        sides of 1.
        """
        for number in range(rounds):
            fixed_host, stock_host = (DEST, OTHER) if number % 2 == 0 \
                else (OTHER, DEST)
            if number:
                for host in (DEST, OTHER):
                    self._restart_with(host, FIXED_MANAGER
                                       if host == fixed_host
                                       else STOCK_MANAGER)
            for pair in range(pairs):
                hosts = [fixed_host, stock_host]
                if pair % 2:
                    hosts.reverse()
                for host in hosts:
                    yield number, pair, host, host == fixed_host

    def _restart_with(self, host, path):
        """Restart a destination with the manager of class ``path``.

        nova's helper hands the new service the old one's driver, for the
        guests to survive: the hooks the project's manager set on it
        (``_watch``) are taken off first, as a real restart starts a new
        driver. Left on, a stock manager would run them.
        """
        name = 'compute1' if host == DEST else 'compute2'
        service = getattr(self, name)
        driver = service.manager.driver
        for attr, value in list(vars(driver).items()):
            if getattr(value, '_evacuation_hook', None) is not None:
                delattr(driver, attr)
        with fixtures.MonkeyPatch('nova.service.SERVICE_MANAGERS',
                                  {'nova-compute': path}):
            setattr(self, name, self.restart_compute_service(service))

    def _until_handled(self, counts):
        """Wait, 20 s at most, for the destination's handler to return.

        It returns after the server reached its state: the next
        evacuation must not overlap the end of this one.
        """
        deadline = time.monotonic() + 20
        while not counts['done'] and time.monotonic() < deadline:
            time.sleep(POLL)

    def _own_time(self):
        """Time the project's own code on the destinations: an OwnTime.

        The mixin's methods nova calls open a span; nova's methods the
        mixin calls back into (its rebuild, the resource tracker's
        ``finish_evacuation``, the driver's ``spawn`` and
        ``instance_on_disk``) are nova's work within it, the driver's
        ``destroy`` the destroy's.
        """
        from nova.compute import manager as nova_manager
        from nova.compute import resource_tracker
        own = OwnTime()
        # The watches of spawn, instance_on_disk and finish_evacuation run
        # within rebuild_instance's span.
        marks = [(manager.EvacuateCleanupMixin, name, 'own')
                 for name in ('rebuild_instance', '_do_rebuild_instance',
                              '_rebuild_default_impl')]
        marks += [(nova_manager.ComputeManager, name, 'nova')
                  for name in ('rebuild_instance', '_do_rebuild_instance',
                               '_rebuild_default_impl')]
        marks += [(resource_tracker.ResourceTracker, 'finish_evacuation',
                   'nova'),
                  (fake_libvirt.FakeLibvirtDriver, 'spawn', 'nova'),
                  (fake_libvirt.FakeLibvirtDriver, 'instance_on_disk',
                   'nova'),
                  (fake_libvirt.FakeLibvirtDriver, 'destroy', 'destroy')]
        for owner, name, mark in marks:
            self.useFixture(fixtures.MonkeyPatch(
                '%s.%s.%s' % (owner.__module__, owner.__qualname__, name),
                own.wrap(mark, getattr(owner, name))))
        self.addCleanup(own.trace())
        return own

    def _count_statements(self):
        """SQL statements per green thread: the counters being kept."""
        counters = []

        def statement(conn, cursor, sql, parameters, context, many):
            if sql.split(None, 1)[0].upper() in TRANSACTION_CONTROL:
                return
            current = greenlet.getcurrent()
            for thread, counts in counters:
                if thread is current:
                    counts['statements'] += 1

        sa.event.listen(sa.engine.Engine, 'before_cursor_execute',
                        statement)
        self.addCleanup(sa.event.remove, sa.engine.Engine,
                        'before_cursor_execute', statement)
        return counters

    def _count_rebuilds(self, counters):
        """Count each destination's rebuild_instance, by host.

        nova's method and the mixin's, the outermost only: the statements
        of the whole handler, on its thread.

        :returns: the counts by host, which the caller resets per
            evacuation
        """
        by_host = {}

        def wrap(original):
            @functools.wraps(original)
            def rebuild_instance(manager_, *args, **kwargs):
                current = greenlet.getcurrent()
                counts = by_host.get(manager_.host)
                if counts is None or any(
                        thread is current for thread, _ in counters):
                    return original(manager_, *args, **kwargs)
                entry = (current, counts)
                counters.append(entry)
                try:
                    return original(manager_, *args, **kwargs)
                finally:
                    counters[:] = [e for e in counters if e is not entry]
                    counts['done'] = True
                    counts['ended'] = (time.perf_counter(),
                                       time.process_time())
            return rebuild_instance

        from nova.compute import manager as nova_manager
        for path, original in (
                ('nova.compute.manager.ComputeManager.rebuild_instance',
                 nova_manager.ComputeManager.rebuild_instance),
                ('nova_evac_cleanup.manager.EvacuateCleanupMixin.'
                 'rebuild_instance',
                 manager.EvacuateCleanupMixin.rebuild_instance)):
            self.useFixture(fixtures.MonkeyPatch(path, wrap(original)))
        return by_host

    @staticmethod
    def _timed(original, sink, counters):
        @functools.wraps(original)
        def timed(*args, **kwargs):
            counts = {'statements': 0}
            entry = (greenlet.getcurrent(), counts)
            counters.append(entry)
            started = time.perf_counter()
            try:
                return original(*args, **kwargs)
            finally:
                sink['seconds'].append(time.perf_counter() - started)
                counters[:] = [e for e in counters if e is not entry]
                sink['statements'].append(counts['statements'])
        return timed

    # 3. Host evacuation.

    def test_host_evacuation(self):
        """A host with N instances dies; evacuate all, retry the failed."""
        count = self.params['host_count']
        rng = random.Random(self.params['seed'])
        uuids = self._boot_many(count)
        self._fail_source()

        failing = rng.sample(uuids, round(count * self.params['fail_ratio']))
        faults = {}
        for uuid in failing:
            stage = rng.choice(fake_libvirt.STAGES)
            faults[(DEST, uuid)] = (stage, fake_libvirt.FakeLibvirtError(
                'injected failure at %s on %s' % (stage, DEST)))
        stages = collections.Counter(stage for stage, _ in faults.values())
        per_instance_faults(self.world, faults)

        started = time.perf_counter()
        first = self._evacuate_all(uuids)
        first_seconds = time.perf_counter() - started
        failed = [uuid for uuid, server in first.items()
                  if server['status'] != 'ACTIVE']
        after_first = self._debris(uuids)

        started = time.perf_counter()
        retried = self._evacuate_all(failed)
        retry_seconds = time.perf_counter() - started
        servers = dict(first, **retried)

        active = [uuid for uuid, server in servers.items()
                  if server['status'] == 'ACTIVE' and
                  server['OS-EXT-SRV-ATTR:host'] == DEST]
        stale = [uuid for uuid in active if self._stale_disk(uuid)]
        code, output = self._placement_audit()
        orphaned = output.count('Allocations for consumer UUID')
        after_retry = self._debris(uuids)
        steps = collections.Counter()
        for uuid in uuids:
            if uuid not in active:
                steps['evacuate again'] += 1
            if uuid in after_retry['domains']:
                steps['virsh destroy/undefine'] += 1
            if uuid in after_retry['files']:
                steps['rm -rf instance directory'] += 1
            if uuid in stale:
                steps['rebuild (booted a stale/partial disk)'] += 1
        if orphaned:
            steps['nova-manage placement audit --delete'] += 1
        self.results['host'] = {
            'count': count, 'failing': len(failing),
            'stages': dict(stages), 'failed_first': len(failed),
            'fired': sum(1 for fault in self.world.fired_faults
                         if fault.point in fake_libvirt.STAGES),
            'active_after_retry': len(active), 'stale_disks': len(stale),
            'after_first': after_first, 'after_retry': after_retry,
            'audit_code': code, 'orphaned_allocations': orphaned,
            'manual_steps': dict(steps),
            'first_seconds': first_seconds, 'retry_seconds': retry_seconds}

    # 4. The start-up sweep.

    def test_sweep_startup(self):
        """Restarts of the destination with a growing evacuation history.

        A few servers are evacuated to the destination for real (its
        journal directory and its guests are a real host's), then old
        evacuation records to it are added in bulk, with their instances,
        until there are each of ``sweep_records``; at each size the
        destination restarts ``sweep_restarts`` times with nothing to do.
        Timed per restart: nova's own ``ComputeManager.init_host``, the
        sweep (``sweep.on_start``), the give-back of failed evacuations from
        here (``giveback.give_back_all``, which also runs periodically) and
        the manager's whole ``init_host``; counted: the SQL queries each
        runs on its own thread.
        """
        if not self.FIXED:
            self.skipTest('stock nova has no start-up sweep')
        guests = self._boot_many(self.params['sweep_guests'])
        self._fail_source()
        for server in self._evacuate_all(guests).values():
            if server['status'] != 'ACTIVE':
                self.fail('evacuation failed: %s' % server.get('fault'))
        timings, statements = self._time_start_up()
        sizes = []
        records = 0
        for target in self.params['sweep_records']:
            started = time.perf_counter()
            self._add_old_evacuations(target - records, records)
            insert_seconds = time.perf_counter() - started
            records = target
            for key in timings:
                del timings[key][:]
            log_before = len(self.stdlog.logger.output)
            for _ in range(self.params['sweep_restarts']):
                started = time.perf_counter()
                self.compute1 = self.restart_compute_service(self.compute1)
                timings['restart'].append(time.perf_counter() - started)
            sweep_log = [line for line in
                         self.stdlog.logger.output[log_before:].splitlines()
                         if 'interrupted evacuation to %s' % DEST in line]
            size = {'records': target, 'insert_seconds': insert_seconds,
                    'records_in_db': self._count_evacuations_to(DEST),
                    'sweep_log_lines': len(sweep_log),
                    'sweep_plans': self._explain(statements['sweep']),
                    'nova_init_host_plans': self._explain(
                        statements['nova_init_host']),
                    'sweep_log': sweep_log[-1:]}
            size.update({key: list(values)
                         for key, values in timings.items()})
            sizes.append(size)
        self.results['sweep'] = {
            'guests': len(guests), 'restarts': self.params['sweep_restarts'],
            'sizes': sizes}

    def _time_start_up(self):
        """Time and count nova's init_host, the sweep, the whole start.

        The real functions run, wrapped. SQL queries (transaction control
        left out) are counted per database (nova's cell databases, and the
        rest: placement, the API database) on the thread that runs the
        wrapped function only; those of nova's init_host and of the sweep
        on nova's database are kept in ``statements`` (of their last run)
        to explain them afterwards.

        :returns: lists of the measures, appended to at each start, and
            the statements
        """
        timings = collections.defaultdict(list)
        statements = {'nova_init_host': [], 'sweep': []}
        counting = []
        cells = set()
        ctxt = nova_context.get_admin_context()
        for cell in self.cell_mappings.values():
            with nova_context.target_cell(ctxt, cell) as cctxt:
                cells.add(db_api.get_engine(context=cctxt))

        def statement(conn, cursor, sql, parameters, context, many):
            if sql.split(None, 1)[0].upper() in TRANSACTION_CONTROL:
                return
            nova = conn.engine in cells
            current = greenlet.getcurrent()
            for thread, name, counts in counting:
                if thread is current:
                    counts['nova' if nova else 'other'] += 1
                    if name in statements and nova:
                        statements[name].append(
                            (conn.engine, sql, parameters))

        sa.event.listen(sa.engine.Engine, 'before_cursor_execute',
                        statement)
        self.addCleanup(sa.event.remove, sa.engine.Engine,
                        'before_cursor_execute', statement)

        def timed(name, original, result=None):
            # nova_support.check() looks through the wrapper at nova's
            # signature.
            @functools.wraps(original)
            def wrapper(*args, **kwargs):
                counts = collections.Counter()
                entry = (greenlet.getcurrent(), name, counts)
                if name in statements:
                    del statements[name][:]
                counting.append(entry)
                started = time.perf_counter()
                try:
                    value = original(*args, **kwargs)
                finally:
                    timings[name].append(time.perf_counter() - started)
                    counting[:] = [e for e in counting if e is not entry]
                    timings[name + '_queries'].append(counts['nova'])
                    timings[name + '_other_queries'].append(counts['other'])
                if result is not None:
                    result(value)
                return value
            return wrapper

        def found(findings):
            # One finding per journal entry examined.
            timings['examined'].append(len(findings))

        from nova.compute import manager as nova_manager
        from nova_evac_cleanup import giveback
        from nova_evac_cleanup import sweep
        for name, owner, attr, result in (
                ('nova_init_host', nova_manager.ComputeManager, 'init_host',
                 None),
                ('init_host', manager.EvacuateCleanupMixin, 'init_host',
                 None),
                ('sweep', sweep, 'on_start', found),
                ('give_back', giveback, 'give_back_all', None)):
            self.useFixture(fixtures.MonkeyPatch(
                '%s.%s.%s' % (owner.__module__, owner.__qualname__, attr)
                if isinstance(owner, type) else
                '%s.%s' % (owner.__name__, attr),
                timed(name, getattr(owner, attr), result)))
        return timings, statements

    @staticmethod
    def _explain(statements):
        """The query plans of the statements, on SQLite only.

        Run after the timed start: ``EXPLAIN QUERY PLAN`` of each, with the
        parameters it ran with.
        """
        plans = []
        for engine, sql, parameters in statements:
            if engine.dialect.name != 'sqlite':
                continue
            with engine.connect() as conn:
                rows = conn.exec_driver_sql(
                    'EXPLAIN QUERY PLAN ' + sql, parameters).fetchall()
            where = ' '.join(sql.split())
            where = where[where.find(' FROM '):].strip()
            plans.append({'sql': where,
                          'plan': [row[-1] for row in rows]})
        return plans

    def _add_old_evacuations(self, count, first):
        """Add ``count`` old evacuation records to the destination.

        With their instances, as nova's schema wants: hosted elsewhere
        since (an evacuation that failed left its instance on its source),
        or deleted, with their migrations, as nova deletes them. Inserted
        in bulk through nova's models into the destination's cell database,
        created over the last three years.
        """
        if count <= 0:
            return
        rng = random.Random(self.params['seed'] + first)
        ctxt = nova_context.get_admin_context()
        cell = self.host_mappings[DEST].cell_mapping
        statuses = [status for status, weight in HISTORY
                    for _ in range(weight)]
        now = timeutils.utcnow()
        instances, migrations = [], []
        with nova_context.target_cell(ctxt, cell) as cctxt:
            node = objects.ComputeNodeList.get_all_by_host(cctxt, DEST)[0]
            for i in range(first, first + count):
                uuid = uuidutils.generate_uuid()
                status = rng.choice(statuses)
                source = 'old-compute%d' % rng.randrange(20)
                host = source if status == 'failed' else (
                    'old-compute%d' % rng.randrange(20))
                created = now - datetime.timedelta(
                    minutes=rng.randrange(3 * 365 * 24 * 60))
                deleted = rng.random() < DELETED_SHARE
                gone = created + datetime.timedelta(days=1) if deleted \
                    else None
                instances.append({
                    'uuid': uuid, 'created_at': created,
                    'updated_at': gone or created, 'deleted_at': gone,
                    'user_id': 'old-user', 'project_id': 'old-project',
                    'display_name': 'old-%d' % i, 'hostname': 'old-%d' % i,
                    'host': host, 'node': host, 'launched_on': source,
                    'vm_state': 'deleted' if deleted else (
                        'error' if status == 'failed' else 'active'),
                    'power_state': 0 if deleted or status == 'failed'
                    else 1,
                    'task_state': None, 'memory_mb': 512, 'vcpus': 1,
                    'root_gb': 1, 'ephemeral_gb': 0,
                    'launched_at': created, 'terminated_at': gone,
                    'availability_zone': 'nova', 'cleaned': int(deleted)})
                migrations.append({
                    'uuid': uuidutils.generate_uuid(),
                    'instance_uuid': uuid, 'created_at': created,
                    'updated_at': created + datetime.timedelta(minutes=2),
                    'deleted_at': gone,
                    'source_compute': source, 'source_node': source,
                    'dest_compute': DEST,
                    'dest_node': node.hypervisor_hostname,
                    'dest_compute_id': node.id, 'dest_host': str(node.host_ip),
                    'status': status, 'migration_type': 'evacuation',
                    'hidden': False, 'cross_cell_move': False,
                    'user_id': 'old-user', 'project_id': 'old-project'})
            writer = db_api.get_context_manager(cctxt).writer
            with writer.using(cctxt) as session:
                session.execute(models.Instance.__table__.insert(),
                                instances)
                session.execute(models.Migration.__table__.insert(),
                                migrations)
                # nova soft-deletes with deleted = id.
                for model in (models.Instance, models.Migration):
                    table = model.__table__
                    session.execute(
                        table.update().where(
                            table.c.deleted_at.isnot(None),
                            table.c.deleted == 0).values(
                                deleted=table.c.id))

    def _count_evacuations_to(self, host):
        """Evacuation records to ``host``, deleted ones included."""
        ctxt = nova_context.get_admin_context()
        cell = self.host_mappings[host].cell_mapping
        with nova_context.target_cell(ctxt, cell) as cctxt:
            reader = db_api.get_context_manager(cctxt).reader
            with reader.using(cctxt) as session:
                table = models.Migration.__table__
                return session.execute(
                    sa.select(sa.func.count()).select_from(table).where(
                        table.c.dest_compute == host,
                        table.c.migration_type == 'evacuation')).scalar()

    # What is left.

    def _stale_disk(self, uuid):
        """Whether an ACTIVE server runs on a stale or partial disk.

        That is a disk its last spawn did not write (non-shared storage,
        image-backed): the stale-disk bug.
        """
        if self.STORAGE != 'non-shared':
            return False
        spawns = [s for s in self.world.spawns(DEST, uuid) if s.succeeded]
        return bool(spawns) and (
            self.world.disk_generation(DEST, uuid) != spawns[-1].generation or
            not self.world.disk_is_complete(DEST, uuid))

    def _debris(self, uuids):
        """What servers not ACTIVE on the destination left there.

        Their domains, and the bytes on the destination's own storage.
        """
        domains = self.world.domains(DEST)
        left = {'domains': {}, 'files': {}, 'bytes': 0}
        for uuid in uuids:
            server = self.admin_api.get_server(uuid)
            if (server['status'] == 'ACTIVE' and
                    server['OS-EXT-SRV-ATTR:host'] == DEST):
                continue
            if uuid in domains:
                left['domains'][uuid] = domains[uuid]
            if self.STORAGE == 'non-shared':
                files = self.world.files(DEST, uuid)
            else:
                files = {}
            if files:
                left['files'][uuid] = sum(files.values())
                left['bytes'] += sum(files.values())
        return left


def median(values):
    return statistics.median(values) if values else float('nan')
