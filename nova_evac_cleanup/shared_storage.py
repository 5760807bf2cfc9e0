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

"""nova's own answer to "are the instance files on shared storage?".

nova's ``_do_rebuild_instance`` decides it, for an evacuation, before
anything exists on this host: the admin's ``onSharedStorage``, which nova
checks against ``driver.instance_on_disk``, or that driver call's answer.
It keeps the answer in its local variable ``on_shared_storage`` and calls
``_rebuild_default_impl`` next, which spawns. Asking the driver a second
time would give a second answer, which on an NFS hiccup can differ from
nova's, and the cleanup would then remove the disks of a share nova
treated as shared. So the mixin's ``_rebuild_default_impl``, called by
that very frame, reads nova's answer from it: one answer, nova's.

Where the frame or the variable is not found (nova changed), the answer is
None, unknown, which keeps the disks; :func:`problem` reports it at
start-up.
"""

import inspect
import sys

from nova.compute import manager as nova_manager

#: nova's local variable holding its answer.
_VARIABLE = 'on_shared_storage'


def _code():
    return inspect.unwrap(
        nova_manager.ComputeManager._do_rebuild_instance).__code__


def problem():
    """Why nova's answer cannot be read in this nova, or None."""
    if _VARIABLE not in _code().co_varnames:
        return ('nova.compute.manager.ComputeManager._do_rebuild_instance '
                'no longer keeps its answer in %s' % _VARIABLE)
    return None


def nova_answer():
    """nova's answer, read from its ``_do_rebuild_instance`` up the stack.

    Call it from code that nova's ``_do_rebuild_instance`` called, after
    nova answered and before anything is spawned.

    :returns: True, False, or None when it could not be read
    """
    code = _code()
    frame = sys._getframe(1)
    try:
        while frame is not None and frame.f_code is not code:
            frame = frame.f_back
        if frame is None:
            return None
        answer = frame.f_locals.get(_VARIABLE)
    finally:
        del frame
    return answer if isinstance(answer, bool) else None
