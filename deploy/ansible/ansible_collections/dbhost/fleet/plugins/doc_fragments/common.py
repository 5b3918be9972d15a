# -*- coding: utf-8 -*-
# Copyright: the dbhost authors. Apache License 2.0 (see LICENSE).

"""The options every dbhost module takes: which binary, and how it judges."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type


class ModuleDocFragment(object):
    DOCUMENTATION = r'''
options:
  binary:
    description:
      - The dbhost binary on the host. Root runs it, so it must belong to root and be writable by
        nobody else, nor any directory above it.
    type: path
    default: /usr/bin/dbhost
  budget:
    description:
      - Memory shares of the databases (C(--budget)), e.g. C(postgres:5432=40%). Not secret.
      - Give the gate the same shares as the fix, so that memory checks judge alike.
    type: str
  waivers:
    description: The waiver file (C(--waivers)); default dbhost's C(/etc/dbhost/waivers.yaml).
    type: path
  no_waivers:
    description: Apply no waiver file (C(--no-waivers)).
    type: bool
    default: false
'''
