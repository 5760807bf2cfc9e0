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

"""HTTP stand-ins for glance and neutron, run as one process.

::

    python -m tests.deployment.tier.standins \\
        --glance-port G --neutron-port N --image QCOW2 --image-id UUID \\
        [--image-dir DIR]

The glance stand-in serves one real image (a small qcow2 made with
``qemu-img``) with the size and checksums glanceclient verifies. With
``--image-dir`` it also serves, under other ids, the same bytes for each
``DIR/<id>.json`` a test writes (:meth:`Glance.register`): a nova host
downloads an image once and caches it, so a test that needs a host to
download one again needs an id that host never saw. The file is read on
each request; ``{"truncate": N}`` in it makes the stand-in serve that
image's data cut after N bytes, as glance serves an image whose stored
data is truncated: the headers announce the recorded size and checksum,
the connection closes after the N bytes. The neutron stand-in is enough
for servers with ``networks='none'``: every listing is empty. Each request
is logged on stdout.
"""

import argparse
import hashlib
import http.server
import json
import os
import sys
import threading


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = 'HTTP/1.1'

    def log_message(self, fmt, *args):
        sys.stdout.write('%s %s\n' % (self.server.label, fmt % args))
        sys.stdout.flush()

    def _send(self, status, body=b'', content_type='application/json',
              headers=()):
        if not isinstance(body, bytes):
            body = json.dumps(body).encode()
        self.send_response(status)
        self.send_header('Content-Type', content_type)
        self.send_header('Content-Length', str(len(body)))
        for name, value in headers:
            self.send_header(name, value)
        self.end_headers()
        if self.command != 'HEAD':
            self.wfile.write(body)

    def _drain(self):
        length = int(self.headers.get('Content-Length') or 0)
        if length:
            self.rfile.read(length)

    def do_GET(self):
        self._drain()
        self.server.route(self)

    do_HEAD = do_GET

    def do_POST(self):
        self._drain()
        self._send(404, {'error': 'not supported by the stand-in'})

    do_PUT = do_DELETE = do_PATCH = do_POST


