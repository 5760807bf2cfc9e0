# SPDX-License-Identifier: Apache-2.0

"""A fake compute driver that leaves debris behind like the libvirt driver.

nova's ``FakeDriver`` keeps its guests in a dict and has no disks, so an
evacuation whose spawn fails on the destination leaves nothing behind there
and the bug this project fixes cannot be seen with it. nova's functional
libvirt tests fake libvirt itself, which costs far more than these tests
need and still keeps no real files. :class:`FakeLibvirtDriver` sits in
between: it reports resources like ``MediumFakeDriver``, so placement and
the scheduler work as in any nova functional test, but it keeps what the
libvirt driver keeps on a host and in the same way:

* a domain table per host (``virsh list --all``), whose entries are either
  ``'defined'`` (shut off) or ``'running'``;
* an instances directory per host with one directory per instance holding a
  real ``disk`` file and a ``console.log``, on one of the storage layouts of
  :data:`STORAGE_MODES`;
* the decisions the libvirt driver makes about those files: which spawn
  created them, which failures of ``spawn`` it cleans up itself, what
  ``destroy``/``cleanup`` remove for ``destroy_disks`` True or False, and how
  ``instance_on_disk`` and the shared storage checks answer.

Every compute service of a functional test runs in one process and shares
``CONF``, so nothing here is read from ``CONF.instances_path`` or
``CONF.libvirt.images_type``. The state lives in a module level
:class:`FakeLibvirtWorld` keyed by the host the driver was given in
``init_host``; it therefore survives a restart of a compute service whether
nova reuses the driver object or builds a new one, just as libvirt's domains
and the files on disk survive a restart of nova-compute.

Install a world with :class:`FakeLibvirtFixture` and load the driver with
``compute_driver = tests.harness.fake_libvirt.FakeLibvirtDriver``
(:data:`DRIVER`).
"""

import collections
import functools
import hashlib
import os
import shutil
import tempfile
import threading

import fixtures
from oslo_log import log as logging
from oslo_utils import excutils

from nova import block_device
from nova.compute import power_state
import nova.conf
from nova import exception
from nova.virt import driver
from nova.virt import fake

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)

#: The value of ``[DEFAULT] compute_driver`` that loads
#: :class:`FakeLibvirtDriver`.
DRIVER = 'tests.harness.fake_libvirt.FakeLibvirtDriver'

#: Storage layouts. ``non-shared``: every host has its own instances
#: directory with the disks in it (the libvirt default with local qcow2
#: disks). ``shared``: one instances directory for all hosts (NFS mounted
#: ``instances_path``). ``rbd``: every host has its own instances directory,
#: which only holds ``console.log`` and the like, and the disks live in a
#: pool outside of any instance directory that every host reaches (Ceph RBD,
#: ``[libvirt] images_type = rbd``). ``shared-unwritable``: the ``shared``
#: layout, but an instance directory is writable for nova only on the host
#: whose spawn created it (an NFSv4 idmap or uid mismatch, a read-only
#: export): on any other host it exists and ``os.access(path, os.W_OK)`` is
#: False, so ``instance_on_disk`` answers not shared and the shared storage
#: check cannot create its test file there.
STORAGE_MODES = ('non-shared', 'shared', 'rbd', 'shared-unwritable')
#: The storage modes with one instances directory for all hosts.
SHARED_DIRECTORY_MODES = ('shared', 'shared-unwritable')

#: The steps of :meth:`FakeLibvirtDriver.spawn`, in order. They mirror
#: ``LibvirtDriver.spawn``: ``_create_image`` (instance directory, then the
#: disks), ``_get_guest_xml``, then ``_create_guest_with_network`` (define
#: the domain, plug the VIFs, launch it) and finally the ``_wait_for_boot``
#: loop.
STAGES = ('create_instance_dir', 'create_disks', 'get_guest_xml',
          'define_domain', 'plug_vifs', 'launch', 'wait_for_boot')

#: The stages whose failure the driver cleans up itself, like
#: ``_create_guest_with_network`` does (bug 1550919): it undefines the domain
#: and removes the instance directory and disks, but only those this spawn
#: created. A failure in any other stage leaves everything where it is.
SELF_CLEANING_STAGES = ('define_domain', 'plug_vifs', 'launch')

#: The size of a complete disk written by :meth:`FakeLibvirtDriver.spawn`.
DISK_SIZE = 1024 * 1024
#: The size of the disk a fault in ``create_disks`` leaves behind.
PARTIAL_DISK_SIZE = 64 * 1024
#: The size of the header at the start of every disk.
DISK_HEADER_SIZE = 128
_DISK_MAGIC = b'FAKE-LIBVIRT-DISK'

#: The key of the RBD disk in :meth:`FakeLibvirtWorld.files`.
RBD_DISK_KEY = 'rbd:disk'


class FakeLibvirtError(Exception):
    """The default exception an injected fault raises."""


#: One fault that fired. ``point`` is a stage of :data:`STAGES`, or
#: ``'destroy'`` or ``'cleanup'``.
FiredFault = collections.namedtuple(
    'FiredFault', ['host', 'point', 'uuid', 'exc'])


