#!/usr/bin/python3
# -*- coding: utf-8 -*-
# Copyright: the dbhost authors. Apache License 2.0 (see LICENSE).

"""A stand-in for the dbhost binary in the modules' unit tests.

It prints what dbhost prints (the lines the modules parse are those of
internal/cli/fixapply.go) and keeps its change sets in a state directory, so
that the modules and rollout.yml run end to end on the controller without
changing anything. Run as `fake_dbhost.py STATE ARGS...` through a wrapper
script the tests write; STATE/config.json says how it behaves:

  pending      the plan has changes until a set is applied (default true)
  refuse       --plan refuses (exit 2)
  apply_fails  --apply fails and rolls itself back (status failed, exit 2)
  quiet_apply  --apply does not print its "applied change set" line
  down         the database does not answer
  down_after   after an apply, the database does not answer
  fail_after   after an apply, the fixed checks still fail
  galera       the instance is a Galera node: {"cluster_size": N, "local_state": ...}

Every call is appended to STATE/calls.log (one JSON list per line).
"""

from __future__ import absolute_import, division, print_function

import json
import os
import random
import sys
import time

CHECKS = ["net.fin_timeout", "net.keepalive"]


def load(state, name, default):
    try:
        with open(os.path.join(state, name)) as f:
            return json.load(f)
    except (IOError, OSError, ValueError):
        return default


def save(state, name, value):
    with open(os.path.join(state, name), "w") as f:
        json.dump(value, f)


def flag(args, name):
    for a in args:
        if a == name:
            return ""
        if a.startswith(name + "="):
            return a[len(name) + 1:]
    return None


def applied(sets):
    return [s for s in sets if s["status"] == "applied"]


def plan_doc():
    return {
        "root": "/",
        "findings": [{"id": c, "subject": "host"} for c in CHECKS],
        "files": [{"path": "/etc/sysctl.d/60-dbhost.conf", "exists": False, "sum": "", "new_sum": "x",
                   "mode": 420, "content": "net.ipv4.tcp_keepalive_time = 120\n",
                   "diff": "--- /dev/null\n+++ b/etc/sysctl.d/60-dbhost.conf\n+net.ipv4.tcp_keepalive_time = 120\n",
                   "findings": CHECKS}],
        "values": [{"path": "/proc/sys/net/ipv4/tcp_keepalive_time", "old": "7200", "new": "120",
                    "findings": ["net.keepalive"]}],
        "settings": [],
    }


PLAN_TEXT = """Host plan: 2 fixes decided together (1 rounds); every check they fix passes on the planned host and no passing check fails.
Fixes for 2 findings.

file /etc/sysctl.d/60-dbhost.conf (mode 0644, new file; for net.fin_timeout, net.keepalive)
--- /dev/null
+++ b/etc/sysctl.d/60-dbhost.conf
+net.ipv4.tcp_keepalive_time = 120

value /proc/sys/net/ipv4/tcp_keepalive_time: 7200 -> 120 (for net.keepalive)
"""


