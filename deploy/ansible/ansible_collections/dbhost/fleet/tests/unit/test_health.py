# -*- coding: utf-8 -*-
# Copyright: the dbhost authors. Apache License 2.0 (see LICENSE).

"""The gate's verdicts on recorded audits.

audit-live.json is `dbhost audit --only net.keepalive,net.fin_timeout,
pg.settings_source --format json` of a development host (PostgreSQL, MariaDB
and Redis answering; the two net checks failing). The Galera variants add
the instances[].galera object dbhost reports for a Galera node.
"""

from __future__ import absolute_import, division, print_function

import copy
import json
import unittest

import helpers  # noqa: F401 (puts the collection on sys.path)
from ansible_collections.dbhost.fleet.plugins.module_utils import health

LIVE = helpers.fixture_json("audit-live.json")
SYNCED = {"cluster_status": "Primary", "local_state": "Synced", "cluster_size": 3, "ready": True, "connected": True}


def doc(**changes):
    d = copy.deepcopy(LIVE)
    for f in d["findings"]:
        if f["id"] in changes.get("passing", []):
            f["status"] = "pass"
            f.pop("fix", None)
    return d


def galera_doc(**g):
    d = doc()
    for inst in d["instances"]:
        if inst["name"] == "mysql:3306":
            inst["galera"] = dict(SYNCED, **g)
    return d


def instance(d, name):
    return [i for i in d["instances"] if i["name"] == name][0]


class RecordedAudit(unittest.TestCase):
    def test_recorded_host_answers(self):
        v = health.evaluate(LIVE)
        self.assertTrue(v["healthy"], v["failures"])
        self.assertEqual(v["expect"], {"instances": ["mysql:3306", "postgres:5432", "redis:6379"], "galera": {}})
        self.assertEqual([i["settings_source"] for i in v["instances"]], ["live"] * 3)
        self.assertEqual(v["galera"], {})

    def test_failing_checks_fail_the_gate(self):
        v = health.evaluate(LIVE, only=["net.keepalive", "net.fin_timeout"])
        self.assertFalse(v["healthy"])
        self.assertEqual(len(v["failures"]), 2)
        self.assertTrue(v["failures"][0].startswith("net.fin_timeout (host): fail: "), v["failures"])
        self.assertTrue(v["failures"][1].startswith("net.keepalive (host): fail: "), v["failures"])

    def test_passing_checks_pass(self):
        v = health.evaluate(doc(passing=["net.keepalive", "net.fin_timeout"]), only=["net.keepalive", "net.fin_timeout"])
        self.assertTrue(v["healthy"], v["failures"])
        self.assertEqual([(c["id"], c["status"]) for c in v["checks"]],
                         [("net.fin_timeout", "pass"), ("net.keepalive", "pass")])

    def test_domain_prefix_selects_its_checks(self):
        v = health.evaluate(LIVE, only=["net"])
        self.assertEqual(sorted(c["id"] for c in v["checks"]), ["net.fin_timeout", "net.keepalive"])
        v = health.evaluate(LIVE, only=["pg"])
        self.assertTrue(v["healthy"], v["failures"])
        # "net.keep" is no domain: it selects nothing and says so.
        v = health.evaluate(doc(passing=["net.keepalive"]), only=["net.keep"])
        self.assertEqual(v["failures"], ["net.keep: no finding (the check did not judge anything on this host)"])

    def test_waived_failure_passes(self):
        d = doc()
        for f in d["findings"]:
            if f["id"] == "net.keepalive":
                f["waiver"] = {"reason": "the load balancer keeps flows for a day", "source": "/etc/dbhost/waivers.yaml:3"}
        v = health.evaluate(d, only=["net.keepalive"])
        self.assertTrue(v["healthy"], v["failures"])
        self.assertTrue(v["checks"][0]["waived"])

    def test_unknown_fails(self):
        d = doc()
        d["findings"][1]["status"] = "unknown"
        v = health.evaluate(d, only=["net.keepalive"])
        self.assertFalse(v["healthy"])
        self.assertIn("net.keepalive (host): unknown", v["failures"][0])

    def test_database_gone(self):
        before = health.expectation(LIVE)
        d = doc()
        d["instances"] = [i for i in d["instances"] if i["name"] != "postgres:5432"]
        v = health.evaluate(d, expect=before)
        self.assertEqual(v["failures"], ["postgres:5432: not running (it answered before the change)"])

    def test_database_does_not_answer(self):
        before = health.expectation(LIVE)
        d = doc()
        pg = instance(d, "postgres:5432")
        pg["settings_source"] = "files"
        pg["live_error"] = "dial unix /var/run/postgresql/.s.PGSQL.5432: connect: no such file or directory"
        v = health.evaluate(d, expect=before)
        self.assertEqual(v["failures"], ["postgres:5432: does not answer (dial unix /var/run/postgresql/"
                                         ".s.PGSQL.5432: connect: no such file or directory)"])
        # Without an expectation every database found must answer.
        self.assertFalse(health.evaluate(d)["healthy"])
        # An instance that did not answer before is not expected to now.
        self.assertNotIn("postgres:5432", health.expectation(d)["instances"])
        self.assertTrue(health.evaluate(d, expect=health.expectation(d))["healthy"])

    def test_new_database_is_not_required(self):
        before = health.expectation(LIVE)
        d = doc()
        d["instances"].append({"name": "postgres:5433", "engine": "postgres", "settings_source": "files",
                               "live_error": "password authentication failed"})
        self.assertTrue(health.evaluate(d, expect=before)["healthy"])


