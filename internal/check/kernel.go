package check

import (
	"fmt"
	"strings"

	"github.com/dbhost/dbhost/internal/engine"
	"github.com/dbhost/dbhost/internal/facts"
	"github.com/dbhost/dbhost/internal/fix"
)

func init() {
	Register(Check{
		ID:        "kernel.mongodb_minimum",
		Title:     "Kernel and C library meet MongoDB's requirements",
		Problem:   "Kernel or C library falls short of MongoDB's requirements",
		Severity:  Warning,
		AppliesTo: []string{"mongodb"},
		Doc: `MongoDB needs Linux 2.6.36 or later and glibc 2.13 or later; newer 3.x+ kernels
also benchmark better for OLTP. MongoDB 8.0 and later bundle a TCMalloc that is
incompatible with Linux 6.19 through 7.0.13: mongod crashes there, and current
releases detect those kernels and refuse to start (fixed from kernel 7.0.14). The
kernel release comes from /proc/sys/kernel/osrelease, the C library version from
getconf GNU_LIBC_VERSION, the MongoDB version from the server.`,
		Refs: []string{
			"https://www.mongodb.com/docs/manual/administration/production-notes/",
			"https://www.mongodb.com/docs/manual/release-notes/8.0/",
		},
		Run: checkMongoMinimum,
	})
	Register(Check{
		ID:        "kernel.glibc_collation",
		Title:     "PostgreSQL indexes survive the glibc 2.28 collation change",
		Problem:   "PostgreSQL text indexes will need a REINDEX at an upgrade to glibc 2.28",
		Severity:  Info,
		AppliesTo: []string{"postgres"},
		Doc: `glibc 2.28 (Debian 10, Ubuntu 18.10, RHEL 8) changed the sort order of most
locales. A PostgreSQL index on text built under an older glibc is silently corrupt
under 2.28+ (lookups miss rows, unique constraints stop holding) until it is
REINDEXed. That happens when a data directory is carried across an OS upgrade or
restored from a physical backup of an older host. The host alone cannot tell when
the indexes were built: PostgreSQL 15+ records the collation version per database
(datcollversion), which the pg.collation_glibc check compares over a live
connection. This check reports the host side: the glibc version, and whether the
comparison is possible.`,
		Refs: []string{"https://wiki.postgresql.org/wiki/Locale_data_changes", "https://www.postgresql.org/docs/current/sql-alterdatabase.html"},
		Run:  checkGlibcCollation,
	})
}

// kernelAtLeast compares a kernel release ("6.18.44-fc-v657") with a
// minimum ("2.6.36").
func kernelAtLeast(release, min string) bool { return engine.VersionAtLeast(release, min) }

func checkMongoMinimum(f *facts.Facts) []Result {
	var out []Result
	k, g := f.System.Kernel, f.System.Glibc
	for _, in := range f.ByEngine(engine.MongoDB) {
		subj := in.Name()
		ev := []Evidence{EvReading("kernel", k), EvReading("glibc", g), Ev("MongoDB", hostOr(in.Version, "unknown"), in.VersionSource)}
		if !k.OK() {
			out = append(out, UnknownR(subj, "cannot read the kernel release: "+k.Err, ev...))
			continue
		}
		var bad []string
		if !kernelAtLeast(k.Value, "2.6.36") {
			bad = append(bad, fmt.Sprintf("kernel %s is older than 2.6.36, MongoDB's minimum", k.Value))
		}
		if g.OK() && !engine.VersionAtLeast(g.Value, "2.13") {
			bad = append(bad, fmt.Sprintf("glibc %s is older than 2.13, MongoDB's minimum", g.Value))
		}
		tcmalloc := kernelAtLeast(k.Value, "6.19") && !kernelAtLeast(k.Value, "7.0.14")
		switch {
		case tcmalloc && in.Version == "":
			if len(bad) == 0 {
				out = append(out, UnknownR(subj, fmt.Sprintf("Kernel %s is in the range 6.19 to 7.0.13 where MongoDB 8.0 and later crash (bundled TCMalloc), but the MongoDB version is unknown.", k.Value), ev...))
				continue
			}
		case tcmalloc && engine.VersionAtLeast(in.Version, "8.0"):
			bad = append(bad, fmt.Sprintf("MongoDB %s bundles a TCMalloc that crashes on kernels 6.19 through 7.0.13, and this kernel is %s: current releases refuse to start on it", in.Version, k.Value))
		}
		if !g.OK() && len(bad) == 0 {
			out = append(out, UnknownR(subj, "cannot read the C library version: "+g.Err, ev...))
			continue
		}
		if len(bad) > 0 {
			manual := "Upgrade the kernel"
			if tcmalloc {
				manual = "Boot a kernel before 6.19 or 7.0.14 and later"
			}
			out = append(out, FailR(subj, strings.Join(bad, "; ")+".", &fix.Fix{Summary: "Run MongoDB on a supported kernel and C library", Manual: manual + " (and the C library, through the distribution) to a release MongoDB supports.", HostOnly: f.System.Container != ""}, ev...))
			continue
		}
		out = append(out, PassR(subj, fmt.Sprintf("Kernel %s and glibc %s meet MongoDB's minimums (2.6.36, 2.13) and are outside the 6.19-7.0.13 range where MongoDB 8.0+ crashes.", k.Value, g.Value), ev...))
	}
	return out
}

