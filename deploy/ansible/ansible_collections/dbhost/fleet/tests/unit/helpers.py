# -*- coding: utf-8 -*-
# Copyright: the dbhost authors. Apache License 2.0 (see LICENSE).

"""Paths and imports shared by the unit tests.

The tests import the collection as Ansible does, by the
ansible_collections.dbhost.fleet package, from the directory above
ansible_collections (deploy/ansible).
"""

from __future__ import absolute_import, division, print_function

import json
import os
import shlex
import sys

UNIT = os.path.dirname(os.path.abspath(__file__))
COLLECTION = os.path.dirname(os.path.dirname(UNIT))
COLLECTIONS_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(COLLECTION)))
FIXTURES = os.path.join(UNIT, "fixtures")
MODULES = os.path.join(COLLECTION, "plugins", "modules")
PLAYBOOKS = os.path.join(COLLECTION, "playbooks")
FAKE = os.path.join(UNIT, "fake_dbhost.py")

if COLLECTIONS_ROOT not in sys.path:
    sys.path.insert(0, COLLECTIONS_ROOT)


def fixture(name):
    with open(os.path.join(FIXTURES, name)) as f:
        return f.read()


def fixture_json(name):
    return json.loads(fixture(name))


def fake_binary(state):
    """An executable dbhost stand-in keeping its state in state (a directory
    of its own); returns its path."""
    os.makedirs(state, exist_ok=True)
    path = os.path.join(state, "dbhost")
    with open(path, "w") as f:
        f.write("#!/bin/sh\nexec %s %s %s \"$@\"\n" % (shlex.quote(sys.executable), shlex.quote(FAKE), shlex.quote(state)))
    os.chmod(path, 0o755)
    return path


def configure(state, **cfg):
    with open(os.path.join(state, "config.json"), "w") as f:
        json.dump(cfg, f)


def calls(state):
    """The fake's command lines, oldest first (without their times)."""
    try:
        with open(os.path.join(state, "calls.log")) as f:
            return [json.loads(line)[1:] for line in f if line.strip()]
    except IOError:
        return []


def sets(state):
    try:
        with open(os.path.join(state, "sets.json")) as f:
            return json.load(f)
    except IOError:
        return []