class Galera(unittest.TestCase):
    def test_synced_primary(self):
        d = galera_doc()
        v = health.evaluate(d)
        self.assertTrue(v["healthy"], v["failures"])
        self.assertEqual(v["galera"], {"mysql:3306": 3})
        self.assertEqual(v["expect"]["galera"], {"mysql:3306": 3})
        self.assertTrue(health.evaluate(galera_doc(), expect=v["expect"])["healthy"])

    def test_donor_desynced(self):
        before = health.expectation(galera_doc())
        v = health.evaluate(galera_doc(local_state="Donor/Desynced"), expect=before)
        self.assertEqual(v["failures"], ["mysql:3306: Galera node is Donor/Desynced, not Synced"])

    def test_joining_not_ready(self):
        v = health.evaluate(galera_doc(local_state="Joining", ready=False))
        self.assertEqual(v["failures"], ["mysql:3306: Galera node is Joining, not Synced",
                                         "mysql:3306: Galera node is not ready for queries (wsrep_ready OFF)"])

    def test_non_primary(self):
        v = health.evaluate(galera_doc(cluster_status="non-Primary", cluster_size=1))
        self.assertFalse(v["healthy"])
        self.assertIn("Galera cluster status is non-Primary, not Primary", v["failures"][0])
        # A degraded cluster is no size to expect later.
        self.assertEqual(health.expectation(galera_doc(cluster_status="non-Primary"))["galera"], {})

    def test_size_shrunk(self):
        before = health.expectation(galera_doc(cluster_size=3))
        v = health.evaluate(galera_doc(cluster_size=2), expect=before)
        self.assertEqual(v["failures"], ["mysql:3306: Galera cluster has 2 nodes, had 3 before the change"])
        self.assertTrue(health.evaluate(galera_doc(cluster_size=4), expect=before)["healthy"])
        # A node left alone: one node, singular.
        v = health.evaluate(galera_doc(cluster_size=1), expect=before)
        self.assertEqual(v["failures"], ["mysql:3306: Galera cluster has 1 node, had 3 before the change"])

    def test_size_missing(self):
        before = health.expectation(galera_doc())
        d = galera_doc()
        del instance(d, "mysql:3306")["galera"]["cluster_size"]
        v = health.evaluate(d, expect=before)
        self.assertEqual(v["failures"], ["mysql:3306: Galera cluster size unknown, was 3"])

    def test_node_stopped(self):
        before = health.expectation(galera_doc())
        d = doc()
        d["instances"] = [i for i in d["instances"] if i["name"] != "mysql:3306"]
        v = health.evaluate(d, expect=before)
        self.assertEqual(v["failures"], ["mysql:3306: not running (it answered before the change)"])

    def test_galera_status_gone(self):
        before = health.expectation(galera_doc())
        v = health.evaluate(doc(), expect=before)
        self.assertEqual(v["failures"], ["mysql:3306: reports no Galera status, it did before the change"])

    def test_no_galera_object_is_no_galera_node(self):
        # The field is absent on dbhost versions before it and on other engines.
        self.assertTrue(health.evaluate(doc(), expect=health.expectation(doc()))["healthy"])


class Runs(unittest.TestCase):
    def test_audit_error(self):
        v = health.judge_run(2, "", "dbhost audit: no check matches \"nosuch\" (see 'dbhost checks')\n")
        self.assertFalse(v["healthy"])
        self.assertEqual(v["failures"], ["dbhost audit exited 2: dbhost audit: no check matches \"nosuch\" (see 'dbhost checks')"])

    def test_not_json(self):
        v = health.judge_run(0, "HOST db1\n", "")
        self.assertFalse(v["healthy"])
        self.assertIn("printed no JSON", v["failures"][0])

    def test_other_schema(self):
        v = health.judge_run(0, json.dumps({"schema": "dbhost.diff/2"}), "")
        self.assertIn("another kind", v["failures"][0])

    def test_exit_1_is_a_verdict(self):
        v = health.judge_run(1, json.dumps(LIVE), "", only=["pg.settings_source"])
        self.assertTrue(v["healthy"], v["failures"])


if __name__ == "__main__":
    unittest.main()
