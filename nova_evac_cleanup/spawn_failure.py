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
call is located in nova's code when it is first needed, so a nova release
that moves the call is still handled; one that removes it makes the
compute manager run as nova's own, with an error logged at start-up
(:func:`problem`), rather than fail to start or clean up blindly.
"""

import dis
import functools
import inspect

from nova.compute import manager as nova_manager


def _spawn_call_offsets(code):
    """Return the bytecode offsets of the ``driver.spawn(...)`` call.

    :param code: the code object of nova's ``_rebuild_default_impl``
    :returns: a range of offsets: the call instruction and its inline cache
        entries (Python >= 3.11 reports an offset inside those); None if
        nova's code does not call ``spawn``
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
    return None


@functools.lru_cache(maxsize=None)
def _rebuild_default_impl():
    """nova's ``_rebuild_default_impl`` code, and its spawn call's offsets."""
    code = inspect.unwrap(
        nova_manager.ComputeManager._rebuild_default_impl).__code__
    return code, _spawn_call_offsets(code)


def problem():
    """Why the spawn call cannot be told apart in this nova, or None."""
    if _rebuild_default_impl()[1] is None:
        return ('nova.compute.manager.ComputeManager._rebuild_default_impl '
                'no longer calls driver.spawn')
    return None


def raised_by_spawn(tb):
    """Whether an exception was raised by the driver's spawn on rebuild.

    :param tb: the traceback of the exception, as ``sys.exc_info()[2]``
    :returns: True if the exception left nova's ``_rebuild_default_impl``
        through its ``driver.spawn(...)`` call
    """
    code, spawn_call = _rebuild_default_impl()
    if spawn_call is None:
        return False
    while tb is not None:
        if tb.tb_frame.f_code is code:
            return tb.tb_lasti in spawn_call
        tb = tb.tb_next
    return False
