# SPDX-License-Identifier: Apache-2.0

"""nova-compute with a fault hook, for failure points with no real cause.

::

    python -m tests.deployment.tier.faults --fault-dir DIR [--fixed] \\
        --config-file nova.conf

Runs ``nova-compute`` (or, with ``--fixed``, ``nova-compute-evac-cleanup``)
with one narrow hook in the libvirt driver: while ``spawn`` waits for the
guest it has just started to run (``_wait_for_boot``, the only point of
spawn after the domain runs when there is no networking), its
``get_info`` reads ``DIR/fault``:

* ``raise``: raise :class:`InjectedFault`, as if the guest had failed;
* ``raise-once``: the same, once per instance;
* ``hang``: block, so that the test can kill nova-compute while the real
  domain runs.

Before acting it adds the instance's UUID to ``DIR/fired``, so a test can
prove that the fault happened. Without ``DIR/fault`` nothing changes.
"""

import os
import sys
import time


class InjectedFault(Exception):
    """The deployment tier's fault hook, at spawn's wait for the guest."""


def install(fault_dir):
    from nova.virt.libvirt import driver

    spawning = set()
    fired = set()
    orig_spawn = driver.LibvirtDriver.spawn
    orig_get_info = driver.LibvirtDriver.get_info

    def spawn(self, context, instance, *args, **kwargs):
        spawning.add(instance.uuid)
        try:
            return orig_spawn(self, context, instance, *args, **kwargs)
        finally:
            spawning.discard(instance.uuid)

    def get_info(self, instance, *args, **kwargs):
        info = orig_get_info(self, instance, *args, **kwargs)
        # Only spawn's own wait, not the lifecycle events meanwhile.
        if (instance.uuid not in spawning or
                sys._getframe(1).f_code.co_name != '_wait_for_boot'):
            return info
        try:
            with open(os.path.join(fault_dir, 'fault')) as f:
                fault = f.read().strip()
        except FileNotFoundError:
            return info
        if fault == 'raise-once' and instance.uuid in fired:
            return info
        fired.add(instance.uuid)
        with open(os.path.join(fault_dir, 'fired'), 'a') as f:
            f.write(instance.uuid + '\n')
        if fault == 'hang':
            while True:
                time.sleep(60)
        raise InjectedFault('fault hook: guest %s failed while spawn '
                            'waited for it to run' % instance.uuid)

    driver.LibvirtDriver.spawn = spawn
    driver.LibvirtDriver.get_info = get_info


def main(argv=None):
    argv = list(sys.argv if argv is None else argv)
    i = argv.index('--fault-dir')
    fault_dir = argv[i + 1]
    del argv[i:i + 2]
    fixed = '--fixed' in argv
    if fixed:
        argv.remove('--fixed')
    sys.argv = argv
    # nova.cmd first: it sets nova's concurrency mode before the rest.
    from nova.cmd import compute

    install(fault_dir)
    if fixed:
        import nova_evac_cleanup
        nova_evac_cleanup.install()
    return compute.main()


if __name__ == '__main__':
    sys.exit(main())