class SpawnRecord(object):
    """What one call of :meth:`FakeLibvirtDriver.spawn` did.

    :ivar host: the host the spawn ran on
    :ivar uuid: the instance uuid
    :ivar generation: the number of this spawn in the world, written into
        the header of every disk the spawn creates
    :ivar stages: the stages the spawn entered, in order
    :ivar created_instance_dir: whether this spawn created the instance
        directory (libvirt's ``created_instance_dir``)
    :ivar created_disks: whether this spawn created the root disk (libvirt's
        ``created_disks``)
    :ivar failed_stage: the stage that raised, or None
    :ivar error: the exception spawn raised, or None
    :ivar cleaned_up: whether the driver cleaned up after the failure itself
    :ivar succeeded: whether spawn returned
    """

    def __init__(self, host, uuid, generation):
        self.host = host
        self.uuid = uuid
        self.generation = generation
        self.stages = []
        self.created_instance_dir = False
        self.created_disks = False
        self.failed_stage = None
        self.error = None
        self.cleaned_up = False
        self.succeeded = False

    def __repr__(self):
        return ('SpawnRecord(host=%r, uuid=%r, generation=%r, stages=%r, '
                'failed_stage=%r, cleaned_up=%r, succeeded=%r)' % (
                    self.host, self.uuid, self.generation, self.stages,
                    self.failed_stage, self.cleaned_up, self.succeeded))


class SpawnBlock(object):
    """Hold a spawn at the start of a stage until released.

    It behaves like a ``threading.Event`` whose ``set`` (or ``release``)
    lets the spawn go on. It is made of ``threading.Event`` objects created
    when the block is, so under eventlet monkey patching, as in nova's
    functional tests, waiting only blocks the green thread of the spawn.

    A block is one-shot: it holds the next spawn on its host that reaches
    its stage and is then removed from the world.

    :ivar reached: an event set once a spawn waits at the block; wait for it
        with :meth:`wait_reached` before stopping a compute service to model
        a compute that died in the middle of a spawn.
    """

    def __init__(self, host, stage):
        self.host = host
        self.stage = stage
        self.reached = threading.Event()
        self._released = threading.Event()
        self._exc = None

    def set(self, exc=None):
        """Let the spawn go on.

        :param exc: if given the spawn raises it instead of entering the
            stage, without the driver cleaning anything up, as if the
            process had died there. Used when a world is reset.
        """
        self._exc = exc
        self._released.set()

    release = set

    def is_set(self):
        return self._released.is_set()

    def wait(self, timeout=None):
        """Wait until the block is released."""
        return self._released.wait(timeout)

    def wait_reached(self, timeout=None):
        """Wait until a spawn is held by this block."""
        return self.reached.wait(timeout)

    def _hold(self):
        self.reached.set()
        self._released.wait()
        if self._exc is not None:
            raise self._exc


def _uuid_of(instance_or_uuid):
    return getattr(instance_or_uuid, 'uuid', instance_or_uuid)


def _state_name(domain):
    if domain is None:
        return None
    return 'running' if domain.state == power_state.RUNNING else 'defined'


