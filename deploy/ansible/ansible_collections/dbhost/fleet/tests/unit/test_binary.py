# -*- coding: utf-8 -*-
# Copyright: the dbhost authors. Apache License 2.0 (see LICENSE).

"""The binary root runs, and the shared options every module refuses."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import shutil
import stat
import tempfile
import unittest

import helpers  # noqa: F401 (puts the collection on sys.path)
from ansible_collections.dbhost.fleet.plugins.module_utils import binary

from test_modules import ModuleCase


class Untrusted(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(prefix="dbhost-binary-")
        self.addCleanup(shutil.rmtree, self.dir)
        os.chmod(self.dir, 0o755)
        self.bin = os.path.join(self.dir, "dbhost")
        shutil.copy("/bin/true", self.bin)
        os.chmod(self.bin, 0o755)

    def test_root_owned_binary_is_run(self):
        self.assertIsNone(binary.untrusted(self.bin, euid=0))

    def test_relative_path_is_refused(self):
        self.assertIn("absolute", binary.untrusted("dbhost", euid=0))

    def test_binary_others_can_write_is_refused(self):
        os.chmod(self.bin, 0o775)
        self.assertIn("root must own it", binary.untrusted(self.bin, euid=0))

    def test_binary_of_another_user_is_refused(self):
        os.chown(self.bin, 65534, 65534)
        self.assertIn("root must own it", binary.untrusted(self.bin, euid=0))

    def test_directory_others_can_write_is_refused(self):
        os.chmod(self.dir, 0o777)  # no sticky bit: anyone can swap the binary
        self.assertIn("directory above", binary.untrusted(self.bin, euid=0))
        os.chmod(self.dir, 0o777 | stat.S_ISVTX)  # as /tmp: others cannot rename root's file
        self.assertIsNone(binary.untrusted(self.bin, euid=0))

    def test_link_is_judged_by_its_target(self):
        other = tempfile.mkdtemp(prefix="dbhost-binary-other-")
        self.addCleanup(shutil.rmtree, other)
        os.chmod(other, 0o777)
        target = os.path.join(other, "dbhost")
        shutil.copy("/bin/true", target)
        os.chmod(target, 0o755)
        link = os.path.join(self.dir, "link")
        os.symlink(target, link)
        self.assertIn("directory above", binary.untrusted(link, euid=0))


class SharedOptions(ModuleCase):
    def test_flag_like_check_names_are_refused(self):
        for bad in ("--recover", "net.keepalive,vm", "a b", ""):
            failed, r = self.health(only=[bad])
            self.assertTrue(failed, bad)
            self.assertIn("no check ID", r["msg"])
            failed, r = self.fix(state="planned", skip=[bad])
            self.assertTrue(failed, bad)
            self.assertIn("no check ID", r["msg"])

    def test_flag_like_budget_is_refused(self):
        failed, r = self.fix(state="planned", budget="--apply")
        self.assertTrue(failed)
        self.assertIn("no list of shares", r["msg"])

    def test_untrusted_binary_fails_before_running(self):
        failed, r = self.health(binary="bin/dbhost")
        self.assertTrue(failed)
        self.assertIn("absolute", r["msg"])


if __name__ == "__main__":
    unittest.main()