class Glance(object):
    """GET of the images, their data and the image schema."""

    def __init__(self, image_path, image_id, image_dir=None):
        with open(image_path, 'rb') as f:
            self.data = f.read()
        self.image_id = image_id
        self.image_dir = image_dir
        self.image = {
            'id': image_id, 'name': 'evac-tiny', 'status': 'active',
            'visibility': 'public', 'protected': False,
            'disk_format': 'qcow2', 'container_format': 'bare',
            'size': len(self.data), 'virtual_size': None,
            'checksum': hashlib.md5(self.data).hexdigest(),
            'os_hash_algo': 'sha512',
            'os_hash_value': hashlib.sha512(self.data).hexdigest(),
            'min_disk': 0, 'min_ram': 0, 'owner': 'admin', 'tags': [],
            'created_at': '2026-01-01T00:00:00Z',
            'updated_at': '2026-01-01T00:00:00Z',
            'file': '/v2/images/%s/file' % image_id,
            'self': '/v2/images/%s' % image_id,
            'schema': '/v2/schemas/image',
        }

    @staticmethod
    def register(image_dir, image_id, truncate=None):
        """Serve ``image_id`` (the same bytes), cut after ``truncate``.

        Written whole or not at all: the stand-in reads it per request.
        """
        path = os.path.join(image_dir, '%s.json' % image_id)
        with open(path + '.tmp', 'w') as f:
            json.dump({'truncate': truncate}, f)
        os.replace(path + '.tmp', path)

    def _settings(self, image_id):
        """A served image's settings ({} for the first); None if unknown."""
        if image_id == self.image_id:
            return {}
        if not (self.image_dir and image_id and
                image_id.replace('-', '').isalnum()):
            return None
        try:
            with open(os.path.join(self.image_dir,
                                   '%s.json' % image_id)) as f:
                return json.load(f)
        except FileNotFoundError:
            return None

    def _ids(self):
        extra = sorted(name[:-len('.json')]
                       for name in os.listdir(self.image_dir)
                       if name.endswith('.json')) if self.image_dir else []
        return [self.image_id] + extra

    def _record(self, image_id):
        return dict(self.image, id=image_id,
                    file='/v2/images/%s/file' % image_id,
                    self='/v2/images/%s' % image_id)

    def _data(self, req, image_id, settings):
        """The image's data; cut short, and the connection closed, if asked.

        The truncated response is what glance sends when the data in its
        store is shorter than the image's recorded size.
        """
        truncate = settings.get('truncate')
        checksum = [('Content-MD5', self.image['checksum'])]
        if truncate is None:
            req._send(200, self.data, 'application/octet-stream', checksum)
            return
        req.send_response(200)
        req.send_header('Content-Type', 'application/octet-stream')
        req.send_header('Content-Length', str(len(self.data)))
        for name, value in checksum:
            req.send_header(name, value)
        req.end_headers()
        if req.command == 'HEAD':
            return
        sys.stdout.write('glance image %s served truncated: %d of %d bytes, '
                         'then the connection closed\n' % (
                             image_id, min(truncate, len(self.data)),
                             len(self.data)))
        sys.stdout.flush()
        req.wfile.write(self.data[:truncate])
        req.wfile.flush()
        req.close_connection = True

    def route(self, req):
        path = req.path.split('?')[0].rstrip('/')
        parts = path.split('/')
        image_id = parts[3] if len(parts) > 3 and parts[1:3] == [
            'v2', 'images'] else None
        settings = self._settings(image_id)
        if path in ('', '/v2'):
            req._send(200, {'versions': [{
                'id': 'v2.16', 'status': 'CURRENT',
                'links': [{'rel': 'self',
                           'href': 'http://%s/v2/' % req.headers['Host']}]}]})
        elif path == '/v2/schemas/image':
            props = {name: {} for name in self.image}
            req._send(200, {'name': 'image', 'properties': props,
                            'additionalProperties': {'type': 'string'}})
        elif settings is not None and len(parts) == 4:
            req._send(200, self._record(image_id))
        elif settings is not None and len(parts) == 5 and parts[4] == 'file':
            self._data(req, image_id, settings)
        elif path == '/v2/images':
            req._send(200, {'images': [self._record(i)
                                       for i in self._ids()]})
        else:
            req._send(404, {'error': 'no such image'})


class Neutron(object):
    """Empty listings: nothing to do for servers with networks='none'."""

    def route(self, req):
        path = req.path.split('?')[0].rstrip('/')
        parts = [p for p in path.split('/') if p]
        if not parts:
            req._send(200, {'versions': [{'id': 'v2.0', 'status': 'CURRENT',
                                          'links': []}]})
        elif parts[0] == 'v2.0' and len(parts) == 2:
            resource = parts[1].rsplit('.json', 1)[0]
            req._send(200, {resource: []})
        else:
            req._send(404, {'NeutronError': {
                'type': 'NotFound', 'message': 'not found', 'detail': ''}})


def serve(port, label, router):
    server = http.server.ThreadingHTTPServer(('127.0.0.1', port), _Handler)
    server.daemon_threads = True
    server.label = label
    server.route = router.route
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, thread


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--glance-port', type=int, required=True)
    parser.add_argument('--neutron-port', type=int, required=True)
    parser.add_argument('--image', required=True)
    parser.add_argument('--image-id', required=True)
    parser.add_argument('--image-dir')
    args = parser.parse_args(argv)
    serve(args.glance_port, 'glance',
          Glance(args.image, args.image_id, args.image_dir))
    _, thread = serve(args.neutron_port, 'neutron', Neutron())
    print('stand-ins ready, pid %d' % os.getpid(), flush=True)
    thread.join()


if __name__ == '__main__':
    main()
