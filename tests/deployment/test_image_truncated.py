# SPDX-License-Identifier: Apache-2.0

"""Scenario 1c: spawn fails on the destination while it fetches the image.

evac-a runs a server booted from an image evac-b has never downloaded (a
new upload to glance: a host downloads an image once and caches it in
``<instances_path>/_base``), and dies. Then half of the file glance's file
store keeps of that image is lost: glance serves the image's recorded size
and checksum, the bytes it has, and closes the connection. The server is
evacuated to evac-b, whose libvirt driver creates the instance directory
and downloads the image into its cache (``_create_image``,
``fetch_to_raw`` into ``_base/<sha1 of the image id>.part``): requests
reads fewer bytes than announced and raises ``ChunkedEncodingError``
("Connection broken: IncompleteRead(98308 bytes read, 98308 more
expected)"), before glanceclient's hash check or qemu-img see the data.
nova logs "Error writing to .../_base/<sha1>.part", removes the ``.part``
file, marks the evacuation failed and the server ERROR on evac-a.

Measured on nova 34: stock nova leaves on evac-b the instance directory
with only ``disk.info`` (the image backend writes it before the download;
no disk, no ``console.log``, no domain, nothing in ``_base``). The next
evacuation takes that directory for shared storage ("disk on shared
storage, evacuating using existing disk") and, finding no disk in it,
downloads the image and boots a fresh disk: the retry works, on a wrong
storage decision, and an operator who does not evacuate there again must
remove the directory. With the fix evac-b keeps nothing of the server and
the next evacuation starts from the image ("disk not on shared storage,
evacuating from image").

Only non-shared storage: on a shared instance directory ``_base`` is
shared too, evac-a's download at boot already put the image there, and
evac-b never downloads it; there is no download to fail.
"""

import hashlib
import os

from tests.deployment import base

SCENARIO = ('1c. Spawn fails on the destination while it downloads the '
            'image (glance\'s stored file is truncated: a real cause)')


class TestSpawnFailsImageTruncated(base.DeploymentTestCase):

    def cached(self, host, image_id):
        """``host``'s image cache entries of ``image_id``, with sizes.

        The libvirt driver names them after the SHA-1 of the image id.
        """
        cache = os.path.join(self.d.instances_path(host), '_base')
        name = hashlib.sha1(image_id.encode()).hexdigest()
        if not os.path.isdir(cache):
            return {}
        return {entry: os.path.getsize(os.path.join(cache, entry))
                for entry in sorted(os.listdir(cache))
                if entry.startswith(name)}

    def _test(self, binary):
        d = self.d
        self.hosts_up(evac_a={}, evac_b=dict(binary=binary))
        image_id = d.create_image()
        self.addCleanup(d.delete_image, image_id)
        server = self.boot(base.SRC, image_id=image_id)
        sid = server['id']
        # Meta-test: evac-b must download the image, so it must not have it.
        self.assertEqual({}, self.cached(base.DST, image_id))
        self.crash_source()
        size = d.image_size()
        d.truncate_image(image_id, size // 2)

        # Meta-test: glance holds half the image's data.
        self.assertEqual(size // 2, os.path.getsize(
            d.glance.stored_file(image_id)))
        offset = self.log_offset(base.DST)
        server, migration = self.evacuate(
            sid, base.DST, 'evacuation that fails downloading the image, '
            'API call to ERROR (%s)' % base.MODES[binary])
        log = self.log_since(base.DST, offset)
        left = self.observe(base.DST, sid)
        dir_left = os.path.isdir(os.path.join(d.instances_path(base.DST),
                                              sid))
        cache_left = self.cached(base.DST, image_id)
        d.progress('%s: evac-b after the failed evacuation: guest=%s '
                   'dir=%s files=%s cache=%s', base.MODES[binary],
                   left['guest'], dir_left, left['files'], cache_left)

        # Meta-test: the truncated download is what failed the spawn.
        part = os.path.join(d.instances_path(base.DST), '_base',
                            hashlib.sha1(image_id.encode()).hexdigest())
        self.assertIn('Error writing to %s.part' % part, log)
        self.assertIn('IncompleteRead(%d bytes read, %d more expected)' % (
            size // 2, size - size // 2), log)
        self.assertIn('ChunkedEncodingError', log)
        self.assertEqual('failed', migration['status'])
        self.assertEqual('ERROR', server['status'])
        self.assertEqual(base.SRC, server['OS-EXT-SRV-ATTR:host'])

        manual = self.manual_steps(base.DST, sid, left,
                                   then='evacuate again')

        # glance serves the whole image again; the operator evacuates again.
        d.truncate_image(image_id)
        offset = self.log_offset(base.DST)
        server, _ = self.evacuate(sid, base.DST,
                                  'evacuation (API call to ACTIVE)')
        retry_log = self.log_since(base.DST, offset)
        after = self.observe(base.DST, sid)
        used_existing = 'evacuating using existing disk' in retry_log
        d.progress('%s: evac-b after the retry: %s, guest=%s files=%s '
                   'cache=%s used_existing=%s', base.MODES[binary],
                   server['status'], after['guest'], after['files'],
                   self.cached(base.DST, image_id), used_existing)

        if server['status'] != 'ACTIVE':
            retry = '%s: %s' % (server['status'], server.get('fault'))
        elif used_existing:
            retry = ('ACTIVE, fresh disk from the image (the leftover '
                     'directory held none), but nova took the directory '
                     'for shared storage ("disk on shared storage, '
                     'evacuating using existing disk")')
        else:
            retry = 'ACTIVE, fresh disk from the image'
        base.record(SCENARIO, 'non-shared storage', binary, {
            'Failure (evac-b log)': (
                'ChunkedEncodingError: IncompleteRead(%d bytes read, %d '
                'more expected) writing the image to _base/<sha1>.part' %
                (size // 2, size - size // 2)),
            'virsh list --all on evac-b after the failure':
                left['virsh'],
            'Instance dir on evac-b after the failure':
                base.files_text(left['files'],
                                'empty' if dir_left else 'none'),
            'Image cache on evac-b after the failure':
                ', '.join('_base/%s (%d B)' % kv
                          for kv in cache_left.items()) or 'nothing',
            'Placement (evac-b)': 'allocation: %s' % (
                left['allocation'] or 'none'),
            'Evacuating again': retry,
            'Manual steps still needed on evac-b': manual,
        })

        self.assertEqual('ACTIVE', server['status'], server.get('fault'))
        self.assertEqual(base.DST, server['OS-EXT-SRV-ATTR:host'])
        self.assertIsNotNone(after['guest'])
        self.assertIn('running', after['guest'])
        self.assertIn('disk', after['files'])
        # Neither leaves a domain, nor a partial download: nova removes
        # the .part file, and spawn failed before defining the domain.
        self.assertIsNone(left['guest'])
        self.assertEqual({}, cache_left)
        # nova itself removes evac-b's allocation.
        self.assertIsNone(left['allocation'])

        if binary == base.STOCK:
            # FIXME(bug): stock nova leaves the instance directory, with
            # the disk.info the image backend wrote before the download,
            # and the retry takes it for shared storage.
            self.assertTrue(dir_left)
            self.assertEqual(['disk.info'], list(left['files']))
            self.assertTrue(used_existing)
        else:
            self.assertFalse(dir_left)
            self.assertFalse(used_existing)
            self.assertIn('disk not on shared storage, evacuating from '
                          'image', retry_log)

    def test_stock_non_shared(self):
        self._test(base.STOCK)

    def test_fixed_non_shared(self):
        self._test(base.FIXED)
