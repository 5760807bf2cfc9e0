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

"""A paste filter that makes every compute API request an admin's.

nova 34 has no ``noauth2`` pipeline any more; this stands in for keystone
in the deployment tier's ``api-paste.ini``. The token it puts in the
context is what nova passes on to the glance and neutron stand-ins.
"""

from nova.api import wsgi
from nova import context
import webob.dec


class AdminContext(wsgi.Middleware):

    @webob.dec.wsgify(RequestClass=wsgi.Request)
    def __call__(self, req):
        project_id = req.headers.get('X-Project-Id', 'admin')
        req.environ['nova.context'] = context.RequestContext(
            user_id='admin', project_id=project_id, is_admin=True,
            roles=['admin', 'member', 'reader'], auth_token='admin',
            remote_address=req.remote_addr)
        return self.application
