# -*- coding: utf-8 -*-
# Copyright: the dbhost authors. Apache License 2.0 (see LICENSE).

"""The dbhost binary the modules run, and the arguments they share."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import stat


def untrusted(path, euid=None):
    """Why root must not run path, or None.

    Root runs the binary: another user who can replace it, or rename a
    directory above it, would run code as root. So the file and every
    directory above it must belong to root and be writable by nobody else
    (a root-owned sticky directory such as /tmp is fine: others cannot
    rename what they do not own). Links are resolved first and the target
    is judged. Not root: nothing to protect, only that it exists.
    """
    if not os.path.isabs(path):
        return "%s: the binary must be an absolute path" % path
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError as e:
        return "%s: %s" % (path, e.strerror)
    if not stat.S_ISREG(st.st_mode) or not os.access(real, os.X_OK):
        return "%s: not an executable file" % path
    if euid is None:
        euid = os.geteuid()
    if euid != 0:
        return None
    if st.st_uid != 0 or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        return "%s: root runs it, so root must own it and nobody else may write it" % real
    d = os.path.dirname(real)
    while True:
        try:
            ds = os.stat(d)
        except OSError as e:
            return "%s: %s" % (d, e.strerror)
        writable = ds.st_mode & (stat.S_IWGRP | stat.S_IWOTH)
        if ds.st_uid != 0 or (writable and not ds.st_mode & stat.S_ISVTX):
            return "%s: a directory above the binary root runs must belong to root and be writable by nobody else" % d
        parent = os.path.dirname(d)
        if parent == d:
            return None
        d = parent


def argument_spec(**own):
    """A module's argument spec: its own options and the ones every dbhost
    module takes (documented in doc_fragments/common.py)."""
    spec = dict(
        binary=dict(type="path", default="/usr/bin/dbhost"),
        budget=dict(type="str"),
        waivers=dict(type="path"),
        no_waivers=dict(type="bool", default=False),
    )
    spec.update(own)
    return spec


def check_common(module):
    """Fail the module on the options every dbhost module takes when they
    are unsafe or malformed: a binary root must not run, check names dbhost
    would read as flags, a budget that starts like a flag."""
    p = module.params
    why = untrusted(p["binary"])
    if why:
        module.fail_json(msg=why)
    for what in ("only", "skip"):
        if what in p:
            check_names(module, p[what], what)
    if p["budget"] is not None and p["budget"].startswith("-"):
        module.fail_json(msg="budget %r is no list of shares" % p["budget"])


def selection_args(params):
    """--only, --skip, --budget and the waiver flags, as dbhost takes them
    (NAME=VALUE, so that no value is ever read as a flag)."""
    args = []
    if params.get("only"):
        args.append("--only=" + ",".join(params["only"]))
    if params.get("skip"):
        args.append("--skip=" + ",".join(params["skip"]))
    if params.get("budget"):
        args.append("--budget=" + params["budget"])
    if params.get("no_waivers"):
        args.append("--no-waivers")
    elif params.get("waivers"):
        args.append("--waivers=" + params["waivers"])
    return args


def check_names(module, names, what):
    """Fail on a check name that dbhost would read as a flag or a list."""
    for n in names or []:
        if not n or n.startswith("-") or "," in n or any(c.isspace() for c in n):
            module.fail_json(msg="%s: %r is no check ID or domain" % (what, n))
