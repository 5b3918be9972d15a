package mem

import "bytes"

// Counters are the size fields of /proc/PID/smaps and smaps_rollup, in
// bytes.
type Counters struct {
	Size           uint64
	KernelPageSize uint64
	Rss            uint64
	Pss            uint64
	PssAnon        uint64 // smaps_rollup only (Linux 5.8+)
	PssFile        uint64
	PssShmem       uint64
	SharedClean    uint64
	SharedDirty    uint64
	PrivateClean   uint64
	PrivateDirty   uint64
	Anonymous      uint64
	AnonHugePages  uint64
	SharedHugetlb  uint64
	PrivateHugetlb uint64
	Swap           uint64
	SwapPss        uint64
	Locked         uint64
	// HasPssAnon records that the Pss_Anon line was present (smaps_rollup
	// of Linux 5.8+); without it PssAnon is estimated from each mapping's
	// Anonymous, Rss and Pss, and PssFile and PssShmem are 0.
	HasPssAnon bool
}

// USS is the memory only this process maps: Private_Clean + Private_Dirty
// + Private_Hugetlb.
func (c *Counters) USS() uint64 { return c.PrivateClean + c.PrivateDirty + c.PrivateHugetlb }

// Header is the first line of a mapping in maps, smaps and smaps_rollup:
//
//	7f08387a6000-7f084163e000 rw-s 00000000 00:01 1030     /dev/zero (deleted)
type Header struct {
	Start, End   uint64
	Perms        [4]byte // "rw-s"
	Offset       uint64
	Major, Minor uint32
	Inode        uint64
	// Path aliases the buffer being parsed; copy it to keep it.
	Path []byte
}

// Shared reports the mapping's 's' flag (MAP_SHARED).
func (h *Header) Shared() bool { return h.Perms[3] == 's' }

// Mapping is one kept mapping of smaps with its own counters.
type Mapping struct {
	Start, End   uint64
	Perms        [4]byte
	Offset       uint64 // in the file, bytes
	Major, Minor uint32
	Inode        uint64
	Path         string
	Counters

	// present are the runs of pages present in the process's page tables,
	// as page offsets in the object [first, end); scanned says they were
	// read (PAGEMAP_SCAN), so the region's shares can be computed from
	// every mapper's pages.
	present [][2]uint64
	scanned bool
}

// ParseSmaps parses /proc/PID/smaps or smaps_rollup. The totals sum every
// mapping; the mappings for which keep returns true (nil keeps none) are
// also returned one by one. It works on the bytes as read, allocating only
// for kept mappings: a database host has processes with thousands of
// mappings, and only the few shared ones need a record. Lines that do not
// parse (a truncated read, a field this parser does not know) are skipped.
func ParseSmaps(b []byte, keep func(*Header) bool) (Counters, []Mapping) {
	var tot Counters
	var out []Mapping
	cur := -1 // index in out of the mapping being read, -1: none kept
	// The mapping being read, for the anonymous PSS estimate below.
	var vRss, vPss, vAnon uint64
	var estAnon float64
	flush := func() {
		switch {
		case vAnon == 0 || vRss == 0:
		case vAnon >= vRss:
			estAnon += float64(vPss)
		default:
			estAnon += float64(vPss) * float64(vAnon) / float64(vRss)
		}
		vRss, vPss, vAnon = 0, 0, 0
	}
	for len(b) > 0 {
		var ln []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			ln, b = b[:i], b[i+1:]
		} else {
			ln, b = b, nil
		}
		if len(ln) == 0 {
			continue
		}
		c := ln[0]
		if (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') {
			flush()
			cur = -1
			var h Header
			if !parseHeader(ln, &h) {
				continue
			}
			if keep != nil && keep(&h) {
				out = append(out, Mapping{Start: h.Start, End: h.End, Perms: h.Perms, Offset: h.Offset, Major: h.Major,
					Minor: h.Minor, Inode: h.Inode, Path: string(h.Path)})
				cur = len(out) - 1
			}
			continue
		}
		if c < 'A' || c > 'Z' {
			continue
		}
		i := bytes.IndexByte(ln, ':')
		if i <= 0 {
			continue
		}
		v, ok := parseKB(ln[i+1:])
		if !ok {
			continue
		}
		switch string(ln[:i]) {
		case "Rss":
			vRss = v
		case "Pss":
			vPss = v
		case "Anonymous":
			vAnon = v
		}
		setField(&tot, ln[:i], v, true)
		if cur >= 0 {
			setField(&out[cur].Counters, ln[:i], v, false)
		}
	}
	flush()
	if !tot.HasPssAnon {
		// smaps has no per-mapping Pss_Anon: it is the PSS of anonymous
		// mappings, plus, for a file mapping holding copy-on-write pages,
		// its PSS in proportion to its anonymous pages.
		tot.PssAnon = uint64(estAnon) &^ 1023 // whole KiB, like the other fields
	}
	return tot, out
}

// setField adds (sum) or sets one counter. KernelPageSize is a property of
// each mapping, not a sum: the totals keep the largest seen.
func setField(c *Counters, key []byte, v uint64, sum bool) {
	var p *uint64
	switch string(key) {
	case "Size":
		p = &c.Size
	case "Rss":
		p = &c.Rss
	case "Pss":
		p = &c.Pss
	case "Pss_Anon":
		p = &c.PssAnon
		c.HasPssAnon = true
	case "Pss_File":
		p = &c.PssFile
	case "Pss_Shmem":
		p = &c.PssShmem
	case "Shared_Clean":
		p = &c.SharedClean
	case "Shared_Dirty":
		p = &c.SharedDirty
	case "Private_Clean":
		p = &c.PrivateClean
	case "Private_Dirty":
		p = &c.PrivateDirty
	case "Anonymous":
		p = &c.Anonymous
	case "AnonHugePages":
		p = &c.AnonHugePages
	case "Shared_Hugetlb":
		p = &c.SharedHugetlb
	case "Private_Hugetlb":
		p = &c.PrivateHugetlb
	case "Swap":
		p = &c.Swap
	case "SwapPss":
		p = &c.SwapPss
	case "Locked":
		p = &c.Locked
	case "KernelPageSize":
		if v > c.KernelPageSize {
			c.KernelPageSize = v
		}
		return
	default:
		return
	}
	if sum {
		*p += v
	} else {
		*p = v
	}
}