class FakeLibvirtWorld(object):
    """The hosts, their domains and files, and the faults to inject.

    One world is installed at a time (:func:`get_world`,
    :class:`FakeLibvirtFixture`); every :class:`FakeLibvirtDriver` uses the
    installed one, keyed by its host.

    :param root: the directory all files of the world are kept under
    :param storage: one of :data:`STORAGE_MODES`
    """

    def __init__(self, root, storage='non-shared'):
        if storage not in STORAGE_MODES:
            raise ValueError('storage must be one of %s, not %r' %
                             (', '.join(STORAGE_MODES), storage))
        self.root = root
        self.storage = storage
        self._lock = threading.RLock()
        self._domains = collections.defaultdict(dict)
        self._calls = collections.defaultdict(collections.Counter)
        self._spawn_faults = {}
        self._destroy_faults = {}
        self._blocks = {}
        self._held = set()
        self._fired = []
        self._spawns = []
        self._generation = 0
        # shared-unwritable: the host that created each instance directory.
        self._dir_creators = {}

    # Layout.

    def instances_path(self, host):
        """The instances directory of a host (``CONF.instances_path``)."""
        if self.storage in SHARED_DIRECTORY_MODES:
            return os.path.join(self.root, 'shared', 'instances')
        return os.path.join(self.root, host, 'instances')

    def instance_dir(self, host, uuid):
        """The instance directory, as ``libvirt_utils.get_instance_path``.

        :param uuid: an instance uuid or an object with a ``uuid``
        """
        return os.path.join(self.instances_path(host), _uuid_of(uuid))

    def writable(self, host, uuid):
        """Whether nova on ``host`` may write the instance directory.

        ``os.access(path, os.W_OK)`` as nova's user: False if the directory
        does not exist and, on ``shared-unwritable`` storage, on every host
        but the one whose spawn created it. (The tests run as root, for
        whom ``os.access`` is always true.)
        """
        path = self.instance_dir(host, uuid)
        if not os.access(path, os.W_OK):
            return False
        if self.storage != 'shared-unwritable':
            return True
        with self._lock:
            return self._dir_creators.get(path, host) == host

    def _created_dir(self, host, uuid):
        with self._lock:
            self._dir_creators[self.instance_dir(host, uuid)] = host

    def rbd_pool_path(self):
        """The directory the ``rbd`` storage mode keeps its disks in."""
        return os.path.join(self.root, 'rbd')

    def disk_path(self, host, uuid):
        """The path of the root disk; on ``rbd`` the image in the pool."""
        if self.storage == 'rbd':
            return os.path.join(self.rbd_pool_path(),
                                '%s_disk' % _uuid_of(uuid))
        return os.path.join(self.instance_dir(host, uuid), 'disk')

    # Introspection.

    def files(self, host, uuid):
        """What the instance has on the host's storage.

        :returns: a dict of the size of every file in the instance directory
            keyed by its path relative to that directory, plus, on ``rbd``,
            the size of the image in the pool under :data:`RBD_DISK_KEY`.
            Empty if there is nothing.
        """
        result = {}
        top = self.instance_dir(host, uuid)
        for dirpath, _dirnames, filenames in os.walk(top):
            for name in filenames:
                path = os.path.join(dirpath, name)
                result[os.path.relpath(path, top)] = os.path.getsize(path)
        if self.storage == 'rbd':
            path = self.disk_path(host, uuid)
            if os.path.exists(path):
                result[RBD_DISK_KEY] = os.path.getsize(path)
        return result

    def _read_disk(self, host, uuid):
        try:
            with open(self.disk_path(host, uuid), 'rb') as disk:
                return disk.read()
        except FileNotFoundError:
            return None

    def disk_checksum(self, host, uuid):
        """The sha256 hex digest of the root disk, or None without one."""
        data = self._read_disk(host, uuid)
        return None if data is None else hashlib.sha256(data).hexdigest()

    def disk_header(self, host, uuid):
        """The header of the root disk as a dict, or None without one.

        The keys are ``generation`` (int), ``host`` and ``uuid``: the spawn
        that wrote the disk, the host it ran on and the instance.
        """
        data = self._read_disk(host, uuid)
        if not data or not data.startswith(_DISK_MAGIC):
            return None
        fields = data[:DISK_HEADER_SIZE].split()[1:]
        header = dict(field.decode().split('=', 1) for field in fields)
        header['generation'] = int(header['generation'])
        return header

    def disk_generation(self, host, uuid):
        """The generation of the spawn that wrote the disk, or None.

        A spawn that finds the disk present reuses it untouched, like the
        libvirt image backends do, so the generation tells a disk created
        by the latest spawn from a stale one left by an earlier one.
        """
        header = self.disk_header(host, uuid)
        return None if header is None else header['generation']

    def disk_is_complete(self, host, uuid):
        """Whether the disk exists and has its full size."""
        path = self.disk_path(host, uuid)
        return os.path.exists(path) and os.path.getsize(path) == DISK_SIZE

    def domain_state(self, host, uuid):
        """None, ``'defined'`` (shut off) or ``'running'``."""
        with self._lock:
            return _state_name(self._domains[host].get(_uuid_of(uuid)))

    def domains(self, host):
        """A dict of the state of every domain on a host keyed by uuid."""
        with self._lock:
            return {uuid: _state_name(domain)
                    for uuid, domain in self._domains[host].items()}

    def calls(self, host):
        """A ``collections.Counter`` of the driver calls made on a host.

        Only the entry points nova calls are counted (``spawn``,
        ``destroy``, ``cleanup``, ``instance_on_disk``, ``instance_exists``,
        ``get_info``, ...), not their use of one another inside the driver:
        a ``destroy`` counts as one ``destroy`` and no ``cleanup``.
        """
        with self._lock:
            return collections.Counter(self._calls[host])

    def fired(self, host, point):
        """How many injected faults fired on a host at a point.

        :param point: a stage of :data:`STAGES`, ``'destroy'`` or
            ``'cleanup'``
        """
        with self._lock:
            return sum(1 for fault in self._fired
                       if fault.host == host and fault.point == point)

    @property
    def fired_faults(self):
        """Every fault that fired, as :data:`FiredFault`, oldest first."""
        with self._lock:
            return list(self._fired)

    def spawns(self, host=None, uuid=None):
        """The :class:`SpawnRecord` of every spawn, oldest first."""
        with self._lock:
            return [record for record in self._spawns
                    if host in (None, record.host) and
                    uuid in (None, record.uuid)]

    # Fault injection.

    def inject_spawn_fault(self, host, stage, exc=None):
        """Make the next spawn on a host that reaches a stage fail there.

        The fault is one-shot and fires at the start of the stage, except in
        ``create_disks``, where a disk this spawn creates is first written
        only partially (:data:`PARTIAL_DISK_SIZE` bytes), like an interrupted
        image download; a disk that already exists is left untouched. What
        else the failure leaves depends on the stage, see
        :data:`SELF_CLEANING_STAGES`.

        :param exc: the exception to raise; by default a
            :class:`FakeLibvirtError` naming the stage and host
        :returns: the exception that will be raised
        """
        if stage not in STAGES:
            raise ValueError('stage must be one of %s, not %r' %
                             (', '.join(STAGES), stage))
        if exc is None:
            exc = FakeLibvirtError(
                'injected failure at %s on %s' % (stage, host))
        with self._lock:
            self._spawn_faults[(host, stage)] = exc
        return exc

    def inject_destroy_fault(self, host, exc=None, method='destroy'):
        """Make the next ``destroy`` (or ``cleanup``) on a host fail.

        The fault fires before the call does anything: the domain, the
        instance directory and the disks are left exactly as they were. It
        is one-shot.

        :param exc: the exception to raise; by default a
            :class:`FakeLibvirtError`
        :param method: ``'destroy'`` or ``'cleanup'``
        :returns: the exception that will be raised
        """
        if method not in ('destroy', 'cleanup'):
            raise ValueError('method must be destroy or cleanup')
        if exc is None:
            exc = FakeLibvirtError(
                'injected failure at %s on %s' % (method, host))
        with self._lock:
            self._destroy_faults[(host, method)] = exc
        return exc

    def block_spawn(self, host, stage):
        """Hold the next spawn on a host at the start of a stage.

        :returns: a :class:`SpawnBlock`; call its ``release()`` to let the
            spawn go on
        """
        if stage not in STAGES:
            raise ValueError('stage must be one of %s, not %r' %
                             (', '.join(STAGES), stage))
        block = SpawnBlock(host, stage)
        with self._lock:
            self._blocks[(host, stage)] = block
        return block

    def clear_faults(self):
        """Forget the faults not fired yet and release every block."""
        with self._lock:
            self._spawn_faults.clear()
            self._destroy_faults.clear()
            blocks = self._take_blocks()
        for block in blocks:
            block.release()

    # Host level events.

    def host_reboot(self, host):
        """Shut off every domain of a host, as a reboot of the host does.

        The domains stay defined (libvirt persistent domains) and the files
        stay where they are.
        """
        with self._lock:
            for domain in self._domains[host].values():
                domain.state = power_state.SHUTDOWN

    def remove_domain(self, host, uuid):
        """Make a domain vanish from a host, as if undefined behind nova."""
        with self._lock:
            self._domains[host].pop(_uuid_of(uuid), None)

    def reset(self):
        """Forget all domains, counters, faults and records.

        Spawns still held by a block are released with a
        :class:`FakeLibvirtError`, so that they stop instead of writing into
        a root directory that may be about to be removed. Files are left to
        whoever owns the root directory.
        """
        with self._lock:
            blocks = self._take_blocks()
            self._spawn_faults.clear()
            self._destroy_faults.clear()
            self._domains.clear()
            self._calls.clear()
            self._fired = []
            self._spawns = []
        for block in blocks:
            block.release(FakeLibvirtError('fake libvirt world was reset'))

    # Used by the driver.

    def _take_blocks(self):
        # Both the blocks no spawn reached yet and those holding one.
        blocks = list(self._blocks.values()) + list(self._held)
        self._blocks.clear()
        self._held.clear()
        return blocks

    def _count(self, host, name):
        with self._lock:
            self._calls[host][name] += 1

    def _domain_table(self, host):
        with self._lock:
            return self._domains[host]

    def _start_spawn(self, host, uuid):
        with self._lock:
            self._generation += 1
            record = SpawnRecord(host, uuid, self._generation)
            self._spawns.append(record)
            return record

    def _enter_stage(self, record, stage):
        """Wait at a block if any, then return the fault to fire or None."""
        record.stages.append(stage)
        with self._lock:
            block = self._blocks.pop((record.host, stage), None)
            if block is not None:
                self._held.add(block)
        if block is not None:
            LOG.debug('Holding spawn of %s on %s at %s', record.uuid,
                      record.host, stage)
            try:
                block._hold()
            finally:
                with self._lock:
                    self._held.discard(block)
        with self._lock:
            exc = self._spawn_faults.pop((record.host, stage), None)
            if exc is not None:
                self._fired.append(
                    FiredFault(record.host, stage, record.uuid, exc))
        return exc

    def _destroy_fault(self, host, method, uuid):
        with self._lock:
            exc = self._destroy_faults.pop((host, method), None)
            if exc is not None:
                self._fired.append(FiredFault(host, method, uuid, exc))
        return exc

    def _write_disk(self, record, path, partial=False):
        header = b'%s generation=%d host=%s uuid=%s' % (
            _DISK_MAGIC, record.generation, str(record.host).encode(),
            str(record.uuid).encode())
        header = header.ljust(DISK_HEADER_SIZE - 1) + b'\n'
        size = PARTIAL_DISK_SIZE if partial else DISK_SIZE
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, 'wb') as disk:
            disk.write(header)
            disk.write(b'\0' * (size - len(header)))


