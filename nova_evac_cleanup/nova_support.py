# Copyright 2026 nova-evac-cleanup developers
#
#    Licensed under the Apache License, Version 2.0 (the "License"); you may
#    not use this file except in compliance with the License. You may obtain
#    a copy of the License at
#
#         http://www.apache.org/licenses/LICENSE-2.0
#
#    Unless required by applicable law or agreed to in writing, software
#    distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
#    WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
#    License for the specific language governing permissions and limitations
#    under the License.

"""The nova releases this project was written for, checked at start-up.

The mixin overrides private methods of nova's ``ComputeManager`` and calls
them with nova's arguments by name. A nova release that renames, adds or
drops one of their parameters would make every rebuild on the host fail
with a ``TypeError``, or worse, silently drop an argument. So before the
compute service starts, the parameters of every overridden method are
compared with those this project was written and tested against, and the
service refuses to start with a clear message on any difference.

The same range is declared to pip in ``requirements.txt``.
"""

import importlib
import inspect

from nova.compute import manager as nova_manager
from nova import safe_utils
from nova import utils

#: The nova releases tested: 31 (2025.1) to 34 (2026.2).
SUPPORTED = '>=31.0.0,<35.0.0'

#: The parameters of the nova methods the mixin overrides, as nova 31.0.0
#: to 34.0.0 define them.
OVERRIDDEN = {
    'init_host': ('self', 'service_ref'),
    'cleanup_host': ('self',),
    'rebuild_instance': (
        'self', 'context', 'instance', 'orig_image_ref', 'image_ref',
        'injected_files', 'new_pass', 'orig_sys_metadata', 'bdms',
        'recreate', 'on_shared_storage', 'preserve_ephemeral', 'migration',
        'scheduled_node', 'limits', 'request_spec', 'accel_uuids',
        'reimage_boot_volume', 'target_state'),
    '_do_rebuild_instance': (
        'self', 'context', 'instance', 'orig_image_ref', 'image_meta',
        'injected_files', 'new_pass', 'orig_sys_metadata', 'bdms',
        'evacuate', 'on_shared_storage', 'preserve_ephemeral', 'migration',
        'request_spec', 'allocations',
        'request_group_resource_providers_mapping', 'accel_uuids',
        'reimage_boot_volume', 'target_state'),
    '_rebuild_default_impl': (
        'self', 'context', 'instance', 'image_meta', 'injected_files',
        'admin_password', 'allocations', 'bdms', 'detach_block_devices',
        'attach_block_devices', 'network_info', 'evacuate',
        'block_device_info', 'preserve_ephemeral', 'accel_uuids',
        'reimage_boot_volume'),
}


class UnsupportedNova(RuntimeError):
    """The installed nova is not one this project was written for."""


def mismatches(manager_class=nova_manager.ComputeManager):
    """The overridden methods whose parameters differ in this nova.

    :returns: a list of ``(name, expected, found)``; empty when all match
    """
    result = []
    for name, expected in sorted(OVERRIDDEN.items()):
        method = getattr(manager_class, name, None)
        if method is None:
            result.append((name, expected, None))
            continue
        # nova's RPC decorators hide the method behind (*args, **kwargs).
        found = tuple(inspect.signature(
            safe_utils.get_wrapped_function(method)).parameters)
        if found != expected:
            result.append((name, expected, found))
    return result


def check(manager_class=nova_manager.ComputeManager):
    """Refuse a nova whose overridden methods are not the expected ones.

    :raises UnsupportedNova: naming each method that differs
    """
    problems = mismatches(manager_class)
    if not problems:
        return
    details = '; '.join(
        '%s(%s) expected, %s found' % (
            name, ', '.join(expected),
            'no such method' if found is None else
            '(%s)' % ', '.join(found))
        for name, expected, found in problems)
    raise UnsupportedNova(
        'nova-evac-cleanup supports nova %s and cannot run on this nova: '
        'ComputeManager methods it overrides have changed: %s' % (
            SUPPORTED, details))


def spawn(func, *args, **kwargs):
    """Run ``func`` on nova's default executor, as nova itself would.

    nova 34 moved ``nova.utils.spawn`` to ``nova.thread_pool_factory``.
    """
    try:
        factory = importlib.import_module('nova.thread_pool_factory')
    except ImportError:
        factory = None
    run = getattr(factory, 'spawn', None) or utils.spawn
    return run(func, *args, **kwargs)
