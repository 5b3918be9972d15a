# -*- coding: utf-8 -*-
# Copyright: the dbhost authors. Apache License 2.0 (see LICENSE).

"""What `dbhost fix` says, read for the dbhost_fix module.

dbhost writes the plan as JSON (--plan-out) but reports an applied change
set and the history only as text: the change set's ID on the line
"applied change set ID (undo with: ...)", and one line per set in
`fix --history`. These parsers read exactly those documented lines and
ignore everything else, so that added lines do not break them.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re

# Change set IDs: YYYYMMDDTHHMMSSZ-xxxx (internal/apply).
CHANGE_ID = r"[0-9]{8}T[0-9]{6}Z-[0-9a-f]{4}"
CHANGE_ID_RE = re.compile(r"^" + CHANGE_ID + r"$")

_APPLIED_RE = re.compile(r"^applied change set (" + CHANGE_ID + r") \(undo with:", re.M)
_HISTORY_RE = re.compile(
    r"^(?P<id>" + CHANGE_ID + r")\s+(?P<status>[a-z-]+)\s+"
    r"(?P<created>\d{4}-\d\d-\d\d \d\d:\d\d:\d\dZ)\s+by (?P<by>.*?): "
    r"(?P<files>\d+) files, (?P<values>\d+) values, (?P<settings>\d+) settings; fixed ?(?P<fixed>.*)$")
_ROLLED_BACK_RE = re.compile(r"^\s+rolled back (?P<at>\S+ \S+) by (?P<by>.*)$")
_AFTER_RE = re.compile(r"^  (pass|fail|unknown)\s+(\S.*)$")

# Change set statuses (internal/apply): applied can be rolled back; the
# unfinished ones are put back by `fix --recover`; the rest are done.
APPLIED = "applied"
UNFINISHED = ("applying", "rolling-back")
PUT_BACK = ("rolled-back", "failed")


def applied_id(stdout):
    """The ID of the change set `fix --apply` reports, or None."""
    m = _APPLIED_RE.search(stdout or "")
    return m.group(1) if m else None


def after_statuses(stdout):
    """The statuses of the fixed findings audited again after the apply:
    the lines after "applied change set ...": [{"status", "target"}]."""
    out = []
    text = stdout or ""
    i = text.find("\napplied change set ")
    if i < 0:
        return out
    for line in text[i + 1:].splitlines()[1:]:
        m = _AFTER_RE.match(line)
        if m:
            out.append({"status": m.group(1), "target": m.group(2).strip()})
    return out


def plan_text(stdout):
    """What `fix --apply` printed of the plan, without its report of the apply."""
    text = stdout or ""
    i = text.find("\napplied change set ")
    return text if i < 0 else text[:i + 1]


def parse_history(stdout):
    """The change sets `fix --history` lists, oldest first: dicts with id,
    status, created, by, files, values, settings, fixed (list of targets)
    and, once rolled back, rolled_back_at and rolled_back_by."""
    sets = []
    for line in (stdout or "").splitlines():
        m = _HISTORY_RE.match(line)
        if m:
            fixed = m.group("fixed").strip()
            sets.append({
                "id": m.group("id"),
                "status": m.group("status"),
                "created": m.group("created"),
                "by": m.group("by"),
                "files": int(m.group("files")),
                "values": int(m.group("values")),
                "settings": int(m.group("settings")),
                "fixed": _split_targets(fixed),
            })
            continue
        m = _ROLLED_BACK_RE.match(line)
        if m and sets:
            sets[-1]["rolled_back_at"] = m.group("at")
            sets[-1]["rolled_back_by"] = m.group("by")
    return sets


def _split_targets(text):
    """Split "a, b (postgres:5432), c" on the commas outside parentheses."""
    out, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            out.append("".join(cur).strip())
            cur = []
            continue
        cur.append(ch)
    if "".join(cur).strip():
        out.append("".join(cur).strip())
    return [t for t in out if t]


def find_set(sets, change_id=None):
    """The set change_id names, or, without one, the latest applied set."""
    for cs in reversed(sets):
        if change_id:
            if cs["id"] == change_id:
                return cs
        elif cs["status"] == APPLIED:
            return cs
    return None


def new_sets(before, after):
    """The sets in after that were not in before (a run's own set)."""
    known = set(cs["id"] for cs in before)
    return [cs for cs in after if cs["id"] not in known]


def load_plan(text):
    """A plan saved by --plan-out, as a dict; ValueError when it is none."""
    plan = json.loads(text)
    if not isinstance(plan, dict) or "findings" not in plan:
        raise ValueError("not a dbhost plan (no findings)")
    return plan


def plan_changes(plan):
    """True when the plan changes anything (dbhost's Plan.Changes)."""
    for kind in ("files", "values", "settings"):
        for item in plan.get(kind) or []:
            if not item.get("unchanged"):
                return True
    return False


def plan_checks(plan):
    """The IDs of the checks the plan fixes, sorted, each once."""
    ids = set()
    for t in plan.get("findings") or []:
        if t.get("id"):
            ids.add(t["id"])
    return sorted(ids)


def plan_targets(plan):
    """The findings the plan fixes: "ID" on the host, "ID (subject)" on an instance."""
    out = []
    for t in plan.get("findings") or []:
        subject = t.get("subject") or "host"
        out.append(t.get("id", "") if subject == "host" else "%s (%s)" % (t.get("id", ""), subject))
    return out


def plan_summary(plan):
    """Counts of what the plan changes, for the module's result."""
    def changed(kind):
        return [i for i in plan.get(kind) or [] if not i.get("unchanged")]
    return {
        "files": [f.get("path", "") for f in changed("files")],
        "values": ["%s: %s -> %s" % (v.get("path", ""), v.get("old", ""), v.get("new", "")) for v in changed("values")],
        "settings": ["%s %s: %s -> %s" % ((s.get("server") or {}).get("name", ""), s.get("key", ""),
                                          s.get("old", ""), s.get("new", "")) for s in changed("settings")],
        "not_applied": list(plan.get("not_applied") or []),
    }
