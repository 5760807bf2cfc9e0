# SPDX-License-Identifier: Apache-2.0

"""The audit's configuration, checked before nova's driver is loaded or
placement, the database or nova-conductor asked: each problem one line
naming the file or the option (exit code 5)."""

from oslo_config import cfg


def one_line(error):
    return ' '.join(str(error).split())


def problem(conf):
    """What makes the audit unable to start: one line, or None."""
    from keystoneauth1 import exceptions as ks_exceptions
    from keystoneauth1 import loading as ks_loading

    files = ', '.join(list(conf.config_file or ()) + [
        '%s/*.conf' % path.rstrip('/') for path in conf.config_dir or ()])
    if not files:
        return ('no configuration file: none given with --config-file or '
                '--config-dir, and no nova.conf in ~/.nova/, ~/, /etc/nova/ '
                'or /etc/; give the compute host\'s, e.g. --config-file '
                '/etc/nova/nova.conf')
    # What nova's placement client loads, without asking placement.
    group = conf.placement.auth_section or 'placement'
    try:
        plugin = ks_loading.load_auth_from_conf_options(conf, 'placement')
    except (ks_exceptions.ClientException, cfg.Error) as error:
        # keystoneauth's own words: the options an auth_type lacks...
        return '[%s] credentials in %s: %s' % (group, files, one_line(error))
    if plugin is None:
        return ('[%s] auth_type is not set in %s: the audit reads this '
                'host\'s allocations from placement, with the [placement] '
                'credentials of nova-compute' % (group, files))
    if conf.database.connection:
        return None
    import oslo_messaging as messaging

    try:
        messaging.TransportURL.parse(conf)  # registers its options too
    except messaging.InvalidTransportURL as error:
        return '[DEFAULT] transport_url in %s: %s' % (files, error)
    if conf.get_location('transport_url').location in (
            cfg.Locations.opt_default, cfg.Locations.set_default):
        return ('no database: neither [database] connection nor [DEFAULT] '
                'transport_url (to go through nova-conductor) is set in %s' %
                files)
    return None


def describe(error):
    """One line saying what went wrong, and where to look.

    oslo.config's own errors already name the file or the option.
    """
    line = '%s: %s' % (type(error).__name__, one_line(error) or repr(error))
    module = type(error).__module__ or ''
    if module.startswith(('keystoneauth1', 'openstack')):
        line += (' (placement: check the [placement] options: auth_type, '
                 'auth_url and credentials, or endpoint_override)')
    elif module.startswith('oslo_messaging'):
        line += (' (nova-conductor: check that it runs and [DEFAULT] '
                 'transport_url, or set [database] connection)')
    elif module.startswith(('oslo_db', 'sqlalchemy')):
        line += ' (database: check [database] connection)'
    return line
