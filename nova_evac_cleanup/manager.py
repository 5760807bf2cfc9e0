# SPDX-License-Identifier: Apache-2.0

"""A nova compute manager that cleans up after a failed evacuation.

The mixin hooks around nova's own methods and watches the calls of
:data:`~nova_evac_cleanup.evacuation.WATCHED`: nova runs every line of its
rebuild code, and the answers it acts on are the cleanup's.
"""

import functools
import operator
import types

from nova.compute import manager as nova_manager
from nova import context as nova_context
from oslo_config import cfg
from oslo_log import log as logging
from oslo_service import periodic_task
from oslo_utils import excutils

from nova_evac_cleanup import conf
from nova_evac_cleanup import evacuation as evacuations
from nova_evac_cleanup import giveback
from nova_evac_cleanup import host_lock
from nova_evac_cleanup import journal
from nova_evac_cleanup import leftovers
from nova_evac_cleanup import nova_support
from nova_evac_cleanup import sweep

CONF = cfg.CONF
conf.register_opts(CONF)
LOG = logging.getLogger(__name__)


class EvacuateCleanupMixin(object):
    """Destroy the guest of an evacuation whose spawn failed on this host.

    Mixed in before nova's ``ComputeManager``. A plain rebuild, a failure
    before spawn (nova cleans those up) and a successful evacuation run as
    on stock nova.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        # By instance uuid: nova never rebuilds one instance twice at once.
        self._evacuations = {}
        self._host_lock = None
        self._given_back = giveback.Tries()
        #: what holds on this nova, by cost (:mod:`nova_support`)
        self._runs = nova_support.check(self.host)

    def _cleanup_enabled(self):
        return self._runs[nova_support.HOOK] and CONF.evacuate_cleanup.enabled

    def init_host(self, *args, **kwargs):
        """Start like nova, between the give-back and the sweep.

        The host's lock is held for the life of the process. Failed
        evacuations from here are given back before nova touches a guest;
        those to here this host's death cut are ended before it accepts
        requests. Nothing here stops the service from starting.
        """
        if not self._runs[nova_support.HOOK]:
            return super().init_host(*args, **kwargs)
        self._take_lock(host_lock.START_TIMEOUT)
        context = nova_context.get_admin_context()
        if CONF.evacuate_cleanup.enabled:
            giveback.give_back_all(self, context, self._given_back,
                                   start=True)
        result = super().init_host(*args, **kwargs)
        if self.driver.capabilities.get('supports_evacuate', False):
            sweep.on_start(self, context, self._host_lock is not None)
        return result

    def _take_lock(self, timeout):
        """Take this host's lock if needed; whether no audit may hold it."""
        if self._host_lock is None:
            try:
                self._host_lock = host_lock.acquire(self.host, timeout)
            except host_lock.HostLockHeld as error:
                if timeout:
                    LOG.error('%s. nova-compute starts without it: the '
                              'start-up sweep only reports%s.', error,
                              ', and evacuations are not journaled until it '
                              'is free' if error.busy else '')
                return not error.busy
        return True

    def cleanup_host(self, *args, **kwargs):
        try:
            return super().cleanup_host(*args, **kwargs)
        finally:
            host_lock.release(self._host_lock)
            self._host_lock = None

    def _watch(self, owner, name, hook):
        """Have ``owner.name`` call ``hook(evacuation, call, real)``; once.

        Whatever replaced the method since is the real one; a call for an
        instance not evacuated here goes straight to it.
        """
        if getattr(getattr(owner, name), '_evacuation_hook', None) is self:
            return
        own = vars(owner).get(name)

        @functools.wraps(getattr(owner, name))
        def watched(*args, **kwargs):
            real = functools.partial(own or types.MethodType(
                getattr(type(owner), name), owner), *args, **kwargs)
            call = nova_support.named(name, args, kwargs)
            evacuation = self._evacuations.get(getattr(
                call.get('instance'), 'uuid', call.get('consumer_uuid')))
            if evacuation is None:
                return real()
            return hook(evacuation, call, real)

        watched._evacuation_hook = self
        setattr(owner, name, watched)

    def rebuild_instance(self, context, instance, *args, **kwargs):
        """Journal the evacuation first, run nova's rebuild, end what it left.

        A death anywhere in nova's code leaves an entry to the next start.
        """
        named = nova_support.named('rebuild_instance',
                                   (context, instance) + args, kwargs)
        migration = named.get('migration')
        if not (self._cleanup_enabled() and named.get('recreate') and
                migration is not None and migration.obj_attr_is_set('uuid')):
            return super().rebuild_instance(context, instance, *args,
                                            **kwargs)
        evacuation = evacuations.Evacuation(
            self, context,
            journal.Entry(self.host, instance.uuid, migration.uuid),
            lambda: self._take_lock(0))
        self._evacuations[instance.uuid] = evacuation
        for cost, owner, name, hook in evacuations.WATCHED:
            if self._runs[cost]:
                self._watch(operator.attrgetter(owner)(self), name, hook)
        try:
            evacuation.journal()
            result = super().rebuild_instance(context, instance, *args,
                                              **kwargs)
        except Exception as raised:
            # nova's expected errors come wrapped for its RPC server.
            error = getattr(raised, 'exc_info', (None, raised))[1]
            if evacuation.after_nova(instance, error) is not error:
                # Never another error than the one that failed it.
                raise evacuation.error
            raise
        finally:
            self._evacuations.pop(instance.uuid, None)
        leftovers.end(self.driver, evacuation.entry, instance,
                      moved=instance.host == self.host)
        return result

    def _rebuild_default_impl(self, *args, **kwargs):
        """The source's attachments, journaled before nova replaces them."""
        call = nova_support.named('_rebuild_default_impl', args, kwargs)
        evacuation = self._evacuations.get(call['instance'].uuid)
        if evacuation is not None:
            evacuation.detaching(call['bdms'])
        return super()._rebuild_default_impl(*args, **kwargs)

    def _do_rebuild_instance(self, context, instance, *args, **kwargs):
        """Clear earlier leftovers; a failure goes to the handler first."""
        # Only an evacuation is in self._evacuations (rebuild_instance).
        evacuation = self._evacuations.get(instance.uuid)
        if evacuation is None:
            return super()._do_rebuild_instance(context, instance, *args,
                                                **kwargs)
        try:
            leftovers.clear_or_refuse(self, context, instance,
                                      evacuation.entry.migration_uuid)
            return super()._do_rebuild_instance(context, instance, *args,
                                                **kwargs)
        except Exception as error:
            with excutils.save_and_reraise_exception():
                evacuation.failed(instance, error)


class ComputeManager(EvacuateCleanupMixin, nova_manager.ComputeManager):
    """nova's compute manager with the evacuation cleanup."""

    # oslo.service collects a class's periodic tasks from its own body.
    @periodic_task.periodic_task(spacing=giveback.SPACING)
    def _give_back_failed_evacuations(self, context):
        """Give back here what failed evacuations from here left elsewhere."""
        if self._cleanup_enabled():
            giveback.give_back_all(self, context, self._given_back)
