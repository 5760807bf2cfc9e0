# SPDX-License-Identifier: Apache-2.0

"""The audit's configuration, checked without connecting.

Each problem is one line naming the file or the option (exit code 5),
found before nova's driver is loaded or anything is asked of placement,
the database or nova-conductor.
"""

from oslo_config import cfg


def error_line(error):
    """One line for an error of oslo.config's."""
    if isinstance(error, cfg.ConfigFilesNotFoundError):
        return 'configuration file not found: %s' % ', '.join(
            error.config_files)
    if isinstance(error, cfg.ConfigDirNotFoundError):
        return 'configuration directory not found: %s' % error.config_dir
    if isinstance(error, cfg.ConfigFilesPermissionDeniedError):
        return 'configuration file not readable: %s' % ', '.join(
            error.config_files)
    if isinstance(error, cfg.ConfigFileParseError):
        return 'configuration file %s: %s' % (error.config_file, error.msg)
    return 'configuration: %s' % ' '.join(str(error).split())


def _files(conf):
    """The configuration files read, as the error lines name them."""
    files = list(conf.config_file or ())
    files += ['%s/*.conf' % directory.rstrip('/')
              for directory in conf.config_dir or ()]
    return ', '.join(files)


def problem(conf):
    """What makes the audit unable to start: one line, or None."""
    from keystoneauth1 import exceptions as ks_exceptions
    from keystoneauth1 import loading as ks_loading

    files = _files(conf)
    if not files:
        return ('no configuration file: none given with --config-file or '
                '--config-dir, and no nova.conf in ~/.nova/, ~/, /etc/nova/ '
                'or /etc/; give the compute host\'s, e.g. --config-file '
                '/etc/nova/nova.conf')
    # What nova's placement client loads, without asking placement.
    group = conf.placement.auth_section or 'placement'
    try:
        auth_type = conf[group].auth_type
        plugin = ks_loading.load_auth_from_conf_options(conf, 'placement')
    except ks_exceptions.MissingRequiredOptions as error:
        return '[%s] auth_type = %s needs %s, not set in %s' % (
            group, auth_type, ', '.join(o.dest for o in error.options),
            files)
    except (ks_exceptions.ClientException, cfg.Error) as error:
        return '[%s] credentials in %s: %s' % (
            group, files, ' '.join(str(error).split()))
    if plugin is None:
        return ('[%s] auth_type is not set in %s: the audit reads this '
                'host\'s allocations from placement, with the [placement] '
                'credentials of nova-compute' % (group, files))
    if not conf.database.connection:
        import oslo_messaging as messaging

        # Registers oslo.messaging's options too.
        try:
            messaging.TransportURL.parse(conf)
        except messaging.InvalidTransportURL as error:
            return '[DEFAULT] transport_url in %s: %s' % (files, error)
        location = conf.get_location('transport_url').location
        if location in (cfg.Locations.opt_default, cfg.Locations.set_default):
            return ('no database: neither [database] connection nor '
                    '[DEFAULT] transport_url (to go through nova-conductor) '
                    'is set in %s' % files)
    return None


def describe(error):
    """One line saying what went wrong, and where to look."""
    text = ' '.join(str(error).split()) or repr(error)
    line = '%s: %s' % (type(error).__name__, text)
    module = type(error).__module__ or ''
    if module.startswith(('keystoneauth1', 'openstack')):
        line += (' (placement: check the [placement] options of the '
                 'configuration: auth_type, auth_url and credentials, or '
                 'endpoint_override)')
    elif module.startswith('oslo_messaging'):
        line += (' (nova-conductor: check that it runs and [DEFAULT] '
                 'transport_url, or set [database] connection)')
    elif module.startswith(('oslo_db', 'sqlalchemy')):
        line += ' (database: check [database] connection)'
    return line