def fix(state, cfg, args):
    sets = load(state, "sets.json", [])
    pending = cfg.get("pending", True) and not applied(sets)
    if "--history" in args:
        if not sets:
            print("no change sets in /var/lib/dbhost/changes")
        for s in sets:
            print("%s  %-12s %s  by root: 1 files, 1 values, 0 settings; fixed %s" % (
                s["id"], s["status"], s["created"], ", ".join(s["fixed"])))
            if s.get("rolled_back"):
                print("    rolled back %s by root" % s["rolled_back"])
        return 0
    if "--plan" in args:
        if cfg.get("refuse"):
            print("REFUSED: the planned host, judged after 2 rounds, fails 1 checks; nothing will be changed:")
            print("  - mem.hugepages.postgres (postgres:5432): still fails under the plan")
            return 2
        out = flag(args, "--plan-out")
        doc = plan_doc()
        if not pending:
            doc["files"][0]["unchanged"] = True
            doc["values"][0]["unchanged"] = True
        if out:
            with open(out, "w") as f:
                json.dump(doc, f)
            os.chmod(out, 0o600)
            sys.stderr.write("dbhost fix: plan saved to %s\n" % out)
        print(PLAN_TEXT if pending else "Fixes for 2 findings.\n\nvalue /proc/sys/net/ipv4/tcp_keepalive_time: already 120")
        return 1 if pending else 0
    if "--apply" in args:
        pf = flag(args, "--plan-file")
        if pf is not None and not os.path.exists(pf):
            sys.stderr.write("dbhost fix: open %s: no such file or directory\n" % pf)
            return 2
        if not pending:
            sys.stderr.write("dbhost fix: apply: nothing to change: every file and value is already as the fixes want\n")
            return 2
        now = time.gmtime()
        cid = time.strftime("%Y%m%dT%H%M%SZ", now) + "-%04x" % random.randrange(0x10000)
        status = "failed" if cfg.get("apply_fails") else "applied"
        sets.append({"id": cid, "status": status, "created": time.strftime("%Y-%m-%d %H:%M:%SZ", now),
                     "fixed": CHECKS, "at": time.time()})
        save(state, "sets.json", sets)
        if cfg.get("apply_fails"):
            sys.stderr.write("dbhost fix: apply: write /proc/sys/net/ipv4/tcp_keepalive_time: permission denied "
                             "(everything changed so far was put back)\n")
            return 2
        print(PLAN_TEXT)
        if not cfg.get("quiet_apply"):
            print("applied change set %s (undo with: dbhost fix --rollback %s)" % (cid, cid))
        st = "fail" if cfg.get("fail_after") else "pass"
        for c in CHECKS:
            print("  %-5s %s" % (st, c))
        return 1 if cfg.get("fail_after") else 0
    if "--rollback" in args:
        i = args.index("--rollback")
        cid = args[i + 1] if i + 1 < len(args) and not args[i + 1].startswith("-") else None
        target = None
        for s in reversed(sets):
            if (cid and s["id"] == cid) or (not cid and s["status"] == "applied"):
                target = s
                break
        if target is None or target["status"] != "applied":
            sys.stderr.write("dbhost fix: rollback: no applied change set %s\n" % cid)
            return 2
        target["status"] = "rolled-back"
        target["rolled_back"] = time.strftime("%Y-%m-%d %H:%M:%SZ", time.gmtime())
        save(state, "sets.json", sets)
        print("rolled back %s: 1 files, 1 kernel values and 0 database settings as they were before" % target["id"])
        return 0
    if "--recover" in args:
        for s in sets:
            if s["status"] in ("applying", "rolling-back"):
                s["status"] = "rolled-back"
        save(state, "sets.json", sets)
        print("nothing to recover")
        return 0
    sys.stderr.write("fake dbhost: unknown fix mode %r\n" % args)
    return 2


def audit(state, cfg, args):
    sets = load(state, "sets.json", [])
    done = bool(applied(sets))
    only = (flag(args, "--only") or "").split(",") if flag(args, "--only") else []
    inst = {"name": "postgres:5432", "engine": "postgres", "flavor": "PostgreSQL", "settings_source": "live"}
    if cfg.get("down") or (done and cfg.get("down_after")):
        inst["settings_source"] = "files"
        inst["live_error"] = "dial unix /var/run/postgresql/.s.PGSQL.5432: connect: no such file or directory"
    if cfg.get("galera"):
        inst = {"name": "mysql:3306", "engine": "mysql", "flavor": "MariaDB", "settings_source": "live",
                "galera": dict({"cluster_status": "Primary", "local_state": "Synced", "cluster_size": 3,
                                "ready": True, "connected": True}, **cfg["galera"])}
    findings = []
    for c in CHECKS:
        if only and not any(c == o or c.startswith(o + ".") for o in only):
            continue
        ok = done and not cfg.get("fail_after")
        findings.append({"id": c, "subject": "host", "severity": "warning", "status": "pass" if ok else "fail",
                         "reason": "%s %s" % (c, "as wanted" if ok else "not as wanted")})
    doc = {"schema": "dbhost.audit/1", "host": {"hostname": os.path.basename(state), "source": "live"},
           "instances": [inst], "summary": {}, "findings": findings, "notes": []}
    print(json.dumps(doc))
    return 0


def main():
    state, args = sys.argv[1], sys.argv[2:]
    cfg = load(state, "config.json", {})
    with open(os.path.join(state, "calls.log"), "a") as f:
        f.write(json.dumps([time.time()] + args) + "\n")
    if args and args[0] == "fix":
        return fix(state, cfg, args[1:])
    if args and args[0] == "audit":
        return audit(state, cfg, args[1:])
    sys.stderr.write("fake dbhost: unknown command %r\n" % args)
    return 2


if __name__ == "__main__":
    sys.exit(main())