// parseKB reads "   123 kB" into bytes. A value without the kB unit is not
// a size and is refused.
func parseKB(b []byte) (uint64, bool) {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	start := i
	var n uint64
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		if n > 1<<40 { // a PiB in kB: beyond any real size, refuse rather than wrap
			return 0, false
		}
		n = n*10 + uint64(b[i]-'0')
		i++
	}
	if i == start {
		return 0, false
	}
	rest := bytes.TrimSpace(b[i:])
	if string(rest) != "kB" {
		return 0, false
	}
	return n << 10, true
}

// parseHeader reads "start-end perms offset major:minor inode [path]".
func parseHeader(ln []byte, h *Header) bool {
	f, rest := field(ln)
	dash := bytes.IndexByte(f, '-')
	if dash <= 0 {
		return false
	}
	var ok1, ok2 bool
	h.Start, ok1 = parseHex(f[:dash])
	h.End, ok2 = parseHex(f[dash+1:])
	if !ok1 || !ok2 || h.End < h.Start {
		return false
	}
	f, rest = field(rest)
	if len(f) != 4 {
		return false
	}
	copy(h.Perms[:], f)
	f, rest = field(rest)
	var ok bool
	if h.Offset, ok = parseHex(f); !ok {
		return false
	}
	f, rest = field(rest)
	colon := bytes.IndexByte(f, ':')
	if colon <= 0 {
		return false
	}
	maj, ok1 := parseHex(f[:colon])
	min, ok2 := parseHex(f[colon+1:])
	if !ok1 || !ok2 || maj > 1<<32-1 || min > 1<<32-1 {
		return false
	}
	h.Major, h.Minor = uint32(maj), uint32(min)
	f, rest = field(rest)
	if h.Inode, ok = parseDec(f); !ok {
		return false
	}
	h.Path = bytes.TrimLeft(rest, " \t")
	return true
}

// field splits off the first space-separated field.
func field(b []byte) ([]byte, []byte) {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t') {
		i++
	}
	b = b[i:]
	j := 0
	for j < len(b) && b[j] != ' ' && b[j] != '\t' {
		j++
	}
	return b[:j], b[j:]
}

func parseHex(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 16 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		switch {
		case c >= '0' && c <= '9':
			n = n<<4 | uint64(c-'0')
		case c >= 'a' && c <= 'f':
			n = n<<4 | uint64(c-'a'+10)
		case c >= 'A' && c <= 'F':
			n = n<<4 | uint64(c-'A'+10)
		default:
			return 0, false
		}
	}
	return n, true
}

func parseDec(b []byte) (uint64, bool) {
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// ParseMaps calls fn for each mapping of /proc/PID/maps. Lines that do not
// parse are skipped.
func ParseMaps(b []byte, fn func(*Header)) {
	var h Header
	for len(b) > 0 {
		var ln []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			ln, b = b[:i], b[i+1:]
		} else {
			ln, b = b, nil
		}
		if parseHeader(ln, &h) {
			fn(&h)
		}
	}
}

// procStatus is what dbhost mem takes from /proc/PID/status: the process
// table entry and the kernel's own memory counters, in bytes, exact by type
// where smaps_rollup only splits PSS.
type procStatus struct {
	Name                                        string
	PPID, UID, GID                              int
	RssAnon, RssFile, RssShmem, VmSwap, Hugetlb uint64
	HasMM                                       bool // VmRSS present: not a kernel thread or zombie
	hasSplit                                    bool // RssAnon/RssFile/RssShmem present (Linux 4.5+)
	ok                                          bool
}

func parseStatus(b []byte) procStatus {
	var s procStatus
	for len(b) > 0 {
		var ln []byte
		if i := bytes.IndexByte(b, '\n'); i >= 0 {
			ln, b = b[:i], b[i+1:]
		} else {
			ln, b = b, nil
		}
		i := bytes.IndexByte(ln, ':')
		if i <= 0 {
			continue
		}
		val := ln[i+1:]
		var p *uint64
		switch string(ln[:i]) {
		case "Name":
			s.Name = string(bytes.TrimSpace(val))
			s.ok = true
			continue
		case "PPid":
			f, _ := field(val)
			if n, ok := parseDec(f); ok {
				s.PPID = int(n)
			}
			continue
		case "Uid", "Gid":
			// real, effective, saved, fs: the effective ID is what the
			// process runs as
			_, rest := field(val)
			f, _ := field(rest)
			if n, ok := parseDec(f); ok {
				if ln[0] == 'U' {
					s.UID = int(n)
				} else {
					s.GID = int(n)
				}
			}
			continue
		case "VmRSS":
			s.HasMM = true
			continue
		case "RssAnon":
			p = &s.RssAnon
			s.hasSplit = true
		case "RssFile":
			p = &s.RssFile
		case "RssShmem":
			p = &s.RssShmem
		case "VmSwap":
			p = &s.VmSwap
		case "HugetlbPages":
			p = &s.Hugetlb
		default:
			continue
		}
		if v, ok := parseKB(val); ok {
			*p = v
		}
	}
	return s
}