func checkGlibcCollation(f *facts.Facts) []Result {
	var out []Result
	g := f.System.Glibc
	for _, in := range f.ByEngine(engine.Postgres) {
		subj := in.Name()
		ev := []Evidence{EvReading("glibc", g), Ev("PostgreSQL", hostOr(in.Version, "unknown"), in.VersionSource)}
		if !g.OK() {
			out = append(out, UnknownR(subj, "cannot read the C library version: "+g.Err+". A non-glibc C library (musl) has no locale collations to change.", ev...))
			continue
		}
		var libc []string
		recorded := false
		if in.Postgres != nil {
			for _, d := range in.Postgres.Databases {
				if d.Provider == "icu" || kernCCollation(d.Collate) {
					continue
				}
				libc = append(libc, d.Name+" ("+d.Collate+")")
				if d.RecordedVersion != "" {
					recorded = true
				}
			}
		}
		onlyC := in.Postgres != nil && len(in.Postgres.Databases) > 0 && len(libc) == 0
		if !onlyC && !engine.VersionAtLeast(g.Value, "2.28") {
			// Fine today, broken by the next OS upgrade: say so before it.
			fx := &fix.Fix{Summary: "Plan a REINDEX into the OS upgrade of " + subj,
				Manual: "Indexes built here sort with glibc " + g.Value + "'s collation. Upgrading this host (or restoring this data directory on a host) with glibc 2.28 or later changes the sort order of most non-C locales and silently corrupts those text indexes: make REINDEX (or a logical dump and restore) part of the upgrade, and check with amcheck's bt_index_check before going live."}
			out = append(out, FailR(subj, fmt.Sprintf("glibc %s predates the 2.28 collation change: the indexes are consistent now, but an OS upgrade to glibc 2.28 or later (or a physical copy of the data directory to such a host) makes text indexes with non-C collations sort wrongly until they are rebuilt.", g.Value), fx, ev...))
			continue
		}
		switch {
		case onlyC:
			out = append(out, PassR(subj, "Every database uses the C/POSIX collation or ICU: glibc's collation changes do not affect their indexes.", ev...))
		case recorded:
			ev = append(ev, Ev("databases with glibc collations", strings.Join(libc, ", "), "pg_database"))
			out = append(out, PassR(subj, fmt.Sprintf("glibc %s is 2.28 or later and PostgreSQL records the collation version of each database: pg.collation_glibc compares it with the running library and says which databases need a REINDEX.", g.Value), ev...))
		default:
			why := fmt.Sprintf("glibc %s is 2.28 or later. If this data directory was created under an older glibc (carried over an OS upgrade, or restored from a physical backup of an older host), its text indexes with non-C collations are silently corrupt until REINDEXed. ", g.Value)
			switch {
			case in.Major() > 0 && in.Major() < 15:
				why += fmt.Sprintf("PostgreSQL %s does not record the collation version per database, so nothing on this host shows when the indexes were built.", in.Version)
			case in.SettingsSource != "live":
				why += "PostgreSQL 15+ records the collation version per database, but dbhost had no live connection to read it" + kernLiveWhy(in) + "; pg.collation_glibc compares it when it can connect."
			default:
				why += "No database's collation version was read."
			}
			out = append(out, UnknownR(subj, why+" If in doubt, check with the amcheck extension (bt_index_check) or REINDEX.", ev...))
		}
	}
	return out
}

func kernCCollation(c string) bool {
	switch c {
	case "C", "POSIX", "C.UTF-8", "C.utf8", "ucs_basic":
		return true
	}
	return false
}

func kernLiveWhy(in *facts.Instance) string {
	if in.LiveErr == "" {
		return ""
	}
	return " (" + in.LiveErr + ")"
}