_WORLD = None
_WORLD_LOCK = threading.Lock()


def get_world():
    """The installed world.

    Without :class:`FakeLibvirtFixture` a ``non-shared`` world under a new
    temporary directory is installed on first use, so that the driver also
    works when a test forgets the fixture; that directory is not removed.
    """
    global _WORLD
    with _WORLD_LOCK:
        if _WORLD is None:
            root = tempfile.mkdtemp(prefix='fake-libvirt-')
            LOG.warning('No fake libvirt world installed; using %s', root)
            _WORLD = FakeLibvirtWorld(root)
        return _WORLD


def set_world(world):
    """Install a world, returning the one it replaces (or None)."""
    global _WORLD
    with _WORLD_LOCK:
        previous, _WORLD = _WORLD, world
        return previous


def _counted(func):
    """Count a call of a driver method in the world, keyed by host."""
    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        get_world()._count(self._host, func.__name__)
        return func(self, *args, **kwargs)
    return wrapper


def _is_booted_from_volume(block_device_info):
    """Whether the instance boots from a volume, as libvirt decides it.

    ``LibvirtDriver._is_booted_from_volume``: a block device mapping with
    ``boot_index`` 0. Such an instance gets no local root disk.
    """
    mapping = driver.block_device_info_get_mapping(block_device_info)
    return bool(block_device.get_root_bdm(mapping))


