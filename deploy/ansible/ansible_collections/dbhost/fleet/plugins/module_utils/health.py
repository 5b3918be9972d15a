# -*- coding: utf-8 -*-
# Copyright: the dbhost authors. Apache License 2.0 (see LICENSE).

"""The health gate of a roll-out, judged from `dbhost audit --format json`.

Pure functions of the audit document, so that recorded audits test them.
A host is healthy when every database expected answers dbhost live
(instances[].settings_source == "live"), every finding of the checks asked
for passes (a waived failure counts as passing), and every Galera node is
Synced in a Primary component at least as large as before the change.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

GALERA_PRIMARY = "Primary"
GALERA_SYNCED = "Synced"


def selected(check_id, only):
    """True when check_id is one of only, or in one of its domains (as --only)."""
    for sel in only:
        if check_id == sel or check_id.startswith(sel + "."):
            return True
    return False


def parse_audit(rc, out, err):
    """The audit document, or (None, why) when dbhost could not judge the host."""
    if rc not in (0, 1):
        return None, "dbhost audit exited %d: %s" % (rc, (err or out or "").strip()[-2000:])
    try:
        doc = json.loads(out)
    except ValueError as e:
        return None, "dbhost audit printed no JSON (%s): %s" % (e, (err or "").strip()[-500:])
    if not isinstance(doc, dict) or not str(doc.get("schema", "")).startswith("dbhost.audit/"):
        return None, "dbhost audit printed JSON of another kind (schema %r)" % (
            doc.get("schema") if isinstance(doc, dict) else None)
    return doc, None


def _galera(inst):
    g = inst.get("galera")
    return g if isinstance(g, dict) else None


def summarize(doc):
    """The instances as the gate reports them, and each Galera node's cluster size."""
    instances = []
    galera = {}
    for inst in doc.get("instances") or []:
        name = inst.get("name", "")
        item = {
            "name": name,
            "engine": inst.get("engine", ""),
            "flavor": inst.get("flavor", ""),
            "settings_source": inst.get("settings_source", ""),
        }
        if inst.get("live_error"):
            item["live_error"] = inst["live_error"]
        g = _galera(inst)
        if g is not None:
            item["galera"] = g
            galera[name] = g.get("cluster_size")
        instances.append(item)
    return instances, galera


def expectation(doc):
    """What a later gate expects: the databases that answer now and the size
    of each Galera node's cluster now (only nodes that are Synced in a
    Primary component: a degraded cluster is no size to hold a change to)."""
    names = []
    sizes = {}
    for inst in doc.get("instances") or []:
        if inst.get("settings_source") != "live":
            continue
        names.append(inst.get("name", ""))
        g = _galera(inst)
        if g is not None and _galera_failures(inst.get("name", ""), g, None) == []:
            sizes[inst.get("name", "")] = g.get("cluster_size")
    return {"instances": sorted(names), "galera": sizes}


def _galera_failures(name, g, want_size):
    out = []
    status = g.get("cluster_status")
    if status != GALERA_PRIMARY:
        out.append("%s: Galera cluster status is %s, not %s (the node is cut off from the "
                   "cluster's quorum)" % (name, status or "unknown", GALERA_PRIMARY))
    state = g.get("local_state")
    if state != GALERA_SYNCED:
        out.append("%s: Galera node is %s, not %s" % (name, state or "unknown", GALERA_SYNCED))
    if g.get("ready") is not True:
        out.append("%s: Galera node is not ready for queries (wsrep_ready OFF)" % name)
    size = g.get("cluster_size")
    if want_size is not None:
        if not isinstance(size, int) or isinstance(size, bool):
            out.append("%s: Galera cluster size unknown, was %s" % (name, want_size))
        elif size < want_size:
            out.append("%s: Galera cluster has %d node%s, had %d before the change" % (
                name, size, "" if size == 1 else "s", want_size))
    return out


def evaluate(doc, only=None, expect=None):
    """Judge one audit document. Returns a dict: healthy, failures (reasons,
    in a stable order), instances, galera, expect, checks (the findings of
    the checks in only: id, subject, status, waived)."""
    only = list(only or [])
    failures = []
    instances, galera = summarize(doc)
    by_name = {}
    for inst in doc.get("instances") or []:
        by_name.setdefault(inst.get("name", ""), inst)

    # The databases that must answer: those that answered before the change,
    # or, with nothing recorded, every one dbhost finds.
    if expect is not None and expect.get("instances") is not None:
        want = list(expect.get("instances") or [])
    else:
        want = [i["name"] for i in instances]
    for name in want:
        inst = by_name.get(name)
        if inst is None:
            failures.append("%s: not running (it answered before the change)" % name)
            continue
        if inst.get("settings_source") != "live":
            why = inst.get("live_error") or "no live connection"
            failures.append("%s: does not answer (%s)" % (name, why))

    # Galera: every node found (and every node expected) Synced, Primary, ready,
    # in a cluster at least as large as before.
    sizes = dict((expect or {}).get("galera") or {})
    for inst in doc.get("instances") or []:
        name = inst.get("name", "")
        g = _galera(inst)
        if g is None:
            if name in sizes and inst.get("settings_source") == "live":
                failures.append("%s: reports no Galera status, it did before the change" % name)
            continue
        failures.extend(_galera_failures(name, g, sizes.get(name)))

    checks = []
    seen = set()
    for f in doc.get("findings") or []:
        fid = f.get("id", "")
        if not selected(fid, only):
            continue
        for sel in only:
            if fid == sel or fid.startswith(sel + "."):
                seen.add(sel)
        status = f.get("status", "")
        waived = status == "fail" and isinstance(f.get("waiver"), dict)
        checks.append({"id": fid, "subject": f.get("subject", ""), "status": status, "waived": waived})
        if status == "pass" or waived:
            continue
        reason = (f.get("reason") or "").strip()
        if len(reason) > 300:
            reason = reason[:297] + "..."
        failures.append("%s (%s): %s%s" % (fid, f.get("subject", ""), status or "no status",
                                           ": " + reason if reason else ""))
    for sel in only:
        if sel not in seen:
            failures.append("%s: no finding (the check did not judge anything on this host)" % sel)

    return {
        "healthy": not failures,
        "failures": failures,
        "instances": instances,
        "galera": galera,
        "expect": expectation(doc),
        "checks": checks,
    }


def judge_run(rc, out, err, only=None, expect=None):
    """evaluate() for one run of dbhost audit, its exit status and output."""
    doc, why = parse_audit(rc, out, err)
    if doc is None:
        return {"healthy": False, "failures": [why], "instances": [], "galera": {},
                "expect": {"instances": [], "galera": {}}, "checks": []}
    return evaluate(doc, only, expect)
