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

"""Tell a failure of ``driver.spawn`` from the failures around it.

``ComputeManager._rebuild_default_impl`` does several things before it
spawns the guest of an evacuated instance: it binds accelerators, detaches
and attaches block devices and saves the instance twice. nova already cleans
up after a failure in any of those, and nothing exists on this host yet, so
only an exception that came out of the ``self.driver.spawn(...)`` call
itself may trigger the cleanup.

The driver object is shared by every concurrent rebuild on the host, so the
spawn call cannot be intercepted by wrapping ``driver.spawn``. Instead the
traceback of the exception is read: it holds the frame of nova's own
``_rebuild_default_impl`` and the bytecode offset at which the exception
left that frame. That offset falls inside the instructions of the spawn call
if, and only if, the exception was raised by ``driver.spawn``. The spawn
call is located in nova's code when this module is imported, so a nova
release that moves the call is still handled, and one that removes it fails
loudly here rather than silently disabling the cleanup.
"""

import dis
import inspect

from nova.compute import manager as nova_manager


def _spawn_call_offsets(code):
    """Return the bytecode offsets of the ``driver.spawn(...)`` call.

    :param code: the code object of nova's ``_rebuild_default_impl``
    :returns: a range of offsets: the call instruction and its inline cache
        entries (Python >= 3.11 reports an offset inside those)
    :raises RuntimeError: if nova's code no longer calls ``spawn``
    """
    instructions = list(dis.get_instructions(code))
    for index, instruction in enumerate(instructions):
        if instruction.argval != 'spawn':
            continue
        # The arguments of the call are plain names, so the first call
        # instruction after the attribute load is the spawn call itself.
        for position, call in enumerate(instructions[index:], start=index):
            if call.opname.startswith('CALL'):
                following = instructions[position + 1]
                return range(call.offset, following.offset)
    raise RuntimeError(
        'nova.compute.manager.ComputeManager._rebuild_default_impl no '
        'longer calls driver.spawn; nova-evac-cleanup does not support this '
        'nova release')


_REBUILD_DEFAULT_IMPL = inspect.unwrap(
    nova_manager.ComputeManager._rebuild_default_impl).__code__
_SPAWN_CALL = _spawn_call_offsets(_REBUILD_DEFAULT_IMPL)


def raised_by_spawn(tb):
    """Whether an exception was raised by the driver's spawn on rebuild.

    :param tb: the traceback of the exception, as ``sys.exc_info()[2]``
    :returns: True if the exception left nova's ``_rebuild_default_impl``
        through its ``driver.spawn(...)`` call
    """
    while tb is not None:
        if tb.tb_frame.f_code is _REBUILD_DEFAULT_IMPL:
            return tb.tb_lasti in _SPAWN_CALL
        tb = tb.tb_next
    return False