class FakeLibvirtDriver(fake.MediumFakeDriver):
    """``MediumFakeDriver`` with libvirt's domains, files and cleanup.

    Only what decides what is left on a host after a spawn, destroy or
    cleanup is overridden; everything else, resource reporting above all,
    is ``MediumFakeDriver``'s. The domain table of the world takes the place
    of ``FakeDriver.instances``, so the inherited methods that use it (power
    actions, rescue, snapshot, resize) work on the world's domains.
    """

    capabilities = dict(fake.MediumFakeDriver.capabilities,
                        supports_evacuate=True)

    @property
    def world(self):
        return get_world()

    @property
    def instances(self):
        """This host's domain table in the installed world."""
        return get_world()._domain_table(self._host)

    @instances.setter
    def instances(self, value):
        # FakeDriver.__init__ assigns an empty dict; the domains live in the
        # world instead so that they survive a compute service restart.
        pass

    def __init__(self, virtapi, read_only=False):
        super().__init__(virtapi, read_only)
        # libvirt's volume connector names CONF.host, which it knows before
        # init_host; the computes of a test share CONF: kept from now.
        self._connector_host = CONF.host

    def get_volume_connector(self, instance):
        return dict(super().get_volume_connector(instance),
                    host=self._host or self._connector_host)

    def _domain(self, world, instance):
        return world._domain_table(self._host).get(instance.uuid)

    # Spawn.

    @_counted
    def spawn(self, context, instance, image_meta, injected_files,
              admin_password, allocations, network_info=None,
              block_device_info=None, power_on=True, accel_info=None):
        """Walk :data:`STAGES` like ``LibvirtDriver.spawn``.

        * ``create_instance_dir``: create the instance directory unless it
          exists; remember whether this spawn created it.
        * ``create_disks``: write the root disk unless it exists, in which
          case it is reused untouched as libvirt's image backends reuse an
          existing disk (on ``rbd`` the image in the pool); remember whether
          this spawn created it. An instance booted from a volume gets no
          root disk. Then create ``console.log``
          (``_ensure_console_log_for_instance``).
        * ``get_guest_xml``: wait for the network info, as building the XML
          from the VIFs does.
        * ``define_domain``: define the domain (shut off).
        * ``plug_vifs``: record the VIFs as attached.
        * ``launch``: start the domain unless ``power_on`` is False.
        * ``wait_for_boot``: the last step; always entered.

        A failure in :data:`SELF_CLEANING_STAGES` is cleaned up like
        ``_create_guest_with_network`` does: see :meth:`_cleanup_host`
        with ``cleanup_instance_dir`` and ``cleanup_instance_disks`` set to
        what this spawn created. A failure in any other stage leaves the
        instance directory, the disks and the domain as they are: that is
        the debris an evacuation that failed to spawn leaves behind. The
        exception is always re-raised.
        """
        world = get_world()
        host = self._host
        uuid = instance.uuid
        record = world._start_spawn(host, uuid)
        created_instance_dir = created_disks = False
        stage = None
        try:
            stage = 'create_instance_dir'
            self._fail_if(world._enter_stage(record, stage))
            instance_dir = world.instance_dir(host, uuid)
            if os.path.exists(instance_dir):
                LOG.debug('Instance directory exists: not creating',
                          instance=instance)
            else:
                LOG.debug('Creating instance directory %s', instance_dir,
                          instance=instance)
                os.makedirs(instance_dir)
                world._created_dir(host, uuid)
                created_instance_dir = True
            record.created_instance_dir = created_instance_dir

            stage = 'create_disks'
            fault = world._enter_stage(record, stage)
            if not _is_booted_from_volume(block_device_info):
                disk = world.disk_path(host, uuid)
                if os.path.exists(disk):
                    LOG.debug('Reusing existing disk %s', disk,
                              instance=instance)
                else:
                    LOG.debug('Creating disk %s', disk, instance=instance)
                    world._write_disk(record, disk, partial=bool(fault))
                    created_disks = True
                record.created_disks = created_disks
            self._fail_if(fault)
            console_log = os.path.join(instance_dir, 'console.log')
            if not os.path.exists(console_log):
                open(console_log, 'a').close()

            stage = 'get_guest_xml'
            self._fail_if(world._enter_stage(record, stage))
            # _get_guest_storage_config connects every volume.
            self._connect_volumes(context, instance, block_device_info)
            for vif in network_info or []:
                # Like FakeDriver.spawn: waits for the asynchronous network
                # allocation, which may raise.
                vif.fixed_ips()

            stage = 'define_domain'
            self._fail_if(world._enter_stage(record, stage))
            table = world._domain_table(host)
            if uuid not in table:
                table[uuid] = fake.FakeInstance(
                    instance.name, power_state.SHUTDOWN, uuid)

            stage = 'plug_vifs'
            self._fail_if(world._enter_stage(record, stage))
            for vif in network_info or []:
                self._interfaces[vif['id']] = vif

            stage = 'launch'
            self._fail_if(world._enter_stage(record, stage))
            domain = world._domain_table(host).get(uuid)
            if power_on and domain is not None:
                domain.state = power_state.RUNNING

            stage = 'wait_for_boot'
            self._fail_if(world._enter_stage(record, stage))
        except Exception as exc:
            record.failed_stage = stage
            record.error = exc
            with excutils.save_and_reraise_exception():
                if stage in SELF_CLEANING_STAGES:
                    LOG.error('Failed to start libvirt guest',
                              instance=instance)
                    self._disconnect_volumes(context, instance,
                                             block_device_info)
                    self._cleanup_host(
                        world, instance,
                        cleanup_instance_dir=created_instance_dir,
                        cleanup_instance_disks=created_disks)
                    record.cleaned_up = True
                else:
                    LOG.debug('Spawn failed at %s; leaving the instance '
                              'files and domain as they are', stage,
                              instance=instance)
        record.succeeded = True
        LOG.info('Instance spawned successfully.', instance=instance)

    @staticmethod
    def _fail_if(exc):
        if exc is not None:
            raise exc

    # Volume connections.

    def _connect_volume(self, context, connection_info, instance):
        """``LibvirtDriver._connect_volume``: this host connects a volume.

        os-brick's part, which leaves nothing here: the explorer's tracer
        records who connects and disconnects what.
        """
        LOG.debug('Connecting volume %s on %s', connection_info.get(
            'data', {}).get('volume_id'), self._host, instance=instance)

    def _disconnect_volume(self, context, connection_info, instance):
        """``LibvirtDriver._disconnect_volume``: see _connect_volume."""
        LOG.debug('Disconnecting volume %s on %s', connection_info.get(
            'data', {}).get('volume_id'), self._host, instance=instance)

    def _connect_volumes(self, context, instance, block_device_info):
        for vol in driver.block_device_info_get_mapping(block_device_info):
            if vol['connection_info']:
                self._connect_volume(context, vol['connection_info'],
                                     instance)

    def _disconnect_volumes(self, context, instance, block_device_info):
        """``LibvirtDriver._cleanup``: every volume, "regardless"."""
        for vol in driver.block_device_info_get_mapping(block_device_info):
            if vol['connection_info']:
                self._disconnect_volume(context, vol['connection_info'],
                                        instance)

    @_counted
    def attach_volume(self, context, connection_info, instance, mountpoint,
                      disk_bus=None, device_type=None, encryption=None):
        self._connect_volume(context, connection_info, instance)
        return super().attach_volume(
            context, connection_info, instance, mountpoint,
            disk_bus=disk_bus, device_type=device_type, encryption=encryption)

    @_counted
    def detach_volume(self, context, connection_info, instance, mountpoint,
                      encryption=None):
        self._disconnect_volume(context, connection_info, instance)
        return super().detach_volume(context, connection_info, instance,
                                     mountpoint, encryption=encryption)

    # Teardown.

    def _cleanup_host(self, world, instance, cleanup_instance_dir=False,
                      cleanup_instance_disks=False):
        """``LibvirtDriver._cleanup`` for the files and the domain.

        ``cleanup_instance_disks`` only removes the images of ``rbd``
        (``_cleanup_rbd``: every image of the instance in the pool, which
        every host shares); local disks go with the instance directory,
        which ``cleanup_instance_dir`` removes. So, as in libvirt, a spawn
        that created the disk in an instance directory that existed already
        leaves that disk behind when it cleans up. The domain is always
        undefined. Removing the instance directory is recorded on the
        instance and saved, as libvirt's ``_cleanup`` does for
        ``_run_pending_deletes`` (``clean_attempts``, ``cleaned``).
        """
        host = self._host
        uuid = instance.uuid
        if cleanup_instance_disks and world.storage == 'rbd':
            pool = world.rbd_pool_path()
            if os.path.isdir(pool):
                for name in os.listdir(pool):
                    if name.startswith(uuid):
                        LOG.debug('Removing rbd image %s', name,
                                  instance=instance)
                        os.remove(os.path.join(pool, name))
        if cleanup_instance_dir:
            attempts = int(instance.system_metadata.get('clean_attempts',
                                                        '0'))
            success = self._delete_instance_dir(world, instance)
            instance.system_metadata['clean_attempts'] = str(attempts + 1)
            if success:
                instance.cleaned = True
            try:
                instance.save()
            except exception.InstanceNotFound:
                pass
        world._domain_table(host).pop(uuid, None)

    def _delete_instance_dir(self, world, instance):
        target = world.instance_dir(self._host, instance.uuid)
        LOG.debug('Deleting instance files %s', target, instance=instance)
        shutil.rmtree(target, ignore_errors=True)
        return not os.path.exists(target)

    def _cleanup(self, world, instance, destroy_disks, migrate_data):
        """``LibvirtDriver.cleanup``: what ``destroy_disks`` means.

        ``destroy_disks`` removes the instance directory and the disks,
        including the ``rbd`` image every host shares: libvirt does, and it
        is up to the caller never to pass True for an instance whose disks
        another host uses. With ``destroy_disks`` False the files stay,
        except the instance directory when ``migrate_data`` says the block
        storage is shared and the instance path is not, or on ``rbd`` with
        ``[workarounds] ensure_libvirt_rbd_instance_dir_cleanup``.
        """
        cleanup_instance_dir = cleanup_instance_disks = bool(destroy_disks)
        if not destroy_disks:
            if migrate_data and 'is_shared_block_storage' in migrate_data:
                cleanup_instance_dir = (
                    migrate_data.is_shared_block_storage and
                    not migrate_data.is_shared_instance_path)
            if (not cleanup_instance_dir and
                    CONF.workarounds.ensure_libvirt_rbd_instance_dir_cleanup):
                cleanup_instance_dir = world.storage == 'rbd'
        self._cleanup_host(world, instance,
                           cleanup_instance_dir=cleanup_instance_dir,
                           cleanup_instance_disks=cleanup_instance_disks)

    @_counted
    def destroy(self, context, instance, network_info, block_device_info=None,
                destroy_disks=True, destroy_secrets=True):
        """Undefine the domain and, with ``destroy_disks``, the files.

        Like ``LibvirtDriver.destroy`` it powers the domain off and then
        cleans up as :meth:`_cleanup` describes. Only this host's domain and
        instance directory are touched (on ``shared`` storage that directory
        is every host's). A fault injected with
        :meth:`FakeLibvirtWorld.inject_destroy_fault` raises before anything
        is done.
        """
        world = get_world()
        self._fail_if(world._destroy_fault(self._host, 'destroy',
                                           instance.uuid))
        domain = self._domain(world, instance)
        if domain is None:
            LOG.debug('destroy: no domain on %s', self._host,
                      instance=instance)
        else:
            domain.state = power_state.SHUTDOWN
        self._disconnect_volumes(context, instance, block_device_info)
        self._cleanup(world, instance, destroy_disks, None)

    @_counted
    def cleanup(self, context, instance, network_info, block_device_info=None,
                destroy_disks=True, migrate_data=None, destroy_vifs=True,
                destroy_secrets=True):
        """``LibvirtDriver.cleanup``, see :meth:`_cleanup`.

        Unlike ``FakeDriver.cleanup`` it does not refuse a defined domain:
        libvirt undefines it.
        """
        world = get_world()
        self._fail_if(world._destroy_fault(self._host, 'cleanup',
                                           instance.uuid))
        self._disconnect_volumes(context, instance, block_device_info)
        self._cleanup(world, instance, destroy_disks, migrate_data)

    @_counted
    def delete_instance_files(self, instance):
        """Remove the instance directory (``_run_pending_deletes``)."""
        return self._delete_instance_dir(get_world(), instance)

    @_counted
    def confirm_migration(self, context, migration, instance, network_info):
        """Clean the source up like ``LibvirtDriver._cleanup_resize``.

        The domain is undefined and the source's instance directory removed
        unless it is shared; the disks on ``rbd`` are the destination's now
        and stay. ``FakeDriver`` destroys with ``destroy_disks`` True, which
        would remove the shared disks here.
        """
        if migration.source_compute != migration.dest_compute:
            world = get_world()
            self._cleanup_host(
                world, instance,
                cleanup_instance_dir=(
                    world.storage not in SHARED_DIRECTORY_MODES))

    # Queries.

    @_counted
    def instance_exists(self, instance):
        """Whether a domain of the instance is defined on this host."""
        return instance.uuid in get_world()._domain_table(self._host)

    @_counted
    def list_instances(self):
        return [domain.name for domain in
                list(get_world()._domain_table(self._host).values())]

    @_counted
    def list_instance_uuids(self):
        return list(get_world()._domain_table(self._host))

    @_counted
    def get_info(self, instance, use_cache=True):
        return super().get_info(instance, use_cache=use_cache)

    @_counted
    def instance_on_disk(self, instance):
        """``LibvirtDriver.instance_on_disk``.

        True if the instance directory is writable on this host (it exists:
        shared storage, or debris of an earlier spawn) or the storage is
        shared block storage (``rbd``).
        """
        world = get_world()
        instance_dir = world.instance_dir(self._host, instance.uuid)
        LOG.debug('Checking instance files accessibility %s', instance_dir,
                  instance=instance)
        return (world.writable(self._host, instance.uuid) or
                world.storage == 'rbd')

    @_counted
    def instance_files_exist(self, instance):
        """``LibvirtDriver.instance_files_exist`` of the patch series.

        Whether the instance directory exists on this host (on a shared
        directory, the shared one; on ``rbd`` the local one, which holds
        no disk).
        """
        return os.path.lexists(
            get_world().instance_dir(self._host, instance.uuid))

    @_counted
    def check_instance_shared_storage_local(self, context, instance):
        """Create a test file in the instance directory, like libvirt.

        :returns: None on ``rbd`` (shared block storage) or without an
            instance directory, else ``{'filename': path}``
        """
        world = get_world()
        if world.storage == 'rbd':
            return None
        dirpath = world.instance_dir(self._host, instance.uuid)
        if not os.path.exists(dirpath):
            return None
        if not world.writable(self._host, instance.uuid):
            raise PermissionError(13, 'Permission denied', dirpath)
        fd, tmp_file = tempfile.mkstemp(dir=dirpath)
        os.close(fd)
        LOG.debug('Creating tmpfile %s to verify with other compute node '
                  'that the instance is on the same shared storage.',
                  tmp_file, instance=instance)
        return {'filename': tmp_file}

    @_counted
    def check_instance_shared_storage_remote(self, context, data):
        """Whether this host sees the other host's test file.

        All hosts share one file system here, so the file only counts if it
        is under this host's instances directory, as it would be on a real
        host only if the directory were shared.
        """
        path = os.path.abspath(data['filename'])
        mine = os.path.abspath(get_world().instances_path(self._host))
        return (path.startswith(mine + os.sep) and os.path.exists(path))

    @_counted
    def check_instance_shared_storage_cleanup(self, context, data):
        try:
            os.remove(data['filename'])
        except FileNotFoundError:
            pass

    # Power actions, counted; they act on the world's domain table.

    @_counted
    def power_off(self, instance, timeout=0, retry_interval=0):
        """Power the domain off; without one, do nothing, as libvirt's.

        ``LibvirtDriver.power_off`` takes a missing domain for shut off
        (``_clean_shutdown`` and ``_destroy`` tolerate ``InstanceNotFound``);
        ``FakeDriver``'s raises.
        """
        if self._domain(self.world, instance) is None:
            LOG.debug('No domain to power off', instance=instance)
            return
        return super().power_off(instance, timeout=timeout,
                                 retry_interval=retry_interval)

    @_counted
    def power_on(self, context, instance, network_info,
                 block_device_info=None, accel_info=None, share_info=None):
        """Power the domain on; without one, make it, as libvirt's.

        ``LibvirtDriver.power_on`` is a hard reboot, which recreates a
        missing domain on the disks of this host.
        """
        if self._domain(self.world, instance) is None:
            return self.reboot(context, instance, network_info, 'HARD',
                               block_device_info=block_device_info)
        return super().power_on(context, instance, network_info,
                                block_device_info=block_device_info,
                                accel_info=accel_info, share_info=share_info)

    @_counted
    def reboot(self, context, instance, network_info, reboot_type,
               block_device_info=None, bad_volumes_callback=None,
               accel_info=None, share_info=None):
        """``FakeDriver.reboot``: a hard reboot of a missing domain spawns.

        That spawn reuses the disks on this host, like libvirt's hard reboot
        recreates the domain on top of the existing disks. Otherwise the
        domain is powered on. A hard reboot disconnects the volumes and
        connects them again with ``block_device_info`` (``_hard_reboot``:
        ``destroy``, then ``_get_guest_xml``).
        """
        hard = reboot_type.lower() == 'hard'
        if hard:
            self._disconnect_volumes(context, instance, block_device_info)
        if instance.uuid not in self.instances and hard:
            self.spawn(context, instance, None, None, None, None,
                       network_info=network_info,
                       block_device_info=block_device_info)
        else:
            if hard:
                self._connect_volumes(context, instance, block_device_info)
            self.power_on(context, instance, network_info,
                          block_device_info=block_device_info)

    @_counted
    def plug_vifs(self, instance, network_info):
        pass

    @_counted
    def unplug_vifs(self, instance, network_info):
        pass


def _driver_loader(original):
    """Wrap ``nova.virt.driver.load_compute_driver`` to load :data:`DRIVER`.

    nova only loads compute drivers from its own package: it imports
    ``'nova.virt.%s' % CONF.compute_driver``. The wrapper builds a
    :class:`FakeLibvirtDriver` when the driver asked for is :data:`DRIVER`
    and leaves every other name to nova.
    """
    @functools.wraps(original)
    def load_compute_driver(virtapi, compute_driver=None):
        if (compute_driver or CONF.compute_driver) == DRIVER:
            LOG.info("Loading compute driver '%s'", DRIVER)
            return FakeLibvirtDriver(virtapi)
        return original(virtapi, compute_driver)
    return load_compute_driver


class FakeLibvirtFixture(fixtures.Fixture):
    """Install a fresh :class:`FakeLibvirtWorld` for a test.

    The fixture does not touch ``CONF``: load the driver with
    ``self.flags(compute_driver=fake_libvirt.DRIVER)``. As nova only loads
    drivers from ``nova.virt``, the fixture wraps
    ``nova.virt.driver.load_compute_driver`` so that it loads
    :data:`DRIVER` (see :func:`_driver_loader`). On cleanup held spawns are
    released with an error, the world is reset and the world and loader
    installed before are put back; the temporary root goes away with its
    ``fixtures.TempDir``.

    :param storage: one of :data:`STORAGE_MODES`
    :param root: the directory to keep the files under; a new temporary
        directory by default

    Example::

        def setUp(self):
            super().setUp()
            self.libvirt = self.useFixture(
                fake_libvirt.FakeLibvirtFixture(storage='rbd'))
            self.flags(compute_driver=fake_libvirt.DRIVER)
            self.compute0 = self.start_service('compute', host='compute0')

        def test_spawn_fails(self):
            world = self.libvirt.world
            world.inject_spawn_fault('compute1', 'wait_for_boot')
            ...
            self.assertEqual('running',
                             world.domain_state('compute1', server['id']))
    """

    def __init__(self, storage='non-shared', root=None):
        super().__init__()
        if storage not in STORAGE_MODES:
            raise ValueError('storage must be one of %s, not %r' %
                             (', '.join(STORAGE_MODES), storage))
        self.storage = storage
        self.root = root
        self.world = None

    def _setUp(self):
        root = self.root
        if root is None:
            root = self.useFixture(fixtures.TempDir()).path
        self.world = FakeLibvirtWorld(root, storage=self.storage)
        self.useFixture(fixtures.MonkeyPatch(
            'tests.harness.fake_libvirt._WORLD', self.world))
        self.useFixture(fixtures.MonkeyPatch(
            'nova.virt.driver.load_compute_driver',
            _driver_loader(driver.load_compute_driver)))
        # Cleanups run last in, first out: reset before the previous world
        # comes back and before the temporary root is removed.
        self.addCleanup(self.world.reset)
